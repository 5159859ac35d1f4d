"""The quantisation lever's weight classes: how many parameters, tensors, rows and scale
entries each class holds, and its bytes (``weight_bytes_<class>``) in the format the lever
gives it.

A class's bytes are ⌈codes·bits/8⌉ plus its scale entries' bytes: one per group of
values, per block, per row (output channel) or per tensor, by the format's granularity.
The routers of a mixture of experts and the groups a checkpoint leaves out of its format
stay in 16 bits (:func:`router_kept`). :mod:`.quantization` chooses the formats
(:func:`.quantization.weight_formats`) and sums the classes into ``weight_bytes``.

References: Module 10: Inference and serving, "Granularity costs metadata", §11
"Account for the whole weight artifact".
"""

from __future__ import annotations

import sympy
from sympy import ceiling

from infermodel.plugin import S

from . import M10
from .formats import GRANULARITY, Format
from .shapes import expert_block, moe_layer_count, structure

ARTIFACT = f"{M10}, §11 'Account for the whole weight artifact'; {GRANULARITY}"
#: Weight classes: (key in the lever table, quantity suffix, what it holds).
CLASSES = (("linear", "linear", "block linear weights (attention and feed-forward)"),
           ("embedding", "embedding", "embedding table and output head"),
           ("norm", "norm", "normalisation weights"))
#: The class of routed experts' matrices, split from the block linears when its format differs.
EXPERTS = ("experts", "experts", "routed experts' matrices")
#: The feed-forward down projections, split from the block linears when their format differs
#: (uniform dense models: the last matrix of every feed-forward block, d_ff × d_model).
DOWN = ("down", "down", "feed-forward down projections")
DOWN_NOTE = (f"{M10}, Lab 4 'try next' (leave the down-projections at eight bits) and 'Activation "
             "range can be much harder than weight range' (the worst activation channel sat in a "
             "down-projection)")
SPLIT_LINEAR = "block linear weights other than the routed experts and the router (attention, "\
               "dense and shared feed-forward)"
ROUTER = ("vLLM's mixture-of-experts models build the router gate unquantised (quant_config=None: "
          "DeepSeek-V2/V3, Qwen2/3-MoE, Mixtral), and FP8, AWQ and GPTQ checkpoints store it in "
          "16 bits; DeepSeek-V3 keeps e_score_correction_bias in fp32")
#: Groups a checkpoint may keep out of its format (``model.unquantized``): every attention
#: layer's projections; the layers without attention (state spaces, linear attention); the
#: projections of latent attention but its output projection (NVIDIA's NVFP4 checkpoints of
#: DeepSeek-V3: ``q_a_proj``, ``q_b_proj``, ``kv_a_proj_with_mqa``, ``kv_b_proj``).
UNQUANTIZED_GROUPS = ("attention", "mixers", "latent")


def _classes(formats) -> tuple:
    return (CLASSES + ((EXPERTS,) if "experts" in formats else ())
            + ((DOWN,) if "down" in formats else ()))


def _class_params(key, split=False, router=False, down=False):
    if key == "down":
        return S.params_ffn_down
    if key == "linear":
        linear = S.params_block_linear - S.params_routed_experts if split else S.params_block_linear
        linear = linear - S.params_ffn_down if down else linear
        # The routers and the groups the checkpoint leaves out (0 when none) keep 16 bits.
        return linear - S.params_router - S.params_router_fp32 - S.params_unquantized if router \
            else linear
    if key == "experts":
        return S.params_routed_experts
    if key == "embedding":
        return S.params_embedding + S.params_head
    return S.params_norm


def _routed(scenario):
    return moe_layer_count(scenario) * S.experts


def _class_tensors(scenario, key, split=False, router=False, down=False):
    value = scenario.value
    if key == "down":
        return S.layers
    if key == "linear" and down:
        return S.layers * (4 + S.ffn_matrices - 1)
    if key == "experts":
        return _routed(scenario) * S.ffn_matrices
    if key == "linear":
        gate = 1 if value("model.experts") > 1 and not router else 0
        tensors = S.layers * (4 + (S.experts + S.shared_experts) * S.ffn_matrices + gate)
        if value("model.moe_latent_size") is not None:
            tensors += 2 * moe_layer_count(scenario)   # the latent down and up projections
        return tensors - _routed(scenario) * S.ffn_matrices if split else tensors
    if key == "embedding":
        return sympy.Integer(1 if value("model.tied_embeddings") else 2)
    return 2 * S.layers + 1


def _class_rows(scenario, key, split=False, router=False, down=False):
    if key == "down":  # one output channel per row: d_model rows in every layer
        return S.layers * S.d_model
    if key == "linear" and down:
        return S.layers * (S.query_width + 2 * S.kv_heads * S.head_dim + S.d_model
                           + (S.ffn_matrices - 1) * S.d_ff)
    per_expert = (S.ffn_matrices - 1) * S.expert_d_ff + S.d_model
    # A latent mixture of experts' routed experts write l-wide rows (their down
    # projection), its two projections l + d rows in every MoE layer.
    latent = scenario.value("model.moe_latent_size") is not None
    routed = (S.ffn_matrices - 1) * S.expert_d_ff + S.moe_latent_size if latent else per_expert
    if key == "experts":
        return _routed(scenario) * routed
    if key == "linear":
        gate = S.experts if scenario.value("model.experts") > 1 and not router else 0
        experts = (S.experts * routed + S.shared_experts * per_expert if latent
                   else (S.experts + S.shared_experts) * per_expert)
        rows = S.layers * (S.query_width + 2 * S.kv_heads * S.head_dim + S.d_model + experts + gate)
        if latent:
            rows += moe_layer_count(scenario) * (S.moe_latent_size + S.d_model)
        return rows - _routed(scenario) * routed if split else rows
    if key == "embedding":
        return (S.params_embedding + S.params_head) / S.d_model
    return 2 * S.layers + 1


def _scale_count(scenario, key, fmt: Format, split=False, router=False, down=False):
    if fmt.granularity == "group":
        how = (f"one per {fmt.block_side}×{fmt.block_side} block" if fmt.block_side
               else f"one per group of {fmt.group_size} values")
        return _class_params(key, split, router, down) / fmt.group_size, how
    if fmt.granularity == "channel":
        return _class_rows(scenario, key, split, router, down), "one per row (output channel)"
    return _class_tensors(scenario, key, split, router, down), "one per tensor"


def router_kept(scenario, formats) -> bool:
    """Some block linears stay in 16 bits: the routers of a mixture of experts, and the
    groups the checkpoint leaves out, when the block linears take the checkpoint's format
    (a format the lever gives applies to every block linear, as stated).
    """
    kept = scenario.value("model.experts") > 1 or scenario.value("model.unquantized")
    return bool(kept) and formats["linear"][1].startswith("the checkpoint")


def kept_groups(scenario) -> set[str]:
    """The groups ``model.unquantized`` names (``"attention"`` includes the latent
    projections, so it stands for both).
    """
    kept = {g.strip() for g in (scenario.value("model.unquantized") or "").split(",") if g.strip()}
    return kept | {"latent"} if "attention" in kept else kept


def _unquantized_params(scenario):
    kept = kept_groups(scenario)
    st = structure(scenario)
    attention = S.kv_layers * S.params_attention_layer if st.attention else S.params_attention
    groups = {"attention": attention, "mixers": S.params_attention - attention,
              "latent": S.kv_layers * latent_projection_params(scenario) if st.mla else 0}
    if "attention" in kept:
        kept.discard("latent")  # the latent projections are part of the attention layer
    return sum((groups[g] for g in UNQUANTIZED_GROUPS if g in kept), sympy.Integer(0))


def latent_projection_params(scenario):
    """One latent-attention layer's projections but its output projection (h·d_v·d and its
    bias): the query path, the joint key/value down-projection and the up-projection, and
    DeepSeek Sparse Attention's indexer projections where the model has them.
    """
    output = S.heads * S.v_head_dim * S.d_model + (S.d_model if scenario.value("model.attention_bias") else 0)
    return S.params_attention_layer - output


def _define_router(scenario, define):
    """The routers, kept in 16 bits (score-correction biases in 32) whatever the format, and
    the groups the checkpoint leaves out of it.
    """
    moe = scenario.value("model.experts") > 1
    bias = S.experts if scenario.value("model.expert_bias") else 0
    define("params_router", moe_layer_count(scenario) * (S.d_model * S.experts + bias) if moe else 0,
           unit="param", description="router weights (and biases) of every mixture-of-experts "
                                     "layer", reference=ROUTER)
    define("params_unquantized", _unquantized_params(scenario), unit="param",
           description="block-linear weights the checkpoint leaves out of its format "
                       f"(model.unquantized = {scenario.value('model.unquantized')!r}), 16-bit",
           reference=ARTIFACT)
    score = moe_layer_count(scenario) * S.experts if scenario.value("model.score_correction_bias") else 0
    define("params_router_fp32", score, unit="param",
           description="score-correction biases of the routers (fp32)", reference=ROUTER)
    define("weight_bytes_router", 2 * (S.params_router + S.params_unquantized) + 4 * S.params_router_fp32,
           unit="B",
           description="bytes of the block linears kept out of the checkpoint's format: the "
                       "routers (16-bit weights and biases, fp32 score-correction biases) and the "
                       "groups model.unquantized names (16-bit)",
           reference=ROUTER)


def define_weights(scenario, define, formats) -> None:
    """Every weight class's parameters, scale entries and bytes in its format
    (``formats``: :func:`.quantization.weight_formats`), and the artifact's bits per weight.
    """
    split = "experts" in formats
    router = router_kept(scenario, formats)
    if router:
        _define_router(scenario, define)
    down = "down" in formats
    if down:
        define("params_ffn_down", S.layers * S.d_ff * S.d_model, unit="param",
               description="weights of the feed-forward down projections (d_ff × d_model in "
                           "every layer)", reference=DOWN_NOTE)
    if split:
        define("params_routed_experts",
               moe_layer_count(scenario) * S.experts * expert_block(scenario),
               unit="param", description="weights of the routed experts' matrices (biases excluded)",
               reference=ARTIFACT)
    for key, suffix, what in _classes(formats):
        fmt, source = formats[key]
        if key == "linear" and split:
            what = SPLIT_LINEAR
        if key == "linear" and down:
            what = "block linears other than the feed-forward down projections"
        label = fmt.label() + ("" if source == "[levers.quantization]" else f"; {source}")
        params = _class_params(key, split, router, down)
        define(f"weight_code_bits_{suffix}", fmt.bits, unit="bit",
               description=f"bits per stored code of the {what}: {label}", reference=ARTIFACT)
        code_bytes = ceiling(S[f"weight_code_bits_{suffix}"] * params / 8)
        if fmt.granularity == "none":
            total = code_bytes
        else:
            count, how = _scale_count(scenario, key, fmt, split, router, down)
            if isinstance(count, sympy.Integer):
                count = int(count)
            define(f"weight_scales_{suffix}", count, unit="1",
                   description=f"scale entries of the {what} ({how})", reference=GRANULARITY)
            define(f"weight_scale_bits_{suffix}", fmt.metadata_bits, unit="bit",
                   description=f"bits per scale entry of the {what} (scale "
                               f"{fmt.scale_bits:g} + zero point {fmt.zero_point_bits:g})",
                   reference=GRANULARITY)
            total = code_bytes + ceiling(S[f"weight_scales_{suffix}"] * S[f"weight_scale_bits_{suffix}"] / 8)
        define(f"weight_bytes_{suffix}", total, unit="B",
               description=f"bytes of the {what}: ⌈codes·bits/8⌉ + scale bytes", reference=ARTIFACT)
        define(f"bits_per_weight_{suffix}", 8 * S[f"weight_bytes_{suffix}"] / params, unit="bit",
               description=f"effective bits per weight of the {what}, metadata included",
               reference=GRANULARITY)
    define("bits_per_weight_effective", 8 * S.weight_bytes / S.params_total, unit="bit",
           description="effective bits per parameter of the whole artifact, metadata included",
           reference=ARTIFACT)


__all__ = [
    "ARTIFACT",
    "CLASSES",
    "DOWN",
    "DOWN_NOTE",
    "EXPERTS",
    "ROUTER",
    "SPLIT_LINEAR",
    "UNQUANTIZED_GROUPS",
    "define_weights",
    "latent_projection_params",
    "router_kept",
]
