"""The safe formula parser: what it accepts, what it refuses, and that it never runs text."""

from __future__ import annotations

import contextlib
import math
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infermodel.analyses.formula import CONDITION, NUMBER, evaluate_formula, parse_formula
from infermodel.errors import FormulaError

UNITS = {"tpot": "s", "batch": "seq", "fits": "bool", "tokens_per_s_per_user": "token/s",
         "memory_required": "B", "memory_bytes": "B", "decode_compute_bound": "bool"}


def values(**arrays):
    return {k: np.asarray(v, dtype=float) for k, v in arrays.items()}


@pytest.mark.parametrize("text, kind, names", [
    ("tokens_per_s_per_user >= 25", CONDITION, ("tokens_per_s_per_user",)),
    ("fits", CONDITION, ("fits",)),
    ("fits and tpot < 0.05", CONDITION, ("fits", "tpot")),
    ("not fits or batch > 3", CONDITION, ("fits", "batch")),
    ("1 <= batch <= 64", CONDITION, ("batch",)),
    ("memory_required <= 0.9 * memory_bytes", CONDITION, ("memory_required", "memory_bytes")),
    ("Max(tpot, 1) * 2", NUMBER, ("tpot",)),
    ("tpot if fits else 0", NUMBER, ("fits", "tpot")),
    ("batch // 3 + batch % 2 - -batch", NUMBER, ("batch",)),
    ("sqrt(batch) + log(batch, 2) + exp(0) + Abs(-tpot) + floor(tpot) + ceiling(tpot)", NUMBER,
     ("batch", "tpot")),
    ("2 ** 10", NUMBER, ()),
])
def test_accepted(text, kind, names):
    formula = parse_formula(text, UNITS)
    assert formula.kind == kind
    assert formula.names == names


def test_evaluates_vectorised():
    f = parse_formula("fits and tokens_per_s_per_user >= 25", UNITS, kind=CONDITION)
    out = f.evaluate(values(fits=[1, 0, 1], tokens_per_s_per_user=[30, 30, 10]))
    assert out.tolist() == [True, False, False]
    g = parse_formula("1 <= batch <= 4", UNITS)
    assert g.evaluate(values(batch=[0, 1, 4, 5])).tolist() == [False, True, True, False]
    h = parse_formula("batch // 3 + batch % 2", UNITS)
    assert h.evaluate(values(batch=[7.0, 8.0])).tolist() == [3.0, 2.0]
    k = parse_formula("tpot if fits else -1", UNITS)
    assert k.evaluate(values(tpot=[5, 6], fits=[1, 0])).tolist() == [5.0, -1.0]
    constant = parse_formula("1 < 2", UNITS)
    assert evaluate_formula(constant, {}, 3).tolist() == [True, True, True]


@pytest.mark.parametrize("text, message", [
    ("tpot", "is a number, not a condition"),
    ("tokne_per_s >= 1", "did you mean 'tokens_per_s_per_user'"),
    ("fits + 1", "needs numbers"),
    ("tpot and fits", "needs conditions"),
    ("fits == 1", "needs numbers"),
    ("__import__('os').system('true')", "only the functions"),
    ("open('x')", "not an allowed function"),
    ("tpot.real > 0", "attributes"),
    ("[1][0] > 0", "indexing"),
    ("(lambda: 1)() > 0", "only the functions"),
    ("'a' > 'b'", "is not a number"),
    ("True", "is not a number"),
    ("x := 1", "not valid syntax"),
    ("tpot >", "not valid syntax"),
    ("10 ** 65 > 1", "exponent"),
    ("((batch * 10**29) ** 64) ** 64 > 1", "exceeds"),
    ("1 / 0 > 1", "division by zero"),
    ("log(0) > 1", "undefined or infinite"),
    ("sqrt(-1) > 0", "not a real number"),
    ("floor() > 1", "takes 1 argument"),
    ("Max(tpot, key=1) > 0", "keyword"),
    ("Max(*batch) > 0", "* arguments"),
    ("tpot >= 1e400", "not finite"),
    ("batch > " + "9" * 40, "more than 30 digits"),
    ("batch if fits else fits", "both branches"),
    ("", "empty"),
    ("batch > 1, batch < 2", "tuples"),
    ("fits @ fits", "not allowed"),
    ("batch is 1", "not allowed"),
    ("batch in (1, 2)", "not allowed"),
    ("f'{batch}'", "strings are not allowed"),
])
def test_refused(text, message):
    with pytest.raises(FormulaError) as caught:
        parse_formula(text, UNITS, kind=CONDITION)
    assert message in str(caught.value)


def test_limits():
    with pytest.raises(FormulaError, match="characters long"):
        parse_formula("batch + " * 200 + "1 > 0", UNITS)
    with pytest.raises(FormulaError, match="syntax nodes"):
        parse_formula("1+" * 150 + "1 > 0", UNITS)
    with pytest.raises(FormulaError, match="must be a string"):
        parse_formula(42, UNITS)


def test_objective_must_be_a_number():
    with pytest.raises(FormulaError, match="is a condition, not a number"):
        parse_formula("fits", UNITS, kind=NUMBER, what="the objective")


def test_never_executes(tmp_path, monkeypatch):
    """Text that would create a file if it were run as Python does not."""
    monkeypatch.chdir(tmp_path)
    for text in ["open('pwned', 'w').write('x') or 1 > 0",
                 "__import__('pathlib').Path('pwned').touch() > 0",
                 "().__class__.__bases__[0].__subclasses__() > 0"]:
        with pytest.raises(FormulaError):
            parse_formula(text, UNITS)
    assert not (tmp_path / "pwned").exists()


# -- hypothesis: arithmetic identity and fuzzing -------------------------------------

_leaf = st.one_of(st.integers(min_value=0, max_value=10**6).map(str),
                  st.floats(min_value=0.001, max_value=1e6, allow_nan=False).map(repr),
                  st.sampled_from(["batch", "tpot"]))


def _combine(children):
    return st.tuples(children, st.sampled_from(["+", "-", "*"]), children).map(
        lambda t: f"({t[0]} {t[1]} {t[2]})")


expressions = st.recursive(_leaf, _combine, max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(expressions, st.floats(min_value=1, max_value=100), st.floats(min_value=1e-3, max_value=1))
def test_arithmetic_matches_python(text, batch, tpot):
    """The parsed formula computes what the same arithmetic computes in Python."""
    formula = parse_formula(text, UNITS, kind=NUMBER)
    got = float(formula.evaluate({"batch": np.float64(batch), "tpot": np.float64(tpot)}))
    expected = eval(text, {"__builtins__": {}}, {"batch": batch, "tpot": tpot})  # test oracle only
    assert math.isclose(got, expected, rel_tol=1e-9, abs_tol=1e-9 * max(1.0, abs(expected)))


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120))
def test_fuzz_only_formula_errors(text):
    """Any text either parses or raises FormulaError, quickly."""
    start = time.perf_counter()
    with contextlib.suppress(FormulaError):
        parse_formula(text, UNITS)
    assert time.perf_counter() - start < 2.0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["batch", "tpot", "fits", "2", "0", "64", "0.5", "+", "-", "*",
                                 "/", "**", "//", "%", "(", ")", "<", ">=", "==", "and", "or",
                                 "not", "if", "else", "Max(", "floor(", ",", "log("]),
                max_size=30))
def test_fuzz_tokens(tokens):
    text = " ".join(tokens)
    start = time.perf_counter()
    try:
        formula = parse_formula(text, UNITS)
    except FormulaError:
        return
    formula.evaluate({"batch": np.array([1.0, 2.0]), "tpot": np.array([0.1, 0.2]),
                      "fits": np.array([1.0, 0.0])})
    assert time.perf_counter() - start < 2.0
