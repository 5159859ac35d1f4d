"""Every family of measured kernels: its table, its columns as arguments and its roofline.

=========================  ==================================  =========================================
family                     arguments (configuration | curve)   table (``<directory>/<engine>/``)
=========================  ==================================  =========================================
``gemm``                   n, k | m                            ``gemm/gemm_perf``
``activation_scale``       k | m                               ``quantize/computescale_perf``
``context_attention``      heads, kv_heads, head_dim,          ``attention/context_attention_perf``
                           window | batch, length
``generation_attention``   heads, kv_heads, head_dim,          ``attention/generation_attention_perf``
                           window | batch, context
``moe``                    hidden, inter, topk, experts,       ``moe/moe_perf``
                           tp, ep | tokens
``all_reduce``             gpus | elements                     ``comm/custom_allreduce_perf``
``latent_context``         heads, model widths | batch,        ``mla/mla_context_module_perf``
                           length
``latent_generation``      heads, model widths | batch,        ``mla/mla_generation_module_perf``
                           context
``mla_context``            heads, latent widths | batch,       ``mla/context_mla_perf``
                           length
``mla_generation``         heads, latent widths | batch,       ``mla/generation_mla_perf``
                           context
``mla_bmm_pre``, ``_post`` heads, latent widths | tokens       ``mla_bmm/mla_bmm_perf``
``gdn_conv_context``       channels, conv | batch, length      ``linear_attention/gdn_perf``
``gdn_conv_generation``    channels, conv | batch              ``linear_attention/gdn_perf``
``gdn_context``            k_heads, k_dim, v_heads, v_dim |    ``linear_attention/gdn_perf``
                           batch, length
``gdn_generation``         k_heads, k_dim, v_heads, v_dim |    ``linear_attention/gdn_perf``
                           batch
``mamba2_conv_context``    channels, conv | batch, length      ``linear_attention/mamba2_perf``
``mamba2_conv_generation`` channels, conv | batch              ``linear_attention/mamba2_perf``
``dispatch``, ``combine``  hidden, topk, experts, ep |         ``comm/moe_a2a_perf``
                           tokens
``deepep_dispatch_ll``,    hidden, topk, experts, ep |         ``comm/wideep_deepep_ll_perf``,
``deepep_combine_ll``, …   tokens                              ``comm/wideep_deepep_normal_perf``
``deepep_moe_generation``, hidden, inter, topk, experts,       ``moe/wideep_generation_moe_perf``,
``deepep_moe_context``     tp, ep | tokens                     ``moe/wideep_context_moe_perf``
``nvlink_dispatch``,       hidden, topk, experts, ep |         ``comm/trtllm_alltoall_perf``
``nvlink_combine``,        tokens
``nvlink_prepare``
``nccl_all_gather``, …     gpus | elements                     ``comm/nccl/<version>/nccl_perf``
=========================  ==================================  =========================================

Read from the tables and their collectors (NVIDIA aiconfigurator, ``collector/``):

* the latent attention **module** tables time one layer's whole latent attention block
  (the down-projections, the up-projections, attention over the latent cache, the output
  projection) of the model their ``model`` column names, at ``num_heads`` heads per GPU;
  its widths come from that model's published config, which the package ships. A
  generation row's ``step`` is the positions attended, the new token's included;
* the **bare** MLA tables (``context_mla_perf``, ``generation_mla_perf``) time attention
  alone at ``num_heads`` heads per GPU, at DeepSeek-V3's latent widths; the **BMM** table
  the absorbed key (``mla_gen_pre``) and value (``mla_gen_post``) projections of decode;
* a gated delta-net layer is its convolution and its recurrence, separate rows
  (``kernel_source``) that add up; so is a Mamba-2 layer, whose tables hold only the
  convolution (``causal_conv1d_fn``, ``causal_conv1d_update``), not the selective scan;
* the all-to-all tables hold one expert rank's tokens (``num_tokens``) at 8 ranks of one
  node; ``deepep_ll`` is DeepEP's low-latency decode path, ``deepep_ht`` its prefill path;
  TensorRT-LLM's NVLink all-to-all table (GB200) holds one rank's tokens, for
  DeepSeek-V3's shape only: the one-sided kernel (NVFP4) at 2–32 ranks, the two-sided one
  (BF16, FP8, NVFP4; dispatch after a prepare step) at 2–64;
* NCCL's ``message_size`` is the whole message in elements (an all-gather's output).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .grids import FULL_WINDOW
from .records import Columns, Family
from .rooflines import (
    activation_scale as roofline_activation_scale,
)
from .rooflines import (
    all_to_all as roofline_all_to_all,
)
from .rooflines import (
    attention as roofline_attention,
)
from .rooflines import (
    convolution as roofline_convolution,
)
from .rooflines import (
    delta_rule as roofline_delta_rule,
)
from .rooflines import (
    dispatch as roofline_dispatch,
)
from .rooflines import (
    gemm as roofline_gemm,
)
from .rooflines import (
    latent_attention as roofline_latent_attention,
)
from .rooflines import (
    latent_bmm as roofline_latent_bmm,
)
from .rooflines import (
    latent_module as roofline_latent_module,
)
from .rooflines import (
    moe as roofline_moe,
)
from .rooflines import (
    ring as roofline_ring,
)
from .source import model_config

#: The model whose latent widths the bare MLA and BMM tables were measured at.
LATENT_MODEL = "deepseek-ai/DeepSeek-V3"
#: Argument -> the config key of the latent widths.
LATENT_WIDTHS = {"hidden": "hidden_size", "q_lora": "q_lora_rank", "kv_lora": "kv_lora_rank",
                 "nope": "qk_nope_head_dim", "rope": "qk_rope_head_dim", "v_dim": "v_head_dim"}
#: GDN kernels by their role in a layer (``kernel_source`` values of the three engines).
GDN_CONV = ("causal_conv1d_fn", "causal_conv1d_update")
GDN_PREFILL = ("chunk_gated_delta_rule", "chunk_gated_delta_rule_flashinfer")
GDN_DECODE = ("fused_recurrent_gated_delta_rule", "fused_recurrent_gated_delta_rule_packed_decode",
              "fused_sigmoid_gating_delta_rule_update")


def _window(columns: Columns) -> np.ndarray:
    """Each row's attention window (a table without the column measures full attention:
    A100's, collected before windows were).
    """
    if "window_size" not in columns:
        return np.full(len(columns["kernel_source"]), FULL_WINDOW)
    w = columns["window_size"].astype(float)
    return np.where(w <= 0, FULL_WINDOW, w)


def _width(name: str, model: str | None = None):
    """A latent width of each row's model (``model`` column), or of ``model``."""
    key = LATENT_WIDTHS[name]

    def make(columns: Columns) -> np.ndarray:
        if model is not None:
            return np.full(len(columns["kernel_source"]), float(model_config(model).get(key) or 0))
        names = columns["model"]
        widths = {m: float(model_config(str(m)).get(key) or 0) for m in set(names.tolist())}
        return np.array([widths[m] for m in names.tolist()], dtype=float)
    return make


def _channels_gdn(columns: Columns) -> np.ndarray:
    return (2 * columns["num_k_heads"] * columns["head_k_dim"]
            + columns["num_v_heads"] * columns["head_v_dim"]).astype(float)


def _channels_mamba(columns: Columns) -> np.ndarray:
    return (columns["nheads"] * columns["head_dim"]
            + 2 * columns["n_groups"] * columns["d_state"]).astype(float)


def _gemm() -> tuple[Family, ...]:
    return (Family("gemm", "gemm", "gemm_perf", ("m", "n", "k"), ("n", "k"), ("m",),
                   {"m": "m", "n": "n", "k": "k"}, {"dtype": "gemm_dtype"}, roofline_gemm,
                   "a matrix product of m tokens by an n×k weight", blocks=("m", "n")),
            # The dynamic part of 8-bit activation quantisation, the dynamic cast less the
            # static one: TensorRT-LLM's per-tensor quantize_e4m3_per_tensor, vLLM's
            # per-token quantisation (SGLang's table times it at zero).
            Family("activation_scale", "quantize", "computescale_perf", ("m", "k"), ("k",), ("m",),
                   {"m": "m", "k": "k"}, {"dtype": "quant_dtype"}, roofline_activation_scale,
                   "the scale of an m×k activation computed on the fly (its amax) before "
                   "per-tensor FP8 quantisation", blocks=("m",)),)


def _attention() -> tuple[Family, ...]:
    return (
        Family("context_attention", "attention", "context_attention_perf",
               ("batch", "length", "heads", "kv_heads", "head_dim", "window"),
               ("heads", "kv_heads", "head_dim", "window"), ("batch", "length"),
               {"batch": "batch_size", "length": "isl", "heads": "num_heads",
                "kv_heads": "num_key_value_heads", "head_dim": "head_dim"},
               {"kv_dtype": "kv_cache_dtype"}, roofline_attention(False),
               "causal attention of one layer over a batch of prompts (per GPU)",
               derived={"window": _window}, reads=("window_size",), blocks=("batch",)),
        Family("generation_attention", "attention", "generation_attention_perf",
               ("batch", "context", "heads", "kv_heads", "head_dim", "window"),
               ("heads", "kv_heads", "head_dim", "window"), ("batch", "context"),
               {"batch": "batch_size", "heads": "num_heads", "kv_heads": "num_key_value_heads",
                "head_dim": "head_dim"},
               {"kv_dtype": "kv_cache_dtype"}, roofline_attention(True),
               "one layer's attention of a batch of decoding sequences over their caches (per GPU)",
               derived={"window": _window,
                        "context": lambda c: (c["isl"] + c["step"]).astype(float)},
               reads=("window_size", "isl", "step"), blocks=("batch",)),
    )


#: How :func:`same_split` stands in for a MoE layout, as a derivation says it.
SAME_SPLIT = "the experts' weights split as many ways per GPU, more of them over the experts"


def same_split(config: Mapping[str, float]) -> list[dict[str, float]]:
    """The MoE layouts that split a layer's experts over as many GPUs as ``config`` with
    less tensor parallelism within each expert and more expert parallelism, the nearest
    first: tensor-parallel 8 reads as (TP 4, EP 2), (2, 4), (1, 8). Each GPU holds the
    same share of the weights and does the same FLOPs (the roofline is the same), and
    the measured kernels agree: over the installed MoE tables, each configuration with
    TP > 1 held out and read this way is 0.999× its own latency at the median (median
    absolute log ratio 0.089; at TP 8, 0.96–1.01× by token band), where the TP 1
    configuration scaled by the roofline ratio gives 0.66× (0.31–0.60× at TP 8)
    (``benchmarks/bench_moe_split.py``).

    >>> [(c["tp"], c["ep"]) for c in same_split({"tp": 8.0, "ep": 1.0})]
    [(4.0, 2.0), (2.0, 4.0), (1.0, 8.0)]
    >>> same_split({"tp": 1.0, "ep": 8.0})
    []
    """
    out, tp, ep = [], config["tp"], config["ep"]
    factor = 2.0
    while tp / factor >= 1.0 and (tp / factor).is_integer():
        out.append({**config, "tp": tp / factor, "ep": ep * factor})
        factor *= 2.0
    return out


def _experts() -> tuple[Family, ...]:
    moe = Family("moe", "moe", "moe_perf",
                 ("tokens", "hidden", "inter", "topk", "experts", "tp", "ep"),
                 ("hidden", "inter", "topk", "experts", "tp", "ep"), ("tokens",),
                 {"tokens": "num_tokens", "hidden": "hidden_size", "inter": "inter_size",
                  "topk": "topk", "experts": "num_experts", "tp": "moe_tp_size",
                  "ep": "moe_ep_size"},
                 {"dtype": "moe_dtype", "distribution": "distribution"}, roofline_moe,
                 "one layer's routed experts for a batch of tokens (grouped GEMMs)",
                 blocks=("tokens",), stand_ins=same_split, stand_in_rule=SAME_SPLIT)
    arguments = ("tokens", "hidden", "topk", "experts", "ep")
    configs = ("hidden", "topk", "experts", "ep")
    a2a = tuple(
        Family(phase, "comm", "moe_a2a_perf", arguments, configs, ("tokens",),
               {"tokens": "num_tokens", "hidden": "hidden_size", "topk": "topk",
                "experts": "num_experts", "ep": "ep_size"},
               {"backend": "comm_backend", "dtype": "comm_dtype"},
               roofline_dispatch if phase == "dispatch" else roofline_all_to_all,
               f"the all-to-all {phase} of one MoE layer's tokens to their experts' ranks "
               "(one rank's tokens)", fixed={"phase": phase}, latency="transmit_us",
               seconds=1e-6, blocks=("tokens",))
        for phase in ("dispatch", "combine"))
    # SGLang's DeepEP tables: one node (8 ranks), one column per phase.
    deepep = tuple(
        Family(f"deepep_{phase}_{mode}", "comm", f"wideep_deepep_{mode}_perf", arguments, configs,
               ("tokens",), {"tokens": "num_token", "hidden": "hidden_size", "topk": "num_topk",
                             "experts": "num_experts"}, {}, roofline_all_to_all,
               f"DeepEP's {'low-latency' if mode == 'll' else 'normal'} {phase} of one MoE "
               "layer's tokens (one rank's tokens, 8 ranks of a node)",
               derived={"ep": lambda c: 8.0 * c["node_num"].astype(float)}, reads=("node_num",),
               latency=column, seconds=1e-6, blocks=("tokens",))
        for phase, mode, column in (("dispatch", "ll", "dispatch_avg_t_us"),
                                    ("combine", "ll", "combine_avg_t_us"),
                                    ("dispatch", "normal", "dispatch_transmit_us"),
                                    ("combine", "normal", "combine_transmit_us")))
    # SGLang's MoE kernel behind DeepEP (``deepepmoe``: grouped GEMMs on the tokens each
    # expert rank receives), measured apart for decode and prefill, at the stage's tokens
    # as ``moe_perf``.
    wideep = tuple(
        Family(f"deepep_moe_{phase}", "moe", f"wideep_{phase}_moe_perf", moe.arguments,
               moe.configs, moe.curve, moe.columns, moe.categories, roofline_moe,
               f"one layer's routed experts behind DeepEP's {mode} dispatch ({phase})",
               blocks=("tokens",), stand_ins=same_split, stand_in_rule=SAME_SPLIT)
        for phase, mode in (("generation", "low-latency"), ("context", "normal")))
    # TensorRT-LLM's all-to-all over a rack's NVLink (MNNVL): one rank's tokens, by the
    # experts' dtype and the kernel (one-sided, or two-sided after a prepare step).
    nvlink = tuple(
        Family(f"nvlink_{phase}", "comm", "trtllm_alltoall_perf", arguments, configs,
               ("tokens",), {"tokens": "num_tokens", "hidden": "hidden_size", "topk": "topk",
                             "experts": "num_experts", "ep": "moe_ep_size"},
               {"dtype": "moe_dtype", "source": "kernel_source"},
               roofline_all_to_all if phase == "combine" else roofline_dispatch,
               f"TensorRT-LLM's NVLink all-to-all {phase} of one MoE layer's tokens (one "
               "rank's tokens)", fixed={"op_name": f"alltoall_{phase}"}, blocks=("tokens",))
        for phase in ("dispatch", "combine", "prepare"))
    return (moe, *a2a, *deepep, *wideep, *nvlink)


def _collectives() -> tuple[Family, ...]:
    custom = Family("all_reduce", "comm", "custom_allreduce_perf", ("elements", "gpus"),
                    ("gpus",), ("elements",), {"elements": "message_size", "gpus": "num_gpus"},
                    {}, roofline_ring(2, 2, "two-shot all-reduce", fixed_steps=True),
                    "an all-reduce of 16-bit elements across the tensor-parallel GPUs",
                    unit_note=" (message of 16-bit elements)", blocks=("elements",))
    nccl = tuple(
        Family(f"nccl_{op}", "comm", "nccl_perf", ("elements", "gpus"), ("gpus",), ("elements",),
               {"elements": "message_size", "gpus": "num_gpus"}, {"dtype": "nccl_dtype"},
               roofline_ring(factor, 1, f"ring {op.replace('_', '-')}"),
               f"NCCL's {op.replace('_', '-')} of a message of 16-bit elements",
               unit_note=" (message of 16-bit elements)", fixed={"op_name": op},
               blocks=("elements",), engine="nccl")
        for op, factor in (("all_reduce", 2), ("all_gather", 1), ("reduce_scatter", 1),
                           ("alltoall", 1)))
    return (custom, *nccl)


def _latent() -> tuple[Family, ...]:
    widths = tuple(LATENT_WIDTHS)
    module = tuple(
        Family(f"latent_{phase}", "mla", f"mla_{phase}_module_perf",
               (*curve, "heads", *widths), ("heads", *widths), curve,
               {"batch": "batch_size", "heads": "num_heads",
                **({"length": "isl"} if phase == "context" else {})},
               {"kv_dtype": "kv_cache_dtype", "gemm": "gemm_type"},
               roofline_latent_module(phase == "generation"),
               f"one layer's latent attention block in {phase} (projections, attention over the "
               "latent cache, output projection; per GPU)",
               derived={**{w: _width(w) for w in widths},
                        **({"context": lambda c: c["step"].astype(float)}
                           if phase == "generation" else {})},
               reads=("model", "step"), blocks=("batch",))
        for phase, curve in (("context", ("batch", "length")),
                             ("generation", ("batch", "context"))))
    latent = ("kv_lora", "nope", "rope", "v_dim")
    bare = tuple(
        Family(f"mla_{phase}", "mla", f"{phase}_mla_perf", (*curve, "heads", *latent),
               ("heads", *latent), curve,
               {"batch": "batch_size", "heads": "num_heads",
                **({"length": "isl"} if phase == "context" else {})},
               {"kv_dtype": "kv_cache_dtype"}, roofline_latent_attention(phase == "generation"),
               f"latent attention alone in {phase} (per GPU, DeepSeek-V3's latent widths)",
               derived={**{w: _width(w, LATENT_MODEL) for w in latent},
                        **({"context": lambda c: (c["isl"] + c["step"]).astype(float)}
                           if phase == "generation" else {})},
               reads=("isl", "step"), blocks=("batch",))
        for phase, curve in (("context", ("batch", "length")),
                             ("generation", ("batch", "context"))))
    bmm = tuple(
        Family(f"mla_bmm_{op}", "mla_bmm", "mla_bmm_perf",
               ("tokens", "heads", "kv_lora", "nope", "v_dim"), ("heads", "kv_lora", "nope", "v_dim"),
               ("tokens",), {"tokens": "num_tokens", "heads": "num_heads"},
               {"dtype": "bmm_dtype"}, roofline_latent_bmm(op == "pre"),
               f"latent attention's absorbed {'key' if op == 'pre' else 'value'} projection in "
               "decode (per GPU, DeepSeek-V3's latent widths)",
               derived={w: _width(w, LATENT_MODEL) for w in ("kv_lora", "nope", "v_dim")},
               fixed={"op_name": f"mla_gen_{op}"}, blocks=("tokens",))
        for op in ("pre", "post"))
    return (*module, *bare, *bmm)


def _state() -> tuple[Family, ...]:
    out = []
    for phase, curve in (("context", ("batch", "length")), ("generation", ("batch",))):
        columns = {"batch": "batch_size", **({"length": "seq_len"} if phase == "context" else {})}
        for name, table, channels, reads, kernels in (
                ("gdn_conv", "gdn_perf", _channels_gdn,
                 ("num_k_heads", "head_k_dim", "num_v_heads", "head_v_dim"), GDN_CONV),
                ("mamba2_conv", "mamba2_perf", _channels_mamba,
                 ("nheads", "head_dim", "n_groups", "d_state"), GDN_CONV)):
            out.append(Family(
                f"{name}_{phase}", "linear_attention", table, (*curve, "channels", "conv"),
                ("channels", "conv"), curve, {**columns, "conv": "d_conv"}, {},
                roofline_convolution(phase == "generation"),
                f"the short causal convolution of a {'gated delta-net' if name == 'gdn_conv' else 'Mamba-2'} "
                f"layer in {phase} (per GPU: its channels)",
                derived={"channels": channels}, reads=reads,
                fixed={"phase": phase, "kernel_source": kernels}, blocks=("batch",)))
        out.append(Family(
            f"gdn_{phase}", "linear_attention", "gdn_perf", (*curve, "k_heads", "k_dim", "v_heads",
                                                           "v_dim"),
            ("k_heads", "k_dim", "v_heads", "v_dim"), curve,
            {**columns, "k_heads": "num_k_heads", "k_dim": "head_k_dim", "v_heads": "num_v_heads",
             "v_dim": "head_v_dim"}, {}, roofline_delta_rule(phase == "generation"),
            f"the gated delta rule's {'chunked scan' if phase == 'context' else 'one-step update'} "
            "of a gated delta-net layer (per GPU: its heads)",
            fixed={"phase": phase,
                   "kernel_source": GDN_PREFILL if phase == "context" else GDN_DECODE},
            blocks=("batch",)))
    return tuple(out)


FAMILIES: Mapping[str, Family] = {f.name: f for f in (
    *_gemm(), *_attention(), *_experts(), *_collectives(), *_latent(), *_state())}


__all__ = ["FAMILIES", "GDN_CONV", "GDN_DECODE", "GDN_PREFILL", "LATENT_MODEL", "LATENT_WIDTHS"]
