"""Quantisers of given values (``infermodel quantize``) and Module 10's calibrated methods
(SmoothQuant, GPTQ, AWQ), with golden numbers computed by hand from Module 10: Inference
and serving, "Symmetric round-to-nearest", "Offset the grid for a skewed range", "Move
range before rounding: SmoothQuant", "Choose compensating weight errors: GPTQ" and
"Protect salient channels: AWQ".
"""

from __future__ import annotations

import doctest
import json
import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from infermodel.cli import main
from infermodel_builtins import calibrated, quantisers, witness_calibrated
from infermodel_builtins.calibrated import (
    awq_effective_weights,
    awq_rounding_error,
    eliminate,
    gptq_loss_increase,
    gptq_quantise,
    gptq_update,
    hessian,
    rtn_quantise,
    smooth,
    smoothed_maxima,
    smoothing_factors,
)
from infermodel_builtins.quantisers import quantise_values
from infermodel_builtins.witness_calibrated import awq_witness, gptq_witness, smoothquant_witness

#: Module 10, "Offset the grid for a skewed range", states the worked example's results
#: (min −0.48, range 1.39, scale 1.39/15 ≈ 0.0927, zero point 5, codes (6, 0, 5, 15, 4, 8, 1,
#: 6), RMS error about 0.030) but not its eight weights. These eight are chosen inside the
#: intervals those codes imply, to two decimals as the stated ones are.
EIGHT = [0.06, -0.48, 0.04, 0.91, -0.07, 0.32, -0.33, 0.08]


# ---------------------------------------------------------------------------------
# Round to nearest
# ---------------------------------------------------------------------------------


def test_module10_min_max_worked_example():
    q = quantise_values(EIGHT, bits=4, zero_point=True)
    assert q.scale == pytest.approx(1.39 / 15) and f"{q.scale:.4f}" == "0.0927"
    # z = round(0.48 / 0.09267) = round(5.18) = 5
    assert q.zero_point == 5
    assert q.codes == (6, 0, 5, 15, 4, 8, 1, 6)
    assert (q.lowest_code, q.highest_code) == (0, 15)
    # ŵ = s·(c − z): the codes' offsets 1, −5, 0, 10, −1, 3, −4, 1 times 1.39/15.
    s = 1.39 / 15
    assert q.reconstruction == pytest.approx([s, -5 * s, 0, 10 * s, -s, 3 * s, -4 * s, s])
    errors = [s - 0.06, -5 * s + 0.48, -0.04, 10 * s - 0.91, -s + 0.07, 3 * s - 0.32,
              -4 * s + 0.33, s - 0.08]
    assert q.rms_error == pytest.approx(math.sqrt(sum(e * e for e in errors) / 8))
    assert f"{q.rms_error:.3f}" == "0.030"


def test_module10_symmetric_grid_leaves_negative_levels_unused_on_the_skewed_example():
    # 4-bit symmetric: q = 7, s = 0.91/7 = 0.13; the most negative weight −0.48 reaches only
    # code round(−3.69) = −4, so codes −7 … −5 go unused, and the offset grid does better.
    q = quantise_values(EIGHT, bits=4, zero_point=False)
    assert q.scale == pytest.approx(0.13) and q.zero_point == 0
    assert q.codes == (0, -4, 0, 7, -1, 2, -3, 1) and min(q.codes) == -4
    assert q.rms_error > quantise_values(EIGHT, bits=4, zero_point=True).rms_error


def test_the_constant_and_the_all_zero_group_reconstruct_exactly():
    for values in ([0.5] * 3, [-2.0] * 2, [0.0] * 4):
        for zero_point in (False, True):
            q = quantise_values(values, bits=4, zero_point=zero_point)
            assert q.reconstruction == pytest.approx(values) and q.rms_error == pytest.approx(0)


@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=40),
       bits=st.integers(2, 12), zero_point=st.booleans())
@example(values=[5e-324], bits=2, zero_point=True)  # its scale |w| / 3 underflowed to zero
def test_round_to_nearest_errors_stay_within_half_a_step(values, bits, zero_point):
    q = quantise_values(values, bits=bits, zero_point=zero_point)
    assert all(q.lowest_code <= c <= q.highest_code for c in q.codes)
    back = np.array(q.codes) - q.zero_point
    assert np.allclose(q.reconstruction, q.scale * back, rtol=1e-12, atol=0)
    # Unclipped rounding: |w − ŵ| ≤ s/2 (Module 10), up to float64 rounding of the grid.
    slack = q.scale / 2 * (1 + 1e-9) + 1e-12 * max(map(abs, values))
    assert q.max_error <= slack or q.scale * (q.highest_code - q.lowest_code) == 0
    assert q.rms_error <= q.max_error + 1e-300


def test_the_quantisers_module_doctests_pass():
    assert doctest.testmod(quantisers).failed == 0
    assert doctest.testmod(calibrated).failed == 0
    assert doctest.testmod(witness_calibrated).failed == 0


# ---------------------------------------------------------------------------------
# infermodel quantize
# ---------------------------------------------------------------------------------


def test_quantize_json_prints_scale_zero_point_codes_reconstruction_and_rms(capsys):
    argv = ["quantize", "--bits", "4", "--zero-point", *map(str, EIGHT), "--format", "json"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["zero_point"] == 5 and data["codes"] == [6, 0, 5, 15, 4, 8, 1, 6]
    assert data["scale"] == pytest.approx(1.39 / 15) and data["code_range"] == [0, 15]
    assert len(data["reconstruction"]) == len(data["errors"]) == 8
    assert f"{data['rms_error']:.3f}" == "0.030" and data["quantiser"] == "rtn"


def test_quantize_text_report(capsys):
    assert main(["quantize", "--bits", "8", "1", "-0.5", "0.25"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("rtn, symmetric absmax grid, 8 bits: codes -127 … 127")
    assert "zero point  0" in out and "RMS error" in out


@pytest.mark.parametrize("argv, message", [
    (["--bits", "4", "0.5", "x"], "value 2 is 'x'"),
    (["--bits", "4", "nan"], "value 1 is 'nan'"),
    (["--bits", "4", "1e309"], "value 1 is '1e309'"),
    (["--bits", "1", "0.5"], "--bits 1 is outside 2–16 for a symmetric grid"),
    (["--bits", "17", "--zero-point", "0.5"], "--bits 17 is outside 1–16"),
    (["--bits", "1000000000", "0.5"], "--bits 1000000000 is outside 1–32"),
    (["--bits", "4", "--method", "rnt", "0.5"], "did you mean 'rtn'?"),
])
def test_quantize_mistakes_are_one_message_and_exit_2(argv, message, capsys):
    assert main(["quantize", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("error:") == 1 and "Traceback" not in err


# ---------------------------------------------------------------------------------
# SmoothQuant
# ---------------------------------------------------------------------------------


def test_smoothquant_factor_and_maxima_by_hand():
    # Module 10: s = A^α / C^(1−α); at α = 0.5, s = √(A/C) and A/s = C·s = √(A·C).
    # A = 16, C = 4: s = 2, both maxima 8.
    s = smoothing_factors(np.array([16.0]), np.array([4.0]), 0.5)
    assert s.tolist() == [2.0]
    assert [m.tolist() for m in smoothed_maxima(np.array([16.0]), np.array([4.0]), 0.5)] == \
        [[8.0], [8.0]]
    # α = 0.8 moves more of the range into the weights: s = 16^0.8 / 4^0.2 = 2^3.2 / 2^0.4
    # = 2^2.8; A/s = 2^1.2 = 64^0.2 and C·s = 2^4.8 = 64^0.8.
    s = smoothing_factors(np.array([16.0]), np.array([4.0]), 0.8)
    assert s[0] == pytest.approx(2 ** 2.8)
    assert 16 / s[0] == pytest.approx(64 ** 0.2) and 4 * s[0] == pytest.approx(64 ** 0.8)
    with pytest.raises(ValueError):
        smoothing_factors(np.ones(1), np.ones(1), 1.5)


def test_smoothquant_is_an_exact_identity_before_rounding():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((5, 3)), rng.standard_normal((3, 2))
    xs, ws = smooth(x, w, np.array([4.0, 0.5, 2.0]))
    np.testing.assert_allclose(xs @ ws, x @ w, rtol=1e-13, atol=1e-13)


def test_smoothquant_witness_judges_the_identities_and_reports_the_w8a8_gain():
    w = smoothquant_witness(None, {"alpha": 0.5, "bits": 8, "outlier": 50.0, "seed": 0})
    rows = {r.label: r for r in w.rows}
    assert w.passed and len(w.judged) == 3
    assert rows["W8A8 output error, RMS relative, smoothed at α = 0.5"].measured < \
        rows["W8A8 output error, RMS relative, without smoothing"].measured


# ---------------------------------------------------------------------------------
# GPTQ
# ---------------------------------------------------------------------------------


def test_gptq_update_by_hand():
    # Module 10: δ = −e_q·H_F⁻¹[:, q]/[H_F⁻¹]_qq. H = [[2, 1], [1, 2]]: H⁻¹ = [[2, −1], [−1, 2]]/3.
    # w = (0.3, 0.2) on a grid of step 0.5: Q(0.3) = 0.5, e_0 = 0.3 − 0.5 = −0.2, so
    # δ = 0.2·(2/3, −1/3)/(2/3) = (0.2, −0.1): w becomes (0.5, 0.1).
    h_inverse = np.linalg.inv(np.array([[2.0, 1.0], [1.0, 2.0]]))
    delta = gptq_update(h_inverse, 0, -0.2)
    np.testing.assert_allclose(delta, [0.2, -0.1])
    # The objective ½·δᵀHδ rises by ½·e²/[H⁻¹]_qq = ½·0.04/(2/3) = 0.03.
    assert gptq_loss_increase(h_inverse, 0, -0.2) == pytest.approx(0.03)
    assert 0.5 * delta @ np.array([[2.0, 1.0], [1.0, 2.0]]) @ delta == pytest.approx(0.03)
    # Freezing coordinate 0 leaves the inverse of H's remaining block: 1/2.
    assert eliminate(h_inverse, 0)[1, 1] == pytest.approx(0.5)


def test_gptq_beats_round_to_nearest_on_correlated_inputs():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((24, 4)) @ rng.standard_normal((4, 200)) + 0.2 * rng.standard_normal((24, 200))
    w = rng.standard_normal((8, 24)) / 5
    gptq, rtn = gptq_quantise(w, x, 4), rtn_quantise(w, 4)
    assert np.sum(((w - gptq) @ x) ** 2) < 0.5 * np.sum(((w - rtn) @ x) ** 2)
    # Every quantised weight is on its row's grid.
    scale = np.abs(w).max(axis=1, keepdims=True) / 7
    np.testing.assert_allclose(gptq / scale, np.round(gptq / scale), atol=1e-9)
    np.testing.assert_allclose(hessian(x), 2 * x @ x.T)


def test_gptq_witness_passes_and_its_output_error_is_below_rtns():
    w = gptq_witness(None, {"bits": 4, "features": 32, "seed": 0})
    assert w.passed and len(w.judged) == 3
    ratio = next(r for r in w.rows if r.label.startswith("output error")).measured
    assert ratio < 1


# ---------------------------------------------------------------------------------
# AWQ
# ---------------------------------------------------------------------------------


def test_awq_scaled_rounding_error_by_hand():
    # Module 10: with the step Δ held, scaling a channel by s cuts its rounding error from
    # about Δ/2 to Δ/(2s). Δ = 0.4, s = 2: 0.1; RMS Δ/(s·√12) = 0.2/√12.
    largest, root = awq_rounding_error(0.4, 2.0)
    assert largest == pytest.approx(0.1) and root == pytest.approx(0.2 / math.sqrt(12))
    # One group by hand: weights (0.3, 1.4) at 4 bits: Δ = 1.4/7 = 0.2; 0.3 rounds to code
    # 2 (0.4, error 0.1). Scaled by 2, 0.6 rounds to code 3 (0.6): effective 0.3, error 0.
    effective, step = awq_effective_weights(np.array([[0.3, 1.4]]), 2.0, 4)
    assert step[0] == pytest.approx(0.2) and effective[0] == pytest.approx([0.3, 1.4])
    plain, _ = awq_effective_weights(np.array([[0.3, 1.4]]), 1.0, 4)
    assert plain[0, 0] == pytest.approx(0.4)
    # Scaled by 8, 2.4 becomes the group's maximum: Δ grows to 2.4/7.
    _, grown = awq_effective_weights(np.array([[0.3, 1.4]]), 8.0, 4)
    assert grown[0] == pytest.approx(2.4 / 7)
    with pytest.raises(ValueError):
        awq_rounding_error(0.4, 0.0)


def test_awq_witness_passes():
    w = awq_witness(None, {"bits": 4, "group_size": 128, "groups": 1024, "seed": 0})
    assert w.passed and len(w.judged) == 6
