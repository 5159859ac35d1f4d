"""Prediction intervals (``infermodel.engine.intervals``): groups need independent
sources, and the two-level calibration covers a new source's rows as it claims.
"""

from __future__ import annotations

import math
import random

import pytest

from infermodel.engine import intervals
from infermodel.engine.intervals import Entry, Residual, calibrate, choose


def _two_level(seed: int, sources: int, between: float, within: float,
               heavy: bool = False) -> list[Residual]:
    """Errors of ``sources`` sources: a source effect (normal, or Student's t with two
    degrees of freedom when ``heavy``) plus normal scatter within, 3–40 rows a source.
    """
    rng = random.Random(seed)
    out = []
    for s in range(sources):
        if heavy:
            effect = between * rng.gauss(0, 1) / math.sqrt(
                (rng.gauss(0, 1) ** 2 + rng.gauss(0, 1) ** 2) / 2)
        else:
            effect = rng.gauss(0.3, between)
        for _ in range(rng.randint(3, 40)):
            out.append(Residual("itl", {}, f"s{s}", effect + rng.gauss(0, within)))
    return out


def _held_out_coverage(residuals: list[Residual]) -> float:
    """Each source's rows against a calibration that never saw the source."""
    inside = []
    for source in sorted({r.source for r in residuals}):
        entries = calibrate([r for r in residuals if r.source != source]).entries
        for r in residuals:
            if r.source == source:
                entry = choose(entries, r.kind, {})
                inside.append(entry is not None and entry.low <= r.error <= entry.high)
    return sum(inside) / len(inside)


@pytest.mark.parametrize(("seed", "between", "within", "heavy"), [
    (1, 0.6, 0.1, False),   # sources disagree far more than their rows scatter
    (2, 0.1, 0.4, False),   # the scatter within a source dominates
    (3, 0.5, 0.1, True),    # heavy-tailed source effects: the scale widens
])
def test_two_level_intervals_cover_a_new_sources_rows(seed, between, within, heavy):
    residuals = _two_level(seed, 16, between, within, heavy)
    coverage = _held_out_coverage(residuals)
    assert 0.7 <= coverage <= 0.92, coverage
    # One-level percentiles of the pooled rows of a few large sources describe those
    # sources, not the next: where sources disagree, they cover less.
    if between > within:
        few = [r for r in residuals if r.source in ("s0", "s1", "s2", "s3", "s4")]
        assert _held_out_coverage(few) > _one_level_coverage(few)


def _one_level_coverage(residuals: list[Residual]) -> float:
    import numpy as np

    inside = []
    for source in sorted({r.source for r in residuals}):
        rest = [r.error for r in residuals if r.source != source]
        low, high = np.percentile(rest, [10, 90])
        inside += [low <= r.error <= high for r in residuals if r.source == source]
    return sum(inside) / len(inside)


def test_the_scale_is_the_conformal_rank_of_the_left_out_sources():
    residuals = _two_level(4, 12, 0.5, 0.1)
    result = calibrate(residuals)
    assert result.scored == len(residuals)
    (entry,) = result.entries
    assert entry.sources == 12 and entry.n == len(residuals)
    # Unscaled, the interval is the two-level spread; the scale widens it about its centre.
    by_source: dict[str, list[float]] = {}
    for r in residuals:
        by_source.setdefault(r.source, []).append(r.error)
    low, centre, high = intervals.spread(by_source)
    assert entry.low == pytest.approx(centre - result.scale * (centre - low))
    assert entry.high == pytest.approx(centre + result.scale * (high - centre))


def test_a_group_needs_independent_sources_and_old_presets_still_read():
    wide = Entry("ttft", {"engine": "any", "band": "any"}, 50, -1.0, 1.0, sources=2)
    narrow = Entry("ttft", {"engine": "vllm", "band": "1"}, 30, -0.1, 0.1, sources=3)
    enough = Entry("ttft", {"engine": "vllm", "band": "any"}, 40, -0.5, 0.5, sources=4)
    row = {"engine": "vllm", "band": "1"}
    # Three sources are too few for a specific group; the group of every row needs two.
    assert choose([wide, narrow], "ttft", row) is wide
    assert choose([wide, narrow, enough], "ttft", row) is enough
    assert choose([wide, narrow], "ttft", row, min_sources=3) is narrow
    # A preset written before groups counted their sources: chosen by its rows alone.
    old = Entry.from_table({"kind": "ttft", "engine": "vllm", "band": "1", "n": 9,
                            "low": -0.2, "high": 0.3})
    assert old.sources is None and "sources" not in old.to_table()
    assert choose([wide, old], "ttft", row) is old
    again = Entry.from_table(enough.to_table())
    assert again == enough and "from 4 sources" in again.describe()


def test_groups_are_built_for_every_attribute_or_any():
    residuals = [Residual("throughput", {"engine": e, "moe": "dense", "band": "1",
                                         "generation": "nvidia-hopper"}, f"{e}{i}", 0.1 * i)
                 for e in ("vllm", "sglang") for i in range(5) for _ in range(2)]
    entries = calibrate(residuals).entries
    named = {tuple(e.attributes[a] for a in intervals.ATTRIBUTES) for e in entries}
    assert ("vllm", "dense", "1", "nvidia-hopper") in named
    assert ("any", "any", "any", "any") in named
    assert all(e.sources is not None and e.sources >= 4 for e in entries)
