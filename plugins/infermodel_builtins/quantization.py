"""The quantisation lever: weight formats by parameter class, KV-cache formats,
activation quantisation and the predicted signal-to-quantisation-noise ratio.

``[levers.quantization]`` gives a format (a name from :data:`formats.NAMED_FORMATS` or a
table) for each parameter class and for the KV cache::

    [levers.quantization]
    linear = "int4-g128"                          # block linears (attention, feed-forward)
    down = "int8"                                 # feed-forward down projections (default: linear)
    experts = "mxfp4"                             # routed experts' matrices (default: linear)
    embedding = { bits = 8, granularity = "none" } # embedding table and output head
    norm = "bf16"                                 # normalisation weights
    kv_cache = "int8-b32"                         # cached keys and values
    activations = "int8"                          # W8A8: only where the card says so

A checkpoint that is already quantised says so in its ``quantization_config``; the
model's ``weight_format`` and ``expert_weight_format`` fields (read from it, or set by
a preset) are this lever's defaults for ``linear`` and ``experts``, and they apply even
without a ``[levers.quantization]`` table. A format the table gives overrides them;
every class's description says where its format came from.

What it changes (a derivation shows each step):

* ``weight_bytes`` (order 100) becomes the sum of the classes' byte counts,
  ``weight_bytes_linear + weight_bytes_embedding + weight_bytes_norm`` (plus
  ``weight_bytes_experts`` when the routed experts have their own format, and
  ``weight_bytes_down`` when the feed-forward down projections have theirs: Module 10
  Lab 4's "leave the down-projections at eight bits"), each
  ⌈b·n/8⌉ + ⌈scales·(scale_bits + zero_point_bits)/8⌉. These three quantities are
  the lever's ``weight_bytes_by_class``; :func:`weight_bytes_by_class` returns them as
  a dict from a result. Unset classes stay bf16.
* ``kv_value_bytes`` (order 100) becomes ``kv_bits_effective/8``, metadata included, so
  ``kv_bytes_per_token`` and everything downstream (capacity, decode traffic) follow.
* ``flops_effective_prefill`` and ``flops_effective_decode`` (order 100) are multiplied
  by ``activation_speedup``: the 8-bit-to-16-bit peak ratio where the hardware declares
  native arithmetic in the activation format (``hardware.native_int8`` /
  ``hardware.native_fp8``), otherwise 1, and the derivation says why.
* SQNR quantities ``sqnr_db`` (exact under the uniform-noise model),
  ``sqnr_db_approx`` and ``sqnr_correction_db``, for the block linears' integer grid or
  the ``[levers.quantization.sqnr]`` table.

References: Module 10: Inference and serving, "Granularity costs metadata", §11
"Account for the whole weight artifact", "Quantise the cache and evaluate the final
artifact", "Activation range can be much harder than weight range"; Inference lab,
"Fewer bits per weight".
"""

from __future__ import annotations

import math

import attrs
import sympy
from sympy import Rational, log

from infermodel.plugin import S, Stage, accepts, hookimpl

from . import LAB, M10
from .formats import (
    ACTIVATION_SCALES,
    CACHE,
    NAMED_FORMATS,
    VALUE_TYPES,
    ActivationFormat,
    ActivationScales,
    Distribution,
    Format,
    FormatSpec,
    SqnrBits,
)
from .quantization_classes import (
    ARTIFACT,
    CLASSES,
    DOWN,
    EXPERTS,
    UNQUANTIZED_GROUPS,
    define_weights,
    router_kept,
)
from .shapes import structure
from .sqnr import DB_PER_BIT, OFFSET_DB, max_over_sigma_for

ACTIVATIONS = (f"{M10}, 'Activation range can be much harder than weight range' (W8A16 vs W8A8) "
               "and 'Range and resolution answer different questions' (hardware support)")
SQNR = f"{LAB}, 'Fewer bits per weight'; {M10}, 'Symmetric round-to-nearest'"

BF16 = NAMED_FORMATS["bf16"]
CHECKPOINT_FIELD = {"linear": "weight_format", "experts": "expert_weight_format"}
#: Hardware field that declares native arithmetic in each activation format.
NATIVE_FIELD = {"int8": "native_int8", "fp8": "native_fp8", "fp4": "flops_fp4"}
#: Largest stored bits of the block linears each activation format can multiply with.
OPERAND_BITS = {"int8": 8, "fp8": 8, "fp4": 4.5}


@accepts("≥ 1")
def _ratio_at_least_one(instance, attribute, value):
    if value is not None and not (math.isfinite(value) and value >= 1):
        raise ValueError(f"{attribute.name} = {value!r} must be at least 1 (max|w| ≥ RMS)")


@accepts("≥ 1")
def _speedup(instance, attribute, value):
    if not (math.isfinite(value) and value >= 1):
        raise ValueError(f"{attribute.name} = {value!r} must be a ratio of at least 1")


@attrs.frozen
class Sqnr:
    """What the SQNR prediction is for: a grid of ``bits`` and a max/σ ratio, given or
    from a named distribution of ``weights_per_scale`` weights.
    """

    type_description = "table: bits and a max/σ ratio, or a distribution"

    bits: SqnrBits | None = attrs.field(default=None, metadata={
        "description": "bits of the symmetric integer grid (default: the block linears' format)"})
    max_over_sigma: float | None = attrs.field(default=None, validator=_ratio_at_least_one, metadata={
        "description": "largest |w| over the RMS of the weights sharing a scale"})
    distribution: Distribution | None = attrs.field(default=None, metadata={
        "description": '"gaussian" (default) or "uniform": max/σ from a weight distribution'})
    weights_per_scale: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.ge(1)), metadata={
            "description": "weights sharing one scale, for the gaussian max/σ (default: the "
                           "group size, d_model per channel, d_model² per tensor)"})


@attrs.frozen
class Quantization:
    """Formats by parameter class and for the KV cache; activation format; SQNR inputs.

    Each format is a name (``"int4-g128"``, ``"int8"``, ``"fp8-e4m3"``, ``"mxfp4"``,
    ``"bf16"``, ...) or a table ``{ bits, kind, symmetric, granularity, group_size,
    scale_bits, zero_point_bits }``, optionally with ``format`` naming a base to
    override. Unset weight classes stay bf16; an unset KV cache stays 16-bit.
    """

    linear: FormatSpec | None = attrs.field(default=None, metadata={
        "description": "format of the block linears (attention and feed-forward); unset: the "
                       "checkpoint's model.weight_format, else bf16"})
    experts: FormatSpec | None = attrs.field(default=None, metadata={
        "description": "format of the routed experts' matrices; unset: the checkpoint's "
                       "model.expert_weight_format, else the linear format"})
    down: FormatSpec | None = attrs.field(default=None, metadata={
        "description": "format of the feed-forward down projections of a uniform dense model "
                       "(the rest of the block linears keep linear's); unset: the linear format"})
    embedding: FormatSpec | None = attrs.field(default=None, metadata={
        "description": "format of the embedding table and output head; unset: bf16"})
    norm: FormatSpec | None = attrs.field(default=None, metadata={
        "description": "format of the normalisation weights; unset: bf16"})
    kv_cache: FormatSpec | None = attrs.field(default=None, metadata={
        "description": "format of cached keys and values; unset: 16-bit"})
    activations: ActivationFormat | None = attrs.field(default=None, metadata={
        "description": '"int8" or "fp8": 8-bit activations (W8A8), faster only where the hardware '
                       'declares native support (the FP8 speed-up from hardware.flops_fp8 where '
                       'given); "fp4": 4-bit activations (W4A4, NVFP4/MXFP4), faster only where '
                       'the hardware gives hardware.flops_fp4'})
    activation_scales: ActivationScales | None = attrs.field(default=None, metadata={
        "description": '"static" or "dynamic": whether 8-bit per-tensor activations quantise with '
                       "the checkpoint's calibrated input scales or compute each pass's amax first "
                       "(timed apart under measured kernels); unset: the checkpoint's "
                       "model.activation_scales, else static"})
    activation_peak_ratio: float = attrs.field(default=2.0, validator=_speedup, metadata={
        "description": "8-bit over 16-bit compute peak where the support is native"})
    sqnr: Sqnr | None = attrs.field(default=None, metadata={
        "description": "[levers.quantization.sqnr]: bits and max/σ of the SQNR prediction"})


# ---------------------------------------------------------------------------------
# Registration and validation
# ---------------------------------------------------------------------------------


@hookimpl
def infermodel_register_value_types(register):
    # Format fields take a name or a table; bit counts and group sizes have their own checks.
    for type_, function in VALUE_TYPES:
        register(type_, function)


@hookimpl
def infermodel_register_levers(register):
    register("quantization", Quantization,
             description="weight formats by parameter class (with scale and zero-point metadata), "
                         "KV-cache format, activation quantisation and predicted SQNR",
             reference=ARTIFACT)


@hookimpl
def infermodel_register_fields(register):
    register("model", "weight_format", kind="str", default=None,
             description="number format of the checkpoint's block linears (read from "
                         "quantization_config): the quantization lever's default for linear")
    register("model", "unquantized", kind="str", default=None,
             description='parameter groups the checkpoint keeps in 16 bits whatever its format, '
                         'comma-separated: "attention", "mixers" (the layers without attention), '
                         '"latent" (latent attention\'s projections but its output projection); '
                         "read from the quantization_config's modules_to_not_convert / ignore / "
                         "exclude_modules or ModelOpt's hf_quant_config.json")
    register("model", "expert_weight_format", kind="str", default=None,
             description="number format of the checkpoint's routed experts (MXFP4 in gpt-oss): "
                         "the quantization lever's default for experts")
    register("model", "activation_scales", kind="choice", choices=ACTIVATION_SCALES, default=None,
             description='"static" or "dynamic": how the checkpoint\'s 8-bit activations take '
                         "their scale (read from quantization_config's activation_scheme, static "
                         "for ModelOpt checkpoints): the quantization lever's default for "
                         "activation_scales")
    register("hardware", "native_int8", kind="bool", default=False,
             description="the card multiplies int8 operands natively (int8 tensor cores), so W8A8 "
                         "raises its compute peak")
    register("hardware", "native_fp8", kind="bool", default=False,
             description="the card multiplies FP8 operands natively (FP8 tensor cores), so FP8 "
                         "activations raise its compute peak")
    register("hardware", "flops_fp8", kind="quantity", unit="FLOP/s", minimum=0,
             exclusive_minimum=True, default=None,
             description="dense FP8 tensor peak of one card (datasheet, no sparsity); with FP8 "
                         "activations it sets the speed-up instead of activation_peak_ratio")
    register("hardware", "flops_fp4", kind="quantity", unit="FLOP/s", minimum=0,
             exclusive_minimum=True, default=None,
             description="dense FP4 (MXFP4/NVFP4) tensor peak of one card (datasheet, no sparsity)")


def _checkpoint(scenario, key: str) -> Format | None:
    name = scenario.value(f"model.{CHECKPOINT_FIELD[key]}")
    return NAMED_FORMATS.get(name) if name is not None else None


def activation_scales(scenario) -> str:
    """``"static"`` or ``"dynamic"``: the lever's ``activation_scales``, else the
    checkpoint's, else static (the calibrated input scales FP8 serving checkpoints ship).
    """
    lever = scenario.lever("quantization")
    stated = getattr(lever, "activation_scales", None) or scenario.value("model.activation_scales")
    return "dynamic" if stated == "dynamic" else "static"


def effective_lever(scenario):
    """The lever's table, or an empty one when only the checkpoint's formats apply.

    None when neither applies (or a number_formats lever or a fixed weight_bytes decides).
    """
    lever = scenario.lever("quantization")
    if lever is not None:
        return lever
    if scenario.lever("number_formats") is not None or scenario.value("model.weight_bytes") is not None:
        return None
    if any(scenario.value(f"model.{f}") is not None for f in CHECKPOINT_FIELD.values()):
        return Quantization()
    return None


def weight_formats(scenario, lever) -> dict[str, tuple[Format, str]]:
    """(format, where it came from) for every weight class, experts included when split."""
    out = {}
    for key in ("linear", "embedding", "norm"):
        given = getattr(lever, key)
        checkpoint = _checkpoint(scenario, key) if key == "linear" else None
        if given is not None:
            out[key] = (given, "[levers.quantization]")
        elif checkpoint is not None:
            out[key] = (checkpoint, "the checkpoint's model.weight_format; unset in the lever")
        else:
            out[key] = (BF16, "unset, so bf16")
    if scenario.value("model.experts") > 1:
        checkpoint = _checkpoint(scenario, "experts")
        if lever.experts is not None:
            out["experts"] = (lever.experts, "[levers.quantization]")
        elif checkpoint is not None:
            out["experts"] = (checkpoint, "the checkpoint's model.expert_weight_format; unset in "
                                          "the lever")
        if "experts" in out and out["experts"][0] == out["linear"][0]:
            del out["experts"]
    if lever.down is not None and lever.down != out["linear"][0]:
        out["down"] = (lever.down, "[levers.quantization]")
    return out


def _row_lengths(scenario, key: str) -> list[tuple[str, int]]:
    """Lengths of the rows (input dimension) that groups of a class must tile."""
    value = scenario.value
    d_model = value("model.d_model")
    if key == "kv_cache":
        head_dim = value("model.head_dim")
        if head_dim is None:
            heads = value("model.heads")
            if d_model % heads:
                return []
            head_dim = d_model // heads
        return [("head_dim", head_dim)]
    lengths = [("d_model", d_model)]
    if key in ("linear", "experts"):
        heads = value("model.heads")
        head_dim = value("model.head_dim")
        if head_dim is None and d_model % heads == 0:
            head_dim = d_model // heads
        if head_dim is not None:
            lengths.append(("query width heads·head_dim (attention output projection)", heads * head_dim))
        expert = value("model.expert_d_ff") or value("model.d_ff")
        lengths.append(("expert_d_ff (feed-forward down projection)" if value("model.expert_d_ff")
                        else "d_ff (feed-forward down projection)", expert))
    if key == "down":
        return [("d_ff (feed-forward down projection)", value("model.d_ff"))]
    return lengths


@hookimpl
def infermodel_validate_scenario(scenario, report):
    for field in CHECKPOINT_FIELD.values():
        name = scenario.value(f"model.{field}")
        if name is not None and name not in NAMED_FORMATS:
            from .formats import unknown_format

            problem = unknown_format(name)
            report(f"model.{field}", problem.message, expected=problem.expected,
                   suggestion=problem.suggestion)
    kept = scenario.value("model.unquantized")
    for group in (kept.split(",") if kept else []):
        if group.strip() not in UNQUANTIZED_GROUPS:
            report("model.unquantized", f"unknown parameter group {group.strip()!r}",
                   expected="comma-separated: " + ", ".join(UNQUANTIZED_GROUPS))
        elif group.strip() == "latent" and scenario.value("model.kv_lora_rank") is None:
            report("model.unquantized", '"latent" names latent attention\'s projections, but the '
                   "model has no latent attention (model.kv_lora_rank is unset)",
                   expected='"attention" for the attention projections')
    if (scenario.value("model.expert_weight_format") is not None
            and scenario.value("model.experts") <= 1):
        report("model.expert_weight_format", "expert_weight_format needs a mixture of experts, but "
               "model.experts = 1", expected="model.weight_format instead")
    lever = scenario.lever("quantization")
    if lever is None:
        return
    if scenario.lever("number_formats") is not None:
        report("levers.quantization",
               "[levers.number_formats] and [levers.quantization] both set number formats; "
               "use one of them",
               suggestion="[levers.quantization] covers number_formats: write effective bits as "
                          "{ bits = 4.125, granularity = \"none\" }")
    weights_given = [key for key, _, _ in (*CLASSES, EXPERTS, DOWN) if getattr(lever, key) is not None]
    if scenario.value("model.weight_bytes") is not None and weights_given:
        report("model.weight_bytes",
               "model.weight_bytes fixes the artifact size, so the weight formats of "
               f"[levers.quantization] ({', '.join(weights_given)}) would be ignored",
               suggestion="remove model.weight_bytes or the weight formats")
    if lever.experts is not None and scenario.value("model.experts") <= 1:
        report("levers.quantization.experts", "a format for routed experts needs a mixture of "
               "experts, but model.experts = 1", expected="linear = ... instead")
    if lever.down is not None and not _uniform_dense(scenario):
        report("levers.quantization.down", "a format for the down projections is modelled for a "
               "uniform dense model; this one has experts or feed-forward blocks that differ by "
               "layer", expected="linear = ... (and experts = ... for routed experts) instead")
    for key in ("linear", "embedding", "norm", "kv_cache", "experts", "down"):
        fmt = getattr(lever, key)
        if fmt is None or fmt.granularity != "group":
            continue
        tile = fmt.block_side or fmt.group_size
        lengths = _row_lengths(scenario, key)
        if key == "linear" and lever.down is not None:  # the down projections are their own
            lengths = lengths[:-1]
        for what, length in lengths:
            if length % tile:
                divisors = [g for g in (16, 32, 64, 128, 256) if length % g == 0]
                report(f"levers.quantization.{key}",
                       f"group size {tile} does not divide the row length {what} = {length}",
                       expected=f"a group size dividing {length}"
                                + (f" (e.g. {', '.join(map(str, divisors))})" if divisors else ""))
                break
    if lever.activations is not None:
        linear = lever.linear or _checkpoint(scenario, "linear")
        if linear is None and scenario.value("model.weight_bytes") is None:
            linear = BF16
        limit = OPERAND_BITS[lever.activations]
        if linear is not None and linear.bits > limit:
            report("levers.quantization.activations",
                   f"activations = {lever.activations!r} multiplies {limit:g}-bit operands, but "
                   f"the block linears are stored at {linear.bits:g} bits",
                   expected=(f"a linear format of {limit:g} bits or fewer (for example "
                             + ('"nvfp4" or "mxfp4")' if lever.activations == "fp4"
                                else '"int8" or "fp8-e4m3")')))
    sqnr = lever.sqnr
    if sqnr is not None:
        if sqnr.max_over_sigma is not None and (sqnr.distribution is not None
                                                or sqnr.weights_per_scale is not None):
            report("levers.quantization.sqnr",
                   "give either max_over_sigma or a distribution (with weights_per_scale), not both")
        if sqnr.bits is None and _default_sqnr_bits(lever) is None:
            report("levers.quantization.sqnr.bits",
                   "the SQNR prediction needs the bits of a symmetric integer grid, and the block "
                   "linears' format is not one",
                   expected="bits = 4 (an integer from 2 to 32)")


def _uniform_dense(scenario) -> bool:
    """A dense model whose layers share one feed-forward block (the down class's shape)."""
    st = structure(scenario)
    uniform = len(st.rows) <= 1 and all(r.ffn == "dense" and r.width is None for r in st.rows)
    return scenario.value("model.experts") <= 1 and not st.ffn and uniform


def _default_sqnr_bits(lever) -> int | None:
    fmt = lever.linear
    if (fmt is None or fmt.kind != "int" or not fmt.symmetric or fmt.granularity == "none"
            or not float(fmt.bits).is_integer() or fmt.bits < 2):
        return None
    return int(fmt.bits)


# ---------------------------------------------------------------------------------
# Quantities
# ---------------------------------------------------------------------------------


def _define_cache(define, fmt: Format):
    define("kv_code_bits", fmt.bits, unit="bit",
           description=f"bits per cached key or value code: {fmt.label()}", reference=CACHE)
    if fmt.granularity in ("group", "channel"):
        if fmt.granularity == "group":
            per = sympy.Integer(fmt.group_size)
            how = f"one scale entry per {fmt.group_size} cached values"
        else:
            per = S.head_dim
            how = "one scale entry per head vector (head_dim values) of each token"
        define("kv_scale_bits", fmt.metadata_bits, unit="bit",
               description=f"bits per scale entry of the cache ({how})", reference=CACHE)
        define("kv_bits_effective", S.kv_code_bits + S.kv_scale_bits / per, unit="bit",
               description="bits per cached value, scale metadata included", reference=CACHE)
    else:
        why = ("no scale metadata" if fmt.granularity == "none"
               else "one scale per cache tensor: a few bytes, not counted per token")
        define("kv_bits_effective", S.kv_code_bits, unit="bit",
               description=f"bits per cached value ({why})", reference=CACHE)


def _activation(scenario, lever):
    """(speed-up, explanation) for the activation format on this hardware."""
    fmt = lever.activations
    field = NATIVE_FIELD[fmt]
    name = scenario.presets.get("hardware")
    card = f"hardware preset {name!r}" if name else "the hardware"
    if fmt == "fp4":
        fp4 = scenario.value("hardware.flops_fp4")
        if fp4 is None:
            return 1.0, (f"fp4 activations give no speed-up: {card} declares no dense FP4 rate "
                         "(hardware.flops_fp4), so kernels compute at a wider format's rate")
        ratio = fp4 / scenario.value("hardware.flops")
        return ratio, (f"fp4 activations and weights: {card} gives a dense FP4 peak of "
                       f"{fp4 / 1e12:g} TFLOP/s (hardware.flops_fp4), {ratio:g}× its 16-bit peak")
    if scenario.value(f"hardware.{field}"):
        fp8 = scenario.value("hardware.flops_fp8")
        if fmt == "fp8" and fp8 is not None:
            ratio = fp8 / scenario.value("hardware.flops")
            return ratio, (f"fp8 activations and weights: {card} gives a dense FP8 peak of "
                           f"{fp8 / 1e12:g} TFLOP/s (hardware.flops_fp8), {ratio:g}× its 16-bit peak")
        return lever.activation_peak_ratio, (
            f"{fmt} activations and weights: {card} declares native {fmt} arithmetic "
            f"(hardware.{field}), so its peak is {lever.activation_peak_ratio:g}× the 16-bit peak")
    return 1.0, (
        f"{fmt} activations give no speed-up: {card} does not declare native {fmt} arithmetic "
        f"(hardware.{field} = false), so kernels compute in 16-bit and prefill does not speed up")


def _sqnr_inputs(scenario, lever):
    """(bits, max/σ, how max/σ was chosen) or None when no SQNR is defined."""
    table = lever.sqnr
    bits = table.bits if table and table.bits is not None else _default_sqnr_bits(lever)
    if bits is None:
        return None
    if table is not None and table.max_over_sigma is not None:
        return bits, table.max_over_sigma, "given"
    distribution = (table.distribution if table and table.distribution else "gaussian")
    n = table.weights_per_scale if table and table.weights_per_scale else None
    if n is None:
        fmt = lever.linear
        d_model = scenario.value("model.d_model")
        if fmt is not None and fmt.granularity == "group":
            n = fmt.group_size
        elif fmt is not None and fmt.granularity == "channel":
            n = d_model
        else:
            n = d_model * d_model
    ratio = max_over_sigma_for(distribution, n)
    if distribution == "uniform":
        how = "uniform weights: max/σ = √3"
    else:
        how = f"Gaussian weights, {n:,} sharing one scale: sqrt(E[max²])/σ"
    return bits, ratio, how


def _define_sqnr(scenario, define, lever):
    found = _sqnr_inputs(scenario, lever)
    if found is None:
        return
    bits, ratio, how = found
    define("sqnr_bits", bits, unit="bit", description="bits of the symmetric integer grid",
           reference=SQNR)
    define("sqnr_max_over_sigma", ratio, unit="1",
           description=f"largest |w| over the RMS σ of the weights sharing a scale ({how})",
           reference=SQNR)
    define("sqnr_levels", 2 ** (S.sqnr_bits - 1) - 1, unit="1",
           description="non-zero levels each side of zero, q = 2^(b−1) − 1", reference=SQNR)
    define("sqnr_db", 10 * log(12 * S.sqnr_levels**2 / S.sqnr_max_over_sigma**2, 10), unit="dB",
           description="predicted SQNR in dB, 10·log10(12·q²·σ²/max²) (uniform rounding noise)",
           reference=SQNR)
    define("sqnr_db_per_bit", DB_PER_BIT, unit="dB",
           description="dB per bit, 20·log10(2) (printed as 6.02)", reference=SQNR)
    define("sqnr_offset_db", OFFSET_DB, unit="dB",
           description="10·log10(12) − 20·log10(2) in dB (printed as 4.77)", reference=SQNR)
    define("sqnr_db_approx",
           S.sqnr_db_per_bit * S.sqnr_bits + S.sqnr_offset_db - 20 * log(S.sqnr_max_over_sigma, 10),
           unit="dB", description="approximate SQNR in dB, 6.02·b + 4.77 − 20·log10(max/σ)",
           reference=SQNR)
    define("sqnr_correction_db", 20 * log(2 ** (S.sqnr_bits - 1) / S.sqnr_levels, 10), unit="dB",
           description="dB the approximation overstates by dropping the −1: 20·log10(2^(b−1)/q)",
           reference=SQNR)


@hookimpl
def infermodel_define_quantities(scenario, define):
    lever = effective_lever(scenario)
    if lever is None:
        return
    if scenario.value("model.weight_bytes") is None:
        define_weights(scenario, define, weight_formats(scenario, lever))
    if lever.kv_cache is not None:
        _define_cache(define, lever.kv_cache)
    if lever.activations is not None:
        speedup, why = _activation(scenario, lever)
        define("activation_speedup", speedup, unit="1",
               description=f"compute peak multiplier from quantised activations: {why}",
               reference=ACTIVATIONS)
    _define_sqnr(scenario, define, lever)


@hookimpl
def infermodel_transform_quantities(scenario, transform):
    lever = effective_lever(scenario)
    if lever is None:
        return
    if scenario.value("model.weight_bytes") is None:
        total = S.weight_bytes_linear + S.weight_bytes_embedding + S.weight_bytes_norm
        if "experts" in weight_formats(scenario, lever):
            total += S.weight_bytes_experts
        if router_kept(scenario, weight_formats(scenario, lever)):
            total += S.weight_bytes_router
        if "down" in weight_formats(scenario, lever):
            total += S.weight_bytes_down
        transform.replace(
            "weight_bytes", total,
            reason="sum of the parameter classes, each stored in its own format with its scale "
                   "metadata", reference=ARTIFACT, order=Stage.NUMBER_FORMATS)
        transform.replace(
            "embedding_table_bytes",
            S.weight_bytes_embedding * S.params_embedding / (S.params_embedding + S.params_head),
            reason="the input table's share of the embedding-and-head class, in that class's format",
            reference=ARTIFACT, order=Stage.NUMBER_FORMATS)
    if lever.kv_cache is not None:
        transform.replace("kv_value_bytes", S.kv_bits_effective * Rational(1, 8),
                          reason=f"cache stored as {lever.kv_cache.label()}", reference=CACHE,
                          order=Stage.NUMBER_FORMATS)
    if lever.activations is not None:
        _, why = _activation(scenario, lever)
        for name in ("flops_effective_prefill", "flops_effective_decode"):
            transform.wrap(name, lambda old: old * S.activation_speedup, reason=why,
                           reference=ACTIVATIONS, order=Stage.NUMBER_FORMATS)


def weight_bytes_by_class(result) -> dict[str, float]:
    """The artifact split by parameter class, from an evaluated result.

    >>> weight_bytes_by_class(evaluate("scenarios/quant-int4.toml"))  # doctest: +SKIP
    {'linear': ..., 'embedding': ..., 'norm': ...}
    """
    return {suffix: result[f"weight_bytes_{suffix}"]
            for suffix in [c[1] for c in (*CLASSES, EXPERTS, DOWN)] + ["router"]
            if f"weight_bytes_{suffix}" in result}


@hookimpl
def infermodel_register_headlines(register):
    register("quantization", "bits_per_weight_effective", label="bits per weight")
    register("quantization", "kv_bits_effective", label="bits per cached value")
    register("quantization", "activation_speedup", label="prefill compute speed-up")


#: The typical settings ``infermodel rank`` applies: Module 10's everyday formats.
TYPICAL_WEIGHTS = "int4-g128"
TYPICAL_CACHE = "int8-b32"


@hookimpl
def infermodel_register_typical_settings(register):
    def weights(result):
        scenario = result.scenario
        lever = scenario.lever("quantization")
        if (scenario.lever("number_formats") is not None
                or scenario.value("model.weight_bytes") is not None
                or scenario.value("model.weight_format") is not None
                or (lever is not None and any(getattr(lever, key) is not None
                                              for key, _, _ in (*CLASSES, EXPERTS)))):
            return None
        return {"levers.quantization.linear": TYPICAL_WEIGHTS}

    def cache(result):
        scenario = result.scenario
        lever = scenario.lever("quantization")
        if scenario.lever("number_formats") is not None or (
                lever is not None and lever.kv_cache is not None):
            return None
        return {"levers.quantization.kv_cache": TYPICAL_CACHE}

    register("int4 weights", weights, lever="quantization",
             description="block linears in symmetric int4 with an fp16 scale per 128 weights "
                         "(4.125 bits), the rest as they are", reference=ARTIFACT)
    register("8-bit KV cache", cache, lever="quantization",
             description="keys and values in int8 with an fp16 scale per 32 (8.5 bits)",
             reference=CACHE)


__all__ = ["Quantization", "Sqnr", "effective_lever", "weight_bytes_by_class", "weight_formats"]
