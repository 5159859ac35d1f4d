"""Operator-level roofline: one prefill pass and one decode step, kernel by kernel.

The base physics times a whole step on one roofline: ``max(bytes / BW, FLOPs / F)``
(Module 10 §1–§2, the Inference lab's "Two costs for one answer"). Real kernels run one
after another, each on its own roofline, so memory-bound operators (normalisations, the
attention over the cache) cost time even when the step as a whole is compute-bound.
This plugin splits both phases into operators, each with its FLOPs, the bytes it moves,
its intensity, its own bound and its time::

    time_i = max(FLOPs_i / F_phase, bytes_i / BW)

``efficiency.roofline`` chooses the step model: ``"step"`` (default; the documents'
whole-step maximum) or ``"operator"`` (the sum of the operators' times, what per-layer
tools and real kernels do)::

    decode_step_time = Σ_i max(FLOPs_i / F_decode, bytes_i / BW) + t0
    prefill_time     = Σ_i max(FLOPs_i / F_prefill, bytes_i / BW) + t0

The operators' FLOPs add up exactly to the whole-step FLOPs (``decode_flops``,
``prefill_flops``); their bytes include every byte the whole-step count has (weights read
per step, cache reads and writes) plus the activations each operator reads and writes,
so the sum of per-operator maxima is never below the whole-step maximum.

Counting, for T tokens in the pass (B in decode, B·n in prefill), 16-bit activations
(a = 2 bytes), L layers, width d, query width d_q, KV width d_kv = kv_heads·head_dim::

    embedding           0 FLOPs; reads the table rows used (the table, under "table")
    norms               2·T·(2L + 1)·d            (the norm weights' multiply-adds; bytes
                                                    T·(8L + 1)·d·a: each block norm adds the
                                                    residual, reading two and writing two)
    qkv_projection      2·T·L·d·(d_q + 2·d_kv)    writes the new keys and values
    attention_score     decode 2·B·L·d_q·c; prefill B·L·d_q·n² (causal half)
    attention_value     the same; together 4·B·L·d_q·c (decode), 2·B·L·d_q·n² (prefill)
    output_projection   2·T·L·d_q·d
    state_mixer         2·T·(weights of the layers without attention)   (hybrids)
    state_update        T·(recurrence FLOPs per token); reads and writes each state
    router              2·T·L·d·E                  (mixture of experts only)
    ffn                 2·T·L·(k + s)·m·d·d_ff_e   (m matrices; k routed, s shared experts)
    head                2·P·V·d                    (P scored positions: B in decode; B or
                                                    B·n in prefill, efficiency.prefill_logits)

Attention is anchored to the whole step (the step's FLOPs less the weight multiplies,
the step's bytes less the weights), so an attention family that changes the step's
formulas changes the attention operators with it.

Weight bytes of a step are shared among the operators in proportion to the weights each
multiplies (routed experts as the batch reads them), the embedding taking the bytes of the
rows it reads; operators that a plugin times itself (an all-reduce over a link) appear in
the table and are added to the step by that plugin, not by the sum.

Also exposed by name: projection and attention FLOPs of both phases, the cache bytes a
decode step reads, the fraction of peak compute each phase can attain, and the intensity
of a single matrix–vector and matrix–matrix product (Module 10, "A matrix-vector product
reads many weights for little work" and "A matrix-matrix product reuses the weights").
"""

from __future__ import annotations

import sympy

from infermodel.plugin import S, Stage, collect_operators, hookimpl

from . import LAB, M10
from .operator_kernels import (
    ACTIVATION_BYTES,
    FP32_MATMUL,
    fp32_rate_field,
    operator_kernels,
    router_in_32_bits,
    router_rate_field,
    router_time_fp32,
)
from .shapes import expert_block, moe_layer_count, router_params, structure
from .unevaluated import Max, Min

ROOFLINE = f"{M10}, §2 arithmetic intensity and the roofline; {LAB}, 'Two costs for one answer'"
COUNT_OPS = f"{M10}, §1 'Count operations and traffic separately'"
MATVEC = f"{M10}, 'A matrix-vector product reads many weights for little work'"
MATMUL = f"{M10}, 'A matrix-matrix product reuses the weights'"
ATTENTION = f"{M10}, 'Attention reads a different cache for every sequence'"
PER_OPERATOR = ("per-operator roofline: each kernel runs at the lower of its compute and "
                "bandwidth limits, and the kernels of a step run one after another")

#: Bytes per output logit (engines keep logits in fp32 for sampling).
LOGIT_BYTES = 4
PHASES = ("prefill", "decode")


# ---------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------


@hookimpl
def infermodel_register_fields(register):
    register("efficiency", "roofline", kind="choice", choices=("step", "operator"), default="step",
             description='step-time model: "step" (the larger of the whole step\'s memory and '
                         'compute times, the documents\' model) or "operator" (the sum over the '
                         "step's operators of each one's larger time, as real kernels run)")
    register("efficiency", "fp32_matmul", kind="choice", choices=FP32_MATMUL, default="ieee",
             description="how the engine multiplies 32-bit matrices (a router kept in 32 bits, "
                         'model.router_dtype): "ieee" (full FP32 on the CUDA cores: PyTorch\'s '
                         'default precision "highest", which vLLM keeps unless '
                         "VLLM_FLOAT32_MATMUL_PRECISION says otherwise) or \"tf32\" (TF32 "
                         "tensor cores: vLLM with VLLM_FLOAT32_MATMUL_PRECISION=high)")
    register("hardware", "flops_fp32", kind="quantity", unit="FLOP/s", minimum=0,
             exclusive_minimum=True, default=None, quantity="flops_fp32",
             description="32-bit floating-point peak of one card without tensor cores "
                         "(datasheet FP32): the rate of a GEMM kept in 32 bits under "
                         'efficiency.fp32_matmul = "ieee"')
    register("hardware", "flops_tf32", kind="quantity", unit="FLOP/s", minimum=0,
             exclusive_minimum=True, default=None, quantity="flops_tf32",
             description="dense TF32 tensor peak of one card (datasheet, no sparsity): the rate "
                         'of a GEMM kept in 32 bits under efficiency.fp32_matmul = "tf32"')


# ---------------------------------------------------------------------------------
# Operators
# ---------------------------------------------------------------------------------


def _moe(scenario) -> bool:
    return scenario.value("model.experts") > 1


ROUTER_32 = ("vLLM's and SGLang's MiniMax models (models/minimax_m2.py, minimax_text_01.py: the "
             "gate a ReplicatedLinear in float32, fed the hidden states cast to float32, on every "
             "tensor-parallel card); "
             "vLLM's worker sets PyTorch's float32 matmul precision from "
             "VLLM_FLOAT32_MATMUL_PRECISION, default 'highest' (IEEE FP32, no TF32)")


def _shapes(phase):
    """Tokens of the pass and positions the head scores."""
    if phase == "decode":
        return S.batch, S.batch
    return S.batch * S.prompt_tokens, S.batch * S.prefill_logit_positions


def _router(scenario):
    return router_params(scenario)


def _layered(scenario) -> bool:
    """Some layers have no attention: their mixers get operators of their own."""
    st = structure(scenario)
    return st.linear or st.has("projection") or st.has("none")


def _attention_weights(scenario):
    """(Q, K, V weights, output projection weights) of the attention layers."""
    if not _layered(scenario):
        output = S.layers * S.query_width * S.d_model
        return S.params_attention - output, output
    output = S.kv_layers * S.query_width * S.d_model
    return S.kv_layers * S.params_attention_layer - output, output


def _weights(scenario, phase):
    """Weights each operator multiplies (for its share of the step's weight bytes)."""
    qkv, output = _attention_weights(scenario)
    router = _router(scenario)
    if phase == "decode" and _moe(scenario):
        # Routed experts as the batch's tokens read them (the MoE lever's expectation).
        ffn = S.layers * (S.experts_read_per_layer + S.shared_experts) \
            * expert_block(scenario)
        if structure(scenario).ffn:   # dense layers beside the MoE ones
            ffn = S.params_ffn_active - router + moe_layer_count(scenario) * (
                S.experts_read_per_layer - S.active_experts) * expert_block(scenario)
    elif _moe(scenario):
        ffn = S.params_ffn - router  # a prompt's tokens reach every expert
    else:
        ffn = S.params_ffn_active
    weights = {"norms": S.params_norm, "qkv_projection": qkv,
               "output_projection": output, "ffn": ffn, "head": S.params_head_matmul}
    if _layered(scenario):
        weights["state_mixer"] = S.params_attention - qkv - output
    if _moe(scenario):
        weights["router"] = router
    return weights


def _state_ops(scenario, phase, tokens, w):
    """The fixed-state and projection mixers: their projections and their recurrence."""
    a = ACTIVATION_BYTES
    st = structure(scenario)
    mixers = S.layers - S.kv_layers - (S.layers_without_mixer if st.has("none") else 0)
    ops = {"state_mixer": (2 * tokens * S.params_attention - 2 * tokens * sum(_attention_weights(scenario)),
                           w("state_mixer") + tokens * mixers * 2 * S.d_model * a,
                           "projections of the layers without attention (linear attention, "
                           "state space, d×d projections)")}
    if st.linear:
        state = S.batch * S.linear_state_bytes_per_sequence
        ops["state_update"] = (tokens * S.fixed_state_flops_per_token,
                               2 * state if phase == "decode" else state,
                               "recurrence of the fixed-state layers: each sequence's state read "
                               "and written (prefill writes it once)")
    return ops


def operators(scenario, phase):
    """The built-in operators of ``phase``: ``{name: (flops, bytes, description)}``, in the
    order they run.

    Attention is anchored to the whole step (its FLOPs are the step's FLOPs less the weight
    multiplies, its cache bytes the step's bytes less the weights), so an attention family
    that changes the step's formulas changes these operators with it.
    """
    a = ACTIVATION_BYTES
    L, d, dq = S.layers, S.d_model, S.query_width
    dkv = S.kv_heads * S.head_dim
    tokens, scored = _shapes(phase)
    tied = scenario.value("model.tied_embeddings")
    if phase == "decode":
        weight_bytes = S.weight_bytes_per_step
        table = S.embedding_table_bytes - S.embedding_bytes_unread
        cache_read = S.decode_cache_read_bytes
        attention = S.decode_flops_attention
    else:
        weight_bytes = S.weight_bytes - S.embedding_bytes_unread_prefill
        table = S.embedding_table_bytes - S.embedding_bytes_unread_prefill
        cache_read = S.batch * S.prompt_tokens * S.kv_bytes_per_token
        attention = S.prefill_flops_attention
    embedding = sympy.Integer(0) if tied else table
    weights = _weights(scenario, phase)
    rate = (weight_bytes - embedding) / sum(weights.values())

    def w(name):
        return weights[name] * rate

    qkv, output = _attention_weights(scenario)
    layered = _layered(scenario)
    extra = _state_ops(scenario, phase, tokens, w) if layered else {}
    if "state_update" in extra:
        attention = attention - extra["state_update"][0]
        if phase == "decode":
            cache_read = cache_read - extra["state_update"][1]
    A = S.kv_layers if layered else L
    ops = {
        "embedding": (sympy.Integer(0), embedding + tokens * d * a,
                      "look up each token's row of the input table (the head's table when tied)"),
        "norms": (2 * tokens * S.params_norm, w("norms") + tokens * (8 * L + 1) * d * a,
                  "RMS/layer normalisations: two per block, each adding the residual "
                  "before it (the input, the residual and both outputs moved), and a "
                  "final one"),
        "qkv_projection": (2 * tokens * qkv,
                           w("qkv_projection") + tokens * A * (d + dq + 2 * dkv) * a
                           + tokens * S.kv_bytes_per_token,
                           "query, key and value projections; the new keys and values are "
                           "written to the cache"),
        "attention_score": (attention / 2, cache_read / 2 + tokens * A * dq * a,
                            "query–key scores over the cached keys"),
        "attention_value": (attention / 2, cache_read / 2 + tokens * A * dq * a,
                            "weighted sum of the cached values"),
        "output_projection": (2 * tokens * output, w("output_projection") + tokens * A * (dq + d) * a,
                              "attention output projection back to the model width"),
        **extra,
    }
    k = S.active_experts + S.shared_experts
    if _moe(scenario):
        ops["router"] = (2 * tokens * _router(scenario),
                         w("router") + tokens * L * (d + S.experts) * a,
                         "expert router: one score per expert per token")
    ops["ffn"] = (2 * tokens * (S.params_ffn_active - _router(scenario)),
                  w("ffn") + tokens * L * (2 * d + 2 * (S.ffn_matrices - 1) * k * S.expert_d_ff) * a,
                  "feed-forward block" + (" (routed and shared experts)" if _moe(scenario) else ""))
    ops["head"] = (2 * scored * S.params_head_matmul,
                   w("head") + scored * (d * a + S.vocab * LOGIT_BYTES),
                   "output head: logits over the vocabulary for the scored positions")
    return ops


@hookimpl
def infermodel_define_operators(scenario, define):
    for phase in PHASES:
        tokens, scored = _shapes(phase)
        ops = operators(scenario, phase)
        rate = S[f"flops_effective_{phase}"]
        rooflines = {name: Max(flops / rate, moved / S.bandwidth)
                     for name, (flops, moved, _) in ops.items()}
        kernels = operator_kernels(scenario, phase, tokens, scored,
                                   S.kv_layers if _layered(scenario) else S.layers, rooflines,
                                   ops["norms"][:2])
        fp32 = router_rate_field(scenario) is not None
        for name, (flops, moved, description) in ops.items():
            define(phase, name, flops=flops, bytes=moved, description=description,
                   reference=ATTENTION if name.startswith("attention") else COUNT_OPS,
                   kernels=kernels.get(name, ()),
                   compute_time=router_time_fp32(scenario, flops)
                   if fp32 and name == "router" else None)


# ---------------------------------------------------------------------------------
# Quantities
# ---------------------------------------------------------------------------------


@hookimpl
def infermodel_define_quantities(scenario, define):
    _intermediates(define)
    _single_products(define)
    field = router_rate_field(scenario)
    if field is not None:
        define("router_matmul_rate", S[field], unit="FLOP/s",
               description="the rate of the router's 32-bit GEMM on one card (every tensor "
                           f"card runs it over its attention rank's tokens): hardware.{field}, as "
                           "efficiency.fp32_matmul says", reference=ROUTER_32)
        define("prefill_router_time_fp32",
               router_time_fp32(scenario, 2 * S.batch * S.prompt_tokens * _router(scenario)),
               unit="s", description="the prefill pass's router GEMMs at their 32-bit rate (one "
                                     "card's: every token of its attention rank)",
               reference=ROUTER_32)
    if scenario.value("efficiency.roofline") == "operator":
        for phase in PHASES:
            _operator_sum(scenario, phase, define)


def _intermediates(define):
    n = S.prompt_tokens
    define("decode_flops_projections", S.batch * 2 * S.params_matmul, unit="FLOP",
           description="decode FLOPs of the weight multiplies (projections, FFN, head, norms)",
           reference=COUNT_OPS)
    define("decode_flops_attention", S.decode_flops - S.decode_flops_projections, unit="FLOP",
           description="decode FLOPs of attention over the context (the step's FLOPs less the "
                       "weight multiplies: 4·B·layers·d_q·context for standard attention)",
           reference=COUNT_OPS)
    define("prefill_flops_projections",
           S.batch * (2 * (S.params_matmul - S.params_head_matmul) * n
                      + 2 * S.params_head_matmul * S.prefill_logit_positions), unit="FLOP",
           description="prefill FLOPs of the weight multiplies (the head at the scored positions)",
           reference=COUNT_OPS)
    define("prefill_flops_attention", S.prefill_flops - S.prefill_flops_projections, unit="FLOP",
           description="prefill FLOPs of causal attention (the pass's FLOPs less the weight "
                       "multiplies: 2·B·layers·d_q·n² for standard attention)", reference=COUNT_OPS)
    define("decode_cache_read_bytes", S.decode_bytes - S.weight_bytes_per_step, unit="B",
           description="KV-cache bytes one decode step reads (every sequence's context: "
                       "B·context·kv for standard attention)", reference=ATTENTION)
    for phase in PHASES:
        define(f"{phase}_attainable_fraction",
               Min(S[f"flops_effective_{phase}"], S[f"{phase}_intensity"] * S.bandwidth)
               / S.flops_peak, unit="1",
               description=f"share of peak compute the {phase} step can attain on the roofline: "
                           "min(F, intensity · BW) / peak", reference=ROOFLINE)


def product_intensity(m: int, n: int, columns: int = 1, value_bytes: float = 2) -> float:
    """Intensity of one product of an m×n matrix with ``columns`` vectors, all tensors at
    ``value_bytes`` per element: 2·m·n·B / (b·(m·n + n·B + m·B)) (Module 10, "A
    matrix-vector product reads many weights for little work"; "A matrix-matrix product
    reuses the weights"). The ``matvec_*`` and ``matmul_*`` quantities are this for the
    model's d×d shape.

    >>> round(product_intensity(4096, 4096), 4)          # bf16 matrix-vector: about 1
    0.9995
    >>> round(product_intensity(4096, 4096, 64), 2)      # 64 columns: about 2B/b
    62.06
    """
    return 2 * m * n * columns / (value_bytes * (m * n + n * columns + m * columns))


def _single_products(define):
    # Each intensity is one quantity (FLOPs over bytes written out), so that a sweep keeps
    # two columns here rather than six.
    d, b = S.d_model, S.weight_value_bytes
    define("matvec_intensity", 2 * d * d / (b * (d * d + 2 * d)), unit="FLOP/B",
           description="intensity of a d×d matrix–vector product: 2·m·n / (b·(m·n + n + m)), "
                       "about 1 in bf16", reference=MATVEC)
    define("matvec_attainable_fraction", Min(1, S.matvec_intensity / S.ridge_intensity), unit="1",
           description="share of peak compute a d×d matrix–vector product can attain",
           reference=MATVEC)
    cols = S.batch
    define("matmul_intensity", 2 * d * d * cols / (b * (d * d + 2 * d * cols)), unit="FLOP/B",
           description="intensity of a d×d matrix times the batch's B token vectors: "
                       "2·m·n·B / (b·(m·n + n·B + m·B)), about 2B/b while the weights dominate",
           reference=MATMUL)
    define("matmul_attainable_fraction", Min(1, S.matmul_intensity / S.ridge_intensity), unit="1",
           description="share of peak compute a d×d matrix–matrix product over the batch can attain",
           reference=MATMUL)


def _operator_sum(scenario, phase, define):
    rate = S[f"flops_effective_{phase}"]
    terms = []
    for op in collect_operators(scenario, phase):
        if op.time is not None:
            continue  # timed and added to the step by the plugin that defines it
        name = f"{phase}_op_{op.name}_time"
        compute = op.flops / rate if op.compute_time is None else op.compute_time
        define(name, Max(compute, op.bytes / S.bandwidth), unit="s",
               description=f"{phase} time of operator {op.name}: the larger of its compute and "
                           f"memory times ({op.description})", reference=op.reference or ROOFLINE)
        terms.append(S[name])
    define(f"{phase}_time_operators", sympy.Add(*terms, evaluate=False), unit="s",
           description=f"{phase} time as the sum of every operator's own roofline time",
           reference=PER_OPERATOR)


@hookimpl
def infermodel_check_result(result, warn):
    """Say where a 32-bit router is not timed at its rate: the card states none, or a
    whole-step model (the step roofline, the physical model) counts its FLOPs with the
    other products' at the step's rate (with how long they take at the 32-bit one).
    """
    scenario = result.scenario
    if not router_in_32_bits(scenario):
        return
    field = fp32_rate_field(scenario)
    if router_rate_field(scenario) is None:
        rate = "FP32" if field == "flops_fp32" else "TF32"
        warn("prefill_time", f"the router multiplies in 32 bits (model.router_dtype = \"fp32\") "
                             f"and the card states no hardware.{field}: its FLOPs are counted at "
                             "the step's rate (flops_effective_prefill), or read from the "
                             "tables' 16-bit rows where measured kernels read them; state the "
                             f"datasheet's {rate} figure")
        return
    if (scenario.value("efficiency.kernels") == "measured"
            or scenario.value("efficiency.roofline") == "operator"
            or "prefill_router_time_fp32" not in result.values
            or "prefill_time" not in result.values):
        return
    extra = result.values["prefill_router_time_fp32"]
    warn("router_matmul_rate", "the router multiplies in 32 bits (model.router_dtype = \"fp32\"); the "
                         "whole-step model counts its FLOPs with the other products' at the "
                         "step's rate (flops_effective_prefill): at "
                         f"hardware.{field} they take {result.show('prefill_router_time_fp32')} a "
                         f"prefill, {extra / result.values['prefill_time']:.1%} of prefill_time "
                         '(efficiency.roofline = "operator" or kernels = "measured" time them so)')


@hookimpl
def infermodel_transform_quantities(scenario, transform):
    if scenario.value("efficiency.roofline") != "operator":
        return
    transform.replace("decode_step_time", S.decode_time_operators + S.t0,
                      order=Stage.MODEL_STRUCTURE + 50,
                      reason="operator roofline: the sum of each operator's own limit",
                      reference=PER_OPERATOR,
                      description="time of one decode step (the operators' times summed, plus t0)")
    transform.replace("prefill_time", S.prefill_time_operators + S.t0,
                      order=Stage.MODEL_STRUCTURE + 50,
                      reason="operator roofline: the sum of each operator's own limit",
                      reference=PER_OPERATOR,
                      description="time to prefill the batch's prompts in one pass (the operators' "
                                  "times summed, plus t0)")
    lever = scenario.lever("parallelism")
    if lever is not None and getattr(lever, "pipeline", 1) not in (None, 1):
        transform.warn("efficiency.roofline = \"operator\" sums the operators of the whole model; "
                       "the pipeline's micro-batch and bubble factors are not applied to that sum",
                       quantity="decode_step_time")


__all__ = ["ACTIVATION_BYTES", "LOGIT_BYTES", "ROUTER_32", "operators", "product_intensity"]
