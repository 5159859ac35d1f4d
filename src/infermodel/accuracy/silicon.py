"""The silicon ledger: measured end-to-end serving points shipped with the measured
kernel tables (``infermodel[kernels]``), read from the installed package at run time.

NVIDIA's ``aiconfigurator-core`` package keeps ``systems/silicon_sample.csv``: 5,221
measured points of time to first token and time per output token, for 15 models on
six systems (H100 SXM, H200 SXM, B200 SXM, B300 SXM, GB200, GB300) under TensorRT-LLM,
SGLang and vLLM, aggregated (one server) and disaggregated (prefill and decode pools).
Each point becomes two ledger rows (``ttft_ms`` and ``tpot_ms``, statistic
``unspecified``, read as the mean) whose id is the file's id with ``-ttft`` or
``-tpot`` appended. Nothing is copied into this repository: the file and the models'
published configs (``model_configs/``, read with :mod:`infermodel.hf_config`) are read
from the installed package.

How the file's columns are read (each rule checked against the file itself):

* **Model**: ``model_path`` names a published config in the package; the few whose
  config the package ships under another name are in :data:`MODEL_CONFIGS` with the
  reason (an instruct or re-quantised checkpoint of the same network). The row's own
  formats replace the checkpoint's (:data:`WEIGHT_FORMATS`).
* **Hardware**: ``system`` → a hardware preset (:data:`SYSTEMS`).
* **Formats**: ``gemm_quant_mode`` is the block linears' format, ``moe_quant_mode`` the
  routed experts'; 8-bit float formats run with 8-bit activations and NVFP4 with 4-bit
  ones, as those kernels do; the KV cache is 8-bit float for a quantised row and 16-bit
  otherwise (the package's own default for these checkpoints). A 4-bit point of a model
  whose published checkpoint has MXFP4 experts (gpt-oss) keeps that checkpoint's formats
  (MXFP4 experts, 16-bit attention and cache): the file labels those runs ``nvfp4``.
  So does a point in the format of a checkpoint that quantises its routed experts alone
  (Kimi-K2.5's INT4: attention, shared experts and the dense layer in bf16), which the
  file labels INT4 throughout. A point labelled per-tensor ``fp8`` of a checkpoint
  published in 128 × 128-block FP8 (DeepSeek-R1/V3, MiniMax-M2.5, Qwen3-235B-A22B-FP8)
  runs those blocks: an engine loads a checkpoint's scales as they are.
* **Concurrency**: the ``silicon_concurrency`` the source column records (the benchmark
  client's), else ``batch_size × attention_dp_size``.
* **Layout** and **disaggregated pools**: :mod:`.silicon_layouts` (one server's cards
  from the tensor, pipeline, attention-data and expert columns; a disaggregated point's
  prefill and decode pools, how their MoE layers dispatch tokens, and how their router
  hands a request from one to the other).
* **Client**: the gap-analysis runs (971 points whose source names an
  ``aic-auto-gap-analysis`` file, at 38 shapes) are read by their engine
  (:data:`BURST_ENGINES`). SGLang's (158 points) as one burst of fixed-length requests,
  every client starting at once (:data:`.row_simulation.BURST`): their mean first-token
  time grows in proportion to the clients and does not follow the output length while
  the cache holds the batch (Qwen3-32B on two H100s, 1,024-token prompts: 0.84, 2.5 and
  4.4 s at 16, 64 and 128 clients, the same at 128, 256 and 512 output tokens; the slope
  of log TTFT on log clients, per deployment and shape, has a median of 0.82 over its 27
  series). TensorRT-LLM's (522) and vLLM's (168) grow more slowly (median slopes 0.34
  over 101 series and 0.43 over 24) than a burst's queue and faster than a steady closed
  loop's wait, and are read as a few fixed-length requests per client with the first
  round measured (:data:`.row_simulation.GAP`: its number of rounds, which the file does
  not give, estimated on TensorRT-LLM's points and checked on vLLM's, held out). Every
  other point is at one of InferenceMAX's three shapes (1k/1k, 1k/8k,
  8k/1k tokens) and is read as its benchmark client's run
  (:data:`.row_simulation.INFERENCEMAX`: ten prompts per client, all measured, lengths
  uniform on 0.8–1 × nominal).
* **A request's way through the server** (API server, tokenisation, the engine's queues,
  the first token's return), which no kernel table times: under measured kernels each
  row states its engine's time per request (:data:`REQUEST_PATH`: 30 ms vLLM, 70 ms
  TensorRT-LLM, 257 ms SGLang), estimated on the gap-analysis points and checked on the
  InferenceMAX ones, held out. It is this file's deployments' figure, not a default of
  the measured kernels: SGLang's own published benchmarks miss about 85 ms at one client.

* **What the benchmark scripts set**: the settings InferenceMAX's scripts launch a
  server with that the file does not record — a scheduler that holds new requests, and
  speculative runs — are read from the point's source, model and system
  (:mod:`.script_settings`).

Rows the levers cannot express keep a reason (:attr:`LedgerRow.unexpressed`), so the
report lists them rather than dropping them.

>>> SYSTEMS["h200_sxm"], WEIGHT_FORMATS["fp8_block"]
('h200', 'fp8-b128')
"""

from __future__ import annotations

import csv
import importlib.util
import io
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ..errors import InfermodelError, Problem
from .ledger import LedgerRow, Pool, Pools
from .script_pools import pool_layout
from .script_settings import (
    batch_wait,
    dp_balance,
    fp32_matmul,
    kv_cache,
    moe_backend,
    mxfp4_activations,
    recv_interval,
    sglang_launch,
    speculative_run,
)
from .silicon_layouts import RACKS, Layout, handoff, pool_dispatch, read_layout, read_pool
from .silicon_layouts import number as _number
from .silicon_layouts import whole as _whole

__all__ = [
    "BURST_ENGINES",
    "COLUMNS",
    "EXTRA",
    "MODEL_CONFIGS",
    "RACKS",
    "SILICON",
    "SYSTEMS",
    "WEIGHT_FORMATS",
    "package_root",
    "pool_dispatch",
    "read_layout",
    "read_silicon",
    "sample_points",
    "silicon_path",
]

#: The ``--ledger`` name of this ledger.
SILICON = "silicon"
#: What to install for it.
EXTRA = 'pip install "infermodel[kernels]"'
PACKAGE = "aiconfigurator_core"
SAMPLE_FILE = ("systems", "silicon_sample.csv")
CONFIG_DIR = "model_configs"
#: Largest silicon file read (the 0.12 file is about 1.6 MB).
MAX_BYTES = 20_000_000

#: The file's header, as the 0.12 series writes it; another header is refused.
COLUMNS = (
    "id", "silicon_data_source", "backend", "backend_version", "model_path", "system",
    "precision", "mode", "isl", "osl", "gemm_quant_mode", "moe_quant_mode", "batch_size",
    "tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size",
    "prefill_batch_size", "prefill_num_workers", "prefill_tp_size", "prefill_pp_size",
    "prefill_attention_dp_size", "prefill_moe_tp_size", "prefill_moe_ep_size",
    "decode_batch_size", "decode_num_workers", "decode_tp_size", "decode_pp_size",
    "decode_attention_dp_size", "decode_moe_tp_size", "decode_moe_ep_size",
    "silicon_ttft_ms", "silicon_tpot_ms")

#: The tables' system names → hardware presets.
SYSTEMS = {
    "h100_sxm": "h100-sxm",
    "h200_sxm": "h200",
    "b200_sxm": "b200",
    "b300_sxm": "b300",
    "gb200": "gb200",
    "gb300": "gb300",
}

#: Models whose published config the package ships under another name: the config
#: used, and why it is the same network.
MODEL_CONFIGS = {
    "meta-llama/Llama-3.1-70B": ("meta-llama/Meta-Llama-3.1-70B",
                                 "the model's earlier repository name"),
    "meta-llama/Llama-3.1-8B-Instruct": ("meta-llama/Meta-Llama-3.1-8B",
                                         "instruction tuning keeps the base model's shape"),
    "nvidia/Llama-3.1-8B-Instruct-FP8": ("meta-llama/Meta-Llama-3.1-8B",
                                         "an FP8 checkpoint of the same network"),
    "nvidia/DeepSeek-R1-NVFP4": ("deepseek-ai/DeepSeek-R1",
                                 "an NVFP4 checkpoint of the same network"),
    "nvidia/Qwen3-32B-NVFP4": ("Qwen/Qwen3-32B", "an NVFP4 checkpoint of the same network"),
    "zhipuai/GLM-5": ("zai-org/GLM-5", "the organisation's current repository name"),
}

#: NVIDIA's published NVFP4 checkpoint a point labelled ``nvfp4`` runs, where its name is
#: not ``nvidia/<model>-NVFP4``: (the checkpoint whose configuration and ModelOpt
#: ``hf_quant_config.json`` the package ships, or "" where it ships none; the groups its
#: exclusion list keeps in 16 bits where the package does not ship it; why). The
#: checkpoint's exclusions decide which groups stay in 16 bits (:func:`nvfp4_kept`).
R1_FP4 = ("NVIDIA's DeepSeek-R1 FP4 checkpoint leaves every layer's attention out of "
          "NVFP4 (exclude_modules 'model.layers.N.self_attn*' as TensorRT-LLM logs them in "
          "NVIDIA/TensorRT-LLM issue #5766; its attention projections stored in BF16, "
          "NVIDIA/Model-Optimizer issue #150)")
NVFP4_CHECKPOINTS = {
    "deepseek-ai/DeepSeek-V3": ("nvidia/DeepSeek-V3.1-NVFP4", None,
                                "the package ships V3.1's NVFP4 checkpoint of the same network "
                                "(its latent-attention projections in BF16, o_proj and the "
                                "experts in NVFP4)"),
    "deepseek-ai/DeepSeek-R1": ("", "attention", R1_FP4),
    "nvidia/DeepSeek-R1-NVFP4": ("", "attention", R1_FP4),
    "zhipuai/GLM-5": ("nvidia/GLM-5-NVFP4", None, "NVIDIA's NVFP4 checkpoint of the model"),
}

#: The file's GEMM and MoE quantisation modes → number formats (empty: 16-bit).
WEIGHT_FORMATS = {
    "": "",
    "bfloat16": "",
    "fp8": "fp8-e4m3",
    "fp8_block": "fp8-b128",
    "nvfp4": "nvfp4",
    "int4_wo": "int4-g32",
}
#: 4-bit modes the file writes for a point, and the checkpoint formats that make such a
#: point the published MXFP4 checkpoint rather than an NVFP4 one (gpt-oss: the file says
#: ``nvfp4`` for runs of ``openai/gpt-oss-120b``, whose experts are MXFP4 and whose
#: attention is 16-bit; no NVFP4 checkpoint of it is named).
FOUR_BIT_MODES = ("nvfp4",)
#: The file's per-tensor FP8 label, and the format of a checkpoint published with a
#: scale per 128×128 block (DeepSeek-R1/V3, MiniMax-M2.5, Qwen3-235B-A22B-FP8), which a
#: point so labelled runs.
PER_TENSOR_FP8, BLOCK_FP8 = "fp8-e4m3", "fp8-b128"
MX_CHECKPOINTS = ("mxfp4",)
#: The activation format the quantised kernels run with (weight-only modes: none).
ACTIVATIONS = {"fp8": "fp8", "fp8_block": "fp8", "nvfp4": "fp4"}
#: The KV cache of a quantised row: 8-bit float, the package's default for checkpoints
#: quantised to FP8 or NVFP4 (16-bit otherwise, and where InferenceMAX's script passes
#: none to an engine that keeps the model's dtype: :func:`.script_settings.kv_cache`).
QUANTISED_CACHE = "fp8-e4m3"

#: What the source column of the package's gap-analysis runs names.
GAP_ANALYSIS = "aic-auto-gap-analysis"
#: A request's way through the server on these deployments, seconds per request by
#: engine (API server, tokenisation, the engine's queues, the first token's return: no
#: kernel table times it; the rows' ``efficiency.request_overhead`` under measured
#: kernels). Each minimises the median |error| of the measured kernels' first-token time
#: over the gap-analysis aggregated points (those that repeat an InferenceMAX point left
#: out: 145 vLLM, 518 TensorRT-LLM, 154 SGLang points); the InferenceMAX points are held
#: out (docs/kernels.rst, "A request's way through the server";
#: ``benchmarks/bench_request_path.py`` redoes both). No time per prompt token is stated:
#: estimated the same way it is refuted by the points' own shape (the same script).
REQUEST_PATH = {"vllm": 0.030, "trtllm": 0.070, "sglang": 0.257}
#: Engines whose gap-analysis runs are one burst (their first-token time grows in
#: proportion to the clients); the others' are a few rounds per client (see above).
BURST_ENGINES = ("sglang",)

_CONCURRENCY = re.compile(r"silicon_concurrency=(\d+)")


def _expert_weights(formats: Mapping[str, str], shape) -> str:
    """The row's expert format where it must be stated: one other than its block
    linears', or the same where the checkpoint's own expert format (which the lever takes
    for unstated experts) differs (Kimi-K2.5's NVFP4 points of an INT4-expert checkpoint).
    """
    moe = formats["moe_quant_mode"]
    published = shape.get("expert_weight_format") if isinstance(shape, Mapping) else None
    if moe and (moe != formats["gemm_quant_mode"] or (published and published != moe)):
        return moe
    return ""


def package_root() -> Path:
    """Where the installed ``aiconfigurator-core`` package is (not imported).

    Raises the user error that names the extra to install when it is missing.
    """
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        raise InfermodelError(Problem(
            "the silicon ledger is read from the measured kernel tables' package "
            f"({PACKAGE.replace('_', '-')}), which is not installed",
            suggestion=EXTRA))
    return Path(spec.origin).parent


def silicon_path() -> Path:
    """The installed package's ``silicon_sample.csv``."""
    return package_root().joinpath(*SAMPLE_FILE)


def config_path(model_path: str) -> tuple[Path, str]:
    """The published config the package ships for ``model_path``, and the reason when
    it is another name's (empty otherwise).
    """
    name, why = MODEL_CONFIGS.get(model_path, (model_path, ""))
    return package_root() / CONFIG_DIR / f"{name.replace('/', '--')}_config.json", why


@attrs.frozen
class SiliconLedger:
    """The silicon file's rows: two ledger rows per point, in file order."""

    rows: tuple[LedgerRow, ...]
    path: Path
    points: int

    @property
    def unexpressed(self) -> list[LedgerRow]:
        return [r for r in self.rows if r.unexpressed]


def read_silicon(path: str | Path | None = None, *, sample: int | None = None) -> SiliconLedger:
    """Read the silicon file (the installed package's unless ``path`` is given).

    ``sample`` keeps that many points, chosen by :func:`sample_points`.
    """
    file = Path(path) if path is not None else silicon_path()
    records = _records(file)
    shapes: dict[Path, dict[str, Any] | str] = {}
    rows: list[LedgerRow] = []
    points = [_point(record, line, shapes) for line, record in records]
    if sample is not None:
        points = sample_points(points, sample)
    for point in points:
        rows.extend(point)
    return SiliconLedger(tuple(rows), file, len(points))


def _records(file: Path) -> list[tuple[int, dict[str, str]]]:
    from ..output import note_read, path_problem

    problem = path_problem(file)
    if problem is not None:
        raise InfermodelError(Problem(f"cannot read the silicon ledger: {problem}"))
    try:
        if not file.is_file():
            raise InfermodelError(Problem("the silicon ledger is not a regular file",
                                          file=str(file), suggestion=EXTRA))
        if file.stat().st_size > MAX_BYTES:
            raise InfermodelError(Problem(f"the silicon ledger is larger than {MAX_BYTES:,} bytes",
                                          file=str(file)))
        note_read(file)
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise InfermodelError(Problem(f"cannot read the silicon ledger: {exc.strerror or exc}",
                                      file=str(file))) from None
    except UnicodeDecodeError:
        raise InfermodelError(Problem("the silicon ledger is not UTF-8 text",
                                      file=str(file))) from None
    try:
        reader = csv.reader(io.StringIO(text))
        header = tuple(next(reader, ()))
        body = list(reader)
    except csv.Error as exc:
        raise InfermodelError(Problem(f"the silicon ledger is not a CSV file: {exc}",
                                      file=str(file))) from None
    if header != COLUMNS:
        missing = [c for c in COLUMNS if c not in header]
        extra = [c for c in header if c not in COLUMNS]
        raise InfermodelError(Problem(
            "the silicon ledger's columns are not the ones this version reads ("
            + "; ".join(p for p in ("missing " + ", ".join(missing) if missing else "",
                                    "unknown " + ", ".join(extra) if extra else "") if p)
            + ")" if missing or extra else "the silicon ledger's columns are out of order",
            file=str(file), line=1, expected="the columns of aiconfigurator-core 0.12",
            suggestion='pip install "aiconfigurator-core==0.12.*"'))
    return [(line, dict(zip(COLUMNS, record))) for line, record in enumerate(body, start=2)
            if len(record) == len(COLUMNS)]


# ---------------------------------------------------------------------------------
# One point of the file → two ledger rows
# ---------------------------------------------------------------------------------


def _shape(path: Path, shapes: dict[Path, dict[str, Any] | str]) -> dict[str, Any] | str:
    """The config's ``[model]`` fields, or why it cannot be read (cached per file)."""
    from ..hf_config import HFConfigError, read_hf_config

    if path not in shapes:
        if not path.is_file():
            shapes[path] = f"the package ships no published config {path.name}"
        else:
            with warnings.catch_warnings():
                # The scenario reads the config again and keeps its warnings.
                warnings.simplefilter("ignore")
                try:
                    shapes[path] = read_hf_config(path)
                except HFConfigError as exc:
                    shapes[path] = str(exc)
    return shapes[path]


def _formats(cells: Mapping[str, str], shape, reasons: list[str]) -> tuple[dict[str, str], str]:
    """The point's GEMM and MoE formats (``gemm_quant_mode``, ``moe_quant_mode`` -> number
    format; empty: the checkpoint's) and its GEMM mode as the file writes it (empty where
    the point runs the checkpoint); an unknown mode is a reason.
    """
    formats = {}
    for column in ("gemm_quant_mode", "moe_quant_mode"):
        mode = cells[column].strip()
        if mode not in WEIGHT_FORMATS:
            reasons.append(f"{column} {mode!r} has no number format here "
                           f"(known: {', '.join(m for m in WEIGHT_FORMATS if m)})")
        formats[column] = WEIGHT_FORMATS.get(mode, "")
    gemm = cells["gemm_quant_mode"].strip()
    if (gemm in FOUR_BIT_MODES and not isinstance(shape, str)
            and shape.get("expert_weight_format") in MX_CHECKPOINTS):
        # A 4-bit point of a model published with MXFP4 experts runs that checkpoint.
        formats = {"gemm_quant_mode": "", "moe_quant_mode": ""}
        gemm = ""
    elif (not isinstance(shape, str) and shape.get("weight_format") is None
          and shape.get("expert_weight_format")
          and formats["gemm_quant_mode"] == shape["expert_weight_format"]):
        # A point in the format of a checkpoint that quantises its routed experts alone
        # (Kimi-K2.5's INT4: attention, shared experts and dense layers in bf16) runs it.
        formats = {"gemm_quant_mode": "", "moe_quant_mode": ""}
        gemm = ""
    if not isinstance(shape, str) and shape.get("weight_format") == BLOCK_FP8:
        # A point labelled FP8 of a checkpoint published in 128×128 blocks runs those
        # blocks: the engines load the checkpoint's scales as they are.
        formats = {k: (BLOCK_FP8 if v == PER_TENSOR_FP8 else v) for k, v in formats.items()}
    return formats, gemm


def nvfp4_kept(model_path: str, shape, shapes: dict[Path, dict[str, Any] | str]) -> str:
    """The groups an NVFP4 point keeps in 16 bits (``model.unquantized``): those of the
    point's own checkpoint where it is NVFP4, else those of NVIDIA's published NVFP4
    checkpoint of the model (:data:`NVFP4_CHECKPOINTS`: stated, or read where the package
    ships it; else ``nvidia/<name>-NVFP4`` where it ships that); empty where none says. An NVFP4 run loads such a
    checkpoint, and none of NVIDIA's quantises every block linear (attention, latent
    projections or the layers without attention stay BF16 in each one the package ships).
    """
    if isinstance(shape, Mapping) and shape.get("weight_format") == "nvfp4":
        return str(shape.get("unquantized") or "")
    name, groups, _why = NVFP4_CHECKPOINTS.get(
        model_path, (f"nvidia/{model_path.split('/')[-1]}-NVFP4", None, ""))
    if groups is not None:
        return groups
    path = package_root() / CONFIG_DIR / f"{name.replace('/', '--')}_config.json"
    published = _shape(path, shapes) if path.is_file() else None
    if isinstance(published, Mapping) and published.get("weight_format") == "nvfp4":
        return str(published.get("unquantized") or "")
    return ""


def _point(cells: Mapping[str, str], line: int,
           shapes: dict[Path, dict[str, Any] | str]) -> tuple[LedgerRow, LedgerRow]:
    """The point's TTFT and TPOT rows; an inexpressible point keeps its reason."""
    reasons: list[str] = []
    config, _ = config_path(cells["model_path"])
    shape = _shape(config, shapes)
    if isinstance(shape, str):
        reasons.append(shape)
        experts = 1
    else:
        experts = int(shape.get("experts") or 1)
    hardware = SYSTEMS.get(cells["system"])
    if hardware is None:
        reasons.append(f"system {cells['system']!r} has no hardware preset "
                       f"(mapped: {', '.join(SYSTEMS)})")
    formats, gemm = _formats(cells, shape, reasons)
    isl, osl = _whole(cells["isl"]), _whole(cells["osl"])
    if not isl or not osl:
        reasons.append("isl and osl must be whole numbers of at least 1")
    pools: Pools | None = None
    layout: Layout | Pool | str
    if cells["mode"] == "disagg":
        prefill, decode = (read_pool(cells, "prefill", experts),
                           read_pool(cells, "decode", experts))
        if isinstance(prefill, Pool) and isinstance(decode, Pool):
            prefill = pool_layout(cells, "prefill", prefill)
            decode = pool_layout(cells, "decode", decode)
        reasons += [p for p in (prefill, decode) if isinstance(p, str)][:1]
        if isinstance(prefill, Pool) and isinstance(decode, Pool):
            pools = Pools(prefill, decode, handoff=handoff(cells["backend"].strip()))
        layout = decode
    elif cells["mode"] == "agg":
        layout = read_layout(cells, "", experts)
        if isinstance(layout, str):
            reasons.append(layout)
    else:
        layout = "unknown mode"
        reasons.append(f"mode {cells['mode']!r} is neither 'agg' nor 'disagg'")
    speculative = speculative_run(cells)
    if speculative:
        reasons.append(speculative)
    found = _CONCURRENCY.search(cells["silicon_data_source"])
    batch = _whole(cells["batch_size"])
    attention = layout.attention_dp if isinstance(layout, (Layout, Pool)) else 1
    if found:
        concurrency = int(found.group(1))
    elif pools is not None:
        concurrency = pools.decode.batch * pools.decode.attention_dp * pools.decode.workers
    else:
        concurrency = (batch or 0) * attention
    if concurrency < 1:
        reasons.append("no concurrency: neither silicon_concurrency nor batch_size is given")
    tensor = layout.tensor if isinstance(layout, (Layout, Pool)) else 1
    pipeline = layout.pipeline if isinstance(layout, (Layout, Pool)) else 1
    expert = layout.expert if isinstance(layout, (Layout, Pool)) else 1
    backend, version = cells["backend"].strip(), cells["backend_version"].strip()
    common: dict[str, Any] = dict(
        source=cells["silicon_data_source"], engine=f"{backend} {version}".strip(),
        hardware=hardware or cells["system"], gpus=tensor * pipeline * attention, model="",
        hf_config=config, weights=formats["gemm_quant_mode"],
        kv_cache=kv_cache(cells, QUANTISED_CACHE if gemm in ACTIVATIONS else "",
                          eight_bit=QUANTISED_CACHE),
        tensor=tensor, expert=expert,
        isl=isl or 1, osl=osl or 1, concurrency=max(concurrency, 1), statistic="unspecified",
        line=line, pipeline=pipeline, attention_dp=attention,
        expert_weights=_expert_weights(formats, shape),
        unquantized=(nvfp4_kept(cells["model_path"], shape, shapes)
                     if formats["gemm_quant_mode"] == "nvfp4" else ""),
        pools=pools, engine_version=version, model_label=cells["model_path"],
        activations=ACTIVATIONS.get(gemm, "") if formats["gemm_quant_mode"] else "",
        unexpressed="; ".join(reasons),
        client=_client(cells), request_time=REQUEST_PATH.get(backend),
        recv_interval=recv_interval(cells, tensor * pipeline * attention, concurrency),
        launch=sglang_launch(cells, tensor * pipeline * attention, concurrency, isl or 0, osl or 0),
        batch_wait=batch_wait(cells, tensor * pipeline * attention, attention, concurrency),
        dp_balance=dp_balance(cells, attention), mxfp4_activations=mxfp4_activations(cells),
        moe_backend=moe_backend(cells), fp32_matmul=fp32_matmul(cells))
    rows = []
    for metric, column, suffix in (("ttft_ms", "silicon_ttft_ms", "ttft"),
                                   ("tpot_ms", "silicon_tpot_ms", "tpot")):
        value = _number(cells[column])
        row_reason = common["unexpressed"]
        if value is None or value <= 0:
            row_reason = "; ".join(p for p in (row_reason, f"{column} is not a positive number")
                                   if p)
            value = math.nan
        rows.append(LedgerRow(id=f"{cells['id']}-{suffix}", metric=metric, value=value,
                              **{**common, "unexpressed": row_reason}))
    return rows[0], rows[1]


def _client(cells: Mapping[str, str]) -> str:
    """The benchmark client a point was measured with (see the module docstring)."""
    if GAP_ANALYSIS not in cells["silicon_data_source"]:
        return "inferencemax"
    return "burst" if cells["backend"].strip() in BURST_ENGINES else "gap"


# ---------------------------------------------------------------------------------
# A fixed stratified sample
# ---------------------------------------------------------------------------------


def sample_points(points: Sequence[Sequence[LedgerRow]], count: int) -> list:
    """``count`` points (all of them if fewer), every stratum of system, engine family and
    mode represented (with fewer points than strata, one from each of the largest), the
    rest in proportion; within a stratum, evenly spaced in file order. Deterministic: the
    same file gives the same sample.

    >>> rows = [[LedgerRow(str(i), "s", e, "h200", 1, "m", None, "", "", 1, 1, 8, 8, 1,
    ...                    "ttft_ms", "mean", 1.0)] for i, e in enumerate(["vllm"] * 9 + ["sglang"])]
    >>> sorted(p[0].id for p in sample_points(rows, 3))
    ['0', '4', '9']
    """
    if count >= len(points):
        return list(points)
    strata: dict[tuple, list[int]] = {}
    for index, point in enumerate(points):
        row = point[0]
        strata.setdefault((row.hardware, row.family, row.mode), []).append(index)
    if count < len(strata):
        # Fewer points than strata: one point from each of the largest strata.
        kept = sorted(strata, key=lambda k: (-len(strata[k]), k))[:max(count, 0)]
        strata = {key: strata[key] for key in kept}
    share = {key: 1 for key in strata}
    spare = max(count - len(strata), 0)
    total = len(points)
    # Largest remainders: each stratum's proportional share of what is left.
    exact = {key: spare * len(members) / total for key, members in strata.items()}
    for key in strata:
        share[key] += int(exact[key])
    left = count - sum(share.values())
    for key in sorted(strata, key=lambda k: (-(exact[k] - int(exact[k])), k))[:max(left, 0)]:
        share[key] += 1
    chosen: list[int] = []
    for key, members in strata.items():
        n = min(share[key], len(members))
        step = len(members) / n
        chosen += [members[int(i * step)] for i in range(n)]
    return [points[i] for i in sorted(chosen)]
