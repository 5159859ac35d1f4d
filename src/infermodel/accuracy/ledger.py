"""The accuracy ledger: published serving measurements, one measured figure a row.

A ledger is a CSV file whose header starts with exactly these columns
(:data:`COLUMNS`)::

    id,source,engine,hardware,gpus,model,hf_config,weights,kv_cache,tensor,expert,
    isl,osl,concurrency,metric,statistic,value

and may go on with any of the optional columns :data:`OPTIONAL_COLUMNS`, in any order
(an empty cell, or a missing column, takes the default given below):

    source_group,load,request_rate,requests,attention_dp,lengths

* ``id``: a unique name for the row; ``source``: the URL the figure was copied from.
* ``engine``: the serving engine and its version as published (``"trtllm 0.5.0"``,
  ``"vllm 0.10.0 (ROCm 6.4.1)"``); its first word names the engine, and with the
  version its family (:data:`ENGINE_FAMILIES`, :data:`GENERATIONS`: a vLLM before 0.8
  ran the V0 engine, family ``vllm-v0``; a row that states no version counts as its
  engine's current generation), whose ``[efficiency] preset`` predicts the row.
* ``hardware`` and ``model``: preset names; ``hf_config`` (a path relative to the
  ledger file) replaces ``model`` when given. ``gpus``: cards in the deployment.
* ``weights`` and ``kv_cache``: number-format names of the quantisation lever
  (``fp8-e4m3``, ``int4-g128``, ...); empty means the checkpoint's own format
  (16-bit, or the model preset's ``weight_format``). 8-bit float weights run 8-bit float
  activations, ``int8`` weights 8-bit integer ones; any other weights, 16-bit activations
  (an NVFP4 row is predicted as W4A16: the CSV format states no activation format).
* ``tensor`` and ``expert``: tensor- and expert-parallel degrees.
* ``isl``, ``osl``: input and output tokens per request; ``concurrency``: requests in
  flight (a closed loop's clients, or every request of an offline run, see ``load``).
* ``metric``: one of :data:`METRICS`; ``statistic``: one of :data:`STATISTICS`, as the
  source printed it; ``value``: the figure, in the metric's unit.
* ``source_group`` (default: the ``source``): the independent publisher or benchmark
  suite the row belongs to; rows of one group are one body of evidence (one vendor's
  documentation, one team's study), and are held out together when a fit is validated
  on sources it did not see (:attr:`LedgerRow.group`).
* ``load`` (default ``closed``): how the benchmark sent its requests, one of
  :data:`LOADS`.
* ``request_rate``: requests per second of a ``poisson`` load (empty otherwise).
* ``requests``: requests the benchmark sent in all, where the source states it (empty:
  not stated); an ``offline`` run's ``concurrency`` is its number of requests.
* ``attention_dp`` (default 1): data-parallel attention groups (SGLang's
  ``--enable-dp-attention``, TensorRT-LLM's ``enable_attention_dp``: attention and its
  cache split by request over that many groups of cards, the experts shared).
* ``lengths`` (default ``fixed``): ``fixed`` when every request had ``isl`` input and
  ``osl`` output tokens; ``mean`` when the lengths varied (a dataset such as ShareGPT,
  random lengths, outputs stopped by end-of-sequence) and ``isl``, ``osl`` are the run's
  printed token totals over its requests, rounded (:data:`LENGTHS`).

The shipped ledger is :data:`DEFAULT_LEDGER`; ``docs/accuracy.rst`` lists its sources.

>>> rows = read_ledger(DEFAULT_LEDGER)
>>> len(rows) >= 40 and rows[0].family in ENGINE_FAMILIES
True
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from pathlib import Path

import attrs

from ..errors import InfermodelError, Problem, suggest

__all__ = ["COLUMNS", "DEFAULT_LEDGER", "ENGINE_FAMILIES", "ENGINE_OF_FAMILY", "GENERATIONS",
           "HANDOFFS", "LENGTHS", "LOADS", "METRICS", "OPTIONAL_COLUMNS", "STATISTICS", "LedgerRow", "Pool", "Pools",
           "engine_of_family", "engine_release", "engine_version", "read_ledger", "split_preset"]

COLUMNS = ("id", "source", "engine", "hardware", "gpus", "model", "hf_config", "weights",
           "kv_cache", "tensor", "expert", "isl", "osl", "concurrency", "metric", "statistic",
           "value")
#: Columns a ledger may add after :data:`COLUMNS`, each with its default.
OPTIONAL_COLUMNS = {"source_group": "", "load": "closed", "request_rate": "", "requests": "",
                    "attention_dp": "1", "lengths": "fixed"}
#: What ``isl`` and ``osl`` are.
LENGTHS = {
    "fixed": "every request had isl input and osl output tokens",
    "mean": "the lengths varied; isl and osl are the run's token totals over its requests",
}
#: What each metric measures, in the unit its name ends with.
METRICS = {
    "ttft_ms": "time to first token, milliseconds",
    "itl_ms": "inter-token latency, milliseconds",
    "tpot_ms": "time per output token after the first, milliseconds",
    "output_tokens_per_s": "output tokens per second of the whole system",
    "output_tokens_per_s_per_gpu": "output tokens per second of the whole system, divided by "
                                   "its gpus",
    "total_tokens_per_s": "input and output tokens per second of the whole system",
}
STATISTICS = ("mean", "median", "p90", "p95", "p99", "unspecified")
#: How a benchmark sends its requests.
LOADS = {
    "closed": "concurrency clients, each sending its next request as soon as its previous "
              "one ends (vllm bench serve --max-concurrency, AIPerf and genai-perf's "
              "concurrency mode)",
    "offline": "all concurrency requests submitted at once and none after (a static batch, "
               "vLLM's benchmark_throughput and benchmark_latency, trtllm-bench throughput, "
               "a serving benchmark at an infinite request rate with no concurrency cap)",
    "poisson": "requests arriving at random at request_rate per second, requests in all "
               "(a serving benchmark's --request-rate); concurrency caps the requests in "
               "flight (the requests when there is no cap)",
}
#: Engine families with an ``[efficiency] preset`` of the same name.
ENGINE_FAMILIES = ("vllm", "vllm-v0", "sglang", "trtllm")
#: The ``efficiency.engine`` each family runs as (its scheduler and memory defaults).
ENGINE_OF_FAMILY = {"vllm": "vllm", "vllm-v0": "vllm-v0", "sglang": "sglang",
                    "trtllm": "tensorrt-llm"}
#: Earlier generations of an engine, each with its own family: (engine, first version of
#: the next generation, the earlier generation's family). vLLM 0.8 made the V1 engine
#: (another scheduler, host loop and defaults) the default; before it, runs used V0.
GENERATIONS = (("vllm", (0, 8), "vllm-v0"),)
_VERSION = re.compile(r"(?<![\w.])(\d+)\.(\d+)")
_RELEASE = re.compile(r"(?<![\w.])v?(\d+\.\d+(?:\.\d+)?)")
DEFAULT_LEDGER = Path(__file__).parent.parent / "data" / "ledger.csv"
#: Ledgers larger than this are refused (a ledger of published figures is small).
MAX_LEDGER_BYTES = 5_000_000
_INTEGER_COLUMNS = ("gpus", "tensor", "expert", "isl", "osl", "concurrency", "attention_dp")


def engine_version(engine: str) -> tuple[int, int] | None:
    """(major, minor) of the first version an engine column states, None without one (a
    wrapper's version, such as NIM's, where the column names only that: a generation rule
    for such an engine must read the column itself).

    >>> engine_version("vllm 0.7.3.dev138+g21f6ca217 (ROCm 6.3)"), engine_version("trtllm (NIM)")
    ((0, 7), None)
    """
    words = engine.split(maxsplit=1)
    found = _VERSION.search(words[1]) if len(words) > 1 else None
    return (int(found.group(1)), int(found.group(2))) if found else None


def engine_release(engine: str) -> str | None:
    """The first version an engine column states, to its third number ("0.4.3"), None
    without one: what a row's scenario states as ``efficiency.engine_version``, whose
    defaults changed with a release (SGLang's memory heuristic, 0.5.3).

    >>> engine_release("sglang 0.4.3.post2"), engine_release("sglang v0.5.9 (ROCm)")
    ('0.4.3', '0.5.9')
    >>> engine_release("sglang (version not stated)") is None
    True
    """
    words = engine.split(maxsplit=1)
    found = _RELEASE.search(words[1]) if len(words) > 1 else None
    return found.group(1) if found else None


def engine_of_family(family: str) -> str:
    """The engine a family is a generation of (``vllm-v0``: ``vllm``), else the family:
    the ``engine`` its interval groups are kept under (a generation's preset takes the
    version's shift; how far a new source sits from it is the engine's).
    """
    return next((engine for engine, _, earlier in GENERATIONS if earlier == family), family)


def split_preset(name: str) -> tuple[str, str]:
    """(engine family, card) of an efficiency preset's name: a family, or a family's
    refinement on one card (``FAMILY-CARD``).

    >>> split_preset("vllm-v0-mi300x"), split_preset("sglang"), split_preset("trtllm-h200")
    (('vllm-v0', 'mi300x'), ('sglang', ''), ('trtllm', 'h200'))
    """
    for family in sorted(ENGINE_FAMILIES, key=len, reverse=True):
        if name == family or name.startswith(family + "-"):
            return family, name[len(family) + 1:]
    family, _, card = name.partition("-")
    return family, card


@attrs.frozen
class Pool:
    """One pool of a disaggregated deployment: ``workers`` identical servers, each on
    ``tensor × pipeline × attention_dp`` cards.

    ``batch`` is the most sequences one attention rank runs at once (a prefill worker's
    prompts per iteration, a decode worker's running sequences), as the measurement's
    configuration set it. ``dispatch`` is how its MoE layers reach the tokens of other
    attention ranks (the parallelism lever's ``expert_dispatch``).
    """

    workers: int
    batch: int
    tensor: int
    pipeline: int = 1
    attention_dp: int = 1
    expert: int = 1
    dispatch: str = "all_gather"

    @property
    def gpus(self) -> int:
        """Cards of one worker."""
        return self.tensor * self.pipeline * self.attention_dp


#: How a disaggregated deployment's router hands a request from its prefill server to a
#: decode server (:attr:`Pools.handoff`).
HANDOFFS = ("concurrent", "sequential")


@attrs.frozen
class Pools:
    """The prefill and decode pools of a disaggregated deployment.

    ``handoff`` is how its router reaches the decode server: ``"concurrent"``, with the
    request sent to both servers at once, the decode server's handling of it overlapping
    the prefill (SGLang's disaggregation, whose decode server must hold the request
    before the prefill server sends its cache); ``"sequential"``, with the request sent
    to a decode server once its prefill server has answered, so that a second hop — the
    decode worker taking the request, pulling its cache and scheduling it into its running
    batch, the first token's way back — follows the prefill (Dynamo's prefill router,
    TensorRT-LLM's and vLLM's disaggregation proxies).
    """

    prefill: Pool
    decode: Pool
    handoff: str = attrs.field(default="concurrent",
                               validator=attrs.validators.in_(HANDOFFS))


@attrs.frozen
class LedgerRow:
    """One published figure and the conditions it was measured under.

    The keyword fields after ``line`` are the CSV ledger's optional columns
    (:data:`OPTIONAL_COLUMNS`) and layouts the CSV format cannot state (other ledgers'
    readers set them): ``pipeline`` stages, the routed experts' own format
    (``expert_weights``; empty: ``weights``), disaggregated ``pools`` (None: one
    aggregated server on ``gpus`` cards), the engine version's kernel tables
    (``engine_version``; empty: the newest), a display name for a model read from a
    config (``model_label``), why the reader could not express the row (``unexpressed``),
    the benchmark client (``client``), the activations' format (``activations``) and a
    request's way through the server (``request_time``, where the reader states it).

    ``attention_dp`` is the data-parallel attention ranks, each with its own sequences,
    sharing the experts. A CSV ledger's ``tensor`` counts the cards attention is split or
    shared over (``tensor = gpus``); other readers give the degree per attention rank
    (``gpus = tensor × pipeline × attention_dp``). :func:`.row_scenarios.layout` reads both.
    """

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
    source_group: str = attrs.field(default="", kw_only=True)
    load: str = attrs.field(default="closed", kw_only=True)
    request_rate: float | None = attrs.field(default=None, kw_only=True)
    requests: int | None = attrs.field(default=None, kw_only=True)
    attention_dp: int = attrs.field(default=1, kw_only=True)
    lengths: str = attrs.field(default="fixed", kw_only=True)
    pipeline: int = attrs.field(default=1, kw_only=True)
    expert_weights: str = attrs.field(default="", kw_only=True)
    #: Groups the run's checkpoint keeps in 16 bits whatever ``weights`` says (the
    #: ``model.unquantized`` groups: ``"attention"``, ``"latent"``, ``"mixers"``); empty:
    #: every block linear in ``weights``.
    unquantized: str = attrs.field(default="", kw_only=True)
    pools: Pools | None = attrs.field(default=None, kw_only=True)
    engine_version: str = attrs.field(default="", kw_only=True)
    model_label: str = attrs.field(default="", kw_only=True)
    #: Why the ledger's reader could not express the row (empty: it could).
    unexpressed: str = attrs.field(default="", kw_only=True)
    #: The benchmark client that drove a concurrency row (a name of
    #: :data:`.row_simulation.CLIENTS`; empty: fixed lengths, warm-up excluded).
    client: str = attrs.field(default="", kw_only=True)
    #: The activations' format where the reader states it (``"fp4"`` for an NVFP4
    #: checkpoint's W4A4 kernels); empty: 8-bit with 8-bit float or integer weights,
    #: else 16-bit (what a CSV ledger's ``weights`` implies).
    activations: str = attrs.field(default="", kw_only=True)
    #: A request's way through the server (seconds per request: API server, tokenisation,
    #: the engine's queues, the first token's return) where the reader states it for its
    #: deployments; under measured kernels the row's ``efficiency.request_overhead``.
    #: None: not stated.
    request_time: float | None = attrs.field(default=None, kw_only=True)
    #: Decode iterations between the engine scheduler's reads of new requests where the
    #: reader states a deployment's setting (SGLang's ``--scheduler-recv-interval``); the
    #: row's ``efficiency.recv_interval`` when above 1 (1: every iteration, the default).
    recv_interval: int = attrs.field(default=1, kw_only=True)
    #: The engine's memory share and scheduler limits its launch states, where the
    #: reader knows them: ``(memory_fraction, prefill_chunk, max_sequences,
    #: graph_max_batch)``, None for the engine's default (the row scenario's
    #: ``[efficiency]`` fields of those names).
    launch: tuple | None = attrs.field(default=None, kw_only=True)
    #: Iterations a new prompt may wait for more before its prefill where the reader
    #: states a deployment's setting (TensorRT-LLM's ``batch_wait_timeout_iters``); the
    #: row's ``efficiency.batch_wait_iterations`` when above 0.
    batch_wait: int = attrs.field(default=0, kw_only=True)
    #: TensorRT-LLM's attention-DP balance where the reader states a deployment's setting
    #: (``attention_dp_config`` with ``enable_balance``): its ``timeout_iters`` and
    #: ``batching_wait_iters``, the row's ``efficiency.dp_balance_timeout`` and
    #: ``dp_balance_batching``. None: no balancing (the engine's default).
    dp_balance: tuple[int, int] | None = attrs.field(default=None, kw_only=True)
    #: What the engine multiplies MXFP4 experts with where the reader states a
    #: deployment's setting against the engine's default (``"mxfp8"``: vLLM's
    #: ``VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8``); the row's
    #: ``efficiency.mxfp4_activations``. Empty: the engine's own.
    mxfp4_activations: str = attrs.field(default="", kw_only=True)
    #: The MoE runner the engine was launched with where the reader states a deployment's
    #: setting against the engine's default (``"triton"``); the row's
    #: ``efficiency.moe_backend``. Empty: the engine's own.
    moe_backend: str = attrs.field(default="", kw_only=True)
    #: How the engine multiplies 32-bit matrices where the reader states a deployment's
    #: setting against the engine's default (``"tf32"``: vLLM's
    #: ``VLLM_FLOAT32_MATMUL_PRECISION=high``); the row's ``efficiency.fp32_matmul``.
    #: Empty: the engine's own.
    fp32_matmul: str = attrs.field(default="", kw_only=True)

    @property
    def mode(self) -> str:
        """``"aggregated"`` (prefill and decode on one server) or ``"disaggregated"``."""
        return "aggregated" if self.pools is None else "disaggregated"

    @property
    def model_name(self) -> str:
        """The model as a reader names it: the label, the preset, or the config's file."""
        if self.model_label:
            return self.model_label
        return self.model or (self.hf_config.name if self.hf_config is not None else "")

    @property
    def engine_name(self) -> str:
        """The engine: the engine column's first word, lower case (the measured kernel
        tables' name for it).
        """
        return self.engine.split()[0].lower() if self.engine.split() else ""

    @property
    def family(self) -> str:
        """The engine family whose preset predicts the row: the engine, or its earlier
        generation's family where the version is older than :data:`GENERATIONS` says.

        >>> row = LedgerRow("a", "u", "vLLM 0.6.0", "h100-sxm", 1, "llama-3.1-8b", None, "", "",
        ...                 1, 1, 128, 128, 1, "ttft_ms", "mean", 10.0)
        >>> row.family, attrs.evolve(row, engine="vllm 0.10.0 (ROCm 6.4.1)").family
        ('vllm-v0', 'vllm')
        >>> attrs.evolve(row, engine="vllm (version not stated)").family
        'vllm'
        """
        name = self.engine_name
        version = engine_version(self.engine)
        for engine, first, family in GENERATIONS:
            if name == engine and version is not None and version < first:
                return family
        return name

    @property
    def table(self) -> tuple:
        """The published table (source and conditions but not the concurrency or request
        rate) a row belongs to: the unit held out together in cross-validation.
        """
        return (self.source, self.engine, self.hardware, self.gpus, self.model,
                str(self.hf_config), self.weights, self.kv_cache, self.tensor, self.isl, self.osl,
                self.load, self.attention_dp, self.lengths, self.pipeline, self.expert_weights,
                self.unquantized, self.pools)

    @property
    def group(self) -> str:
        """The independent source the row belongs to: its ``source_group``, else its
        ``source``.

        >>> LedgerRow("a", "https://x.org/t", "vllm", "h100-sxm", 1, "m", None, "", "", 1, 1,
        ...           8, 8, 1, "ttft_ms", "mean", 10.0).group
        'https://x.org/t'
        """
        return self.source_group or self.source


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
    columns = _header_columns([h.strip() for h in header], path)
    rows: list[LedgerRow] = []
    seen: dict[str, int] = {}
    try:
        records = list(enumerate(reader, start=2))
    except csv.Error as exc:
        raise InfermodelError(Problem(f"not a CSV file: {exc}", file=str(path))) from None
    for line, record in records:
        if not record or all(not cell.strip() for cell in record):
            continue
        row = _parse_row(record, columns, line, path, problems)
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


def _header_columns(header: list[str], path: Path) -> tuple[str, ...]:
    """The header's columns: :data:`COLUMNS` in order, then optional ones, each once."""
    names = tuple(header)
    extra = names[len(COLUMNS):]
    unknown = [h for h in extra if h not in OPTIONAL_COLUMNS]
    twice = sorted({h for h in extra if extra.count(h) > 1})
    if names[:len(COLUMNS)] == COLUMNS and not unknown and not twice:
        return names
    missing = [c for c in COLUMNS if c not in names]
    unknown = [h for h in names if h not in COLUMNS and h not in OPTIONAL_COLUMNS]
    detail = "; ".join(part for part in (
        "missing " + ", ".join(missing) if missing else "",
        "unknown " + ", ".join(unknown) if unknown else "",
        "repeated " + ", ".join(twice) if twice else "") if part) or "columns out of order"
    suggestion = suggest(unknown[0], (*COLUMNS, *OPTIONAL_COLUMNS)) if unknown else None
    raise InfermodelError(Problem(
        f"the ledger's header is not the ledger format ({detail})", file=str(path), line=1,
        expected="exactly: " + ",".join(COLUMNS) + ", then any of the optional columns "
                 + ", ".join(OPTIONAL_COLUMNS), suggestion=suggestion))


def _parse_row(record: Sequence[str], columns: Sequence[str], line: int, path: Path,
               problems: list[Problem]) -> LedgerRow | None:
    def bad(column: str, message: str, expected: str | None = None, suggestion=None) -> None:
        problems.append(Problem(message, file=str(path), line=line, key=column,
                                expected=expected, suggestion=suggestion))

    if len(record) != len(columns):
        bad("row", f"{len(record)} fields, the header has {len(columns)}",
            expected=f"{len(columns)} comma-separated fields")
        return None
    cells = dict(OPTIONAL_COLUMNS)
    cells.update({name: cell.strip() for name, cell in zip(columns, record)})
    for name, default in OPTIONAL_COLUMNS.items():
        cells[name] = cells[name] or default
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
    load = _check_load(cells, numbers, bad)
    if cells["lengths"] not in LENGTHS:
        bad("lengths", f"lengths = {cells['lengths']!r}", expected="one of " + ", ".join(LENGTHS),
            suggestion=suggest(cells["lengths"], LENGTHS))
    if len(problems) > before:
        return None
    hf = (path.parent / cells["hf_config"]) if cells["hf_config"] else None
    attention_dp = numbers.pop("attention_dp")
    return LedgerRow(id=cells["id"], source=cells["source"], engine=cells["engine"],
                     hardware=cells["hardware"], model=cells["model"], hf_config=hf,
                     weights=cells["weights"], kv_cache=cells["kv_cache"],
                     metric=cells["metric"], statistic=cells["statistic"], value=value,
                     line=line, source_group=cells["source_group"], load=load[0],
                     request_rate=load[1], requests=load[2], attention_dp=attention_dp,
                     lengths=cells["lengths"], gpus=numbers["gpus"], tensor=numbers["tensor"],
                     expert=numbers["expert"], isl=numbers["isl"], osl=numbers["osl"],
                     concurrency=numbers["concurrency"])


def _check_load(cells: dict[str, str], numbers: dict[str, int], bad
                ) -> tuple[str, float | None, int | None]:
    """The row's load, request rate and request count, each checked against the others."""
    load = cells["load"]
    if load not in LOADS:
        bad("load", f"load = {load!r}", expected="one of " + ", ".join(LOADS),
            suggestion=suggest(load, LOADS))
    rate: float | None = None
    if cells["request_rate"]:
        try:
            rate = float(cells["request_rate"])
            if not 0 < rate < float("inf"):
                raise ValueError
        except ValueError:
            bad("request_rate", f"request_rate = {cells['request_rate']!r}",
                expected="a positive finite number of requests per second")
    requests: int | None = None
    if cells["requests"]:
        try:
            requests = int(cells["requests"])
            if requests < 1:
                raise ValueError
        except ValueError:
            bad("requests", f"requests = {cells['requests']!r}",
                expected="a whole number of at least 1, or empty when not stated")
    concurrency = numbers.get("concurrency")
    if load == "poisson" and (not cells["request_rate"] or not cells["requests"]):
        bad("request_rate", "a poisson load needs its request_rate and its requests",
            expected="requests per second, and the requests sent in all")
    if load != "poisson" and cells["request_rate"]:
        bad("request_rate", f"request_rate is given with load = {load!r}",
            expected="a request rate only with load = poisson")
    if load == "offline" and requests is not None and concurrency is not None \
            and requests != concurrency:
        bad("requests", f"an offline run's requests ({requests}) differ from its concurrency "
                        f"({concurrency})",
            expected="concurrency = requests: every request of an offline run is in flight")
    if load == "poisson" and requests is not None and concurrency is not None \
            and concurrency > requests:
        bad("concurrency", f"concurrency {concurrency} is more than the {requests} requests",
            expected="at most the requests sent (the requests when there is no cap)")
    attention_dp, gpus = numbers.get("attention_dp"), numbers.get("gpus")
    if attention_dp is not None and gpus is not None and gpus % attention_dp:
        bad("attention_dp", f"attention_dp = {attention_dp} does not divide gpus = {gpus}",
            expected="a divisor of gpus")
    return load, rate, requests
