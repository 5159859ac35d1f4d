"""A ledger row as a scenario: the tables (model, hardware, workload, efficiency and the
levers) that describe the row's deployment, its layout, and why a row cannot be one.

The row's formats go through the quantisation lever (8-bit float weights also take 8-bit
activations, as FP8 checkpoints run); its cards through the parallelism lever (tensor
degree, pipeline stages, data-parallel attention ranks and expert ranks, the dense layers
kept as its engine keeps them); its engine through ``[efficiency]`` (the physical model
with the engine its family runs as, :data:`.ledger.ENGINE_OF_FAMILY`, and the preset that
prices it where given). :mod:`.predictions` compiles the scenario and predicts the row.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .ledger import ENGINE_FAMILIES, ENGINE_OF_FAMILY, LedgerRow, Pool, engine_release

__all__ = ["DENSE_WEIGHTS", "EIGHT_BIT_FLOATS", "EIGHT_BIT_INTS", "IDEAL_TABLE", "LAUNCH_FIELDS", "efficiency_table",
           "layout", "scenario_data", "unsupported"]

#: 8-bit float weight formats whose checkpoints also run 8-bit float activations
#: (DeepSeek-V3's 128×128-block FP8 quantises activations per 1×128 tile).
EIGHT_BIT_FLOATS = ("fp8-e4m3", "fp8-e5m2", "mxfp8", "fp8-b128")
EIGHT_BIT_INTS = ("int8",)
#: The documents' ideal roofline: peak rates, no fixed time, no engine (nothing kept back).
IDEAL_TABLE = {"model": "fixed", "prefill_mfu": 1.0, "decode_mfu": 1.0, "mbu": 1.0, "t0": 0.0,
               "engine": "none"}


def efficiency_table(row: LedgerRow, preset: str | None) -> dict[str, Any]:
    """The ``[efficiency]`` table of a row: the physical model with the row's engine, and
    ``preset`` (a fitted efficiency preset) when given.
    """
    table: dict[str, Any] = {"model": "physical", "engine": ENGINE_OF_FAMILY[row.family]}
    if preset is not None:
        table["preset"] = preset
    return table


def layout(row: LedgerRow, pool: Pool | None = None) -> tuple[int, int, int]:
    """The tensor degree, pipeline stages and data-parallel attention ranks of one server
    of the row (of ``pool`` for a disaggregated row), as the parallelism lever takes them.

    A CSV ledger's ``tensor`` counts the cards attention is split or shared over
    (``tensor = gpus``, the lever's degree ``gpus / attention_dp``); other readers give
    the degree per attention rank (``gpus = tensor × pipeline × attention_dp``).
    """
    if pool is not None:
        return pool.tensor, pool.pipeline, pool.attention_dp
    if row.attention_dp > 1 and row.tensor == row.gpus and row.pipeline == 1:
        return row.gpus // row.attention_dp, 1, row.attention_dp
    return row.tensor, row.pipeline, row.attention_dp


#: Where each engine family keeps the dense layers under data-parallel attention (the
#: parallelism lever's ``dense_weights``): SGLang splits them over the stage's cards,
#: vLLM's and TensorRT-LLM's attention-DP ranks each keep their own copy.
DENSE_WEIGHTS = {"sglang": "split", "vllm": "replicated", "vllm-v0": "replicated", "trtllm": "replicated"}


#: The ``[efficiency]`` fields of :attr:`.ledger.LedgerRow.launch`, in its order.
LAUNCH_FIELDS = ("memory_fraction", "prefill_chunk", "max_sequences", "graph_max_batch")


def scenario_data(row: LedgerRow, efficiency: Mapping[str, Any],
                  pool: Pool | None = None) -> dict[str, Any]:
    """The scenario tables that describe a ledger row's deployment (one server of
    ``pool`` for a disaggregated row), with ``efficiency`` as its ``[efficiency]`` table.
    """
    model = {"preset": row.model} if row.model else {"hf_config": str(row.hf_config)}
    tensor, pipeline, attention = layout(row, pool)
    gpus = tensor * pipeline * attention
    data: dict[str, Any] = {
        "scenario": {"name": row.id, "description": f"ledger row {row.id} ({row.source})"},
        "model": model,
        "hardware": {"preset": row.hardware, "count": gpus},
        "workload": {"batch": 1, "prompt_tokens": row.isl, "output_tokens": row.osl},
        "efficiency": dict(efficiency),
    }
    release = engine_release(row.engine)
    if (release and data["efficiency"].get("kernels") != "measured"
            and "engine_version" not in data["efficiency"]):
        # The run's release, where the engine's defaults changed with one (measured
        # kernels state the tables' version instead).
        data["efficiency"]["engine_version"] = release
    # The engine's launch flags and scheduler settings (one server of the row, not a
    # pool's); the ideal roofline has no engine to set them on (nothing kept back, no
    # scheduler limits or holds), and a memory share there is an error.
    engine = pool is None and data["efficiency"].get("engine") != "none"
    if engine and row.launch is not None:
        for field, value in zip(LAUNCH_FIELDS, row.launch):
            if value is not None:
                data["efficiency"][field] = value
    if engine and row.recv_interval > 1:
        data["efficiency"]["recv_interval"] = row.recv_interval
    if engine and row.batch_wait > 0:
        data["efficiency"]["batch_wait_iterations"] = row.batch_wait
    if data["efficiency"].get("kernels") == "measured":
        # Which MoE kernel the tables time (the roofline has no kernel to choose).
        if row.mxfp4_activations:
            data["efficiency"]["mxfp4_activations"] = row.mxfp4_activations
        if row.moe_backend:
            data["efficiency"]["moe_backend"] = row.moe_backend
    if row.fp32_matmul:
        data["efficiency"]["fp32_matmul"] = row.fp32_matmul
    if engine and row.dp_balance is not None:
        data["efficiency"]["dp_balance_timeout"], data["efficiency"]["dp_balance_batching"] = (
            row.dp_balance)
    levers: dict[str, Any] = {}
    if row.weights or row.kv_cache or row.expert_weights:
        quantization: dict[str, Any] = {}
        if row.weights and row.unquantized:
            # The run's checkpoint keeps groups in 16 bits: its format is the model's, which
            # the lever takes for the block linears (a lever format would apply to all).
            model["weight_format"], model["unquantized"] = row.weights, row.unquantized
        elif row.weights:
            quantization["linear"] = row.weights
        if row.weights:
            if row.activations:
                quantization["activations"] = row.activations
            elif row.weights in EIGHT_BIT_FLOATS:
                quantization["activations"] = "fp8"
            elif row.weights in EIGHT_BIT_INTS:
                quantization["activations"] = "int8"
        if row.expert_weights:
            quantization["experts"] = row.expert_weights
        if row.kv_cache:
            quantization["kv_cache"] = row.kv_cache
        levers["quantization"] = quantization
    expert = pool.expert if pool else row.expert
    if gpus > 1:
        parallelism: dict[str, Any] = {"tensor": tensor}
        if pipeline > 1:
            parallelism["pipeline"] = pipeline
        if attention > 1:
            parallelism["attention_data"] = attention
            parallelism["dense_weights"] = DENSE_WEIGHTS.get(row.family, "replicated")
        if expert > 1:
            parallelism["expert"] = expert
            if pool is not None and attention > 1 and pool.dispatch != "all_gather":
                parallelism["expert_dispatch"] = pool.dispatch
        levers["parallelism"] = parallelism
    if levers:
        data["levers"] = levers
    return data


def unsupported(row: LedgerRow) -> str | None:
    """Why the row cannot be a scenario (None where it can)."""
    if row.unexpressed:
        return row.unexpressed
    if row.family not in ENGINE_FAMILIES:
        return (f"engine {row.engine!r}: no efficiency preset for the family {row.family!r} "
                f"(known: {', '.join(ENGINE_FAMILIES)})")
    if row.gpus % row.attention_dp:
        return f"attention_dp = {row.attention_dp} does not divide gpus = {row.gpus}"
    tensor, pipeline, attention = layout(row)
    if tensor * pipeline * attention != row.gpus:
        return (f"tensor = {row.tensor} with gpus = {row.gpus}: the cards must be the tensor "
                "degree (tensor = gpus), or the degree per attention rank times the pipeline "
                "stages and data-parallel attention ranks")
    if row.hf_config is not None and not row.hf_config.is_file():
        return f"hf_config {row.hf_config} does not exist"
    return None
