"""The number-format lever: bits per stored weight (by parameter class) and per
cached key/value element.

``[levers.number_formats]`` gives effective bits, metadata included (int4 with an
fp16 scale per 128 weights is 4.125). It changes ``weight_bytes`` and
``kv_value_bytes`` (hence ``kv_bytes_per_token``) by transformation, so a derivation
shows the base 16-bit definition and this lever's change.

The plugin also describes every named storage format (``infermodel formats``): the
range and resolution of its codes (:mod:`.encodings`) and the scale beside them.
"""

from __future__ import annotations

import attrs
from sympy import Rational

from infermodel.plugin import S, Stage, accepts, hookimpl

from . import LAB, M10
from .encodings import ENCODINGS, RANGE
from .formats import GRANULARITY, NAMED_FORMATS

FORMATS = f"{M10}, §11 'Account for the whole weight artifact' and 'Granularity costs metadata'"
CACHE_FORMAT = f"{M10}, 'Quantise the cache and evaluate the final artifact'"


@accepts("1 to 32")
def _bits(instance, attribute, value):
    if value is not None and not 1 <= value <= 32:
        raise ValueError(f"{attribute.name} = {value!r} is outside 1–32 bits")


@attrs.frozen
class NumberFormats:
    """Effective bits per value, metadata included; unset classes stay 16-bit."""

    weight_bits_linear: float | None = attrs.field(default=None, validator=_bits,
        metadata={"description": (
            "bits per block-linear weight, scales and metadata included (e.g. 4.125 "
            "for int4 with a 16-bit scale per 128)")})
    weight_bits_embedding: float | None = attrs.field(default=None, validator=_bits,
        metadata={"description": "bits per embedding and output-head weight"})
    weight_bits_norm: float | None = attrs.field(default=None, validator=_bits,
        metadata={"description": "bits per normalisation weight"})
    kv_bits: float | None = attrs.field(default=None, validator=_bits,
        metadata={"description": "bits per cached key or value element, metadata included"})


@hookimpl
def infermodel_register_levers(register):
    register("number_formats", NumberFormats,
             description="bits per stored weight (block linears, embeddings and head, norms) "
                         "and per cached key/value element",
             reference=FORMATS)


@hookimpl
def infermodel_register_number_formats(register):
    for name, fmt in NAMED_FORMATS.items():
        assert fmt.element is not None  # every named format says what its codes are
        scaled = fmt.granularity != "none"
        register(name, description=fmt.description, bits=fmt.bits,
                 element=ENCODINGS[fmt.element], metadata_bits=fmt.metadata_bits,
                 granularity=fmt.granularity,
                 values_per_scale=fmt.group_size if fmt.granularity == "group" else None,
                 scale=ENCODINGS[fmt.scale_format] if scaled and fmt.scale_format else None,
                 reference=f"{RANGE}; {GRANULARITY}")


@hookimpl
def infermodel_validate_scenario(scenario, report):
    lever = scenario.lever("number_formats")
    if lever is None or scenario.value("model.weight_bytes") is None:
        return
    if any(b is not None for b in (lever.weight_bits_linear, lever.weight_bits_embedding,
                                   lever.weight_bits_norm)):
        report("model.weight_bytes",
               "model.weight_bytes fixes the artifact size, so the weight bits of "
               "[levers.number_formats] would be ignored",
               suggestion="remove model.weight_bytes or the weight_bits_* keys")


@hookimpl
def infermodel_define_quantities(scenario, define):
    lever = scenario.lever("number_formats")
    if lever is None:
        return
    classes = [("weight_bits_linear", lever.weight_bits_linear, "block linear weights"),
               ("weight_bits_embedding", lever.weight_bits_embedding, "embedding and head weights"),
               ("weight_bits_norm", lever.weight_bits_norm, "normalisation weights")]
    if scenario.value("model.weight_bytes") is None:
        for name, bits, what in classes:
            define(name, 16.0 if bits is None else bits, unit="bit",
                   description=f"effective bits per stored value of the {what}", reference=FORMATS)
    if lever.kv_bits is not None:
        define("kv_bits", lever.kv_bits, unit="bit",
               description="effective bits per cached key or value element", reference=CACHE_FORMAT)


@hookimpl
def infermodel_transform_quantities(scenario, transform):
    lever = scenario.lever("number_formats")
    if lever is None:
        return
    if scenario.value("model.weight_bytes") is None:
        transform.replace(
            "weight_bytes",
            (S.params_block_linear * S.weight_bits_linear
             + (S.params_embedding + S.params_head) * S.weight_bits_embedding
             + S.params_norm * S.weight_bits_norm) / 8,
            reason="each parameter class stored at its own number of bits",
            reference=FORMATS, order=Stage.NUMBER_FORMATS)
        transform.replace("embedding_table_bytes", S.params_embedding * S.weight_bits_embedding / 8,
                          reason="the input table stored at weight_bits_embedding",
                          reference=FORMATS, order=Stage.NUMBER_FORMATS)
    if lever.kv_bits is not None:
        transform.replace("kv_value_bytes", S.kv_bits * Rational(1, 8),
                          reason="cache elements stored at kv_bits", reference=CACHE_FORMAT,
                          order=Stage.NUMBER_FORMATS)


__all__ = ["LAB", "NumberFormats"]
