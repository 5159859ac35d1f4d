"""What a scenario's measured kernels are (:class:`.kernel_plan.Setup`): the card's
tables, the engine and its version, the layout each kernel runs under, and the engine's
settings that choose a kernel (MXFP4 experts' activations, the MoE runner, FP8
activation scales). Not a plugin: the measured-kernels plugin reads it.
"""

from __future__ import annotations

import infermodel.plugin as door

from . import kernel_plan
from .engines import ENGINES
from .kernel_plan import Setup
from .parallelism import degrees
from .parallelism import layout as parallel_layout
from .quantization import activation_scales

#: efficiency.engine -> the engine's folder name in the tables.
ENGINE_TABLES = {"vllm": "vllm", "sglang": "sglang", "tensorrt-llm": "trtllm", "trtllm": "trtllm"}


def setup(scenario) -> Setup:
    """The scenario's :class:`Setup` (raises what validation reports)."""
    lever = scenario.lever("parallelism")
    tensor = degrees(scenario)[0] if lever is not None else scenario.value("hardware.count")
    layout: dict = {"pipeline": degrees(scenario)[1]} if lever is not None else {}
    if lever is not None:
        lay = parallel_layout(scenario)
        if lay.active:
            layout.update(data=lay.data, stage=lay.stage_cards, expert=lay.expert,
                          dense=lay.dense, shared_local=lay.shared_local, all_to_all=lay.a2a)
    system = scenario.value("hardware.kernel_system")
    engine = ENGINE_TABLES.get(scenario.value("efficiency.engine"))
    if system is None:
        return Setup(None, engine, None, tensor,
                     "the card names no measured kernel tables (hardware.kernel_system unset)",
                     **layout)
    if engine is None:
        return Setup(system, None, None, tensor,
                     f"efficiency.engine = {scenario.value('efficiency.engine')!r} has no measured "
                     "kernel tables (they hold vllm, sglang and trtllm)", **layout)
    kernels = door.kernels
    version = kernels.check_version(system, engine, scenario.value("efficiency.engine_version"))
    return Setup(system, engine, version, tensor, **layout,
                 mxfp4_experts=mxfp4_experts(scenario),
                 moe_backend=scenario.value("efficiency.moe_backend") or "",
                 activation_scales=activation_scales(scenario))


def mxfp4_experts(scenario) -> str:
    """The MoE table's dtype for MXFP4 experts under the scenario's engine and card: with
    MXFP8 activations where the card has FP4 tensor cores and the scenario states them
    (``efficiency.mxfp4_activations``) or, unstated, the engine runs them so
    (TensorRT-LLM on Blackwell), else weight-only.
    """
    if scenario.value("hardware.flops_fp4") is None:
        return kernel_plan.MXFP4_WEIGHT_ONLY
    stated = scenario.value("efficiency.mxfp4_activations")
    engine = ENGINES.get(scenario.value("efficiency.engine"))
    if stated is None and engine is not None:
        stated = engine.mxfp4_activations
    return "w4a8_mxfp4_mxfp8" if stated == "mxfp8" else kernel_plan.MXFP4_WEIGHT_ONLY


__all__ = ["ENGINE_TABLES", "mxfp4_experts", "setup"]
