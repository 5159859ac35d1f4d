"""The measured kernels of latent attention (DeepSeek-V2/V3/R1, Kimi-K2's MLA), two ways
(not a plugin: the operators plugin attaches them to its operators).

For T tokens in the pass (B in decode, B·n in prefill), h heads, model width d, query
latent r_q (0: a direct query projection), key/value latent r, rotary width ρ, no-rope
width n_k, value width v, per layer:

**The module** (option ``"module"``; vLLM's and TensorRT-LLM's tables): one measured
kernel is the whole block — the down-projections of queries and keys/values, the
up-projections, attention over the latent cache (absorbed in decode), the output
projection — at h/TP heads per GPU. Its time is shared by the four operators it spans
(``qkv_projection``, ``attention_score``, ``attention_value``, ``output_projection``)
in proportion to their rooflines: how the block's time splits among them is not
measured, their sum is.

**Its parts** (option ``"parts"``; SGLang's tables, and wherever no module table
serves)::

    qkv_projection     GEMM  m = T, n = r_q + r + ρ, k = d        (replicated)
                       GEMM  m = T, n = h·(n_k + ρ), k = r_q      n split by TP
                       prefill: GEMM m = T, n = h·(n_k + v), k = r (keys and values
                       decompressed)                                n split by TP
    attention          prefill: latent attention over B prompts of n tokens;
                       decode: over B sequences at the mean context (absorbed),
                       shared half and half by attention_score and attention_value;
                       decode adds the absorbed key BMM (T tokens, h heads) to the score
                       and the absorbed value BMM to the value
    output_projection  GEMM  m = T, n = d, k = h·v                k split by TP

With DeepSeek Sparse Attention's indexer (``model.index_heads``), both options add its
projections to ``qkv_projection``, replicated on every rank: GEMMs m = T, n = H_i·d_i,
k = r_q (the query latent); n = d_i, k = d (its key); n = H_i, k = d (its head weights).

References: DeepSeek-V2 (arXiv:2405.04434) §2.1 (the latent attention, absorption);
NVIDIA aiconfigurator's collectors ``collector/{vllm,trtllm}/collect_mla_module.py``
(the module is the attention layer's whole forward), ``collect_mla.py`` and
``collect_mla_bmm.py`` (the parts).
"""

from __future__ import annotations

import sympy

from infermodel.plugin import Kernel, S

from .engines import ENGINES

#: The operators the latent attention module spans.
LATENT_OPERATORS = ("qkv_projection", "attention_score", "attention_value", "output_projection")


def _widths(scenario):
    """The latent widths as the kernels' arguments (a direct query projection: r_q = 0)."""
    q_lora = S.q_lora_rank if scenario.value("model.q_lora_rank") is not None else sympy.Integer(0)
    return {"hidden": S.d_model, "q_lora": q_lora, "kv_lora": S.kv_lora_rank,
            "nope": S.qk_nope_head_dim, "rope": S.qk_rope_head_dim, "v_dim": S.v_head_dim}


def _rotary(scenario, tokens, layers):
    """The rotary embedding of the queries' and the shared key's rotary parts, where the
    module is timed by its parts and the engine launches it apart (SGLang's and vLLM's
    latent attention call rotary_emb on q_pe and k_pe; TensorRT-LLM's MLA op applies it):
    (h + 1)·d_rope 16-bit values a token and layer read and written, three FLOPs each.
    """
    from .operator_kernels import ACTIVATION_BYTES, ELEMENTWISE  # (it imports this module)

    engine = ENGINES.get(scenario.value("efficiency.engine") or "")
    if engine is not None and engine.fused_rope:
        return []
    width = (S.heads + 1) * S.qk_rope_head_dim
    return [Kernel(ELEMENTWISE, {"flops": 3 * tokens * width * layers,
                                 "bytes": 2 * ACTIVATION_BYTES * tokens * width * layers},
                   calls=layers, label="rotary", option="parts")]


def _indexer(scenario, tokens, layers, query_in):
    """DeepSeek Sparse Attention's indexer projections, under either option (the latent
    attention module's tables time DeepSeek-V3's block, which has none): its query
    projection from the query latent, its key projection and its per-head weights, each
    replicated on every tensor-parallel rank (SGLang's and vLLM's indexers build them as
    ``ReplicatedLinear``), in the latent projections' format. Its scoring of the cached
    keys, the top-k and its small kernels are not timed (the architecture plugin warns).
    """
    if scenario.value("model.index_heads") is None:
        return []
    shapes = (("indexer query projection", S.index_heads * S.index_head_dim, query_in),
              ("indexer key projection", S.index_head_dim, S.d_model),
              ("indexer head weights", S.index_heads, S.d_model))
    return [Kernel("gemm", {"m": tokens, "n": n, "k": k}, calls=layers, weights="latent", label=label)
            for label, n, k in shapes]


def latent_kernels(scenario, phase, tokens, layers, rooflines):
    """Operator name -> its kernels, both options (``rooflines``: the four operators'
    roofline times, which share the module's).
    """
    widths = _widths(scenario)
    decode = phase == "decode"
    curve = {"batch": S.batch, **({"context": S.context} if decode else {"length": S.prompt_tokens})}
    total = sympy.Add(*(rooflines[name] for name in LATENT_OPERATORS))
    module = "latent_generation" if decode else "latent_context"
    out = {name: [Kernel(module, {**curve, "heads": S.heads, **widths}, calls=layers,
                         split=("heads",), weights="latent", share=rooflines[name] / total,
                         label="latent attention", option="module")]
           for name in LATENT_OPERATORS}
    q_lora = widths["q_lora"]
    query_in = S.q_lora_rank if scenario.value("model.q_lora_rank") is not None else S.d_model
    parts = [Kernel("gemm", {"m": tokens, "n": q_lora + S.kv_lora_rank + S.qk_rope_head_dim,
                             "k": S.d_model}, calls=layers, weights="latent",
                    label="latent down-projection", option="parts"),
             Kernel("gemm", {"m": tokens, "n": S.heads * (S.qk_nope_head_dim + S.qk_rope_head_dim),
                             "k": query_in}, calls=layers, split=("n",), weights="latent",
                    label="query up-projection", option="parts")]
    if not decode:
        parts.append(Kernel("gemm", {"m": tokens, "n": S.heads * (S.qk_nope_head_dim + S.v_head_dim),
                                     "k": S.kv_lora_rank}, calls=layers, split=("n",),
                            weights="latent", label="key/value up-projection", option="parts"))
    out["qkv_projection"] += parts + _rotary(scenario, tokens, layers) + _indexer(scenario, tokens,
                                                                              layers, query_in)
    latent = {"heads": S.heads, **{k: widths[k] for k in ("kv_lora", "nope", "rope", "v_dim")}}
    bare = Kernel("mla_generation" if decode else "mla_context", {**curve, **latent}, calls=layers,
                  split=("heads",), share=0.5, label="latent attention core", option="parts")
    bmm = {"heads": S.heads, **{k: widths[k] for k in ("kv_lora", "nope", "v_dim")}}
    for name, absorbed in (("attention_score", "mla_bmm_pre"), ("attention_value", "mla_bmm_post")):
        out[name].append(bare)
        if decode:
            out[name].append(Kernel(absorbed, {"tokens": tokens, **bmm}, calls=layers,
                                    split=("heads",), weights="latent",
                                    label=f"absorbed {'key' if absorbed.endswith('pre') else 'value'} "
                                          "BMM", option="parts"))
    out["output_projection"].append(Kernel("gemm", {"m": tokens, "n": S.d_model,
                                                    "k": S.heads * S.v_head_dim},
                                           calls=layers, split=("k",), weights="attention",
                                           label="o", option="parts"))
    return {name: tuple(kernels) for name, kernels in out.items()}


__all__ = ["LATENT_OPERATORS", "latent_kernels"]
