"""The physical efficiency model's engine parameters and where an engine's values come
from.

Each parameter (:data:`PARAMETERS`) has a physical meaning, a bound (its field's range:
a scenario, a preset and a fit stay inside it), a prior and the source of both. An
engine's values are its fitted efficiency preset's (``[efficiency] preset``, or the
preset of ``efficiency.engine``), else the priors; :func:`parameter` hands any lever
the term to use — the physical model's quantity, a stated value, the preset's or the
prior. The model's formulas are :mod:`infermodel_builtins.physical_efficiency`'s.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import attrs

from infermodel.plugin import S

from .engines import ENGINES, FAMILY_ENGINE

PRESETS = Path(__file__).parent / "presets" / "efficiency"
FIXED_FIELDS = ("prefill_mfu", "decode_mfu", "mbu", "t0")
US = 1e-6
MS = 1e-3

# Sources of the bounds and priors.
HBM = ("sustained HBM bandwidth: streaming kernels reach 80–92 % of the datasheet peak on "
       "H100/H200 and 75–85 % on MI300X (vendors' bandwidth tests; Hopper tuning guide)")
GEMM = ("dense GEMM: cuBLAS/CUTLASS and hipBLASLt reach 60–80 % of the dense tensor peak on "
        "large bf16/FP8 products; no measured kernel exceeds ~85 % sustained (clock throttling "
        "under full tensor load)")
TILES = ("the smallest row tile the product kernels use for a small m: 16 (mma.sync tiles; vLLM's "
         "fused-MoE configurations use BLOCK_SIZE_M = 16 for small batches; warpgroup tiles are "
         "64 rows)")
ATTN = ("FlashAttention-2/3 and paged decode kernels: 35–75 % of peak in prefill, far less in "
        "decode (memory-bound)")
DEQUANT = ("weight-only kernels (Marlin, Machete, the MXFP4 Triton MoE kernel on Hopper) widen "
           "each weight before the product: 16-bit rate at best, less the unpacking work")
KERNEL = ("a GPU kernel's fixed time (launch to first byte, ramp, tail): 2–5 µs on current "
          "cards; inside a CUDA graph the host cost disappears but this remains")
LAUNCH = ("host launch of one kernel without a graph: 4–6 µs through the CUDA driver, "
          "10–40 µs per PyTorch eager operation (Python dispatch included)")
HOST = ("engine scheduler and host work per iteration (vLLM V1 EngineCore, SGLang's "
        "scheduler, TensorRT-LLM's executor): tens of µs to a few ms")
KERNELS = ("kernels per layer counted from vLLM's model code after its fusions "
           "(LlamaDecoderLayer: fused add-norm, QKV, rotary, cache write, attention, O; "
           "gate-up, SiLU-and-mul, down; FusedMoE: router, top-k, align, two grouped "
           "products, activation, combine)")
COLLECTIVE = ("one collective's fixed time (kernel, flag synchronisation between cards): "
              "vLLM's and SGLang's custom all-reduce 3–10 µs on NVLink, NCCL 10–30 µs, "
              "PCIe more")
MOE = "Module 10: Inference and serving, mixture-of-experts paragraph; grouped GEMM as vLLM's FusedMoE runs it"
MOE_KERNELS = ("grouped expert products (vLLM's Triton fused_moe, SGLang's and TensorRT-LLM's MoE "
               "kernels) stream the experts' weights through per-expert tiles with routing "
               "indirection: 30–80 % of peak bandwidth in decode, below a dense product's")


@attrs.frozen
class Parameter:
    """One engine parameter of the physical model: its field, bound, prior and source."""

    name: str
    unit: str
    low: float
    high: float
    prior: float
    meaning: str
    source: str

    @property
    def kind(self) -> str:
        return "float" if self.unit == "1" else "quantity"


#: The engine parameters, in the order a preset lists them. Each one's bound is its
#: field's range: a scenario, a preset and a fit must stay inside it.
PARAMETERS = (
    Parameter("bandwidth_fraction", "1", 0.5, 0.92, 0.85,
              "sustained share of peak memory bandwidth of large transfers", HBM),
    Parameter("gemm_fraction", "1", 0.3, 0.85, 0.7,
              "dense matrix products' share of peak compute on full tiles", GEMM),
    Parameter("expert_bandwidth_fraction", "1", 0.2, 0.92, 0.6,
              "sustained share of peak bandwidth of the grouped expert products (routed "
              "experts' weights)", MOE_KERNELS),
    Parameter("attention_fraction", "1", 0.15, 0.75, 0.45,
              "attention kernels' share of peak compute", ATTN),
    Parameter("dequant_fraction", "1", 0.3, 1.0, 0.6,
              "share of the 16-bit product rate a weight-only (dequantising) kernel reaches",
              DEQUANT),
    Parameter("kernel_time", "s", 0.5 * US, 10 * US, 3 * US,
              "fixed GPU time of one kernel (latency, ramp, tail)", KERNEL),
    Parameter("launch_time", "s", 2 * US, 40 * US, 8 * US,
              "host time to launch one kernel outside a CUDA graph", LAUNCH),
    Parameter("step_overhead", "s", 0.0, 8 * MS, 1 * MS,
              "engine scheduler and host time per iteration", HOST),
    Parameter("sequence_overhead", "s", 0.0, 60 * US, 10 * US,
              "engine host time per scheduled sequence per iteration", HOST),
    Parameter("collective_latency", "s", 1 * US, 50 * US, 8 * US,
              "fixed time of one collective (all-reduce, all-to-all) across the cards",
              COLLECTIVE),
)
BY_NAME = {p.name: p for p in PARAMETERS}



# ---------------------------------------------------------------------------------
# Which model, and the engine's values
# ---------------------------------------------------------------------------------


def is_physical(scenario) -> bool:
    """Whether the scenario is priced by the physical model: ``efficiency.model`` says so,
    or it is unset and the scenario (or its efficiency preset) states none of the fixed
    efficiencies; measured rates and measured kernel tables, where given, take precedence.
    """
    model = scenario.value("efficiency.model")
    if model is not None:
        return model == "physical"
    if any(optional_value(scenario, f"efficiency.{m}") is not None for m in ("prefill_rate", "decode_rate")):
        return False
    if optional_value(scenario, "efficiency.kernels") == "measured":
        return False  # measured kernel tables time the operators themselves
    # Whether a fixed efficiency is written, by the scenario or its preset (a value written
    # later, by --set or a sweep, rebuilds: the model replaces those quantities, so they
    # are never values of a physical structure).
    return not any(f"efficiency.{name}" in scenario.origins for name in FIXED_FIELDS)


def optional_value(scenario, path: str):
    """A field another plugin may declare (None when no loaded plugin does)."""
    try:
        return scenario.value(path)
    except AttributeError:
        return None


def _seconds(text) -> float:
    """A preset's time value: a number of seconds or a string such as ``"3 us"``."""
    if isinstance(text, (int, float)):
        return float(text)
    number, _, unit = str(text).strip().partition(" ")
    scale = {"s": 1.0, "ms": MS, "us": US, "µs": US, "ns": 1e-9}[unit.strip() or "s"]
    return float(number) * scale


@lru_cache(maxsize=16)
def _preset_values(path: Path, stamp: float) -> dict[str, float]:
    import tomllib  # only where a physical preset is read, not on every start

    with path.open("rb") as handle:
        table = tomllib.load(handle).get("efficiency", {})
    out = {}
    for p in PARAMETERS:
        if p.name in table:
            value = _seconds(table[p.name]) if p.unit == "s" else float(table[p.name])
            out[p.name] = min(max(value, p.low), p.high)
    return out


def engine_preset(scenario) -> tuple[str, str, Path] | None:
    """(preset name, engine family, file) of the fitted preset that prices the scenario:
    the one it names, else its engine's; None without one.
    """
    name = scenario.presets.get("efficiency")
    engine = ENGINES[scenario.value("efficiency.engine")]
    if name is None:
        name = engine.family
    path = PRESETS / f"{name}.toml"
    if not name or not path.is_file():
        return None
    family = engine.family or next(
        (f for f in sorted(FAMILY_ENGINE, key=len, reverse=True)
         if name == f or name.startswith(f + "-")), name.partition("-")[0])
    return name, family, path


def engine_values(scenario) -> tuple[dict[str, float], str]:
    """(values, where from) for the parameters the scenario leaves unset: its engine's
    fitted preset where one is shipped, else the priors.
    """
    engine = ENGINES[scenario.value("efficiency.engine")]
    path = PRESETS / f"{engine.family}.toml"
    if engine.family and path.is_file():
        return (_preset_values(path, path.stat().st_mtime),
                f"the {engine.family!r} efficiency preset ({engine.label}'s fitted values)")
    return {}, "the physical model's prior"


def parameter(scenario, name: str):
    """The parameter ``name`` as a formula term: its quantity under the physical model
    (where a fit can set it), else its value (the scenario's, the engine preset's or the
    prior) with where it came from.
    """
    if is_physical(scenario):
        return S[name], "the physical model's parameter"
    given = scenario.value(f"efficiency.{name}")
    if given is not None:
        return given, f"efficiency.{name}"
    fallback, where = engine_values(scenario)
    if name in fallback:
        return fallback[name], where
    return BY_NAME[name].prior, "the physical model's prior"


__all__ = ["BY_NAME", "FIXED_FIELDS", "MS", "PARAMETERS", "PRESETS", "US", "Parameter", "engine_preset",
           "engine_values", "is_physical", "optional_value", "parameter"]
