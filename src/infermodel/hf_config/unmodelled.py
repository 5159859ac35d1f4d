"""What a Hugging Face configuration holds that the scenario's fields do not express, as
notes with their size (each becomes a warning on the result): dense layers among a
mixture of experts' layers, multi-token-prediction layers, DeepSeek Sparse Attention's
indexer and a vision encoder. :mod:`.reader` calls :func:`unmodelled_notes` once the
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


#: Fields of a sparse-attention indexer (DeepSeek-V3.2's ``deepseek_v32``, GLM-5's
#: ``glm_moe_dsa``), and the bytes its cache keeps per token and layer beside its FP8
#: values: one 4-byte scale per 128 of them.
INDEXER_KEYS = ("index_n_heads", "index_head_dim", "index_topk")
INDEXER_SCALE_BYTES, INDEXER_SCALE_GROUP = 4, 128


def sparse_indexer(config: Mapping[str, Any], out: Mapping[str, Any]) -> str:
    """The note on DeepSeek Sparse Attention's indexer, which the fields do not express,
    with its size (``""`` where the config has none).

    Per layer the indexer adds its query projection from the query latent
    (``q_lora_rank · H_i · d_i``), a key projection and per-head weights from the hidden
    state (``d · d_i + d · H_i``) and a cache of one FP8 key of ``d_i`` values per token
    (plus a 4-byte scale per 128); each query scores every cached position
    (``2 · H_i · d_i`` FLOPs a pair) and attends only the ``index_topk`` best
    (DeepSeek-V3.2-Exp technical report, §2 "DeepSeek Sparse Attention": the lightning
    indexer and the top-k selection).
    """
    values = [config.get(key) for key in INDEXER_KEYS]
    counts = [v for v in values if isinstance(v, int) and not isinstance(v, bool) and 0 < v < 10**7]
    if len(counts) < len(INDEXER_KEYS):
        return ""
    heads, width, topk = counts
    layers, d_model = out.get("layers"), out.get("d_model")
    query = out.get("q_lora_rank", d_model)
    if not (isinstance(layers, int) and isinstance(d_model, int) and isinstance(query, int)):
        return ""
    params = layers * (query * heads * width + d_model * width + d_model * heads)
    cache = width + INDEXER_SCALE_BYTES * -(-width // INDEXER_SCALE_GROUP)
    return (f"DeepSeek Sparse Attention's indexer (index_n_heads = {heads}, index_head_dim = "
            f"{width}, index_topk = {topk}) is not modelled: its weights (about "
            f"{params / 1e6:,.0f} M parameters over {layers} layers), its FP8 key cache "
            f"({cache} bytes per token and layer beside the attention cache), its scoring of "
            f"every cached position ({2 * heads * width:,} FLOPs a query-key pair) and its "
            "kernels in every layer (projections, norm, rotary embedding, scores, top-k) are "
            f"left out, and attention is charged over the whole context where each query "
            f"attends at most {topk:,} positions (over-charged beyond {topk:,} tokens)")


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
    indexer = sparse_indexer(config, out)
    if indexer:
        found.append(indexer)
    vision = outer.get("vision_config")
    if isinstance(vision, Mapping):
        found.append("the vision encoder (vision_config) is not counted; only the text decoder is "
                     f"modelled ({vision_size(vision)})")
    notes.extend(f"{path or 'config'}: {note}" for note in found)


__all__ = ["INDEXER_KEYS", "sparse_indexer", "unmodelled_notes", "vision_size"]
