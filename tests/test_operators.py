"""The operator-level roofline: one prefill pass and one decode step, operator by operator."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest
import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import infermodel
from conftest import SCENARIOS
from infermodel import S, hookimpl
from infermodel.cli import main
from infermodel.engine.operators import COLUMNS, collect_operators, operator_table
from infermodel.errors import PluginError

CASE = SCENARIOS / "case-study-24gb.toml"
SHAPES = ["case-study-24gb", "quant-bf16", "moe-mixtral-int4", "parallel-70b-allreduce",
          # latent attention, sliding windows, local and global layers, fixed-state layers
          "deepseek-v3-8xh200-fp8", "gpt-oss-120b-one-h100", "gemma-3-27b-128k-local-layers",
          "qwen3-next-80b-hybrid-state"]
NAMES = ["embedding", "norms", "qkv_projection", "attention_score", "attention_value",
         "output_projection", "ffn", "head"]


@pytest.fixture(scope="module")
def case():
    return infermodel.evaluate(CASE)


def test_decode_step_has_every_operator_in_order(case):
    rows = operator_table(case, "decode")
    assert [r.name for r in rows] == NAMES
    moe = operator_table(infermodel.evaluate(SCENARIOS / "moe-mixtral-int4.toml"), "decode")
    assert [r.name for r in moe] == NAMES[:6] + ["router", "ffn", "head"]


def test_case_study_decode_operators_by_hand(case):
    # Module 10 case: 36 layers, d 4,096, 32 query heads and 8 KV heads of 128, SwiGLU
    # 15,360, vocabulary 152,064; one sequence at mean context 5,000.
    L, d, dq, dkv, ff, V, c = 36, 4096, 4096, 1024, 15360, 152064, 5000
    rows = {r.name: r for r in operator_table(case, "decode")}
    assert rows["qkv_projection"].flops == 2 * L * d * (dq + 2 * dkv)
    assert rows["attention_score"].flops == rows["attention_value"].flops == 2 * L * dq * c
    assert rows["output_projection"].flops == 2 * L * dq * d
    assert rows["ffn"].flops == 2 * L * 3 * d * ff
    assert rows["head"].flops == 2 * V * d
    assert rows["norms"].flops == 2 * (2 * L + 1) * d
    assert rows["embedding"].flops == 0
    # Attention reads half the cache each: 147,456 B per token over 5,000 tokens.
    assert rows["attention_score"].bytes == pytest.approx(147456 * c / 2 + L * dq * 2)
    # Module 10: four query heads per KV head and a bf16 cache give four FLOPs per byte.
    assert rows["attention_score"].intensity == pytest.approx(4, rel=1e-3)
    assert all(r.bound == "memory" for r in rows.values())


def _check_sums(r):
    for phase in ("decode", "prefill"):
        rows = operator_table(r, phase)
        card = [x for x in rows if x.bound != "own"]
        assert sum(x.flops for x in rows) == pytest.approx(r[f"{phase}_flops"], rel=1e-12)
        assert sum(x.bytes for x in card) >= r[f"{phase}_bytes"] * (1 - 1e-12)
        rate = r[f"flops_effective_{phase}"]
        whole = max(r[f"{phase}_flops"] / rate, r[f"{phase}_bytes"] / r["bandwidth"])
        assert sum(x.time for x in card) >= whole * (1 - 1e-12)


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(SHAPES), batch=st.integers(1, 256), prompt=st.integers(1, 8192),
       context=st.integers(1, 8192), logits=st.sampled_from(["last", "all"]),
       reads=st.sampled_from(["rows", "table"]))
def test_operator_flops_sum_exactly_to_the_whole_step(name, batch, prompt, context, logits, reads):
    r = infermodel.evaluate(SCENARIOS / f"{name}.toml", {
        "workload.batch": batch, "workload.prompt_tokens": prompt, "workload.context": context,
        "workload.sequence_length": 8192,
        "efficiency.prefill_logits": logits, "efficiency.embedding_reads": reads})
    _check_sums(r)


def test_each_block_norm_moves_its_residual_too(write_scenario):
    # Each token's norms move (8L + 1)·d activations of 2 bytes: a block norm reads its
    # input and the residual and writes both (4), the first reads the embedding and
    # writes its output (2), the final one reads two and writes one (3). The norm weights
    # do not grow with the batch, so two batches differ by exactly that per token.
    path = write_scenario('[model]\npreset = "llama-3.1-8b"\n[hardware]\npreset = "h100-sxm"\n'
                          "[workload]\nbatch = 1\nprompt_tokens = 1024\noutput_tokens = 128\n")
    one, three = (infermodel.evaluate(path, {"workload.batch": b}) for b in (1, 3))
    norms = [next(x for x in operator_table(r, "decode") if x.name == "norms") for r in (one, three)]
    layers, width = one["layers"], one["d_model"]
    assert norms[1].bytes - norms[0].bytes == pytest.approx(2 * (8 * layers + 1) * width * 2,
                                                             rel=1e-12)


def test_tied_embeddings_sum_too(write_scenario):
    path = write_scenario('[model]\npreset = "qwen2.5-0.5b"\n[hardware]\npreset = "h100-sxm"\n'
                          "[workload]\nbatch = 3\nprompt_tokens = 1024\noutput_tokens = 128\n")
    r = infermodel.evaluate(path)
    _check_sums(r)
    rows = {x.name: x for x in operator_table(r, "decode")}
    assert rows["embedding"].bytes == 3 * r["d_model"] * 2  # rows written; the head reads the table


@settings(max_examples=20, deadline=None)
@given(name=st.sampled_from(SHAPES), batch=st.integers(1, 512), context=st.integers(1, 8192))
def test_operator_roofline_is_never_below_the_step_model(name, batch, context):
    over = {"workload.batch": batch, "workload.context": context, "workload.sequence_length": 8192}
    step = infermodel.evaluate(SCENARIOS / f"{name}.toml", over)
    ops = infermodel.evaluate(SCENARIOS / f"{name}.toml", over | {"efficiency.roofline": "operator"})
    assert ops["decode_step_time"] >= step["decode_step_time"] * (1 - 1e-12)
    assert ops["prefill_time"] >= step["prefill_time"] * (1 - 1e-12)
    assert ops["tpot"] == ops["decode_step_time"]


def test_operator_step_is_the_sum_of_operator_times(case):
    r = infermodel.evaluate(CASE, {"efficiency.roofline": "operator"})
    rows = operator_table(r, "decode")
    assert r["decode_time_operators"] == pytest.approx(sum(x.time for x in rows), rel=1e-12)
    assert r["decode_step_time"] == pytest.approx(r["decode_time_operators"] + r["t0"], rel=1e-12)
    # The derivation shows the sum, one term per operator.
    derivation = infermodel.explain(r, "decode_time_operators").text()
    for name in NAMES:
        assert f"decode_op_{name}_time" in derivation
    assert "decode_time_operators" in infermodel.explain(r, "decode_step_time").text()
    # Under the step model the time is the documents' max; the case study's 6.24 ms.
    assert case["decode_step_time"] == pytest.approx(6.23728e-3, rel=1e-6)
    assert r["decode_step_time"] > case["decode_step_time"]


def test_all_reduce_is_timed_by_the_parallelism_lever():
    r = infermodel.evaluate(SCENARIOS / "parallel-70b-allreduce.toml", {"efficiency.roofline": "operator"})
    rows = {x.name: x for x in operator_table(r, "decode")}
    assert rows["all_reduce"].bound == "own" and rows["all_reduce"].flops == 0
    assert rows["all_reduce"].time == pytest.approx(r["parallel_decode_comm_time"])
    # Added once: by the lever's wrap, not by the operator sum.
    assert r["decode_step_time"] == pytest.approx(
        r["decode_time_operators"] + r["t0"] + r["parallel_decode_comm_time"], rel=1e-12)


# ---------------------------------------------------------------- intermediate quantities


def test_projection_and_attention_flops_partition_both_phases(case):
    assert case["decode_flops_projections"] + case["decode_flops_attention"] == case["decode_flops"]
    assert case["prefill_flops_projections"] + case["prefill_flops_attention"] == pytest.approx(
        case["prefill_flops"], rel=1e-15)
    assert case["decode_cache_read_bytes"] == 5000 * 147456  # Module 10 §1: 0.737 GB of cache


def test_attainable_fraction_on_the_roofline(case):
    # Decode at ~3.3 FLOP/B on a 165 FLOP/B ridge attains intensity·BW of the 165 TFLOP/s.
    assert case["decode_attainable_fraction"] == pytest.approx(case["decode_intensity"] * 1e12 / 165e12)
    assert case["prefill_attainable_fraction"] == pytest.approx(0.5)  # compute-bound at 50 % MFU


def test_single_matrix_vector_and_matrix_matrix_intensity(write_scenario):
    # Module 10, "A matrix-vector product reads many weights for little work": 2mn FLOPs
    # over b(mn + n + m) bytes, about 1 FLOP/B in bf16; on the H100 SXM profile (ridge
    # 989/3.35 ≈ 295) it attains at most about 0.34 % of peak.
    path = write_scenario('[model]\npreset = "llama-3-8b"\n[hardware]\npreset = "h100-sxm"\n'
                          "[workload]\nbatch = 64\nprompt_tokens = 1024\noutput_tokens = 256\n"
                          '[efficiency]\nmodel = "fixed"\n')  # peak rates, as the module
    r = infermodel.evaluate(path)
    d = 4096
    assert r["matvec_intensity"] == pytest.approx(2 * d * d / (2 * (d * d + 2 * d)), rel=1e-12)
    assert r["matvec_intensity"] == pytest.approx(d / (d + 2))
    assert round(100 * r["matvec_attainable_fraction"], 2) == 0.34
    # "A matrix-matrix product reuses the weights": 2mnB / b(mn + nB + mB) ≈ 2B/b early on.
    assert r["matmul_intensity"] == pytest.approx(2 * d * d * 64 / (2 * (d * d + 2 * d * 64)))
    assert 0.95 * 64 < r["matmul_intensity"] < 64
    # Any other shape through the plugin's helper (the quantities are its d×d case).
    from infermodel_builtins.operators import product_intensity

    assert product_intensity(d, d, 64, 2) == pytest.approx(r["matmul_intensity"], rel=1e-12)
    assert product_intensity(d, d) == pytest.approx(r["matvec_intensity"], rel=1e-12)
    assert product_intensity(14336, 4096, 1, 0.5) == pytest.approx(4, rel=1e-3)  # int4: about 4


# ---------------------------------------------------------------- extending the table


def test_infermodel_define_operators_replace_and_duplicates(host, register_plugin):
    class Windowed:
        @hookimpl
        def infermodel_define_operators(self, scenario, define):
            window = sympy.Min(S.context, 4096)
            define("decode", "attention_score", flops=2 * S.batch * S.layers * S.query_width * window,
                   bytes=S.batch * window * S.kv_bytes_per_token / 2, replace=True,
                   description="scores over a 4,096-token window")

    register_plugin(Windowed(), "windowed")
    r = infermodel.evaluate(CASE, host=host)
    rows = {x.name: x for x in operator_table(r, "decode", host=host)}
    assert rows["attention_score"].plugin == "windowed"
    assert rows["attention_score"].flops == 2 * 36 * 4096 * 4096

    class Twice:
        @hookimpl
        def infermodel_define_operators(self, scenario, define):
            define("decode", "head", flops=1, bytes=1, description="again")

    register_plugin(Twice(), "twice")
    with pytest.raises(PluginError, match="defined by both"):
        collect_operators(infermodel.load_scenario(CASE, host=host), "decode", host=host)


def test_infermodel_time_operators_puts_the_charged_time_beside_the_roofline(host,
                                                                            register_plugin):
    class Charged:
        @hookimpl
        def infermodel_time_operators(self, scenario, register):
            register("decode", "ffn", "tpot", label="test")
            register("prefill", "head", "ttft", label="ignored in decode")

    register_plugin(Charged(), "charged")
    r = infermodel.evaluate(CASE, host=host)
    rows = {x.name: x for x in operator_table(r, "decode", host=host)}
    assert (rows["ffn"].charged, rows["ffn"].charged_by) == (r["tpot"], "test")
    assert rows["head"].charged is None
    from infermodel.engine.operators import format_table

    text = format_table(r, "decode", list(rows.values()))
    assert "roofline/charged" in text and "charged (test)" in text

    class Again:
        @hookimpl
        def infermodel_time_operators(self, scenario, register):
            register("decode", "ffn", "ttft", label="again")

    register_plugin(Again(), "again")
    with pytest.raises(PluginError, match="timed by both"):
        operator_table(r, "decode", host=host)


# ---------------------------------------------------------------- the command


def test_ops_command_table_csv_and_json(capsys, tmp_path):
    assert main(["ops", str(CASE)]) == 0
    out = capsys.readouterr().out
    assert "qkv_projection" in out and "sum of operator FLOPs" in out and "6.237 ms" in out
    assert main(["ops", str(CASE), "--phase", "prefill", "--format", "csv"]) == 0
    table = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert list(table[0]) == [name for name, _ in COLUMNS]
    assert [row["operator"] for row in table] == NAMES
    target = tmp_path / "ops.json"
    assert main(["ops", str(CASE), "--format", "json", "--output", str(target)]) == 0
    data = json.loads(target.read_text())
    assert data["phase"] == "decode" and data["units"]["flops"] == "FLOP"
    assert data["totals"]["flops"] == pytest.approx(data["totals"]["step_flops"], rel=1e-12)
    assert math.isclose(sum(o["share"] for o in data["operators"]), 1.0, rel_tol=1e-9)


def test_ops_command_user_mistakes_exit_2(capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["ops", str(CASE), "--phase", "train"])
    assert exc.value.code == 2
    missing = tmp_path / "missing.toml"
    assert main(["ops", str(missing)]) == 2
    assert "Traceback" not in capsys.readouterr().err


_VALUES = st.one_of(st.integers(-3, 10**7), st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from(["last", "all", "rows", "table", "step", "operator", "vllm",
                                     "sglang", "tensorrt-llm", "none", "", "LAST", "1e9", "x y"]))
_FIELDS = st.sampled_from(["efficiency.prefill_logits", "efficiency.embedding_reads",
                           "efficiency.roofline", "efficiency.engine", "efficiency.prefill_chunk",
                           "hardware.reserve"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sets=st.lists(st.tuples(_FIELDS, _VALUES), max_size=3),
       phase=st.sampled_from(["decode", "prefill"]), fmt=st.sampled_from(["table", "csv", "json"]))
def test_ops_fuzz_gives_a_table_or_a_user_error(capsys, sets, phase, fmt):
    argv = ["ops", str(CASE), "--phase", phase, "--format", fmt]
    for key, value in sets:
        argv += ["--set", f"{key}={value}"]
    capsys.readouterr()  # drop what an earlier example printed
    status = main(argv)
    out, err = capsys.readouterr()
    assert status in (0, 2)
    assert "Traceback" not in err and "internal error" not in err
    if status == 0:
        assert "qkv_projection" in out
    else:
        assert err.startswith("error:")


def test_latent_attention_ops_add_up_to_the_step():
    # DeepSeek-V3 (multi-head latent attention, 256 routed experts) on 8x H200: the
    # attention operators carry the latent cache's reads and the absorbed attention FLOPs
    # of the step, so the table adds up to the step exactly.
    r = infermodel.evaluate(SCENARIOS / "deepseek-v3-8xh200-fp8.toml")
    rows = {x.name: x for x in operator_table(r, "decode")}
    assert "router" in rows
    assert rows["attention_score"].bytes + rows["attention_value"].bytes == pytest.approx(
        r["decode_bytes"] - r["weight_bytes_per_step"] + 2 * 16 * 61 * r["query_width"] * 2,
        rel=1e-12)
    assert sum(x.flops for x in rows.values()) == pytest.approx(r["decode_flops"], rel=1e-12)
