"""Every layer as a Hugging Face config declares it: hybrid, heterogeneous and state-space
families, for :mod:`infermodel.hf_config`.

Each family says which layer is which in keys of its own. :func:`layer_items` reads them
into one item per layer — a mixer, and the layer's feed-forward block where the family
gives it — which :mod:`.reader` writes as the scenario's ``layer_pattern``::

    Jamba            attn_layer_period/offset, expert_layer_period/offset
                       -> "mamba+dense", "mamba+moe", "full+dense", ...
    MiniMax-01, M1   attn_type_list (0 lightning, 1 softmax) or layer_types
                       -> "lightning", "full" (every layer a mixture of experts)
    Nemotron-H       hybrid_override_pattern (M Mamba-2, * attention, - MLP, E MoE)
                     or layers_block_type -> "mamba2+none", "full+none", "none+dense", ...
    DeciLM           block_configs (attention kept, replace_with_linear or no_op; a
    (nemotron-nas)     feed-forward multiplier per block) -> "full+dense:28672", "none+dense:5632"

The state-space widths are read from the family's own key names (Jamba's ``mamba_*``,
Nemotron-H's ``ssm_state_size``, ``mamba_num_heads``, ``n_groups``, ...). A family whose
layers the fields cannot express is refused by name (:data:`REFUSED`), and a key that
shapes the network in some family but that nothing read is reported (:func:`unread_keys`).

Sources: each family's published config.json and Transformers configuration class
(``JambaConfig``, ``MiniMaxConfig``, ``NemotronHConfig``, the DeciLM remote code's
``BlockConfig`` and ``_ffn_mult_to_intermediate_size``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

from ..errors import CarriesProblem, Problem


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
        return (rebuild_error, (type(self), self.message, self.path, self.key, self.expected))


def rebuild_error(cls, message, path, key, expected):
    return cls(message, path=path, key=key, expected=expected)


class HFConfigWarning(UserWarning):
    """The configuration has a feature the shape fields cannot express exactly."""


def shown(value: Any) -> str:
    """A config value as the file writes it (``NaN``, ``Infinity`` as JSON spells them)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return repr(value)


def positive_int(value: Any, key: str, meaning: str, path) -> int:
    """``value`` as a positive integer, or an :class:`HFConfigError` naming ``key``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise HFConfigError(f"got {value!r}", path=path, key=key,
                            expected=f"a positive integer: {meaning}")
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise HFConfigError(f"got {shown(value)}", path=path, key=key,
                                expected=f"a positive integer: {meaning}")
        value = int(value)
    if value < 1:
        raise HFConfigError(f"got {value!r}", path=path, key=key,
                            expected=f"a positive integer: {meaning}")
    return value


class TrackedConfig(dict):
    """A configuration mapping that remembers which keys were looked at."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.read: set[str] = set()

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key):
        self.read.add(key)
        return super().__contains__(key)


#: Families whose layers the fields cannot express, with the reason.
REFUSED = {
    "falcon_h1": "Falcon-H1 runs attention and a Mamba-2 mixer side by side in every block",
    "zamba": "Zamba shares one attention block across the Mamba layers",
    "zamba2": "Zamba2 shares attention blocks (with per-use adapters) across the Mamba layers",
    "mamba": "a pure Mamba-1 model keeps no attention cache",
    "mamba2": "a pure Mamba-2 model keeps no attention cache",
    "falcon_mamba": "a pure Mamba model keeps no attention cache",
    "rwkv": "RWKV's time-mixing layers are not among the mixers modelled",
    "xlstm": "xLSTM's recurrent blocks are not among the mixers modelled",
    "lfm2": "LFM2's short-convolution blocks are not among the mixers modelled",
    "deepseek_v4": "DeepSeek-V4 compresses each layer's cache by its own ratio beside a sliding "
                   "window (compress_ratios, sliding_window) and splits the residual stream "
                   "into several (hc_mult): neither is among the layers modelled, and read as "
                   "plain windowed attention its cache would be a small fraction of the real one",
    "kimi_linear": "Kimi Linear's Kimi Delta Attention layers (linear_attn_config) and its "
                   "attention-residual blocks (attn_res_block_size) are not among the mixers "
                   "modelled",
    "minimax_m3": "MiniMax-M3's block-sparse attention (sparse_attention_config: an index over "
                  "128-token blocks picks the blocks each query attends) is not among the "
                  "mixers modelled",
    "mimo_v2_flash": "MiMo-V2-Flash's sliding-window layers have heads and key/value heads of "
                     "their own (swa_num_attention_heads, swa_num_key_value_heads), which one "
                     "attention shape per model cannot express",
    "gemma4_text": "Gemma 4's global layers have a head width and key/value heads of their own "
                   "(global_head_dim, num_global_key_value_heads) and use their keys as values "
                   "(attention_k_eq_v), which one attention shape per model cannot express",
}
REFUSED["gemma4"] = REFUSED["gemma4_text"]
REFUSED["kimi_k3"] = REFUSED["kimi_linear"]
REFUSED["minimax_m3_vl"] = REFUSED["minimax_m3"]
#: Architectures refused whatever model_type a checkpoint writes beside them (a
#: re-quantised DeepSeek-V4 names itself "deepseek_ref"), by the model_type they are.
REFUSED_ARCHITECTURES = {"DeepseekV4ForCausalLM": "deepseek_v4",
                         "KimiLinearForCausalLM": "kimi_linear",
                         "MiniMaxM3ForCausalLM": "minimax_m3",
                         "MiniMaxM3SparseForConditionalGeneration": "minimax_m3",
                         "MiMoV2FlashForCausalLM": "mimo_v2_flash",
                         "Gemma4ForConditionalGeneration": "gemma4_text",
                         "Gemma4ForCausalLM": "gemma4_text"}

#: Keys that shape the network in some family: present, meaningful and unread, each is a
#: warning naming it (the layers it describes are then counted some other way).
SHAPING_KEYS = frozenset({
    "layer_types", "attn_type_list", "hybrid_override_pattern", "layers_block_type",
    "attn_layer_period", "attn_layer_offset", "expert_layer_period", "expert_layer_offset",
    "block_configs", "full_attention_interval", "sliding_window_pattern", "no_rope_layers",
    "mlp_only_layers", "moe_layer_freq", "interleave_moe_layer_step", "decoder_sparse_step",
    "first_k_dense_replace", "n_shared_experts", "num_shared_experts",
    "shared_expert_intermediate_size", "moe_shared_expert_intermediate_size",
    "mamba_d_state", "mamba_d_conv", "mamba_expand", "mamba_dt_rank", "ssm_state_size",
    "mamba_num_heads", "mamba_n_heads", "mamba_head_dim", "mamba_d_head", "n_groups",
    "mamba_n_groups", "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
    "linear_value_head_dim", "kv_lora_rank", "q_lora_rank", "attention_chunk_size",
    "attn_layer_indices", "topk_method", "moe_latent_size",
})
_NEUTRAL: tuple[Any, ...] = (None, False, 0, 1, "", [], {})


def unread_keys(config: TrackedConfig) -> list[str]:
    """Shaping keys the configuration sets (to more than a neutral value) that nothing read."""
    return sorted(key for key in SHAPING_KEYS - config.read
                  if dict.__contains__(config, key)
                  and not any(dict.__getitem__(config, key) == n for n in _NEUTRAL))


def refuse(model_type: str | None, path, architectures: Any = None) -> None:
    if model_type not in REFUSED and isinstance(architectures, list):
        named = [a for a in architectures if isinstance(a, str) and a in REFUSED_ARCHITECTURES]
        if named:
            raise HFConfigError(f"architecture {named[0]!r} (model_type {model_type!r}) is not a "
                                f"family infermodel can read: "
                                f"{REFUSED[REFUSED_ARCHITECTURES[named[0]]]}",
                                path=path, key="architectures",
                                expected="a decoder whose layers are attention, linear "
                                         "attention, Mamba or none, each with a dense, MoE or "
                                         "no feed-forward block")
    if model_type in REFUSED:
        raise HFConfigError(f"model_type {model_type!r} is not a family infermodel can read: "
                            f"{REFUSED[model_type]}", path=path, key="model_type",
                            expected="a decoder whose layers are attention, linear attention, "
                                     "Mamba or none, each with a dense, MoE or no feed-forward "
                                     "block")


# ---------------------------------------------------------------------------------
# Families
# ---------------------------------------------------------------------------------

MINIMAX = frozenset({"minimax", "minimax_text_01", "minimax_m1"})
_NEMOTRON_H = {"M": "mamba2+none", "*": "full+none", "-": "none+dense", "E": "none+moe"}
_BLOCK_TYPES = {"mamba": "mamba2+none", "attention": "full+none", "mlp": "none+dense",
                "moe": "none+moe"}


def _period(config: Mapping[str, Any], key: str, offset_key: str, layers: int, path) -> tuple[int, int]:
    period = positive_int(config.get(key), key, "a layer period", path)
    offset = config.get(offset_key, 0)
    if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset < period:
        raise HFConfigError(f"got {offset!r}", path=path, key=offset_key,
                            expected=f"a layer offset from 0 to {period - 1}")
    if period > layers:
        raise HFConfigError(f"a period of {period} layers is longer than num_hidden_layers "
                            f"({layers})", path=path, key=key, expected=f"at most {layers}")
    return period, offset


def _jamba(config, out, path) -> list[str]:
    layers = out["layers"]
    ap, ao = _period(config, "attn_layer_period", "attn_layer_offset", layers, path)
    moe = "experts" in out
    if moe:
        ep, eo = _period(config, "expert_layer_period", "expert_layer_offset", layers, path)
    items = []
    for i in range(layers):
        mixer = "full" if i % ap == ao else "mamba"
        ffn = "moe" if moe and i % ep == eo else "dense"
        items.append(f"{mixer}+{ffn}")
    _mamba1(config, out, path)
    return items


def _mamba1(config, out, path) -> None:
    out["mamba_d_state"] = positive_int(config.get("mamba_d_state"), "mamba_d_state",
                                        "the Mamba state size", path)
    for field, key, default in (("mamba_d_conv", "mamba_d_conv", 4), ("mamba_expand", "mamba_expand", 2)):
        value = config.get(key, default)
        out[field] = positive_int(value if value is not None else default, key, field, path)
    rank = config.get("mamba_dt_rank", "auto")
    if rank != "auto" and rank is not None:
        out["mamba_dt_rank"] = positive_int(rank, "mamba_dt_rank", "the rank of the Δ projection", path)
    out["mamba_conv_bias"] = config.get("mamba_conv_bias", True) is not False
    out["mamba_proj_bias"] = config.get("mamba_proj_bias", False) is True
    out["mamba_inner_norms"] = True   # Jamba's Δ, B and C layer norms


def _first_int(config, keys: tuple[str, ...], meaning: str, path, default=None):
    for key in keys:
        if config.get(key) is not None:
            return positive_int(config[key], key, meaning, path)
    if default is None:
        raise HFConfigError("missing key", path=path, key=keys[0],
                            expected=f"a positive integer: {meaning}")
    return default


def _mamba2(config, out, path) -> None:
    out["mamba_d_state"] = _first_int(config, ("ssm_state_size", "mamba_d_state", "state_size"),
                                      "the Mamba-2 state size", path)
    out["mamba_heads"] = _first_int(config, ("mamba_num_heads", "mamba_n_heads"),
                                    "the Mamba-2 heads", path)
    out["mamba_head_dim"] = _first_int(config, ("mamba_head_dim", "mamba_d_head"),
                                       "the Mamba-2 channels per head", path)
    out["mamba_groups"] = _first_int(config, ("n_groups", "mamba_n_groups"), "the Mamba-2 groups",
                                     path, default=1)
    out["mamba_d_conv"] = _first_int(config, ("conv_kernel", "mamba_d_conv"),
                                     "the convolution width", path, default=4)
    out["mamba_expand"] = _first_int(config, ("expand", "mamba_expand"), "the inner width ratio",
                                     path, default=2)
    out["mamba_conv_bias"] = config.get("use_conv_bias", config.get("mamba_conv_bias", True)) is not False
    out["mamba_proj_bias"] = config.get("use_bias", config.get("mamba_proj_bias", False)) is True


def state_bits(config: Mapping[str, Any], out: dict[str, Any]) -> None:
    """The recurrent state's width when the config names it: Nemotron Nano v2's
    ``mamba_ssm_cache_dtype``, Qwen3.5's ``mamba_ssm_dtype`` ("float32": 32 bits).
    """
    for key in ("mamba_ssm_cache_dtype", "mamba_ssm_dtype"):
        if str(config.get(key, "")).lower() in ("float32", "fp32"):
            out["linear_state_bits"] = 32.0


def _from_string(config, key: str, table: dict[str, str], layers: int, path) -> list[str]:
    text = config.get(key)
    if not isinstance(text, str) or len(text) != layers:
        shown = len(text) if isinstance(text, str) else repr(text)
        raise HFConfigError(f"gives {shown} layers but num_hidden_layers is {layers}", path=path,
                            key=key, expected=f"one character per layer ({layers}) from "
                                              + ", ".join(table))
    unknown = sorted(set(text) - set(table))
    if unknown:
        raise HFConfigError(f"unknown layer character(s) {', '.join(map(repr, unknown))}",
                            path=path, key=key, expected=", ".join(map(repr, table)))
    return [table[c] for c in text]


def _from_list(config, key: str, table: dict, layers: int, path) -> list[str]:
    kinds = config.get(key)
    if not isinstance(kinds, list) or len(kinds) != layers:
        shown = len(kinds) if isinstance(kinds, list) else repr(kinds)
        raise HFConfigError(f"lists {shown} layer kinds but num_hidden_layers is {layers}",
                            path=path, key=key, expected=f"one entry per layer ({layers})")
    unknown = sorted({repr(k) for k in kinds if not isinstance(k, (str, int)) or k not in table})
    if unknown:
        raise HFConfigError(f"unknown layer type(s) {', '.join(unknown)}", path=path, key=key,
                            expected=", ".join(map(repr, table)))
    return [table[k] for k in kinds]


def _nemotron_h(config, out, path) -> list[str]:
    if config.get("hybrid_override_pattern") is not None:
        items = _from_string(config, "hybrid_override_pattern", _NEMOTRON_H, out["layers"], path)
    else:
        items = _from_list(config, "layers_block_type", _BLOCK_TYPES, out["layers"], path)
    if any(i.startswith("mamba2") for i in items):
        _mamba2(config, out, path)
    if any(i.endswith("+moe") for i in items) and "experts" not in out:
        raise HFConfigError("the layer pattern has mixture-of-experts layers (E) but no experts",
                            path=path, key="n_routed_experts", expected="a positive integer")
    return items


def _minimax(config, out, path) -> list[str]:
    layers = out["layers"]
    if config.get("attn_type_list") is not None:
        return _from_list(config, "attn_type_list", {0: "lightning", 1: "full"}, layers, path)
    return _from_list(config, "layer_types", {"linear_attention": "lightning",
                                              "full_attention": "full"}, layers, path)


def decilm_width(multiplier: Any, d_model: int, path, index: int) -> int:
    """A DeciLM block's feed-forward width from its multiplier: ⌈⌊2·m·d/3⌋ / 256⌉·256.

    >>> decilm_width(5.25, 8192, None, 0), decilm_width(1.3125, 8192, None, 0)
    (28672, 7168)
    """
    key = f"block_configs[{index}].ffn.ffn_mult"
    if isinstance(multiplier, bool) or not isinstance(multiplier, (int, float)) \
            or not math.isfinite(multiplier) or not 0 < multiplier <= 1000:
        raise HFConfigError(f"got {multiplier!r}", path=path, key=key,
                            expected="a positive feed-forward multiplier")
    width = int(2 * multiplier * d_model / 3)
    return -(-width // 256) * 256


def _block(config, index: int) -> tuple[Mapping, Mapping]:
    block = config["block_configs"][index]
    attention = block.get("attention") if isinstance(block, Mapping) else None
    ffn = block.get("ffn") if isinstance(block, Mapping) else None
    return (attention if isinstance(attention, Mapping) else {},
            ffn if isinstance(ffn, Mapping) else {})


def _decilm_groups(config, path) -> set[int]:
    groups = set()
    for i in range(len(config["block_configs"])):
        attention, _ = _block(config, i)
        if not attention.get("no_op") and not attention.get("replace_with_linear"):
            groups.add(positive_int(attention.get("n_heads_in_group"),
                                    f"block_configs[{i}].attention.n_heads_in_group",
                                    "query heads per key/value head", path))
    return groups


def decilm_overrides(config: Mapping[str, Any], path) -> dict[str, Any]:
    """The top-level keys a DeciLM config leaves null, from its ``block_configs``: the
    widest feed-forward block and the one key/value head count of its attention blocks.
    """
    blocks = config.get("block_configs")
    layers = config.get("num_hidden_layers")
    if not isinstance(blocks, list) or not blocks or (isinstance(layers, int) and len(blocks) != layers):
        raise HFConfigError(f"lists {len(blocks) if isinstance(blocks, list) else 'no'} blocks but "
                            f"num_hidden_layers is {layers!r}", path=path, key="block_configs",
                            expected="one block configuration per layer")
    d = positive_int(config.get("hidden_size"), "hidden_size", "the model width", path)
    heads = positive_int(config.get("num_attention_heads"), "num_attention_heads",
                         "the number of attention heads", path)
    widths = [decilm_width(f.get("ffn_mult"), d, path, i) for i, (_, f) in
              enumerate(_block(config, i) for i in range(len(blocks)))
              if not f.get("no_op") and not f.get("replace_with_linear")]
    groups = _decilm_groups(config, path)
    if len(groups) > 1:
        raise HFConfigError(f"attention blocks group {sorted(groups)} query heads per key/value "
                            "head; one count per model is modelled", path=path,
                            key="block_configs[].attention.n_heads_in_group",
                            expected="the same n_heads_in_group in every attention block")
    if groups and heads % next(iter(groups)):
        raise HFConfigError(f"n_heads_in_group = {next(iter(groups))} does not divide "
                            f"{heads} heads", path=path, key="block_configs[].attention.n_heads_in_group",
                            expected="a divisor of num_attention_heads")
    out: dict[str, Any] = {"intermediate_size": max(widths) if widths else 4 * d}
    out["num_key_value_heads"] = heads // next(iter(groups)) if groups else heads
    return out


def _decilm(config, out, path, notes: list[str]) -> list[str]:
    items, windows = [], set()
    for i in range(out["layers"]):
        attention, ffn = _block(config, i)
        if attention.get("no_op"):
            mixer = "none"
        elif attention.get("replace_with_linear"):
            mixer = "projection"
        elif attention.get("window_length") is not None:
            mixer = "sliding"
            windows.add(positive_int(attention["window_length"],
                                     f"block_configs[{i}].attention.window_length",
                                     "the attention window", path))
        else:
            mixer = "full"
        if ffn.get("no_op"):
            block = "none"
        elif ffn.get("replace_with_linear"):
            block = "projection"
        else:
            block = f"dense:{decilm_width(ffn.get('ffn_mult'), out['d_model'], path, i)}"
        items.append(f"{mixer}+{block}")
        for part, table in (("attention", attention), ("ffn", ffn)):
            if table.get("sparsify") not in (None, False) or table.get("num_sink_tokens") not in (None, 0):
                notes.append(f"block_configs[{i}].{part}: sparsify/sink tokens are not modelled; "
                             "the block is counted dense")
    if len(windows) > 1:
        raise HFConfigError(f"attention windows of {sorted(windows)} tokens; one window per model "
                            "is modelled", path=path, key="block_configs[].attention.window_length",
                            expected="the same window_length in every windowed block")
    if windows:
        out["sliding_window"] = windows.pop()
    return items


def layer_items(config: Mapping[str, Any], model_type: str | None, out: dict[str, Any], path,
                notes: list[str]) -> list[str] | None:
    """One item per layer (``"mamba+moe"``, ``"lightning"``, ``"none+dense:5632"``) for the
    families that declare their layers in keys of their own; None for the others.
    """
    if config.get("block_configs") is not None:
        return _decilm(config, out, path, notes)
    if config.get("hybrid_override_pattern") is not None or model_type == "nemotron_h":
        return _nemotron_h(config, out, path)
    if model_type in MINIMAX or config.get("attn_type_list") is not None:
        return _minimax(config, out, path)
    if config.get("attn_layer_period") is not None or model_type == "jamba":
        return _jamba(config, out, path)
    return None


def mamba_from_layer_types(config: Mapping[str, Any], out: dict[str, Any], path) -> None:
    """Mamba-2 widths for a family whose ``layer_types`` names ``"mamba"`` layers."""
    _mamba2(config, out, path)


def apply_overrides(config: Mapping[str, Any], model_type: str | None, path) -> dict[str, Any]:
    """Top-level keys a family writes under its own names (or leaves null), filled in."""
    extra: dict[str, Any] = {}
    if config.get("block_configs") is not None:
        extra.update(decilm_overrides(config, path))
    if config.get("head_dim") is None and config.get("attention_head_dim") is not None:
        extra["head_dim"] = config["attention_head_dim"]   # Nemotron-H
    return extra


__all__ = ["MINIMAX", "REFUSED", "SHAPING_KEYS", "HFConfigError", "HFConfigWarning",
           "TrackedConfig", "apply_overrides", "decilm_overrides", "decilm_width",
           "layer_items",
           "mamba_from_layer_types", "positive_int", "rebuild_error", "refuse", "shown", "state_bits", "unread_keys"]
