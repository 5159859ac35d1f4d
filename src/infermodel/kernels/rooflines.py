"""Each kernel family's roofline on a card's datasheet peaks: what the lookups scale by
outside the measured grid, and what a derivation compares a measured latency with.

A roofline is made from a family's categories (its dtype) and the card's figures
(:func:`.source.card`) and returns ``(roofline, describe)``: ``roofline(v)`` maps named
arguments (numbers or numpy arrays) to seconds, the larger of the compute time and the
memory (or link) time; ``describe(v)`` says at one point which bound it is and why.
Products are written so that the moving arguments (a token count, a batch) multiply
last: a sweep's array costs a few operations.

Counts per call of one layer's kernel, on one GPU (``heads``, ``kv_heads``, ``experts``
are the GPU's own):

=========================  ======================================  ==========================
family                     FLOPs                                    bytes
=========================  ======================================  ==========================
GEMM m×n×k                 2·m·n·k                                  m·k·a + n·k·w + 2·m·n
activation scale (m×k)     m·k                                      2·m·k
context attention          4·h·d·pairs, pairs = b·(s·s' − s'²/2)     b·s·(4·h·d + 2·g·d·c)
generation attention       4·b·h·d·c'                               b·(c'·2·g·d·c + 4·h·d)
MoE (t tokens, k of E)     6·t·k·H·I/(tp·ep)                        touched·3·H·I·w/tp + 4·t·H
latent attention module    the five projections + attention         weights + cache + 4·T·d
latent attention (bare)    2·h·(r + ρ + r)·positions                cache + queries
latent absorption BMM      2·T·h·n·r                                h·n·r·2 + T·h·(n + r)·2
GDN / Mamba-2 convolution  2·k·C·T                                  T·C·(k + 2)·2
GDN recurrence             8·v·d_k·d_v·T                            T·C·2 + state (fp32, ×2)
collectives                0                                        the ring's link traffic
=========================  ======================================  ==========================

(s' = min(s, window), c' = min(c, window); a, w bytes per activation and weight value;
c bytes per cached value; r, ρ the latent and rotary widths; C the convolution's
channels; T the tokens of the pass.) The latent attention module is one layer's whole
block (down-projections of queries and keys/values, the up-projections, attention over
the latent cache, the output projection) at the table's model widths.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

#: Bytes per weight and per activation value, and the datasheet rate its products run at.
GEMM_DTYPES: Mapping[str, tuple[float, float, str]] = {
    "bfloat16": (2.0, 2.0, "bfloat16_tc_flops"),
    "float16": (2.0, 2.0, "bfloat16_tc_flops"),
    "fp8": (1.0, 1.0, "fp8_tc_flops"),
    "fp8_block": (1.0, 1.0, "fp8_tc_flops"),
    "nvfp4": (0.5625, 0.5625, "fp4_tc_flops"),
    "int4_wo": (0.5, 2.0, "bfloat16_tc_flops"),
    "int8_wo": (1.0, 2.0, "bfloat16_tc_flops"),
    "sq": (1.0, 1.0, "int8_tc_flops"),
}
MOE_DTYPES: Mapping[str, tuple[float, str]] = {
    "bfloat16": (2.0, "bfloat16_tc_flops"),
    "fp8": (1.0, "fp8_tc_flops"),
    "fp8_block": (1.0, "fp8_tc_flops"),
    "int4_wo": (0.5, "bfloat16_tc_flops"),
    "w4a16_mxfp4": (0.53125, "bfloat16_tc_flops"),
    "w4a8_mxfp4_mxfp8": (0.53125, "fp8_tc_flops"),
    "w4afp8": (0.5, "fp8_tc_flops"),
    "nvfp4": (0.5625, "fp4_tc_flops"),
}
KV_BYTES = {"bfloat16": 2.0, "fp8": 1.0, "int8": 1.0}
#: Latency of one step of a collective on the card's links (an assumption for the
#: roofline's shape only: measured times never use it).
LINK_STEP = 1e-6

Roofline = tuple[Callable[[Mapping[str, Any]], Any], Callable[[Mapping[str, Any]], str]]


def _peak(card: Mapping[str, float], key: str) -> float:
    return card.get(key) or card.get("bfloat16_tc_flops") or 1e15


def bounded(parts: Callable[[Mapping[str, Any]], tuple[Any, Any]], flops_peak: float,
            bandwidth: float, what: str = "") -> Roofline:
    """The roofline of ``parts(v) -> (FLOPs, bytes)``: max(FLOPs / peak, bytes / bandwidth)."""

    def roofline(v):
        flops, moved = parts(v)
        return np.maximum(flops / flops_peak, moved / bandwidth)

    def describe(v):
        flops, moved = (float(x) for x in parts(v))
        bound = "compute" if flops / flops_peak >= moved / bandwidth else "memory"
        return (f"{bound}-bound: {flops:.4g} FLOP at {flops_peak / 1e12:.4g} TFLOP/s, "
                f"{moved:.4g} B{what} at {bandwidth / 1e12:.4g} TB/s")

    return roofline, describe


def gemm(categories, card) -> Roofline:
    weight, activation, key = GEMM_DTYPES.get(categories["dtype"], (2.0, 2.0, "bfloat16_tc_flops"))

    def parts(v):
        m, n, k = v["m"], v["n"], v["k"]
        return m * (2 * n * k), m * (k * activation + 2 * n) + n * k * weight

    return bounded(parts, _peak(card, key), card["mem_bw"])


def activation_scale(categories, card) -> Roofline:
    """One amax reduction over an m×k activation of 16-bit values."""

    def parts(v):
        elements = v["m"] * v["k"]
        return elements, elements * 2.0

    return bounded(parts, _peak(card, "bfloat16_tc_flops"), card["mem_bw"])


def attention(decode: bool):
    def make(categories, card) -> Roofline:
        kv = KV_BYTES.get(categories["kv_dtype"], 2.0)

        def parts(v):
            b, h, g, d, w = v["batch"], v["heads"], v["kv_heads"], v["head_dim"], v["window"]
            if decode:
                keys = np.minimum(v["context"], w)
                return b * (keys * (4 * h * d)), b * (keys * (2 * g * d * kv) + 4 * h * d)
            s = v["length"]
            seen = np.minimum(s, w)
            pairs = b * (s * seen - seen * seen / 2)
            return pairs * (4 * h * d), b * (s * (2 * h * d * 2 + 2 * g * d * kv))

        return bounded(parts, _peak(card, "bfloat16_tc_flops"), card["mem_bw"])
    return make


def moe(categories, card) -> Roofline:
    weight, key = MOE_DTYPES.get(categories["dtype"], (2.0, "bfloat16_tc_flops"))

    def parts(v):
        t, h, i, k, e, tp, ep = (v[n] for n in ("tokens", "hidden", "inter", "topk", "experts",
                                                 "tp", "ep"))
        touched = e / ep * (1 - (1 - np.minimum(k / e, 1.0)) ** t)
        flops = t * (6 * k * h * i / (tp * ep))
        return flops, touched * (3 * h * i / tp * weight) + t * (4 * h)

    return bounded(parts, _peak(card, key), card["mem_bw"], " of experts and activations")


# ---------------------------------------------------------------------------------
# Latent attention
# ---------------------------------------------------------------------------------


def _latent_weights(v):
    """Weights of one latent attention layer on one GPU (its heads' share of the
    up-projections and output, the down-projections whole), in values.
    """
    d, h, rq, rkv, n, rho, vd = (v[k] for k in ("hidden", "heads", "q_lora", "kv_lora", "nope",
                                                "rope", "v_dim"))
    down = d * (rq + rkv + rho)
    query = np.where(rq > 0, rq, d) * h * (n + rho)
    return down + query + rkv * h * (n + vd) + h * vd * d


def latent_module(decode: bool):
    """One layer's whole latent attention block (vLLM's and TensorRT-LLM's module tables)."""

    def make(categories, card) -> Roofline:
        kv = KV_BYTES.get(categories["kv_dtype"], 2.0)
        weight = 1.0 if categories.get("gemm") in ("fp8", "fp8_block") else 2.0
        key = "fp8_tc_flops" if weight == 1.0 else "bfloat16_tc_flops"

        def parts(v):
            b, d, h = v["batch"], v["hidden"], v["heads"]
            rkv, n, rho, vd = v["kv_lora"], v["nope"], v["rope"], v["v_dim"]
            matmul = 2 * _latent_weights(v)
            if decode:
                c = v["context"]
                attend = c * (2 * h * (2 * rkv + rho)) + 2 * h * n * rkv + 2 * h * rkv * vd
                flops = b * (matmul + attend)
                moved = _latent_weights(v) * weight + b * (c * ((rkv + rho) * kv) + 4 * d)
                return flops, moved
            s = v["length"]
            tokens = b * s
            pairs = b * (s * s / 2)
            flops = tokens * matmul + pairs * (2 * h * (n + rho) + 2 * h * vd)
            moved = _latent_weights(v) * weight + tokens * ((rkv + rho) * kv + 4 * d)
            return flops, moved

        return bounded(parts, _peak(card, key), card["mem_bw"])
    return make


def latent_attention(decode: bool):
    """Attention alone over the latent cache (TensorRT-LLM's and SGLang's MLA tables)."""

    def make(categories, card) -> Roofline:
        kv = KV_BYTES.get(categories["kv_dtype"], 2.0)

        def parts(v):
            b, h, rkv, n, rho, vd = (v[k] for k in ("batch", "heads", "kv_lora", "nope", "rope",
                                                    "v_dim"))
            if decode:
                c = v["context"]
                return (b * (c * (2 * h * (2 * rkv + rho))),
                        b * (c * ((rkv + rho) * kv) + 2 * h * (2 * rkv + rho) * 2))
            s = v["length"]
            pairs = b * (s * s / 2)
            return (pairs * (2 * h * (n + rho) + 2 * h * vd),
                    b * (s * (2 * h * (2 * (n + rho) + vd) + (rkv + rho) * kv)))

        return bounded(parts, _peak(card, "bfloat16_tc_flops"), card["mem_bw"])
    return make


def latent_bmm(pre: bool):
    """The absorbed key (pre) or value (post) projection of latent attention's decode."""

    def make(categories, card) -> Roofline:
        weight = 1.0 if categories.get("dtype") == "fp8" else 2.0
        key = "fp8_tc_flops" if weight == 1.0 else "bfloat16_tc_flops"

        def parts(v):
            t, h, rkv = v["tokens"], v["heads"], v["kv_lora"]
            inner = v["nope"] if pre else v["v_dim"]
            return t * (2 * h * inner * rkv), h * inner * rkv * weight + t * (h * (inner + rkv) * 2)

        return bounded(parts, _peak(card, key), card["mem_bw"])
    return make


# ---------------------------------------------------------------------------------
# State-space and linear-attention kernels
# ---------------------------------------------------------------------------------


def convolution(decode: bool):
    """The short causal convolution of a Mamba-2 or gated delta-net layer over C channels."""

    def make(categories, card) -> Roofline:
        def parts(v):
            tokens = v["batch"] if decode else v["batch"] * v["length"]
            c, k = v["channels"], v["conv"]
            return tokens * (2 * k * c), tokens * (c * (k + 2) * 2)

        return bounded(parts, _peak(card, "bfloat16_tc_flops"), card["mem_bw"])
    return make


def delta_rule(decode: bool):
    """The gated delta rule's recurrence (chunked in prefill, one step in decode); the
    state is fp32, read and written once per pass.
    """

    def make(categories, card) -> Roofline:
        def parts(v):
            b = v["batch"]
            tokens = b if decode else b * v["length"]
            kh, kd, vh, vd = v["k_heads"], v["k_dim"], v["v_heads"], v["v_dim"]
            state = vh * kd * vd * 4
            return (tokens * (8 * vh * kd * vd),
                    tokens * ((2 * kh * kd + 2 * vh * vd) * 2) + b * (2 * state))

        return bounded(parts, _peak(card, "bfloat16_tc_flops"), card["mem_bw"])
    return make


# ---------------------------------------------------------------------------------
# Collectives
# ---------------------------------------------------------------------------------


def _link(card) -> float:
    return card.get("intra_node_bw") or 4.5e11


def ring(factor: float, steps: float, what: str, *, fixed_steps: bool = False):
    """A ring collective over n GPUs moving ``factor·(n − 1)/n`` of a message of 16-bit
    elements over each link, in ``steps·(n − 1)`` steps; ``fixed_steps``: in ``steps``
    steps whatever n (a collective whose GPUs synchronise all at once through the switch:
    the engines' custom all-reduce, one-shot below its size threshold and two-shot above,
    each GPU reading or writing its peers' buffers directly).
    """

    def make(categories, card) -> Roofline:
        link = _link(card)
        size = 1.0 if categories.get("dtype") == "int8" else 2.0

        def roofline(v):
            n = v["gpus"]
            hops = steps if fixed_steps else steps * (n - 1)
            return (factor * (n - 1) / n * size) * v["elements"] / link + hops * LINK_STEP

        def describe(v):
            each = (f"{steps:g} steps" if fixed_steps
                    else f"{LINK_STEP * 1e6:g} µs a step")
            return (f"{what} of {size * float(v['elements']):.4g} B over {float(v['gpus']):.0f} "
                    f"GPUs at {link / 1e9:.4g} GB/s per link, " + (
                        f"{each} of {LINK_STEP * 1e6:g} µs" if fixed_steps else each))

        return roofline, describe
    return make


#: Link latencies of an all-to-all: each rank writes to all its peers at once (one-sided
#: puts), then signals them; not one step per peer as in a ring.
A2A_STEPS = 2


#: Bytes a dispatched element takes on the wire, by the table's dtype (NVFP4: 4 bits and
#: one 8-bit scale per 16); 16-bit otherwise.
WIRE_BYTES = {"fp8": 1.0, "nvfp4": 0.5625}


def all_to_all(categories, card, *, wire: float = 2.0) -> Roofline:
    """Expert dispatch or combine: each of t tokens to its k experts' ranks, (X − 1)/X of
    them over the links, ``wire`` bytes an element (a combine's 16-bit outputs), in
    :data:`A2A_STEPS` link latencies whatever X. TensorRT-LLM's NVLink all-to-all on
    GB200 (``trtllm_alltoall_perf``) grows by 16 % (dispatch) and 30 % (combine) from 8
    to 32 ranks at 64 tokens a rank, where a step per peer would make it 2.8 times.
    """
    link = _link(card)

    def roofline(v):
        x = v["ep"]
        return (v["tokens"] * (v["topk"] * v["hidden"] * wire * (x - 1) / x) / link
                + A2A_STEPS * LINK_STEP)

    def describe(v):
        moved = float(v["tokens"] * v["topk"] * v["hidden"] * wire)
        return (f"all-to-all of {moved:.4g} B from one of {float(v['ep']):.0f} expert ranks at "
                f"{link / 1e9:.4g} GB/s per link, {A2A_STEPS} steps of {LINK_STEP * 1e6:g} µs")

    return roofline, describe


def dispatch(categories, card) -> Roofline:
    """An expert dispatch: :func:`all_to_all` with the activations in the table's dtype
    (:data:`WIRE_BYTES`).
    """
    return all_to_all(categories, card, wire=WIRE_BYTES.get(categories.get("dtype"), 2.0))


__all__ = ["A2A_STEPS", "GEMM_DTYPES", "KV_BYTES", "LINK_STEP", "MOE_DTYPES", "WIRE_BYTES",
           "all_to_all", "attention", "bounded", "convolution", "delta_rule", "dispatch",
           "gemm", "latent_attention", "latent_bmm", "latent_module", "moe", "ring"]
