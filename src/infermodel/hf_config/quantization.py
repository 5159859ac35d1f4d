"""A checkpoint's number formats read from its ``quantization_config``: the block
linears' and routed experts' formats, the groups an exclusion list keeps in 16 bits, and
how its 8-bit activations take their scale.

    quant_method fp8 (weight_block_size)  -> fp8-e4m3, or fp8-b128 in 128×128 blocks
    quant_method mxfp4                    -> mxfp4 experts (and linears unless excluded)
    awq, gptq (bits, group_size)          -> int4/int8 groups, with zero points
    compressed-tensors (first group)      -> nvfp4, fp8, int groups; input_activations
    modelopt (quant_algo)                 -> nvfp4, fp8-e4m3 (static scales)
    modules_to_not_convert | ignore | exclude_modules | ignored_layers
                                          -> unquantized; or the routed experts alone
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["activation_scales", "experts_only", "first_group", "format_for", "read_quantization",
           "unquantized_groups"]


#: What an exclusion list's module names mean: (substrings, the group kept in 16 bits).
_EXCLUDED = ((("indexer",), "indexer"),
             (("q_a_proj", "q_b_proj", "kv_a_proj", "kv_b_proj"), "latent"),
             (("self_attn", "attention", ".attn", "q_proj", "k_proj", "v_proj", "o_proj", "qkv"),
              "attention"),
             (("mixer", "mamba", "linear_attn", "ssm", "conv1d", "in_proj", "out_proj"), "mixers"),
             (("router", "mlp.gate", "moe.gate"), "router"),
             (("embed", "lm_head", "norm"), "embedding"))


#: Module names of the parts of a mixture-of-experts block besides its routed experts:
#: the shared experts and the dense layers' feed-forward projections.
_SHARED_EXPERTS = ("shared_expert",)
_DENSE_FFN = ("mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", "mlp.gate_up_proj",
              "mlp\\.(gate", "mlp\\.(up")


def _excluded_names(qc: Mapping[str, Any]) -> list[str]:
    """The module names a quantization_config's exclusion lists name."""
    names = []
    for key in ("modules_to_not_convert", "ignore", "exclude_modules", "ignored_layers"):
        value = qc.get(key)
        if isinstance(value, list):
            names += [str(v) for v in value]
    return names


def experts_only(qc: Mapping[str, Any]) -> bool:
    """Whether a checkpoint's exclusion list keeps every block linear but the routed
    experts in 16 bits: attention, the shared experts and the dense feed-forward
    projections all left out (Kimi-K2.5's INT4 checkpoint).
    """
    names = [n.lower() for n in _excluded_names(qc)]
    attention = next(keys for keys, group in _EXCLUDED if group == "attention")
    return all(any(k in n for n in names for k in keys)
               for keys in (attention, _SHARED_EXPERTS, _DENSE_FFN))


def unquantized_groups(qc: Mapping[str, Any], where: str, notes: list[str],
                       layers: int | None = None) -> str | None:
    """The parameter groups a checkpoint's exclusion list keeps out of its format
    (``modules_to_not_convert``, compressed-tensors' ``ignore``, ModelOpt's
    ``exclude_modules``), as the ``unquantized`` field writes them; the router, embeddings,
    head and norms stay 16-bit anyway. A name no group matches is a note, but for a layer
    past the model's ``layers`` (a multi-token-prediction layer, which is not counted).
    """
    groups: set[str] = set()
    unmatched: list[str] = []
    for name in _excluded_names(qc):
        lower = name.lower()
        index = re.search(r"layers\.(\d+)", lower)
        if (layers is not None and index is not None and int(index.group(1)) >= layers) or \
                re.match(r"(model\.)?mtp", lower):
            continue   # a multi-token-prediction layer: not counted
        found = next((group for keys, group in _EXCLUDED if any(k in lower for k in keys)), None)
        if found is None:
            unmatched.append(name)
        else:
            groups.add(found)
    if unmatched:
        # One note for all of them: a checkpoint may list one module per layer (NVIDIA's
        # GLM-5.2 keeps 77 shared-expert and dense-layer modules in 16 bits).
        shown = ", ".join(repr(n) for n in unmatched[:3])
        more = f" and {len(unmatched) - 3} more" if len(unmatched) > 3 else ""
        notes.append(f"{where}: {'module' if len(unmatched) == 1 else f'{len(unmatched)} modules'} "
                     f"{shown}{more} {'is' if len(unmatched) == 1 else 'are'} left out of the "
                     f"quantization but {'matches' if len(unmatched) == 1 else 'match'} no "
                     "parameter group; counted in the checkpoint's format")
    if "indexer" in groups:
        notes.append(f"{where}: the sparse-attention indexer is left out of the quantization; "
                     "its projections are counted in the latent projections' format (16 bits "
                     "where the checkpoint keeps those, else the block linears')")
    if "attention" in groups:
        groups.discard("latent")  # the latent projections are part of the attention layer
    kept = sorted(groups & {"attention", "mixers", "latent"})
    return ",".join(kept) or None



def first_group(qc: Mapping[str, Any]) -> Mapping[str, Any]:
    """A compressed-tensors quantization_config's first config group (empty if none)."""
    groups = qc.get("config_groups") or {}
    first: Any = next(iter(groups.values()), {}) if isinstance(groups, Mapping) else {}
    return first if isinstance(first, Mapping) else {}


def format_for(qc: Mapping[str, Any], path, notes: list[str]) -> tuple[str | None, str | None]:
    """(block-linear format, routed-expert format) named by a quantization_config."""
    method = str(qc.get("quant_method", "")).lower()
    if not method and "quant_algo" in qc:
        method = "modelopt"   # ModelOpt's stub in config.json names no quant_method
    where = (f"{qc['source_file']}: quantization" if qc.get("source_file")
             else f"{path or 'config'}: quantization_config")
    if method == "fp8":
        block = qc.get("weight_block_size")
        if block is None:
            return "fp8-e4m3", None
        if list(block) != [128, 128]:
            notes.append(f"{where}: FP8 blocks of {block} counted as 128×128 blocks (scale "
                         "metadata differs by well under 0.1 bit per weight)")
        return "fp8-b128", None
    if method == "mxfp4":
        skipped = " ".join(str(m) for m in qc.get("modules_to_not_convert") or ())
        return (None if "self_attn" in skipped else "mxfp4"), "mxfp4"
    if method in ("awq", "gptq"):
        bits = qc.get("bits", qc.get("w_bit"))
        group = qc.get("group_size", qc.get("q_group_size"))
        if bits not in (4, 8) or group not in (32, 64, 128):
            notes.append(f"{where}: {method} with bits={bits!r}, group_size={group!r} is not a "
                         "format this reader knows; weights counted at 16 bits (up to 4× too large)")
            return None, None
        zero = qc.get("zero_point", True) if method == "awq" else True  # GPTQ always stores qzeros
        return f"int{bits}-g{group}" + (f"-zp{bits}" if zero else ""), None
    if method == "compressed-tensors":
        weights = first_group(qc).get("weights") or {}
        bits, kind = weights.get("num_bits"), weights.get("type")
        strategy, group = weights.get("strategy"), weights.get("group_size")
        if kind == "float" and bits == 4 and group == 16:
            return "nvfp4", None
        if kind == "float" and bits == 8:
            return "fp8-b128" if strategy == "block" else "fp8-e4m3", None
        if kind == "int" and bits in (4, 8) and strategy == "group" and group in (32, 64, 128):
            zero = weights.get("symmetric", True) is False
            return f"int{bits}-g{group}" + (f"-zp{bits}" if zero else ""), None
        notes.append(f"{where}: compressed-tensors scheme {weights!r} is not one this reader "
                     "knows; weights counted at 16 bits (up to 4× too large)")
        return None, None
    if method == "modelopt":
        algo = str(qc.get("quant_algo") or "").upper()
        if algo == "NVFP4":
            return "nvfp4", None
        if algo == "FP8":
            return "fp8-e4m3", None
        if not algo:
            return None, None   # the KV cache alone is quantised: the weights stay 16-bit
        layers = qc.get("quantized_layers")
        if algo == "MIXED_PRECISION" and isinstance(layers, Mapping):
            counts: dict[str, int] = {}
            for spec in layers.values():
                name = str(spec.get("quant_algo")) if isinstance(spec, Mapping) else "?"
                counts[name] = counts.get(name, 0) + 1
            mix = ", ".join(f"{n} {a}" for a, n in sorted(counts.items(), key=lambda x: -x[1]))
            notes.append(f"{where}: ModelOpt quant_algo MIXED_PRECISION sets a format per layer "
                         f"({mix} modules), which this reader does not follow; weights counted "
                         "at 16 bits (up to 4× too large)")
            return None, None
        notes.append(f"{where}: ModelOpt quant_algo {qc.get('quant_algo')!r} is not one this "
                     "reader knows (FP8, NVFP4); weights counted at 16 bits")
        return None, None
    notes.append(f"{where}: quant_method {qc.get('quant_method')!r} is not one this reader "
                 "knows; weights counted at 16 bits")
    return None, None


def read_quantization(outer: Mapping[str, Any], config: Mapping[str, Any], out: dict[str, Any],
                      path, notes: list[str]) -> None:
    """The checkpoint's formats into ``out``: ``weight_format``, ``expert_weight_format``,
    ``unquantized`` and ``activation_scales`` (a format this module does not know is a
    note in ``notes``).
    """
    qc = outer.get("quantization_config") or config.get("quantization_config")
    if not isinstance(qc, Mapping):
        return
    linear, experts = format_for(qc, path, notes)
    scales = activation_scales(qc)
    if scales and linear:
        out["activation_scales"] = scales
    if linear and "experts" in out and experts_only(qc):
        # Every block linear but the routed experts stays 16-bit (Kimi-K2.5's INT4).
        out["expert_weight_format"] = linear
        return
    if linear:
        out["weight_format"] = linear
        layers = config.get("num_hidden_layers")
        kept = unquantized_groups(qc, f"{path or 'config'}: quantization_config", notes,
                                  layers if isinstance(layers, int) else None)
        if kept:
            out["unquantized"] = kept
    if experts and "experts" in out and experts != linear:
        out["expert_weight_format"] = experts


def activation_scales(qc: Mapping[str, Any]) -> str | None:
    """How a checkpoint's activations take their scale: ``activation_scheme`` (FP8
    checkpoints), the input activations' ``dynamic`` (compressed-tensors), static for
    ModelOpt's calibrated scales; None where the configuration does not say.
    """
    scheme = qc.get("activation_scheme")
    if scheme in ("static", "dynamic"):
        return str(scheme)
    method = str(qc.get("quant_method", "")).lower() or ("modelopt" if "quant_algo" in qc else "")
    if method == "modelopt":
        return "static"
    if method == "compressed-tensors":
        inputs = first_group(qc).get("input_activations")
        if isinstance(inputs, Mapping) and isinstance(inputs.get("dynamic"), bool):
            return "dynamic" if inputs["dynamic"] else "static"
    return None
