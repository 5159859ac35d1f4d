"""The silicon ledger: NVIDIA's measured deployments read from the installed package.

Against the real installed file (``aiconfigurator-core`` 0.12, the ``[kernels]`` extra).
Figures checked here are the file's own (read by hand from its CSV text) or the rules
the reader states; a handful of rows is predicted, to keep the suite fast.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import math

import attrs
import numpy as np
import pytest

from infermodel.cli import main

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("aiconfigurator_core") is None
    or importlib.util.find_spec("pyarrow") is None,
    reason='the silicon ledger is not installed (pip install "infermodel[kernels]")')

#: Llama 3.1 70B FP8 on four B200s under vLLM 0.11-era InferenceMAX runs: 1,024 tokens in
#: and out at 8 clients; the file gives TTFT 108.904521 ms and TPOT 8.179380 ms.
LLAMA = "2026_04_06_llama_3_1_70b_b200_sxm_vllm_fp8_agg_1024x1024_c8_tp4_ep1_259"
#: The same DeepSeek-R1 measurement recorded twice (identical TTFT and TPOT): once as
#: tp 64 with the experts 8 × 8, once as tp 8 with the experts 1 × 8.
DOUBLE, SINGLE = ("dsr1_b200_sglang_fp4_agg_1024x1024_c64_cfg201",
                  "2026_03_25_deepseek_r1_b200_sxm_sglang_fp4_agg_1024x1024_c64_tp8_0_ep8_0_271")


@pytest.fixture(scope="module")
def ledger():
    from infermodel.accuracy.silicon import read_silicon

    return read_silicon()


@pytest.fixture(scope="module")
def rows(ledger):
    return {r.id: r for r in ledger.rows}


@pytest.fixture(scope="module")
def cells():
    from infermodel.accuracy.silicon import silicon_path

    with silicon_path().open(newline="", encoding="utf-8") as handle:
        return {r["id"]: r for r in csv.DictReader(handle)}


def test_every_point_of_the_file_becomes_a_ttft_and_a_tpot_row(ledger, cells):
    assert ledger.points == len(cells) == 5221
    assert len(ledger.rows) == 2 * len(cells)
    assert {r.metric for r in ledger.rows} == {"ttft_ms", "tpot_ms"}
    assert len({r.hardware for r in ledger.rows}) == 6
    assert {r.family for r in ledger.rows} == {"vllm", "sglang", "trtllm"}


def test_a_row_copies_the_file_and_reads_its_layout(rows, cells):
    ttft, tpot = rows[f"{LLAMA}-ttft"], rows[f"{LLAMA}-tpot"]
    source = cells[LLAMA]
    assert ttft.value == float(source["silicon_ttft_ms"]) == pytest.approx(108.904521)
    assert tpot.value == pytest.approx(8.179380)
    assert (ttft.hardware, ttft.family, ttft.gpus, ttft.tensor, ttft.concurrency) == (
        "b200", "vllm", 4, 4, 8)
    assert (ttft.weights, ttft.kv_cache, ttft.mode, ttft.client) == (
        "fp8-e4m3", "fp8-e4m3", "aggregated", "inferencemax")
    assert ttft.hf_config.name == "meta-llama--Meta-Llama-3.1-70B_config.json"
    assert not ttft.unexpressed


def test_gap_analysis_points_are_read_by_their_engines_client(rows, cells):
    # SGLang's gap-analysis runs are one burst; TensorRT-LLM's and vLLM's a few rounds per
    # client with the first measured; every other point is InferenceMAX's client.
    from infermodel.accuracy.row_simulation import CLIENTS, GAP_ROUNDS

    seen = {}
    for point, source in cells.items():
        if "aic-auto-gap-analysis" in source["silicon_data_source"]:
            seen.setdefault(source["backend"], rows[f"{point}-ttft"].client)
    assert seen == {"sglang": "burst", "trtllm": "gap", "vllm": "gap"}
    assert (CLIENTS["gap"].rounds, CLIENTS["gap"].warmup_measured) == (GAP_ROUNDS, True)
    assert CLIENTS["gap"].range_ratio == 1.0


def test_the_layout_recorded_with_its_degrees_multiplied_is_read_as_the_engines(rows, cells):
    # The file's own duplicate: the same TTFT and TPOT under both recordings.
    assert cells[DOUBLE]["silicon_ttft_ms"][:10] == cells[SINGLE]["silicon_ttft_ms"][:10]
    assert (float(cells[DOUBLE]["tp_size"]), float(cells[DOUBLE]["moe_tp_size"])) == (64, 8)
    double, single = rows[f"{DOUBLE}-tpot"], rows[f"{SINGLE}-tpot"]
    assert (double.gpus, double.tensor, double.expert) == (single.gpus, single.tensor,
                                                           single.expert) == (8, 8, 8)


def test_wide_expert_pools_dispatch_all_to_all_where_their_engine_does(rows, cells):
    # GB200, SGLang 0.5.8, FP4, disaggregated: prefill 4 workers of attention DP 4 × EP 4,
    # decode one worker of attention DP 32 × EP 32 (the file's columns). Its srt-slurm
    # recipe (recipes/gb200-fp4/1k1k/max-tpt.yaml) passes --moe-a2a-backend deepep to
    # the decode workers only; the FP8 recipes pass it to both pools, the B200 and H200
    # ones to neither. TensorRT-LLM runs its NVLink all-to-all on the racks (GB200,
    # GB300) and gathers on one 8-GPU node (B200, H200).
    from infermodel.accuracy.row_scenarios import scenario_data

    point = "dsr1_gb200_sglang_fp4_disagg_1024x1024_c2048_cfg483"
    source = cells[point]
    assert (source["decode_attention_dp_size"], source["decode_moe_ep_size"]) == ("32", "32")
    row = rows[f"{point}-tpot"]
    decode, prefill = row.pools.decode, row.pools.prefill
    assert (decode.attention_dp, decode.expert, decode.dispatch) == (32, 32, "all_to_all")
    assert (prefill.attention_dp, prefill.expert, prefill.dispatch) == (4, 4, "all_gather")
    lever = scenario_data(row, {}, decode)["levers"]["parallelism"]
    assert lever["expert_dispatch"] == "all_to_all"
    sglang = {(r.hardware, r.weights[:3], stage, pool.dispatch)
              for r in rows.values() if r.pools is not None and r.family == "sglang"
              for stage, pool in (("prefill", r.pools.prefill), ("decode", r.pools.decode))
              if pool.attention_dp > 1 and pool.expert > 1}
    assert {s for s in sglang if s[3] == "all_to_all"} == {
        ("gb200", "nvf", "decode", "all_to_all"), ("gb200", "fp8", "decode", "all_to_all"),
        ("gb300", "nvf", "decode", "all_to_all"), ("gb300", "fp8", "decode", "all_to_all"),
        ("gb200", "fp8", "prefill", "all_to_all"), ("gb300", "fp8", "prefill", "all_to_all")}
    assert ("b200", "nvf", "decode", "all_gather") in sglang
    wide = [r for r in rows.values() if r.pools is not None and r.family == "trtllm"
            and r.pools.decode.attention_dp > 1 and r.pools.decode.expert > 1]
    seen = {(r.hardware, r.pools.decode.dispatch) for r in wide}
    assert seen == {("gb200", "all_to_all"), ("gb300", "all_to_all"), ("b200", "all_gather"),
                    ("h200", "all_gather")}
    node = next(r for r in wide if r.hardware == "b200")
    assert "expert_dispatch" not in scenario_data(node, {}, node.pools.decode)[
        "levers"]["parallelism"]


def test_vllms_data_parallel_pools_are_read_as_their_recipes_ran_them(rows, cells):
    # InferenceMAX's kimik2.5-fp4-gb200-dynamo-vllm (7 April 2026) and its srt-slurm
    # recipes: prefill data-parallel-size 4, tensor-parallel-size 1, experts over the four
    # (dep4) in every recipe; decode dep16 for 1,024/1,024 tokens at 256-4,096 clients,
    # tensor-parallel-size 4 with experts over the four (tep4) at 4-128. The file writes
    # the widths as tensor degrees: prefill tp 4, decode tp 16 or 4.
    wide, narrow = ("kimik2_5_gb200_vllm_fp4_disagg_1024x1024_c1024_cfg697",
                    "kimik2_5_gb200_vllm_fp4_disagg_1024x1024_c8_cfg698")
    assert [cells[wide][f"{s}_{c}"] for s in ("prefill", "decode")
            for c in ("tp_size", "attention_dp_size", "moe_ep_size", "batch_size")] == [
        "4", "1", "4", "1", "16", "1", "16", "1024"]
    prefill, decode = rows[f"{wide}-ttft"].pools.prefill, rows[f"{wide}-ttft"].pools.decode
    assert (prefill.tensor, prefill.attention_dp, prefill.expert, prefill.batch,
            prefill.dispatch) == (1, 4, 4, 1, "all_to_all")
    # 1,024 sequences on one worker: 64 a rank of 16.
    assert (decode.tensor, decode.attention_dp, decode.expert, decode.batch,
            decode.dispatch) == (1, 16, 16, 64, "all_to_all")
    assert (rows[f"{wide}-tpot"].tensor, rows[f"{wide}-tpot"].attention_dp) == (1, 16)
    tep = rows[f"{narrow}-ttft"].pools
    assert (tep.prefill.attention_dp, tep.decode.tensor, tep.decode.attention_dp,
            tep.decode.dispatch) == (4, 4, 1, "all_gather")
    # The rule reads the recipes' model, system and engine only.
    others = {(r.family, r.pools.prefill.tensor, r.pools.prefill.attention_dp)
              for r in rows.values() if r.pools is not None and r.family == "vllm"
              and r.hardware != "gb200"}
    assert others and all(dp == 1 for _, _, dp in others)


def test_sglangs_december_pools_are_read_as_their_launch_scripts_ran_them(rows, cells):
    # InferenceMAX's dsr1-fp{4,8}-gb200-dynamo-sglang configurations of December 2025
    # (image lmsysorg/sglang:v0.5.5.post2) leave the layout to Dynamo's launch scripts
    # (b7107d0, examples/backends/sglang/slurm_jobs/scripts/gb200-fp{4,8}/disagg/<mode>.sh);
    # the file writes every pool as attention DP over tensor-parallel experts (moe_tp =
    # width, moe_ep = 1). The throughput scripts run DP attention with the experts over
    # the pool's cards (--ep-size; DeepEP in decode and in FP8 prefill), but FP4 prefill
    # at 8,192-token prompts with --tp-size 4 --dp-size 1 --ep-size 1; the low-latency
    # scripts run every pool --tensor-parallel-size 4 --data-parallel-size 1
    # --expert-parallel-size 1.
    top, fp8 = ("dsr1_gb200_sglang_fp4_disagg_1024x1024_c12000_cfg259",
                "dsr1_gb200_sglang_fp8_disagg_8192x1024_c1024_cfg253")
    assert [cells[top][f"decode_{c}"] for c in (
        "tp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")] == ["1", "32", "32", "1"]
    assert "lmsysorg/sglang:v0.5.5.post2" in cells[top]["silicon_data_source"]
    pools = rows[f"{top}-tpot"].pools
    assert (pools.decode.attention_dp, pools.decode.expert, pools.decode.dispatch) == (
        32, 32, "all_to_all")
    assert (pools.prefill.attention_dp, pools.prefill.expert, pools.prefill.dispatch) == (
        4, 4, "all_gather")
    prefill = rows[f"{fp8}-tpot"].pools.prefill
    assert (prefill.attention_dp, prefill.expert, prefill.dispatch) == (8, 8, "all_to_all")
    assert rows[f"{top}-tpot"].expert == 32
    long = "dsr1_gb200_sglang_fp4_disagg_8192x1024_c8192_cfg254"
    assert [cells[long][f"prefill_{c}"] for c in ("tp_size", "attention_dp_size",
                                                   "moe_tp_size")] == ["1", "4", "4"]
    pools = rows[f"{long}-ttft"].pools
    assert (pools.prefill.tensor, pools.prefill.attention_dp, pools.prefill.expert) == (4, 1, 1)
    assert (pools.decode.attention_dp, pools.decode.expert) == (32, 32)
    for low, precision in (("dsr1_gb200_sglang_fp4_disagg_1024x1024_c32_cfg252", "fp4"),
                           ("dsr1_gb200_sglang_fp8_disagg_1024x1024_c128_cfg227", "fp8")):
        assert cells[low]["precision"] == precision
        workers, per_rank = (int(cells[low][f"decode_{c}"]) for c in ("num_workers", "batch_size"))
        assert [cells[low][f"decode_{c}"] for c in ("tp_size", "attention_dp_size",
                                                     "moe_tp_size")] == ["1", "4", "4"]
        pools = rows[f"{low}-tpot"].pools
        # Each worker's one tensor-parallel rank holds its four ranks' sequences.
        assert (pools.decode.tensor, pools.decode.attention_dp, pools.decode.expert,
                pools.decode.batch, pools.decode.dispatch) == (4, 1, 1, 4 * per_rank,
                                                               "all_gather")
        assert workers * 4 * per_rank == rows[f"{low}-tpot"].concurrency
        assert (pools.prefill.tensor, pools.prefill.attention_dp, pools.prefill.batch) == (4, 1, 1)
        assert (rows[f"{low}-tpot"].tensor, rows[f"{low}-tpot"].attention_dp) == (4, 1)
    # Other images' pools keep the file's experts: the later GB200 runs were written
    # expert-parallel, and B200's FP8 prefill pools of March 2026 ran their experts
    # tensor-parallel under data-parallel attention, as written (their recipes,
    # b200-fp8/8k1k_stp_lowlat_*.yaml: data-parallel-size 8, expert-parallel-size 1).
    later = rows["dsr1_gb200_sglang_fp4_disagg_1024x1024_c8192_cfg483-tpot"].pools.decode
    assert cells["dsr1_gb200_sglang_fp4_disagg_1024x1024_c8192_cfg483"][
        "decode_moe_ep_size"] == "32" and later.expert == 32
    b200 = rows["dsr1_b200_sglang_fp8_disagg_8192x1024_c128_cfg639-tpot"].pools.prefill
    assert (b200.attention_dp, b200.expert) == (8, 1)


def test_routers_that_answer_the_prefill_first_hand_the_request_over_in_sequence(rows, cells,
                                                                               host):
    # The file's disaggregated TensorRT-LLM points ran under Dynamo
    # (nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime), whose prefill router answers before
    # the decode routing; SGLang's decode server takes the request with the prefill
    # server (lmsysorg/sglang images). A sequential hand-off crosses the decode server's
    # way too: the analytic TTFT gains exactly one more request_overhead at one client's
    # load, and the TPOT is unchanged.
    from infermodel.accuracy.ledger import Pools
    from infermodel.accuracy.predictions import predict_rows

    trt = "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c4_cfg759"
    assert "ai-dynamo/tensorrtllm-runtime" in cells[trt]["silicon_data_source"]
    handoffs = {(r.family, r.pools.handoff) for r in rows.values() if r.pools is not None}
    assert handoffs == {("trtllm", "sequential"), ("vllm", "sequential"),
                        ("sglang", "concurrent")}
    pair = [rows[f"{trt}-ttft"], rows[f"{trt}-tpot"]]
    concurrent = [attrs.evolve(r, pools=attrs.evolve(r.pools, handoff="concurrent"))
                  for r in pair]
    assert pair[0].request_time == pytest.approx(0.070)
    for loop in ("analytic", "simulated"):
        (ttft, tpot), (ttft0, tpot0) = (
            predict_rows(p, kernels="measured", loop=loop, host=host).points
            for p in (pair, concurrent))
        assert ttft.predicted - ttft0.predicted == pytest.approx(70.0, abs=0.5)
        assert tpot.predicted == pytest.approx(tpot0.predicted, rel=0.02)
    with pytest.raises(ValueError):
        Pools(pair[0].pools.prefill, pair[0].pools.decode, handoff="both")


def test_rows_the_levers_cannot_express_keep_their_reason(rows):
    from infermodel.accuracy.silicon import read_layout

    pools = rows["2026_03_25_glm_5_gb200_trtllm_fp4_disagg_8192x1024_c5_tp4_0_ep_138-ttft"]
    assert "pools' sizes are not given" in pools.unexpressed
    mixed = read_layout({"tp_size": "1", "pp_size": "1", "attention_dp_size": "",
                         "moe_tp_size": "2", "moe_ep_size": "1"}, "", 128)
    assert "the experts and the attention must share the same cards" in mixed
    expressed = sum(1 for r in rows.values() if not r.unexpressed) // 2
    # The aggregated points and the pools the file sizes, less the speculative runs.
    assert 3600 <= expressed <= 3700


def test_speculative_runs_the_file_does_not_mark_are_listed(rows, cells):
    # InferenceMAX's configurations (InferenceX, .github/configs/nvidia-master.yaml,
    # February-April 2026) ran TensorRT-LLM release:1.2.0rc6.post3 for DeepSeek-R1 on
    # B200 only in dsr1-fp4/fp8-b200-trt-mtp, and SGLang v0.5.9-cu130 for Qwen3.5-397B on
    # B200 only in qwen3.5-fp8-b200-sglang-mtp; their non-speculative twins ran
    # release:1.2.0rc6.post2 and v0.5.9-cu129-amd64 / v0.5.9-cu130-amd64.
    from infermodel.accuracy.script_settings import image_of, speculative_run

    def image(point: str) -> str:
        return cells[point]["silicon_data_source"].rsplit("image=", 1)[1].split(";")[0]

    listed = {r.id.rsplit("-", 1)[0] for r in rows.values() if "speculative" in r.unexpressed}
    assert len(listed) == 130 + 73
    sweep = {p for p in listed if "measured=2026-01-14" in cells[p]["silicon_data_source"]}
    assert len(sweep) == 73
    for point in listed - sweep:
        assert image(point).endswith(("/release:1.2.0rc6.post3", "/sglang:v0.5.9-cu130"))
        assert cells[point]["system"] == "b200_sxm" and cells[point]["mode"] == "agg"
        assert rows[f"{point}-ttft"].unexpressed == rows[f"{point}-tpot"].unexpressed
    # DeepSeek-R1's TensorRT-LLM sweep of 14 January 2026 (InferenceMAX pull request 392,
    # the -mtp configurations, on the plain ones' image): every point of that day; against
    # the plain configurations' points of 15 December 2025 on the same image, layout,
    # lengths and clients it decodes at least 1.2 times as fast, its first token later
    # in 27 of the 28 pairs — not plain decoding.
    assert {(cells[p]["backend"], cells[p]["system"], image(p).rsplit("/", 1)[1])
            for p in sweep} == {("trtllm", "b200_sxm", "release:1.1.0rc2.post2"),
                                ("trtllm", "h200_sxm", "release:1.1.0rc2.post2")}
    assert sweep == {p for p, c in cells.items()
                     if "measured=2026-01-14" in c["silicon_data_source"]}
    figures: dict = {}
    for c in cells.values():
        day = c["silicon_data_source"].split("measured=")[-1][:10]
        if (c["backend"] == "trtllm" and day in ("2025-12-15", "2026-01-14")
                and c["model_path"].startswith("deepseek-ai/DeepSeek-")
                and "silicon_concurrency=" in c["silicon_data_source"]):
            # DeepSeek-R1's runs, some labelled DeepSeek-V3 in the file.
            key = (c["system"], c["precision"], c["isl"], c["osl"], c["moe_ep_size"],
                   c["attention_dp_size"] in ("", "1"),
                   image_of(c["silicon_data_source"]).rsplit("/", 1)[1],
                   c["silicon_data_source"].split("silicon_concurrency=")[1].split(";")[0])
            figures.setdefault(key, {})[day] = (float(c["silicon_tpot_ms"]),
                                                float(c["silicon_ttft_ms"]))
    pairs = [v for v in figures.values() if len(v) == 2]
    assert len(pairs) == 28
    assert all(v["2026-01-14"][0] < v["2025-12-15"][0] / 1.2 for v in pairs)
    assert sum(v["2026-01-14"][1] > v["2025-12-15"][1] for v in pairs) == 27
    twins = [p for p, c in cells.items() if c["system"] == "b200_sxm" and "image=" in
             c["silicon_data_source"] and image(p).endswith(
                 ("/release:1.2.0rc6.post2", "/sglang:v0.5.9-cu130-amd64"))
             and c["model_path"] in ("deepseek-ai/DeepSeek-R1", "Qwen/Qwen3.5-397B-A17B")]
    assert twins and all(not speculative_run(cells[p]) for p in twins)
    # The same image on another system, or for a model whose plain configuration ran it
    # too (DeepSeek-R1 under SGLang v0.5.9-cu130), stays predicted.
    shared = [p for p, c in cells.items() if c["model_path"] == "deepseek-ai/DeepSeek-R1"
              and c["backend"] == "sglang" and "image=" in c["silicon_data_source"]
              and image(p).endswith("/sglang:v0.5.9-cu130")]
    assert shared and all(not speculative_run(cells[p]) for p in shared)
    qwen_b300 = [p for p, c in cells.items() if c["system"] == "b300_sxm"
                 and c["model_path"] == "Qwen/Qwen3.5-397B-A17B"]
    assert qwen_b300 and all(not speculative_run(cells[p]) for p in qwen_b300)


def test_the_fixed_sample_covers_every_system_engine_and_mode(ledger):
    from infermodel.accuracy.silicon import read_silicon

    sample = read_silicon(sample=40)
    assert sample.points == 40
    kinds = {(r.hardware, r.family, r.mode) for r in ledger.rows}
    assert {(r.hardware, r.family, r.mode) for r in sample.rows} == kinds
    assert [r.id for r in read_silicon(sample=40).rows] == [r.id for r in sample.rows]


def test_validate_lists_the_unexpressible_rows_with_reasons(tmp_path):
    out = tmp_path / "v.json"
    assert main(["validate", "--ledger", "silicon", "--sample", "3", "--format", "json",
                 "--jobs", "1", "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    assert len(data["points"]) + len(data["unpredictable"]) == 6
    assert all(u["reason"] for u in data["unpredictable"])
    assert data["groups"]["all"]["all"]
    for point in data["points"]:
        assert point["method"] in ("analytic closed loop", "disaggregated pools, analytic")


def test_measured_kernels_predict_a_well_covered_row(rows, host):
    from infermodel.accuracy.predictions import predict_rows

    pair = [rows[f"{LLAMA}-ttft"], rows[f"{LLAMA}-tpot"]]
    kernels = predict_rows(pair, kernels="measured", loop="analytic", host=host)
    ideal = predict_rows(pair, calibrated=False, loop="analytic", host=host)
    ttft, tpot = kernels.points
    assert tpot.measured_share is not None and tpot.measured_share > 0.9
    # Measured kernels at the tables' times: TPOT within a fifth of the measurement, and
    # the step slower than the ideal roofline's (which no kernel reaches).
    assert abs(tpot.error) < 0.2
    assert tpot.predicted > ideal.points[1].predicted
    assert ttft.predicted > 0 and math.isfinite(ttft.predicted)


def test_rows_state_their_deployments_way_through_the_server(rows, host):
    # Each row states its engine's time per request (silicon.REQUEST_PATH) and no time per
    # prompt token; under measured kernels it is the row scenario's
    # efficiency.request_overhead, and the analytic closed loop at the row's clients adds
    # it to the first token (by hand: the same row with none stated, plus the time in each
    # client's cycle).
    import attrs

    from infermodel.accuracy.predictions import predict_rows
    from infermodel.accuracy.silicon import REQUEST_PATH
    from infermodel.accuracy.tables import kernels_table

    assert REQUEST_PATH == {"vllm": 0.030, "trtllm": 0.070, "sglang": 0.257}
    assert {(r.family, r.request_time) for r in rows.values()} == set(REQUEST_PATH.items())
    row = rows[f"{LLAMA}-ttft"]
    table = kernels_table(row, "measured", host=host)
    assert table["request_overhead"] == REQUEST_PATH["vllm"]
    # No engine's rows state a time per prompt token (docs/kernels.rst, "A time per
    # prompt token": the form fails its own check on this file).
    one_a_family = {r.family: r for r in rows.values() if not r.unexpressed}
    assert set(one_a_family) == set(REQUEST_PATH)
    assert not any("request_overhead_per_token" in kernels_table(r, "measured", host=host)
                   for r in one_a_family.values())
    alone = attrs.evolve(row, concurrency=1)
    stated, unstated = (predict_rows([r], kernels="measured", loop="analytic", host=host).points[0]
                        for r in (alone, attrs.evolve(alone, request_time=None)))
    assert stated.predicted == pytest.approx(unstated.predicted + 30.0, rel=1e-9)


#: InferenceMAX's SGLang Qwen3.5 run on four B200 at 64 and at 8 clients (its script
#: sets --scheduler-recv-interval 30 from 16 clients, 10 below).
QWEN_64, QWEN_8 = ("2026_04_06_qwen3_5_397b_b200_sxm_sglang_fp8_agg_1024x1024_c64_tp4_ep4_1882",
                   "2026_04_06_qwen3_5_397b_b200_sxm_sglang_fp8_agg_1024x1024_c8_tp4_ep4_1877")


def test_sglang_rows_state_their_scripts_interval_between_reads(rows, cells, host):
    # InferenceMAX's SGLang scripts for DeepSeek-R1 and Qwen3.5 on B200 (and on B300 from
    # 17 April 2026) read new requests every 10 decode iterations below 16 clients and
    # every 30 from 16 (DeepSeek-R1 FP8 on four cards, and Qwen3.5 FP8 on B300: 10); its
    # other scripts read at every iteration, and the gap-analysis files' settings are not
    # published.
    import attrs
    import numpy as np

    from infermodel.accuracy.predictions import kernels_efficiency, predict_rows, row_model
    from infermodel.accuracy.row_simulation import CLIENTS
    from infermodel.accuracy.script_settings import recv_interval

    assert rows[f"{QWEN_64}-ttft"].recv_interval == 30
    assert rows[f"{QWEN_8}-ttft"].recv_interval == 10
    seen = {(c["model_path"], c["system"], c["precision"], rows[f"{p}-ttft"].recv_interval)
            for p, c in cells.items() if c["backend"] == "sglang" and c["mode"] == "agg"}
    assert ("zhipuai/GLM-5", "b200_sxm", "fp8", 1) in seen
    assert ("deepseek-ai/DeepSeek-R1", "h200_sxm", "fp8", 1) in seen
    b300_fp8 = {c["silicon_data_source"].split("measured=")[1][:10]: rows[f"{p}-ttft"].recv_interval
                for p, c in cells.items() if c["system"] == "b300_sxm" and c["backend"] == "sglang"
                and c["model_path"] == "Qwen/Qwen3.5-397B-A17B" and c["precision"] == "fp8"}
    assert b300_fp8 == {"2026-04-03": 1, "2026-04-17": 10}  # its script from 17 April: 10
    assert {rows[f"{p}-ttft"].recv_interval for p, c in cells.items()
            if "gap-analysis" in c["silicon_data_source"]} == {1}
    assert not any(i > 1 for model, system, _, i in seen if system not in ("b200_sxm", "b300_sxm"))
    fp8_tp4 = [p for p, c in cells.items() if c["backend"] == "sglang" and c["mode"] == "agg"
               and c["model_path"] == "deepseek-ai/DeepSeek-R1" and c["precision"] == "fp8"
               and rows[f"{p}-ttft"].tensor == 4 and c["system"] == "b200_sxm"]
    assert fp8_tp4 and {rows[f"{p}-ttft"].recv_interval for p in fp8_tp4} == {10}
    gap = {"backend": "sglang", "mode": "agg", "system": "b200_sxm", "precision": "fp8",
           "model_path": "Qwen/Qwen3.5-397B-A17B",
           "silicon_data_source": "source_file=/x/aic-auto-gap-analysis/y.csv"}
    assert recv_interval(gap, 4, 64) == 1

    # The analytic closed loop holds each arrival (30 − 1)/2 decode steps at the running
    # batch (64 clients, below the cache's capacity): its first token is that much later,
    # its decode untouched.
    row = rows[f"{QWEN_64}-ttft"]
    model = row_model(row, kernels="measured", host=host)
    client = CLIENTS[row.client]  # its lengths drawn on 0.8–1 × nominal: their means
    assert model.lengths_are_values
    # At the rates the prediction gives what no table times (the elementwise kernels'
    # rooflines): the engine preset's.
    rates = {k: v for k, v in kernels_efficiency(row.family, host=host).as_dict().items()
             if k in model.inputs}
    out = model.compiled({**model.inputs, **rates, "batch": 64.0,
                          "prompt_tokens": client.mean_length(row.isl),
                          "output_tokens": client.mean_length(row.osl)})
    step, hold = (float(np.asarray(out[n]).ravel()[0])
                  for n in ("decode_step_time", "scheduler_recv_hold"))
    assert model.capacity > 64 and hold == pytest.approx(14.5 * step, rel=1e-12)
    # One call for both (they must not share a compiled model or a simulation): the
    # client measures its first round, every client at once on an idle engine, which is
    # not held; the other nine of its ten rounds are.
    pair = [row, rows[f"{QWEN_64}-tpot"]]
    plain_pair = [attrs.evolve(r, id=f"{r.id}-plain", recv_interval=1) for r in pair]
    analytic = predict_rows(pair + plain_pair, kernels="measured", loop="analytic",
                            host=host).points
    # (The prediction prices the step with the engine preset's host time, a few µs off
    # the compiled defaults': 14.5 steps apart by a few hundredths of a millisecond.)
    assert client.rounds == 10 and client.warmup_measured
    assert analytic[0].predicted == pytest.approx(analytic[2].predicted + 0.9 * hold * 1e3,
                                                  abs=0.1)
    assert hold * 1e3 > 200
    assert analytic[1].predicted == pytest.approx(analytic[3].predicted, rel=1e-12)
    simulated = predict_rows(pair + plain_pair, kernels="measured", loop="simulated",
                             host=host).points
    # (A simulation's held arrivals also meet other iterations than the plain run's: the
    # difference is the hold to within 1 % of it, where a hold of one step more or less
    # would be 7 % off.)
    assert simulated[0].predicted == pytest.approx(simulated[2].predicted + 0.9 * hold * 1e3,
                                                   abs=0.01 * hold * 1e3)
    assert simulated[1].predicted == pytest.approx(simulated[3].predicted, rel=1e-12)


def test_trtllm_rows_state_their_scripts_wait_for_more_prompts(rows, cells, host):
    # InferenceMAX's TensorRT-LLM scripts for Llama-3.1-70B at 1k/1k on fewer than eight
    # cards set batch_wait_timeout_iters 20; on eight, none (its 54 + 18 points). DeepSeek-R1
    # FP8 on B200 at 1k/1k from 64 clients without attention-DP: 40 (4 points).
    import attrs

    from infermodel.accuracy.predictions import predict_rows

    llama = {p: rows[f"{p}-ttft"] for p, c in cells.items()
             if c["model_path"] == "meta-llama/Llama-3.1-70B" and c["backend"] == "trtllm"
             and (c["isl"], c["osl"]) == ("1024", "1024") and not rows[f"{p}-ttft"].unexpressed}
    waits = {(r.tensor < 8, r.batch_wait) for r in llama.values()}
    assert waits == {(True, 20), (False, 0)}
    assert sum(r.batch_wait == 20 for r in llama.values()) == 54
    deepseek = [r for r in rows.values()
                if r.batch_wait == 40 and r.metric == "ttft_ms" and not r.unexpressed]
    assert len(deepseek) == 4 and all(r.attention_dp == 1 and r.concurrency >= 64 for r in deepseek)
    assert not any(r.batch_wait for r in rows.values() if r.family != "trtllm")

    # The analytic loop holds each prompt in its slot: the first token later, the decode
    # no slower (the longer cycle dilutes the prefills' stall).
    point = "2026_04_06_llama_3_1_70b_b200_sxm_trtllm_fp8_agg_1024x1024_c32_tp2_ep1_617"
    pair = [rows[f"{point}-ttft"], rows[f"{point}-tpot"]]
    both = predict_rows(pair + [attrs.evolve(r, id=f"{r.id}-plain", batch_wait=0) for r in pair],
                        kernels="measured", loop="analytic", host=host).points
    assert both[0].predicted > both[2].predicted + 100  # ms: ~15 steps of ~14 ms
    assert both[1].predicted <= both[3].predicted


def test_trtllm_rows_with_attention_ranks_state_their_scripts_balance(rows, host):
    # Wherever InferenceMAX's TensorRT-LLM scripts turn data-parallel attention on, for
    # DeepSeek-R1 (B200, H200: timeout_iters 60, batching_wait_iters 0) and gpt-oss-120b
    # (B200: the engine's defaults, 50 and 10), they turn its balance on; nothing else is.
    import attrs

    from infermodel.accuracy.predictions import predict_rows

    balanced = [r for r in rows.values() if r.dp_balance is not None and r.metric == "ttft_ms"]
    assert all(r.family == "trtllm" and r.pools is None and r.attention_dp > 1
               and r.hardware in ("b200", "h200") for r in balanced)
    assert {(r.model_label, r.dp_balance) for r in balanced} == {
        ("deepseek-ai/DeepSeek-R1", (60, 0)), ("deepseek-ai/DeepSeek-V3", (60, 0)),
        ("openai/gpt-oss-120b", (50, 10))}
    expressed = [r for r in balanced if not r.unexpressed]
    assert len(expressed) == 32  # 18 more are the speculative sweep of 14 January 2026
    assert not any(r.dp_balance for r in rows.values()
                   if r.family == "trtllm" and r.pools is None and r.attention_dp == 1)

    # The analytic loop holds each prompt in its slot: DeepSeek-R1 (labelled DeepSeek-V3 in
    # the file) on eight H200 ranks at 64 clients and 8k/1k, the timeout's 30 iterations of a decode step of ~30 ms.
    row = next(r for r in expressed if r.hardware == "h200" and r.concurrency == 64
               and r.isl == 8192 and "DeepSeek" in r.model_label)
    both = predict_rows([row, attrs.evolve(row, id=f"{row.id}-plain", dp_balance=None)],
                        kernels="measured", loop="analytic", host=host).points
    assert 600 < both[0].predicted - both[1].predicted < 1500  # ms
    # Vectorised over candidate efficiencies (the request-path benchmark's grid), the hold's
    # conditions broadcast: the same figure at the row's own time per request.
    from infermodel.accuracy.predictions import kernels_efficiency, predict_arrays, row_model

    model = row_model(row, kernels="measured", host=host)
    efficiency = kernels_efficiency(row.family, host=host)
    grid = np.array([0.0, row.request_time, 0.2])
    candidates = {name: np.full(grid.size, value) for name, value in efficiency.values}
    candidates["measured_request_overhead"] = grid
    values = predict_arrays(model, row, candidates)
    assert values[1] == pytest.approx(both[0].predicted, rel=1e-9)
    assert values[0] < values[1] < values[2]

def test_sglang_rows_whose_script_states_no_cache_format_keep_16_bit_caches(rows):
    # InferenceMAX's SGLang scripts for DeepSeek-R1 and GLM-5 in FP8 on H200 pass no
    # --kv-cache-dtype; SGLang's "auto" keeps the model's bf16 unless the checkpoint states
    # an FP8 cache (theirs do not). Their B200 scripts pass fp8_e4m3; gap-analysis rows
    # keep the file's reading.
    def cache(model, system, client="inferencemax"):
        return {r.kv_cache for r in rows.values() if r.family == "sglang" and r.pools is None
                and not r.unexpressed
                and r.model_label == model and r.hardware == system and r.client == client}

    assert cache("deepseek-ai/DeepSeek-R1", "h200") == {""}
    assert cache("deepseek-ai/DeepSeek-V3", "h200") == {""}
    assert cache("zhipuai/GLM-5", "h200") == {""}
    assert cache("deepseek-ai/DeepSeek-R1", "b200") == {"fp8-e4m3"}
    assert cache("zhipuai/GLM-5", "b200") == {"fp8-e4m3"}
    assert cache("Qwen/Qwen3.5-397B-A17B", "h200") == {"fp8-e4m3"}
    assert cache("Qwen/Qwen3-235B-A22B-FP8", "h200", "burst") == {"fp8-e4m3"}


def test_gpt_oss_rows_on_b200_state_their_scripts_cache_and_expert_activations(rows, host):
    # InferenceMAX's gpt-oss-120b scripts on B200 pass an FP8 cache (vLLM's
    # kv-cache-dtype: fp8, TensorRT-LLM's kv_cache_config.dtype: fp8), and its vLLM script
    # exports VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1 (MXFP8 activations for the MXFP4
    # experts, which TensorRT-LLM runs on Blackwell by default). Its H200 scripts pass no
    # cache format (auto: the checkpoint's bf16); the gap-analysis files' settings are
    # not published.
    from infermodel.accuracy.row_scenarios import scenario_data
    from infermodel.accuracy.script_settings import kv_cache, mxfp4_activations
    from infermodel.accuracy.tables import kernels_table

    def settings(engine, system, since="", before="9"):
        return {(r.kv_cache, r.mxfp4_activations) for r in rows.values()
                if r.family == engine and r.pools is None and r.hardware == system
                and r.model_label == "openai/gpt-oss-120b"
                and since <= r.source.split("measured=")[1][:10] < before}

    # vLLM's script passed the FP8 cache from 5 December 2025: its runs of February 2026
    # read it, those of 2 November 2025 the checkpoint's bf16.
    assert settings("vllm", "b200", since="2025-12-05") == {("fp8-e4m3", "mxfp8")}
    assert settings("vllm", "b200", before="2025-12-05") == {("", "mxfp8")}
    assert settings("trtllm", "b200") == {("fp8-e4m3", "")}
    assert settings("vllm", "h200") == settings("trtllm", "h200") == {("", "")}
    gap = {"backend": "vllm", "mode": "agg", "system": "b200_sxm",
           "model_path": "openai/gpt-oss-120b",
           "silicon_data_source": "source_file=/x/aic-auto-gap-analysis/y.csv; measured=2026-02-25"}
    assert (kv_cache(gap, "", eight_bit="fp8-e4m3"), mxfp4_activations(gap)) == ("", "")
    row = next(r for r in rows.values() if r.family == "vllm" and r.hardware == "b200"
               and r.mxfp4_activations)
    measured = scenario_data(row, kernels_table(row, "measured", host=host))
    assert measured["efficiency"]["mxfp4_activations"] == "mxfp8"
    assert measured["levers"]["quantization"] == {"kv_cache": "fp8-e4m3"}
    # The roofline has no MoE kernel to choose: its scenario does not state it.
    assert "mxfp4_activations" not in scenario_data(row, {"engine": "vllm"})["efficiency"]


def test_minimax_rows_on_b200_state_their_scripts_moe_runner_until_the_upgrade(rows, host):
    # InferenceMAX's vLLM script for MiniMax-M2.5 in FP8 on B200 exported
    # VLLM_USE_FLASHINFER_MOE_FP8=0 and VLLM_MOE_USE_DEEP_GEMM=0 (Triton's fused MoE) from
    # 11 March 2026 until its vLLM 0.19.0 upgrade of 3 April 2026.
    from infermodel.accuracy.row_scenarios import scenario_data
    from infermodel.accuracy.script_settings import moe_backend
    from infermodel.accuracy.tables import kernels_table

    runners = {(r.engine, r.moe_backend) for r in rows.values()
               if r.model_label == "MiniMaxAI/MiniMax-M2.5" and r.hardware == "b200"
               and r.family == "vllm" and r.pools is None}
    assert ("vllm 0.17.0", "triton") in runners and ("vllm 0.19.0", "") in runners
    assert {e for e, b in runners if b} == {"vllm 0.17.0"}
    assert {r.moe_backend for r in rows.values() if r.hardware != "b200"
            and not (r.model_label == "openai/gpt-oss-120b" and r.family == "vllm"
                     and r.hardware in ("h100-sxm", "h200"))} == {""}
    cells = {"backend": "vllm", "mode": "agg", "system": "b200_sxm", "precision": "fp8",
             "model_path": "MiniMaxAI/MiniMax-M2.5", "silicon_data_source": "measured=2026-04-03"}
    assert moe_backend(cells) == ""
    assert moe_backend(cells | {"silicon_data_source": "measured=2026-04-02"}) == "triton"
    row = next(r for r in rows.values() if r.moe_backend == "triton")
    measured = scenario_data(row, kernels_table(row, "measured", host=host))
    assert measured["efficiency"]["moe_backend"] == "triton"
    assert "moe_backend" not in scenario_data(row, {"engine": "vllm"})["efficiency"]


def test_gpt_oss_rows_on_hopper_state_marlin_experts_from_the_vllm_0_13_upgrade(rows, host):
    # InferenceMAX's vLLM scripts for gpt-oss-120b on H100 and H200 export
    # VLLM_MXFP4_USE_MARLIN=1 from the vLLM 0.13.0 upgrade of 2 January 2026 (pull request
    # 327), still in the scripts at the file's last measurement; earlier runs (vLLM 0.11.2,
    # November 2025) and TensorRT-LLM's run the engine's default.
    from infermodel.accuracy.row_scenarios import scenario_data
    from infermodel.accuracy.script_settings import moe_backend
    from infermodel.accuracy.tables import kernels_table

    hopper = [r for r in rows.values() if r.model_label == "openai/gpt-oss-120b"
              and r.family == "vllm" and r.hardware in ("h100-sxm", "h200") and r.pools is None]
    runners = {(r.hardware, r.engine, r.moe_backend) for r in hopper}
    assert {b for h, e, b in runners if e == "vllm 0.18.0"} == {"marlin"}
    assert {h for h, e, b in runners if b} == {"h100-sxm", "h200"}
    assert {b for h, e, b in runners if e == "vllm 0.11.2"} == {""}
    assert sum(r.moe_backend == "marlin" and r.metric == "tpot_ms" for r in hopper) == 124
    row = next(r for r in hopper if r.moe_backend)
    measured = scenario_data(row, kernels_table(row, "measured", host=host))
    assert measured["efficiency"]["moe_backend"] == "marlin"
    cells = {"backend": "vllm", "mode": "agg", "system": "h200_sxm", "precision": "fp4",
             "model_path": "openai/gpt-oss-120b", "silicon_data_source": "measured=2026-01-02"}
    assert moe_backend(cells) == "marlin"
    assert moe_backend(cells | {"silicon_data_source": "measured=2026-01-01"}) == ""
    assert moe_backend(cells | {"backend": "trtllm"}) == ""
    assert moe_backend(cells | {"system": "b200_sxm"}) == ""


def test_minimax_rows_state_tf32_from_the_scripts_that_set_it(rows, host):
    # InferenceMAX's vLLM scripts for MiniMax-M2.5 on B300 (pull requests 1106, 1107,
    # merged 21 April 2026) and B200 (1068, 1069, merged 22 April, UTC) export
    # VLLM_FLOAT32_MATMUL_PRECISION=high: the runs those merges started read the router's
    # 32-bit GEMM at the TF32 rate; earlier runs, and every other row, at vLLM's IEEE FP32.
    from infermodel.accuracy.row_scenarios import scenario_data
    from infermodel.accuracy.script_settings import fp32_matmul

    minimax = [r for r in rows.values() if r.model_label == "MiniMaxAI/MiniMax-M2.5"
               and r.pools is None]
    stated = {(r.hardware, r.source.split("measured=")[1][:10]) for r in minimax if r.fp32_matmul}
    assert {h for h, _ in stated} == {"b200", "b300"}
    assert min(d for h, d in stated if h == "b300") == "2026-04-21"
    assert min(d for h, d in stated if h == "b200") == "2026-04-22"
    assert not any(r.fp32_matmul for r in rows.values() if r not in minimax)
    assert {r.fp32_matmul for r in minimax if r.hardware in ("h100-sxm", "h200")} == {""}
    row = next(r for r in minimax if r.fp32_matmul)
    assert scenario_data(row, {"engine": "vllm"})["efficiency"]["fp32_matmul"] == "tf32"
    cells = {"backend": "vllm", "mode": "agg", "system": "b200_sxm", "precision": "fp8",
             "model_path": "MiniMaxAI/MiniMax-M2.5", "silicon_data_source": "measured=2026-04-22"}
    assert fp32_matmul(cells) == "tf32"
    assert fp32_matmul(cells | {"silicon_data_source": "measured=2026-04-21"}) == ""
    assert fp32_matmul(cells | {"system": "b300_sxm",
                                "silicon_data_source": "measured=2026-04-21"}) == "tf32"
    assert fp32_matmul(cells | {"mode": "disagg"}) == ""


def test_sglang_rows_state_their_scripts_memory_share_and_limits(rows, cells, host):
    # InferenceMAX's SGLang scripts pass --mem-fraction-static and mostly the chunk, the
    # running cap and the captured batch (script_settings.SGLANG_LAUNCH): DeepSeek-R1 in
    # FP8 on four B200s at 0.95 / 8,192 / 32 / 32 (dsr1_fp8_b200.sh's TP=4 branch, from
    # January 2026), on eight at 0.82 / 32,768 / 128 / 128; Qwen3.5 in FP8 on B200 (3 March
    # to 30 April 2026) at 0.82 / 32,768 / 128 and the client count. A run measured before
    # its script existed (GLM-5 FP4 on B200, 29 March; its script from 2 April) and the
    # gap-analysis runs state none.
    from infermodel.accuracy.predictions import row_model
    from infermodel.accuracy.row_scenarios import LAUNCH_FIELDS, scenario_data

    def launches(model, system, precision, tensor=None):
        return {rows[f"{p}-ttft"].launch for p, c in cells.items()
                if c["backend"] == "sglang" and c["mode"] == "agg"
                and "gap-analysis" not in c["silicon_data_source"]
                and c["model_path"] == model and c["system"] == system
                and c["precision"] == precision
                and (tensor is None or rows[f"{p}-ttft"].tensor == tensor)}

    assert launches("deepseek-ai/DeepSeek-R1", "b200_sxm", "fp8", 4) == {(0.95, 8192, 32, 32)}
    assert launches("deepseek-ai/DeepSeek-R1", "b200_sxm", "fp8", 8) == {(0.82, 32768, 128, 128)}
    assert launches("zhipuai/GLM-5", "b200_sxm", "fp4") == {None}
    qwen = {rows[f"{p}-ttft"].concurrency: rows[f"{p}-ttft"].launch for p, c in cells.items()
            if c["backend"] == "sglang" and c["model_path"] == "Qwen/Qwen3.5-397B-A17B"
            and c["system"] == "b200_sxm" and c["precision"] == "fp8"
            and "measured=2026-03-2" in c["silicon_data_source"]}
    assert qwen[256] == (0.82, 32768, 128, 256) and qwen[4] == (0.82, 32768, 128, 4)
    assert {r.launch for r in rows.values() if "gap-analysis" in r.source} == {None}
    # The four-card FP8 runs hold DeepSeek-R1 (673 GB) only at the script's 0.95: predicted,
    # where SGLang's own share (0.856 on a B200 at tensor degree 4) leaves no cache.
    row = rows["2026_04_06_deepseek_r1_b200_sxm_sglang_fp8_agg_8192x1024_c4_tp4_ep1_1516-ttft"]
    assert not row.unexpressed and row.launch == (0.95, 8192, 32, 32)
    data = scenario_data(row, {"engine": "sglang"})
    assert [data["efficiency"][f] for f in LAUNCH_FIELDS] == [0.95, 8192, 32, 32]
    model = row_model(row, kernels="measured", host=host)
    assert model.capacity >= 4
    unstated = row_model(attrs.evolve(row, id=f"{row.id}-unstated", launch=None),
                         kernels="measured", host=host)
    assert isinstance(unstated, str) or unstated.capacity < 1
    # The ideal roofline has no engine to launch: its scenario states none of the flags
    # (a memory share beside engine = "none" is an error), and the row is predicted.
    from infermodel.accuracy.row_scenarios import IDEAL_TABLE

    assert not set(LAUNCH_FIELDS) & set(scenario_data(row, IDEAL_TABLE)["efficiency"])
    assert not isinstance(row_model(row, ideal=True, host=host), str)
    # Nor the scheduler's holds, which the engine's scenario states.
    holds = {"recv_interval", "batch_wait_iterations", "dp_balance_timeout"}
    for stated in (next(r for r in rows.values() if r.recv_interval > 1),
                   next(r for r in rows.values() if r.batch_wait > 0),
                   next(r for r in rows.values() if r.dp_balance is not None)):
        assert holds & set(scenario_data(stated, {"engine": "sglang"})["efficiency"])
        assert not holds & set(scenario_data(stated, IDEAL_TABLE)["efficiency"])


def test_kimis_int4_points_run_the_checkpoint_that_quantises_its_experts_alone(rows):
    # The file labels Kimi-K2.5's INT4 runs int4 for both GEMMs and experts; the published
    # checkpoint quantises the routed experts alone, and the rows run it (no lever: the
    # checkpoint's formats, a 16-bit cache as InferenceMAX's kimik2.5_int4 scripts leave it).
    kimi = [r for r in rows.values() if r.model_label == "moonshotai/Kimi-K2.5"
            and r.family == "vllm" and not r.unexpressed and r.weights != "nvfp4"]
    assert len(kimi) == 180
    assert {(r.weights, r.expert_weights, r.kv_cache) for r in kimi} == {("", "", "")}
    from infermodel.hf_config.reader import HFConfigWarning, read_hf_config

    with pytest.warns(HFConfigWarning, match="vision encoder"):
        shape = read_hf_config(kimi[0].hf_config)
    assert shape.get("weight_format") is None and shape["expert_weight_format"] == "int4-g32"
    # Its NVFP4 points state their experts' format: unstated, the lever would take the
    # checkpoint's INT4 experts.
    nvfp4 = [r for r in rows.values() if r.model_label == "moonshotai/Kimi-K2.5"
             and r.weights == "nvfp4"]
    assert nvfp4 and {r.expert_weights for r in nvfp4} == {"nvfp4"}


def test_fp8_points_of_block_scaled_checkpoints_run_their_blocks(rows):
    # DeepSeek-R1's published config states FP8 in 128 × 128 blocks (quantization_config:
    # quant_method fp8, weight_block_size [128, 128]); the file labels its TensorRT-LLM
    # runs per-tensor fp8 and its SGLang runs fp8 GEMMs beside fp8_block experts. Every
    # one of them runs the checkpoint's blocks; its NVFP4 points stay NVFP4.
    from infermodel.hf_config.reader import HFConfigWarning, read_hf_config

    r1 = [r for r in rows.values() if r.model_label == "deepseek-ai/DeepSeek-R1"
          and not r.unexpressed]
    with pytest.warns(HFConfigWarning, match="multi-token"):
        assert read_hf_config(r1[0].hf_config)["weight_format"] == "fp8-b128"
    labels = {(r.family, r.weights, r.expert_weights) for r in r1}
    assert ("trtllm", "fp8-b128", "") in labels and ("sglang", "fp8-b128", "") in labels
    assert not any("fp8-e4m3" in (w, e) for _, w, e in labels)
    assert ("trtllm", "nvfp4", "") in labels
    # A checkpoint with per-tensor scales (or none) keeps the file's label.
    llama = {r.weights for r in rows.values() if r.model_label.startswith("meta-llama/Llama-3.1-70B")}
    assert "fp8-e4m3" in llama


def test_the_silicon_ledger_without_the_extra_names_it(monkeypatch, capsys):
    real = importlib.util.find_spec

    def missing(name, *args, **kwargs):
        return None if name in ("aiconfigurator_core", "pyarrow") else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", missing)
    assert main(["validate", "--ledger", "silicon"]) == 2
    err = capsys.readouterr().err
    assert 'pip install "infermodel[kernels]"' in err and err.count("error:") == 1
    assert main(["validate", "--ledger", "builtin", "--kernels", "measured"]) == 2
    assert 'pip install "infermodel[kernels]"' in capsys.readouterr().err


@pytest.mark.parametrize("argv, words", [
    (["--kernels", "measured", "--calibrated"], "give one of them"),
    (["--compare", "--kernels", "measured"], "--compare predicts with every efficiency"),
    (["--sample", "0"], "at least 1 point"),
    (["--jobs", "0"], "1 to 256"),
    (["--fit", "--kernels", "measured"], "--fit determines the presets"),
])
def test_the_new_options_refuse_what_does_not_go_together(argv, words, capsys):
    assert main(["validate", "--ledger", "silicon", *argv]) == 2
    assert words in capsys.readouterr().err


def test_an_engine_version_the_tables_lack_takes_the_newest(rows, host):
    import attrs

    from infermodel.accuracy.tables import tables_version

    row = rows[f"{LLAMA}-tpot"]
    assert tables_version(attrs.evolve(row, engine_version="0.24.0"), host=host) == ("0.24.0", "")
    version, note = tables_version(attrs.evolve(row, engine_version="0.1.0"), host=host)
    assert version is None and "the newest tables" in note


def test_nvfp4_points_run_nvidias_published_checkpoints_16_bit_groups(ledger):
    # The file's nvfp4 points load NVIDIA's NVFP4 checkpoints, none of which quantises
    # every block linear: V3.1's (which the package ships) keeps q_a/q_b/kv_a/kv_b in BF16
    # and o_proj in NVFP4; R1's keeps all of self_attn; MiniMax-M2.5's its attention.
    import json

    from infermodel.accuracy.row_scenarios import scenario_data
    from infermodel.accuracy.silicon import CONFIG_DIR, package_root

    quant = json.loads((package_root() / CONFIG_DIR
                        / "nvidia--DeepSeek-V3.1-NVFP4_hf_quant_config.json").read_text())
    excluded = quant["quantization"]["exclude_modules"]
    assert "model.layers.3.self_attn.kv_b_proj" in excluded
    assert not [m for m in excluded if m.endswith("o_proj")]
    kept = {}
    for r in ledger.rows:
        if r.weights == "nvfp4" and not r.unexpressed:
            kept.setdefault(r.model_label, set()).add(r.unquantized)
    assert kept["deepseek-ai/DeepSeek-V3"] == {"latent"}
    assert kept["deepseek-ai/DeepSeek-R1"] == {"attention"}
    assert kept["MiniMaxAI/MiniMax-M2.5"] == {"attention"}
    assert kept["meta-llama/Llama-3.1-70B"] == {""}   # the package ships no such checkpoint
    # The row's scenario states the checkpoint (its format and groups), not a lever format
    # that would apply to every block linear.
    row = next(r for r in ledger.rows if r.model_label == "deepseek-ai/DeepSeek-V3"
               and r.weights == "nvfp4" and not r.unexpressed)
    data = scenario_data(row, {})
    assert (data["model"]["weight_format"], data["model"]["unquantized"]) == ("nvfp4", "latent")
    assert "linear" not in data["levers"]["quantization"]
    assert data["levers"]["quantization"]["activations"] == "fp4"


def test_a_paged_engines_closed_loop_runs_the_sequences_their_mean_length_lets_in(rows):
    # DeepSeek-R1 in FP8 on eight H200s under SGLang, 1,024-token prompts and 8,192-token
    # outputs at 64 clients (measured TTFT 420 ms, no queue): its cache holds 60 sequences
    # at full length, more at a running sequence's mean length (1,024 + 8,191/2), which
    # SGLang, paging the cache in on demand, runs. The fit's stand-in keeps the full-length
    # budget; a pool's server at the same lengths has the same capacity.
    from infermodel.accuracy.predictions import row_model
    from infermodel.host import get_host

    host = get_host()
    row = rows["2026_03_25_deepseek_r1_h200_sxm_sglang_fp8_agg_1024x8192_c64_tp8_0_ep1_0_295-ttft"]
    paged = row_model(row, kernels="measured", host=host)
    full = row_model(row, kernels="measured", host=host, admission=False)
    assert not isinstance(paged, str) and not isinstance(full, str)
    out = {k: float(np.asarray(v).ravel()[0]) for k, v in paged.compiled(paged.inputs).items()}
    assert full.capacity == out["max_sequences"] < row.concurrency
    held = out["kv_bytes_per_sequence"] * (1024 + 8191 / 2) / (1024 + 8192)
    assert paged.capacity == math.floor((out["kv_budget_bytes"] - out["kv_bytes_shared"]) / held)
    assert paged.capacity > row.concurrency
    assert paged.with_lengths(1024, 8192).capacity == paged.capacity


def test_a_first_token_beside_the_decodes_waits_for_their_attention_in_the_closed_loop(rows):
    # gpt-oss-120b on one H200 under vLLM, 1,024-token prompts at four clients: vLLM runs
    # a new prompt in the iteration that carries the other three sequences' decodes, and
    # the analytic closed loop adds their attention (mixed_iteration_decode_time at the
    # running batch) to the first token, nine of ten rounds (the first, every client at
    # once on an idle engine, has none running).
    from infermodel.accuracy.predictions import kernels_efficiency, predict_group, row_model
    from infermodel.host import get_host

    host = get_host()
    row = rows["2026_04_06_gpt_oss_120b_h200_sxm_vllm_fp4_agg_1024x1024_c4_tp1_ep1_356-ttft"]
    model = row_model(row, kernels="measured", host=host)
    assert not isinstance(model, str)
    candidates = kernels_efficiency(row.family, host=host).candidates()
    with_term = float(predict_group([model], [row], candidates)[0, 0])

    def without(values):
        out = dict(model.compiled(values))
        out["mixed_iteration_decode_time"] = 0.0 * np.asarray(out["mixed_iteration_decode_time"])
        return out

    alone = float(predict_group([attrs.evolve(model, compiled=without)], [row], candidates)[0, 0])
    term = float(np.asarray(model.compiled({**model.inputs, "batch": 4.0})[
        "mixed_iteration_decode_time"]).ravel()[0]) * 1e3
    assert term > 0
    assert with_term - alone == pytest.approx(0.9 * term, rel=0.2)
