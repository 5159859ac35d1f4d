"""The measured kernels each built-in operator is made of (not a plugin: the operators
plugin attaches them to its operators).

For T tokens in the pass (B in decode, B·n in prefill), P scored positions, width d,
query width d_q, KV width d_kv, feed-forward width f with m matrices (3 for SwiGLU),
per layer::

    qkv_projection     GEMM  m = T, n = d_q + 2·d_kv, k = d        n split by TP
                       (n = 2·d_q + 2·d_kv with a gated output: the gate with the queries);
                       the rotary embedding, elementwise (T·(h + g)·d_h values read and
                       written), unless the engine applies it in attention (TensorRT-LLM);
                       with query/key norms, their elementwise kernels (vLLM one, SGLang
                       two; TensorRT-LLM applies Qwen3's with the rotary embedding)
    output_projection  GEMM  m = T, n = d, k = d_q                 k split by TP
                       (a gated output: the gate's sigmoid product before it, elementwise,
                       three launches under SGLang)
    attention          prefill: context attention (B prompts of n tokens);
                       decode: generation attention (B sequences at the mean context);
                       heads and KV heads split by TP; one kernel per window size
                       (full, sliding, chunked layers), its time shared half and half
                       by attention_score and attention_value
    ffn                per kind of feed-forward block the layer model counts:
                       dense of width w: GEMM gate/up m = T, n = (m − 1)·w, k = d (n split),
                                         the activation, elementwise (T·m·w values),
                                         GEMM down m = T, n = d, k = w (k split);
                       MoE: the grouped-expert kernel (T tokens, d, expert width, top-k,
                       experts; TP on the experts) and the shared experts as GEMMs;
                       a d×d projection: GEMM n = d, k = d
    router             GEMM  m = T, n = E, k = d (16-bit)
    head               GEMM  m = P, n = vocab, k = d               n split by TP

Latent attention's operators are in :mod:`.latent_kernels`, the layers without attention
(state space, linear attention) in :mod:`.state_kernels`. Norms and the embedding lookup
are elementwise: no table covers them, and they keep their roofline times; so do the
activation and the rotary embedding, inside their measured operators (each launch with
the card's fixed kernel time: :mod:`.kernel_plan`).

Under a layout with data-parallel attention or expert parallelism each kernel says whose
tokens it runs on (``group``): the mixers on each attention rank's own, dense layers, the
head and the router (``"dense"``) and shared experts (``"shared"``) where the layout puts
their weights, routed experts on every token of the stage (``"routed"``).
"""

from __future__ import annotations

import attrs
import sympy

from infermodel.plugin import Kernel, S

from .engines import ENGINES, gate_launches, qk_norm_launches
from .latent_kernels import latent_kernels
from .layouts import dense_placement
from .parallelism import degrees
from .shapes import STATE_KINDS, expert_width, moe_layer_count, structure
from .state_kernels import COUNTS, ELEMENTWISE, mixer_projections, recurrence

#: Window argument of a full-attention layer (the tables write 0; see infermodel.kernels).
FULL = 2**30
#: How an engine multiplies 32-bit matrices (``efficiency.fp32_matmul``) and the hardware
#: field whose rate each runs at.
FP32_MATMUL = ("ieee", "tf32")
FP32_RATE = {"ieee": "flops_fp32", "tf32": "flops_tf32"}
#: Bytes per activation value (16-bit activations), which the operators and the
#: elementwise kernels read and write.
ACTIVATION_BYTES = 2


def fp32_rate_field(scenario) -> str:
    """The hardware field a 32-bit GEMM's rate is (``efficiency.fp32_matmul``)."""
    return FP32_RATE[scenario.value("efficiency.fp32_matmul") or "ieee"]


def router_in_32_bits(scenario) -> bool:
    """A mixture of experts whose router multiplies in 32 bits (``model.router_dtype``)."""
    return scenario.value("model.experts") > 1 and scenario.value("model.router_dtype") == "fp32"


def router_rate_field(scenario) -> str | None:
    """The hardware field whose rate a mixture of experts' 32-bit router runs at
    (:func:`router_in_32_bits`), or None: no 32-bit router, or the card states no such
    rate (the operators plugin warns of the latter).
    """
    if not router_in_32_bits(scenario):
        return None
    field = fp32_rate_field(scenario)
    return field if scenario.value(f"hardware.{field}") is not None else None


def router_token_share(scenario):
    """The share of the whole pass's router FLOPs each card multiplies (its gate is
    replicated on every tensor card): one attention rank's tokens, ⌈B/D⌉ times the stated
    imbalance over B, under data-parallel attention with the dense layers on each rank
    (``replicated``, as vLLM runs them), else all of them (a ``split`` layout gathers every
    rank's tokens); and under pipeline parallelism its stage's layers, as the operator
    roofline counts the whole model over every card.
    """
    lever = scenario.lever("parallelism")
    if lever is None:
        return sympy.Integer(1)
    share = sympy.Integer(1)
    if (lever.attention_data > 1
            and dense_placement(lever, scenario.value("efficiency.engine")) != "split"):
        share = S.parallel_attention_batch_factor / S.parallel_attention_data_degree
    return share / S.parallel_pipeline_degree if lever.pipeline > 1 else share


def router_time_fp32(scenario, flops):
    """The time of a 32-bit router's ``flops`` (the whole pass's, every layer) on one card:
    its share of the tokens (:func:`router_token_share`) at ``router_matmul_rate``.
    """
    return flops * router_token_share(scenario) / S.router_matmul_rate


def _attention(scenario, phase, tokens_shape, layers):
    """The attention kernels of ``phase``: one per window kind, half of each per operator."""
    st = structure(scenario)
    family = "generation_attention" if phase == "decode" else "context_attention"
    length = {"context": S.context} if phase == "decode" else {"length": S.prompt_tokens}
    kinds = [(layers, FULL)]
    if st.windows and st.counts is not None:
        kinds = [(S.layers_full_attention, FULL)] if st.counts.get("full") else []
        if st.counts.get("sliding"):
            kinds.append((S.layers_sliding_window, S.sliding_window))
        if st.counts.get("chunked"):
            kinds.append((S.layers_chunked_local, S.attention_chunk))
    return tuple(
        Kernel(family, {"batch": S.batch, **length, "heads": S.heads, "kv_heads": S.kv_heads,
                        "head_dim": S.head_dim, "window": window},
               calls=calls, split=("heads", "kv_heads"), share=0.5,
               label="attention" if window == FULL else "windowed attention")
        for calls, window in kinds)


def _dense(tokens, width, calls, prefix="", group="dense"):
    return (Kernel("gemm", {"m": tokens, "n": (S.ffn_matrices - 1) * width, "k": S.d_model},
                   calls=calls, split=("n",), weights="linear", label=f"{prefix}gate_up",
                   group=group),
            _activation(tokens, width, calls, prefix, group),
            Kernel("gemm", {"m": tokens, "n": S.d_model, "k": width}, calls=calls, split=("k",),
                   weights="linear", label=f"{prefix}down", group=group))


def _activation(tokens, width, calls, prefix, group):
    """The activation between a dense block's two GEMMs, a kernel of its own in every
    engine (SiLU·gate: reads the 2·w gate and up columns and writes w; an ungated
    activation reads w and writes w: m·w 16-bit values a token), at its roofline plus the
    card's fixed kernel time per launch.
    """
    return Kernel(ELEMENTWISE, {"flops": 4 * tokens * width * calls,
                                "bytes": ACTIVATION_BYTES * S.ffn_matrices * tokens * width * calls},
                  calls=calls, label=f"{prefix}activation", group=group)


def _rotary(scenario, tokens, layers):
    """The rotary embedding of the queries and keys, a kernel of its own before attention
    unless the engine applies it in its attention kernels (TensorRT-LLM, but not where it
    fuses the q/k norms with the rotary embedding instead, Qwen3's ``fuse_qk_norm_rope``,
    nor with a gated output, whose models turn it apart):
    it reads and writes the turned share r of (h + g)·d_h 16-bit values a token and
    layer, three FLOPs each. None where attention takes no position embedding (r = 0:
    Jamba, Nemotron-H); with chunked local layers (Llama 4) only those turn theirs, its
    full-attention layers being NoPE.
    """
    engine = ENGINES.get(scenario.value("efficiency.engine") or "")
    share = scenario.value("model.rotary_fraction")
    if share == 0 or (engine is not None and engine.fused_rope
                      and not scenario.value("model.qk_norm")
                      and not scenario.value("model.attention_output_gate")):
        return ()
    counts = structure(scenario).counts
    if counts and counts.get("chunked"):
        layers = S.layers_chunked_local
    width = share * (S.heads + S.kv_heads) * S.head_dim
    return (Kernel(ELEMENTWISE, {"flops": 3 * tokens * width * layers,
                                 "bytes": 2 * ACTIVATION_BYTES * tokens * width * layers},
                   calls=layers, label="rotary"),)


def _qk_norms(scenario, tokens, layers):
    """The query and key norms (``qk_norm``) after the QKV projection, which together
    read and write (h + g)·d_h 16-bit values a token and layer, four FLOPs each, in the
    engine's launches a layer (:data:`.engines.QK_NORM_KERNELS`: vLLM one, SGLang two).
    Over the layer (MiniMax-M2) two under every engine: the mean squares before their
    all-reduce and the scaling after it. None where TensorRT-LLM applies per-head norms
    in its rotary kernel (``fuse_qk_norm_rope``, :func:`_rotary`: every such model but
    those with a gated output).
    """
    launches = qk_norm_launches(scenario)
    if not launches:
        return ()
    width = (S.heads + S.kv_heads) * S.head_dim
    return (Kernel(ELEMENTWISE, {"flops": 4 * tokens * width * layers,
                                 "bytes": 2 * ACTIVATION_BYTES * tokens * width * layers},
                   calls=launches * layers, label="query/key norms"),)


def _output_gate(scenario, tokens, layers):
    """A gated attention output (``attention_output_gate``, Qwen3-Next, Qwen3.5): the
    attention's h·d_h values a token times the sigmoid of the gate projected with the
    queries (reads both, writes one), before the output projection, in the engine's
    launches a layer (:data:`.engines.QK_NORM_KERNELS`: SGLang three, the others one).
    """
    launches = gate_launches(scenario)
    if not launches:
        return ()
    width = S.heads * S.head_dim
    return (Kernel(ELEMENTWISE, {"flops": 5 * tokens * width * layers,
                                 "bytes": 3 * ACTIVATION_BYTES * tokens * width * layers},
                   calls=launches * layers,
                   label="output gate"),)


def _ffn_blocks(scenario, tokens):
    """Dense blocks, MoE layers and projections as the layer model counts them:
    ``(dense (width, layers) pairs, MoE layers, projection layers)``.
    """
    st = structure(scenario)
    moe = scenario.value("model.experts") > 1
    if not st.ffn:
        return ([], S.layers, 0) if moe else ([(S.d_ff, S.layers)], 0, 0)
    if st.explicit_ffn and st.rows:
        widths: dict = {}
        for row in st.rows:
            if row.ffn == "dense":
                width = row.width if row.width is not None else S.d_ff
                widths[width] = widths.get(width, 0) + row.count
        return (list(widths.items()), moe_layer_count(scenario) if moe else 0,
                st.ffn_count("projection"))
    moe_layers = moe_layer_count(scenario)
    return [(S.d_ff, S.layers - moe_layers)], moe_layers, 0


def _shared_stream(scenario, phase, tokens) -> dict:
    """The overlap fields of the shared experts' and routed experts' kernels where the
    engine runs the shared experts on a second stream beside the routed ones (a sympy
    condition on the pass's tokens a rank; whether only under a CUDA graph), or none
    where it never does in ``phase``: TensorRT-LLM and SGLang in the decode batches they capture as CUDA graphs
    (SGLang not with an all-to-all dispatch), vLLM in passes of at most 256 tokens
    (:data:`.engines.SHARED_EXPERT_STREAMS`).
    """
    from .engines import scenario_scheduler

    engine = ENGINES.get(scenario.value("efficiency.engine") or "")
    if engine is None or not engine.shared_stream:
        return {}
    lever = scenario.lever("parallelism")
    if (lever is not None and lever.expert_dispatch == "all_to_all" and lever.expert > 1
            and not engine.shared_stream_all_to_all):
        return {}
    graphs = engine.shared_stream == "graphs"
    if graphs:
        limit = scenario_scheduler(scenario).graph_max_batch
        if phase != "decode" or limit <= 0:
            return {}
    else:
        limit = engine.shared_stream_tokens
    # Under data-parallel attention the busiest rank's pass: its sequences
    # (kernel_rank_batch: ⌈B/D⌉ times the stated imbalance) times the tokens of each.
    if lever is not None and lever.attention_data > 1:
        tokens = S.kernel_rank_batch * tokens / S.batch
    return {"overlap": "shared experts", "overlap_when": sympy.Le(tokens, limit),
            "overlap_graphs": graphs}


def _ffn(scenario, tokens, phase=""):
    dense, moe_layers, projections = _ffn_blocks(scenario, tokens)
    kernels: list[Kernel] = []
    if moe_layers:
        shared = bool(scenario.value("model.shared_experts"))
        overlap = _shared_stream(scenario, phase, tokens) if shared else {}
        kernels.append(Kernel("moe", {"tokens": tokens, "hidden": expert_width(scenario),
                                      "inter": S.expert_d_ff, "topk": S.active_experts,
                                      "experts": S.experts, "tp": 1, "ep": 1},
                              calls=moe_layers, split=("tp",), weights="experts", label="experts",
                              group="routed", **overlap))
        if scenario.value("model.moe_latent_size") is not None:
            # A latent mixture of experts: each token projected to the experts' width before
            # them and back after, two GEMMs each card runs whole on its own tokens (the
            # weights, 2·d·l a layer, replicated).
            kernels += [Kernel("gemm", {"m": tokens, "n": n, "k": k}, calls=moe_layers,
                               weights="linear", label=label)
                        for n, k, label in ((S.moe_latent_size, S.d_model, "latent_down"),
                                            (S.d_model, S.moe_latent_size, "latent_up"))]
        if shared:
            width = S.shared_experts * (S.shared_expert_d_ff if structure(scenario).ffn
                                        else S.expert_d_ff)
            side = _dense(tokens, width, moe_layers, "shared ", "shared")
            kernels += [attrs.evolve(k, side=True, **overlap) for k in side] if overlap else side
    for width, layers in dense:
        kernels += _dense(tokens, width, layers, "dense " if moe_layers else "")
    if projections:
        kernels.append(Kernel("gemm", {"m": tokens, "n": S.d_model, "k": S.d_model},
                              calls=projections, split=("n",), weights="linear",
                              label="projection", group="dense"))
    return tuple(kernels)


def _norms(scenario, flops, moved):
    """The norms' elementwise kernel: ``whole`` (each tensor card of an attention rank
    normalises the whole width of that rank's tokens: one card's roofline), of the norms'
    whole-model work; a norm the engine's all-reduce applies moves no activation of its
    own, so the kernel takes the unfused norms' share of it.
    """
    launches = _norm_launches(scenario)
    return (Kernel(ELEMENTWISE, {"flops": flops, "bytes": moved}, calls=launches,
                   share=launches / (2 * S.layers + 1), label="elementwise", whole=True),)


def _norm_launches(scenario):
    """Norm kernels a pass launches: two a block and the final one; under an engine whose
    all-reduce adds the residual and normalises (TensorRT-LLM), with tensor parallelism,
    attention not data-parallel and every layer an attention block and a feed-forward
    block (the models that fuse it), only each pipeline stage's first input norm.
    """
    launches = 2 * S.layers + 1
    engine = ENGINES.get(scenario.value("efficiency.engine") or "")
    lever = scenario.lever("parallelism")
    if engine is None or not engine.fused_norms or lever is None or lever.attention_data > 1:
        return launches
    tensor, pipeline = degrees(scenario)
    blocks = all(r.mixer in ("full", "sliding", "chunked") and r.ffn in ("dense", "moe")
                 for r in structure(scenario).rows)
    return sympy.Integer(pipeline) if tensor > 1 and blocks else launches


def operator_kernels(scenario, phase, tokens, scored, attention_layers, rooflines, norms):
    """Operator name -> the kernels it is made of (operators absent: no table covers them).
    ``rooflines``: each operator's roofline time (latent attention's module shares its
    time among the operators it spans in their proportion); ``norms``: the norms' whole-
    model (FLOPs, bytes).
    """
    dkv = S.kv_heads * S.head_dim
    st = structure(scenario)
    latent = st.mla
    # A gated output (Qwen3-Next) projects the gate with the queries.
    queries = (2 if scenario.value("model.attention_output_gate") else 1) * S.query_width
    attention = () if latent else _attention(scenario, phase, tokens, attention_layers)
    out = {
        "qkv_projection": (Kernel("gemm", {"m": tokens, "n": queries + 2 * dkv,
                                           "k": S.d_model}, calls=attention_layers, split=("n",),
                                  weights="attention", label="qkv"),
                           *(() if latent else _rotary(scenario, tokens, attention_layers)),
                           *(() if latent else _qk_norms(scenario, tokens, attention_layers))),
        "output_projection": (*(() if latent else _output_gate(scenario, tokens,
                                                                attention_layers)),
                              Kernel("gemm", {"m": tokens, "n": S.d_model, "k": S.query_width},
                                     calls=attention_layers, split=("k",), weights="attention",
                                     label="o")),
        "ffn": _ffn(scenario, tokens, phase),
        "head": (Kernel("gemm", {"m": scored, "n": S.vocab, "k": S.d_model}, split=("n",),
                        weights="embedding", label="lm_head", group="dense"),),
    }
    # Elementwise: no table measures them; they keep their roofline by nature, each
    # launch with the card's fixed kernel latency (two norms a block and the final one).
    out["norms"] = _norms(scenario, *norms)
    out["embedding"] = (Kernel(ELEMENTWISE, {}, label="elementwise"),)
    if latent:
        out.update(latent_kernels(scenario, phase, tokens, attention_layers, rooflines))
    if attention:
        out["attention_score"] = out["attention_value"] = attention
    if scenario.value("model.experts") > 1:
        # A router kept in 32 bits (MiniMax-M2's): the 16-bit rows, or its FLOPs at the
        # card's 32-bit rate where longer (the operators plugin's router_matmul_rate).
        fp32 = router_rate_field(scenario) is not None
        out["router"] = (Kernel("gemm", {"m": tokens, "n": S.experts, "k": S.d_model},
                                calls=moe_layer_count(scenario), label="router", group="dense",
                                compute_rate=S.router_matmul_rate if fp32 else None),)
    kinds = [k for k in COUNTS if st.has(k)]
    if kinds:
        out["state_mixer"] = mixer_projections(kinds, tokens)
    states = [k for k in kinds if k in STATE_KINDS]
    if states:
        out["state_update"] = recurrence(states, phase, tokens)
    return out


__all__ = ["ACTIVATION_BYTES", "ELEMENTWISE", "FP32_MATMUL", "FP32_RATE", "FULL",
           "fp32_rate_field", "operator_kernels", "router_in_32_bits", "router_rate_field",
           "router_time_fp32",
           "router_token_share"]
