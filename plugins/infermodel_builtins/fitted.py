"""What an engine's fitted efficiency preset says beyond its values: the interval a
measurement is expected in, and the domain its rows cover.

Not a plugin: :mod:`.physical_efficiency` calls it. A preset written by
``infermodel validate --ledger LEDGER --fit`` records

* ``[[preset.interval]]`` groups of held-out errors (``infermodel.plugin.intervals``):
  the 80 % interval of log(predicted / measured) for a source the fit has not seen, by
  metric kind, engine, dense or MoE, concurrency band and card generation, each group
  from several independent sources;
* ``[preset.domain]``: the card generations, cards, model kinds, concurrencies and
  tensor degrees of the rows it was fitted on.

A scenario priced with the preset gets, per metric kind, the ratios of measured to
predicted that bound 80 % of a new source's rows (``ttft_interval_low_ratio`` …, chosen by its
batch's band, so a sweep over the batch follows), the expected ranges of ``ttft``,
``tpot`` and ``tokens_per_s_total``, and a warning when it lies outside the domain, with
the size of the doubt.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

import sympy
from sympy import Piecewise

from infermodel.plugin import S, intervals

from .engines import ENGINES, FAMILY_ENGINE

ACCURACY = "infermodel accuracy ledger, held out by source (docs: How accurate is it?)"
#: The quantities whose expected range a scenario gets, with their metric kind and unit.
EXPECTED = (("ttft", "ttft", "time to first token of one request"),
            ("tpot", "itl", "time per output token"),
            ("tokens_per_s_total", "throughput", "output tokens/s of the batch"))


@lru_cache(maxsize=16)
def _read(path: Path, stamp: float) -> dict:
    import tomllib  # only where a fitted preset is read, not on every start

    with path.open("rb") as handle:
        return tomllib.load(handle).get("preset", {})


def preset_record(path: Path) -> dict:
    """The ``[preset]`` table of an efficiency preset file (cached by modification time)."""
    return _read(path, path.stat().st_mtime)


def attributes(scenario, family: str) -> dict[str, str]:
    """The scenario's interval attributes other than the concurrency band."""
    generation = scenario.value("hardware.generation") or "unknown"
    # An engine generation's preset keeps its engine's interval groups (vllm-v0: vllm).
    engine = ENGINES.get(FAMILY_ENGINE.get(family, ""))
    grouped = (engine.generation_of if engine is not None else "") or family
    return {"engine": grouped, "moe": "moe" if scenario.value("model.experts") > 1 else "dense",
            "generation": generation}


def define_intervals(scenario, define, record: dict, family: str, name: str) -> None:
    """The ratio quantities and expected ranges, where the preset records intervals."""
    entries = intervals.entries_of(record.get("interval", []))
    if not entries:
        return
    base = attributes(scenario, family)
    where = f"the {name!r} preset's held-out errors"
    defined = set()
    for kind in intervals.KINDS:
        pieces_low, pieces_high, groups = [], [], []
        for top, label in intervals.BANDS:
            entry = intervals.choose(entries, kind, {**base, "band": label})
            if entry is None:
                break
            condition = S.batch <= top if math.isfinite(top) else True
            pieces_low.append((math.exp(-entry.high), condition))
            pieces_high.append((math.exp(-entry.low), condition))
            groups.append(f"{label}: {entry.describe()}")
        else:
            defined.add(kind)
            low_name, high_name = intervals.RATIO_QUANTITIES[kind]
            for quantity, pieces, end in ((low_name, pieces_low, "lower"), (high_name, pieces_high, "upper")):
                define(quantity, Piecewise(*pieces), unit="1",
                       description=f"measured / predicted at the {end} end of the 80 % interval of "
                                   f"{kind} ({where}; by concurrency band: " + "; ".join(groups) + ")",
                       reference=ACCURACY)
    for quantity, kind, what in EXPECTED:
        if kind not in defined:
            continue
        low_name, high_name = intervals.RATIO_QUANTITIES[kind]
        unit = "token/s" if kind == "throughput" else "s"
        ratios = (S[low_name], S[high_name])
        if quantity == "ttft":
            # One request alone: the single-request band, whatever the batch.
            alone = intervals.choose(entries, kind, {**base, "band": intervals.band(1)})
            assert alone is not None  # every band has a group, or the kind was not defined
            ratios = (sympy.Float(math.exp(-alone.high), 6), sympy.Float(math.exp(-alone.low), 6))
        for suffix, ratio, end in (("low", ratios[0], "exceed"), ("high", ratios[1], "stay below")):
            define(f"{quantity}_expected_{suffix}", S[quantity] * ratio, unit=unit,
                   description=f"{what} a measurement is expected to {end} (80 % of held-out "
                               "rows)", reference=ACCURACY)


def domain_warning(result, record: dict, name: str) -> str | None:
    """A warning when the scenario lies outside the rows the preset was fitted on."""
    domain = record.get("domain")
    if not domain:
        return None
    scenario = result.scenario
    outside, fitted = [], []
    generation = scenario.value("hardware.generation") or "unknown"
    card = scenario.presets.get("hardware") or "a custom card"
    kinds = domain.get("models", [])
    kind = "moe" if scenario.value("model.experts") > 1 else "dense"
    what = {"moe": "a mixture-of-experts model", "dense": "a dense model"}
    if kinds and kind not in kinds:
        outside.append(what[kind])
    fitted.append(" and ".join(("mixture-of-experts" if k == "moe" else k) for k in kinds) or "any")
    generations = domain.get("generations", [])
    if generations and generation not in generations:
        outside.append(f"on {generation} ({card})")
    low, high = domain.get("concurrency", [1, math.inf])
    batch = result["batch"]
    if not low <= batch <= high:
        # The scenario's batch, named as such: a simulation (simulate, plan) judges its
        # own load, which this check cannot see.
        outside.append(f"at workload.batch = {batch:g} concurrent sequence"
                       f"{'s' if batch != 1 else ''}")
    tensor = result.values.get("parallel_tensor_degree", 1)
    t_low, t_high = domain.get("tensor", [1, math.inf])
    if not t_low <= tensor <= t_high:
        outside.append(f"on {tensor:g} card{'s' if tensor != 1 else ''} per replica")
    if not outside:
        return None
    cards = ", ".join(domain.get("cards", [])) or "?"
    doubt = _doubt(result)
    return (f"the {name!r} efficiency preset rests on {fitted[0]} rows on "
            f"{', '.join(generations) or '?'} ({cards}) at {_range(low, high)} concurrent "
            f"requests on {_range(t_low, t_high)} cards; this is {' and '.join(outside)}: outside "
            f"what it was fitted on, so its figures carry more doubt than its interval says{doubt}")


def alone_warning(scenario, record: dict, family: str, name: str) -> str | None:
    """A warning where the interval of one request's first token rests on held-out
    first-token rows of every load, for want of a matching group of one-client rows with
    enough rows from enough independent sources (:data:`infermodel.engine.intervals.MIN_ROWS`,
    :data:`~infermodel.engine.intervals.MIN_SOURCES`), with its width to two figures.
    """
    entries = intervals.entries_of(record.get("interval", []))
    single = intervals.band(1)
    alone = (intervals.choose(entries, "ttft", {**attributes(scenario, family), "band": single})
             if entries else None)
    if alone is None or alone.attributes.get("band") == single:
        return None
    width = float(f"{math.exp(alone.high - alone.low):.2g}")
    shown = f"{width:,.0f}" if width >= 100 else f"{width:g}"
    return (f"ttft's 80 % interval (one request's first token) rests on the {name!r} "
            f"preset's held-out first-token rows at every load — {alone.describe()} — for "
            f"want of a matching group of one-client rows with {intervals.MIN_ROWS} or more "
            f"rows from {intervals.MIN_SOURCES} or more independent sources; it spans "
            f"×{shown}: the spread of those sources' misses at every load (their queues and "
            "their own setups), not of one request's")


def _range(low: float, high: float) -> str:
    return f"{low:g}" if low == high else f"{low:g}–{high:g}"


def _doubt(result) -> str:
    parts = []
    for quantity, kind, _ in EXPECTED:
        low_name, high_name = intervals.RATIO_QUANTITIES[kind]
        if low_name in result.values and high_name in result.values:
            parts.append(f"{quantity} ×{result[low_name]:.2f}–{result[high_name]:.2f}")
    if not parts:
        return ""
    return ("; the interval used (the closest group of held-out rows that matches) puts "
            "measurements at "
            + ", ".join(parts) + " of the prediction")


__all__ = ["alone_warning", "attributes", "define_intervals", "domain_warning", "preset_record"]
