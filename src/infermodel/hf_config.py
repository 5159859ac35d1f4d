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

Features a scenario's shape fields cannot express (a first dense layer in DeepSeek-MoE,
sliding-window attention, latent attention) are reported with a
:class:`HFConfigWarning`; the shape returned is then an approximation.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import CarriesProblem, Problem

__all__ = ["MAX_CONFIG_BYTES", "HFConfigError", "HFConfigWarning", "map_hf_config", "read_hf_config",
           "read_hf_config_notes"]

#: Largest config.json accepted, in bytes (real ones are a few kilobytes).
MAX_CONFIG_BYTES = 1_000_000

GATED_MODEL_TYPES = frozenset({
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen2_vl",
    "gemma", "gemma2", "gemma3", "gemma3_text", "phi3", "phimoe", "deepseek", "deepseek_v2",
    "deepseek_v3", "olmo", "olmo2", "olmoe", "granite", "granitemoe", "cohere", "cohere2",
    "internlm2", "yi", "baichuan", "smollm3", "ministral", "mistral3", "exaone", "glm", "glm4",
    "starcoder2_gated", "jamba", "dbrx", "arcee", "hunyuan", "llama4", "llama4_text",
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


class HFConfigError(CarriesProblem, ValueError):
    """A config.json could not be read as a model shape.

    Its :class:`~infermodel.errors.Problem` (``.problem``) holds the file (``path``,
    or ``None``), the config key at fault (or ``None``), the message and what would
    have been accepted (``expected``).
    """

    def __init__(self, message: str, *, path: str | os.PathLike | None = None, key: str | None = None,
                 expected: str | None = None):
        self.problem = Problem(message, file=None if path is None else str(path), key=key,
                               expected=expected)
        super().__init__(str(self))

    @property
    def path(self) -> str | None:
        return self.problem.file

    @property
    def key(self) -> str | None:
        return self.problem.key

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.problem.render()

    def __reduce__(self):
        return (_rebuild, (type(self), self.message, self.path, self.key, self.expected))


def _rebuild(cls, message, path, key, expected):
    return cls(message, path=path, key=key, expected=expected)


class HFConfigWarning(UserWarning):
    """The configuration has a feature the shape fields cannot express exactly."""


def read_hf_config(path: str | os.PathLike) -> dict[str, Any]:
    """Read the model shape (see :func:`read_hf_config_notes`); each approximation the
    shape makes is issued as an :class:`HFConfigWarning`.
    """
    shape, notes = read_hf_config_notes(path)
    for note in notes:
        warnings.warn(note, HFConfigWarning, stacklevel=2)
    return shape


def read_hf_config_notes(path: str | os.PathLike) -> tuple[dict[str, Any], list[str]]:
    """Read the model shape from the Hugging Face ``config.json`` at ``path``, with a
    note on each feature the shape cannot express (the shape is then an approximation).

    ``path`` may also be a directory holding ``config.json``.  Returns a dict of
    ``[model]`` fields (``layers``, ``d_model``, ``heads``, ``kv_heads``, ``head_dim``,
    ``d_ff``, ``ffn``, ``vocab``, ``tied_embeddings`` and, for a mixture of experts,
    ``experts``, ``active_experts`` and where present ``shared_experts`` and
    ``expert_d_ff``).  Raises :class:`HFConfigError` naming the file and the key for a
    missing, unreadable, oversized (over :data:`MAX_CONFIG_BYTES`) or inconsistent file.
    """
    file = Path(path)
    if file.is_dir():
        file = file / "config.json"
    try:
        size = file.stat().st_size
    except FileNotFoundError:
        raise HFConfigError("file not found", path=file, expected="a Hugging Face config.json") from None
    except OSError as exc:
        raise HFConfigError(f"cannot read the file ({exc.strerror or exc})", path=file) from None
    if not file.is_file():
        raise HFConfigError("not a regular file", path=file, expected="a Hugging Face config.json")
    if size > MAX_CONFIG_BYTES:
        raise HFConfigError(f"file is {size:,} bytes, larger than the {MAX_CONFIG_BYTES:,}-byte limit",
                            path=file, expected="a config.json (a few kilobytes), not a weights file")
    try:
        with file.open("rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise HFConfigError(f"cannot read the file ({exc.strerror or exc})", path=file) from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise HFConfigError(f"file is larger than the {MAX_CONFIG_BYTES:,}-byte limit", path=file)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise HFConfigError("file is not UTF-8 text", path=file, expected="a JSON config.json") from None
    try:
        config = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise HFConfigError(f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
                            path=file, expected="a JSON config.json") from None
    except (ValueError, RecursionError) as exc:
        raise HFConfigError(f"invalid JSON: {exc}", path=file, expected="a JSON config.json") from None
    return _map(config, file)


def _reject_constant(name: str):
    raise ValueError(f"{name} is not allowed in a config.json")


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
    config = _text_config(config, path)
    model_type = config.get("model_type")
    model_type = model_type if isinstance(model_type, str) else None

    out: dict[str, Any] = {}
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
    _unmodelled(config, out, path, notes)
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
        return merged
    return config


def _positive_int(value: Any, key: str, field: str, path) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise HFConfigError(f"got {value!r}", path=path, key=key,
                            expected=f"a positive integer: {_MEANING.get(field, field)}")
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise HFConfigError(f"got {value!r}", path=path, key=key,
                                expected=f"a positive integer: {_MEANING.get(field, field)}")
        value = int(value)
    if value < 1:
        raise HFConfigError(f"got {value!r}", path=path, key=key,
                            expected=f"a positive integer: {_MEANING.get(field, field)}")
    return value


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
    key = next((k for k in ("hidden_act", "activation_function", "hidden_activation") if k in config), None)
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
    active_key, active = _first(config, ("num_experts_per_tok", "moe_top_k"), "active_experts", path)
    if active is None:
        raise HFConfigError(f"{experts_key} = {experts} but the number of experts per token is missing",
                            path=path, key="num_experts_per_tok",
                            expected=f"a positive integer: {_MEANING['active_experts']}")
    if active > experts:
        raise HFConfigError(f"{active} experts per token exceed {experts} experts", path=path,
                            key=active_key, expected=f"at most {experts}")
    out["experts"] = experts
    out["active_experts"] = active
    if moe_width is not None and moe_width != out["d_ff"]:
        out["expert_d_ff"] = moe_width
    width = out.get("expert_d_ff", out["d_ff"])
    _, shared = _first(config, ("n_shared_experts", "num_shared_experts"), "shared_experts", path)
    if shared is None:
        shared_width = config.get("shared_expert_intermediate_size")
        if shared_width not in (None, 0):
            shared_width = _positive_int(shared_width, "shared_expert_intermediate_size",
                                         "shared_experts", path)
            # One shared FFN of width k x expert width equals k shared experts.
            shared = max(1, round(shared_width / width))
            if shared * width != shared_width:
                notes.append(
                    f"{path or 'config'}: shared_expert_intermediate_size {shared_width} is not a "
                    f"multiple of the expert width {width}; using {shared} shared experts")
    if shared:
        out["shared_experts"] = shared


def _unmodelled(config: Mapping[str, Any], out: dict[str, Any], path, notes: list[str]) -> None:
    found = []
    dense_first = config.get("first_k_dense_replace")
    if "experts" in out and isinstance(dense_first, int) and not isinstance(dense_first, bool) and dense_first > 0:
        found.append(f"the first {dense_first} layer(s) are dense, but every layer is modelled as a "
                     "mixture of experts")
    step = config.get("decoder_sparse_step")
    if "experts" in out and isinstance(step, int) and not isinstance(step, bool) and step > 1:
        found.append(f"only every {step}th layer is a mixture of experts, but every layer is modelled as one")
    if "experts" in out and config.get("mlp_only_layers"):
        found.append("some layers are dense (mlp_only_layers), but every layer is modelled as a mixture of experts")
    if config.get("kv_lora_rank"):
        found.append("multi-head latent attention (kv_lora_rank) is modelled as ordinary attention")
    window = config.get("sliding_window")
    if window and config.get("use_sliding_window", True) is not False:
        found.append(f"sliding-window attention over {window} tokens is not modelled; KV sizes for "
                     "longer contexts are upper bounds")
    notes.extend(f"{path or 'config'}: {note}" for note in found)
