"""A second model served beside the scenario's: its shape and its roofline times.

Routing a share of requests to a smaller model, or a cascade that tries a small model
first, needs that model's time per request on the same kind of cards. This module reads
a dense model preset's shape and defines its times with the documents' roofline
(Module 10, §1 'Count operations and traffic separately' and 'Estimate the two times';
Inference lab, 'Two costs for one answer'), at the scenario's batch, lengths, cards and
efficiencies, with its weights at a stated number of bits and a 16-bit cache:

* parameters N = layers·(2·d·d_q + 2·d·d_kv + m·d·d_ff) + (2·layers + 1)·d + V·d (+ V·d
  for an untied head), multiplied N_matmul = N less an untied input table;
* W = N · bits / 8; kv = 2 · layers · d_kv · 2 bytes per token;
* decode step = max((W + B·L·kv)/BW, B·(2·N_matmul + 4·layers·d_q·L)/F_decode) + t0;
* prefill = max(B·(2·N_matmul·n + 2·layers·d_q·n²)/F_prefill,
  (W + B·n·(kv + 4·d·layers))/BW) + t0;
* TTFT is the prefill at batch 1, E2E = TTFT + (n_out − 1)·step, and one request's
  device time is (prefill + (n_out − 1)·step)/B.

The scenario's other levers (number formats, parallelism, engine conventions) are not
applied to the second model; the lever that uses this module says so in a warning.
"""

from __future__ import annotations

import sympy
from sympy import Max

from infermodel.plugin import InfermodelError, S

from . import LAB, M10

ROOFLINE = f"{M10}, §1 'Count operations and traffic separately' and 'Estimate the two times'; {LAB}, 'Two costs for one answer'"
#: Bytes of one cached key or value element of the second model (a 16-bit cache).
KV_VALUE_BYTES = 2


def shape(scenario, name: str) -> dict:
    """Parameter counts and widths of dense model preset ``name`` (documents' convention).

    Raises the scenario reader's error for an unknown preset (with a close match).
    """
    table = scenario.preset("model", name)
    heads, d = table["heads"], table["d_model"]
    head_dim = table["head_dim"] if table["head_dim"] is not None else d // heads
    kv_heads = table["kv_heads"] if table["kv_heads"] is not None else heads
    layers, vocab = table["layers"], table["vocab"]
    query, kv = heads * head_dim, kv_heads * head_dim
    matrices = 3 if table["ffn"] == "swiglu" else 2
    tied = bool(table["tied_embeddings"])
    blocks = layers * (2 * d * query + 2 * d * kv + matrices * d * table["d_ff"])
    total = blocks + (2 * layers + 1) * d + vocab * d * (1 if tied else 2)
    return {"layers": layers, "d_model": d, "query_width": query, "experts": table["experts"],
            "params_total": total, "params_matmul": total - (0 if tied else vocab * d),
            "kv_bytes_per_token": 2 * layers * kv * KV_VALUE_BYTES}


def check_preset(scenario, report, key: str, name: str) -> bool:
    """Report an unknown or mixture-of-experts preset at ``key``; True when usable."""
    try:
        found = shape(scenario, name)
    except InfermodelError as exc:
        problem = exc.problems[0]
        report(key, problem.message, expected="a model preset (`infermodel presets models` "
               "lists them)", suggestion=problem.suggestion)
        return False
    if found["experts"] > 1:
        report(key, f"model preset {name!r} is a mixture of experts",
               expected="a dense model preset", suggestion="give its cost as cost_ratio instead")
        return False
    return True


def define_model(define, prefix: str, name: str, found: dict, bits: float) -> None:
    """Define ``<prefix>_*``: the shape of preset ``name`` and its roofline times."""
    def q(suffix):
        return S[f"{prefix}_{suffix}"]

    what = f"the {prefix.replace('_', ' ')} model ({name})"
    for key, unit, meaning in (("params_total", "param", "all parameters"),
                               ("params_matmul", "param", "weights multiplied per token"),
                               ("layers", "1", "decoder blocks"), ("d_model", "1", "width"),
                               ("query_width", "1", "query width heads · head_dim"),
                               ("kv_bytes_per_token", "B", "16-bit cache bytes per token")):
        define(f"{prefix}_{key}", float(found[key]), unit=unit,
               description=f"{meaning} of {what}", reference=ROOFLINE)
    define(f"{prefix}_weight_bits", float(bits), unit="1",
           description=f"bits per stored weight of {what}", reference=ROOFLINE)
    define(f"{prefix}_weight_bytes", q("params_total") * q("weight_bits") / 8, unit="B",
           description=f"weight bytes of {what}", reference=ROOFLINE)
    n, length = S.prompt_tokens, S.context
    define(f"{prefix}_decode_step_time",
           Max((q("weight_bytes") + S.batch * length * q("kv_bytes_per_token")) / S.bandwidth,
               S.batch * (2 * q("params_matmul") + 4 * q("layers") * q("query_width") * length)
               / S.flops_effective_decode) + S.t0, unit="s",
           description=f"decode step of {what} at the scenario's batch and context",
           reference=ROOFLINE)
    define(f"{prefix}_prefill_time",
           Max(S.batch * (2 * q("params_matmul") * n + 2 * q("layers") * q("query_width") * n**2)
               / S.flops_effective_prefill,
               (q("weight_bytes") + S.batch * n * (q("kv_bytes_per_token")
                                                   + 4 * q("d_model") * q("layers"))) / S.bandwidth)
           + S.t0, unit="s", description=f"prefill of the batch's prompts on {what}",
           reference=ROOFLINE)
    define(f"{prefix}_ttft", q("prefill_time"), unit="s", at={"batch": 1},
           description=f"time to first token of one request alone on {what}", reference=ROOFLINE)
    define(f"{prefix}_e2e_latency", q("ttft") + (S.output_tokens - 1) * q("decode_step_time"),
           unit="s", description=f"end-to-end latency of one request on {what}",
           reference=ROOFLINE)
    define(f"{prefix}_device_seconds_per_request",
           (q("prefill_time") + (S.output_tokens - 1) * q("decode_step_time")) / S.batch,
           unit="s", description=f"card time one request occupies on {what}", reference=ROOFLINE)
    define(f"{prefix}_memory_required",
           q("weight_bytes") + S.batch * S.sequence_length * q("kv_bytes_per_token")
           + S.memory_reserved, unit="B",
           description=f"weights, the batch's full-length cache and the reserve of {what}",
           reference=ROOFLINE)
    define(f"{prefix}_fits", sympy.Le(q("memory_required"), S.memory_bytes), unit="bool",
           description=f"{what} and the batch's cache fit the scenario's cards", reference=ROOFLINE)


def caveat(result, prefix: str, name: str, bits: float) -> str:
    """The warning a lever using :func:`define_model` gives: what the second model's times
    leave out, and whether it fits.
    """
    text = (f"the {prefix.replace('_', ' ')} model {name!r} is timed with the documents' "
            f"roofline at {bits:g}-bit weights and a 16-bit cache on the scenario's cards, "
            "without this scenario's other levers; whether its answers are good enough is "
            "not modelled")
    fits = f"{prefix}_fits"
    if fits in result.values and not result.values[fits]:
        text += (f"; it does not fit with the batch ({result.show(f'{prefix}_memory_required')} "
                 f"of {result.show('memory_bytes')})")
    return text


__all__ = ["KV_VALUE_BYTES", "ROOFLINE", "caveat", "check_preset", "define_model", "shape"]
