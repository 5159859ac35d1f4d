"""The attention family a Hugging Face config declares, for :mod:`infermodel.hf_config`:
latent attention's ranks and DeepSeek Sparse Attention's indexer, biases, sinks, a gated
output, query/key norms and the share of each head the rotary embedding turns (the
``[model]`` fields of the attention rows of the "Hugging Face configurations" page).

Sources: each family's published config.json and Transformers configuration class
(``DeepseekV3Config``, ``Qwen3NextConfig``, ``MiniMaxM2Config``, ``GptOssConfig``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .layers import HFConfigError, positive_int
from .unmodelled import INDEXER_KEYS

#: Families with per-head query/key norms (two head-width vectors per layer).
_QK_NORM = frozenset({"qwen3", "qwen3_moe", "qwen3_next", "qwen3_5", "qwen3_5_text",
                      "qwen3_5_moe", "qwen3_5_moe_text", "gemma3", "gemma3_text"})
#: Model types whose router gate vLLM and SGLang build in float32, fed float32 states
#: (models/minimax_m2.py, models/minimax_text_01.py): MiniMax-M2 and MiniMax-Text-01/M1.
_FP32_ROUTERS = frozenset({"minimax_m2", "minimax", "minimax_text_01", "minimax_m1"})
#: Model types whose use_qk_norm is a weightless L2 norm (Llama 4's, on its RoPE layers).
_WEIGHTLESS_QK_NORM = frozenset({"llama4", "llama4_text"})
#: Model types whose attention takes no position embedding (NoPE: Jamba's, and
#: Nemotron-H's, which inherits Jamba's attention in Hugging Face transformers).
_NO_ROTARY = ("jamba", "nemotron_h")


def _rotary_fraction(config: Mapping[str, Any], model_type: str | None) -> float | None:
    """Share of each head the rotary embedding turns, where it is not all of it: 0 for
    NoPE attention, ``partial_rotary_factor``, or ``rotary_dim`` over ``head_dim``.
    """
    if model_type in _NO_ROTARY:
        return 0.0
    factor = config.get("partial_rotary_factor")
    rope = config.get("rope_parameters")
    if factor is None and isinstance(rope, Mapping):
        # Configurations written for Transformers 5 keep it with the rotary parameters
        # (Qwen3.5: rope_parameters.partial_rotary_factor).
        factor = rope.get("partial_rotary_factor")
    if isinstance(factor, (int, float)) and not isinstance(factor, bool) and 0 < factor < 1:
        return float(factor)
    rotary, head = config.get("rotary_dim"), config.get("head_dim")
    if (isinstance(rotary, int) and isinstance(head, int) and not isinstance(rotary, bool)
            and 0 < rotary < head):
        return rotary / head
    return None


def attention_family(config: Mapping[str, Any], model_type: str | None, out: dict[str, Any], path) -> None:
    """Add to ``out`` the ``[model]`` fields of the attention family ``config`` declares
    (latent ranks and the indexer, biases, sinks, a gated output, query/key norms, the
    rotary share, DeepSeek-V3's score-correction bias); an inconsistent indexer is an
    :class:`HFConfigError` naming ``path``.
    """
    if config.get("kv_lora_rank"):
        for key in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            out[key] = positive_int(config.get(key), key, key, path)
        if config.get("q_lora_rank") is not None:
            out["q_lora_rank"] = positive_int(config["q_lora_rank"], "q_lora_rank", "q_lora_rank", path)
        given = [key for key in INDEXER_KEYS if config.get(key) is not None]
        if given:
            # DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): the indexer's three keys.
            missing = [key for key in INDEXER_KEYS if key not in given]
            if missing:
                raise HFConfigError(f"{', '.join(given)} without {', '.join(missing)}: DeepSeek "
                                    "Sparse Attention's indexer needs all three", path=path,
                                    key=missing[0], expected="index_n_heads, index_head_dim and "
                                    "index_topk together, or none of them")
            for key, field in zip(INDEXER_KEYS, ("index_heads", "index_head_dim", "index_topk")):
                out[field] = positive_int(config[key], key, field, path)
    if config.get("attention_bias") is True:
        out["attention_bias"] = True
    if model_type == "gpt_oss":
        out["attention_sinks"] = True
        if "experts" in out:
            out["expert_bias"] = True
    if config.get("attn_output_gate", model_type == "qwen3_next") is True:
        # Qwen3-Next's default (its configuration class), Qwen3.5's stated key; the engines
        # read the key the same way.
        out["attention_output_gate"] = True
    if model_type in _QK_NORM or (config.get("use_qk_norm") is True
                                  and model_type not in _WEIGHTLESS_QK_NORM):
        out["qk_norm"] = True
        if config.get("qk_norm_type") == "per_layer":
            # MiniMax-M2: one norm over all the layer's queries, one over its keys.
            out["qk_norm_scope"] = "layer"
    rotary = _rotary_fraction(config, model_type)
    if rotary is not None:
        out["rotary_fraction"] = rotary
    if "experts" in out and model_type in _FP32_ROUTERS:
        # vLLM and SGLang build MiniMax's gates in float32 and feed them float32 states.
        out["router_dtype"] = "fp32"
    if "experts" in out and config.get("topk_method") == "noaux_tc":
        out["score_correction_bias"] = True   # DeepSeek-V3's e_score_correction_bias


__all__ = ["attention_family"]
