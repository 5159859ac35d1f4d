"""Read a model's shape from a Hugging Face ``config.json`` on disk.

:func:`read_hf_config` maps the keys of a Transformers configuration to the fields of a
scenario's ``[model]`` table::

    num_hidden_layers                    -> layers
    hidden_size                          -> d_model
    num_attention_heads                  -> heads
    num_key_value_heads (default heads)  -> kv_heads
    head_dim (default hidden/heads)      -> head_dim
    intermediate_size                    -> d_ff
    vocab_size                           -> vocab
    tie_word_embeddings                  -> tied_embeddings
    model_type / hidden_act              -> ffn ("swiglu": gated, 3 matrices; "gelu": 2)
    num_local_experts | n_routed_experts | num_experts -> experts
    num_experts_per_tok                  -> active_experts
    n_shared_experts                     -> shared_experts
    moe_intermediate_size                -> expert_d_ff

and, for the families that use them (the full table, with every default, is in the
documentation's "Hugging Face configurations" page)::

    layer_types | sliding_window_pattern | full_attention_interval | no_rope_layers
                                         -> layer_pattern
    sliding_window, attention_chunk_size -> sliding_window, attention_chunk
    kv_lora_rank, q_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim
                                         -> the latent-attention fields
    index_n_heads, index_head_dim, index_topk -> index_heads, index_head_dim, index_topk
    linear_num_key_heads, linear_num_value_heads, linear_key_head_dim,
    linear_value_head_dim, linear_conv_kernel_dim -> the fixed-state layer fields
    first_k_dense_replace, moe_layer_freq | interleave_moe_layer_step | decoder_sparse_step
                                         -> dense_layers, moe_layer_period
    shared_expert_intermediate_size      -> shared_experts, shared_expert_d_ff
    attention_bias                       -> attention_bias
    attn_output_gate (qwen3_next: true unless stated) -> attention_output_gate
    use_qk_norm, qk_norm_type            -> qk_norm, qk_norm_scope ("per_layer": "layer")
    partial_rotary_factor (or inside rope_parameters) | rotary_dim/head_dim
    (jamba, nemotron_h: none)            -> rotary_fraction
    quantization_config                  -> weight_format, expert_weight_format,
                                            unquantized, activation_scales
    hf_quant_config.json beside the file (ModelOpt's export, where config.json has no
    quantization_config)                 -> the same, from its "quantization" object

A key a published file omits takes its model type's documented default
(:data:`MODEL_TYPE_DEFAULTS`; Gemma 3's text configuration has no ``vocab_size``:
262,208).

GPT-2 style names (``n_layer``, ``n_embd``, ``n_head``, ``n_inner``) are understood too,
and a multimodal configuration's ``text_config`` is used when the top level has no
layer count.  Only the shape is read: nothing in the file is executed, no weights are
loaded and nothing is downloaded.

Whether the feed-forward block is gated decides how many matrices it has.  Families
known to be gated (Llama, Mistral, Mixtral, Qwen, Gemma, Phi-3, DeepSeek, OLMo, ...) give
``"swiglu"`` whatever their activation is called (Gemma's gated GELU has three
matrices too); families known to use a plain two-matrix MLP (GPT-2, GPT-NeoX, Falcon,
StarCoder2, OPT, BLOOM, ...) give ``"gelu"``.  For any other ``model_type`` the
activation decides: ``silu``/``swiglu``/``swish`` are gated, ``gelu`` variants and
``relu`` are not.

Features the shape fields cannot express (a multi-token-prediction module, a vision
encoder, dense layers listed one by one) are reported with a :class:`HFConfigWarning`
that says how large the effect is; the scenario loader keeps these notes in the
result's warnings.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .attention import attention_family
from .files import MAX_CONFIG_BYTES, has_quantization, load_json, quant_file
from .layers import (
    MINIMAX,
    HFConfigError,
    HFConfigWarning,
    TrackedConfig,
    apply_overrides,
    layer_items,
    mamba_from_layer_types,
    positive_int,
    refuse,
    state_bits,
    unread_keys,
)
from .quantization import read_quantization
from .unmodelled import INDEXER_KEYS, unmodelled_notes

__all__ = ["MAX_CONFIG_BYTES", "MODEL_TYPE_DEFAULTS", "HFConfigError", "HFConfigWarning",
           "map_hf_config", "read_hf_config"]


GATED_MODEL_TYPES = frozenset({
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen2_vl",
    "gemma", "gemma2", "gemma3", "gemma3_text", "phi3", "phimoe", "deepseek", "deepseek_v2",
    "deepseek_v3", "olmo", "olmo2", "olmoe", "granite", "granitemoe", "cohere", "cohere2",
    "internlm2", "yi", "baichuan", "smollm3", "ministral", "mistral3", "exaone", "glm", "glm4",
    "starcoder2_gated", "jamba", "dbrx", "arcee", "hunyuan", "llama4", "llama4_text",
    "gpt_oss", "qwen3_next", "kimi_k2", "granitemoeshared", "phi4", "minimax",
    "minimax_text_01", "minimax_m1", "nemotron-nas",
})
PLAIN_MLP_MODEL_TYPES = frozenset({
    "gpt2", "gpt_neo", "gpt_neox", "gptj", "gpt_bigcode", "falcon", "starcoder2", "opt",
    "bloom", "phi", "mpt", "codegen", "bert", "roberta",
})
_GATED_ACTIVATIONS = frozenset({"silu", "swiglu", "swish", "geglu", "reglu"})
_PLAIN_ACTIVATIONS = frozenset({
    "gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu_accurate", "quick_gelu",
    "relu", "relu2", "gelu_python",
})
# Families whose Transformers configuration class ties the output head to the input
# embedding unless told otherwise (the base class default); for the rest, untied.
_TIED_BY_DEFAULT = frozenset({"gpt2", "gpt_neo", "gemma", "gemma2", "gemma3", "gemma3_text",
                              "opt", "bloom", "codegen"})

#: Documented defaults of each model type's Transformers configuration class, for keys
#: a published config.json leaves out (only keys this reader uses). Source: the
#: configuration classes' signatures (``Gemma3TextConfig``, ``Gemma2Config``,
#: ``DeepseekV3Config``, ``GptOssConfig``, ``Qwen3NextConfig``, ``Llama4TextConfig``).
MODEL_TYPE_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma3_text": {"vocab_size": 262_208, "head_dim": 256, "sliding_window": 4096,
                    "sliding_window_pattern": 6, "hidden_activation": "gelu_pytorch_tanh"},
    "gemma2": {"vocab_size": 256_000, "head_dim": 256, "sliding_window": 4096},
    "deepseek_v3": {"vocab_size": 129_280, "kv_lora_rank": 512, "q_lora_rank": 1536,
                    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
                    "first_k_dense_replace": 3, "moe_layer_freq": 1, "n_shared_experts": 1},
    "deepseek_v2": {"kv_lora_rank": 512, "q_lora_rank": 1536, "qk_nope_head_dim": 128,
                    "qk_rope_head_dim": 64, "v_head_dim": 128, "first_k_dense_replace": 0,
                    "moe_layer_freq": 1},
    "gpt_oss": {"sliding_window": 128, "attention_bias": True, "head_dim": 64},
    "qwen3_next": {"full_attention_interval": 4, "linear_conv_kernel_dim": 4,
                   "linear_key_head_dim": 128, "linear_value_head_dim": 128,
                   "linear_num_key_heads": 16, "linear_num_value_heads": 32},
    "llama4_text": {"attention_chunk_size": 8192, "interleave_moe_layer_step": 1,
                    "no_rope_layer_interval": 4, "vocab_size": 202_048},
}
#: Model types whose text configuration class differs from the outer one.
_TEXT_TYPES = {"gemma3": "gemma3_text", "llama4": "llama4_text", "kimi_k2": "deepseek_v3"}
_LAYER_TYPES = {"full_attention": "full", "sliding_attention": "sliding",
                "chunked_attention": "chunked", "linear_attention": "linear",
                "mamba": "mamba2", "attention": "full"}
#: Layer types that are full attention with DeepSeek Sparse Attention's indexer (NVIDIA's
#: GLM-5.2 and 5.3 checkpoints list every layer so): read as full (latent) attention with the
#: indexer their index_* keys describe.
_SPARSE_LAYER_TYPES = {"deepseek_sparse_attention": "full"}

_ALIASES = {
    "layers": ("num_hidden_layers", "n_layer", "n_layers", "num_layers"),
    "d_model": ("hidden_size", "n_embd", "d_model"),
    "heads": ("num_attention_heads", "n_head", "n_heads"),
    "kv_heads": ("num_key_value_heads", "num_kv_heads", "n_head_kv"),
    "d_ff": ("intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size"),
    "vocab": ("vocab_size",),
    "experts": ("num_local_experts", "n_routed_experts", "num_experts"),
}
_MEANING = {
    "layers": "the number of decoder layers",
    "d_model": "the model width",
    "heads": "the number of attention heads",
    "kv_heads": "the number of key/value heads",
    "head_dim": "the width of one attention head",
    "d_ff": "the feed-forward width",
    "vocab": "the vocabulary size",
    "experts": "the number of routed experts",
    "active_experts": "the number of experts each token uses",
    "shared_experts": "the number of shared experts",
    "expert_d_ff": "the width of one expert",
}


def read_hf_config(path: str | os.PathLike) -> dict[str, Any]:
    """Read the model shape from the Hugging Face ``config.json`` at ``path``.

    ``path`` may also be a directory holding ``config.json``.  Returns a dict of
    ``[model]`` fields (``layers``, ``d_model``, ``heads``, ``kv_heads``, ``head_dim``,
    ``d_ff``, ``ffn``, ``vocab``, ``tied_embeddings`` and, for a mixture of experts,
    ``experts``, ``active_experts`` and where present ``shared_experts`` and
    ``expert_d_ff``).  Raises :class:`HFConfigError` naming the file and the key for a
    missing, unreadable, oversized (over :data:`MAX_CONFIG_BYTES`) or inconsistent file.
    """
    from ..output import path_problem

    problem = path_problem(path)
    if problem is not None:
        raise HFConfigError(f"cannot read the file: {problem}", path=_shown(path),
                            expected="a Hugging Face config.json")
    file = Path(path)
    try:
        if file.is_dir():
            file = file / "config.json"
    except OSError as exc:
        raise HFConfigError(f"cannot read the file ({exc.strerror or exc})", path=file) from None
    config = load_json(file, "a Hugging Face config.json")
    if isinstance(config, Mapping) and not has_quantization(config):
        quant = quant_file(file)
        if quant is not None:
            config = {**config, "quantization_config": quant}
    shape, notes = _map(config, file)
    for note in notes:
        warnings.warn(note, HFConfigWarning, stacklevel=2)
    return shape


def _shown(path: Any) -> str:
    text = repr(str(path))[1:-1]
    return text if len(text) <= 160 else text[:100] + " … " + text[-40:]


def map_hf_config(config: Mapping[str, Any], *, path: str | os.PathLike | None = None) -> dict[str, Any]:
    """Map an already-parsed configuration mapping to ``[model]`` fields.

    ``path`` only labels error messages.  See :func:`read_hf_config`.
    """
    shape, notes = _map(config, path)
    for note in notes:
        warnings.warn(note, HFConfigWarning, stacklevel=2)
    return shape


def _map(config: Mapping[str, Any], path) -> tuple[dict[str, Any], list[str]]:
    """The shape and the notes on what it cannot express."""
    notes: list[str] = []
    if not isinstance(config, Mapping):
        raise HFConfigError(f"the top level is a JSON {type(config).__name__}, not an object",
                            path=path, expected="a JSON object of configuration keys")
    outer = config
    config = _text_config(config, path)
    model_type = config.get("model_type")
    model_type = model_type if isinstance(model_type, str) else None
    if model_type is None and isinstance(outer.get("model_type"), str):
        model_type = _TEXT_TYPES.get(outer["model_type"], outer["model_type"])
    if model_type is not None:
        model_type = "gemma3_text" if model_type == "gemma3" else _TEXT_TYPES.get(model_type, model_type)
    refuse(model_type, path, config.get("architectures", outer.get("architectures")))
    defaults = MODEL_TYPE_DEFAULTS.get(model_type or "", {})
    config = {**defaults, **{k: v for k, v in config.items() if v is not None or k not in defaults}}
    config = TrackedConfig({**config, **apply_overrides(config, model_type, path)})

    out: dict[str, Any] = {}
    blocks = dict.get(config, "layers_block_type") if model_type == "nemotron_h" else None
    if (isinstance(blocks, list) and blocks
            and not any(dict.__contains__(config, key) for key in _ALIASES["layers"])):
        # Nemotron-H configurations that list every block may leave the count out
        # (Nemotron 3 Ultra): the decoder has as many layers as the list has blocks.
        dict.__setitem__(config, "num_hidden_layers", len(blocks))
    out["layers"] = _required(config, "layers", path)
    out["d_model"] = _required(config, "d_model", path)
    out["heads"] = _required(config, "heads", path)
    kv_key, kv_heads = _optional(config, "kv_heads", path)
    if kv_heads is None and config.get("multi_query") is True:
        kv_heads, kv_key = 1, "multi_query"
    out["kv_heads"] = kv_heads if kv_heads is not None else out["heads"]
    if out["heads"] % out["kv_heads"]:
        raise HFConfigError(
            f"{out['kv_heads']} key/value heads do not divide {out['heads']} attention heads",
            path=path, key=kv_key or "num_key_value_heads",
            expected="a divisor of num_attention_heads")

    head_dim = config.get("head_dim")
    if config.get("kv_lora_rank") and head_dim is None:
        # Latent attention: a query/key head is the non-rotary and the rotary part.
        head_dim = (_positive_int(config.get("qk_nope_head_dim"), "qk_nope_head_dim", "head_dim", path)
                    + _positive_int(config.get("qk_rope_head_dim"), "qk_rope_head_dim", "head_dim", path))
    if head_dim is None:
        if out["d_model"] % out["heads"]:
            raise HFConfigError(
                f"hidden size {out['d_model']} is not a multiple of {out['heads']} heads and no "
                "head_dim is given", path=path, key="head_dim",
                expected="a positive integer head_dim")
        out["head_dim"] = out["d_model"] // out["heads"]
    else:
        out["head_dim"] = _positive_int(head_dim, "head_dim", "head_dim", path)

    _, moe_width = _first(config, ("moe_intermediate_size",), "expert_d_ff", path)
    if model_type == "llama4_text":
        # Llama 4: intermediate_size is the experts' width, intermediate_size_mlp the dense one.
        _, moe_width = _first(config, ("intermediate_size",), "expert_d_ff", path)
        _, dense_width = _first(config, ("intermediate_size_mlp",), "d_ff", path)
        dict.__setitem__(config, "intermediate_size", dense_width or moe_width)
    ff_key, d_ff = _optional(config, "d_ff", path)
    if d_ff is None:
        if ff_key == "n_inner" or model_type in ("gpt2", "gpt_neo", "gpt_bigcode", "codegen", "falcon"):
            d_ff = 4 * out["d_model"]  # GPT-2's n_inner = null (and Falcon's MLP) is 4 x hidden size
        elif moe_width is not None:
            d_ff = moe_width
        else:
            raise HFConfigError("missing key", path=path, key="intermediate_size",
                                expected=f"a positive integer: {_MEANING['d_ff']}")
    out["d_ff"] = d_ff
    out["ffn"] = _ffn_kind(config, model_type, path)
    out["vocab"] = _required(config, "vocab", path)

    tied = config.get("tie_word_embeddings")
    if tied is None:
        tied = model_type in _TIED_BY_DEFAULT
    elif not isinstance(tied, bool):
        raise HFConfigError(f"got {tied!r}", path=path, key="tie_word_embeddings", expected="true or false")
    out["tied_embeddings"] = tied

    _experts(config, out, moe_width, path, notes)
    explicit = _layer_pattern(config, model_type, out, path, notes)
    attention_family(config, model_type, out, path)
    if not explicit:
        _moe_shape(config, model_type, out, path, notes)
    read_quantization(outer, config, out, path, notes)
    unmodelled_notes(outer, config, out, path, notes)
    for key in unread_keys(config):
        notes.append(f"{path or 'config'}: {key} = {dict.get(config, key)!r} shapes the network in "
                     f"some families but is not read for model_type {model_type!r}: the layers "
                     "it describes are counted as the other keys say")
    return out, notes


# ------------------------------------------------------------------------- helpers


def _text_config(config: Mapping[str, Any], path) -> Mapping[str, Any]:
    if any(key in config for key in _ALIASES["layers"]):
        return config
    inner = config.get("text_config")
    if isinstance(inner, Mapping):
        merged = dict(inner)
        if "tie_word_embeddings" not in merged and "tie_word_embeddings" in config:
            merged["tie_word_embeddings"] = config["tie_word_embeddings"]
        if "model_type" not in merged and isinstance(config.get("model_type"), str):
            merged["model_type"] = _TEXT_TYPES.get(config["model_type"], config["model_type"])
        return merged
    return config


def _positive_int(value: Any, key: str, field: str, path) -> int:
    return positive_int(value, key, _MEANING.get(field, field), path)


def _first(config: Mapping[str, Any], keys: tuple[str, ...], field: str, path) -> tuple[str | None, int | None]:
    for key in keys:
        if key in config and config[key] is not None:
            return key, _positive_int(config[key], key, field, path)
    for key in keys:
        if key in config:
            return key, None
    return None, None


def _optional(config, field: str, path) -> tuple[str | None, int | None]:
    return _first(config, _ALIASES[field], field, path)


def _required(config, field: str, path) -> int:
    key, value = _optional(config, field, path)
    if value is None:
        names = _ALIASES[field]
        where = names[0] if key is None else key
        message = "missing key" if key is None else "is null"
        raise HFConfigError(message, path=path, key=where,
                            expected=f"a positive integer: {_MEANING[field]}")
    return value


def _ffn_kind(config: Mapping[str, Any], model_type: str | None, path) -> str:
    if model_type in GATED_MODEL_TYPES:
        return "swiglu"
    if model_type in PLAIN_MLP_MODEL_TYPES:
        return "gelu"
    # Nemotron-H names its MLP's activation mlp_hidden_act (hidden_act, if present, is the
    # Mamba mixer's).
    key = next((k for k in ("mlp_hidden_act", "hidden_act", "activation_function",
                            "hidden_activation") if k in config), None)
    activation = config.get(key) if key else None
    if isinstance(activation, str):
        name = activation.lower()
        if name in _GATED_ACTIVATIONS:
            return "swiglu"
        if name in _PLAIN_ACTIVATIONS:
            return "gelu"
    raise HFConfigError(
        f"cannot tell whether the feed-forward block of model_type {model_type!r} with activation "
        f"{activation!r} is gated",
        path=path, key=key or "hidden_act",
        expected='a known model_type, or hidden_act "silu" (gated) or "gelu" (plain); '
                 'otherwise give model.ffn in the scenario and the other fields by hand')


def _experts(config: Mapping[str, Any], out: dict[str, Any], moe_width: int | None, path,
             notes: list[str]) -> None:
    experts_key = next((k for k in _ALIASES["experts"] if config.get(k) not in (None, 0)), None)
    if experts_key is None:
        return
    experts = _positive_int(config[experts_key], experts_key, "experts", path)
    if experts == 1:
        return
    active_key, active = _first(config, ("num_experts_per_tok", "experts_per_token", "moe_top_k"),
                                "active_experts", path)
    if active is None:
        raise HFConfigError(f"{experts_key} = {experts} but the number of experts per token is missing",
                            path=path, key="num_experts_per_tok",
                            expected=f"a positive integer: {_MEANING['active_experts']}")
    if active > experts:
        raise HFConfigError(f"{active} experts per token exceed {experts} experts", path=path,
                            key=active_key, expected=f"at most {experts}")
    out["experts"] = experts
    out["active_experts"] = active
    latent = config.get("moe_latent_size")
    if latent not in (None, 0):
        # NVIDIA's latent mixture of experts (Nemotron 3 Super, Ultra): the routed experts
        # work at this width, projected to and from the model width around them.
        out["moe_latent_size"] = _positive_int(latent, "moe_latent_size",
                                               "the routed experts' latent width", path)
    if moe_width is not None and moe_width != out["d_ff"]:
        out["expert_d_ff"] = moe_width
    width = out.get("expert_d_ff", out["d_ff"])
    _, shared = _first(config, ("n_shared_experts", "num_shared_experts"), "shared_experts", path)
    if shared and config.get("moe_shared_expert_intermediate_size") not in (None, 0):
        # Nemotron-H's MoE layers: n_shared_experts of one joint width.
        joint = _positive_int(config["moe_shared_expert_intermediate_size"],
                              "moe_shared_expert_intermediate_size", "shared_experts", path)
        if joint != shared * width:
            out["shared_expert_d_ff"] = joint // shared
    if shared is None:
        shared_width = config.get("shared_expert_intermediate_size")
        if shared_width not in (None, 0):
            shared_width = _positive_int(shared_width, "shared_expert_intermediate_size",
                                         "shared_experts", path)
            # One shared FFN of width k x expert width equals k shared experts; any other
            # width is one shared expert of its own width.
            shared = shared_width // width
            if shared * width != shared_width:
                shared = 1
                out["shared_expert_d_ff"] = shared_width
    if shared is None and config.get("model_type") in ("llama4_text", "llama4"):
        shared = 1  # Llama 4's MoE layers add one shared expert of the experts' width
    if shared:
        out["shared_experts"] = shared


#: The longest layer period read (every Nth layer global, ...): a period is written out
#: layer by layer in the pattern, so a huge one would be an unbounded allocation.
_MAX_PERIOD = 1024


def _period(config: Mapping[str, Any], key: str, layers: int, path) -> int:
    """A layer period (every Nth layer global, ...): at most the layer count."""
    value = _positive_int(config.get(key), key, "layers", path)
    if value > _MAX_PERIOD:
        raise HFConfigError(f"a period of {value:,} layers is longer than infermodel reads",
                            path=path, key=key, expected=f"at most {_MAX_PERIOD:,} layers")
    if value > layers:
        raise HFConfigError(f"a period of {value} layers is longer than num_hidden_layers "
                            f"({layers})", path=path, key=key, expected=f"at most {layers}")
    return value


def _pattern_from_list(kinds: list[Any], key: str, layers: int, path) -> list[str]:
    if len(kinds) != layers:
        raise HFConfigError(
            f"lists {len(kinds)} layer kinds but num_hidden_layers is {layers}", path=path, key=key,
            expected=f"one entry per layer ({layers})")
    return kinds


def _compact_pattern(kinds: list[str]) -> str:
    """The shortest repeating period of a per-layer list, written as a pattern.

    >>> _compact_pattern(["sliding", "full"] * 18)
    'sliding,full'
    >>> _compact_pattern(["linear", "linear", "linear", "full"] * 12)
    '3*linear,full'
    """
    n = len(kinds)
    period = next(p for p in range(1, n + 1)
                  if all(kinds[i] == kinds[i % p] for i in range(n)))
    items: list[str] = []
    start = 0
    for end in range(1, period + 1):
        if end == period or kinds[end] != kinds[start]:
            run = end - start
            items.append(kinds[start] if run == 1 else f"{run}*{kinds[start]}")
            start = end
    return ",".join(items)


def _layer_kinds(config: Mapping[str, Any], model_type: str | None, out: dict[str, Any],
                 path) -> list[str] | None:
    """Mixers of the families that say them in layer_types or a period key."""
    layers = out["layers"]
    types = config.get("layer_types")
    if isinstance(types, list) and types:
        table = {**_LAYER_TYPES, "linear_attention": "lightning" if model_type in MINIMAX else "linear"}
        if all(dict.__contains__(config, key) for key in INDEXER_KEYS):
            table.update(_SPARSE_LAYER_TYPES)
        unknown = sorted({t for t in types if t not in table}, key=str)
        if unknown:
            raise HFConfigError(f"unknown layer type(s) {', '.join(map(repr, unknown))}", path=path,
                                key="layer_types", expected=", ".join(sorted(table)))
        kinds = [table[t] for t in _pattern_from_list(types, "layer_types", layers, path)]
        if "mamba2" in kinds:
            mamba_from_layer_types(config, out, path)
        _agrees_with_interval(config, kinds)
        return kinds
    if model_type == "qwen3_next":
        interval = _period(config, "full_attention_interval", layers, path)
        return ["linear"] * (interval - 1) + ["full"]
    if model_type == "llama4_text":
        flags = config.get("no_rope_layers")
        if isinstance(flags, list) and flags:
            # 1: a rotary (chunked-local) layer, 0: a global layer without rotary embedding.
            return ["chunked" if f else "full" for f in _pattern_from_list(flags, "no_rope_layers",
                                                                            layers, path)]
        interval = _period(config, "no_rope_layer_interval", layers, path)
        return ["chunked"] * (interval - 1) + ["full"]
    if model_type == "gemma3_text":
        period = _period(config, "sliding_window_pattern", layers, path)
        return ["sliding"] * (period - 1) + ["full"]
    if model_type == "gemma2":
        return ["sliding", "full"]
    if config.get("sliding_window") and config.get("use_sliding_window", True) is not False:
        return ["sliding"]
    return None


def _agrees_with_interval(config: Mapping[str, Any], kinds: list[str]) -> None:
    """Read ``full_attention_interval`` beside ``layer_types`` (Qwen3.5 writes both) when
    it says what they say, every Nth layer full; one that disagrees is left unread, and
    so a warning that the layer list was followed.
    """
    interval = dict.get(config, "full_attention_interval") if isinstance(config, dict) else None
    if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
        return
    said = ["full" if (i + 1) % interval == 0 else "other" for i in range(len(kinds))]
    if said == ["full" if k == "full" else "other" for k in kinds]:
        config.get("full_attention_interval")


def _layer_pattern(config: Mapping[str, Any], model_type: str | None, out: dict[str, Any], path,
                   notes: list[str]) -> bool:
    """layer_pattern, sliding_window and attention_chunk from whichever keys the family
    uses; True when the pattern names every layer's feed-forward block too.
    """
    layers = out["layers"]
    kinds = layer_items(config, model_type, out, path, notes)
    if kinds is None:
        kinds = _layer_kinds(config, model_type, out, path)
    if kinds is None:
        return False
    if len(kinds) > layers:
        raise HFConfigError(f"the layer pattern has {len(kinds)} layers but num_hidden_layers is "
                            f"{layers}", path=path, key="layer_types", expected=f"at most {layers}")
    explicit = all("+" in kind for kind in kinds)
    mixers = {kind.partition("+")[0] for kind in kinds}
    if mixers == {"full"} and not explicit:
        return False
    out["layer_pattern"] = _compact_pattern(kinds)
    if "sliding" in mixers and "sliding_window" not in out:
        out["sliding_window"] = _positive_int(config.get("sliding_window"), "sliding_window",
                                              "sliding_window", path)
    if "chunked" in mixers:
        out["attention_chunk"] = _positive_int(config.get("attention_chunk_size"),
                                               "attention_chunk_size", "attention_chunk", path)
    if mixers & {"linear", "lightning", "mamba", "mamba2"}:
        state_bits(config, out)
    if "linear" in mixers:
        for field, key in (("linear_key_heads", "linear_num_key_heads"),
                           ("linear_value_heads", "linear_num_value_heads"),
                           ("linear_key_head_dim", "linear_key_head_dim"),
                           ("linear_value_head_dim", "linear_value_head_dim"),
                           ("linear_conv_kernel", "linear_conv_kernel_dim")):
            out[field] = _positive_int(config.get(key), key, field, path)
    return explicit


def _moe_shape(config: Mapping[str, Any], model_type: str | None, out: dict[str, Any], path,
               notes: list[str]) -> None:
    if "experts" not in out:
        return
    dense = config.get("first_k_dense_replace")
    if dense:
        out["dense_layers"] = _positive_int(dense, "first_k_dense_replace", "layers", path)
    for key in ("moe_layer_freq", "interleave_moe_layer_step", "decoder_sparse_step"):
        if config.get(key) not in (None, 0, 1):
            out["moe_layer_period"] = _period(config, key, out["layers"], path)
            break
    if out.get("dense_layers", 0) >= out["layers"]:
        raise HFConfigError(f"first_k_dense_replace = {out['dense_layers']} leaves no mixture-of-"
                            f"experts layer among {out['layers']}", path=path,
                            key="first_k_dense_replace", expected=f"fewer than {out['layers']}")
