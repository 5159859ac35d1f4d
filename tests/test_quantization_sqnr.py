"""Predicted SQNR against the seeded numpy witness, and the SQNR quantities of the lever.

Formulas from "Inference lab", "Fewer bits per weight" (and Module 10: Inference and
serving, "Symmetric round-to-nearest").

Tolerance of the witness comparison: 0.25 dB. The uniform-noise model ignores that the
largest weight of each group is represented exactly, which raises the measured SQNR by
10·log10(g/(g − 1)) (0.14 dB for g = 32); sampling noise of 2^16 weights adds a few
hundredths of a dB.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import infermodel
from conftest import SCENARIOS
from infermodel_builtins.sqnr import (
    approximate_sqnr,
    gaussian_max_over_sigma,
    measured_sqnr,
    predicted_sqnr,
    sqnr_correction,
    sqnr_experiment,
)

BASE = (SCENARIOS / "module10-case-base.toml").as_posix()
# Over 200 seeds of 2^16 weights the measured-minus-predicted spread was -0.24..+0.26 dB
# (64 groups of 1,024 share few maxima, so the sample max/σ wanders); 0.35 dB covers it.
TOLERANCE_DB = 0.35


def test_corrections_at_4_and_8_bits():
    # Inference lab, "Fewer bits per weight": dropping the −1 costs 1.2 dB at 4 bits and
    # 0.07 dB at 8.
    assert f"{sqnr_correction(4):.1f}" == "1.2"
    assert f"{sqnr_correction(8):.2f}" == "0.07"


@given(bits=st.integers(2, 32), ratio=st.floats(1.0, 1e4))
def test_approximation_minus_exact_is_the_correction(bits, ratio):
    assert approximate_sqnr(bits, ratio) - predicted_sqnr(bits, ratio) == pytest.approx(
        sqnr_correction(bits), abs=1e-9)


def test_approximation_constants():
    # 6.02·b + 4.77 − 20·log10(max/σ), the Lab's printed constants.
    assert approximate_sqnr(1, 1.0) - approximate_sqnr(0, 1.0) == pytest.approx(6.02, abs=5e-3)
    assert approximate_sqnr(0, 1.0) == pytest.approx(4.77, abs=5e-3)


def test_gaussian_max_over_sigma():
    assert gaussian_max_over_sigma(1) == pytest.approx(1.0, abs=1e-6)   # E[w²] = σ²
    assert gaussian_max_over_sigma(2) == pytest.approx(math.sqrt(1 + 2 / math.pi), abs=1e-6)
    values = [gaussian_max_over_sigma(n) for n in (16, 32, 64, 128, 4096)]
    assert values == sorted(values)


@settings(max_examples=30, deadline=None)
@given(bits=st.integers(3, 8), group=st.sampled_from([32, 64, 128, 256, 1024]),
       seed=st.integers(0, 2**16))
def test_prediction_matches_numpy_quantised_gaussian_weights(bits, group, seed):
    # The witness: 2^16 seeded N(0, 1) weights, symmetric absmax RTN per group of `group`;
    # the prediction uses the Gaussian sqrt(E[max²])/σ for `group` weights, not the sample.
    measured = measured_sqnr(bits, 2**16, seed=seed, group_size=group)
    predicted = predicted_sqnr(bits, gaussian_max_over_sigma(group))
    assert measured == pytest.approx(predicted, abs=TOLERANCE_DB)


@pytest.mark.parametrize("bits", range(3, 9))
def test_prediction_at_the_sample_ratio(bits):
    e = sqnr_experiment(bits, 2**16, seed=7, group_size=128)
    assert e.measured_db == pytest.approx(e.predicted_db, abs=TOLERANCE_DB)
    assert e.approximate_db - e.predicted_db == pytest.approx(sqnr_correction(bits))


def test_one_outlier_costs_the_predicted_decibels():
    # Inference lab: every doubling of max|w| over σ costs 6 dB; one outlier sets the scale
    # for everything sharing it. One weight of 4,096 made 20× larger: at 8 bits the measured
    # loss is the loss the formula predicts from max/σ.
    clean = sqnr_experiment(8, 4096, seed=1)
    spiked = sqnr_experiment(8, 4096, seed=1, outlier=20)
    predicted_loss = clean.predicted_db - spiked.predicted_db
    assert predicted_loss > 20
    assert clean.measured_db - spiked.measured_db == pytest.approx(predicted_loss, abs=0.5)
    assert spiked.measured_db == pytest.approx(spiked.predicted_db, abs=TOLERANCE_DB)


def test_outlier_at_4_bits_rounds_almost_everything_to_zero():
    # Inference lab: "the number can look healthy while almost every small weight rounds to
    # zero". At 4 bits the uniform model no longer holds: nearly all weights become zero,
    # and the measured SQNR (the outlier's power) sits far above the prediction.
    spiked = sqnr_experiment(4, 4096, seed=1, outlier=20)
    assert spiked.zero_fraction > 0.99
    assert spiked.measured_db > spiked.predicted_db + 5


def test_witness_is_seeded_and_checks_its_input():
    assert measured_sqnr(6, 1024, seed=3) == measured_sqnr(6, 1024, seed=3)
    assert measured_sqnr(6, 1024, seed=3) != measured_sqnr(6, 1024, seed=4)
    with pytest.raises(ValueError):
        measured_sqnr(4, 1000, group_size=128)
    with pytest.raises(ValueError):
        measured_sqnr(1, 1024)


# ---------------------------------------------------------------------------------
# The lever's quantities
# ---------------------------------------------------------------------------------


def evaluate(write_scenario, body):
    return infermodel.evaluate(write_scenario(f'extends = "{BASE}"\n[levers.quantization]\n{body}'))


def test_sqnr_quantities_default_to_the_linear_format(write_scenario):
    r = evaluate(write_scenario, 'linear = "int4-g128"\n')
    assert r["sqnr_bits"] == 4 and r["sqnr_levels"] == 7
    assert r["sqnr_max_over_sigma"] == pytest.approx(gaussian_max_over_sigma(128))
    assert r["sqnr_db"] == pytest.approx(predicted_sqnr(4, gaussian_max_over_sigma(128)))
    assert r["sqnr_db_approx"] == pytest.approx(approximate_sqnr(4, gaussian_max_over_sigma(128)))
    assert r["sqnr_db_approx"] - r["sqnr_db"] == pytest.approx(r["sqnr_correction_db"])
    assert f"{r['sqnr_correction_db']:.1f}" == "1.2"
    assert r.unit("sqnr_db") == "dB"
    # ... and agree with the witness for 128-weight groups.
    assert measured_sqnr(4, 2**16, seed=0, group_size=128) == pytest.approx(r["sqnr_db"], abs=TOLERANCE_DB)


def test_sqnr_table_with_a_given_ratio(write_scenario):
    r = evaluate(write_scenario, '[levers.quantization.sqnr]\nbits = 8\nmax_over_sigma = 4.0\n')
    assert r["sqnr_db"] == pytest.approx(10 * math.log10(12 * 127**2 / 16))
    assert f"{r['sqnr_correction_db']:.2f}" == "0.07"
    assert r["sqnr_db_approx"] == pytest.approx(6.0206 * 8 + 4.7712 - 20 * math.log10(4), abs=1e-3)


def test_sqnr_table_with_a_distribution(write_scenario):
    r = evaluate(write_scenario, '[levers.quantization.sqnr]\nbits = 6\ndistribution = "uniform"\n')
    assert r["sqnr_max_over_sigma"] == pytest.approx(math.sqrt(3))
    r = evaluate(write_scenario, '[levers.quantization.sqnr]\nbits = 6\ndistribution = "gaussian"\n'
                                 'weights_per_scale = 4096\n')
    assert r["sqnr_max_over_sigma"] == pytest.approx(gaussian_max_over_sigma(4096))


def test_no_sqnr_for_a_float_format(write_scenario):
    r = evaluate(write_scenario, 'linear = "mxfp4"\n')
    assert "sqnr_db" not in r


@pytest.mark.parametrize("body, message", [
    ('linear = "mxfp4"\n[levers.quantization.sqnr]\ndistribution = "uniform"\n', "needs the bits"),
    ('[levers.quantization.sqnr]\nbits = 1\n', "outside 2–32"),
    ('[levers.quantization.sqnr]\nbits = 4\nmax_over_sigma = 3.0\ndistribution = "gaussian"\n', "not both"),
    ('[levers.quantization.sqnr]\nbits = 4\nmax_over_sigma = 0.5\n', "at least 1"),
])
def test_bad_sqnr_tables(write_scenario, capsys, body, message):
    from infermodel.cli import main

    path = write_scenario(f'extends = "{BASE}"\n[levers.quantization]\n{body}')
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "levers.quantization.sqnr" in err
