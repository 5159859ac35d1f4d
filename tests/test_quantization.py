"""The quantization lever: formats and their metadata, the whole artifact, the KV cache,
activation quantisation, derivations and bad input.

Golden figures come from "Module 10: Inference and serving" (sections named per test)
and are checked to the document's printed precision.
"""

from __future__ import annotations

import pytest

import infermodel
from conftest import SCENARIOS
from infermodel.cli import main
from infermodel_builtins.formats import NAMED_FORMATS, FormatTable, resolve_table
from infermodel_builtins.quantization import weight_bytes_by_class

BASE = (SCENARIOS / "module10-case-base.toml").as_posix()
CASE_24GB = (SCENARIOS / "case-study-24gb.toml").as_posix()

# Module 10, §11 "Account for the whole weight artifact": block linears at symmetric int4
# with an fp16 scale per 128, bf16 norms, the embedding and head at eight bits "before
# their particular scale/packaging metadata".
MODULE10_FORMATS = """
[levers.quantization]
linear = "int4-g128"
embedding = { bits = 8, granularity = "none" }
norm = "bf16"
"""


def scenario(write_scenario, body: str, base: str = BASE, name: str = "s.toml"):
    return write_scenario(f'extends = "{base}"\n{body}', name)


def evaluate(write_scenario, body: str, base: str = BASE, overrides=None):
    return infermodel.evaluate(scenario(write_scenario, body, base), overrides)


# ---------------------------------------------------------------------------------
# Effective bits per weight (Module 10, "Granularity costs metadata")
# ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name, bits", [("int4-g128", 4.125), ("int4-g64", 4.25), ("int4-g32", 4.5),
                                        ("int4-g128-zp", 4.25), ("mxfp4", 4.25)])
def test_named_format_bits(name, bits):
    # "Granularity costs metadata": int4 with fp16 scales per 128/64/32 → 4.125/4.25/4.5;
    # an additional fp16 zero point raises group 128 to 4.25. "Range and resolution answer
    # different questions": MXFP4 costs 4 + 8/32 = 4.25 bits per value.
    assert NAMED_FORMATS[name].effective_bits() == bits


def test_row_scale_costs_16_over_4096():
    # "Granularity costs metadata": one scale for a 4,096-weight row costs 16/4096 extra bits.
    fmt = resolve_table(FormatTable(bits=4, granularity="channel"))
    assert fmt.effective_bits(row_length=4096) - 4 == 16 / 4096


@pytest.mark.parametrize("spec, bits", [
    ('"int4-g128"', 4.125), ('"int4-g64"', 4.25), ('"int4-g32"', 4.5), ('"int4-g128-zp"', 4.25),
    ('"mxfp4"', 4.25), ('{ bits = 4, group_size = 128, symmetric = false }', 4.25),
    ('{ format = "int4-g128", scale_bits = 8 }', 4.0625), ('"bf16"', 16.0), ('"int8-b32"', 8.5),
])
def test_bits_per_weight_of_the_block_linears(write_scenario, spec, bits):
    # The case model's block linears tile every group exactly, so the class's effective
    # bits equal the format's (same Module 10 section).
    r = evaluate(write_scenario, f"[levers.quantization]\nlinear = {spec}\n")
    assert r["bits_per_weight_linear"] == bits


def test_row_scales_in_a_scenario(write_scenario):
    # Embedding and head rows are d_model = 4,096 long: a per-row fp16 scale adds 16/4096.
    r = evaluate(write_scenario, '[levers.quantization]\nembedding = { bits = 4, granularity = "channel" }\n')
    assert r["bits_per_weight_embedding"] == 4 + 16 / 4096
    assert r["weight_scales_embedding"] == 2 * 152_064


def test_per_channel_rows_of_the_block_linears(write_scenario):
    # Rows of every block linear, summed, times their lengths give every weight back.
    r = evaluate(write_scenario, '[levers.quantization]\nlinear = "int8"\n')
    rows = r["weight_scales_linear"]
    # q (4096) + k, v (2·1024) + o (4096) + gate, up (2·15360) + down (4096) rows per layer.
    assert rows == 36 * (4096 + 2048 + 4096 + 2 * 15360 + 4096)
    assert r["weight_bytes_linear"] == 8_304_721_920 + rows * 2


# ---------------------------------------------------------------------------------
# The whole artifact (Module 10, §11 "Account for the whole weight artifact")
# ---------------------------------------------------------------------------------


def test_module10_case_artifact(write_scenario):
    # §11: 8,304,721,920 block-linear weights at 4.125 bits, bf16 norms and eight-bit
    # embedding and head → about 5.528429 GB.
    r = evaluate(write_scenario, MODULE10_FORMATS)
    assert f"{r['weight_bytes'] / 1e9:.6f}" == "5.528429"
    assert weight_bytes_by_class(r) == {"linear": 4_282_122_240, "embedding": 1_245_708_288,
                                        "norm": 598_016}
    assert sum(weight_bytes_by_class(r).values()) == r["weight_bytes"]
    assert r["bits_per_weight_effective"] == pytest.approx(8 * r["weight_bytes"] / 9_550_729_216)


def test_bf16_everything(write_scenario):
    # §11: bf16 for every parameter would use about 19.101 GB, as without the lever.
    r = evaluate(write_scenario, '[levers.quantization]\nlinear = "bf16"\n')
    assert f"{r['weight_bytes'] / 1e9:.3f}" == "19.101"
    assert r["weight_bytes"] == infermodel.evaluate(BASE)["weight_bytes"] == 2 * 9_550_729_216


def test_bytes_round_up_per_class(write_scenario):
    # ⌈b·n/8⌉: 3-bit norms over 299,008 values are 112,128 bytes exactly, 5-bit round up.
    r = evaluate(write_scenario, '[levers.quantization]\nnorm = { bits = 3, granularity = "none" }\n')
    assert r["weight_bytes_norm"] == 299_008 * 3 / 8
    r = evaluate(write_scenario, '[levers.quantization]\nnorm = { bits = 5.5, granularity = "none" }\n')
    assert r["weight_bytes_norm"] == 205_568  # ⌈5.5 · 299,008 / 8⌉ = ⌈205,568⌉


# ---------------------------------------------------------------------------------
# KV cache (Module 10, "Quantise the cache" and §11 "Budget memory")
# ---------------------------------------------------------------------------------


def test_one_byte_cache_halves_kv_and_admits_36(write_scenario):
    # "Quantise the cache and evaluate the final artifact" and §11 "Budget memory at the
    # accepted maximum length": an ideal one-byte cache halves 147,456 B/token to 73,728 and
    # admits 36 full-length (6,000-token) requests on the 24 GB card (2.5 GB reserve,
    # W = 5.5 GB) instead of 18.
    body = '[levers.quantization]\nkv_cache = { bits = 8, granularity = "none" }\n'
    r = evaluate(write_scenario, body, base=CASE_24GB)
    assert r["kv_bytes_per_token"] == 73_728
    assert r["max_sequences"] == 36
    assert infermodel.evaluate(CASE_24GB)["max_sequences"] == 18
    # The same with the artifact computed from its formats (5.528429 GB) instead of 5.5.
    r = evaluate(write_scenario, MODULE10_FORMATS + 'kv_cache = { bits = 8, granularity = "none" }\n')
    assert r["kv_bytes_per_token"] == 73_728 and r["max_sequences"] == 36


def test_block_scaled_cache_pays_its_metadata(write_scenario):
    # One fp16 scale per 32 cached values: 8 + 16/32 = 8.5 bits, so 147,456·8.5/16 B/token,
    # and the scale metadata costs two of the 36 ideal requests.
    r = evaluate(write_scenario, '[levers.quantization]\nkv_cache = "int8-b32"\n', base=CASE_24GB)
    assert r["kv_bits_effective"] == 8.5
    assert r["kv_bytes_per_token"] == 147_456 * 8.5 / 16 == 78_336
    assert r["max_sequences"] == 34


def test_cache_per_head_scale(write_scenario):
    # A per-token, per-head scale: 16 bits per head_dim = 128 values.
    r = evaluate(write_scenario, '[levers.quantization]\nkv_cache = "int8"\n', base=CASE_24GB)
    assert r["kv_bits_effective"] == 8 + 16 / 128


# ---------------------------------------------------------------------------------
# Activations (Module 10, "Activation range can be much harder than weight range")
# ---------------------------------------------------------------------------------


W8A8 = '[levers.quantization]\nlinear = "int8"\nembedding = "int8"\nactivations = "int8"\n'


def test_w8a8_doubles_compute_where_native(write_scenario):
    r16 = infermodel.evaluate(BASE, {"hardware.preset": "h100-sxm"})
    r = evaluate(write_scenario, W8A8 + "[hardware]\npreset = \"h100-sxm\"\n")
    assert r["activation_speedup"] == 2
    assert r["flops_effective_prefill"] == 2 * r16["flops_effective_prefill"]
    assert r["flops_effective_decode"] == 2 * r16["flops_effective_decode"]
    assert r["prefill_time_compute"] == pytest.approx(r16["prefill_time_compute"] / 2)


def test_no_native_support_no_speedup_and_says_why(write_scenario, capsys):
    # The Module 10 reference card declares no 8-bit arithmetic: prefill does not speed up.
    path = scenario(write_scenario, W8A8)
    r = infermodel.evaluate(path)
    assert r["activation_speedup"] == 1
    assert r["flops_effective_prefill"] == infermodel.evaluate(BASE)["flops_effective_prefill"]
    assert main(["explain", str(path), "flops_effective_prefill"]) == 0
    out = capsys.readouterr().out
    assert "does not declare native int8 arithmetic" in out
    assert "prefill does not speed up" in out


def test_fp8_needs_native_fp8(write_scenario):
    # A100: int8 tensor cores but no FP8 ones.
    body = '[levers.quantization]\nlinear = "fp8-e4m3"\nactivations = "fp8"\n[hardware]\npreset = "a100-80gb"\n'
    assert evaluate(write_scenario, body)["activation_speedup"] == 1
    body = body.replace("a100-80gb", "h100-sxm")
    # NVIDIA H100 datasheet (SXM): dense FP8 1,979 and BF16 989 TFLOP/s (half the sparse figures).
    assert evaluate(write_scenario, body)["activation_speedup"] == pytest.approx(1979 / 989)


def test_native_flag_can_be_set_in_a_scenario(write_scenario):
    body = W8A8 + "[hardware]\nnative_int8 = true\n"
    assert evaluate(write_scenario, body)["activation_speedup"] == 2


# ---------------------------------------------------------------------------------
# Derivations
# ---------------------------------------------------------------------------------


def test_explain_weight_bytes_shows_each_class(write_scenario, capsys):
    path = scenario(write_scenario, MODULE10_FORMATS)
    assert main(["explain", str(path), "weight_bytes"]) == 0
    out = capsys.readouterr().out
    assert "replaced by: quantization" in out
    assert "weight_bytes = weight_bytes_embedding + weight_bytes_linear + weight_bytes_norm" in out
    for name in ("weight_bytes_linear", "weight_bytes_embedding", "weight_bytes_norm",
                 "weight_scales_linear", "weight_code_bits_linear", "weight_scale_bits_linear"):
        assert f"\n{name} = " in out
    assert "int4-g128" in out


def test_explain_sqnr_shows_its_steps(write_scenario, capsys):
    path = scenario(write_scenario, MODULE10_FORMATS)
    assert main(["explain", str(path), "sqnr_db"]) == 0
    out = capsys.readouterr().out
    for name in ("sqnr_db", "sqnr_levels", "sqnr_bits", "sqnr_max_over_sigma"):
        assert f"{name} = " in out
    assert "defined by:  quantization" in out
    assert "Fewer bits per weight" in out


# ---------------------------------------------------------------------------------
# Bad input: one clear error each, exit status 2 from the command line
# ---------------------------------------------------------------------------------


def check_fails(write_scenario, capsys, body, base=BASE) -> str:
    path = scenario(write_scenario, body, base)
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize("bits", [0, 33, 0.5, -4])
def test_bits_outside_1_to_32(write_scenario, capsys, bits):
    err = check_fails(write_scenario, capsys, f"[levers.quantization]\nlinear = {{ bits = {bits} }}\n")
    assert "levers.quantization.linear.bits" in err and "outside 1–32" in err


def test_group_size_must_divide_the_row(write_scenario, capsys):
    err = check_fails(write_scenario, capsys,
                      "[levers.quantization]\nlinear = { bits = 4, group_size = 100 }\n")
    assert "levers.quantization.linear" in err
    assert "group size 100 does not divide the row length d_model = 4096" in err
    assert "128" in err  # a suggestion of sizes that do divide


def test_group_size_must_divide_the_ffn_row(write_scenario, capsys):
    # 4096 and 15,360 are divisible by 1024 except... 15,360 / 1024 = 15: fine; 2048 is not.
    err = check_fails(write_scenario, capsys,
                      "[levers.quantization]\nlinear = { bits = 4, group_size = 2048 }\n")
    assert "d_ff (feed-forward down projection) = 15360" in err


def test_cache_group_must_divide_head_dim(write_scenario, capsys):
    err = check_fails(write_scenario, capsys,
                      "[levers.quantization]\nkv_cache = { bits = 8, group_size = 96 }\n")
    assert "head_dim = 128" in err


def test_unknown_format_name_suggests_a_close_one(write_scenario, capsys):
    err = check_fails(write_scenario, capsys, '[levers.quantization]\nlinear = "int4-g12"\n')
    assert "unknown number format 'int4-g12'" in err
    assert "did you mean 'int4-g128'?" in err
    err = check_fails(write_scenario, capsys, '[levers.quantization]\nkv_cache = "fp8_e4m3"\n')
    assert "did you mean 'fp8-e4m3'?" in err


def test_unknown_key_in_a_format_table(write_scenario, capsys):
    err = check_fails(write_scenario, capsys, "[levers.quantization]\nlinear = { bits = 4, grup_size = 64 }\n")
    assert "levers.quantization.linear" in err and "unknown key 'grup_size'" in err
    assert "did you mean 'group_size'?" in err


@pytest.mark.parametrize("table, message", [
    ('{ bits = 4, symmetric = true, zero_point_bits = 16 }', "a symmetric grid has no zero point"),
    ('{ bits = 4, granularity = "group" }', "needs group_size"),
    ('{ bits = 4, granularity = "channel", group_size = 64 }', "group_size is given"),
    ('{ bits = 8, granularity = "none", scale_bits = 16 }', "stores no scale"),
    ('{ granularity = "tensor" }', "needs bits"),
    ('{ bits = 4, kind = "float", symmetric = false }', "floating-point format has no zero point"),
    ('{ bits = 4, granularity = "grup" }', "did you mean 'group'?"),
    ('4', "a format name"),
])
def test_inconsistent_format_tables(write_scenario, capsys, table, message):
    err = check_fails(write_scenario, capsys, f"[levers.quantization]\nlinear = {table}\n")
    assert message in err and "levers.quantization.linear" in err


def test_number_formats_and_quantization_together(write_scenario, capsys):
    err = check_fails(write_scenario, capsys,
                      "[levers.number_formats]\nkv_bits = 8\n[levers.quantization]\nlinear = \"int4-g128\"\n")
    assert "both set number formats" in err


def test_weight_bytes_override_refuses_weight_formats(write_scenario, capsys):
    err = check_fails(write_scenario, capsys, '[levers.quantization]\nlinear = "int4-g128"\n',
                      base=CASE_24GB)
    assert "model.weight_bytes fixes the artifact size" in err


def test_weight_bytes_override_allows_a_cache_format(write_scenario):
    r = evaluate(write_scenario, '[levers.quantization]\nkv_cache = "fp8-e4m3"\n', base=CASE_24GB)
    assert r["weight_bytes"] == 5.5e9 and r["kv_bytes_per_token"] == 73_728
    assert "weight_bytes_linear" not in r


def test_activations_need_narrow_weights(write_scenario, capsys):
    err = check_fails(write_scenario, capsys, '[levers.quantization]\nactivations = "int8"\n')
    assert "levers.quantization.activations" in err and "16 bits" in err
    err = check_fails(write_scenario, capsys, '[levers.quantization]\nlinear = "int8"\nactivations = "int4"\n')
    assert "expected one of 'int8', 'fp8'" in err


def test_errors_reported_together(write_scenario, capsys):
    err = check_fails(write_scenario, capsys,
                      '[levers.quantization]\nlinear = { bits = 40 }\nkv_cache = "int9"\nnorm = "bf17"\n')
    assert "3 errors" in err


def test_down_projections_in_their_own_format_by_hand(write_scenario):
    # Module 10, Lab 4 "try next": leave the down-projections at eight bits. The case
    # model (§11): 36 layers, d = 4,096, d_ff = 15,360; its block linears 8,304,721,920.
    result = infermodel.evaluate(SCENARIOS / "module10-case-down8.toml")
    down = 36 * 15_360 * 4_096
    assert result["params_ffn_down"] == down == 2_264_924_160
    # int8 codes and one fp16 scale per output channel (d_model rows in each layer)
    assert result["weight_bytes_down"] == down + 36 * 4_096 * 2 == 2_265_219_072
    # the rest at 4.125 bits (int4, an fp16 scale per 128)
    rest = 8_304_721_920 - down
    assert result["weight_bytes_linear"] == rest // 8 * 4 + rest // 128 * 2 == 3_114_270_720
    # the artifact of §11 (5,528,428,544 B) grows by the down projections' extra bytes
    artifact = infermodel.evaluate(SCENARIOS / "module10-case-artifact.toml")["weight_bytes"]
    assert artifact == 5_528_428_544
    assert result["weight_bytes"] == artifact + 2_265_219_072 - down * 33 // 64
    # the same format as linear is no split at all
    same = write_scenario(f'extends = "{BASE}"\n[levers.quantization]\nlinear = "int8"\ndown = "int8"\n')
    assert "weight_bytes_down" not in infermodel.evaluate(same).values


def test_down_projections_need_a_uniform_dense_model(write_scenario, capsys):
    moe = write_scenario('[model]\npreset = "mixtral-8x7b"\n[hardware]\npreset = "h100-sxm"\n'
                         '[workload]\nprompt_tokens = 100\noutput_tokens = 100\n'
                         '[levers.quantization]\nlinear = "int4-g128"\ndown = "int8"\n')
    assert main(["check", str(moe)]) == 2
    assert "levers.quantization.down: a format for the down projections is modelled for a " \
           "uniform dense model" in capsys.readouterr().err
    odd = write_scenario(f'extends = "{BASE}"\n[levers.quantization]\nlinear = "int8"\n'
                         'down = { bits = 4, group_size = 100 }\n')
    assert main(["check", str(odd)]) == 2
    assert "group size 100 does not divide the row length d_ff" in capsys.readouterr().err
