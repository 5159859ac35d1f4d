"""The measured kernels each built-in operator is made of (not a plugin: the operators
plugin attaches them to its operators).

For T tokens in the pass (B in decode, B·n in prefill), P scored positions, width d,
query width d_q, KV width d_kv, feed-forward width f with m matrices (3 for SwiGLU),
per layer::

    qkv_projection     GEMM  m = T, n = d_q + 2·d_kv, k = d        n split by TP
    output_projection  GEMM  m = T, n = d, k = d_q                 k split by TP
    attention          prefill: context attention (B prompts of n tokens);
                       decode: generation attention (B sequences at the mean context);
                       heads and KV heads split by TP; one kernel per window size
                       (full, sliding, chunked layers), its time shared half and half
                       by attention_score and attention_value
    ffn                GEMM  gate/up: m = T, n = (m − 1)·f, k = d  n split by TP
                       GEMM  down:    m = T, n = d, k = f          k split by TP
                       MoE: the grouped-expert kernel (T tokens, d, expert width, top-k,
                       experts; TP on the experts), shared experts and dense layers as GEMMs
    router             GEMM  m = T, n = E, k = d (16-bit)
    head               GEMM  m = P, n = vocab, k = d               n split by TP

Norms and the embedding lookup are elementwise: no table covers them, and they keep
their roofline times. Layers without attention (linear attention, state space) get no
kernels here: their operators keep the roofline too, with a warning.
"""

from __future__ import annotations

from infermodel.plugin import Kernel, S

from .shapes import moe_layer_count, structure

#: Window argument of a full-attention layer (the tables write 0; see infermodel.kernels).
FULL = 2**30


def _attention(scenario, phase, tokens_shape, layers):
    """The attention kernels of ``phase``: one per window kind, half of each per operator."""
    st = structure(scenario)
    if st.mla:
        return ()
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


def _ffn(scenario, tokens, layers):
    moe = scenario.value("model.experts") > 1
    st = structure(scenario)
    if not moe:
        return (Kernel("gemm", {"m": tokens, "n": (S.ffn_matrices - 1) * S.d_ff, "k": S.d_model},
                       calls=layers, split=("n",), weights="linear", label="gate_up"),
                Kernel("gemm", {"m": tokens, "n": S.d_model, "k": S.d_ff}, calls=layers,
                       split=("k",), weights="linear", label="down"))
    moe_layers = moe_layer_count(scenario)
    kernels = [Kernel("moe", {"tokens": tokens, "hidden": S.d_model, "inter": S.expert_d_ff,
                              "topk": S.active_experts, "experts": S.experts, "tp": 1, "ep": 1},
                      calls=moe_layers, split=("tp",), weights="experts", label="experts")]
    if scenario.value("model.shared_experts"):
        width = S.shared_experts * S.expert_d_ff
        kernels += [Kernel("gemm", {"m": tokens, "n": (S.ffn_matrices - 1) * width,
                                    "k": S.d_model}, calls=moe_layers, split=("n",),
                           weights="linear", label="shared gate_up"),
                    Kernel("gemm", {"m": tokens, "n": S.d_model, "k": width}, calls=moe_layers,
                           split=("k",), weights="linear", label="shared down")]
    if st.ffn:
        dense = S.layers - moe_layers
        kernels += [Kernel("gemm", {"m": tokens, "n": (S.ffn_matrices - 1) * S.d_ff,
                                    "k": S.d_model}, calls=dense, split=("n",), weights="linear",
                           label="dense gate_up"),
                    Kernel("gemm", {"m": tokens, "n": S.d_model, "k": S.d_ff}, calls=dense,
                           split=("k",), weights="linear", label="dense down")]
    return tuple(kernels)


def operator_kernels(scenario, phase, tokens, scored, attention_layers):
    """Operator name -> the kernels it is made of (operators absent: no table covers them)."""
    dkv = S.kv_heads * S.head_dim
    attention = _attention(scenario, phase, tokens, attention_layers)
    out = {
        "qkv_projection": (Kernel("gemm", {"m": tokens, "n": S.query_width + 2 * dkv,
                                           "k": S.d_model}, calls=attention_layers, split=("n",),
                                  weights="linear", label="qkv"),),
        "output_projection": (Kernel("gemm", {"m": tokens, "n": S.d_model, "k": S.query_width},
                                     calls=attention_layers, split=("k",), weights="linear",
                                     label="o"),),
        "ffn": _ffn(scenario, tokens, S.layers),
        "head": (Kernel("gemm", {"m": scored, "n": S.vocab, "k": S.d_model}, split=("n",),
                        weights="embedding", label="lm_head"),),
    }
    # Elementwise: no table measures them; they keep their roofline by nature.
    out["norms"] = out["embedding"] = (Kernel("elementwise", {}, label="elementwise"),)
    if structure(scenario).mla:
        # Latent attention's projections are shaped by the latent ranks: no kernels here.
        del out["qkv_projection"], out["output_projection"]
    if attention:
        out["attention_score"] = out["attention_value"] = attention
    if scenario.value("model.experts") > 1:
        out["router"] = (Kernel("gemm", {"m": tokens, "n": S.experts, "k": S.d_model},
                                calls=moe_layer_count(scenario), label="router"),)
    return out


__all__ = ["FULL", "operator_kernels"]
