"""The accuracy ledger: published serving measurements, one measured figure a row.

A ledger is a CSV file with exactly these columns (:data:`COLUMNS`)::

    id,source,engine,hardware,gpus,model,hf_config,weights,kv_cache,tensor,expert,
    isl,osl,concurrency,metric,statistic,value

* ``id``: a unique name for the row; ``source``: the URL the figure was copied from.
* ``engine``: the serving engine and its version as published (``"trtllm 0.5.0"``,
  ``"vllm 0.10.0 (ROCm 6.4.1)"``); its first word names the engine family
  (:data:`ENGINE_FAMILIES`), whose ``[efficiency] preset`` predicts the row.
* ``hardware`` and ``model``: preset names; ``hf_config`` (a path relative to the
  ledger file) replaces ``model`` when given. ``gpus``: cards in the deployment.
* ``weights`` and ``kv_cache``: number-format names of the quantisation lever
  (``fp8-e4m3``, ``int4-g128``, ...); empty means 16-bit.
* ``tensor`` and ``expert``: tensor- and expert-parallel degrees.
* ``isl``, ``osl``: input and output tokens per request; ``concurrency``: requests in
  flight (a static batch's size, or a benchmark client's concurrency).
* ``metric``: one of :data:`METRICS`; ``statistic``: one of :data:`STATISTICS`, as the
  source printed it; ``value``: the figure, in the metric's unit.

The shipped ledger is :data:`DEFAULT_LEDGER`; ``docs/accuracy.rst`` lists its sources.

>>> rows = read_ledger(DEFAULT_LEDGER)
>>> len(rows) >= 40 and rows[0].family in ENGINE_FAMILIES
True
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path

import attrs

from ..errors import InfermodelError, Problem, suggest

__all__ = ["COLUMNS", "DEFAULT_LEDGER", "ENGINE_FAMILIES", "ENGINE_OF_FAMILY", "METRICS", "STATISTICS",
           "LedgerRow", "read_ledger"]

COLUMNS = ("id", "source", "engine", "hardware", "gpus", "model", "hf_config", "weights",
           "kv_cache", "tensor", "expert", "isl", "osl", "concurrency", "metric", "statistic",
           "value")
#: What each metric measures, in the unit its name ends with.
METRICS = {
    "ttft_ms": "time to first token, milliseconds",
    "itl_ms": "inter-token latency, milliseconds",
    "tpot_ms": "time per output token after the first, milliseconds",
    "output_tokens_per_s": "output tokens per second of the whole system",
}
STATISTICS = ("mean", "median", "p99", "unspecified")
#: Engine families with an ``[efficiency] preset`` of the same name.
ENGINE_FAMILIES = ("vllm", "sglang", "trtllm")
#: The ``efficiency.engine`` each family runs as (its scheduler and memory defaults).
ENGINE_OF_FAMILY = {"vllm": "vllm", "sglang": "sglang", "trtllm": "tensorrt-llm"}
DEFAULT_LEDGER = Path(__file__).parent.parent / "data" / "ledger.csv"
#: Ledgers larger than this are refused (a ledger of published figures is small).
MAX_LEDGER_BYTES = 5_000_000
_INTEGER_COLUMNS = ("gpus", "tensor", "expert", "isl", "osl", "concurrency")


@attrs.frozen
class LedgerRow:
    """One published figure and the conditions it was measured under."""

    id: str
    source: str
    engine: str
    hardware: str
    gpus: int
    model: str
    hf_config: Path | None
    weights: str
    kv_cache: str
    tensor: int
    expert: int
    isl: int
    osl: int
    concurrency: int
    metric: str
    statistic: str
    value: float
    line: int = 0

    @property
    def family(self) -> str:
        """The engine family: the engine column's first word, lower case.

        >>> LedgerRow("a", "u", "vLLM 0.6.0", "h100-sxm", 1, "llama-3.1-8b", None, "", "", 1, 1,
        ...           128, 128, 1, "ttft_ms", "mean", 10.0).family
        'vllm'
        """
        return self.engine.split()[0].lower() if self.engine.split() else ""

    @property
    def table(self) -> tuple:
        """The published table (source and conditions but not the concurrency) a row
        belongs to: the unit held out together in cross-validation.
        """
        return (self.source, self.engine, self.hardware, self.gpus, self.model,
                str(self.hf_config), self.weights, self.kv_cache, self.tensor, self.isl, self.osl)


def _text(path: Path) -> str:
    from ..output import note_read, path_problem

    problem = path_problem(path)
    if problem is not None:
        raise InfermodelError(Problem(f"cannot read the ledger: {problem}"))
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise InfermodelError(Problem(f"cannot read the ledger: {exc.strerror or exc}",
                                      file=str(path))) from None
    if not path.is_file():
        raise InfermodelError(Problem("the ledger is not a regular file", file=str(path),
                                      expected="a CSV file"))
    if size > MAX_LEDGER_BYTES:
        raise InfermodelError(Problem(f"ledger is {size:,} bytes, larger than the "
                                      f"{MAX_LEDGER_BYTES:,}-byte limit", file=str(path)))
    note_read(path)  # no output of this run may replace it
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InfermodelError(Problem("ledger is not UTF-8 text", file=str(path),
                                      expected="a CSV file")) from None


def read_ledger(path: str | Path) -> list[LedgerRow]:
    """Read and check a ledger; every problem is reported at once with its line.

    Rows are checked for form only (types, allowed names, positive numbers); whether a
    preset exists is decided when the row is predicted, so an unknown preset makes
    that row unpredictable rather than the whole ledger unreadable.
    """
    path = Path(path)
    reader = csv.reader(io.StringIO(_text(path)))
    problems: list[Problem] = []
    try:
        header = next(reader)
    except StopIteration:
        raise InfermodelError(Problem("the ledger is empty", file=str(path),
                                      expected="a header line: " + ",".join(COLUMNS))) from None
    except csv.Error as exc:
        raise InfermodelError(Problem(f"not a CSV file: {exc}", file=str(path), line=1)) from None
    if tuple(h.strip() for h in header) != COLUMNS:
        missing = [c for c in COLUMNS if c not in header]
        extra = [h for h in header if h not in COLUMNS]
        detail = "; ".join(part for part in (
            "missing " + ", ".join(missing) if missing else "",
            "unknown " + ", ".join(extra) if extra else "") if part) or "columns out of order"
        raise InfermodelError(Problem(f"the ledger's header is not the ledger format ({detail})",
                                      file=str(path), line=1,
                                      expected="exactly: " + ",".join(COLUMNS)))
    rows: list[LedgerRow] = []
    seen: dict[str, int] = {}
    try:
        records = list(enumerate(reader, start=2))
    except csv.Error as exc:
        raise InfermodelError(Problem(f"not a CSV file: {exc}", file=str(path))) from None
    for line, record in records:
        if not record or all(not cell.strip() for cell in record):
            continue
        row = _parse_row(record, line, path, problems)
        if row is None:
            continue
        if row.id in seen:
            problems.append(Problem(f"id {row.id!r} is used again (first on line {seen[row.id]})",
                                    file=str(path), line=line, expected="a unique id"))
            continue
        seen[row.id] = line
        rows.append(row)
    if problems:
        raise InfermodelError(problems, heading=f"{len(problems)} problems in the ledger")
    if not rows:
        raise InfermodelError(Problem("the ledger has no rows", file=str(path)))
    return rows


def _parse_row(record: Sequence[str], line: int, path: Path,
               problems: list[Problem]) -> LedgerRow | None:
    def bad(column: str, message: str, expected: str | None = None, suggestion=None) -> None:
        problems.append(Problem(message, file=str(path), line=line, key=column,
                                expected=expected, suggestion=suggestion))

    if len(record) != len(COLUMNS):
        bad("row", f"{len(record)} fields, the header has {len(COLUMNS)}",
            expected=f"{len(COLUMNS)} comma-separated fields")
        return None
    cells = {name: cell.strip() for name, cell in zip(COLUMNS, record)}
    before = len(problems)
    numbers: dict[str, int] = {}
    for column in _INTEGER_COLUMNS:
        try:
            numbers[column] = int(cells[column])
            if numbers[column] < 1:
                raise ValueError
        except ValueError:
            bad(column, f"{column} = {cells[column]!r}", expected="a whole number of at least 1")
    try:
        value = float(cells["value"])
        if not value > 0 or value == float("inf"):
            raise ValueError
    except ValueError:
        bad("value", f"value = {cells['value']!r}", expected="a positive finite number")
        value = 0.0
    if cells["metric"] not in METRICS:
        bad("metric", f"metric = {cells['metric']!r}", expected="one of " + ", ".join(METRICS),
            suggestion=suggest(cells["metric"], METRICS))
    if cells["statistic"] not in STATISTICS:
        bad("statistic", f"statistic = {cells['statistic']!r}",
            expected="one of " + ", ".join(STATISTICS))
    for column in ("id", "source", "engine", "hardware"):
        if not cells[column]:
            bad(column, f"{column} is empty", expected=f"a {column}")
    if bool(cells["model"]) == bool(cells["hf_config"]):
        bad("model", "give exactly one of model and hf_config",
            expected="a model preset name, or a config.json path relative to the ledger")
    if len(problems) > before:
        return None
    hf = (path.parent / cells["hf_config"]) if cells["hf_config"] else None
    return LedgerRow(id=cells["id"], source=cells["source"], engine=cells["engine"],
                     hardware=cells["hardware"], model=cells["model"], hf_config=hf,
                     weights=cells["weights"], kv_cache=cells["kv_cache"],
                     metric=cells["metric"], statistic=cells["statistic"], value=value,
                     line=line, **numbers)
