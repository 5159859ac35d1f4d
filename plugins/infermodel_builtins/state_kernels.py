"""The measured kernels of the layers without attention: gated delta-net (Qwen3-Next),
Mamba-2 (Nemotron-H), Mamba-1 (Jamba), lightning attention (MiniMax-01/M1) and a d×d
projection (DeciLM), per the layer model (not a plugin: the operators plugin attaches
them to its ``state_mixer`` and ``state_update`` operators).

For T tokens in the pass, per layer of each kind (L_kind of them)::

    state_mixer   the kind's projections, GEMMs (weights "linear"):
                  gated delta-net   n = 2·h_k·d_k + 2·h_v·d_v, k = d (q, k, v, gate)
                                    n = 2·h_v, k = d (per-head gates)
                                    n = d, k = h_v·d_v (output)
                  Mamba-2           n = 2·h·p + 2·g·s + h, k = d (z, x, B, C, Δ)
                                    n = d, k = h·p (output)
                  Mamba-1           n = 2·d_i, k = d; n = r + 2·s, k = d_i;
                                    n = d_i, k = r; n = d, k = d_i
                  lightning         n = 3·h·d_h, k = d; n = h·d_h, k = d (gate);
                                    n = d, k = h·d_h
                  projection        n = d, k = d
    state_update  the recurrence, its rows summed (a layer is all of them):
                  gated delta-net   the convolution over 2·h_k·d_k + h_v·d_v channels +
                                    the delta rule (chunked in prefill, one step in decode)
                                    + two elementwise kernels no table measures (the
                                    projections' outputs reordered, the gated norm)
                  Mamba-2           the convolution over h·p + 2·g·s channels + the
                                    selective scan at its roofline (the tables hold only
                                    the convolution: ``mamba2_perf``'s rows are
                                    ``causal_conv1d_fn`` and ``causal_conv1d_update``)
                  Mamba-1,          at their roofline: no table measures Mamba-1's
                  lightning         convolution and scan or lightning attention's
                                    recurrence

Column-parallel projections split n over the tensor-parallel cards, row-parallel ones k;
heads and channels split with them.

References: Gated Delta Networks (arXiv:2412.06464) §3; Mamba-2 (arXiv:2405.21060) §7;
Mamba (arXiv:2312.00752) §3; MiniMax-01 (arXiv:2501.08313) §2.2; NVIDIA aiconfigurator's
collectors ``collector/{vllm,sglang,trtllm}/collect_gdn.py`` and
``collector/trtllm/collect_mamba2.py`` (the rows of one layer's kernels).
"""

from __future__ import annotations

from infermodel.plugin import Kernel, S

#: Kernels no table measures (the kernel plan times them at their roofline, each launch
#: with the card's fixed kernel time); the same family as the operators' elementwise ones.
ELEMENTWISE = "elementwise"

#: Why a mixer's recurrence keeps its roofline.
UNMEASURED = {
    "mamba": "Mamba-1's convolution and selective scan (no table measures them)",
    "lightning": "lightning attention's recurrence (no table measures it)",
}
MAMBA2_SCAN = ("Mamba-2's selective scan (no table measures it: the Mamba-2 tables hold only "
               "the convolution)")
#: Mixer -> its layer count's quantity.
COUNTS = {"linear": "layers_linear_attention", "mamba2": "layers_mamba2", "mamba": "layers_mamba",
          "lightning": "layers_lightning_attention", "projection": "layers_projection_mixer"}


def _gemm(tokens, n, k, calls, split, label):
    return Kernel("gemm", {"m": tokens, "n": n, "k": k}, calls=calls, split=(split,),
                  weights="mixers", label=label)


def mixer_projections(kinds, tokens):
    """The ``state_mixer`` operator's GEMMs for the mixers in ``kinds``."""
    d = S.d_model
    out = []
    for kind in kinds:
        calls = S[COUNTS[kind]]
        if kind == "linear":
            kh, vh, kd, vd = (S.linear_key_heads, S.linear_value_heads, S.linear_key_head_dim,
                              S.linear_value_head_dim)
            out += [_gemm(tokens, 2 * kh * kd + 2 * vh * vd, d, calls, "n", "delta-net in"),
                    _gemm(tokens, 2 * vh, d, calls, "n", "delta-net gates"),
                    _gemm(tokens, d, vh * vd, calls, "k", "delta-net out")]
        elif kind == "mamba2":
            inner = S.mamba_heads * S.mamba_head_dim
            n = 2 * inner + 2 * S.mamba_groups * S.mamba_d_state + S.mamba_heads
            out += [_gemm(tokens, n, d, calls, "n", "Mamba-2 in"),
                    _gemm(tokens, d, inner, calls, "k", "Mamba-2 out")]
        elif kind == "mamba":
            inner, rank = S.mamba_inner, S.mamba_dt_rank
            out += [_gemm(tokens, 2 * inner, d, calls, "n", "Mamba in"),
                    _gemm(tokens, rank + 2 * S.mamba_d_state, inner, calls, "k", "Mamba x"),
                    _gemm(tokens, inner, rank, calls, "n", "Mamba dt"),
                    _gemm(tokens, d, inner, calls, "k", "Mamba out")]
        elif kind == "lightning":
            width = S.heads * S.head_dim
            out += [_gemm(tokens, 3 * width, d, calls, "n", "lightning qkv"),
                    _gemm(tokens, width, d, calls, "n", "lightning gate"),
                    _gemm(tokens, d, width, calls, "k", "lightning out")]
        elif kind == "projection":
            out.append(_gemm(tokens, d, d, calls, "n", "projection"))
    return tuple(out)


def _delta_net_elementwise(tokens, calls, keys, values, heads):
    """A gated delta-net layer's two elementwise kernels (vLLM, SGLang): its projections'
    outputs split and reordered into the convolution's input, the output gate and the
    per-head gates (reads and writes 2·(h_k·d_k + h_v·d_v) + 2·h_v 16-bit values a token),
    and the gated norm of the delta rule's output (reads the output and the gate, writes
    one: 3·h_v·d_v values).
    """
    reorder = 2 * (2 * keys + 2 * values + 2 * heads)
    return (Kernel(ELEMENTWISE, {"flops": 0, "bytes": 2 * reorder * tokens * calls},
                   calls=calls, label="delta-net inputs reordered"),
            Kernel(ELEMENTWISE, {"flops": 6 * tokens * values * calls,
                                 "bytes": 2 * 3 * tokens * values * calls},
                   calls=calls, label="delta-net gated norm"))


def recurrence(kinds, phase, tokens):
    """The ``state_update`` operator's kernels for the mixers in ``kinds``."""
    decode = phase == "decode"
    curve = {"batch": S.batch, **({} if decode else {"length": S.prompt_tokens})}
    suffix = "generation" if decode else "context"
    out = []
    for kind in kinds:
        calls = S[COUNTS[kind]]
        if kind == "linear":
            kh, vh, kd, vd = (S.linear_key_heads, S.linear_value_heads, S.linear_key_head_dim,
                              S.linear_value_head_dim)
            out += [Kernel(f"gdn_conv_{suffix}", {**curve, "channels": 2 * kh * kd + vh * vd,
                                                  "conv": S.linear_conv_kernel},
                           calls=calls, split=("channels",), label="delta-net convolution"),
                    Kernel(f"gdn_{suffix}", {**curve, "k_heads": kh, "k_dim": kd, "v_heads": vh,
                                             "v_dim": vd},
                           calls=calls, split=("k_heads", "v_heads"), label="delta rule"),
                    *_delta_net_elementwise(tokens, calls, kh * kd, vh * vd, vh)]
        elif kind == "mamba2":
            h, p, g, n = S.mamba_heads, S.mamba_head_dim, S.mamba_groups, S.mamba_d_state
            state = S.batch * calls * h * p * n * S.linear_state_bits / 8
            out += [Kernel(f"mamba2_conv_{suffix}", {**curve, "channels": h * p + 2 * g * n,
                                                     "conv": S.mamba_d_conv},
                           calls=calls, split=("channels",), label="Mamba-2 convolution"),
                    Kernel("roofline", {"flops": tokens * calls * 5 * h * p * n,
                                        "bytes": 2 * state if decode else state},
                           label=MAMBA2_SCAN)]
        elif kind in UNMEASURED:
            state = S.batch * calls * S[f"{kind}_state_values_per_layer"] * S.linear_state_bits / 8
            out.append(Kernel("roofline", {"flops": tokens * calls * S[f"{kind}_flops_per_token"],
                                           "bytes": 2 * state if decode else state},
                              label=UNMEASURED[kind]))
    return tuple(out)


__all__ = ["COUNTS", "MAMBA2_SCAN", "UNMEASURED", "mixer_projections", "recurrence"]
