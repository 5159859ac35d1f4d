"""The Inference lab's "Fewer bits per weight" exhibit (its fourth), for real: a seeded 2–16–2
ReLU network trained on two spirals, full and quantised (``fewer_bits`` witness,
``plugins/infermodel_builtins/spirals.py``).

The exhibit prints its table's rows — accuracy, loss, weight bytes, SQNR measured, SQNR
predicted, for the full and the quantised network — but its text gives no figures, only
the formulas: bytes = ⌈b·n_weights/8⌉ + 2·n_scales, s = max|w|/(2^(b−1) − 1), SQNR =
10·log10(12·(2^(b−1) − 1)²·σ²/max²), and the exact outlier (incoming weights and bias ×20,
outgoing ÷20). Those are the golden checks; accuracy and loss are this run's own.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import SCENARIOS
from infermodel.cli import main
from infermodel_builtins import spirals, witness_sqnr
from infermodel_builtins.witness_sqnr import OPTIONS_FEWER_BITS, fewer_bits_witness

INT4 = SCENARIOS / "quant-int4.toml"


def _options(**changes):
    options = {key: option.default for key, option in OPTIONS_FEWER_BITS.items()}
    options.update(bits=4, grid=21)
    options.update(changes)
    return options


@pytest.fixture(scope="module")
def exhibit():
    return fewer_bits_witness(None, _options())


def _rows(witness):
    return {row.label: row for row in witness.rows}


def test_the_exhibits_table_rows_are_filled_in_for_full_and_quantised(exhibit):
    rows = _rows(exhibit)
    assert exhibit.passed, exhibit.text()
    for row in ("accuracy", "loss", "weight bytes"):
        assert f"{row}, full" in rows and f"{row}, quantised (int4 per tensor)" in rows
    assert "SQNR measured vs predicted (int4 per tensor)" in rows
    assert rows["accuracy, full"].measured >= 0.95          # the spirals are learnt
    assert rows["loss, full"].measured < rows["loss, quantised (int4 per tensor)"].measured


def test_weight_bytes_follow_the_exhibits_formula_computed_by_hand(exhibit):
    # Inference lab, "Fewer bits per weight": bytes = ⌈b·n_weights/8⌉ + 2·n_scales.
    # 2·16 + 16·2 = 64 weights; full precision is float32 with no scales: 64·4 = 256 bytes.
    # int4 with one scale per matrix: ⌈4·64/8⌉ + 2·2 = 32 + 4 = 36 bytes.
    rows = _rows(exhibit)
    assert rows["weight bytes, full"].measured == 256 == rows["weight bytes, full"].predicted
    assert rows["weight bytes, quantised (int4 per tensor)"].measured == 36
    # One scale per output unit: 16 for the first layer, 2 for the second: 32 + 2·18 = 68.
    per_unit = _rows(fewer_bits_witness(None, _options(granularity="channel")))
    assert per_unit["weight bytes, quantised (int4 per channel)"].measured == 68
    # 3 bits: ⌈3·64/8⌉ = 24, + 4 = 28.
    three = _rows(fewer_bits_witness(None, _options(bits=3)))
    assert three["weight bytes, quantised (int3 per tensor)"].measured == 28


def test_packed_codes_are_two_complement_fields_end_to_end():
    # codes 1 and −1 at 4 bits: 0001 and 1111, one byte 0x1F; three 3-bit codes 3, −3, 0:
    # 011 101 000 → 0111 0100 0(000 0000) → 0x74 0x00.
    assert spirals.pack(np.array([1, -1]), 4) == bytes([0x1F])
    assert spirals.pack(np.array([3, -3, 0]), 3) == bytes([0x74, 0x00])


def test_one_scale_prediction_is_the_exhibits_closed_form():
    # Inference lab: SQNR = 10·log10(12·(2^(b−1) − 1)²·σ²/max²), σ the RMS of the weights.
    # A network whose two matrices share their max gives one effective scale s = max/7.
    net = {"w1": np.array([[0.7, -0.1, 0.2], [0.05, 0.3, -0.4]]), "b1": np.zeros(3),
           "w2": np.array([[0.7], [-0.2], [0.1]]), "b2": np.zeros(1)}
    q = spirals.quantise_network(net, 4, "tensor")
    weights = np.concatenate([net["w1"].ravel(), net["w2"].ravel()])
    sigma2 = float(np.mean(weights ** 2))
    assert q.predicted_db == pytest.approx(10 * math.log10(12 * 7 ** 2 * sigma2 / 0.7 ** 2))
    assert q.weights == 9 and q.scales == 2


def test_the_exact_outlier_keeps_the_function_and_loses_the_small_weights(exhibit):
    # Inference lab: relu(20z) = 20·relu(z), so the full network computes the same
    # function, yet one scale now serves two weights twenty times larger than the rest.
    outlier = fewer_bits_witness(None, _options(outlier=20.0))
    rows = _rows(outlier)
    change = next(r for label, r in rows.items() if label.startswith("network output change"))
    assert change.measured < 1e-12 and change.ok
    plain = _rows(exhibit)
    label = "int4 per tensor"
    assert rows[f"weights rounded to zero ({label})"].measured > 0.4 > \
        plain[f"weights rounded to zero ({label})"].measured
    assert rows[f"accuracy, quantised ({label})"].measured < \
        plain[f"accuracy, quantised ({label})"].measured - 0.2
    # "the number can look healthy": the SQNR stays in double digits of dB.
    assert rows[f"SQNR measured vs predicted ({label})"].measured > 10
    assert rows["accuracy, full"].measured == plain["accuracy, full"].measured


def test_training_is_seeded_and_fast():
    import time

    x, y = spirals.two_spirals(200, 3)
    start = time.process_time()
    first = spirals.train(x, y, 3)
    assert time.process_time() - start < 5.0
    second = spirals.train(x, y, 3)
    assert all(np.array_equal(first[k], second[k]) for k in first)
    other = spirals.train(*spirals.two_spirals(200, 4), 4)
    assert not np.array_equal(first["w1"], other["w1"])


def test_the_decision_maps_are_figures_the_witness_command_draws(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "boundary.png"
    assert main(["witness", str(INT4), "fewer_bits", "--option", "grid=21",
                 "--plot", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["witness", str(INT4), "sqnr", "--plot", str(tmp_path / "x.png")]) == 2
    assert "draws no figure" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


def test_bits_default_to_the_scenarios_integer_format_and_options_are_checked(capsys):
    assert main(["witness", str(INT4), "fewer_bits", "--option", "grid=11",
                 "--format", "json"]) == 0
    import json

    data = json.loads(capsys.readouterr().out)
    assert data["parameters"]["bits"] == 4 and data["figures"] == [
        "full (32-bit weights)", "quantised (int4 per tensor, biases full)"]
    assert main(["witness", str(INT4), "fewer_bits", "--option", "granularity=row"]) == 2
    assert "'tensor' or 'channel'" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("granularity", ["tensor", "channel"])
def test_fewer_bits_passes_over_seeds_and_bits(granularity):
    # The tolerances were set over seeds 0–99 at 3–8 bits; a few of them here.
    for seed in range(8):
        for bits in (3, 4, 8):
            witness = fewer_bits_witness(None, _options(bits=bits, seed=seed, grid=11,
                                                        granularity=granularity))
            assert witness.passed, witness.text()


def test_the_modules_doctests_pass():
    import doctest

    assert doctest.testmod(spirals).failed == 0
    assert doctest.testmod(witness_sqnr).failed == 0
