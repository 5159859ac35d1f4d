"""One point on plain floats gives numpy's values to the bit (infermodel.engine.pointwise).

A kept structure evaluated again and again with changed values computes on Python floats
(:mod:`infermodel.engine.pointwise`); a fresh evaluation and a sweep compute with numpy.
The two must agree to the bit, NaN and the sign of zero included, on every shipped
scenario and on the operations where Python and numpy could part.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import infermodel
from conftest import SCENARIOS
from infermodel.engine import kept
from infermodel.engine.evaluation import _plain as plain_numpy
from infermodel.engine.pointwise import compile_point, evaluate_point, maximum2, minimum2

SPECIAL = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from([0.0, -0.0, math.inf, -math.inf, math.nan]))


def _same(a, b) -> bool:
    return type(a) is type(b) and repr(a) == repr(b)


@given(SPECIAL, SPECIAL)
def test_maximum_and_minimum_are_numpys_nan_and_signed_zero_included(a, b):
    assert repr(maximum2(a, b)) == repr(float(np.maximum(a, b)))
    assert repr(minimum2(a, b)) == repr(float(np.minimum(a, b)))


#: Run by default (floor, Piecewise, log, MoE, hybrid state); the rest in CI (CI=true) or
#: with -m slow, each scenario taking a second or two to build.
QUICK = {"case-study-24gb", "inference-lab-fewer-bits", "minimax-m1-1m-context",
         "moe-module10-example", "parallel-70b-allreduce"}


def _skip_unless_exhaustive(request, name: str) -> None:
    import os

    in_ci = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
    if (name not in QUICK and not in_ci
            and "slow" not in (request.config.getoption("markexpr") or "")):
        pytest.skip("every shipped scenario runs in CI (CI=true) or with -m slow")


@pytest.mark.parametrize("path", [
    pytest.param(p, marks=() if p.stem in QUICK else pytest.mark.slow, id=p.stem)
    for p in sorted(SCENARIOS.glob("*.toml"))])
def test_every_shipped_scenario_gives_numpys_values_on_floats(path, autoload_host, request):
    _skip_unless_exhaustive(request, path.stem)
    structure = kept.model_for(infermodel.load_scenario(path)).structure()
    point = compile_point(structure.graph, structure.compiled.outputs)
    base = [float(a) for a in structure.arguments]
    rng = random.Random(path.stem)
    # the scenario itself, then each input scaled, set to zero or made huge
    trials = [base]
    for _ in range(6):
        trial = list(base)
        for i in rng.sample(range(len(base)), k=min(3, len(base))):
            trial[i] = rng.choice([0.0, trial[i] * rng.uniform(0.1, 10), 1e300, -1.0])
        trials.append(trial)
    for arguments in trials:
        with np.errstate(all="ignore"):
            want = [plain_numpy(v) for v in structure.compiled.function(
                *[np.asarray(a, dtype=float) for a in arguments])]
        raw = evaluate_point(point, arguments)
        if raw is None:  # declined: numpy decides this point
            continue
        got = [v if type(v) is float else kept._plain(v) for v in raw]
        moved = [(n, g, w) for n, g, w in zip(structure.compiled.outputs, got, want)
                 if not _same(g, w)]
        assert not moved, (path.name, moved[:5])


def test_a_point_python_cannot_compute_is_left_to_numpy():
    import sympy

    from infermodel.quantity import S

    x = S.pointwise_x
    function = sympy.lambdify([x], [1 / x, x ** sympy.Rational(1, 3), sympy.sqrt(x)])
    assert evaluate_point(function, [0.0]) is None  # ZeroDivisionError
    assert evaluate_point(lambda v: (v ** (1 / 3),), [-8.0]) is None  # complex in Python


def test_a_kept_model_changed_again_and_again_stays_a_fresh_evaluations(autoload_host):
    from infermodel.engine.evaluation import evaluate_afresh

    path = SCENARIOS / "case-study-24gb.toml"
    model = infermodel.Model(path)
    for batch in (1, 7, 18, 64, 3):  # past POINT_AFTER: the float path
        got = model.evaluate(workload__batch=batch)
        want = evaluate_afresh(path, {"workload.batch": batch})
        assert all(_same(got.values[n], want.values[n]) for n in want.values)
    assert next(iter(model._structures.values()))._point is not None


@given(SPECIAL.filter(math.isfinite))
def test_floor_and_ceil_are_numpys_signed_zero_included(x):
    from infermodel.engine import pointwise

    assert repr(pointwise._floor(x)) == repr(float(np.floor(x)))
    assert repr(pointwise._ceil(x)) == repr(float(np.ceil(x)))
