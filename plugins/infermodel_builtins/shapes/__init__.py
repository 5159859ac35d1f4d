"""The shape library of the built-in plugins: what the model is, layer by layer.

Not a plugin (it registers nothing and has no entry point): the base physics and the
levers that need a model's shape — architecture, mixture of experts, speculative
decoding, operators, parallelism, batching, chunked prefill, prefix caching,
quantisation — call it, so one formula serves every caller (a draft model's parameter
count is the target's formula with the draft's widths).

Module map:

* :mod:`.patterns` — the ``layer_pattern`` grammar and per-kind layer counts;
* :mod:`.structure` — :func:`structure`, what a scenario's model declares beyond a
  uniform stack (read once from its fields);
* :mod:`.formulas` — weights, cached values and FLOPs of each block kind, and of a
  uniform stack (:func:`stack_params`);
* :mod:`.terms` — the cache and attention terms the roofline routes through
  (:class:`Terms`), windows and fixed states included.
"""

from __future__ import annotations

from .formulas import (
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
    kv_bytes_per_token,
    linear_layer,
    router_params,
    stack_params,
    target_stack,
    tensor_parallel_reductions,
)
from .patterns import (
    ATTENTION_KINDS,
    KINDS,
    MAX_PATTERN,
    PatternError,
    layer_kind_counts,
    parse_layer_pattern,
)
from .structure import UNIFORM, Structure, moe_layer_count, structure
from .terms import Terms, causal_pairs, chunked_overcount, chunked_pairs, kv_positions, terms

__all__ = ["ATTENTION_KINDS", "KINDS", "MAX_PATTERN", "UNIFORM", "AttentionLayer", "LinearLayer",
           "ParamClasses", "PatternError", "StackShape", "Structure", "Terms",
           "attention_decode_flops", "attention_layer", "attention_prefill_flops",
           "attention_projections", "causal_pairs", "chunked_overcount", "chunked_pairs",
           "ffn_block", "ffn_params", "kv_bytes_per_token", "kv_positions", "layer_kind_counts",
           "linear_layer", "moe_layer_count", "parse_layer_pattern", "router_params",
           "stack_params", "structure", "target_stack", "tensor_parallel_reductions", "terms"]
