"""A family's table read as a function for one set of categories (:func:`lookup`), and
the engine versions the tables hold.

Each family is a numpy function of named arguments in seconds (see :mod:`.grids`); the
families themselves, with their tables, columns and rooflines, are listed in
:mod:`.catalog`. Categories are matched exactly: a GEMM's ``dtype`` (``bfloat16``,
``fp8``, ``fp8_block``, ``nvfp4``, ``int4_wo``, ``int8_wo``, ``sq``), a cache's
``kv_dtype`` (``bfloat16``, ``fp8``), a MoE layer's ``dtype`` and routing
``distribution``, a latent attention module's ``gemm`` dtype, a collective's wire
``dtype``.

Conventions read from the tables themselves (and checked against physics in the
tests): latencies are milliseconds per call of one layer's kernel (the all-to-all
tables: microseconds); a generation row's positions attended are ``isl + step`` (the
latent attention module tables: ``step``); a collective's ``message_size`` counts
16-bit elements (an 8-GPU all-reduce of 2^29 elements in 4.0 ms is NCCL's ~470 GB/s bus
bandwidth on NVLink; read as bytes it would be half that).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import Problem
from .catalog import FAMILIES
from .grids import Lookup
from .lanes import LANED, choose, default_kernel
from .records import Family, Unavailable
from .source import (
    TablesUnavailable,
    card,
    engine_versions,
    folders,
    read,
    resolve,
    table_field,
    version_key,
)


def describe_version(system: str, engine: str) -> str:
    versions = engine_versions(system, engine)
    return ", ".join(versions) if versions else "none"


#: Columns a table may lack, read by a derived argument that knows what their absence
#: means (no ``window_size``: full attention).
OPTIONAL_COLUMNS = ("window_size",)
#: The share of a table's rows that must time something for it to serve (the rest,
#: timed at zero or less, are left out).
TIMED_SHARE = 0.5
#: MoE backends a lookup may be restricted to (its ``moe_backend`` category: the engine's
#: MoE runner as it was launched), and the words of the tables' kernel names that are
#: theirs, each a run of the name's ``_``-separated parts: vLLM's ``vllm_fused_moe`` and
#: SGLang's ``sglang_fused_moe_triton`` are Triton's fused MoE, ``..._triton_...`` the
#: other Triton kernels (OpenAI's triton_kernels for MXFP4 experts, a TensorRT-LLM
#: ``moe_torch_flow_triton_...`` row), ``..._flashinfer_trtllm_...`` FlashInfer's
#: TensorRT-LLM kernels, ``..._flashinfer_cutlass_...`` its CUTLASS ones,
#: ``..._marlin_...`` Marlin's. A name with the words of two backends is neither's; most
#: TensorRT-LLM rows name none (``moe_torch_flow``).
MOE_BACKENDS = {"triton": ("fused_moe", "triton"), "flashinfer_trtllm": ("flashinfer_trtllm",),
                "flashinfer_cutlass": ("flashinfer_cutlass",), "marlin": ("marlin",)}


def backend_of(kernel: str) -> str:
    """The MoE backend a table's kernel name says (:data:`MOE_BACKENDS`), or ``""``.

    >>> [backend_of(k) for k in ("vllm_fused_moe", "sglang_flashinfer_trtllm_moe",
    ...                          "vllm_unquantizedfusedmoe_flashinfer_cutlass_flashinferexperts",
    ...                          "moe_torch_flow")]
    ['triton', 'flashinfer_trtllm', 'flashinfer_cutlass', '']
    """
    parts = kernel.split("_")

    def has(word: str) -> bool:
        run = word.split("_")
        return any(parts[i:i + len(run)] == run for i in range(len(parts) - len(run) + 1))

    found = {name for name, words in MOE_BACKENDS.items() if any(has(w) for w in words)}
    return found.pop() if len(found) == 1 else ""


@functools.lru_cache(maxsize=256)
def _lookup(system: str, engine: str, version: str, family: str,
            categories: tuple[tuple[str, str], ...]) -> Lookup | Unavailable:
    spec = FAMILIES[family]
    if spec.engine is not None:
        held = folders(system, spec.directory, spec.engine)
        if not held:
            return Unavailable(f"no {spec.directory}/{spec.engine} tables on {system}")
        engine, version = spec.engine, held[-1].version
    folder = resolve(system, spec.directory, engine, version)
    if folder is not None:
        own = _from(folder, family, engine, categories)
        if isinstance(own, Lookup):
            return own
    # No table of the family at or below the version serves these categories (a release
    # the tables hold for other families, older than this one's first measurement, or
    # one whose folder lacks the table): the oldest later release's that does stands in,
    # the lookup saying so, rather than the roofline.
    later = [f for f in folders(system, spec.directory, engine)
             if version_key(f.version) > version_key(version)]
    newest: Unavailable | None = None
    for candidate in later:
        found = _from(candidate, family, engine, categories, later_than=version)
        if isinstance(found, Lookup):
            return found
        if newest is None or spec.table in candidate.tables:
            # Why the newest release that has the table does not serve them says most
            # (which categories it holds).
            newest = found
    if newest is not None:
        return Unavailable(f"no {spec.directory} table of {engine} {version} or older serves "
                           f"these kernels, nor a later one: {newest.reason}")
    if folder is not None:
        return own
    return Unavailable(f"no {spec.directory} tables measured under {engine} {version} or "
                       f"older on {system}")


def _from(folder, family: str, engine: str, categories: tuple[tuple[str, str], ...],
          later_than: str = "") -> Lookup | Unavailable:
    """The lookup of ``family``'s table in ``folder``, the configurations it lacks
    inherited from older folders (``later_than``: the earlier release it stands in for).
    """
    spec, system = FAMILIES[family], folder.system
    wanted = dict(categories)
    backend = wanted.pop("moe_backend", None)
    equal = {spec.categories[k]: v for k, v in wanted.items() if k in spec.categories}
    equal |= dict(spec.fixed)
    columns = sorted({*(c for a, c in spec.columns.items() if a not in spec.derived),
                      spec.latency, "kernel_source", *spec.reads})
    # A version's folder may hold only the categories re-measured for it (a newer
    # TensorRT-LLM folder with one MoE dtype): the rows come from the newest folder at or
    # below the version that holds them, as the package's own resolver inherits them.
    # It may also hold only some configurations of a category (TensorRT-LLM 1.3.0rc23's
    # MXFP4 MoE rows on B200 re-measure other models' shapes than 1.3.0rc20's): every
    # configuration it lacks is inherited from the newest older folder that measured it,
    # rather than scaled from another configuration by the roofline.
    older = [f for f in folders(system, spec.directory, engine)
             if version_key(f.version) <= version_key(folder.version)]
    first: Unavailable | None = None
    parts: list[tuple[Any, dict[str, np.ndarray]]] = []
    seen: set[tuple[float, ...]] = set()
    inherited: dict[tuple[float, ...], str] = {}
    for position, candidate in enumerate(reversed(older)):
        try:
            found = _rows(candidate, spec, columns, equal, backend)
        except (TablesUnavailable, KeyError):
            if not parts:
                raise
            continue  # an older folder that cannot be read adds nothing to a newer one
        if isinstance(found, Unavailable):
            first = first or found
            continue
        named = _named(spec, found)
        if not parts and not any(spec.table in f.tables
                                 for f in older[:len(older) - 1 - position]):
            parts.append((candidate, named))  # no older folder holds the table: no merge
            break
        configs, fresh, keep = _unseen(named, spec.configs, seen)
        if keep.any():
            new = [c for c, f in zip(configs, fresh.tolist(), strict=True) if f]
            if parts:  # an older folder: record where its new configurations come from
                inherited.update(dict.fromkeys(new, candidate.label(spec.table)))
            parts.append((candidate, named if keep.all()
                          else {k: v[keep] for k, v in named.items()}))
            seen.update(new)
    if not parts:
        assert first is not None
        return first
    folder = parts[0][0]
    named = (parts[0][1] if len(parts) == 1
             else {k: np.concatenate([p[k] for _, p in parts]) for k in parts[0][1]})
    label = folder.label(spec.table)
    if inherited:
        label += (", and for the configurations it does not measure "
                  + ", ".join(f.version for f, _ in parts[1:]) + "'s")
    lanes, rule = _lanes(spec, named, system, engine, folder.version)
    roofline, describe = spec.roofline(wanted, card(system))
    shown = {k: v for k, v in equal.items() if k not in spec.fixed}
    shown |= {k: (" or ".join(v) if isinstance(v, tuple) else v) for k, v in spec.fixed.items()}
    if backend is not None:
        shown["moe_backend"] = backend
    kinds = named.pop("kernel_source")
    return Lookup(name=family, arguments=spec.arguments, configs=spec.configs, curve=spec.curve,
                  table=label, categories=shown,
                  kernel_sources=sorted(set(kinds.tolist())), row_kernels=kinds, rows=named,
                  roofline=roofline, describe_roofline=describe, unit_note=spec.unit_note,
                  blocks=spec.blocks, inherited=inherited, version=folder.version,
                  later_than=later_than, lanes=lanes, lane_rule=rule,
                  stand_ins=spec.stand_ins, stand_in_rule=spec.stand_in_rule)


def _unseen(named: Mapping[str, np.ndarray], configs: tuple[str, ...],
            seen: set[tuple[float, ...]]
            ) -> tuple[list[tuple[float, ...]], np.ndarray, np.ndarray]:
    """A folder's distinct configurations (tuples of floats), which of them are not in
    ``seen``, and which of its rows hold one of those: each distinct configuration is
    looked up once, not each row (a table holds tens of thousands of rows and a few
    hundred configurations).
    """
    count = len(named["latency"])
    if not configs:
        fresh = np.array([() not in seen])
        return [()], fresh, np.full(count, fresh[0], dtype=bool)
    table = np.stack([np.asarray(named[a], dtype=float) for a in configs], axis=1)
    # Each row's configuration as one integer (the columns' ranks, mixed radix, renumbered
    # where the radix would overflow): sorting integers is far quicker than sorting rows.
    codes, size = np.zeros(count, dtype=np.int64), 1
    for column in table.T:
        values, rank = np.unique(column, return_inverse=True)
        if size * len(values) >= 2 ** 62:
            codes = np.asarray(np.unique(codes, return_inverse=True)[1]).reshape(-1)
            size = count
        codes = codes * len(values) + np.asarray(rank, dtype=np.int64).reshape(-1)
        size *= max(len(values), 1)
    _, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
    tuples = [tuple(row) for row in table[first].tolist()]
    fresh = np.array([c not in seen for c in tuples], dtype=bool)
    return tuples, fresh, fresh[np.asarray(inverse).reshape(-1)]


def _lanes(spec: Family, named: dict[str, np.ndarray], system: str, engine: str,
           version: str) -> tuple[dict[tuple[float, ...], str], str]:
    """Where the tables name the engine's default attention kernel for the table's release
    and card (:mod:`.lanes`) and the table timed it, keep per configuration the rows of
    that kernel, else of the one that measured the most configurations; (configuration ->
    kernel, the rule as a derivation states it). Tables the rule does not reach are left as
    they are (the fastest row of each cell).
    """
    if spec.name not in LANED or len(set(named["kernel_source"].tolist())) < 2:
        return {}, ""
    default, entry = default_kernel(system, engine, version)
    if default is None or default not in set(named["kernel_source"].tolist()):
        return {}, ""
    configs = (np.stack([named[a] for a in spec.configs], axis=1) if spec.configs
               else np.zeros((len(named["latency"]), 0)))
    keep, picked, order = choose(configs, named["kernel_source"], default)
    for key in list(named):
        named[key] = named[key][keep]
    rest = [k for k in order if k != default]
    rule = (f"per configuration {default}, the engine's default ({entry}, the tables' "
            "attention_lane_defaults.yaml), where it measured it, else "
            + (", ".join(rest) + " in that order (the most configurations first)" if rest
               else "nothing"))
    return picked, rule


def _named(spec: Family, rows: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A table's rows by the family's argument names (derived ones computed), latency in
    seconds, and each row's kernel source.
    """
    named = {arg: rows[col].astype(float) for arg, col in spec.columns.items()
             if arg not in spec.derived}
    for arg, make in spec.derived.items():
        named[arg] = np.asarray(make(rows), dtype=float)
    named["latency"] = rows[spec.latency].astype(float) * spec.seconds
    named["kernel_source"] = np.asarray(rows["kernel_source"])
    return named


def _rows(folder, spec: Family, columns: list[str], equal: Mapping[str, Any],
          backend: str | None = None) -> Mapping[str, np.ndarray] | Unavailable:
    """One folder's rows of the family's table for the categories (and only the kernels
    of ``backend``, :data:`MOE_BACKENDS`), or why it has none.
    """
    if spec.table not in folder.tables:
        return Unavailable(f"{folder.system}/{folder.family}/{folder.engine}/{folder.version} has "
                           f"no {spec.table} table")
    rows = read(folder, spec.table, columns, equal)
    if backend is not None and len(rows[spec.latency]):
        kernels = np.asarray(rows["kernel_source"]).astype(str)
        keep = np.array([backend_of(k) == backend for k in kernels.tolist()], dtype=bool)
        if not keep.any():
            return Unavailable(f"{folder.label(spec.table)} has no {backend} kernel where "
                               + " and ".join(f"{k} = {v}" for k, v in equal.items())
                               + f" (its kernels: {', '.join(sorted(set(kernels.tolist())))})")
        rows = {k: np.asarray(v)[keep] for k, v in rows.items()}
    absent = [c for c in columns if c not in rows and c not in OPTIONAL_COLUMNS]
    if absent:
        return Unavailable(f"{folder.label(spec.table)} has no column {', '.join(absent)}")
    if len(rows[spec.latency]):
        # A time of zero or less (or none) measures nothing: such rows are left out. A
        # table most of whose rows are so serves no one — SGLang's activation-scale
        # tables time 1,622 of H200's 1,628 rows at zero, and a curve through the other
        # six would be their noise.
        latency = np.asarray(rows[spec.latency], dtype=float)
        timed = np.isfinite(latency) & (latency > 0)
        if timed.all():
            return rows
        if timed.sum() >= TIMED_SHARE * len(timed):
            return {k: np.asarray(v)[timed] for k, v in rows.items()}
        return Unavailable(f"{folder.label(spec.table)} times {len(timed) - int(timed.sum()):,} "
                           f"of its {len(timed):,} rows where "
                           + " and ".join(f"{k} = {v}" for k, v in equal.items())
                           + " at zero or less: it measures nothing")
    held = {}
    for column in equal:  # equal maps each category's column to the value asked for
        values = read(folder, spec.table, (column,))[column]
        held[column] = sorted({str(v) for v in values})
    return Unavailable(f"{folder.label(spec.table)} has no rows where "
                       + " and ".join(f"{k} = {v}" for k, v in equal.items())
                       + " (it holds " + "; ".join(f"{k}: {', '.join(v)}"
                                                  for k, v in held.items()) + ")")


def lookup(system: str, engine: str, version: str, family: str,
           **categories: str) -> Lookup | Unavailable:
    """The measured lookup of ``family`` on ``system`` under ``engine`` at ``version``
    (its tables filled backward from older versions; where none of the version or older
    serves, the oldest later one's, :attr:`Lookup.later_than` saying so), for these
    categories; or why there is none. Loaded once per process. Beside a family's own
    categories, ``moe_backend`` (:data:`MOE_BACKENDS`) keeps only the rows of that
    backend's kernels, from the newest folder that measured them.

    >>> gemm = lookup("h200_sxm", "vllm", "0.24.0", "gemm", dtype="fp8")  # doctest: +SKIP
    >>> gemm(32.0, 4096.0, 4096.0)          # seconds, m = 32 tokens by a 4096×4096 weight  # doctest: +SKIP
    """
    if family not in FAMILIES:
        raise KeyError(family)
    if categories.get("moe_backend", "triton") not in MOE_BACKENDS:
        raise ValueError(f"no MoE backend {categories['moe_backend']!r} (the tables' kernels "
                         f"name {', '.join(MOE_BACKENDS)})")
    return _lookup(system, engine, version, family, tuple(sorted(categories.items())))


def check_version(system: str, engine: str, version: str | None) -> str:
    """``version`` if the tables of ``system`` hold it for ``engine``, or the newest they
    hold when None; a :class:`~infermodel.errors.Problem`-carrying error listing the
    versions held otherwise.
    """
    held = engine_versions(system, engine)
    if not held:
        raise TablesUnavailable(Problem(
            f"the measured kernel tables hold nothing measured under {engine} on {system}",
            expected="an engine the tables of this card hold: " + (", ".join(
                e for e in ("vllm", "sglang", "trtllm") if engine_versions(system, e))
                or "none")))
    if version is None:
        return held[-1]
    if version not in held:
        from ..errors import suggest

        raise TablesUnavailable(Problem(
            f"the measured kernel tables of {system} hold no {engine} version {version!r}",
            expected=f"one of the versions they hold: {', '.join(held)}",
            suggestion=suggest(version, held)))
    return version


def collection_field(system: str, engine: str, version: str, family: str,
                     field: str, *, exact: bool = False) -> str | None:
    """What the ``collection_meta.yaml`` of the folder that serves ``family`` under
    ``engine`` at ``version`` on ``system`` states of its table as ``field`` (how its rows
    were collected: ``norm_dispatch``), or None (no such folder, or no such statement).
    ``exact``: only that version's own folder, not an older one it falls back to.

    >>> collection_field("b200_sxm", "vllm", "0.24.0", "latent_generation", "norm_dispatch")  # doctest: +SKIP
    'vllm_c_eager_surrogate'
    """
    spec = FAMILIES[family]
    folder = resolve(system, spec.directory, engine, version)
    if folder is None or (exact and folder.version != version):
        return None
    return table_field(folder.path, spec.table, field)


def architecture(system: str) -> int | None:
    """A card's compute capability major (its datasheet's ``sm_version`` // 10: 9 for
    Hopper, 10 for B200, B300 and their Grace pairings), or None where it states none.
    (Ampere's 8.0 and Ada's 8.9 share a major.)

    >>> architecture("b300_sxm"), architecture("gb200"), architecture("h200_sxm")  # doctest: +SKIP
    (10, 10, 9)
    """
    sm = card(system).get("sm_version")
    return int(sm) // 10 if sm else None


__all__ = ["FAMILIES", "MOE_BACKENDS", "Family", "Unavailable", "architecture", "backend_of",
           "check_version", "collection_field", "lookup"]
