"""Per-layer architecture: attention families, hybrid fixed-state layers and the shapes
of mixture-of-experts stacks.

Today's models no longer repeat one ordinary attention block ``layers`` times. This
plugin declares the ``[model]`` fields that say how they differ and the quantities
the base physics routes its weights, cache and attention FLOPs through. A model that
sets none of these fields keeps the base formulas exactly (same expressions, same
numbers).

**Layer kinds.** ``layer_pattern`` lists the kind of each layer, repeated from the
first layer on: ``"full"`` (attention over the whole context), ``"sliding"``
(the last ``sliding_window`` tokens), ``"chunked"`` (tokens of the current
``attention_chunk``-token chunk, Llama 4's local layers) and ``"linear"`` (a
recurrent layer with a fixed-size state: linear attention, gated delta-net,
Mamba-2). ``"5*sliding,full"`` is Gemma 3 (every 6th layer global); ``"sliding,full"``
gpt-oss; ``"3*linear,full"`` Qwen3-Next. At context L, one sequence caches

    Σ over attention layers of min(L, window_l)   positions

(window ∞ for full layers; a chunked layer holds at most one chunk, counted at its
largest, min(L, chunk)), and each linear layer keeps its state, whose size does not
depend on L. ``kv_positions_at_context`` is that sum divided by the number of
attention layers, so ``kv_bytes_per_token · kv_positions_at_context`` is the cache
of one sequence wherever the base physics uses the cache (decode bytes, attention
FLOPs, capacity, the longest context).

**Latent attention (MLA, DeepSeek-V2/V3, Kimi-K2).** The cache holds, per token and
layer, one compressed latent of ``kv_lora_rank`` values and one shared rotary key of
``qk_rope_head_dim`` values. The weights are the query path (``q_lora_rank``: a
down-projection d·r_q, a norm and an up-projection r_q·h·(d_nope + d_rope); without
it one d·h·(d_nope + d_rope) matrix), the joint down-projection d·(r_kv + d_rope), its
norm, the up-projection r_kv·h·(d_nope + d_v) and the output h·d_v·d. Decode comes
in two forms (``mla_decode``):

* ``"absorbed"`` (vLLM's and SGLang's MLA decode kernels, FlashMLA): the up-projection
  is folded into the query and the output, so attention runs in the latent space:
  2·h·(r_kv + d_rope) + 2·h·r_kv FLOPs per cached position and layer, and the
  folded matrices cost what the up-projection costs (already in ``params_matmul``);
* ``"naive"`` (the form the reference implementation writes): every cached latent is
  decompressed each step, 2·r_kv·h·(d_nope + d_v) FLOPs per cached position and
  layer, then ordinary attention, 2·h·(d_nope + d_rope) + 2·h·d_v.

Prefill always decompresses (vLLM and SGLang run prompt attention in that form): each
token's latent is decompressed once (in ``params_matmul``) and attention costs
2·h·(d_nope + d_rope) + 2·h·d_v per query-key pair.

**Fixed-state layers** (``"linear"`` in the pattern; Qwen3-Next's gated delta-net,
Mamba-2 with value heads = heads, key head width = d_state, key heads = groups). Per
layer: the in-projection d·(2·h_k·d_k + 2·h_v·d_v) (queries, keys, values, output
gate), the per-head gates d·2·h_v, the short convolution (2·h_k·d_k + h_v·d_v)·kernel,
2·h_v per-head decay constants and the output projection h_v·d_v·d. State per sequence
and layer: h_v·d_k·d_v recurrent values plus (kernel − 1)·(2·h_k·d_k + h_v·d_v)
convolution values, at ``linear_state_bits``. The recurrence costs about four
multiply-adds per state value and token (decay, read, delta update, read-out).
A decode step reads and writes that state.

**Mixture-of-experts shapes.** ``dense_layers`` (DeepSeek's ``first_k_dense_replace``)
leading layers use a dense feed-forward block of width ``d_ff``; after them every
``moe_layer_period``-th layer is a mixture of experts (Llama 4 Maverick: 2), the rest
dense. ``shared_expert_d_ff`` is the shared experts' own width. The router (d·E, plus
E biases with ``expert_bias``) sits in every MoE layer.

**Biases and sinks** (gpt-oss): ``attention_bias`` adds the Q, K, V and O biases,
``attention_sinks`` one learnt logit per head, ``attention_output_gate`` (Qwen3-Next)
a second query-sized projection, ``qk_norm`` two head-width norms per layer (with
``qk_norm_scope = "layer"``, MiniMax-M2: two norms over all the layer's queries and keys,
(h + g)·d_h weights, whose mean squares tensor parallelism all-reduces every layer),
``expert_bias`` the experts' and the router's biases. They change the weights only, but
for that all-reduce.

The formulas themselves live in the shape library (:mod:`infermodel_builtins.shapes`),
which the base physics and the other levers call too; this plugin declares the fields,
checks them and defines the per-layer quantities from those formulas.

References: DeepSeek-V2 (arXiv:2405.04434) §2.1 and DeepSeek-V3 (arXiv:2412.19437)
§2.1 for latent attention; Gemma 2 (arXiv:2408.00118) and Gemma 3 (arXiv:2503.19786)
for local/global layers; gpt-oss model card (arXiv:2508.10925); Gated Delta Networks
(arXiv:2412.06464) and Mamba-2 (arXiv:2405.21060) for fixed-state layers; the
published config.json of each model for its dimensions.
"""

from __future__ import annotations

import sympy
from sympy import floor

from infermodel.plugin import S, hookimpl

from .architecture_fields import register_fields, validate
from .shapes import (
    INDEXER_SCALE_BYTES,
    INDEXER_SCALE_GROUP,
    MAMBA,
    MAMBA2,
    Structure,
    attention_layer,
    chunked_overcount,
    indexer_cache_bytes,
    indexer_params,
    kv_positions,
    linear_layer,
    mamba_default_dt_rank,
    mamba_inner_width,
    row_label,
    row_terms,
    state_layer,
    structure,
    terms,
)

MLA = "DeepSeek-V2 (arXiv:2405.04434) §2.1 'Multi-Head Latent Attention'; DeepSeek-V3 (arXiv:2412.19437) §2.1"
WINDOWS = ("Gemma 2 (arXiv:2408.00118) §2 'local sliding window and global attention'; Gemma 3 "
           "(arXiv:2503.19786) §2 '5:1 interleaving of local and global layers'; gpt-oss model card "
           "(arXiv:2508.10925) §2 'alternating banded window and fully dense attention'")
CHUNKED = "Llama 4 config.json (attention_chunk_size, no_rope_layers): chunked local attention"
LINEAR = ("Gated Delta Networks (arXiv:2412.06464) §3; Mamba-2 (arXiv:2405.21060) §7; "
          "Qwen3-Next config.json (linear_* keys, full_attention_interval)")
MOE_SHAPE = ("DeepSeek-V3 (arXiv:2412.19437) §2.1.2 (first_k_dense_replace, shared experts); "
             "Llama 4 config.json (interleave_moe_layer_step)")
PER_LAYER = ("the per-layer model: each layer's mixer and feed-forward block, from layer_pattern "
             "(the config's layer_types, attn_type_list, hybrid_override_pattern, attention and "
             "expert periods, block_configs)")
SINKS = "gpt-oss model card (arXiv:2508.10925) §2 'attention sinks, biases'"
DSA = ("DeepSeek-V3.2-Exp technical report, §2.1 'DeepSeek Sparse Attention' (the lightning "
       "indexer, its FP8 keys, the top-k selection); the config's index_n_heads, index_head_dim "
       "and index_topk")

# ---------------------------------------------------------------------------------
# Fields and validation
# ---------------------------------------------------------------------------------


@hookimpl
def infermodel_register_fields(register):
    register_fields(register)


@hookimpl
def infermodel_validate_scenario(scenario, report):
    validate(scenario, report)


# ---------------------------------------------------------------------------------
# Quantities
# ---------------------------------------------------------------------------------


def _define_moe_shape(scenario, define, st: Structure):
    value = scenario.value
    period = value("model.moe_layer_period")
    if st.explicit_ffn:
        moe_layers = st.ffn_count("moe")
        how = "the layers whose pattern item says +moe"
        _define_ffn_counts(define, st)
    elif value("model.experts") <= 1:
        moe_layers = S.layers
        how = "every layer (a dense model's feed-forward block)"
    elif period == 1:
        moe_layers = S.layers - S.dense_layers
        how = "every layer after the dense_layers leading ones"
    else:
        moe_layers = floor(S.layers / S.moe_layer_period) - floor(S.dense_layers / S.moe_layer_period)
        how = "every moe_layer_period-th layer after the dense_layers leading ones"
    define("moe_layers", moe_layers, unit="1",
           description=f"layers whose feed-forward block is the mixture of experts: {how}",
           reference=MOE_SHAPE)
    if value("model.shared_expert_d_ff") is None:
        define("shared_expert_d_ff", S.expert_d_ff, unit="1",
               description="intermediate width of one shared expert (the routed experts' width)",
               reference=MOE_SHAPE)


def _define_ffn_counts(define, st: Structure):
    """Dense widths and the other blocks when the pattern names every layer's block."""
    widths = sum(row.count * (row.width if row.width is not None else S.d_ff)
                 for row in st.rows if row.ffn == "dense")
    define("dense_ffn_width_sum", widths, unit="1",
           description="sum over the dense feed-forward blocks of their widths (each layer's "
                       "own, or d_ff)", reference=PER_LAYER)
    for ffn, name, what in (("projection", "layers_projection_ffn", "a d×d projection"),
                            ("none", "layers_without_ffn", "no feed-forward block")):
        if st.ffn_count(ffn):
            define(name, st.ffn_count(ffn), unit="1",
                   description=f"layers whose feed-forward block is {what} (from layer_pattern)",
                   reference=PER_LAYER)


#: Quantity names and descriptions of the mixers beyond the original four.
MIXER_COUNTS = {"lightning": ("layers_lightning_attention", "lightning (linear) attention"),
                "mamba": ("layers_mamba", "a Mamba-1 state space"),
                "mamba2": ("layers_mamba2", "a Mamba-2 state space"),
                "projection": ("layers_projection_mixer", "a d×d projection in place of attention"),
                "none": ("layers_without_mixer", "no mixer (a feed-forward block alone)")}


def _define_layer_counts(define, st: Structure):
    counts = st.counts
    if counts is not None:
        for kind, name, what in (("full", "layers_full_attention", "attention over the whole context"),
                                 ("sliding", "layers_sliding_window", "sliding-window attention"),
                                 ("chunked", "layers_chunked_local", "chunked-local attention"),
                                 ("linear", "layers_linear_attention", "a fixed-size recurrent state")):
            define(name, counts[kind], unit="1",
                   description=f"layers with {what} (from layer_pattern)",
                   reference=LINEAR if kind == "linear" else WINDOWS)
        for kind, (name, what) in MIXER_COUNTS.items():
            if counts.get(kind):
                define(name, counts[kind], unit="1", description=f"layers with {what} "
                       "(from layer_pattern)", reference=PER_LAYER)
        define("kv_layers", S.layers_full_attention + S.layers_sliding_window + S.layers_chunked_local,
               unit="1", description="layers that keep a key/value cache", reference=WINDOWS)
    else:
        define("kv_layers", S.layers, unit="1", description="layers that keep a key/value cache (all)",
               reference=MLA if st.mla else SINKS)
    if st.missing_sublayers:
        missing = sum(S[name] for kind, name in (("none", "layers_without_mixer"),)
                      if counts is not None and counts.get(kind)) + (
            S.layers_without_ffn if st.ffn_count("none") else 0)
        define("sublayers", 2 * S.layers - missing, unit="1",
               description="mixers and feed-forward blocks in all layers (each with its pre-norm "
                           "and, split over tensor ranks, its all-reduce)", reference=PER_LAYER)


def _define_attention_layer(scenario, define, st: Structure):
    """One attention layer: weights, cached values, FLOPs per position; returns its norms."""
    value = scenario.value
    layer = attention_layer(scenario, st)
    define("kv_values_per_layer_token", layer.kv_values, unit="1",
           description=f"values cached per token and layer: {layer.kv_what}",
           reference=MLA if st.mla else WINDOWS)
    define("params_attention_layer", layer.params, unit="param",
           description="weights of one attention layer's projections" + (
               " (latent attention)" if st.mla else "")
           + (", biases" if value("model.attention_bias") else "")
           + (", sinks" if value("model.attention_sinks") else ""),
           reference=MLA if st.mla else SINKS)
    if value("model.index_heads") is not None:
        define("index_cache_bytes", indexer_cache_bytes(), unit="B",
               description="bytes DeepSeek Sparse Attention's indexer caches a token and layer "
                           "(one FP8 key of index_head_dim values and a 4-byte scale per 128, "
                           "whatever the attention cache's format)", reference=DSA)
        define("params_indexer_layer", indexer_params(scenario), unit="param",
               description="weights of one layer's sparse-attention indexer (query and key "
                           "projections, per-head weights; in params_attention_layer)",
               reference=DSA)
    define("attention_flops_per_position", layer.decode_pair, unit="FLOP",
           description=f"decode attention FLOPs per cached position and layer ({layer.decode_how})",
           reference=MLA if st.mla else WINDOWS)
    define("attention_flops_per_pair_prefill", layer.prefill_pair, unit="FLOP",
           description="prefill attention FLOPs per query-key pair and layer", reference=MLA if st.mla else WINDOWS)
    return layer.norms


def _define_linear_layer(define, st: Structure):
    """One gated delta-net layer: weights, state and recurrence FLOPs."""
    layer = linear_layer()
    define("params_linear_layer", layer.params, unit="param",
           description="weights of one fixed-state layer: in-projection (q, k, v, gate), "
                       "per-head gates, short convolution, decay constants, out-projection",
           reference=LINEAR)
    define("linear_state_values_per_layer", layer.state_values,
           unit="1", description="state values one sequence keeps per fixed-state layer: the "
                                 "recurrent state and the convolution's last tokens",
           reference=LINEAR)
    define("linear_flops_per_token", layer.flops_per_token, unit="FLOP",
           description="recurrence FLOPs per token and fixed-state layer (about four "
                       "multiply-adds per state value)", reference=LINEAR)


#: Defaults of the Mamba widths a config may leave out (Mamba's and Mamba-2's own).
MAMBA_DEFAULTS = (("mamba_d_conv", 4, "width of the short convolution of a Mamba layer"),
                  ("mamba_expand", 2, "inner width of a Mamba layer over the model width"))


def _define_mamba_widths(scenario, define, st: Structure):
    value = scenario.value
    for name, default, what in MAMBA_DEFAULTS:
        if value(f"model.{name}") is None:
            define(name, default, unit="1", description=f"{what} (the default)", reference=MAMBA)
    if st.has("mamba2") and value("model.mamba_groups") is None:
        define("mamba_groups", 1, unit="1", description="groups sharing B and C of a Mamba-2 "
               "layer (the default)", reference=MAMBA2)
    if st.has("mamba"):
        if value("model.mamba_dt_rank") is None:
            define("mamba_dt_rank", mamba_default_dt_rank(), unit="1",
                   description="rank of the Δ projection of a Mamba-1 layer, ⌈d/16⌉", reference=MAMBA)
        define("mamba_inner", mamba_inner_width(), unit="1",
               description="inner width of a Mamba-1 layer, expand·d", reference=MAMBA)
    if st.has("mamba2") and value("model.mamba_head_dim") is None:
        define("mamba_head_dim", S.mamba_expand * S.d_model / S.mamba_heads, unit="1",
               description="channels per head of a Mamba-2 layer, expand·d/heads", reference=MAMBA2)


def _define_state_layer(scenario, define, mixer: str):
    """One lightning, Mamba-1 or Mamba-2 layer: weights, state and recurrence FLOPs."""
    layer = state_layer(scenario, mixer)
    name = MIXER_COUNTS[mixer][1]
    define(f"params_{mixer}_layer", layer.params, unit="param",
           description=f"weights of one layer with {name}: {layer.what}", reference=layer.reference)
    define(f"{mixer}_state_values_per_layer", layer.state_values, unit="1",
           description=f"state values one sequence keeps per layer with {name}, the same at "
                       "every context length", reference=layer.reference)
    define(f"{mixer}_flops_per_token", layer.flops_per_token, unit="FLOP",
           description=f"recurrence FLOPs per token and layer with {name}",
           reference=layer.reference)


#: (mixer, its layer count, its per-layer state values, its per-layer FLOPs) of every
#: fixed-state mixer.
STATE_TERMS = (("linear", "layers_linear_attention", "linear_state_values_per_layer",
                "linear_flops_per_token"),
               ("lightning", "layers_lightning_attention", "lightning_state_values_per_layer",
                "lightning_flops_per_token"),
               ("mamba", "layers_mamba", "mamba_state_values_per_layer", "mamba_flops_per_token"),
               ("mamba2", "layers_mamba2", "mamba2_state_values_per_layer", "mamba2_flops_per_token"))


def _define_state_layers(scenario, define, st: Structure):
    """Every fixed-state mixer's layer, the state of one sequence and its recurrence FLOPs;
    returns the norms inside those layers and the projection mixers' weights.
    """
    if st.has("mamba") or st.has("mamba2"):
        _define_mamba_widths(scenario, define, st)
    norms, params = 0, 0
    for mixer, count, _, _ in STATE_TERMS:
        if not st.has(mixer):
            continue
        if mixer == "linear":
            _define_linear_layer(define, st)
            norms += S[count] * linear_layer().norms
            params += S[count] * S.params_linear_layer
        else:
            _define_state_layer(scenario, define, mixer)
            norms += S[count] * state_layer(scenario, mixer).norms
            params += S[count] * S[f"params_{mixer}_layer"]
    if st.has("projection"):
        params += S.layers_projection_mixer * S.d_model**2
    if st.linear:
        present = [t for t in STATE_TERMS if st.has(t[0])]
        values = sum(S[count] * S[state] for _, count, state, _ in present)
        define("linear_state_bytes_per_sequence", values * S.linear_state_bits / 8,
               unit="B", description="fixed state of one sequence in all fixed-state layers "
                                     "(linear attention, state space), the same at every context "
                                     "length", reference=LINEAR)
        define("fixed_state_flops_per_token", sum(S[count] * S[flops] for _, count, _, flops in present),
               unit="FLOP", description="recurrence FLOPs of one token in all fixed-state layers",
               reference=LINEAR)
    return norms, params


def _define_attention(scenario, define, st: Structure):
    counts = st.counts
    _define_layer_counts(define, st)
    norms = _define_attention_layer(scenario, define, st)
    state_norms, state_params = _define_state_layers(scenario, define, st)
    kv_layers_count = S.kv_layers
    define("params_attention_stack", kv_layers_count * S.params_attention_layer + state_params,
           unit="param", description="attention and fixed-state layer weights in all layers",
           reference=MLA if st.mla else WINDOWS)
    define("params_norm_attention", kv_layers_count * norms + state_norms, unit="param",
           description="norms inside the attention layers (latent, q/k and gated-output norms)",
           reference=MLA if st.mla else LINEAR)
    t = terms(scenario)
    if st.windows:
        define("kv_positions_at_context", kv_positions(st, S.context), unit="token",
               description="cached positions per attention layer at the mean decode context: "
                           "Σ min(L, window) over layers / kv_layers", reference=WINDOWS)
    if st.windows or st.linear:
        define("kv_bytes_read_per_sequence",
               S.kv_bytes_per_token * (S.kv_positions_at_context if st.windows else S.context)
               + (2 * S.linear_state_bytes_per_sequence if st.linear else 0), unit="B",
               description="cache bytes one sequence's decode step reads at the mean context"
                           + (" (and its fixed state, read and written)" if st.linear else ""),
               reference=WINDOWS)
    decode = S.attention_flops_per_position * S.kv_layers * (
        S.kv_positions_at_context if st.windows else S.context)
    if st.linear:
        decode += S.fixed_state_flops_per_token
    define("attention_flops_decode", decode, unit="FLOP",
           description="attention FLOPs of one sequence's decode step at the mean context",
           reference=MLA if st.mla else WINDOWS)
    define("attention_flops_prefill", t.prefill_attention(S.prompt_tokens), unit="FLOP",
           description="attention FLOPs to prefill one prompt (causal; windows cut the pairs)",
           reference=MLA if st.mla else WINDOWS)
    define("kv_full_layer_share",
           S.layers_full_attention / S.kv_layers if counts is not None else sympy.Integer(1), unit="1",
           description="share of cache layers that keep every position (a shared prefix stays "
                       "cached only there)", reference=WINDOWS)


def _define_rows(scenario, define, st: Structure):
    """The per-layer table: one set of quantities per distinct layer kind, and what lies
    outside the layers (``infermodel layers`` prints them).
    """
    for row in st.rows:
        sums = row_terms(scenario, st, row)
        label = row_label(row, st)
        prefix = f"layer_kind_{row.key}"
        define(f"{prefix}_count", row.count, unit="1", description=f"layers of {label}",
               reference=PER_LAYER)
        define(f"{prefix}_params", sums.params, unit="param",
               description=f"weights of the layers of {label}: mixer, feed-forward block (every "
                           "expert) and norms", reference=PER_LAYER)
        define(f"{prefix}_cache_bytes_per_token", sums.cache_bytes_per_token, unit="B",
               description=f"cache bytes each cached token adds in the layers of {label}",
               reference=PER_LAYER)
        define(f"{prefix}_state_bytes", sums.state_bytes, unit="B",
               description=f"fixed state one sequence keeps in the layers of {label}, the same "
                           "at every context length", reference=PER_LAYER)
        define(f"{prefix}_flops_per_token", sums.flops_per_token, unit="FLOP",
               description=f"FLOPs of one decoded token at the mean context in the layers of "
                           f"{label}: 2 × the weights it multiplies, plus attention over the "
                           "cached positions (windows cut) or the recurrence", reference=PER_LAYER)
    define("params_outside_layers", S.params_embedding + S.params_head + S.d_model, unit="param",
           description="weights outside the layers: the input embedding, the output head and the "
                       "final norm", reference=PER_LAYER)
    define("flops_per_token_outside_layers", 2 * (S.params_head_matmul + S.d_model), unit="FLOP",
           description="FLOPs of one decoded token outside the layers: the final norm and the "
                       "output head", reference=PER_LAYER)


@hookimpl
def infermodel_define_quantities(scenario, define):
    st = structure(scenario)
    if st.ffn:
        _define_moe_shape(scenario, define, st)
    if st.attention:
        _define_attention(scenario, define, st)
    _define_rows(scenario, define, st)


__all__: list[str] = []


# ---------------------------------------------------------------------------------
# Approximations, stated in the result with their size
# ---------------------------------------------------------------------------------


def _mean_context(scenario) -> float:
    context = scenario.value("workload.context")
    if context is not None:
        return float(context)
    return scenario.value("workload.prompt_tokens") + scenario.value("workload.output_tokens") / 2


def _longest(scenario) -> int:
    length = scenario.value("workload.sequence_length")
    if length is not None:
        return int(length)
    return scenario.value("workload.prompt_tokens") + scenario.value("workload.output_tokens")


def _sparse_attention_note(scenario) -> str:
    """What DeepSeek Sparse Attention's indexer costs that is not priced, with its size."""
    value = scenario.value
    heads, width, topk = (value(f"model.{k}") for k in ("index_heads", "index_head_dim", "index_topk"))
    context = _mean_context(scenario)
    cache = width + INDEXER_SCALE_BYTES * -(-width // INDEXER_SCALE_GROUP)
    if context > topk:
        span = (f"at the mean decode context of {context:,.0f} tokens, {context / topk:.1f} times "
                f"the {topk:,} positions a query attends")
    else:
        span = f"the same positions within {topk:,} tokens of context, as here"
    return ("DeepSeek Sparse Attention: the indexer's weights and its FP8 key cache are counted, "
            f"but not its work: its scoring of every cached position ({2 * heads * width:,} "
            "FLOPs a query-key pair) and its other kernels (key norm, rotary embedding, "
            f"quantisation, top-k) are not timed (its key reads, {cache} bytes a position and "
            "layer, are in the cache a roofline step reads, but no measured kernel times them), "
            f"and attention is charged over the whole context ({span})")


@hookimpl
def infermodel_transform_quantities(scenario, transform):
    st = structure(scenario)
    if st.indexer:
        transform.warn(_sparse_attention_note(scenario), quantity="attention_flops_decode")
    if st.counts is None or not st.counts["chunked"]:
        return
    chunk = scenario.value("model.attention_chunk")
    window = scenario.value("model.sliding_window")
    context, longest = _mean_context(scenario), _longest(scenario)
    if max(context, longest) <= chunk:
        return   # within the first chunk, min(L, chunk) = L is exact
    parts = []
    worst, typical = chunked_overcount(st.counts, context, chunk, window)
    if worst:
        parts.append(f"the cache at the mean context of {context:,.0f} tokens is at most "
                     f"{100 * worst:.1f} % too large (about {100 * typical:.1f} % for sequences "
                     "spread evenly across a chunk), and decode bytes and attention FLOPs with it")
    full_worst, _ = chunked_overcount(st.counts, longest, chunk, window)
    if full_worst:
        parts.append(f"the cache at full length ({longest:,} tokens) at most {100 * full_worst:.1f} % "
                     "too large, so max_sequences and max_context, which invert it, err low")
    transform.warn(
        f"chunked-local cache counted at min(L, chunk) = up to {chunk:,} positions on "
        f"{st.counts['chunked']} of {scenario.value('model.layers')} layers, though such a layer "
        f"holds only the current chunk's tokens: " + "; ".join(parts),
        quantity="kv_bytes_read_per_sequence" if worst else "kv_bytes_per_sequence")
