"""Shape formulas: the weights, cached values and FLOPs of one block of each kind.

Every function returns sympy expressions over the symbols it is given, so the same
formula serves the target model (symbols of the scenario's quantities) and a draft
model (the speculative lever's ``spec_draft_*`` symbols): a draft's parameter count is
the target's formula with the draft's widths, and cannot drift from it.

**A uniform stack** (:class:`StackShape`, :func:`stack_params`): L layers of width d,
query width d_q, key/value width d_kv, m feed-forward matrices of width f, E experts
(k active, s shared) with a router of r weights per layer, vocabulary V::

    attention   L·(2·d·d_q + 2·d·d_kv)                  (Q, O; K, V)
    ffn         L·((E + s)·m·d·f + r)                  (every expert)
    ffn_active  L·((k + s)·m·d·f + r)                  (the experts one token uses)
    norms       (2·L + 1)·d                            (two per block and a final one)
    embedding   V·d, head V·d (0 when tied)

References: Module 10: Inference and serving, §11 'Account for the whole weight
artifact'; the per-layer forms cite their own papers (see :mod:`.terms` and the
architecture plugin).
"""

from __future__ import annotations

from typing import Any

import attrs
import sympy
from sympy import floor

from infermodel.plugin import S

from .structure import Structure, structure


@attrs.frozen
class StackShape:
    """The widths of a uniform stack, as symbols or numbers."""

    layers: Any
    d_model: Any
    query_width: Any
    kv_width: Any
    ffn_width: Any
    ffn_matrices: Any
    vocab: Any
    tied: bool
    experts: Any = 1
    active_experts: Any = 1
    shared_experts: Any = 0
    router: Any = 0


@attrs.frozen
class ParamClasses:
    """The parameters of a uniform stack by class."""

    attention: Any
    ffn: Any
    ffn_active: Any
    norms: Any
    embedding: Any
    head: Any
    tied: bool

    @property
    def total(self):
        return self.attention + self.ffn + self.norms + self.embedding + self.head

    @property
    def lookup(self):
        """Weights a token looks up rather than multiplies: an untied input table (0 when tied)."""
        return 0 if self.tied else self.embedding


def ffn_block(ffn_matrices, d_model, width):
    """Weights of one feed-forward block (one expert): m·d·f."""
    return ffn_matrices * d_model * width


def attention_projections(layers, d_model, query_width, kv_width):
    """Q, K, V and O projection weights of ``layers`` ordinary attention layers."""
    return layers * (2 * d_model * query_width + 2 * d_model * kv_width)


def stack_params(shape: StackShape) -> ParamClasses:
    """The parameters of a uniform stack (the module docstring states the formulas).

    >>> p = stack_params(StackShape(2, 8, 8, 4, 16, 3, 100, tied=True))
    >>> p.total, p.head
    (1992, 0)
    """
    expert = ffn_block(shape.ffn_matrices, shape.d_model, shape.ffn_width)
    return ParamClasses(
        attention=attention_projections(shape.layers, shape.d_model, shape.query_width,
                                        shape.kv_width),
        ffn=shape.layers * ((shape.experts + shape.shared_experts) * expert + shape.router),
        ffn_active=shape.layers * ((shape.active_experts + shape.shared_experts) * expert
                                   + shape.router),
        norms=(2 * shape.layers + 1) * shape.d_model,
        embedding=shape.vocab * shape.d_model,
        head=sympy.Integer(0) if shape.tied else shape.vocab * shape.d_model, tied=shape.tied)


def target_stack(scenario) -> StackShape:
    """The scenario's own model as a uniform stack of its quantities' symbols."""
    moe = scenario.value("model.experts") > 1
    return StackShape(layers=S.layers, d_model=S.d_model, query_width=S.query_width,
                      kv_width=S.kv_heads * S.head_dim, ffn_width=S.expert_d_ff,
                      ffn_matrices=S.ffn_matrices, vocab=S.vocab,
                      tied=bool(scenario.value("model.tied_embeddings")), experts=S.experts,
                      active_experts=S.active_experts, shared_experts=S.shared_experts,
                      router=S.d_model * S.experts if moe else sympy.Integer(0))


def kv_bytes_per_token(layers, kv_width, value_bytes):
    """Cache bytes per token of a uniform stack: a key and a value per layer, 2·L·d_kv·b."""
    return 2 * layers * kv_width * value_bytes


def attention_decode_flops(layers, query_width, context):
    """Attention FLOPs of one decode step over ``context`` cached positions: 4·L·d_q·c."""
    return 4 * layers * query_width * context


def attention_prefill_flops(layers, query_width, n):
    """Causal attention FLOPs of an n-token prompt (half the square): 2·L·d_q·n²."""
    return 2 * layers * query_width * n**2


def tensor_parallel_reductions(scenario):
    """All-reduces a tensor-parallel forward pass makes per token: one after each layer's
    attention (mixer) and one after its feed-forward block, 2·L (``sublayers`` when some
    layers have no mixer or no feed-forward block).
    """
    return S.sublayers if structure(scenario).missing_sublayers else 2 * S.layers


def qk_norm_reductions(scenario):
    """All-reduces a tensor-parallel forward pass adds per token for query/key norms over
    the whole layer (``qk_norm_scope = "layer"``, MiniMax-M2): each card holds a slice of
    the heads, so each attention layer all-reduces the squared sums of its queries and
    keys (two fp32 values a token, :data:`QK_NORM_REDUCED_BYTES`); 0 for per-head norms.
    """
    value = scenario.value
    if not value("model.qk_norm") or value("model.qk_norm_scope") != "layer":
        return sympy.Integer(0)
    return S.kv_layers


#: Bytes a token adds to a layer-wide query/key norm's all-reduce: the query's and the
#: key's mean square, fp32 (vLLM's MiniMaxText01RMSNormTP.forward_qk reduces them together).
QK_NORM_REDUCED_BYTES = 8


def router_params(scenario):
    """Router weights in all layers, d·E per layer (0 for a dense model)."""
    return S.layers * S.d_model * S.experts if scenario.value("model.experts") > 1 else sympy.Integer(0)


# ---------------------------------------------------------------------------------
# Mixture-of-experts shapes
# ---------------------------------------------------------------------------------


def ffn_params(scenario):
    """(all, one token's) feed-forward weights, or None for the base formulas.

    Under the dense/MoE rule the ``layers − moe_layers`` dense blocks have width d_ff;
    when the layer pattern names every layer's block, the dense ones add up their own
    widths (``dense_ffn_width_sum``), projection blocks are d×d and ``none`` blocks
    weigh nothing.
    """
    from .rows import expert_params, latent_projections, router_per_layer

    st = structure(scenario)
    if not st.ffn:
        return None
    expert = expert_params(scenario)
    shared = S.shared_experts * ffn_block(S.ffn_matrices, S.d_model, S.shared_expert_d_ff)
    moe = scenario.value("model.experts") > 1
    router = router_per_layer(scenario) + latent_projections(scenario) if moe else 0
    routed_all = S.experts * expert if moe else expert
    routed_active = S.active_experts * expert if moe else expert
    if st.explicit_ffn:
        rest = ffn_block(S.ffn_matrices, S.d_model, S.dense_ffn_width_sum)
        if st.ffn_count("projection"):
            rest += S.layers_projection_ffn * S.d_model**2
    else:
        rest = (S.layers - S.moe_layers) * ffn_block(S.ffn_matrices, S.d_model, S.d_ff)
    return (rest + S.moe_layers * (routed_all + shared + router),
            rest + S.moe_layers * (routed_active + shared + router))


# ---------------------------------------------------------------------------------
# One attention layer and one fixed-state layer
# ---------------------------------------------------------------------------------


@attrs.frozen
class AttentionLayer:
    """One attention layer: weights, cached values per token, FLOPs per position."""

    params: Any
    norms: Any
    kv_values: Any
    kv_what: str
    decode_pair: Any
    prefill_pair: Any
    decode_how: str


def _latent_layer(scenario) -> AttentionLayer:
    h, d = S.heads, S.d_model
    norms = 0
    if scenario.value("model.q_lora_rank") is not None:
        query = d * S.q_lora_rank + S.q_lora_rank * h * (S.qk_nope_head_dim + S.qk_rope_head_dim)
        norms += S.q_lora_rank
    else:
        query = d * h * (S.qk_nope_head_dim + S.qk_rope_head_dim)
    norms += S.kv_lora_rank
    layer = (query + d * (S.kv_lora_rank + S.qk_rope_head_dim)
             + S.kv_lora_rank * h * (S.qk_nope_head_dim + S.v_head_dim) + h * S.v_head_dim * d)
    if scenario.value("model.attention_bias"):
        layer += h * (S.qk_nope_head_dim + S.qk_rope_head_dim) + S.kv_lora_rank + S.qk_rope_head_dim + d
    what = "the key/value latent and the shared rotary key"
    if scenario.value("model.index_heads") is not None:
        layer += indexer_params(scenario)
        norms += 2 * S.index_head_dim   # the indexer's key LayerNorm: a weight and a bias
        what += " (the sparse-attention indexer's FP8 key is counted in index_cache_bytes, not here)"
    prefill_pair = 2 * h * (S.qk_nope_head_dim + S.qk_rope_head_dim) + 2 * h * S.v_head_dim
    if scenario.value("model.mla_decode") == "absorbed":
        decode_pair = 2 * h * (S.kv_lora_rank + S.qk_rope_head_dim) + 2 * h * S.kv_lora_rank
        how = "absorbed: scores over latent + rotary key, values over the latent (vLLM, SGLang decode)"
    else:
        decode_pair = prefill_pair + 2 * S.kv_lora_rank * h * (S.qk_nope_head_dim + S.v_head_dim)
        how = "naive: each cached latent decompressed to keys and values every step, then attention"
    return AttentionLayer(layer, norms, S.kv_lora_rank + S.qk_rope_head_dim, what, decode_pair,
                          prefill_pair, how)


#: The indexer's cache: one FP8 key of ``index_head_dim`` values a token and layer, with a
#: 4-byte scale per 128 of them, whatever the attention cache's format (SGLang's and
#: vLLM's indexer key caches: 128 values + 4 bytes = 132 bytes).
INDEXER_SCALE_BYTES, INDEXER_SCALE_GROUP = 4, 128


def indexer_params(scenario):
    """DeepSeek Sparse Attention's indexer weights in one layer: its query projection from
    the query latent (``q_lora_rank`` · H_i · d_i; the model width without a query latent),
    its key projection d · d_i and its per-head weights d · H_i (DeepSeek-V3.2-Exp's
    technical report, §2.1, "Lightning indexer"; the checkpoints' ``indexer.wq_b``,
    ``indexer.wk`` and ``indexer.weights_proj``).
    """
    query = S.q_lora_rank if scenario.value("model.q_lora_rank") is not None else S.d_model
    return (query * S.index_heads * S.index_head_dim + S.d_model * S.index_head_dim
            + S.d_model * S.index_heads)


def indexer_cache_bytes():
    """Bytes the indexer's key cache adds a token and layer: d_i FP8 values and one 4-byte
    scale per 128 of them.
    """
    return S.index_head_dim + INDEXER_SCALE_BYTES * floor(
        (S.index_head_dim + INDEXER_SCALE_GROUP - 1) / INDEXER_SCALE_GROUP)


def attention_layer(scenario, st: Structure) -> AttentionLayer:
    """One attention layer of the scenario's model (latent attention when ``st.mla``)."""
    value = scenario.value
    if st.mla:
        layer = _latent_layer(scenario)
    else:
        d = S.d_model
        gate = 2 if value("model.attention_output_gate") else 1
        params = gate * d * S.query_width + 2 * d * S.kv_heads * S.head_dim + S.query_width * d
        if value("model.attention_bias"):
            params += S.query_width + 2 * S.kv_heads * S.head_dim + d
        qk = (S.query_width + S.kv_heads * S.head_dim if value("model.qk_norm_scope") == "layer"
              else 2 * S.head_dim)
        layer = AttentionLayer(params, qk if value("model.qk_norm") else 0,
                               2 * S.kv_heads * S.head_dim, "a key and a value per KV head",
                               4 * S.query_width, 4 * S.query_width,
                               "scores and weighted values: 2·d_q + 2·d_q")
    if value("model.attention_sinks"):
        layer = attrs.evolve(layer, params=layer.params + S.heads)
    return layer


@attrs.frozen
class LinearLayer:
    """One fixed-state (gated delta-net) layer: weights, state and recurrence FLOPs."""

    params: Any
    state_values: Any
    flops_per_token: Any
    norms: Any


def linear_layer() -> LinearLayer:
    """Qwen3-Next's gated delta-net layer (Gated Delta Networks, arXiv:2412.06464 §3).

    In-projection d·(2·h_k·d_k + 2·h_v·d_v) (queries, keys, values, output gate), per-head
    gates d·2·h_v, the short convolution (2·h_k·d_k + h_v·d_v)·kernel, 2·h_v decay
    constants and the output projection h_v·d_v·d; state h_v·d_k·d_v plus
    (kernel − 1)·(2·h_k·d_k + h_v·d_v) convolution values; about four multiply-adds per
    state value and token.
    """
    d = S.d_model
    kh, vh, kd, vd = (S.linear_key_heads, S.linear_value_heads, S.linear_key_head_dim,
                      S.linear_value_head_dim)
    conv = 2 * kh * kd + vh * vd
    return LinearLayer(
        params=d * (2 * kh * kd + 2 * vh * vd) + d * 2 * vh + conv * S.linear_conv_kernel + 2 * vh
        + vh * vd * d,
        state_values=vh * kd * vd + (S.linear_conv_kernel - 1) * conv,
        flops_per_token=8 * vh * kd * vd,
        norms=vd)


__all__ = [
    "INDEXER_SCALE_BYTES",
    "INDEXER_SCALE_GROUP",
    "QK_NORM_REDUCED_BYTES",
    "AttentionLayer",
    "LinearLayer",
    "ParamClasses",
    "StackShape",
    "attention_decode_flops",
    "attention_layer",
    "attention_prefill_flops",
    "attention_projections",
    "ffn_block",
    "ffn_params",
    "indexer_cache_bytes",
    "indexer_params",
    "kv_bytes_per_token",
    "linear_layer",
    "qk_norm_reductions",
    "router_params",
    "stack_params",
    "target_stack",
    "tensor_parallel_reductions",
]
