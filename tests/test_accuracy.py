"""The accuracy ledger, the closed-loop model, `validate --ledger` and the efficiency presets.

Figures checked by hand here come from the ledger's own sources (each row cites its URL)
or from the model's definitions; nothing is copied from our own output.
"""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import ROOT
from infermodel.accuracy.closed_loop import closed_loop
from infermodel.accuracy.ledger import (
    COLUMNS,
    DEFAULT_LEDGER,
    LENGTHS,
    LOADS,
    METRICS,
    OPTIONAL_COLUMNS,
    STATISTICS,
    read_ledger,
)
from infermodel.cli import main
from infermodel.errors import InfermodelError

EFFICIENCY_PRESETS = ROOT / "plugins" / "infermodel_builtins" / "presets" / "efficiency"
HEADER = ",".join(COLUMNS)


# ---------------------------------------------------------------------------------
# The shipped ledger
# ---------------------------------------------------------------------------------


def test_shipped_ledger_has_the_issue_columns_and_enough_sourced_rows():
    with DEFAULT_LEDGER.open(newline="") as handle:
        header = next(csv.reader(handle))
    assert tuple(header) == COLUMNS + tuple(OPTIONAL_COLUMNS)
    rows = read_ledger(DEFAULT_LEDGER)
    assert len(rows) >= 40
    # Every row names its independent source (a publisher or benchmark suite), and a
    # group is one publisher: no two groups cite the same page.
    assert all(r.source_group for r in rows)
    pages: dict[str, set] = {}
    for r in rows:
        pages.setdefault(r.source, set()).add(r.group)
    assert all(len(groups) == 1 for groups in pages.values())
    assert len({r.group for r in rows}) >= 9
    # The issue's bar: 300 rows, mixtures of experts, every engine family at low and
    # high concurrency, first-token times under load, AMD cards.
    assert len(rows) >= 300
    moe_models = {"deepseek-r1", "gpt-oss-120b", "gpt-oss-20b", "qwen3-235b-a22b",
                  "llama-4-scout", "llama-4-maverick"}
    assert len({r.model for r in rows} & moe_models) >= 5
    for family in ("vllm", "sglang", "trtllm"):
        mine = [r for r in rows if r.family == family]
        assert min(r.concurrency for r in mine) <= 4 and max(r.concurrency for r in mine) >= 128
        assert any(r.metric == "ttft_ms" and r.concurrency >= 64 for r in mine), family
    assert {"mi300x"} <= {r.hardware for r in rows}
    assert all(urlparse(r.source).scheme == "https" for r in rows)
    assert {r.metric for r in rows} <= set(METRICS)
    assert {r.statistic for r in rows} <= set(STATISTICS)
    assert all(r.hf_config is None or r.hf_config.is_file() for r in rows)


def test_ledger_rows_copy_their_sources_figures():
    """Spot checks against the published tables (values as printed there)."""
    rows = {r.id: r for r in read_ledger(DEFAULT_LEDGER)}
    # NVIDIA NIM benchmarking guide, Llama-3.3-70b-instruct, 1.8.0, 2 x H100, fp8 TP2, 5000/500.
    nim = rows["nim180-h100-llama-3.3-70b-tp2-5000-500-c1-ttft"]
    assert (nim.value, nim.gpus, nim.isl, nim.osl, nim.concurrency) == (406.77, 2, 5000, 500, 1)
    assert rows["nim180-h100-llama-3.3-70b-tp2-5000-500-c250-itl"].value == 93.2
    # TensorRT-LLM performance.md (release 0.5.0): LLaMA 7B, H100 FP8, batch 64, 128/128.
    assert rows["trtllm05-h100-llama-2-7b-tp1-b64-128-128"].value == 9193
    # AMD's MI300X vLLM guide prints 17.236 s for Llama 3.1 70B, batch 1, 128 in, 2048 out:
    # the ledger keeps the system's output rate over that run, 1 x 2048 / 17.236.
    amd = rows["rocm-vllm-mi300x-llama-3.1-70b-tp8-b1-128-2048"]
    assert amd.value == pytest.approx(2048 / 17.236, abs=0.005)


# ---------------------------------------------------------------------------------
# Reading ledgers: one clear message per problem
# ---------------------------------------------------------------------------------


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ledger.csv"
    path.write_text(text, encoding="utf-8")
    return path


GOOD = ("r1,https://example.org/t,vllm 0.6,h100-sxm,1,llama-3.1-8b,,,,1,1,1024,128,1,"
        "ttft_ms,mean,50")


def test_ledger_header_must_be_exact(tmp_path):
    path = _write(tmp_path, HEADER.replace("isl", "input") + "\n" + GOOD + "\n")
    with pytest.raises(InfermodelError) as info:
        read_ledger(path)
    assert "missing isl" in str(info.value) and "input" in str(info.value)


def test_ledger_problems_are_all_reported_with_lines(tmp_path):
    bad = GOOD.replace("ttft_ms", "ttft").replace(",mean,", ",average,").replace(",50", ",-3")
    path = _write(tmp_path, "\n".join([HEADER, GOOD, bad, GOOD]) + "\n")
    with pytest.raises(InfermodelError) as info:
        read_ledger(path)
    text = str(info.value)
    assert ":3: metric" in text and "did you mean 'ttft_ms'" in text
    assert ":3: statistic" in text and ":3: value" in text
    assert ":4: id" in text and "used again (first on line 2)" in text


def test_validate_ledger_mistake_exits_2(tmp_path, capsys):
    path = _write(tmp_path, "not,a,ledger\n")
    assert main(["validate", "--ledger", str(path)]) == 2
    assert "header" in capsys.readouterr().err


OPTIONAL = ",".join(OPTIONAL_COLUMNS)


def test_optional_columns_take_their_defaults_and_may_come_in_any_order(tmp_path):
    two_cards = (GOOD.replace("r1,", "r2,").replace("h100-sxm,1,", "h100-sxm,2,")
                 .replace(",1,1,1024", ",2,1,1024"))
    lines = [HEADER + ",attention_dp,load,source_group", GOOD + ",,,",
             two_cards + ",2,offline,vendor-x"]
    first, second = read_ledger(_write(tmp_path, "\n".join(lines) + "\n"))
    assert (first.load, first.attention_dp, first.requests, first.request_rate, first.lengths) == \
        ("closed", 1, None, None, "fixed")
    assert first.group == "https://example.org/t"  # no source_group: the source itself
    assert (second.group, second.load, second.attention_dp) == ("vendor-x", "offline", 2)
    assert second.table != first.table


@pytest.mark.parametrize("extra, cells, message", [
    (",load", ",closd", "did you mean 'closed'"),
    (",load,request_rate,requests", ",poisson,,100", "needs its request_rate and its requests"),
    (",request_rate", ",2.5", "only with load = poisson"),
    (",load,requests", ",offline,7", "requests (7) differ from its concurrency (1)"),
    (",load,request_rate,requests", ",poisson,-1,10", "request_rate = '-1'"),
    (",requests", ",0", "requests = '0'"),
    (",attention_dp", ",2", "does not divide gpus = 1"),
    (",lengths", ",varied", "lengths = 'varied'"),
    (",load,request_rate,requests", ",poisson,2,1", ""),  # concurrency 1 of 1 request: fine
])
def test_optional_columns_are_checked_against_each_other(tmp_path, extra, cells, message):
    path = _write(tmp_path, HEADER + extra + "\n" + GOOD + cells + "\n")
    if not message:
        (row,) = read_ledger(path)
        assert (row.load, row.request_rate, row.requests) == ("poisson", 2.0, 1)
        return
    with pytest.raises(InfermodelError) as info:
        read_ledger(path)
    assert message in str(info.value) and ":2:" in str(info.value)


def test_unknown_or_repeated_optional_columns_are_refused(tmp_path):
    for extra, message in ((",source_grup", "did you mean 'source_group'"),
                           (",load,load", "repeated load")):
        path = _write(tmp_path, HEADER + extra + "\n" + GOOD + ",x" * extra.count(",") + "\n")
        with pytest.raises(InfermodelError) as info:
            read_ledger(path)
        assert message in str(info.value)


def test_every_load_and_length_kind_is_documented_with_its_meaning():
    assert set(LOADS) == {"closed", "offline", "poisson"}
    assert set(LENGTHS) == {"fixed", "mean"}
    assert all(len(text) > 40 for text in (*LOADS.values(), *LENGTHS.values()))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=400),
       st.booleans())
def test_fuzz_read_ledger_only_raises_user_errors(tmp_path, text, optional):
    path = _write(tmp_path, HEADER + ("," + OPTIONAL if optional else "") + "\n" + text)
    try:
        rows = read_ledger(path)
    except InfermodelError:
        return
    assert all(r.value > 0 and r.load in LOADS and r.attention_dp >= 1 for r in rows)


# ---------------------------------------------------------------------------------
# The closed-loop steady state
# ---------------------------------------------------------------------------------


def test_closed_loop_at_one_client_is_the_roofline():
    state = closed_loop(0.25, 0.012, 1, 50, 300)
    assert float(state.ttft) == 0.25 and float(state.itl) == 0.012
    assert float(state.output_tokens_per_s) == pytest.approx(300 / (0.25 + 299 * 0.012), rel=1e-12)


@settings(max_examples=80, deadline=None)
@given(tp=st.floats(1e-4, 2.0), td=st.floats(1e-4, 0.2), clients=st.integers(1, 400),
       capacity=st.integers(1, 400), osl=st.integers(2, 4000))
def test_closed_loop_identities(tp, td, clients, capacity, osl):
    s = closed_loop(tp, td, clients, capacity, osl)
    running = min(clients, capacity)
    # Little's law: C clients each wait e2e per request, so requests finish at C / e2e,
    # and a running request's own time is its first token plus (osl - 1) gaps.
    queued = float(s.e2e) * (clients - running) / clients
    e2e_running = float(s.e2e) - queued
    assert float(s.output_tokens_per_s) == pytest.approx(clients * osl / float(s.e2e), rel=1e-9)
    assert e2e_running == pytest.approx(float(s.ttft) - queued + (osl - 1) * float(s.itl), rel=1e-9)
    assert float(s.itl) >= td * (1 - 1e-12) and float(s.ttft) >= tp * (1 - 1e-12)
    # Clients beyond capacity only wait: throughput is the capacity's.
    if clients > capacity:
        at_capacity = closed_loop(tp, td, capacity, capacity, osl)
        assert float(s.output_tokens_per_s) == pytest.approx(float(at_capacity.output_tokens_per_s))
        assert float(s.ttft) > float(at_capacity.ttft)


def _compiled(engine: str, prompt: int, output: int, extra: dict | None = None):
    from infermodel.engine.evaluation import compile_graph
    from infermodel.engine.graph import build_graph
    from infermodel.host import get_host
    from infermodel.scenario import resolve

    host = get_host()
    data = {"model": {"preset": "llama-3-8b"}, "hardware": {"preset": "h100-sxm"},
            "workload": {"batch": 1, "prompt_tokens": prompt, "output_tokens": output},
            "efficiency": {"engine": engine, **(extra or {})}}
    graph = build_graph(resolve(data, {}, None, host=host), host=host)
    compiled = compile_graph(graph)
    inputs = {n: graph.quantities[n].value for n in compiled.inputs}
    out = {k: float(np.asarray(v).ravel()[0]) for k, v in compiled(inputs).items()}
    return compiled, inputs, out


@pytest.mark.parametrize("engine, extra, paged", [
    ("vllm", None, True), ("sglang", None, True), ("tensorrt-llm", None, False),
    ("vllm", {"admission": "reserve"}, False), ("tensorrt-llm", {"admission": "paged"}, True)])
def test_a_closed_loop_runs_what_the_engines_admission_lets_in(engine, extra, paged):
    from infermodel.accuracy.predictions import running_capacity

    # Llama-3-8B on an H100, 1,024-token prompts and 8,192-token outputs. An engine that
    # pages the cache in on demand (vLLM, SGLang) holds, in a steady closed loop, each
    # running sequence at its prompt and half its output on average: 1,024 + 8,191/2
    # positions of kv_bytes_per_token each. TensorRT-LLM's default GUARANTEED_NO_EVICT
    # policy admits a request only when its prompt and whole output fit: max_sequences.
    compiled, inputs, out = _compiled(engine, 1024, 8192, extra)
    assert out["engine_admits_on_demand"] == (1.0 if paged else 0.0)
    full = out["max_sequences"]
    assert full == math.floor(out["kv_budget_bytes"] / (out["kv_bytes_per_token"] * 9216))
    got = running_capacity(compiled, inputs, out, full)
    if paged:
        assert got == math.floor(out["kv_budget_bytes"] / (out["kv_bytes_per_token"] * (1024 + 8191 / 2)))
        assert got > 1.7 * full
    else:
        assert got == full


@settings(max_examples=60, deadline=None)
@given(tp=st.floats(1e-4, 2.0), td=st.floats(1e-4, 0.2), clients=st.integers(1, 400),
       capacity=st.integers(1, 400), osl=st.integers(2, 4000), path=st.floats(0.0, 0.5))
def test_a_requests_way_through_the_server_lengthens_every_cycle(tp, td, clients, capacity,
                                                                  osl, path):
    # A request's time outside the engine's iterations adds to its first token and its
    # client's cycle, and holds no slot: below the cache's capacity every first token is
    # that much later; above it the queue for a slot absorbs it first, and a full engine
    # serves as many requests as before. Little's law holds over the client's cycle.
    base = closed_loop(tp, td, clients, capacity, osl)
    s = closed_loop(tp, td, clients, capacity, osl, request_time=path)
    running = min(clients, capacity)
    engine = float(base.e2e) * running / clients       # a running request's own time
    queued_base = float(base.e2e) - engine
    queued = max(clients * engine / running - engine - path, 0.0)
    assert float(s.itl) == float(base.itl)
    assert float(s.ttft) == pytest.approx(float(base.ttft) - queued_base + path + queued,
                                          rel=1e-9, abs=1e-12)
    assert float(s.e2e) == pytest.approx(engine + path + queued, rel=1e-9)
    assert float(s.output_tokens_per_s) == pytest.approx(clients * osl / float(s.e2e), rel=1e-9)
    assert float(s.output_tokens_per_s) <= float(base.output_tokens_per_s) * (1 + 1e-12)
    if clients <= capacity:
        assert float(s.ttft) == pytest.approx(float(base.ttft) + path, rel=1e-12)
    if queued > 0:
        assert float(s.output_tokens_per_s) == pytest.approx(float(base.output_tokens_per_s),
                                                             rel=1e-9)
    if clients == 1:
        assert float(s.output_tokens_per_s) == pytest.approx(osl / (tp + path + (osl - 1) * td),
                                                             rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(tp=st.floats(1e-4, 2.0), td=st.floats(1e-4, 0.2), clients=st.integers(1, 400),
       capacity=st.integers(1, 400), osl=st.integers(2, 4000), held=st.floats(0.0, 0.5))
def test_a_prompt_held_in_its_slot_lengthens_the_engine_time(tp, td, clients, capacity, osl,
                                                             held):
    # A prompt the scheduler holds in its slot before its prefill (delayed batching) is
    # part of the running request's time: the fixed point E = TTFT + (osl − 1)·ITL still
    # holds with TTFT = T_p + T_d/2 + held + ρ·T_p / (2(1 − ρ)), ITL = T_d / (1 − ρ) and
    # ρ = (B − 1)·T_p / E; the longer E dilutes the prefills' stall, so ITL does not grow,
    # and a full engine serves fewer requests. Alone, the first token is simply later.
    base = closed_loop(tp, td, clients, capacity, osl)
    s = closed_loop(tp, td, clients, capacity, osl, held=held)
    running = min(clients, capacity)
    engine = float(s.e2e) * running / clients      # the running request's own time
    share = min((running - 1) * tp / engine, 0.95)
    wait = td / 2 if running > 1 else 0.0
    if share < 0.95:
        assert float(s.itl) == pytest.approx(td / (1 - share), rel=1e-9)
        assert float(s.ttft) - (float(s.e2e) - engine) == pytest.approx(
            tp + wait + held + share * tp / (2 * (1 - share)), rel=1e-9)
    assert float(s.itl) <= float(base.itl) * (1 + 1e-12)
    assert float(s.ttft) >= float(base.ttft) * (1 - 1e-12)
    assert float(s.output_tokens_per_s) <= float(base.output_tokens_per_s) * (1 + 1e-12)
    if running == 1:
        assert float(s.ttft) == pytest.approx(float(base.ttft) + held * clients, rel=1e-9)


# ---------------------------------------------------------------------------------
# validate --ledger
# ---------------------------------------------------------------------------------


def test_validate_json_shape_and_summary_by_hand(shipped_calibrated):
    data = shipped_calibrated[0]
    assert {"points", "summary"} <= set(data)
    rows = {r.id: r for r in read_ledger(DEFAULT_LEDGER)}
    for point in data["points"]:
        assert {"id", "metric", "measured", "predicted", "error"} <= set(point)
        assert point["measured"] == rows[point["id"]].value
        assert point["error"] == pytest.approx((point["predicted"] - point["measured"])
                                               / point["measured"])
        low, high = point["interval"]
        assert low <= high
    for metric, summary in data["summary"].items():
        errors = [abs(p["error"]) for p in data["points"] if p["metric"] == metric]
        assert summary["n"] == len(errors)
        assert summary["median_abs_error"] == pytest.approx(np.median(errors), abs=1e-6)
        assert summary["p90_abs_error"] == pytest.approx(np.percentile(errors, 90), abs=1e-6)
    assert len(data["points"]) + len(data["unpredictable"]) == len(rows)


def test_unpredictable_rows_are_listed_with_reasons(tmp_path, capsys):
    lines = [HEADER, GOOD,
             GOOD.replace("r1,", "r2,").replace("h100-sxm", "b999"),
             GOOD.replace("r1,", "r3,").replace("vllm 0.6", "tgi 2.0"),
             GOOD.replace("r1,", "r4,").replace(",1,1,1024", ",2,1,1024").replace("h100-sxm,1", "h100-sxm,4")]
    path = _write(tmp_path, "\n".join(lines) + "\n")
    assert main(["validate", "--ledger", str(path), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [p["id"] for p in data["points"]] == ["r1"]
    reasons = {u["id"]: u["reason"] for u in data["unpredictable"]}
    assert "b999" in reasons["r2"]
    assert "tgi" in reasons["r3"]
    assert "tensor = 2 with gpus = 4" in reasons["r4"]
    assert main(["validate", "--ledger", str(path)]) == 0
    text = capsys.readouterr().out
    assert "3 rows could not be predicted" in text and "r2 (ttft_ms)" in text


@pytest.mark.parametrize(("version", "engine"), [("vllm 0.6", "vllm-v0"), ("vllm 0.10.2", "vllm")])
def test_concurrency_one_prediction_is_the_scenarios_roofline(tmp_path, write_scenario, host,
                                                              version, engine):
    """At concurrency 1 a calibrated prediction is exactly the quantities `run` prints
    for the same deployment with the engine's efficiency preset; a vLLM before 0.8 runs
    as the V0 engine, with that generation's preset.
    """
    from infermodel.accuracy.predictions import predict_rows
    from infermodel.engine.evaluation import evaluate_afresh as evaluate

    lines = [HEADER] + [GOOD.replace("r1,", f"{m}-row,").replace("ttft_ms", m)
                        .replace("vllm 0.6", version) for m in ("ttft_ms", "itl_ms")]
    path = _write(tmp_path, "\n".join(lines) + "\n")
    points = {p.row.metric: p.predicted for p in predict_rows(read_ledger(path), host=host).points}
    scenario = write_scenario(f"""
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[workload]
prompt_tokens = 1024
output_tokens = 128
[efficiency]
engine = "{engine}"
""")
    result = evaluate(scenario)
    assert points["ttft_ms"] == pytest.approx(result["ttft"] * 1e3, rel=1e-12)
    assert points["itl_ms"] == pytest.approx(result["tpot"] * 1e3, rel=1e-12)


def test_calibrated_presets_beat_the_ideal_roofline(shipped_calibrated, host):
    """On the rows the shipped presets were fitted on (their ``[preset] rows``), each
    metric's median |error| is below the ideal roofline's. Rows added to the ledger
    after the last fit count once a refit lists them.
    """
    import statistics
    import tomllib

    from infermodel.accuracy.predictions import predict_rows

    fitted: set[str] = set()
    for path in (ROOT / "plugins" / "infermodel_builtins" / "presets" / "efficiency").glob("*.toml"):
        fitted |= set(tomllib.loads(path.read_text())["preset"]["rows"])
    rows = [r for r in read_ledger(DEFAULT_LEDGER) if r.id in fitted]
    assert len(rows) >= 300
    ideal = predict_rows(rows, calibrated=False, host=host).summary()
    calibrated: dict[str, list[float]] = {}
    for point in shipped_calibrated[0]["points"]:
        if point["id"] in fitted:
            calibrated.setdefault(point["metric"], []).append(abs(point["error"]))
    assert set(calibrated) == set(ideal)
    for metric, errors in calibrated.items():
        assert statistics.median(errors) < ideal[metric]["median_abs_error"]


def _two_sources(tmp_path, scale=3.0):
    """Single-request rows (no simulation) of two sources, the second's figures ``scale``
    times the first's.
    """
    lines = [HEADER]
    for source, factor in (("a", 1.0), ("b", scale)):
        for isl, ttft, itl in ((512, 40.0, 9.0), (2048, 130.0, 9.5), (8192, 600.0, 10.5)):
            for metric, value in (("ttft_ms", ttft), ("itl_ms", itl)):
                lines.append(f"{source}-{isl}-{metric},https://example.org/{source},vllm 0.10,"
                             f"h100-sxm,1,llama-3.1-8b,,,,1,1,{isl},256,1,{metric},mean,"
                             f"{value * factor}")
    return read_ledger(_write(tmp_path, "\n".join(lines) + "\n"))


def test_fit_holds_out_whole_sources_and_stays_inside_its_bounds(tmp_path, host):
    from infermodel.accuracy.fits import fit
    from infermodel.accuracy.predictions import predict_rows

    rows = _two_sources(tmp_path)
    both = fit(rows, host=host)
    only_b = fit([r for r in rows if r.source.endswith("/b")], host=host)
    # Source a's held-out predictions are those of a fit that never saw it (to the
    # parameters no row rests on, which the shipped fit sets back to their priors).
    a_rows = [r for r in rows if r.source.endswith("/a")]
    again = predict_rows(a_rows, host=host, efficiencies={"vllm": only_b.efficiencies["vllm"]})
    held = {p.row.id: p.predicted for p in both.held_out.points}
    for point in again.points:
        assert held[point.row.id] == pytest.approx(point.predicted, rel=1e-3)
    # b's figures are three times a's: held out, each source is far off, more than in
    # sample (where the fit splits the difference).
    def error(points):
        return float(np.median([abs(math.log(p.predicted / p.row.value)) for p in points]))

    assert error(both.held_out.predicted) > max(math.log(1.5), error(both.in_sample.predicted))
    fields = host.registries.fields["efficiency"]
    for name, value in both.efficiencies["vllm"].values:
        assert fields[name].minimum <= value <= fields[name].maximum, name
    report = both.parameters["vllm"]
    assert report["bandwidth_fraction"].rows and report["collective_latency"].rows == ()
    assert both.sources["vllm"] == ("https://example.org/a", "https://example.org/b")
    assert "in-sample median" in __import__("infermodel.accuracy.report",
                                            fromlist=["fit_table"]).fit_table(both)


@pytest.fixture(scope="module")
def shipped_fit(tmp_path_factory):
    """One refit of the shipped ledger through the command line (about a minute), shared
    by the tests that hold it against the shipped presets and the accuracy page: the
    presets it writes and its JSON report.
    """
    directory = tmp_path_factory.mktemp("fit")
    assert main(["validate", "--ledger", "builtin", "--fit", "--format", "json",
                 "--presets-dir", str(directory), "--output", str(directory / "fit.json")]) == 0
    return directory, json.loads((directory / "fit.json").read_text())


@pytest.mark.slow
def test_shipped_presets_are_the_fit_of_the_shipped_ledger(shipped_fit):
    """The efficiency presets are what `validate --ledger builtin --fit` writes."""
    directory, _ = shipped_fit
    written = sorted(p.name for p in directory.glob("*.toml"))
    assert written == sorted(p.name for p in EFFICIENCY_PRESETS.glob("*.toml"))
    for name in written:
        assert (directory / name).read_text() == (EFFICIENCY_PRESETS / name).read_text(), (
            "the physics or the ledger changed: refit with `infermodel validate --ledger builtin "
            "--fit --presets-dir DIR` into an empty directory (the fit reads the shipped presets, "
            "so it will not write over them), copy DIR/*.toml over "
            "plugins/infermodel_builtins/presets/efficiency, then update "
            "docs/accuracy.rst and its plot (`validate --ledger builtin --calibrated --plot "
            "docs/images/accuracy-errors.png`)")


@pytest.mark.slow
def test_accuracy_page_states_the_fitted_errors(shipped_fit):
    """docs/accuracy.rst quotes the in-sample and held-out errors a fit gives."""
    _, report = shipped_fit
    page = (ROOT / "docs" / "accuracy.rst").read_text()
    inside, held = report["in_sample"], report["held_out"]
    for metric in inside:
        pattern = (rf"``{metric}``\s*\|\s*{inside[metric]['n']}\s*\|\s*"
                   rf"{inside[metric]['median_abs_error'] * 100:.1f} %\s*\|\s*"
                   rf"{inside[metric]['p90_abs_error'] * 100:.1f} %\s*\|\s*"
                   rf"{held[metric]['median_abs_error'] * 100:.1f} %\s*\|\s*"
                   rf"{held[metric]['p90_abs_error'] * 100:.1f} %")
        assert re.search(pattern, page), (
            f"{metric}: docs/accuracy.rst's summary table is not what "
            "`infermodel validate --ledger builtin --fit` prints now; update it and the plot")


# ---------------------------------------------------------------------------------
# Efficiency presets in scenarios
# ---------------------------------------------------------------------------------


def _preset(family: str) -> dict:
    import tomllib

    return tomllib.loads((EFFICIENCY_PRESETS / f"{family}.toml").read_text())


@pytest.mark.parametrize("name", sorted(p.stem for p in EFFICIENCY_PRESETS.glob("*.toml")))
def test_efficiency_preset_sets_the_engine_and_its_parameters(name, write_scenario, host):
    from infermodel.engine.evaluation import evaluate_afresh as evaluate
    from infermodel.units import parse_quantity

    data = _preset(name)
    meta = data["preset"]
    assert meta["rows"] and meta["sources"] and meta["urls"]  # every preset lists its sources
    path = write_scenario(f"""
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[workload]
prompt_tokens = 100
output_tokens = 10
[efficiency]
preset = "{name}"
""")
    result = evaluate(path)
    fields = host.registries.fields["efficiency"]
    for key, value in data["efficiency"].items():
        if key in ("engine", "model"):
            continue
        number = parse_quantity(value, fields[key].unit) if isinstance(value, str) else value
        assert result[key] == pytest.approx(number), key
        # No preset outside its physical bounds, and its report says so.
        assert fields[key].minimum <= number <= fields[key].maximum, key
        assert meta["parameters"][key]["bound"] == pytest.approx([fields[key].minimum,
                                                                  fields[key].maximum])
    assert result["mbu"] == result["bandwidth_fraction"]
    # The engine's own reserve (no stated one), and a scenario's own values win.
    assert result["memory_reserved"] > 0 and "reserve_fraction" not in result
    mine = evaluate(path, {"efficiency.bandwidth_fraction": 0.6, "hardware.reserve": 0.2})
    assert mine["mbu"] == 0.6 and mine["reserve_fraction"] == 0.2


def test_unknown_efficiency_preset_is_a_clear_error(write_scenario, capsys):
    path = write_scenario("""
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[workload]
prompt_tokens = 100
output_tokens = 10
[efficiency]
preset = "vlm"
""")
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert "no efficiency preset named 'vlm'" in err and "did you mean 'vllm'" in err
    assert "infermodel presets efficiency" in err


def test_engine_preset_scenarios_report_the_held_out_range():
    """measured ≈ predicted · exp(−e): the range of the preset's held-out errors, for the
    scenario's group (engine, dense or MoE, concurrency band, card generation).
    """
    from infermodel.engine import intervals
    from infermodel.engine.evaluation import evaluate_afresh as evaluate

    result = evaluate(ROOT / "scenarios" / "engine-trtllm-llama-3.1-8b.toml")
    entries = intervals.entries_of(_preset("trtllm")["preset"]["interval"])
    attributes = {"engine": "trtllm", "moe": "dense", "generation": "nvidia-hopper"}
    one = intervals.choose(entries, "ttft", {**attributes, "band": "1"})
    assert result["ttft_expected_low"] == pytest.approx(result["ttft"] * math.exp(-one.high), rel=1e-5)
    assert result["ttft_expected_high"] == pytest.approx(result["ttft"] * math.exp(-one.low), rel=1e-5)
    band = intervals.choose(entries, "itl", {**attributes, "band": intervals.band(result["batch"])})
    assert result["tpot_expected_low"] == pytest.approx(result["tpot"] * math.exp(-band.high))
    assert "ttft_expected_low" not in evaluate(ROOT / "scenarios" / "quant-bf16.toml")


def test_one_requests_first_token_interval_says_when_it_rests_on_rows_under_load():
    # The shipped TensorRT-LLM preset has no group of one-client first-token rows from
    # four sources: one request's interval is a group of every band's rows, and a warning
    # gives its width, exp(high − low) of that group, to two figures.
    import re

    from infermodel.engine import intervals
    from infermodel.engine.evaluation import evaluate_afresh as evaluate
    from infermodel_builtins import fitted

    result = evaluate(ROOT / "scenarios" / "engine-trtllm-llama-3.1-8b.toml")
    entries = intervals.entries_of(_preset("trtllm")["preset"]["interval"])
    one = intervals.choose(entries, "ttft", {"engine": "trtllm", "moe": "dense",
                                             "generation": "nvidia-hopper", "band": "1"})
    assert one.attributes["band"] == "any"
    said = [str(w) for w in result.warnings if "one request's first token" in str(w)]
    assert len(said) == 1
    assert "rests on the 'trtllm' preset's held-out first-token rows at every load" in said[0]
    shown = float(re.search(r"spans ×([0-9,.]+):", said[0]).group(1).replace(",", ""))
    assert shown == pytest.approx(math.exp(one.high - one.low), rel=0.05)
    # With a group of one-client rows from four sources, nothing is said.
    record = {"interval": [
        {"kind": "ttft", "engine": "any", "moe": "any", "band": "1", "generation": "any",
         "n": 12, "sources": 4, "low": -0.5, "high": 0.3},
        {"kind": "ttft", "engine": "any", "moe": "any", "band": "any", "generation": "any",
         "n": 40, "sources": 6, "low": -6.0, "high": 2.0}]}
    assert fitted.alone_warning(result.scenario, record, "trtllm", "trtllm") is None
    def width(low, high):
        only = {**record["interval"][1], "low": low, "high": high}
        said = fitted.alone_warning(result.scenario, {"interval": [only]}, "trtllm", "trtllm")
        return re.search(r"spans ×([0-9,.]+):", said).group(1)

    assert width(-6.0, 2.0) == "3,000"           # e⁸ = 2,981, to two figures
    assert width(-2.0, 1.7) == "40"              # e^3.7 = 40.4
    assert width(0.0, math.log(99.7)) == "100"   # 99.7, to two figures
    assert width(0.0, math.log(2.46)) == "2.5"


_FUZZ_HOST: dict = {}


def _plain_host():
    from infermodel.host import PluginHost

    return PluginHost()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(engine=st.sampled_from(["vllm 1", "sglang 0.4", "trtllm 1.0", "tgi 3", "VLLM"]),
       hardware=st.sampled_from(["h100-sxm", "a100-80gb", "l4", "nope"]),
       gpus=st.sampled_from([1, 2, 4, 8]), tensor=st.sampled_from([None, 1, 3]),
       model=st.sampled_from(["llama-3.1-8b", "mixtral-8x7b", "smollm2-135m", "missing"]),
       weights=st.sampled_from(["", "fp8-e4m3", "int4-g128", "int3-bogus"]),
       kv=st.sampled_from(["", "fp8-e4m3", "int8-b32"]),
       isl=st.integers(1, 200_000), osl=st.integers(1, 50_000),
       concurrency=st.integers(1, 5000),
       metric=st.sampled_from(sorted(METRICS)),
       load=st.sampled_from(["closed", "offline", "poisson"]),
       statistic=st.sampled_from(sorted(STATISTICS)))
def test_fuzz_predict_rows_answers_or_gives_a_reason(tmp_path, engine, hardware, gpus, tensor,
                                                    model, weights, kv, isl, osl, concurrency,
                                                    metric, load, statistic):
    """Any well-formed row is predicted (a positive finite figure) or listed with a reason."""
    from infermodel.accuracy.predictions import predict_rows

    fuzz_host = _FUZZ_HOST.setdefault("host", _plain_host())
    tensor = gpus if tensor is None else tensor  # mostly pure tensor parallelism
    rate, requests = ("0.5", str(concurrency)) if load == "poisson" else ("", "")
    row = (f"fuzz,https://example.org,{engine},{hardware},{gpus},{model},,{weights},{kv},"
           f"{tensor},1,{isl},{osl},{concurrency},{metric},{statistic},10,{load},{rate},"
           f"{requests}")
    path = _write(tmp_path, HEADER + ",load,request_rate,requests\n" + row + "\n")
    for calibrated in (False, True):
        (point,) = predict_rows(read_ledger(path), calibrated=calibrated, host=fuzz_host).points
        if point.predicted is None:
            assert point.reason
        else:
            assert math.isfinite(point.predicted) and point.predicted > 0
