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
a second query-sized projection, ``qk_norm`` two head-width norms per layer,
``expert_bias`` the experts' and the router's biases. They change the weights only.

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

from .shapes import (
    ATTENTION_KINDS,
    PatternError,
    Structure,
    attention_layer,
    chunked_overcount,
    kv_positions,
    linear_layer,
    parse_layer_pattern,
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
SINKS = "gpt-oss model card (arXiv:2508.10925) §2 'attention sinks, biases'"

MLA_DECODE = ("absorbed", "naive")


# ---------------------------------------------------------------------------------
# Fields and validation
# ---------------------------------------------------------------------------------


@hookimpl
def infermodel_register_fields(register):
    def model(name, kind, description, **kw):
        register("model", name, kind=kind, description=description, **kw)

    model("layer_pattern", "str",
          'kinds of successive layers, repeated from the first: "full", "sliding", "chunked", '
          '"linear"; "N*kind" repeats (Gemma 3: "5*sliding,full"; default: every layer "full", '
          'or "sliding" when sliding_window is given)', default=None)
    model("sliding_window", "int", "tokens a sliding-window layer attends to (and caches)",
          minimum=1, default=None, quantity="sliding_window")
    model("attention_chunk", "int", "tokens per chunk of a chunked-local attention layer",
          minimum=1, default=None, quantity="attention_chunk")
    model("q_lora_rank", "int", "latent attention: rank of the query down-projection "
          "(unset: a direct query projection)", minimum=1, default=None, quantity="q_lora_rank")
    model("kv_lora_rank", "int", "latent attention: width of the cached key/value latent "
          "(setting it makes the model use latent attention)", minimum=1, default=None,
          quantity="kv_lora_rank")
    model("qk_nope_head_dim", "int", "latent attention: per-head query/key width without rotary "
          "embedding", minimum=1, default=None, quantity="qk_nope_head_dim")
    model("qk_rope_head_dim", "int", "latent attention: rotary key width (shared by the heads, cached)",
          minimum=1, default=None, quantity="qk_rope_head_dim")
    model("v_head_dim", "int", "latent attention: per-head value width", minimum=1, default=None,
          quantity="v_head_dim")
    model("mla_decode", "choice", 'latent attention decode: "absorbed" (up-projection folded into '
          'query and output; vLLM, SGLang) or "naive" (latents decompressed every step)',
          choices=MLA_DECODE, default="absorbed")
    model("linear_key_heads", "int", "fixed-state layers: key heads (Mamba-2: groups)", minimum=1,
          default=None, quantity="linear_key_heads")
    model("linear_value_heads", "int", "fixed-state layers: value heads (Mamba-2: heads)", minimum=1,
          default=None, quantity="linear_value_heads")
    model("linear_key_head_dim", "int", "fixed-state layers: key width per head (Mamba-2: d_state)",
          minimum=1, default=None, quantity="linear_key_head_dim")
    model("linear_value_head_dim", "int", "fixed-state layers: value width per head", minimum=1,
          default=None, quantity="linear_value_head_dim")
    model("linear_conv_kernel", "int", "fixed-state layers: width of the short convolution",
          minimum=1, default=4, quantity="linear_conv_kernel")
    model("linear_state_bits", "float", "fixed-state layers: bits per stored state value",
          minimum=1, maximum=32, default=16.0, quantity="linear_state_bits")
    model("dense_layers", "int", "leading layers with a dense feed-forward block in a mixture of "
          "experts (DeepSeek's first_k_dense_replace)", minimum=0, default=0, quantity="dense_layers")
    model("moe_layer_period", "int", "after the dense layers, every Nth layer is a mixture of "
          "experts and the rest dense (Llama 4 Maverick: 2)", minimum=1, default=1,
          quantity="moe_layer_period")
    model("shared_expert_d_ff", "int", "intermediate width of one shared expert (default: "
          "expert_d_ff)", minimum=1, default=None, quantity="shared_expert_d_ff")
    model("attention_bias", "bool", "Q, K, V and O projections have biases", default=False)
    model("attention_sinks", "bool", "one learnt sink logit per head and layer (gpt-oss)",
          default=False)
    model("attention_output_gate", "bool", "a query-sized gate projection on the attention output "
          "(Qwen3-Next)", default=False)
    model("qk_norm", "bool", "per-head norms of queries and keys (Qwen3, Gemma 3)", default=False)
    model("expert_bias", "bool", "experts' projections and the router have biases (gpt-oss)",
          default=False)


def _pattern_problems(scenario, report) -> tuple[str, ...] | None:
    text = scenario.value("model.layer_pattern")
    if text is None:
        return None
    try:
        pattern = parse_layer_pattern(text)
    except PatternError as exc:
        report("model.layer_pattern", f"{exc}",
               expected='comma-separated layer kinds (full, sliding, chunked, linear), "N*kind" to '
                        'repeat, e.g. "5*sliding,full"')
        return None
    layers = scenario.value("model.layers")
    if len(pattern) > layers:
        report("model.layer_pattern",
               f"the pattern names {len(pattern)} layers but the model has {layers}",
               expected=f"at most {layers} layer kinds (the pattern repeats to cover the layers)")
        return None
    return pattern


@hookimpl
def infermodel_validate_scenario(scenario, report):
    value = scenario.value
    pattern = _pattern_problems(scenario, report)
    kinds = set(pattern) if pattern else ({"sliding"} if value("model.sliding_window") else set())
    if "sliding" in kinds and value("model.sliding_window") is None:
        report("model.sliding_window", "the layer pattern has sliding-window layers but no window",
               expected="model.sliding_window, the tokens each such layer attends to")
    if "chunked" in kinds and value("model.attention_chunk") is None:
        report("model.attention_chunk", "the layer pattern has chunked-local layers but no chunk size",
               expected="model.attention_chunk, the tokens per chunk")
    if "linear" in kinds:
        missing = [n for n in ("linear_key_heads", "linear_value_heads", "linear_key_head_dim",
                               "linear_value_head_dim") if value(f"model.{n}") is None]
        for name in missing:
            report(f"model.{name}", "the layer pattern has fixed-state (linear) layers but not "
                   "their dimensions", expected=f"model.{name}, a positive integer")
    if kinds and not kinds & set(ATTENTION_KINDS):
        report("model.layer_pattern", "no layer keeps a cache: the pattern has only linear layers",
               expected="at least one full, sliding or chunked layer")
    if value("model.kv_lora_rank") is not None:
        for name in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            if value(f"model.{name}") is None:
                report(f"model.{name}", "latent attention (kv_lora_rank) needs this width",
                       expected="a positive integer from the model's config")
    else:
        for name in ("q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            if value(f"model.{name}") is not None:
                report(f"model.{name}", f"{name} is a latent-attention width, but kv_lora_rank is unset",
                       expected="model.kv_lora_rank as well, or no latent-attention fields")
    experts = value("model.experts")
    if experts <= 1:
        for name in ("dense_layers", "shared_expert_d_ff"):
            if scenario.given(f"model.{name}") and value(f"model.{name}") not in (None, 0):
                report(f"model.{name}", f"{name} describes a mixture of experts, but model.experts = 1",
                       expected="model.experts > 1, or no such key")
    if value("model.moe_layer_period") > value("model.layers"):
        report("model.moe_layer_period", f"a period of {value('model.moe_layer_period')} layers is "
               f"longer than the model's {value('model.layers')}",
               expected=f"at most {value('model.layers')}")
    if value("model.dense_layers") >= value("model.layers") and experts > 1:
        report("model.dense_layers", f"dense_layers = {value('model.dense_layers')} leaves no "
               f"mixture-of-experts layer among {value('model.layers')}",
               expected=f"fewer than {value('model.layers')}")


# ---------------------------------------------------------------------------------
# Quantities
# ---------------------------------------------------------------------------------


def _define_moe_shape(scenario, define):
    value = scenario.value
    period = value("model.moe_layer_period")
    if value("model.experts") <= 1:
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
        define("kv_layers", S.layers_full_attention + S.layers_sliding_window + S.layers_chunked_local,
               unit="1", description="layers that keep a key/value cache", reference=WINDOWS)
    else:
        define("kv_layers", S.layers, unit="1", description="layers that keep a key/value cache (all)",
               reference=MLA if st.mla else SINKS)


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
    define("attention_flops_per_position", layer.decode_pair, unit="FLOP",
           description=f"decode attention FLOPs per cached position and layer ({layer.decode_how})",
           reference=MLA if st.mla else WINDOWS)
    define("attention_flops_per_pair_prefill", layer.prefill_pair, unit="FLOP",
           description="prefill attention FLOPs per query-key pair and layer", reference=MLA if st.mla else WINDOWS)
    return layer.norms


def _define_linear_layer(define, st: Structure):
    """One fixed-state layer: weights, state and recurrence FLOPs; returns the norms of all."""
    if not st.linear:
        return 0
    layer = linear_layer()
    define("params_linear_layer", layer.params, unit="param",
           description="weights of one fixed-state layer: in-projection (q, k, v, gate), "
                       "per-head gates, short convolution, decay constants, out-projection",
           reference=LINEAR)
    define("linear_state_values_per_layer", layer.state_values,
           unit="1", description="state values one sequence keeps per fixed-state layer: the "
                                 "recurrent state and the convolution's last tokens",
           reference=LINEAR)
    define("linear_state_bytes_per_sequence",
           S.layers_linear_attention * S.linear_state_values_per_layer * S.linear_state_bits / 8,
           unit="B", description="fixed state of one sequence in all fixed-state layers, "
                                 "the same at every context length", reference=LINEAR)
    define("linear_flops_per_token", layer.flops_per_token, unit="FLOP",
           description="recurrence FLOPs per token and fixed-state layer (about four "
                       "multiply-adds per state value)", reference=LINEAR)
    return S.layers_linear_attention * layer.norms


def _define_attention(scenario, define, st: Structure):
    counts = st.counts
    _define_layer_counts(define, st)
    norms = _define_attention_layer(scenario, define, st)
    linear_norms = _define_linear_layer(define, st)
    kv_layers_count = S.kv_layers
    params = kv_layers_count * S.params_attention_layer
    if st.linear:
        params += S.layers_linear_attention * S.params_linear_layer
    define("params_attention_stack", params, unit="param",
           description="attention and fixed-state layer weights in all layers", reference=MLA if st.mla else WINDOWS)
    define("params_norm_attention", kv_layers_count * norms + linear_norms, unit="param",
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
        decode += S.layers_linear_attention * S.linear_flops_per_token
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


@hookimpl
def infermodel_define_quantities(scenario, define):
    st = structure(scenario)
    if st.ffn:
        _define_moe_shape(scenario, define)
    if st.attention:
        _define_attention(scenario, define, st)


__all__ = ["MLA_DECODE"]


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


@hookimpl
def infermodel_transform_quantities(scenario, transform):
    st = structure(scenario)
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
