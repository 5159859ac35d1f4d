"""Plots: every kind produces a PNG or an SVG; bad requests are clear errors."""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree

import pytest

import infermodel

pytest.importorskip("matplotlib")

from infermodel.analyses.plots import plot, save
from infermodel.cli import main
from infermodel.errors import InfermodelError

ROOT = Path(__file__).resolve().parents[1]
CASE = ROOT / "scenarios" / "case-study-24gb.toml"
ROOFLINE = ROOT / "scenarios" / "inference-lab-roofline.toml"
PLANNER = ROOT / "scenarios" / "planner-70b-32-users.toml"
PNG = b"\x89PNG\r\n\x1a\n"


def is_svg(path: Path) -> bool:
    root = ElementTree.parse(path).getroot()
    return root.tag == "{http://www.w3.org/2000/svg}svg"


@pytest.mark.parametrize("kind, options", [
    ("roofline", {}),
    ("roofline", {"over": {"workload.batch": "1..256 log2"}}),
    ("operators", {}),
    ("throughput", {}),
    ("throughput", {"over": {"hardware.preset": ["module10-24gb", "module10-48gb"]}}),
    ("memory", {}),
    ("memory", {"x": "context"}),
    ("cost", {}),
    ("sweep", {"over": {"workload.batch": "1..64 log2", "efficiency.mbu": [0.5, 1.0]},
               "y": ["tpot", "fits"]}),
])
def test_png(tmp_path, kind, options):
    target = tmp_path / f"{kind}.png"
    figure = plot(CASE, kind, output=target, **options)
    assert target.read_bytes()[:8] == PNG
    assert figure.axes, "the figure has panels"
    assert list(tmp_path.iterdir()) == [target]  # written atomically, no temporary left


def test_svg_roofline_and_lines(tmp_path):
    target = tmp_path / "roofline.svg"
    figure = plot(ROOFLINE, "roofline", output=target)
    assert is_svg(target)
    labels = [t.get_text() for t in figure.axes[0].texts]
    assert any(t.startswith("decode:") for t in labels)
    assert any(t.startswith("prefill:") for t in labels)
    assert any(t.startswith("ridge 295 FLOP/B") for t in labels)  # H100 SXM: 989/3.35


def test_sweep_plot_has_a_line_per_other_field(tmp_path):
    figure = plot(PLANNER, "sweep", x="hardware.count", y=["cost_per_million_output_tokens"],
                  output=tmp_path / "planner.svg")
    assert is_svg(tmp_path / "planner.svg")
    lines = [line for line in figure.axes[0].get_lines() if line.get_label()[:1] != "_"]
    assert len(lines) == 5 * 4  # presets x weight formats


def test_memory_stack_adds_up(tmp_path):
    figure = plot(CASE, "memory", over={"workload.batch": [1, 18, 32]})
    stack = figure.axes[0].collections
    assert len(stack) == 3  # weights, cache, reserve


@pytest.mark.parametrize("kind, options, message", [
    ("histogram", {}, "no plot named"),
    ("sweep", {}, "nothing to plot"),
    ("sweep", {"over": {"workload.batch": [1, 2]}, "x": "workload.bach"}, "did you mean"),
    ("sweep", {"over": {"workload.batch": [1, 2]}, "y": ["tpto"]}, "did you mean 'tpot'"),
    ("throughput", {"over": {"workload.prompt_tokens": "1..30"}}, "lines"),
    ("cost", {"over": {"hardware.preset": ["module10-48gb"]}}, "needs a price"),
])
def test_errors(kind, options, message):
    with pytest.raises(InfermodelError, match=message):
        plot(CASE, kind, **options)


def test_save_refuses_unknown_extension(tmp_path):
    figure = plot(CASE, "roofline")
    with pytest.raises(InfermodelError, match=r"\.png or \.svg"):
        save(figure, tmp_path / "plot.jpg")


def test_cli_plot(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["plot", str(CASE), "throughput", "--over", "workload.batch=1..32 log2"]) == 0
    assert (tmp_path / "case-study-24gb-throughput.png").read_bytes()[:8] == PNG
    assert main(["plot", str(CASE), "sweep", "--over", "workload.batch=1,2,4", "--y", "tpot",
                 "-o", "sweep.svg"]) == 0
    assert is_svg(tmp_path / "sweep.svg")
    assert main(["plot", str(CASE), "roofline", "-o", "roofline.pdf"]) == 2
    assert ".png or .svg" in capsys.readouterr().err


def test_operators_plot_places_every_operator_on_the_roofline(tmp_path):
    figure = plot(ROOT / "scenarios" / "parallel-70b-allreduce.toml", "operators",
                  output=tmp_path / "ops.svg")
    assert is_svg(tmp_path / "ops.svg")
    ax = figure.axes[0]
    names = [name for t in ax.texts for name in t.get_text().split(", ")]
    # Both phases' operators with FLOPs (the embedding lookup has none), and the link-timed
    # all-reduce in the legend rather than on the card's roofline.
    for name in ("qkv_projection", "attention_score", "ffn", "head", "norms"):
        assert names.count(name) == 2, name
    assert "embedding" not in names and "all_reduce" not in names
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("decode all_reduce:") for t in legend)
    # Each point sits on or under the roof of the four cards.
    r = infermodel.evaluate(ROOT / "scenarios" / "parallel-70b-allreduce.toml")
    for collection in ax.collections:
        for x, y in collection.get_offsets():
            assert y <= min(r["flops_peak"], x * r["bandwidth"]) * (1 + 1e-9)
    with pytest.raises(InfermodelError, match="one scenario"):
        plot(CASE, "operators", over={"workload.batch": [1, 2]})


def test_throughput_and_cost_plots_honour_the_scenarios_sweep(tmp_path):
    # spec-batch-collapse's [sweep] lists ten batches, 1 to 512: the plot draws those
    collapse = ROOT / "scenarios" / "spec-batch-collapse.toml"
    figure = plot(collapse, "throughput")
    xs = list(figure.axes[0].lines[0].get_xdata())
    assert xs == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    assert "spec-batch-collapse" in figure._suptitle.get_text()
    # without the table, the default batches (1..512 in powers of two) are used
    assert len(plot(collapse, "throughput", use_table=False).axes[0].lines[0].get_xdata()) == 10
    # the planner's [sweep] would give 80 lines: the message names the way out
    with pytest.raises(InfermodelError, match="--no-table"):
        plot(ROOT / "scenarios" / "planner-70b-32-users.toml", "cost")
    assert main(["plot", str(ROOT / "scenarios" / "planner-70b-32-users.toml"), "cost",
                 "--no-table", "-o", str(tmp_path / "c.png")]) == 0


def test_memory_plot_default_range_shows_where_the_batch_stops_fitting():
    # Module 10 §11: 18 full-length sequences fit on the 24 GB card, 19 do not
    figure = plot(CASE, "memory")
    xs = figure.axes[0].lines[0].get_xdata()
    assert xs[0] == 1 and xs[-1] >= 2 * 19 and xs[-1] <= 128
    context = plot(CASE, "memory", x="context").axes[0].lines[0].get_xdata()
    assert context[-1] >= 2 * 108_507  # max_context at batch 1 is 108,506 tokens
