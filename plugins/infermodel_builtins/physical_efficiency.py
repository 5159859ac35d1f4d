"""Physical efficiency: a step's time from bounded, shape-aware terms an engine can be
fitted on, instead of four free scalars.

The documents' convention states fixed efficiencies (a prefill MFU, a decode MFU, an
MBU and a fixed time ``t0``; Module 10 §1–§2, the Inference lab's "Two costs for one
answer"). Those cancel out on the rows they were fitted on and break elsewhere: an MFU
that fits a saturated prefill credits a decode at batch 4 with compute it cannot reach;
a ``t0`` that fits batch 1 is wrong at batch 256. ``[efficiency] model = "physical"``
(the default for a scenario that states none of ``prefill_mfu``, ``decode_mfu``,
``mbu`` and ``t0``) prices a step from what each kernel does on the card::

    step = max(W / BW_s, F_gemm / F_g)              weights and their matrix products
         + max(C / BW_s, F_attn / F_a)              the cache and attention over it
         + K · τ_kernel                             each kernel's fixed latency
         + communication                            (the parallelism lever's collectives)
         + τ_step + τ_seq · B                       the engine's host work per iteration

where, for a decode step of B sequences (a prefill pass: B·n rows):

* ``BW_s = BW · bandwidth_fraction``: memory-bound kernels stream at a sustained share
  of the datasheet bandwidth (≤ 0.92). A kernel's fixed latency makes the share fall for
  small transfers: a transfer of s bytes reaches ``bandwidth_fraction · s / (s + s½)``
  with ``s½ = τ_kernel · BW_s`` (``bandwidth_half_bytes``): latency-bound below s½.
* ``F_g = F · gemm_fraction · format``: a matrix product reaches a dense ceiling
  (≤ 0.85) on rows padded to the kernel's tile: m rows cost ``⌈m / tile⌉ · tile`` rows
  (``gemm_tile_rows``), so a decode batch of 3 pays for 64. ``format`` is 1 where the
  card multiplies the weights' format natively and ``dequant_fraction`` where a
  weight-only kernel widens them first (MXFP4/NVFP4 on Hopper and MI300X, FP8 on
  Ampere, int4 anywhere): such weights are *read* at their own bytes and *computed* at
  the 16-bit rate times that share.
* Mixture of experts: the routed experts run as a grouped product over the tokens each
  expert actually receives, ``m_e = T·k / E_read`` rows per expert read (E_read the
  distinct experts the T tokens choose, the MoE lever's expectation), each padded to the
  tile; a small batch pays a whole tile per expert it touches.
* ``F_a = F · attention_fraction``: attention kernels (flash/paged) reach their own
  share of peak.
* ``K``: the kernels one forward pass launches, counted from the architecture
  (``kernels_per_step``): an attention block 6 (norm, QKV, rotary, cache write,
  attention, output), latent attention 14, a dense feed-forward block 4, a
  mixture-of-experts block 10 (+3 with shared experts, +4 with DeepSeek-V3's grouped
  routing), a fixed-state mixer 6, and the edges (embedding, final norm, head, logits
  processing, sampling) 5; tensor-parallel all-reduces are the parallelism lever's.
  Query/key norms, a gated output's product and a gated delta-net's extra elementwise
  kernels are not counted here (the measured-kernel path prices them): counted, the
  refit moved SGLang's held-out TTFT from 39.8 % to 56.3 %. ``τ_kernel`` is each
  kernel's fixed GPU time (ramp-up, tail, memory latency).
* Launches: a decode batch of at most ``graph_max_batch`` sequences replays a captured
  CUDA graph (the engine's default capture sizes); above it, and in every prefill, the
  host launches each kernel in turn, so the step is at least ``K · launch_time``:
  ``max(GPU time, K · launch_time)``.
* ``τ_step + τ_seq · B``: the engine's scheduler and host work per iteration
  (scheduling, sampling bookkeeping, detokenisation not overlapped with the GPU).

Each parameter has a physical meaning and a bound (the fields' ranges) and a prior
(:data:`.efficiency_parameters.PARAMETERS`); an engine's values come from its
efficiency preset (``[efficiency] preset``, or the preset of ``efficiency.engine``),
fitted on the accuracy ledger within those bounds, else from the priors. Under this
model the fixed-convention quantities are defined from the terms, so every lever that
reads them sees the same physics: ``mbu`` is the sustained fraction, ``prefill_mfu``
the GEMM ceiling times the format's share, ``decode_mfu`` that times the decode
batch's tile efficiency, ``t0`` a decode step's fixed time (kernels and host), and
``decode_time_compute`` / ``prefill_time_compute`` the padded products plus attention.

``model = "fixed"`` keeps the documents' convention exactly (the Module 10 and Inference
lab scenarios state it).
"""

from __future__ import annotations

import math

import sympy
from sympy import Piecewise, ceiling

from infermodel.plugin import S, Stage, hookimpl

from . import fitted
from .efficiency_parameters import (
    ATTN,
    DEQUANT,
    FIXED_FIELDS,
    GEMM,
    HBM,
    HOST,
    KERNEL,
    KERNELS,
    LAUNCH,
    MOE,
    MOE_KERNELS,
    MS,
    PARAMETERS,
    TILES,
    US,
    Parameter,
    engine_preset,
    engine_values,
    is_physical,
    optional_value,
)
from .engines import ENGINES, scenario_scheduler
from .shapes import expert_block, moe_layer_count, structure
from .unevaluated import Max

#: Kernels of one layer's blocks and of the rest of a forward pass (see KERNELS).
ATTENTION_KERNELS = 6       # fused add-norm, QKV, rotary, cache write, attention, O
LATENT_KERNELS = 14         # norm, q_a, q_a norm, q_b, kv_a, kv_a norm, rotary, cache write,
                            # two absorbed products, split-KV attention and its reduction, O
STATE_KERNELS = 6           # norm, in-projection, convolution, scan, gate, out-projection
DENSE_FFN_KERNELS = 4       # fused add-norm, gate-up, SiLU-and-mul, down
MOE_FFN_KERNELS = 10        # norm, router, top-k softmax, align/sort, two grouped products,
                            # activation, un-permute and sum, the residual add
GROUPED_ROUTING_KERNELS = 4  # biased group-limited top-k (DeepSeek-V3's noaux_tc) adds these
SHARED_EXPERT_KERNELS = 3   # the shared experts' gate-up, activation, down
EDGE_KERNELS = 5            # embedding, final norm, head, logits processing, sampling
#: Products per block whose input an 8-bit activation format quantises first (one
#: kernel each): attention's QKV and O (latent: q_a, q_b, kv_a, O), a dense block's
#: gate-up and down, a mixture of experts' two grouped products.
QUANTISED_INPUTS = {"attention": 2, "latent": 4, "dense": 2, "moe": 2}
MIXER_KERNELS = {"full": ATTENTION_KERNELS, "sliding": ATTENTION_KERNELS,
                 "chunked": ATTENTION_KERNELS, "none": 0}
FFN_KERNELS = {"dense": DENSE_FFN_KERNELS, "moe": MOE_FFN_KERNELS, "projection": 2, "none": 0}



# ---------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------


@hookimpl
def infermodel_register_fields(register):
    register("efficiency", "model", kind="choice", choices=("physical", "fixed"), default=None,
             description='step-time model: "physical" (bounded, shape-aware terms: sustained '
                         "bandwidth, tile-padded products, kernel and host overheads, collectives "
                         'by message size) or "fixed" (the documents\' prefill_mfu, decode_mfu, '
                         "mbu and t0); default: fixed when the scenario or its preset states any of "
                         "those four, else physical")
    for p in PARAMETERS:
        register("efficiency", p.name, kind=p.kind, unit=p.unit, minimum=p.low, maximum=p.high,
                 default=None, description=f"physical model: {p.meaning} (bound {_bound(p)}; "
                                           "default: the engine's preset, else "
                                           f"{_show(p, p.prior)})")
    register("hardware", "generation", kind="str", default=None,
             description="the card's vendor and architecture generation (\"nvidia-hopper\", "
                         "\"amd-cdna3\", ...): the group an engine preset's interval and fitted "
                         "domain are read by")
    register("efficiency", "gemm_tile_rows", kind="int", minimum=1, maximum=256, default=16,
             description="physical model: rows of one matrix-product tile; m rows cost "
                         f"⌈m/tile⌉·tile ({TILES})")


def _show(p: Parameter, value: float) -> str:
    if p.unit == "1":
        return f"{value:g}"
    return f"{value / US:g} µs" if value < MS else f"{value / MS:g} ms"


def _bound(p: Parameter) -> str:
    return f"{_show(p, p.low)}–{_show(p, p.high)}"


# ---------------------------------------------------------------------------------
# Pure helpers: kernels and formats
# ---------------------------------------------------------------------------------


def kernels_per_step(scenario) -> int:
    """Kernels one forward pass launches (see :data:`KERNELS`), tensor-parallel
    collectives apart: each layer's mixer and feed-forward block, the quantisation of
    each product's input under 8-bit activations, and the edges.

    >>> MIXER_KERNELS["full"] + FFN_KERNELS["dense"]   # one Llama layer
    10
    """
    st = structure(scenario)
    value = scenario.value
    moe_extra = (SHARED_EXPERT_KERNELS if value("model.shared_experts") else 0) + (
        GROUPED_ROUTING_KERNELS if optional_value(scenario, "model.score_correction_bias") else 0)
    quantised = _quantised_activations(scenario)
    attention = LATENT_KERNELS if st.mla else ATTENTION_KERNELS
    attention += quantised * QUANTISED_INPUTS["latent" if st.mla else "attention"]
    ffn = {"dense": DENSE_FFN_KERNELS + quantised * QUANTISED_INPUTS["dense"],
           "moe": MOE_FFN_KERNELS + moe_extra + quantised * QUANTISED_INPUTS["moe"]}
    layers = value("model.layers")
    if not st.rows:
        return layers * (attention + ffn["moe" if value("model.experts") > 1 else "dense"]) + EDGE_KERNELS
    total = EDGE_KERNELS
    for row in st.rows:
        mixer = attention if row.mixer in ("full", "sliding", "chunked") else MIXER_KERNELS.get(
            row.mixer, STATE_KERNELS)
        total += row.count * (mixer + ffn.get(row.ffn, FFN_KERNELS.get(row.ffn, DENSE_FFN_KERNELS)))
    return total


def _quantised_activations(scenario) -> bool:
    """The products' inputs are quantised first: an activation format is stated, or the
    engine runs the weights' narrow float format natively (:func:`native_classes`).
    """
    from .quantization import effective_lever

    lever = effective_lever(scenario)
    return lever is not None and (lever.activations is not None or bool(native_classes(scenario)))


def _bits(fmt) -> float:
    return float(getattr(fmt, "bits", 16))


def _native_bits(scenario, fmt) -> float:
    """The narrowest bits the card multiplies a float format's weights at, as engines run
    a checkpoint of that format with no activation format stated: FP8 weights as W8A8
    where the card has FP8 tensor cores, FP4 as W4A4 where it has FP4 ones; 16 otherwise
    (MXFP4 experts on Hopper or MI300X run through 16-bit products).
    """
    if getattr(fmt, "kind", "int") != "float":
        return 16
    if _bits(fmt) <= 4 and scenario.value("hardware.flops_fp4") is not None:
        return 4
    if 4 < _bits(fmt) <= 8 and scenario.value("hardware.native_fp8"):
        return 8
    return 16  # FP4 on a card without FP4 tensor cores is widened to 16 bits


def native_classes(scenario) -> dict[str, float]:
    """Weight classes whose narrow float format the card multiplies natively though the
    scenario states no activation format (FP8 on Hopper, FP4 on Blackwell: engines run
    such checkpoints W8A8 / W4A4), with the card's peak ratio for that width.
    """
    from .quantization import effective_lever, weight_formats

    lever = effective_lever(scenario)
    if lever is None or lever.activations is not None:
        return {}
    out = {}
    for key, (fmt, _) in weight_formats(scenario, lever).items():
        bits = _native_bits(scenario, fmt)
        if key in ("linear", "experts") and bits < 16 and _bits(fmt) <= bits:
            peak = scenario.value("hardware.flops_fp4" if bits == 4 else "hardware.flops_fp8")
            out[key] = peak / scenario.value("hardware.flops") if peak else 2.0
    return out


def dequantising_classes(scenario) -> dict[str, str]:
    """Weight classes computed by a weight-only kernel, with why: their format is narrower
    than what the card multiplies natively (the stated activation format, else what
    engines run the weights' format as: :func:`_native_bits`).
    """
    from .quantization import effective_lever, weight_formats

    lever = effective_lever(scenario)
    if lever is None:
        return {}
    activations = lever.activations
    card = scenario.presets.get("hardware") or "the card"
    native = {"fp8": bool(scenario.value("hardware.native_fp8")),
              "int8": bool(scenario.value("hardware.native_int8")),
              "fp4": scenario.value("hardware.flops_fp4") is not None}
    out = {}
    for key, (fmt, _) in weight_formats(scenario, lever).items():
        if key not in ("linear", "experts"):
            continue
        compute_bits: float
        if activations is not None:
            compute_bits = {"fp8": 8, "int8": 8, "fp4": 4}[activations] if native[activations] else 16
        else:
            compute_bits = _native_bits(scenario, fmt)
        if _bits(fmt) >= compute_bits:
            continue
        name = getattr(fmt, "name", None) or f"{_bits(fmt):g}-bit"
        how = (f"{activations} activations are not native on {card}" if activations
               else f"{card} does not multiply it natively")
        out[key] = f"{name} weights, {how}: widened to {compute_bits} bits before the product"
    return out


# ---------------------------------------------------------------------------------
# Quantities
# ---------------------------------------------------------------------------------


@hookimpl
def infermodel_define_quantities(scenario, define):
    if not is_physical(scenario):
        return
    fallback, where = engine_values(scenario)
    for p in PARAMETERS:
        if scenario.value(f"efficiency.{p.name}") is not None:
            define(p.name, scenario.value(f"efficiency.{p.name}"), unit=p.unit,
                   description=f"{p.meaning} (bound {_bound(p)})", reference=p.source)
        else:
            value = fallback.get(p.name, p.prior)
            origin = where if p.name in fallback else "the physical model's prior"
            define(p.name, value, unit=p.unit,
                   description=f"{p.meaning} (bound {_bound(p)}; from {origin})",
                   reference=p.source)
    define("gemm_tile_rows", scenario.value("efficiency.gemm_tile_rows"), unit="1",
           description="rows of one matrix-product tile: m rows cost ⌈m/tile⌉·tile",
           reference=TILES)
    _formats(scenario, define)
    _kernels(scenario, define)
    _decode(scenario, define)
    _prefill(scenario, define)
    scheduler = scenario_scheduler(scenario)
    define("engine_max_sequences", scheduler.max_sequences or math.inf, unit="seq",
           description="most sequences the engine runs at once (∞: only the cache limits it)",
           reference=ENGINES[scenario.value("efficiency.engine")].source)
    define("graph_max_batch", scheduler.graph_max_batch, unit="seq",
           description="largest decode batch the engine replays as a captured CUDA graph (0: none)",
           reference=ENGINES[scenario.value("efficiency.engine")].source)
    define("engine_chunk_tokens", scheduler.chunk_tokens, unit="token",
           description="tokens per iteration the engine schedules (its chunk budget)",
           reference=ENGINES[scenario.value("efficiency.engine")].source)
    define("engine_chunked_prefill", 1 if scheduler.chunked_prefill else 0, unit="1",
           description="1 when the engine chunks prefill into iterations shared with decodes",
           reference=ENGINES[scenario.value("efficiency.engine")].source)
    define("engine_block_tokens", scheduler.block_size, unit="token",
           description="tokens per KV-cache block of the engine",
           reference=ENGINES[scenario.value("efficiency.engine")].source)
    found = engine_preset(scenario)
    if found is not None:
        name, family, path = found
        fitted.define_intervals(scenario, define, fitted.preset_record(path), family, name)


def _mix(parts):
    """The rate multiplier of products whose FLOP shares run at their own factors:
    1 / (1 − Σ s + Σ s / f), a share None standing for every product.

    >>> float(_mix([(sympy.Rational(1, 2), 2)]))
    1.3333333333333333
    """
    if not parts:
        return sympy.Integer(1)
    if any(share is None for share, _ in parts):
        return 1 / sum((1 / factor for _, factor in parts), sympy.Integer(0))
    rest = 1 - sum((share for share, _ in parts), sympy.Integer(0))
    return 1 / (rest + sum((share / factor for share, factor in parts), sympy.Integer(0)))


def _formats(scenario, define):
    classes = dequantising_classes(scenario)
    native = native_classes(scenario)
    if "experts" in classes or "experts" in native:
        define("routed_expert_share",
               moe_layer_count(scenario) * S.active_experts * S.expert_params / S.params_matmul,
               unit="1", description="routed experts' share of a token's matrix-product FLOPs",
               reference=MOE)

    def share(key):
        return S.routed_expert_share if key == "experts" else None

    why = "; ".join(f"{k}: {v}" for k, v in classes.items()) or "every product native"
    define("gemm_format_fraction", _mix([(share(k), S.dequant_fraction) for k in classes]),
           unit="1", description=f"share of the GEMM ceiling the weights' formats allow ({why})",
           reference=DEQUANT)
    if native:
        define("native_format_speedup", _mix([(share(k), ratio) for k, ratio in native.items()]),
               unit="1", description="product rate over the 16-bit rate where the card multiplies "
                                     "the weights' narrow float format natively (engines run FP8 "
                                     "checkpoints W8A8 on cards with FP8 tensor cores)",
               reference=GEMM)


def _kernels(scenario, define):
    define("kernels_per_step", kernels_per_step(scenario), unit="1",
           description="kernels one forward pass launches (collectives apart)", reference=KERNELS)
    define("bandwidth_half_bytes", S.kernel_time * S.card_bandwidth * S.bandwidth_fraction,
           unit="B", description="transfer size at which one kernel reaches half the sustained "
                                 "bandwidth (below it, latency-bound)", reference=KERNEL)
    define("kernel_fixed_time", S.kernels_per_step * S.kernel_time, unit="s",
           description="fixed GPU time of one pass's kernels", reference=KERNEL)
    define("launch_bound_time", S.kernels_per_step * S.launch_time, unit="s",
           description="host time to launch one pass's kernels without a CUDA graph "
                       "(the step cannot be shorter)", reference=LAUNCH)


def _padding(rows):
    """Padded rows over rows: ⌈m/tile⌉·tile / m."""
    return S.gemm_tile_rows * ceiling(rows / S.gemm_tile_rows) / rows


def _experts(scenario, define, phase, tokens):
    """Routed experts' FLOPs and rows per expert in ``phase`` (MoE only), or None."""
    if scenario.value("model.experts") <= 1:
        return None
    layers = moe_layer_count(scenario)
    if phase == "decode":
        read = S.experts_read_per_layer
    else:
        read = S.experts * (1 - (1 - S.active_experts / S.experts) ** tokens)
        define("prefill_experts_read_per_layer", read, unit="1",
               description="distinct routed experts a prefill pass's tokens choose per layer "
                           "(uniform routing)", reference=MOE)
        read = S.prefill_experts_read_per_layer
    define(f"{phase}_expert_rows", tokens * S.active_experts / read, unit="token",
           description=f"rows (tokens) each routed expert read receives in {phase}: T·k / E_read",
           reference=MOE)
    if phase == "decode":
        define("expert_flops_per_row", 2 * layers * expert_block(scenario),
               unit="FLOP", description="FLOPs of one token through one routed expert in every "
                                        "mixture-of-experts layer", reference=MOE)
    define(f"{phase}_flops_experts", tokens * S.active_experts * S.expert_flops_per_row,
           unit="FLOP", description=f"{phase} FLOPs of the routed experts' products", reference=MOE)
    return S[f"{phase}_flops_experts"], S[f"{phase}_expert_rows"]


def _gemm_time(scenario, define, phase, tokens, flops):
    moe = _experts(scenario, define, phase, tokens)
    define(f"{phase}_gemm_padding", _padding(tokens), unit="1",
           description=f"padded rows over rows of the {phase} products (m = {'B' if phase == 'decode' else 'B·n'})",
           reference=TILES)
    rate = S.flops_peak * S.gemm_fraction * S.gemm_format_fraction
    # The head scores one position per sequence (engines' convention): its own product,
    # one row per sequence, not padded with the pass's rows.
    head = sympy.Integer(0)
    if scenario.value("efficiency.prefill_logits") == "last":
        scored = S.batch if phase == "decode" else S.batch * S.prefill_logit_positions
        head = 2 * scored * S.params_head_matmul
    if moe is None:
        time = ((flops - head) * S[f"{phase}_gemm_padding"] + head) / rate
    else:
        expert_flops, rows = moe
        define(f"{phase}_expert_padding", _padding(rows), unit="1",
               description=f"padded rows over rows of each routed expert's product in {phase}",
               reference=TILES)
        time = ((flops - expert_flops - head) * S[f"{phase}_gemm_padding"]
                + expert_flops * S[f"{phase}_expert_padding"] + head) / rate
    define(f"{phase}_time_gemm", time / _speedup(scenario), unit="s",
           description=f"{phase} time of the matrix products at the GEMM rate, rows padded to tiles",
           reference=f"{GEMM}; {TILES}")


def _speedup(scenario):
    """The products' rate over the 16-bit rate from their formats (1: none)."""
    from .quantization import effective_lever

    lever = effective_lever(scenario)
    if lever is not None and lever.activations is not None:
        return S.activation_speedup
    return S.native_format_speedup if native_classes(scenario) else 1


def _decode(scenario, define):
    _gemm_time(scenario, define, "decode", S.batch, S.decode_flops_projections)
    define("decode_time_attention", S.decode_flops_attention / (S.flops_peak * S.attention_fraction),
           unit="s", description="decode time of attention's arithmetic at the attention rate",
           reference=ATTN)
    if scenario.value("model.experts") > 1:
        define("decode_expert_bytes", S.expert_bytes_all_layers * S.experts_read_per_layer, unit="B",
               description="routed experts' bytes a decode step reads (the experts its tokens choose)",
               reference=MOE)
        define("decode_time_weights",
               (S.weight_bytes_per_step - S.decode_expert_bytes) / S.bandwidth
               + S.decode_expert_bytes / (S.bandwidth * S.expert_bandwidth_fraction / S.bandwidth_fraction),
               unit="s", description="decode time to stream the weights a step reads (routed experts "
                                     "at the grouped products' share)", reference=f"{HBM}; {MOE_KERNELS}")
    else:
        define("decode_time_weights", S.weight_bytes_per_step / S.bandwidth, unit="s",
               description="decode time to stream the weights a step reads", reference=HBM)
    define("decode_time_cache", S.decode_cache_read_bytes / S.bandwidth, unit="s",
           description="decode time to stream the cache a step reads", reference=HBM)
    define("decode_graph_captured", Piecewise((1, S.batch <= S.graph_max_batch), (0, True)),
           unit="1", description="1 when the decode batch replays a captured CUDA graph",
           reference=LAUNCH)
    define("decode_time_gpu",
           Max(S.decode_time_weights, S.decode_time_gemm) + Max(S.decode_time_cache, S.decode_time_attention)
           + S.kernel_fixed_time, unit="s",
           description="GPU time of a decode step: weights or their products, cache or attention, "
                       "each kernel's fixed time", reference=f"{HBM}; {GEMM}")
    define("host_time_decode", S.step_overhead + S.sequence_overhead * S.batch, unit="s",
           description="engine host time of a decode iteration", reference=HOST)


def _prefill(scenario, define):
    tokens = S.batch * S.prompt_tokens
    _gemm_time(scenario, define, "prefill", tokens, S.prefill_flops_projections)
    define("prefill_time_attention", S.prefill_flops_attention / (S.flops_peak * S.attention_fraction),
           unit="s", description="prefill time of causal attention at the attention rate",
           reference=ATTN)
    define("prefill_time_weights", S.prefill_weight_bytes / S.bandwidth, unit="s",
           description="prefill time to stream the weights once", reference=HBM)
    define("prefill_weight_bytes", S.weight_bytes - S.embedding_bytes_unread_prefill, unit="B",
           description="weight bytes a prefill pass reads (input-table rows used)", reference=HBM)
    define("prefill_time_activations", (S.prefill_bytes - S.prefill_weight_bytes) / S.bandwidth,
           unit="s", description="prefill time to write the cache and move activations",
           reference=HBM)
    define("prefill_time_gpu",
           Max(S.prefill_time_weights, S.prefill_time_gemm)
           + Max(S.prefill_time_activations, S.prefill_time_attention) + S.kernel_fixed_time,
           unit="s", description="GPU time of a prefill pass", reference=f"{HBM}; {GEMM}")
    define("host_time_prefill", S.step_overhead + S.sequence_overhead * S.batch, unit="s",
           description="engine host time of a prefill iteration", reference=HOST)


# ---------------------------------------------------------------------------------
# Transformations: the fixed-convention quantities from the physical terms
# ---------------------------------------------------------------------------------

ORDER = Stage.MODEL_STRUCTURE + 60
WHY = "physical efficiency model"


@hookimpl
def infermodel_transform_quantities(scenario, transform):
    if not is_physical(scenario):
        return
    transform.replace("mbu", S.bandwidth_fraction, reason=f"{WHY}: the sustained share",
                      reference=HBM, order=Stage.NUMBER_FORMATS - 50,
                      description="sustained share of peak bandwidth (physical model)")
    transform.replace("prefill_mfu", S.gemm_fraction * S.gemm_format_fraction,
                      reason=f"{WHY}: the GEMM ceiling times the format's share", reference=GEMM,
                      order=Stage.NUMBER_FORMATS - 50,
                      description="share of peak compute a prefill pass's products reach "
                                  "(physical model: GEMM ceiling × format)")
    transform.replace("decode_mfu", S.gemm_fraction * S.gemm_format_fraction / S.decode_gemm_padding,
                      reason=f"{WHY}: the GEMM ceiling on the decode batch's padded tiles",
                      reference=f"{GEMM}; {TILES}", order=Stage.NUMBER_FORMATS - 50,
                      description="share of peak compute a decode step's products reach "
                                  "(physical model: GEMM ceiling × format / tile padding)")
    transform.replace("t0", S.kernel_fixed_time + S.host_time_decode,
                      reason=f"{WHY}: kernels' fixed time and the engine's host time",
                      reference=f"{KERNEL}; {HOST}", order=Stage.NUMBER_FORMATS - 50,
                      description="fixed time of a decode step (kernels' latency and host work)")
    transform.replace("decode_time_compute", S.decode_time_gemm + S.decode_time_attention,
                      reason=f"{WHY}: padded products at the GEMM rate, attention at its rate",
                      reference=GEMM, order=ORDER)
    transform.replace("prefill_time_compute", S.prefill_time_gemm + S.prefill_time_attention,
                      reason=f"{WHY}: padded products at the GEMM rate, attention at its rate",
                      reference=GEMM, order=ORDER)
    if scenario.value("efficiency.roofline") != "operator":
        transform.replace(
            "decode_step_time",
            Piecewise((S.decode_time_gpu + S.host_time_decode, S.decode_graph_captured > 0),
                      (Max(S.decode_time_gpu, S.launch_bound_time) + S.host_time_decode, True)),
            reason=f"{WHY}: GPU time (graph replay), or at least the launches (eager), plus host",
            reference=f"{KERNEL}; {LAUNCH}; {HOST}", order=ORDER,
            description="time of one decode step (physical model)")
        transform.replace(
            "prefill_time", Max(S.prefill_time_gpu, S.launch_bound_time) + S.host_time_prefill,
            reason=f"{WHY}: GPU time or the launches (prefill runs eagerly), plus host",
            reference=f"{KERNEL}; {LAUNCH}; {HOST}", order=ORDER,
            description="time to prefill the batch's prompts in one pass (physical model)")
    transform.wrap("max_sequences", lambda old: sympy.Min(old, S.engine_max_sequences, evaluate=False),
                   reason="the engine runs at most its max_sequences at once",
                   reference=ENGINES[scenario.value("efficiency.engine")].source, order=ORDER)
    # A fixed efficiency the scenario itself writes, under a model stated as physical (by the
    # scenario or its efficiency preset), is replaced like the rest: never silently.
    for name in FIXED_FIELDS:
        if scenario.given(f"efficiency.{name}"):
            transform.warn(f"efficiency.{name} is written but the physical model replaces it "
                           f"(efficiency.model is \"physical\"); write efficiency.model = \"fixed\" "
                           "to price with the fixed efficiencies, or state the physical "
                           "parameters (gemm_fraction, bandwidth_fraction, ...)", quantity=name)
    lever = scenario.lever("parallelism")
    if lever is not None and getattr(lever, "pipeline", 1) not in (None, 1):
        transform.warn("the physical model's step sums weights, cache, kernels and host time over "
                       "the whole model; the pipeline's micro-batch and bubble factors apply to "
                       "its memory and compute times only", quantity="decode_step_time")


@hookimpl
def infermodel_check_result(result, warn):
    scenario = result.scenario
    if not is_physical(scenario):
        return
    found = engine_preset(scenario)
    if found is None:
        return
    name, family, path = found
    record = fitted.preset_record(path)
    message = fitted.domain_warning(result, record, name)
    if message:
        warn("tpot", message)
    alone = fitted.alone_warning(scenario, record, family, name)
    if alone:
        warn("ttft", alone)


@hookimpl
def infermodel_register_headlines(register):
    register("assumptions", "bandwidth_fraction", label="sustained BW")
    register("assumptions", "gemm_fraction", label="GEMM ceiling")
    register("assumptions", "kernels_per_step", label="kernels")
    register("assumptions", "kernel_time", label="per kernel")
    register("assumptions", "step_overhead", label="host per step")


__all__ = ["dequantising_classes", "kernels_per_step", "native_classes"]
