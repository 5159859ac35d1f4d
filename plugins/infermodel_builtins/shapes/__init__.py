"""The shape library of the built-in plugins: what the model is, layer by layer.

Not a plugin (it registers nothing and has no entry point): the base physics and the
levers that need a model's shape — architecture, mixture of experts, speculative
decoding, operators, parallelism, batching, chunked prefill, prefix caching,
quantisation — call it, so one formula serves every caller (a draft model's parameter
count is the target's formula with the draft's widths).

Module map:

* :mod:`.patterns` — the ``layer_pattern`` grammar (mixer and feed-forward block of each
  layer) and per-kind layer counts;
* :mod:`.structure` — :func:`structure`, what a scenario's model declares beyond a
  uniform stack (read once from its fields), with its distinct layer kinds (:class:`Row`);
* :mod:`.formulas` — weights, cached values and FLOPs of the attention blocks and
  feed-forward blocks, and of a uniform stack (:func:`stack_params`);
* :mod:`.mixers` — fixed-state and projection mixers: lightning attention, Mamba-1,
  Mamba-2, a d×d projection;
* :mod:`.rows` — the per-layer table: sums over each distinct layer kind (parameters,
  cache per token, fixed state, FLOPs per token);
* :mod:`.terms` — the cache and attention terms the roofline routes through
  (:class:`Terms`), windows and fixed states included.
"""

from __future__ import annotations

from .formulas import (
    INDEXER_SCALE_BYTES,
    INDEXER_SCALE_GROUP,
    QK_NORM_REDUCED_BYTES,
    AttentionLayer,
    LinearLayer,
    ParamClasses,
    StackShape,
    attention_decode_flops,
    attention_layer,
    attention_prefill_flops,
    attention_projections,
    ffn_block,
    ffn_params,
    indexer_cache_bytes,
    indexer_params,
    kv_bytes_per_token,
    linear_layer,
    qk_norm_reductions,
    router_params,
    stack_params,
    target_stack,
    tensor_parallel_reductions,
)
from .mixers import (
    LIGHTNING,
    MAMBA,
    MAMBA2,
    PROJECTION,
    StateLayer,
    mamba_default_dt_rank,
    mamba_inner_width,
    state_layer,
)
from .patterns import (
    ATTENTION_KINDS,
    BASE_KINDS,
    FFN_KINDS,
    KINDS,
    MAX_PATTERN,
    STATE_KINDS,
    LayerSpec,
    PatternError,
    compact_pattern,
    layer_kind_counts,
    parse_layer_pattern,
    parse_layers,
)
from .rows import (
    FFN_LABELS,
    MIXER_LABELS,
    RowTerms,
    expert_block,
    expert_params,
    expert_width,
    latent_projections,
    router_per_layer,
    row_label,
    row_terms,
)
from .structure import MAX_JOINT_PERIOD, UNIFORM, Row, Structure, moe_layer_count, structure
from .terms import Terms, causal_pairs, chunked_overcount, chunked_pairs, kv_positions, terms

__all__ = [
    "ATTENTION_KINDS",
    "BASE_KINDS",
    "FFN_KINDS",
    "FFN_LABELS",
    "INDEXER_SCALE_BYTES",
    "INDEXER_SCALE_GROUP",
    "KINDS",
    "LIGHTNING",
    "MAMBA",
    "MAMBA2",
    "MAX_JOINT_PERIOD",
    "MAX_PATTERN",
    "MIXER_LABELS",
    "PROJECTION",
    "QK_NORM_REDUCED_BYTES",
    "STATE_KINDS",
    "UNIFORM",
    "AttentionLayer",
    "LayerSpec",
    "LinearLayer",
    "ParamClasses",
    "PatternError",
    "Row",
    "RowTerms",
    "StackShape",
    "StateLayer",
    "Structure",
    "Terms",
    "attention_decode_flops",
    "attention_layer",
    "attention_prefill_flops",
    "attention_projections",
    "causal_pairs",
    "chunked_overcount",
    "chunked_pairs",
    "compact_pattern",
    "expert_block",
    "expert_params",
    "expert_width",
    "ffn_block",
    "ffn_params",
    "indexer_cache_bytes",
    "indexer_params",
    "kv_bytes_per_token",
    "kv_positions",
    "latent_projections",
    "layer_kind_counts",
    "linear_layer",
    "mamba_default_dt_rank",
    "mamba_inner_width",
    "moe_layer_count",
    "parse_layer_pattern",
    "parse_layers",
    "qk_norm_reductions",
    "router_params",
    "router_per_layer",
    "row_label",
    "row_terms",
    "stack_params",
    "state_layer",
    "structure",
    "target_stack",
    "tensor_parallel_reductions",
    "terms",
]
