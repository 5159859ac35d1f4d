"""Number formats: range and resolution of their codes, and ``infermodel formats``.

Golden values are computed here from the bit layouts (Module 10: Inference and serving,
"Range and resolution answer different questions": exponent bits set the range, fraction
bits the resolution; machine epsilon is the spacing above one; FP8 E4M3 in the
finite-only 448 convention of Micikevicius et al.; MX formats with one 8-bit scale per
32 elements, MXFP4 at 4 + 8/32 = 4.25 bits).
"""

from __future__ import annotations

import doctest
import json

import numpy as np
import pytest

from infermodel.cli import main
from infermodel_builtins import encodings
from infermodel_builtins.encodings import (
    BF16,
    E2M1,
    E2M3,
    E3M2,
    E4M3,
    E5M2,
    E8M0,
    FP16,
    FP32,
    encoding_values,
    float_encoding,
    int_encoding,
)


def test_fp8_e4m3_is_finite_only_with_a_largest_value_of_448():
    # 4 exponent bits, bias 7, 3 fraction bits; S.1111.111 is NaN, so the largest finite
    # code is S.1111.110 = 1.75 · 2^(15 − 7) = 448; no infinity.
    assert E4M3.largest == 1.75 * 2 ** 8 == 448
    assert E4M3.smallest_normal == 2.0 ** (1 - 7) == 0.015625
    assert E4M3.smallest_subnormal == 2.0 ** -6 / 8 == 2.0 ** -9
    assert E4M3.epsilon == 2.0 ** -3 and not E4M3.infinity and E4M3.nan
    assert "saturates" in E4M3.overflow


def test_fp8_e5m2_keeps_infinities_and_trades_resolution_for_range():
    # IEEE-like: the all-ones exponent is inf/NaN, largest (2 − 2^−2)·2^(30 − 15) = 57,344.
    assert E5M2.largest == 1.75 * 2 ** 15 == 57344
    assert E5M2.smallest_normal == 2.0 ** -14 and E5M2.smallest_subnormal == 2.0 ** -16
    assert E5M2.epsilon == 0.25 and E5M2.infinity and "infinity" in E5M2.overflow
    assert E5M2.largest > E4M3.largest and E5M2.epsilon > E4M3.epsilon


def test_bf16_has_fp32s_range_and_fp16_has_the_finer_resolution():
    # Module 10: a bf16-trained model's activations can overflow fp16 despite fp16's
    # finer precision near one; bf16's range does not give fp32's resolution.
    assert FP16.largest == (2 - 2.0 ** -10) * 2 ** 15 == 65504
    assert BF16.largest == (2 - 2.0 ** -7) * 2.0 ** 127
    assert BF16.smallest_normal == FP32.smallest_normal == 2.0 ** -126
    assert (FP16.epsilon, BF16.epsilon, FP32.epsilon) == (2.0 ** -10, 2.0 ** -7, 2.0 ** -23)
    assert BF16.largest / FP16.largest > 1e33 and BF16.epsilon / FP16.epsilon == 8
    # What overflow means for a value of 70,000: fp16 has no such number.
    with np.errstate(over="ignore"):
        assert np.isinf(np.float16(70000.0)) and 70000.0 < BF16.largest


def test_the_mx_elements_and_their_e8m0_scale():
    # OCP MX v1.0: E2M1 (bias 1) holds 0, 0.5, 1, 1.5, 2, 3, 4, 6; E2M3 max 7.5; E3M2 max 28;
    # all finite-only. E8M0 is 2^(k − 127), k = 0 … 254, with 255 as NaN.
    assert encoding_values(E2M1) == [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    assert (E2M1.largest, E2M3.largest, E3M2.largest) == (6.0, 7.5, 28.0)
    assert not any(e.nan or e.infinity for e in (E2M1, E2M3, E3M2))
    assert E8M0.largest == 2.0 ** 127 and E8M0.lowest == E8M0.smallest_normal == 2.0 ** -127
    assert E8M0.epsilon == 1 and E8M0.smallest_subnormal is None
    # E4M3 has 2^7 − 1 non-negative finite codes (one of the 128 is NaN).
    assert len(encoding_values(E4M3)) == 127 and encoding_values(E4M3)[-1] == 448


def test_integer_grids_are_described_in_codes():
    # Module 10, "Symmetric round-to-nearest": codes −q … q with q = 2^(b−1) − 1, the extra
    # negative code unused; "Offset the grid": unsigned codes 0 … 2^b − 1.
    assert int_encoding(4).range == (-7, 7) and int_encoding(8).range == (-127, 127)
    assert int_encoding(4, zero_point=True).range == (0, 15)
    assert int_encoding(8).epsilon == 1 and int_encoding(8).smallest_subnormal is None
    with pytest.raises(ValueError):
        int_encoding(1)
    with pytest.raises(ValueError):
        float_encoding("x", 3, 2, 3, "sometimes")


def test_the_float_encodings_agree_with_torchs_finfo():
    torch = pytest.importorskip("torch")
    for encoding, dtype in ((E4M3, torch.float8_e4m3fn), (E5M2, torch.float8_e5m2),
                            (FP16, torch.float16), (BF16, torch.bfloat16),
                            (FP32, torch.float32)):
        info = torch.finfo(dtype)
        assert (encoding.largest, encoding.smallest_normal, encoding.epsilon) == \
            (info.max, info.tiny, info.eps), encoding.name
        assert encoding.smallest_subnormal == info.smallest_normal * info.eps


def test_the_encodings_module_doctests_pass():
    assert doctest.testmod(encodings).failed == 0


def test_formats_json_lists_every_format_with_its_range_and_resolution(capsys):
    assert main(["formats", "--format", "json"]) == 0
    listed = {f["name"]: f for f in json.loads(capsys.readouterr().out)}
    keys = {"bits", "metadata_bits", "range", "epsilon", "largest_finite", "smallest_normal",
            "smallest_subnormal", "infinity", "nan", "overflow", "bits_per_value", "scale"}
    assert all(keys <= set(f) for f in listed.values())
    e4m3 = listed["fp8-e4m3"]
    assert e4m3["largest_finite"] == 448 and e4m3["range"] == [-448, 448]
    assert e4m3["infinity"] is False and e4m3["scale"]["name"] == "fp32"
    # Module 10: MXFP4 costs 4 + 8/32 = 4.25 bits per value; int4 with an fp16 scale per
    # 128 costs 4.125, and an fp16 zero point raises it to 4.25.
    mxfp4 = listed["mxfp4"]
    assert (mxfp4["bits"], mxfp4["metadata_bits"], mxfp4["values_per_scale"]) == (4, 8, 32)
    assert mxfp4["bits_per_value"] == 4.25 and mxfp4["element"]["name"] == "E2M1"
    assert mxfp4["scale"]["name"] == "E8M0" and mxfp4["largest_finite"] == 6
    assert listed["int4-g128"]["bits_per_value"] == 4.125
    assert listed["int4-g128-zp"]["bits_per_value"] == 4.25
    assert listed["int4-g128"]["range"] == [-7, 7] and listed["int4-g128-zp"]["range"] == [0, 15]
    assert listed["bf16"]["epsilon"] == 2 ** -7 and listed["fp16"]["largest_finite"] == 65504
    assert listed["int8"]["bits_per_value"] is None      # a row's length decides it


def test_formats_table_names_and_mistakes(capsys):
    assert main(["formats", "fp8-e4m3", "bf16"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:3] == ["name", "bits", "metadata"]
    assert "-448 … 448" in out and "fp16" not in out.replace("fp16)", "")
    assert main(["formats", "mxfp44"]) == 2
    assert "did you mean 'mxfp4'?" in capsys.readouterr().err
