"""What a scenario's model declares beyond a uniform stack of ordinary layers.

:func:`structure` reads the architecture fields of a validated scenario once; every
shape formula and every plugin that routes its quantities through the layer model asks
it rather than reading the fields again. Its :attr:`Structure.rows` are the distinct
layer kinds (mixer and feed-forward block) with their counts: the per-layer model that
the ``infermodel layers`` table prints.
"""

from __future__ import annotations

import math

import attrs

from infermodel.plugin import S

from .patterns import ATTENTION_KINDS, STATE_KINDS, LayerSpec, layer_kind_counts, parse_layers

#: The longest combined period of a layer pattern and a mixture-of-experts period that is
#: counted layer by layer (beyond it the two do not repeat in step within any real model).
MAX_JOINT_PERIOD = 1 << 16


@attrs.frozen
class Row:
    """One distinct layer kind: its mixer, its feed-forward block and how many layers."""

    mixer: str
    ffn: str                     # "dense", "moe", "projection" or "none"
    width: int | None            # a dense block's own width (None: d_ff)
    count: int

    @property
    def key(self) -> str:
        """The row's name in quantity names: ``mamba2_none``, ``none_dense5632``."""
        return f"{self.mixer}_{self.ffn}{self.width or ''}"


@attrs.frozen
class Structure:
    """What the scenario's model declares beyond a uniform stack of ordinary layers."""

    counts: dict | None          # mixer -> number of layers, or None: every layer "full"
    mla: bool
    extras: bool                 # biases, sinks, output gate, q/k norms
    ffn: bool                    # dense-first, MoE period, shared width, expert biases, per-layer blocks
    rows: tuple[Row, ...] = ()   # the distinct layer kinds (empty: one uniform kind)
    explicit_ffn: bool = False   # the pattern names every layer's feed-forward block
    indexer: bool = False        # latent attention with DeepSeek Sparse Attention's indexer

    @property
    def attention(self) -> bool:
        """The attention or cache formulas differ from the base ones."""
        return self.counts is not None or self.mla or self.extras or bool(self.missing_sublayers)

    @property
    def windows(self) -> bool:
        return self.counts is not None and bool(self.counts["sliding"] or self.counts["chunked"])

    @property
    def linear(self) -> bool:
        """Some layers keep a fixed-size state (linear attention or state-space)."""
        return self.counts is not None and any(self.counts.get(k, 0) for k in STATE_KINDS)

    def has(self, mixer: str) -> bool:
        return self.counts is not None and self.counts.get(mixer, 0) > 0

    def ffn_count(self, ffn: str) -> int:
        return sum(row.count for row in self.rows if row.ffn == ffn)

    @property
    def missing_sublayers(self) -> int:
        """Mixers and feed-forward blocks that are ``none`` (no norm, no all-reduce)."""
        mixers = self.counts.get("none", 0) if self.counts is not None else 0
        return mixers + self.ffn_count("none")


UNIFORM = Structure(counts=None, mla=False, extras=False, ffn=False)


def _ffn_by_rule(index: int, value) -> str:
    """The feed-forward block of layer ``index`` under the dense/MoE rule."""
    if value("model.experts") <= 1 or index < value("model.dense_layers"):
        return "dense"
    return "moe" if (index + 1) % value("model.moe_layer_period") == 0 else "dense"


def _rows(specs: tuple[LayerSpec, ...], value) -> tuple[Row, ...]:
    """Count the distinct (mixer, feed-forward) layers over the whole stack."""
    layers = value("model.layers")
    period = 1 if value("model.experts") <= 1 else value("model.moe_layer_period")
    dense = value("model.dense_layers") if value("model.experts") > 1 else 0
    joint = math.lcm(len(specs), period)
    found: dict[tuple, int] = {}

    def add(index: int, times: int) -> None:
        spec = specs[index % len(specs)]
        ffn = spec.ffn or _ffn_by_rule(index, value)
        key = (spec.mixer, ffn, spec.width if ffn == "dense" else None)
        found[key] = found.get(key, 0) + times

    for index in range(min(dense, layers)):
        add(index, 1)
    # After the dense leading layers the two periods repeat in step every `joint` layers.
    for offset in range(min(joint, max(0, layers - dense))):
        index = dense + offset
        add(index, (layers - 1 - index) // joint + 1)
    return tuple(Row(m, f, w, n) for (m, f, w), n in found.items())


def structure(scenario) -> Structure:
    """Read the architecture fields of a validated scenario.

    The base physics calls this too; when the architecture plugin is not loaded (only
    the physics is), the fields do not exist and the model is a uniform stack.
    """
    if not hasattr(scenario.sections["model"], "layer_pattern"):
        return UNIFORM
    value = scenario.value
    pattern = value("model.layer_pattern")
    counts = None
    if pattern is None and value("model.sliding_window") is not None:
        pattern = "sliding"   # every layer windowed (Mistral 7B v0.1's config)
    specs = parse_layers(pattern) if pattern is not None else (LayerSpec("full"),)
    counts = layer_kind_counts(tuple(s.mixer for s in specs), value("model.layers"))
    if counts["full"] == value("model.layers"):
        counts = None
    explicit = all(s.ffn is not None for s in specs)
    extras = any(value(f"model.{name}") for name in
                 ("attention_bias", "attention_sinks", "attention_output_gate", "qk_norm"))
    ffn = (value("model.dense_layers") > 0 or value("model.moe_layer_period") > 1
           or value("model.shared_expert_d_ff") is not None or value("model.expert_bias")
           or value("model.score_correction_bias") or explicit
           or value("model.moe_latent_size") is not None)
    rows: tuple[Row, ...] = ()
    if math.lcm(len(specs), max(1, value("model.moe_layer_period"))) <= MAX_JOINT_PERIOD:
        rows = _rows(specs, value)
    mla = value("model.kv_lora_rank") is not None
    return Structure(counts=counts, mla=mla, extras=extras, ffn=ffn, rows=rows,
                     explicit_ffn=explicit, indexer=mla and value("model.index_heads") is not None)


def moe_layer_count(scenario):
    """The symbol for the number of mixture-of-experts layers (``layers`` without shapes)."""
    return S.moe_layers if structure(scenario).ffn else S.layers


__all__ = ["ATTENTION_KINDS", "MAX_JOINT_PERIOD", "UNIFORM", "Row", "Structure", "moe_layer_count",
           "structure"]
