"""The per-layer model as a table: one row per distinct layer kind.

A row is every layer with the same mixer and feed-forward block (:class:`.Row`). For
each, :func:`row_terms` gives sums over its layers, as expressions of the scenario's
quantities:

* ``params`` — mixer, feed-forward block (every expert) and the layers' norms;
* ``cache_bytes_per_token`` — cache bytes each cached token adds (attention mixers);
* ``state_bytes`` — fixed state one sequence keeps, whatever its length;
* ``flops_per_token`` — FLOPs of one decoded token at the mean context: 2 × the weights
  a token multiplies (the experts it uses) plus attention over the cached positions
  (each window cut at its size) or the recurrence.

The rows add up to the model: Σ params + the embedding, head and final norm
(``params_outside_layers``) is ``params_total``; Σ cache bytes per token is
``kv_bytes_per_token``; Σ state bytes is ``linear_state_bytes_per_sequence``; Σ FLOPs
per token + the head's (``flops_per_token_outside_layers``) is ``decode_flops`` over the
batch. The tests check these identities on every shipped preset.
"""

from __future__ import annotations

from typing import Any

import attrs
from sympy import Min

from infermodel.plugin import S

from .formulas import attention_layer, ffn_block, linear_layer
from .mixers import state_layer
from .patterns import ATTENTION_KINDS
from .structure import Row, Structure

#: What each mixer and feed-forward block is, for row labels.
MIXER_LABELS = {"full": "full attention", "sliding": "sliding-window attention",
                "chunked": "chunked-local attention", "linear": "gated delta-net (linear attention)",
                "lightning": "lightning (linear) attention", "mamba": "Mamba-1 state space",
                "mamba2": "Mamba-2 state space", "projection": "a d×d projection",
                "none": "no mixer"}
FFN_LABELS = {"dense": "dense feed-forward", "moe": "mixture of experts",
              "projection": "a d×d projection", "none": "no feed-forward"}


@attrs.frozen
class RowTerms:
    """Sums over one row's layers (see the module docstring)."""

    params: Any
    cache_bytes_per_token: Any
    state_bytes: Any
    flops_per_token: Any
    #: Of ``params``: the mixers' weights (inner norms included), every routed expert and
    #: the shared experts (a deployment places each class on its own cards).
    mixer_params: Any = 0
    routed_params: Any = 0
    shared_params: Any = 0


def row_label(row: Row, st: Structure) -> str:
    """A reader's name for a row: ``Mamba-2 state space + no feed-forward``."""
    mixer = MIXER_LABELS[row.mixer]
    if st.mla and row.mixer in ATTENTION_KINDS:
        mixer = ("latent" if row.mixer == "full" else f"{row.mixer} latent") + " attention"
    ffn = FFN_LABELS[row.ffn] + (f" of width {row.width:,}" if row.width else "")
    return f"{mixer} + {ffn}"


def expert_width(scenario):
    """The width a routed expert reads and writes: the model's, or the latent width of a
    latent mixture of experts (``moe_latent_size``).
    """
    return S.moe_latent_size if scenario.value("model.moe_latent_size") is not None else S.d_model


def expert_block(scenario):
    """Weights of one routed expert's matrices in one layer, m·w·f (w: :func:`expert_width`)."""
    return ffn_block(S.ffn_matrices, expert_width(scenario), S.expert_d_ff)


def latent_projections(scenario):
    """Weights of one MoE layer's projections into and out of the experts' latent width,
    2·d·l (0 without one): NVIDIA's LatentMoE, fc1_latent_proj and fc2_latent_proj.
    """
    if scenario.value("model.moe_latent_size") is None:
        return 0
    return 2 * S.d_model * S.moe_latent_size


def expert_params(scenario):
    """Weights of one routed expert in one layer, its biases included (gpt-oss)."""
    expert = expert_block(scenario)
    if scenario.value("model.expert_bias"):
        expert += (S.ffn_matrices - 1) * S.expert_d_ff + expert_width(scenario)
    return expert


def router_per_layer(scenario):
    """Router weights of one MoE layer, with its biases and score-correction biases."""
    router = S.d_model * S.experts
    if scenario.value("model.expert_bias"):
        router += S.experts
    if scenario.value("model.score_correction_bias"):
        router += S.experts
    return router


def _ffn(scenario, st: Structure, row: Row):
    """(all, one token's) feed-forward weights of one layer of ``row``."""
    if not st.ffn:   # the base physics' uniform stack: (E + s) experts and a router
        expert = ffn_block(S.ffn_matrices, S.d_model, S.expert_d_ff)
        router = S.d_model * S.experts if scenario.value("model.experts") > 1 else 0
        return ((S.experts + S.shared_experts) * expert + router,
                (S.active_experts + S.shared_experts) * expert + router)
    if row.ffn == "none":
        return 0, 0
    if row.ffn == "projection":
        return S.d_model**2, S.d_model**2
    if row.ffn == "dense":
        width = row.width if row.width is not None else S.d_ff
        dense = ffn_block(S.ffn_matrices, S.d_model, width)
        return dense, dense
    shared = S.shared_experts * ffn_block(S.ffn_matrices, S.d_model, S.shared_expert_d_ff)
    router = router_per_layer(scenario) + latent_projections(scenario)
    return (S.experts * expert_params(scenario) + shared + router,
            S.active_experts * expert_params(scenario) + shared + router)


def _attention_positions(row: Row, context):
    if row.mixer == "sliding":
        return Min(context, S.sliding_window)
    if row.mixer == "chunked":
        return Min(context, S.attention_chunk)
    return context


def _mixer(scenario, st: Structure, row: Row, context):
    """(weights, inner norms, cache bytes per token, state values, FLOPs per token)."""
    if row.mixer in ATTENTION_KINDS:
        if not st.attention:
            params = 2 * S.d_model * S.query_width + 2 * S.d_model * S.kv_heads * S.head_dim
            return (params, 0, 2 * S.kv_heads * S.head_dim * S.kv_value_bytes, 0,
                    4 * S.query_width * context)
        norms = attention_layer(scenario, st).norms
        cache = S.kv_values_per_layer_token * S.kv_value_bytes
        if st.indexer:
            cache += S.index_cache_bytes
        return (S.params_attention_layer, norms, cache,
                0, S.attention_flops_per_position * _attention_positions(row, context))
    if row.mixer == "none":
        return 0, 0, 0, 0, 0
    if row.mixer == "linear":
        return (S.params_linear_layer, linear_layer().norms, 0, S.linear_state_values_per_layer,
                S.linear_flops_per_token)
    mixer = state_layer(scenario, row.mixer)
    if row.mixer == "projection":
        return mixer.params, 0, 0, 0, 0
    return (S[f"params_{row.mixer}_layer"], mixer.norms, 0,
            S[f"{row.mixer}_state_values_per_layer"], S[f"{row.mixer}_flops_per_token"])


def row_terms(scenario, st: Structure, row: Row, context=None) -> RowTerms:
    """The sums over ``row``'s layers, FLOPs at ``context`` (default: the mean context)."""
    context = S.context if context is None else context
    mixer, inner, cache, state, attention = _mixer(scenario, st, row, context)
    ffn_all, ffn_active = _ffn(scenario, st, row)
    block_norms = ((row.mixer != "none") + (row.ffn != "none")) * S.d_model
    norms = inner + block_norms
    n = row.count
    routed, shared = _experts(scenario, st, row)
    return RowTerms(params=n * (mixer + ffn_all + norms),
                    cache_bytes_per_token=n * cache,
                    state_bytes=n * state * S.linear_state_bits / 8 if state else 0,
                    flops_per_token=n * (2 * (mixer + ffn_active + norms) + attention),
                    mixer_params=n * (mixer + inner), routed_params=n * routed,
                    shared_params=n * shared)


def _experts(scenario, st: Structure, row: Row):
    """(every routed expert, the shared experts) of one layer of ``row`` (0 for dense)."""
    if scenario.value("model.experts") <= 1 or (st.ffn and row.ffn != "moe"):
        return 0, 0
    if not st.ffn:
        expert = ffn_block(S.ffn_matrices, S.d_model, S.expert_d_ff)
        return S.experts * expert, S.shared_experts * expert
    return (S.experts * expert_params(scenario),
            S.shared_experts * ffn_block(S.ffn_matrices, S.d_model, S.shared_expert_d_ff))


__all__ = ["FFN_LABELS", "MIXER_LABELS", "RowTerms", "expert_block", "expert_params", "expert_width",
           "latent_projections", "router_per_layer", "row_label", "row_terms"]
