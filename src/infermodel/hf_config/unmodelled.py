"""What a Hugging Face configuration holds that the scenario's fields do not express, as
notes with their size (each becomes a warning on the result): dense layers among a
mixture of experts' layers, multi-token-prediction layers and a vision encoder. :mod:`.reader` calls :func:`unmodelled_notes` once the
fields are read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def vision_size(vision: Mapping[str, Any]) -> str:
    """The encoder's weights from its widths, as the note on leaving it out states them:
    per layer 4·h² (query, key, value, output) + 2·h·ff (a plain two-matrix MLP), the
    patch embedding 3·p²·h and one position embedding per patch; norms and biases aside.
    """
    h, ff, layers = (vision.get(k) for k in ("hidden_size", "intermediate_size", "num_hidden_layers"))
    if not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v < 10**7 for v in (h, ff, layers)):
        return "its size is not given in vision_config; typically a few hundred million parameters"
    assert isinstance(h, int) and isinstance(ff, int) and isinstance(layers, int)
    params = layers * (4 * h * h + 2 * h * ff)
    patch, image = vision.get("patch_size"), vision.get("image_size")
    if isinstance(patch, int) and isinstance(image, int) and 0 < patch <= image < 10**6:
        params += 3 * patch * patch * h + (image // patch) ** 2 * h
    return (f"about {params / 1e9:.2f} B parameters, {2 * params / 1e9:.2f} GB at 16 bits, from "
            f"{layers} layers of width {h} and MLP width {ff}")


#: The keys of DeepSeek Sparse Attention's indexer (DeepSeek-V3.2's ``deepseek_v32``, GLM-5's
#: ``glm_moe_dsa``); :mod:`.reader` maps them to the indexer's fields.
INDEXER_KEYS = ("index_n_heads", "index_head_dim", "index_topk")


def unmodelled_notes(outer: Mapping[str, Any], config: Mapping[str, Any], out: dict[str, Any], path,
                notes: list[str]) -> None:
    found = []
    if "experts" in out and config.get("mlp_only_layers"):
        dense = config["mlp_only_layers"]
        count = len(dense) if isinstance(dense, list) else "some"
        found.append(f"{count} of {out['layers']} layers are dense (mlp_only_layers = {dense!r}), "
                     "but every layer after dense_layers is modelled as a mixture of experts: "
                     "their feed-forward weights are counted as experts")
    mtp = config.get("num_nextn_predict_layers")
    if isinstance(mtp, int) and not isinstance(mtp, bool) and mtp > 0:
        found.append(f"{mtp} multi-token-prediction layer(s) (num_nextn_predict_layers) are in the "
                     "checkpoint but not counted (one more decoder layer each, about "
                     f"{100 * mtp / out['layers']:.1f} % more weights; engines load them only for "
                     "speculative decoding)")
    if "kv_lora_rank" not in out and any(config.get(k) is not None for k in INDEXER_KEYS):
        found.append("index_n_heads, index_head_dim and index_topk describe DeepSeek Sparse "
                     "Attention's indexer, which works on latent attention (kv_lora_rank); this "
                     "config has none, so they are not read")
    vision = outer.get("vision_config")
    if isinstance(vision, Mapping):
        found.append("the vision encoder (vision_config) is not counted; only the text decoder is "
                     f"modelled ({vision_size(vision)})")
    notes.extend(f"{path or 'config'}: {note}" for note in found)


__all__ = ["INDEXER_KEYS", "unmodelled_notes", "vision_size"]
