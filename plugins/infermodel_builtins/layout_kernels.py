"""The measured kernels of a layout's collectives (not a plugin: the parallelism lever's
layouts and the measured-kernels plugin attach them to the collective operators).

Under data-parallel attention (D ranks of T cards, G = T·D cards a stage) and expert
parallelism (X ranks), per layer of each kind (:func:`.layouts.layer_counts`), for T_s
tokens of the stage:

    all_reduce        the engine's custom all-reduce over the T cards of an attention
                      rank, of the busiest rank's tokens (mixers; dense layers when they
                      stay on each rank; MoE layers under all-to-all); NCCL's where the
                      engine's tables hold no custom all-reduce; with query/key norms over
                      the layer's heads (MiniMax-M2), one more per attention layer of the
                      tokens' two fp32 mean squares
    attention_gather  NCCL's all-gather and reduce-scatter over the G cards, of every
                      token (dense layers split over the stage; MoE layers under
                      all-gather dispatch); with one attention rank (D = 1) every card
                      already holds every token, and the layer's outputs are summed by
                      the all-reduce above over the G = T cards instead
    expert_dispatch   DeepEP's all-to-all dispatch of the busiest rank's tokens on one
    expert_combine    card (T_s·f_dp/D/T), and the combine; low-latency kernels in decode,
                      high-throughput ones in prefill (SGLang's own DeepEP tables;
                      TensorRT-LLM's NVLink all-to-all, one-sided or two-sided with its
                      prepare step); the combine adds an all-reduce over an expert rank's
                      G/X cards when they split its experts

Pipeline hops between stages are link transfers no table measures: they keep the
lever's link formula.

References: NVIDIA aiconfigurator's collectors ``collector/collect_all_reduce.py``,
``collector/network/collect_nccl.py`` (message sizes in elements, the whole message),
``collector/wideep/sglang/collect_moe_a2a.py`` and the DeepEP ``deep_collector`` (one
rank's tokens).
"""

from __future__ import annotations

from infermodel.plugin import Kernel, S

from .shapes import QK_NORM_REDUCED_BYTES, qk_norm_reductions

#: The collectives a layout's layers make, by operator name.
COLLECTIVES = ("all_reduce", "attention_gather", "expert_dispatch", "expert_combine")


def all_reduce(elements, gpus, calls, label="all_reduce", group="mixer"):
    """An all-reduce: the engine's custom all-reduce table, or NCCL's where the engine's
    tables hold none (alternatives, tried in that order).
    """
    return (Kernel("all_reduce", {"elements": elements, "gpus": gpus}, calls=calls, label=label,
                   group=group, option="custom"),
            Kernel("nccl_all_reduce", {"elements": elements, "gpus": gpus}, calls=calls,
                   label=label, group=group, option="nccl"))


def qk_norm_all_reduce(scenario, tokens, gpus, per=1) -> tuple[Kernel, ...]:
    """The all-reduces of query/key norms over the layer's heads (MiniMax-M2), ``per``
    times each attention layer: the tokens' mean squares, 8 bytes a token (four 16-bit
    elements of the tables); none with per-head norms.
    """
    norms = qk_norm_reductions(scenario)
    if norms == 0:
        return ()
    return all_reduce(tokens * (QK_NORM_REDUCED_BYTES // 2), gpus, norms * per,
                      "all_reduce of the query/key norms' mean squares")


def collective_kernels(scenario, lay, tokens, counts, wire=None, hops=None):
    """Operator name -> the kernels of the layout's collectives for ``tokens`` tokens of
    the stage (an expression of ``batch``); ``counts`` is (mixer reductions, dense layers,
    MoE layers); ``wire`` the bytes of a dispatched value; ``hops`` the pipeline's link
    time (no table measures it).
    """
    mixers, dense, moe = counts
    local = mixers + (dense if lay.dense == "replicated" else 0) + (moe if lay.a2a else 0)
    gathered = (dense if lay.dense == "split" else 0) + (0 if lay.a2a else moe)
    width = S.d_model
    # The experts' tokens at their own width: a latent mixture of experts gathers, scatters
    # and dispatches its tokens projected down (moe_latent_size), the rest at the model's.
    # Under one attention rank the layer's output is all-reduced once, after the up
    # projection and with the shared experts' part (TensorRT-LLM's NemotronHMOE): at d.
    latent = scenario.value("model.moe_latent_size") is not None
    routed_width = S.moe_latent_size if latent else width
    parts = [(gathered, width)]
    if latent and lay.shared_local:
        parts = [(calls, w) for calls, w in ((dense if lay.dense == "split" else 0, width),
                                             (0 if lay.a2a else moe, routed_width))
                 if not (isinstance(calls, int) and calls == 0)] or parts
    T, G, X = S.kernel_tensor_degree, S.kernel_stage_cards, S.kernel_expert_degree
    out: dict[str, tuple[Kernel, ...]] = {}
    reduce = list(all_reduce(tokens * width, T, local)) if lay.tensor > 1 else []
    if lay.tensor > 1:
        reduce += qk_norm_all_reduce(scenario, tokens, T)
    if hops is not None and lay.pipeline > 1:
        reduce.append(Kernel("roofline", {"time": hops},
                             label="pipeline hops over the link (no table measures them)"))
    out["all_reduce"] = tuple(reduce)
    if lay.data > 1:
        out["attention_gather"] = tuple(
            Kernel(family, {"elements": tokens * w, "gpus": G}, calls=calls, label=label,
                   group="routed")
            for calls, w in parts
            for family, label in (("nccl_all_gather", "gather"), ("nccl_reduce_scatter", "scatter")))
    else:
        # One attention rank (D = 1, G = T): every card already holds every token after the
        # attention's all-reduce, so nothing is gathered; the layer's partial outputs (each
        # card's experts, or its slice of a split layer) are summed by one all-reduce over
        # the G cards, as the engines run tensor-parallel attention with expert parallelism.
        out["attention_gather"] = all_reduce(tokens * width, G, gathered,
                                             "all_reduce of the experts' outputs (no gather: "
                                             "one attention rank)", "routed")
    if lay.a2a:
        shape = {"tokens": tokens / T, "hidden": routed_width, "topk": S.active_experts,
                 "experts": S.experts, "ep": X}
        # TensorRT-LLM's NVLink all-to-all is one-sided, or two-sided after a prepare
        # step (alternatives; the other engines' tables serve the first).
        dispatch = {**shape, "wire": wire or 2}
        out["expert_dispatch"] = (
            Kernel("dispatch", dispatch, calls=moe, label="dispatch", option="one-sided"),
            Kernel("dispatch", dispatch, calls=moe, label="dispatch", option="two-sided"),
            Kernel("prepare", shape, calls=moe, label="prepare", option="two-sided"))
        combine = [Kernel("combine", shape, calls=moe, label="combine")]
        if lay.stage_cards > lay.expert:
            combine += all_reduce(tokens * S.active_experts / X * routed_width, G / X, moe,
                                  "expert rank all_reduce", "routed")
        out["expert_combine"] = tuple(combine)
    return out


__all__ = ["COLLECTIVES", "all_reduce", "collective_kernels", "qk_norm_all_reduce"]
