"""Weights a tensor-parallel layout keeps whole on every card (not a plugin: the
parallelism lever calls it): a latent mixture of experts' projections and DeepSeek Sparse
Attention's indexer projections. Each card holds (T − 1)/(T·P) of them beyond its share of
the weights; a roofline step reads them once, and a warning sizes the other cards' reads.
"""

from __future__ import annotations

from infermodel.plugin import S

from .moe import linear_bytes_per_param
from .parallel_communication import DEPLOY
from .shapes import latent_projections, moe_layer_count, structure

__all__ = ["indexer_replicas", "latent_replicas", "replica_reads"]


def latent_replicas(scenario, define, tensor: int):
    """The bytes each card holds beyond its share where a latent mixture of experts'
    projections are replicated over the tensor cards (0 otherwise): (T − 1)/(T·P) of them,
    P pipeline stages each holding its layers' projections.
    """
    if scenario.value("model.moe_latent_size") is None or tensor <= 1:
        return 0
    define("parallel_latent_projection_weight_bytes",
           moe_layer_count(scenario) * latent_projections(scenario) * linear_bytes_per_param(scenario),
           unit="B", description="bytes of a latent mixture of experts' projections into and out "
                                 "of the experts' width (2·d·l a MoE layer), whole on every card",
           reference=DEPLOY)
    return (S.parallel_latent_projection_weight_bytes * (S.parallel_tensor_degree - 1)
            / S.card_count)


def indexer_replicas(scenario, define, tensor: int):
    """The bytes each card holds beyond its share where DeepSeek Sparse Attention's indexer
    projections are replicated over the tensor cards (SGLang's and vLLM's indexers build
    them as ``ReplicatedLinear``; 0 otherwise): (T − 1)/(T·P) of them, as for a latent
    mixture of experts' projections.
    """
    if not structure(scenario).indexer or tensor <= 1:
        return 0
    define("parallel_indexer_weight_bytes",
           S.kv_layers * S.params_indexer_layer * linear_bytes_per_param(scenario), unit="B",
           description="bytes of the sparse-attention indexers' projections in every layer, "
                       "whole on every tensor card", reference=DEPLOY)
    return S.parallel_indexer_weight_bytes * (S.parallel_tensor_degree - 1) / S.card_count


def replica_reads(values, warn) -> None:
    """Warn, with their size, that replicated projections' reads by the other tensor cards
    (a latent mixture of experts', the sparse-attention indexers') are not in a roofline
    step (measured kernels time each card's whole projections; a layout adds them to its
    replica reads).
    """
    if "replicated_weight_reads" in values or "decode_time_kernels" in values:
        return
    parts = [(values[name], what) for name, what in (
        ("parallel_latent_projection_weight_bytes", "a latent mixture of experts' projections"),
        ("parallel_indexer_weight_bytes", "the sparse-attention indexers' projections"))
        if name in values]
    if not parts:
        return
    extra = sum(bytes_ for bytes_, _ in parts) * (values["parallel_tensor_degree"] - 1)
    share = extra / values["decode_bytes"] if values.get("decode_bytes") else 0.0
    what = " and ".join(w for _, w in parts)
    warn("decode_step_time",
         f"{what} are replicated on the {values['parallel_tensor_degree']:g} tensor cards, but the "
         f"step reads them once: the other cards' reads of their own copies, {extra / 1e9:.3g} GB "
         f"a step ({100 * share:.1f} % of the decode step's bytes), are not counted (measured "
         "kernels time each card's whole projections)")
