"""What a scenario's model declares beyond a uniform stack of ordinary layers.

:func:`structure` reads the architecture fields of a validated scenario once; every
shape formula and every plugin that routes its quantities through the layer model asks
it rather than reading the fields again.
"""

from __future__ import annotations

import attrs

from infermodel.plugin import S

from .patterns import layer_kind_counts, parse_layer_pattern


@attrs.frozen
class Structure:
    """What the scenario's model declares beyond a uniform stack of ordinary layers."""

    counts: dict | None          # layer kind -> number of layers, or None: every layer "full"
    mla: bool
    extras: bool                 # biases, sinks, output gate, q/k norms
    ffn: bool                    # dense-first, MoE period, shared-expert width or expert biases

    @property
    def attention(self) -> bool:
        """The attention or cache formulas differ from the base ones."""
        return self.counts is not None or self.mla or self.extras

    @property
    def windows(self) -> bool:
        return self.counts is not None and (self.counts["sliding"] or self.counts["chunked"])

    @property
    def linear(self) -> bool:
        return self.counts is not None and self.counts["linear"] > 0


UNIFORM = Structure(counts=None, mla=False, extras=False, ffn=False)


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
    if pattern is not None:
        counts = layer_kind_counts(parse_layer_pattern(pattern), value("model.layers"))
        if counts["full"] == value("model.layers"):
            counts = None
    extras = any(value(f"model.{name}") for name in
                 ("attention_bias", "attention_sinks", "attention_output_gate", "qk_norm"))
    ffn = (value("model.dense_layers") > 0 or value("model.moe_layer_period") > 1
           or value("model.shared_expert_d_ff") is not None or value("model.expert_bias"))
    return Structure(counts=counts, mla=value("model.kv_lora_rank") is not None, extras=extras, ffn=ffn)


def moe_layer_count(scenario):
    """The symbol for the number of mixture-of-experts layers (``layers`` without shapes)."""
    return S.moe_layers if structure(scenario).ffn else S.layers


__all__ = ["UNIFORM", "Structure", "moe_layer_count", "structure"]
