"""The collectives of a layout as formulas: what moving tokens between a layout's cards
costs per forward pass (ring all-reduces, the data-parallel gather, the expert
all-to-all) and the serving simulator's linear terms of it.

Split from :mod:`.layouts` (which re-exports these names) so that the layout's weights,
cache and busiest-card quantities and its communication each fit in one module. The
reductions of a forward pass are split by :func:`layer_counts` as (mixers, dense
feed-forward layers, MoE layers); a latent mixture of experts' routed tokens travel at
:func:`routed_width`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sympy

from infermodel.plugin import S

from .shapes import (
    QK_NORM_REDUCED_BYTES,
    moe_layer_count,
    qk_norm_reductions,
    structure,
    tensor_parallel_reductions,
)

if TYPE_CHECKING:
    from .layouts import Layout


def routed_width(scenario):
    """The width of the vectors the routed experts exchange: a latent mixture of experts'
    latent width (its tokens are projected down before the experts and up after), else d.
    """
    return S.moe_latent_size if scenario.value("model.moe_latent_size") is not None else S.d_model


def ring(cards, tokens, value_bytes=None, width=None):
    """One ring all-reduce of ``tokens`` activation vectors (of ``width`` values, default
    d) over ``cards`` cards: 2(n − 1)/n · bytes / link + 2(n − 1) · latency.
    """
    value_bytes = S.parallel_activation_bytes if value_bytes is None else value_bytes
    size = tokens * (S.d_model if width is None else width) * value_bytes
    return (2 * (cards - 1) / cards * size / S.parallel_link_bandwidth
            + 2 * (cards - 1) * S.parallel_link_latency)


def layer_counts(scenario, lay: Layout):
    """(mixer reductions, dense feed-forward layers, MoE layers) per forward pass.

    Where the layer pattern names every layer's feed-forward block (Nemotron-H: each layer
    a mixer or a feed-forward block), the dense ones are those it names dense or a
    projection, and every other reduction is a mixer's; else every layer that is not a
    mixture of experts has a dense block.
    """
    moe = moe_layer_count(scenario) if lay.moe else sympy.Integer(0)
    st = structure(scenario)
    if st.explicit_ffn:
        dense = st.ffn_count("dense") + st.ffn_count("projection")
        if not lay.moe:
            dense += st.ffn_count("moe")
        return tensor_parallel_reductions(scenario) - dense - moe, sympy.Integer(dense), moe
    return tensor_parallel_reductions(scenario) - S.layers, S.layers - moe, moe


def dispatch_terms(scenario, lay: Layout, tokens, imbalance):
    """(dispatch, combine, expert-rank all-reduce) times of one MoE layer moving ``tokens``
    tokens by all-to-all (the busiest rank receiving ``imbalance`` times its share).
    """
    X, G = S.parallel_expert_degree, S.parallel_stage_cards
    off = (X - 1) / X
    latent = scenario.value("model.moe_latent_size") is not None
    per_card = tokens / G * S.active_experts * routed_width(scenario)
    dispatch = (imbalance * per_card * off * S.parallel_dispatch_activation_bytes
                / S.parallel_link_bandwidth + (X - 1) * S.parallel_link_latency)
    combine = (imbalance * per_card * off * S.parallel_activation_bytes
               / S.parallel_link_bandwidth + (X - 1) * S.parallel_link_latency)
    inner = (ring(G / X, imbalance * tokens * S.active_experts / X,
                  width=routed_width(scenario) if latent else None)
             if lay.stage_cards > lay.expert else sympy.Integer(0))
    return dispatch, combine, inner


def comm_parts(scenario, lay: Layout, tokens, f_dp, f_ep):
    """The layer collectives of one forward pass of ``tokens`` tokens (a micro-batch):
    ``{operator name: (time, bytes)}`` for the attention all-reduce within the DP ranks,
    the DP gather over the stage's cards, the expert dispatch and combine.
    """
    T, G, D = S.parallel_tensor_degree, S.parallel_stage_cards, S.parallel_attention_data_degree
    mixers, dense, moe = layer_counts(scenario, lay)
    busiest = tokens * f_dp / D
    local = mixers + (dense if lay.dense == "replicated" else 0) + (moe if lay.a2a else 0)
    gathered = (dense if lay.dense == "split" else 0) + (0 if lay.a2a else moe)
    width = S.d_model * S.parallel_activation_bytes
    # With query/key norms over the layer's heads, each attention layer all-reduces the
    # tokens' mean squares within the DP rank's cards too.
    norms = qk_norm_reductions(scenario) if lay.tensor > 1 else 0
    parts = {"all_reduce": (local * ring(T, busiest) + qk_norm_comm(scenario, busiest, lay.tensor, False),
                            local * busiest * width + norms * busiest * QK_NORM_REDUCED_BYTES),
             "attention_gather": (gathered * ring(G, tokens), gathered * tokens * width)}
    if (scenario.value("model.moe_latent_size") is not None and lay.data > 1 and not lay.a2a
            and lay.shared_local):
        # A latent mixture of experts gathers and scatters its tokens at the latent width
        # (its shared experts run on each rank's own tokens; split over the stage, they
        # need every token at d, and the gather stays at d).
        dense_part = dense if lay.dense == "split" else 0
        parts["attention_gather"] = (
            dense_part * ring(G, tokens) + moe * ring(G, tokens, width=routed_width(scenario)),
            (dense_part * width + moe * routed_width(scenario) * S.parallel_activation_bytes)
            * tokens)
    if lay.a2a:
        dispatch, combine, inner = dispatch_terms(scenario, lay, tokens, f_ep)
        routed = tokens * S.active_experts * routed_width(scenario)
        parts["expert_dispatch"] = (moe * dispatch, moe * routed * S.parallel_dispatch_activation_bytes)
        parts["expert_combine"] = (moe * (combine + inner), moe * routed * S.parallel_activation_bytes)
    return parts


def qk_norm_comm(scenario, tokens, tensor: int, collectives: bool):
    """The all-reduces of layer-wide query/key norms for ``tokens`` tokens
    (:func:`.shapes.qk_norm_reductions`: one a layer, 8 bytes a token), one-shot under the
    collectives model, ring otherwise; 0 on one card or with per-head norms.
    """
    count = qk_norm_reductions(scenario)
    if tensor <= 1 or count == 0:
        return sympy.Integer(0)
    n = S.parallel_tensor_degree
    size = tokens * QK_NORM_REDUCED_BYTES
    if collectives:
        one = (S.parallel_collective_latency + S.parallel_link_latency
               + (n - 1) * size / (S.parallel_link_bandwidth * S.collective_bandwidth_fraction))
    else:
        one = 2 * (n - 1) * S.parallel_link_latency + 2 * (n - 1) / n * size / S.parallel_link_bandwidth
    return count * one


def comm_coefficients(scenario, lay: Layout):
    """The serving simulator's linear terms: (latency per iteration, seconds per token of
    the group, per token of the busiest DP rank's share, per token of the busiest expert
    rank's share).
    """
    T, G, X = S.parallel_tensor_degree, S.parallel_stage_cards, S.parallel_expert_degree
    D, P = S.parallel_attention_data_degree, S.parallel_pipeline_degree
    mixers, dense, moe = layer_counts(scenario, lay)
    lat, link = S.parallel_link_latency, S.parallel_link_bandwidth
    width = S.d_model * S.parallel_activation_bytes / link
    local = mixers + (dense if lay.dense == "replicated" else 0) + (moe if lay.a2a else 0)
    gathered = (dense if lay.dense == "split" else 0) + (0 if lay.a2a else moe)
    qk = qk_norm_reductions(scenario) if lay.tensor > 1 else 0
    fixed = (local + qk) * 2 * (T - 1) * lat + gathered * 2 * (G - 1) * lat + (P - 1) * lat
    group = gathered * 2 * (G - 1) / G * width + (P - 1) * width
    attention = (local * width + qk * QK_NORM_REDUCED_BYTES / link) * 2 * (T - 1) / T / D
    expert = sympy.Integer(0)
    latent = scenario.value("model.moe_latent_size") is not None
    if latent and lay.data > 1 and not lay.a2a and lay.shared_local:
        # The MoE layers' gather and scatter at the latent width (see comm_parts).
        dense_part = dense if lay.dense == "split" else 0
        group = (dense_part * width + moe * routed_width(scenario) * S.parallel_activation_bytes
                 / link) * 2 * (G - 1) / G + (P - 1) * width
    if lay.a2a:
        fixed += moe * 2 * (X - 1) * lat
        expert = moe * S.active_experts * routed_width(scenario) * (X - 1) / X / G * (
            S.parallel_dispatch_activation_bytes + S.parallel_activation_bytes) / link
        if lay.stage_cards > lay.expert:
            inner = G / X
            fixed += moe * 2 * (inner - 1) * lat
            expert += moe * 2 * (inner - 1) / inner * S.active_experts / X * (
                routed_width(scenario) * S.parallel_activation_bytes / link if latent else width)
    return fixed, group, attention, expert


__all__ = ["comm_coefficients", "comm_parts", "dispatch_terms", "layer_counts", "qk_norm_comm",
           "ring", "routed_width"]
