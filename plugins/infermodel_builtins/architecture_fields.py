"""The ``[model]`` fields of the architecture lever, and their checks.

Split from :mod:`.architecture` (whose hooks call :func:`register_fields` and
:func:`validate`) so that the lever's quantities and its schema each fit in one module.
"""

from __future__ import annotations

import math

from .shapes import (
    ATTENTION_KINDS,
    MAX_JOINT_PERIOD,
    STATE_KINDS,
    LayerSpec,
    PatternError,
    parse_layers,
)

MLA_DECODE = ("absorbed", "naive")
#: DeepSeek Sparse Attention's indexer: all three, or none.
INDEXER_FIELDS = ("index_heads", "index_head_dim", "index_topk")
#: What a query/key norm normalises: each head's vector, or every head's together.
QK_NORM_SCOPES = ("head", "layer")
#: What a router multiplies in: the activations' 16 bits, or 32 (a gate kept in float32).
ROUTER_DTYPES = ("bf16", "fp32")
PATTERN_EXPECTED = ('comma-separated layers, "N*layer" to repeat; a layer is a mixer (full, '
                    'sliding, chunked, linear, lightning, mamba, mamba2, projection, none), '
                    'optionally "+" a feed-forward block (dense, dense:WIDTH, moe, projection, '
                    'none), e.g. "5*sliding,full" or "3*mamba2+none,full+dense"')


def _attention_fields(model) -> None:
    model("layer_pattern", "str",
          'mixers (and feed-forward blocks) of successive layers, repeated from the first: '
          '"full", "sliding", "chunked", "linear" (gated delta-net), "lightning", "mamba", '
          '"mamba2", "projection", "none", each optionally "+dense", "+dense:WIDTH", "+moe", '
          '"+projection" or "+none"; "N*layer" repeats (Gemma 3: "5*sliding,full"; Nemotron-H: '
          '"mamba2+none,none+dense,..."; default: every layer "full", or "sliding" when '
          'sliding_window is given)', default=None)
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
    model("index_heads", "int", "DeepSeek Sparse Attention (latent attention only): heads of "
          "the lightning indexer that picks the positions each query attends (DeepSeek-V3.2, "
          "GLM-5: index_n_heads); setting it, with index_head_dim and index_topk, counts the "
          "indexer's weights and its FP8 key cache", minimum=1, default=None,
          quantity="index_heads")
    model("index_head_dim", "int", "DeepSeek Sparse Attention: width of the indexer's query "
          "and key heads (its cache holds one such FP8 key a token and layer, with a 4-byte "
          "scale per 128 values)", minimum=1, default=None, quantity="index_head_dim")
    model("index_topk", "int", "DeepSeek Sparse Attention: positions each query attends at "
          "most (the indexer's top-k)", minimum=1, default=None, quantity="index_topk")
    model("mla_decode", "choice", 'latent attention decode: "absorbed" (up-projection folded into '
          'query and output; vLLM, SGLang) or "naive" (latents decompressed every step)',
          choices=MLA_DECODE, default="absorbed")
    model("attention_bias", "bool", "Q, K, V and O projections have biases", default=False)
    model("attention_sinks", "bool", "one learnt sink logit per head and layer (gpt-oss)",
          default=False)
    model("attention_output_gate", "bool", "a query-sized gate projection on the attention output "
          "(Qwen3-Next)", default=False)
    model("qk_norm", "bool", "norms of queries and keys (Qwen3, Gemma 3: per head; MiniMax-M2: "
          "over the layer, qk_norm_scope)", default=False)
    model("rotary_fraction", "float", "share of each query and key head the rotary position "
          "embedding turns (its kernel's work, where the engine launches one): 1 by default; "
          "0 where attention takes no position embedding (Jamba, Nemotron-H); a partial "
          "rotary embedding's share (Qwen3-Next's partial_rotary_factor 0.25, MiniMax's "
          "rotary_dim 64 of head_dim 128)", minimum=0.0, maximum=1.0, default=1.0)
    model("qk_norm_scope", "choice", 'what qk_norm normalises: "head" (each head\'s query and key, '
          'head_dim wide) or "layer" (all queries together and all keys together, MiniMax-M2\'s '
          "per_layer: under tensor parallelism each layer all-reduces their squared sums)",
          choices=QK_NORM_SCOPES, default="head")


def _state_fields(model) -> None:
    model("linear_key_heads", "int", "gated delta-net layers: key heads", minimum=1,
          default=None, quantity="linear_key_heads")
    model("linear_value_heads", "int", "gated delta-net layers: value heads", minimum=1,
          default=None, quantity="linear_value_heads")
    model("linear_key_head_dim", "int", "gated delta-net layers: key width per head",
          minimum=1, default=None, quantity="linear_key_head_dim")
    model("linear_value_head_dim", "int", "gated delta-net layers: value width per head", minimum=1,
          default=None, quantity="linear_value_head_dim")
    model("linear_conv_kernel", "int", "gated delta-net layers: width of the short convolution",
          minimum=1, default=4, quantity="linear_conv_kernel")
    model("linear_state_bits", "float", "bits per stored state value of every fixed-state layer "
          "(linear attention, Mamba): 16 by default, the cache's own default width and what "
          "vLLM keeps (the model's dtype); 32 where the engine keeps the state in fp32 (SGLang's "
          "default, vLLM with mamba_ssm_cache_dtype = float32)",
          minimum=1, maximum=32, default=16.0, quantity="linear_state_bits")
    model("mamba_d_state", "int", "Mamba layers: state size per channel (Mamba-2: per group), "
          "n", minimum=1, default=None, quantity="mamba_d_state")
    model("mamba_d_conv", "int", "Mamba layers: width of the short convolution (default 4)",
          minimum=1, default=None, quantity="mamba_d_conv")
    model("mamba_expand", "int", "Mamba layers: inner width over the model width (default 2)",
          minimum=1, default=None, quantity="mamba_expand")
    model("mamba_dt_rank", "int", "Mamba-1 layers: rank of the Δ projection (default ⌈d/16⌉)",
          minimum=1, default=None, quantity="mamba_dt_rank")
    model("mamba_heads", "int", "Mamba-2 layers: heads", minimum=1, default=None,
          quantity="mamba_heads")
    model("mamba_head_dim", "int", "Mamba-2 layers: channels per head (default expand·d/heads)",
          minimum=1, default=None, quantity="mamba_head_dim")
    model("mamba_groups", "int", "Mamba-2 layers: groups sharing B and C (default 1)", minimum=1,
          default=None, quantity="mamba_groups")
    model("mamba_conv_bias", "bool", "Mamba layers: the convolution has biases", default=True)
    model("mamba_proj_bias", "bool", "Mamba layers: the in- and out-projections have biases",
          default=False)
    model("mamba_inner_norms", "bool", "Mamba-1 layers: norms of Δ, B and C (Jamba)",
          default=False)


def _ffn_fields(model) -> None:
    model("dense_layers", "int", "leading layers with a dense feed-forward block in a mixture of "
          "experts (DeepSeek's first_k_dense_replace)", minimum=0, default=0, quantity="dense_layers")
    model("moe_layer_period", "int", "after the dense layers, every Nth layer is a mixture of "
          "experts and the rest dense (Llama 4 Maverick: 2)", minimum=1, default=1,
          quantity="moe_layer_period")
    model("shared_expert_d_ff", "int", "intermediate width of one shared expert (default: "
          "expert_d_ff)", minimum=1, default=None, quantity="shared_expert_d_ff")
    model("expert_bias", "bool", "experts' projections and the router have biases (gpt-oss)",
          default=False)
    model("moe_latent_size", "int", "width the routed experts read and write (a latent mixture "
          "of experts, Nemotron 3 Super and Ultra): each mixture-of-experts layer projects a "
          "token down to it before its experts and back up after them (two d × l matrices); "
          "the router and the shared experts keep the model width (unset: the model width)",
          minimum=1, default=None, quantity="moe_latent_size")
    model("router_dtype", "choice", 'what a mixture of experts\' router multiplies in: "bf16" '
          '(the activations\' 16 bits) or "fp32" (a gate kept in 32 bits and fed 32-bit '
          "activations, as vLLM and SGLang run MiniMax-M2's: its GEMM runs at the card's 32-bit "
          "rate, efficiency.fp32_matmul)", choices=ROUTER_DTYPES, default="bf16")
    model("score_correction_bias", "bool", "each MoE router adds one fp32 bias per expert to "
          "its scores (DeepSeek-V3's e_score_correction_bias, topk_method noaux_tc)",
          default=False)


def register_fields(register) -> None:
    def model(name, kind, description, **kw):
        register("model", name, kind=kind, description=description, **kw)

    _attention_fields(model)
    _state_fields(model)
    _ffn_fields(model)


# ---------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------


def _pattern(scenario, report) -> tuple[LayerSpec, ...] | None:
    text = scenario.value("model.layer_pattern")
    if text is None:
        return None
    try:
        specs = parse_layers(text)
    except PatternError as exc:
        report("model.layer_pattern", f"{exc}", expected=PATTERN_EXPECTED)
        return None
    layers = scenario.value("model.layers")
    if len(specs) > layers:
        report("model.layer_pattern",
               f"the pattern names {len(specs)} layers but the model has {layers}",
               expected=f"at most {layers} layer kinds (the pattern repeats to cover the layers)")
        return None
    return specs


def _needs(scenario, report, kind: str, names: tuple[str, ...], what: str) -> None:
    for name in names:
        if scenario.value(f"model.{name}") is None:
            report(f"model.{name}", f"the layer pattern has {what} layers but not their dimensions",
                   expected=f"model.{name}, a positive integer")


def _check_mixers(scenario, report, kinds: set[str]) -> None:
    value = scenario.value
    if "sliding" in kinds and value("model.sliding_window") is None:
        report("model.sliding_window", "the layer pattern has sliding-window layers but no window",
               expected="model.sliding_window, the tokens each such layer attends to")
    if "chunked" in kinds and value("model.attention_chunk") is None:
        report("model.attention_chunk", "the layer pattern has chunked-local layers but no chunk size",
               expected="model.attention_chunk, the tokens per chunk")
    if "linear" in kinds:
        _needs(scenario, report, "linear", ("linear_key_heads", "linear_value_heads",
                                            "linear_key_head_dim", "linear_value_head_dim"),
               "fixed-state (linear)")
    if "mamba" in kinds:
        _needs(scenario, report, "mamba", ("mamba_d_state",), "Mamba-1")
    if "mamba2" in kinds:
        _needs(scenario, report, "mamba2", ("mamba_d_state", "mamba_heads"), "Mamba-2")
        heads = value("model.mamba_heads")
        inner = (value("model.mamba_expand") or 2) * value("model.d_model")
        if heads and value("model.mamba_head_dim") is None and inner % heads:
            report("model.mamba_head_dim", f"expand·d = {inner} is not a multiple of "
                   f"mamba_heads = {heads}", expected="model.mamba_head_dim, the channels per head")
    if kinds and not kinds & set(ATTENTION_KINDS):
        only = ", ".join(sorted(kinds))
        report("model.layer_pattern", f"no layer keeps a cache: the pattern has only {only} layers",
               expected="at least one full, sliding or chunked layer (a pure state-space model "
                        "is not modelled)")


def _check_ffn(scenario, report, specs: tuple[LayerSpec, ...]) -> None:
    value = scenario.value
    given = [s.ffn is not None for s in specs]
    if any(given) and not all(given):
        report("model.layer_pattern", "some layers name their feed-forward block and others do "
               "not", expected='a "+dense", "+moe", "+projection" or "+none" on every layer of '
                               'the pattern, or on none')
        return
    if all(given):
        if any(s.ffn == "moe" for s in specs) and value("model.experts") <= 1:
            report("model.layer_pattern", 'the pattern has "+moe" layers but model.experts = 1',
                   expected="model.experts > 1, or no +moe layers")
        for name, neutral in (("dense_layers", 0), ("moe_layer_period", 1)):
            if value(f"model.{name}") != neutral:
                report(f"model.{name}", f"{name} has no effect: the layer pattern names every "
                       "layer's feed-forward block", expected=f"no {name} (or {neutral})")
    period = value("model.moe_layer_period") if value("model.experts") > 1 else 1
    if math.lcm(len(specs), period) > MAX_JOINT_PERIOD:
        report("model.layer_pattern", f"a pattern of {len(specs)} layers and a mixture-of-experts "
               f"period of {period} repeat together only every {math.lcm(len(specs), period):,} "
               "layers", expected=f"a combined period of at most {MAX_JOINT_PERIOD:,} layers")


def _check_latent(scenario, report) -> None:
    value = scenario.value
    if value("model.qk_norm_scope") == "layer" and not value("model.qk_norm"):
        report("model.qk_norm_scope", 'qk_norm_scope = "layer" says what the query/key norms '
               "normalise, but the model has none (model.qk_norm = false)",
               expected="model.qk_norm = true as well, or no qk_norm_scope")
    elif value("model.qk_norm_scope") == "layer" and value("model.kv_lora_rank") is not None:
        report("model.qk_norm_scope", 'qk_norm_scope = "layer" describes norms over a layer\'s '
               "query and key heads, which latent attention does not have (its norms are on "
               "the latents)", expected='"head", or no qk_norm_scope')
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
        for name in INDEXER_FIELDS:
            if value(f"model.{name}") is not None:
                report(f"model.{name}", f"{name} describes DeepSeek Sparse Attention's indexer, "
                       "which works on latent attention, but kv_lora_rank is unset",
                       expected="model.kv_lora_rank and the other latent-attention fields as "
                                "well, or no index_* fields")
        return
    given = [name for name in INDEXER_FIELDS if value(f"model.{name}") is not None]
    if given and len(given) < len(INDEXER_FIELDS):
        for name in INDEXER_FIELDS:
            if name not in given:
                report(f"model.{name}", "DeepSeek Sparse Attention's indexer needs its heads, "
                       f"their width and its top-k together ({', '.join(given)} given)",
                       expected="a positive integer from the model's config (index_n_heads, "
                                "index_head_dim, index_topk), or none of the three")


def _check_moe(scenario, report) -> None:
    value = scenario.value
    experts = value("model.experts")
    if experts <= 1:
        for name in ("dense_layers", "shared_expert_d_ff", "moe_latent_size"):
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


def validate(scenario, report) -> None:
    specs = _pattern(scenario, report)
    if specs:
        kinds = {s.mixer for s in specs}
    else:
        kinds = {"sliding"} if scenario.value("model.sliding_window") else set()
    _check_mixers(scenario, report, kinds)
    if specs:
        _check_ffn(scenario, report, specs)
    _check_latent(scenario, report)
    _check_moe(scenario, report)


__all__ = ["MLA_DECODE", "STATE_KINDS", "register_fields", "validate"]
