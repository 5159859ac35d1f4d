"""The one adapter to the installed measured-kernel tables: where they are, which folders
hold what, whether their schema is one this module reads, and their columns as plain
numpy arrays.

The tables ship in NVIDIA's ``aiconfigurator-core`` wheel (Apache-2.0), installed with
``pip install "infermodel[kernels]"``. They are found from the installed package's
location (:func:`importlib.util.find_spec`: the package itself is never imported, nor its
compiled library) and read where they lie; nothing is copied. The layout::

    aiconfigurator_core/systems/<system>.yaml                  datasheet peaks of a card
    aiconfigurator_core/systems/data/<system>/<family>/<engine>/<version>/
        collection_meta.yaml                                   schema_version: 1
        <table>.parquet                                        one measured latency a row

The package's own documentation calls its Python-side table layout unstable, so each
folder's ``schema_version`` is checked before a table of it is read, and a version this
module does not know is refused with one message. Reading is lazy: a folder listing is
an index of names only, and a table is read when a scenario first needs it, only the
columns asked for and only the rows of the categories asked for (pyarrow's column
projection and row filters), then kept for the rest of the process.

Everything above this module sees plain records: :class:`Folder` (where a table is and
what it is) and dictionaries of numpy arrays.

>>> folder = folders("h200_sxm", "gemm", "vllm")[-1]          # doctest: +SKIP
>>> folder.version, folder.tables                              # doctest: +SKIP
('0.24.0', ('gemm_perf',))
>>> read(folder, "gemm_perf", ("m", "n", "k", "latency"), {"gemm_dtype": "fp8"})  # doctest: +SKIP
"""

from __future__ import annotations

import functools
import importlib.util
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ..errors import InfermodelError, Problem

#: The distribution that ships the tables, its import name, and the series we read.
DISTRIBUTION = "aiconfigurator-core"
PACKAGE = "aiconfigurator_core"
SERIES = "0.12"
#: What a user installs to get them.
INSTALL = 'pip install "infermodel[kernels]"'
#: ``schema_version`` values of ``collection_meta.yaml`` this module reads. Version 2
#: adds provenance (collector references, replaced rows) to the same table layout.
SCHEMAS = (1, 2)

_SCHEMA_LINE = re.compile(r"^schema_version:\s*(\S+)\s*$", re.MULTILINE)
_VERSION_TOKEN = re.compile(r"\d+|[A-Za-z]+")
#: Pre- and post-release markers, ordered as releases are (dev < a < b < rc < final < post).
_MARKERS = {"dev": -4, "a": -3, "alpha": -3, "b": -2, "beta": -2, "rc": -1, "post": 1}


class TablesUnavailable(InfermodelError):
    """The measured-kernel tables are not installed (or a table cannot be read)."""


@attrs.frozen
class Folder:
    """One ``<system>/<family>/<engine>/<version>`` folder of tables."""

    system: str
    family: str
    engine: str
    version: str
    path: Path = attrs.field(eq=False, repr=False)
    #: Table names it holds (file names without ``.parquet``), sorted.
    tables: tuple[str, ...]

    def label(self, table: str) -> str:
        """``h200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet``: the table as a derivation
        names it.
        """
        return f"{self.system}/{self.family}/{self.engine}/{self.version}/{table}.parquet"


def version_key(version: str) -> tuple:
    """A sort key for engine versions as the tables write them (``0.5.6.post2``,
    ``1.3.0rc20``, ``0.1.dev19262``): numbers compare as numbers, a release candidate
    comes before its release and a post-release after it.

    >>> sorted(["1.3.0", "1.3.0rc20", "1.2.0rc5", "1.3.0rc3"], key=version_key)
    ['1.2.0rc5', '1.3.0rc3', '1.3.0rc20', '1.3.0']
    >>> version_key("0.5.6.post2") > version_key("0.5.6") > version_key("0.5.6rc1")
    True
    """
    key: list[int] = []
    for token in _VERSION_TOKEN.findall(version):
        if token.isdigit():
            key.append(int(token))
        else:
            key.append(_MARKERS.get(token.lower(), -5))
    # A final release sorts after its pre-releases: pad with a zero marker.
    return (*key, 0) if key and not any(t < 0 for t in key) else tuple(key)


@functools.cache
def root() -> Path:
    """The installed package's ``systems`` folder, or one message saying how to install it.

    >>> root().name  # doctest: +SKIP
    'systems'
    """
    missing = [name for name in (PACKAGE, "pyarrow") if importlib.util.find_spec(name) is None]
    if missing:
        raise TablesUnavailable(Problem(
            f"measured kernels (efficiency.kernels = \"measured\") read NVIDIA's measured kernel "
            f"tables, and {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not "
            "installed", expected=f"the optional extra: {INSTALL}"))
    spec = importlib.util.find_spec(PACKAGE)
    assert spec is not None and spec.submodule_search_locations
    systems = Path(next(iter(spec.submodule_search_locations))) / "systems"
    if not (systems / "data").is_dir():
        raise TablesUnavailable(Problem(
            f"the installed {DISTRIBUTION} has no table folder ({systems / 'data'})",
            expected=f"{DISTRIBUTION} {SERIES}.* as the extra installs it: {INSTALL}"))
    return systems


@functools.cache
def systems() -> tuple[str, ...]:
    """The systems (cards) the installed tables cover, sorted.

    >>> "h200_sxm" in systems()  # doctest: +SKIP
    True
    """
    return tuple(sorted(p.name for p in (root() / "data").iterdir() if p.is_dir()))


@functools.cache
def _index(system: str) -> Mapping[tuple[str, str], tuple[Folder, ...]]:
    """(family, engine) -> its folders, oldest version first (names only: nothing read)."""
    base = root() / "data" / system
    out: dict[tuple[str, str], list[Folder]] = {}
    if not base.is_dir():
        return {}
    for family in sorted(p for p in base.iterdir() if p.is_dir()):
        for engine in sorted(p for p in family.iterdir() if p.is_dir()):
            for version in engine.iterdir():
                if not version.is_dir():
                    continue
                tables = tuple(sorted(p.stem for p in version.glob("*.parquet")))
                if tables:
                    out.setdefault((family.name, engine.name), []).append(
                        Folder(system, family.name, engine.name, version.name, version, tables))
    return {key: tuple(sorted(found, key=lambda f: version_key(f.version)))
            for key, found in out.items()}


def folders(system: str, family: str, engine: str) -> tuple[Folder, ...]:
    """The folders of one family of tables measured under one engine on one system,
    oldest version first.
    """
    return _index(system).get((family, engine), ())


def engine_versions(system: str, engine: str) -> tuple[str, ...]:
    """Every version of ``engine`` any table family of ``system`` was measured under,
    oldest first.

    >>> engine_versions("h200_sxm", "vllm")[-1]  # doctest: +SKIP
    '0.24.0'
    """
    found = {f.version for (_family, e), group in _index(system).items() if e == engine
             for f in group}
    return tuple(sorted(found, key=version_key))


def resolve(system: str, family: str, engine: str, version: str) -> Folder | None:
    """The folder of ``family`` that serves ``engine`` at ``version``: that version's
    own, or else the newest older one (tables fill backward, as the package's own
    version slots do); None when the family has none that old (a lookup then stands a
    later release's table in, saying so: :func:`.families.lookup`).
    """
    wanted = version_key(version)
    chosen = None
    for folder in folders(system, family, engine):
        if version_key(folder.version) <= wanted:
            chosen = folder
    return chosen


@functools.cache
def schema_version(path: Path) -> int | str | None:
    """The ``schema_version`` a folder's ``collection_meta.yaml`` states (None without one).

    Read with a line pattern: the key is a top-level scalar, and no YAML library is
    needed for it.
    """
    meta = path / "collection_meta.yaml"
    if not meta.is_file():
        return None
    found = _SCHEMA_LINE.search(meta.read_text(encoding="utf-8", errors="replace"))
    if found is None:
        return None
    text = found.group(1).strip("'\"")
    return int(text) if text.isdigit() else text


@functools.cache
def table_field(path: Path, table: str, field: str) -> str | None:
    r"""A scalar ``field`` the folder's ``collection_meta.yaml`` states for one of its tables
    (under ``tables:`` → ``<table>:``; ``norm_dispatch``, how the rows ran the norms), or
    None where it states none.

    Read with line patterns, as :func:`schema_version`: a table's block is the indented
    lines after its name, comments among them.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "collection_meta.yaml").write_text(
    ...     "schema_version: 1\ntables:\n  a_perf:\n    status: complete\n"
    ...     "    # a note\n    norm_dispatch: fused\n  b_perf:\n    status: complete\n")
    >>> table_field(folder, "a_perf", "norm_dispatch"), table_field(folder, "b_perf", "norm_dispatch")
    ('fused', None)
    """
    meta = path / "collection_meta.yaml"
    if not meta.is_file():
        return None
    text = meta.read_text(encoding="utf-8", errors="replace")
    block = re.search(rf"^  {re.escape(table)}:[ \t]*\n((?:(?:    |[ \t]*(?:#|$)).*\n?)*)",
                      text, re.MULTILINE)
    if block is None:
        return None
    found = re.search(rf"^    {re.escape(field)}:[ \t]*([^\s#]+)", block.group(1), re.MULTILINE)
    return found.group(1).strip("'\"") if found else None


def check_schema(folder: Folder) -> None:
    """Refuse a folder whose schema this module does not know, with one message."""
    found = schema_version(folder.path)
    if found not in SCHEMAS:
        stated = "no schema_version" if found is None else f"schema_version {found}"
        raise TablesUnavailable(Problem(
            f"the measured kernel table folder {folder.system}/{folder.family}/{folder.engine}/"
            f"{folder.version} has {stated}, which this version of infermodel does not read",
            expected="schema_version " + " or ".join(map(str, SCHEMAS)) + f" ({DISTRIBUTION} "
                     f"{SERIES}.*)",
            suggestion=f"install the series infermodel is built against: {INSTALL}"))


def read(folder: Folder, table: str, columns: Sequence[str],
         equal: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Columns of one table as numpy arrays, only the rows whose columns in ``equal`` hold
    the given values (a tuple: any of them); read once per process.

    A column the table does not have is left out of the answer (an older table without a
    newer column: A100's attention tables have no ``window_size``); filtering on one keeps
    no row.
    """
    wanted = tuple(sorted({*columns, *(equal or {})}))
    data = _read(folder, table, wanted)
    if not equal:
        return {name: data[name] for name in columns if name in data}
    import numpy as np

    keep = np.ones(len(next(iter(data.values()))) if data else 0, dtype=bool)
    for name, value in equal.items():
        if name not in data:
            keep[:] = False
            continue
        column = data[name]
        if isinstance(value, tuple):
            keep &= np.isin(column, [str(v) if column.dtype == object else v for v in value])
        else:
            keep &= column == (str(value) if column.dtype == object else value)
    return {name: data[name][keep] for name in columns if name in data}


@functools.lru_cache(maxsize=64)
def _read(folder: Folder, table: str, columns: tuple[str, ...]) -> dict[str, Any]:
    """Whole columns of one table, read once (a scenario's lookups filter them)."""
    check_schema(folder)
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = folder.path / f"{table}.parquet"
    try:
        schema = pq.read_schema(path)
        wanted = [n for n in columns if n in schema.names]
        # Text columns are read dictionary-encoded: their codes reach numpy without the
        # pandas bridge that a plain text column's conversion imports (most of a second).
        text = [n for n in wanted if n in schema.names
                and (pa.types.is_string(schema.field(n).type)
                     or pa.types.is_large_string(schema.field(n).type))]
        data = pq.ParquetFile(path, read_dictionary=text).read(columns=wanted)
    except (OSError, ValueError, KeyError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise TablesUnavailable(Problem(
            f"cannot read the measured kernel table {folder.label(table)}: "
            f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
            expected=f"the columns {', '.join(columns)}",
            suggestion=f"reinstall the extra: {INSTALL}")) from None

    def column(name: str) -> np.ndarray:
        values = data.column(name).combine_chunks()
        if name in text:
            words = np.array([str(w) for w in values.dictionary.to_pylist()], dtype=object)
            if values.null_count:  # rare: no text column of these tables has gaps
                return np.array(["" if w is None else str(w) for w in values.to_pylist()],
                                dtype=object)
            return words[_numbers(values.indices)]
        return _numbers(values)

    return {name: column(name) for name in wanted}


def _numbers(values: Any) -> Any:
    """A numeric pyarrow array as a numpy array, read from its buffer.

    pyarrow's own ``to_numpy`` imports pandas (most of a second, cold) even for a plain
    integer column; the data buffer needs nothing. Nulls (none in these tables' numeric
    columns) become NaN.
    """
    import numpy as np
    import pyarrow as pa

    kind = values.type
    dtype: Any
    if pa.types.is_floating(kind):
        dtype = {16: np.float16, 32: np.float32, 64: np.float64}[kind.bit_width]
    elif pa.types.is_integer(kind):
        dtype = np.dtype(f"{'i' if pa.types.is_signed_integer(kind) else 'u'}{kind.bit_width // 8}")
    elif pa.types.is_boolean(kind):
        return np.array(values.to_pylist(), dtype=bool)
    else:
        raise ValueError(f"column of type {kind} is not numeric")
    array = np.frombuffer(values.buffers()[1], dtype=dtype)[values.offset: values.offset + len(values)]
    if values.null_count:
        mask = np.array([v is None for v in values.to_pylist()], dtype=bool)
        array = np.where(mask, np.nan, array.astype(float))
    return array


@functools.cache
def model_config(name: str) -> Mapping[str, Any]:
    """The published ``config.json`` of a model the tables were measured for, as the package
    ships it (``model_configs/<org>--<name>_config.json``; an empty mapping when it ships
    none). The module tables name their model (``deepseek-ai/DeepSeek-V3``); its widths are
    what the rows' shapes were.

    >>> model_config("deepseek-ai/DeepSeek-V3")["kv_lora_rank"]  # doctest: +SKIP
    512
    """
    import json

    path = root().parent / "model_configs" / f"{name.replace('/', '--')}_config.json"
    if not path.is_file():
        return {}
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


@functools.cache
def card(system: str) -> Mapping[str, float]:
    """A system's datasheet figures from its YAML file, in base units: ``mem_bw``,
    ``bfloat16_tc_flops``, ``fp8_tc_flops``, ``fp4_tc_flops``, ``int8_tc_flops``,
    ``intra_node_bw``, ``inter_node_bw``, ``p2p_latency``, ``num_gpus_per_node``,
    ``num_gpus_per_rack`` (those it states).
    """
    path = root() / f"{system}.yaml"
    out: dict[str, float] = {}
    if not path.is_file():
        return out
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        found = re.match(r"^\s+([a-z0-9_]+):\s*([0-9.eE+-]+)\s*(#.*)?$", line)
        if found:
            try:
                out.setdefault(found.group(1), float(found.group(2)))
            except ValueError:
                continue
    return out


__all__ = ["DISTRIBUTION", "INSTALL", "PACKAGE", "SCHEMAS", "SERIES", "Folder",
           "TablesUnavailable", "card", "check_schema", "engine_versions", "folders", "model_config",
           "read",
           "resolve", "root", "schema_version", "systems", "table_field", "version_key"]
