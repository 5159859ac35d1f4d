"""`infermodel calibrate`: Module 10 Lab 1's measurement and the preset it writes.

Timings are noisy on shared machines, so nothing here asserts a time; the arithmetic
columns and the preset's form are exact.
"""

from __future__ import annotations

import json
import tomllib

import pytest

from infermodel.accuracy.calibration import (
    LAB1_BATCHES,
    LAB1_WIDTH,
    Calibration,
    Product,
    intensity,
    measure,
    preset_toml,
)
from infermodel.cli import main

#: Module 10: Inference and serving, Lab 1 "Measure the CPU, rather than guessing from its
#: clock speed": the FLOP/byte column printed for d = 8192 and B = 1 … 512.
MODULE10_LAB1_FLOP_PER_BYTE = (0.50, 1.00, 2.00, 3.99, 7.97, 15.88, 31.51, 62.06, 120.47, 227.56)


def test_flop_per_byte_column_equals_module10_lab1():
    assert LAB1_WIDTH == 8192 and LAB1_BATCHES == (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
    column = tuple(float(f"{intensity(LAB1_WIDTH, b):.2f}") for b in LAB1_BATCHES)
    assert column == MODULE10_LAB1_FLOP_PER_BYTE
    # By hand for B = 512: 2·8192²·512 / (4·(8192² + 2·8192·512)).
    assert intensity(8192, 512) == 2 * 8192**2 * 512 / (4 * (8192**2 + 2 * 8192 * 512))


def test_machine_model_follows_lab1_definitions():
    """Bandwidth from the B = 1 row, peak the largest rate, ridge their ratio (Lab 1's
    recorded run: 48.24 GB/s, 621.6 GFLOP/s, ridge 12.88 FLOP/byte).
    """
    d = 8192
    # Times that reproduce Lab 1's recorded B = 1 and B = 512 rows.
    one = 4 * (d * d + 2 * d) / 48.24e9
    big = 2 * d * d * 512 / 621.6e9
    mid = 2 * d * d * 256 / 596.3e9
    result = Calibration((Product(d, 1, one), Product(d, 256, mid), Product(d, 512, big)),
                         (Product(256, 1, 1e-5), Product(512, 1, 2e-5)), 5, False, None, "now")
    assert result.bandwidth == pytest.approx(48.24e9)
    assert result.flops == pytest.approx(621.6e9)
    assert result.ridge == pytest.approx(12.88, abs=0.01)  # printed from unrounded rates


def test_t0_is_the_intercept_of_time_against_bytes():
    bytes_ = [4 * (w * w + 2 * w) for w in (128, 256, 512)]
    products = tuple(Product(w, 1, 3e-6 + b / 20e9) for w, b in zip((128, 256, 512), bytes_))
    result = Calibration((Product(512, 1, 1e-4),), products, 5, True, None, "now")
    assert result.t0 == pytest.approx(3e-6, rel=1e-6)


def test_calibrate_quick_writes_a_preset_scenarios_load(tmp_path, write_scenario, capsys):
    from infermodel.engine.evaluation import evaluate_afresh as evaluate

    preset = tmp_path / "this-machine.toml"
    plot = tmp_path / "roofline.png"
    assert main(["calibrate", "--quick", "--output", str(preset), "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    assert "FLOP/byte" in out and "ridge" in out and "t0 (per call)" in out
    assert plot.stat().st_size > 0
    data = tomllib.loads(preset.read_text())
    assert data["preset"]["source"].startswith("infermodel calibrate --quick")
    scenario = write_scenario("""
[model]
preset = "smollm2-135m"
[hardware]
preset = "this-machine.toml"
[workload]
prompt_tokens = 64
output_tokens = 16
[efficiency]
model = "fixed"   # achieved rates, as the preset's header says
""", name="calibrated.toml")
    scenario.with_name("this-machine.toml").write_text(preset.read_text())
    result = evaluate(scenario)
    assert result["card_bandwidth"] > 0 and result["card_flops"] > 0
    assert result["ridge_intensity"] == pytest.approx(data["preset"]["ridge"], rel=1e-3)


def test_calibrate_json_and_bad_targets(tmp_path, capsys):
    assert main(["calibrate", "--quick", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [p["batch"] for p in data["products"]] == [1, 2, 8, 32, 128, 512]
    assert all(p["flop_per_byte"] == intensity(2048, p["batch"]) for p in data["products"])
    assert main(["calibrate", "--quick", "--output", str(tmp_path / "preset.txt")]) == 2
    assert "ending in .toml" in capsys.readouterr().err
    assert main(["calibrate", "--quick", "--plot", str(tmp_path / "plot.pdf")]) == 2


def test_measure_quick_progress_counts_every_product():
    class Bar:
        count = 0

        def update(self, n=1):
            self.count += n

    bar = Bar()
    # Shapes given win over quick's.
    result = measure(width=256, batches=(1, 4), repeats=1, quick=True, progress=bar)
    assert [(p.width, p.batch) for p in result.products] == [(256, 1), (256, 4)]
    assert bar.count == len(result.products) + len(result.t0_products)
    assert "[hardware]" in preset_toml(result, "x")
