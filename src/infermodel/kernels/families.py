"""The families of measured kernels: which table holds each, how its columns read as
arguments, and its roofline on the card's datasheet peaks.

Each family is a numpy function of named arguments in seconds (see :mod:`.grids`):

=====================  ===============================  ====================================
family                 arguments (configuration | curve)  table
=====================  ===============================  ====================================
``gemm``               n, k | m                          ``gemm/<engine>/gemm_perf``
``context_attention``  heads, kv_heads, head_dim,        ``attention/<engine>/``
                       window | batch, length            ``context_attention_perf``
``generation_attention`` heads, kv_heads, head_dim,      ``attention/<engine>/``
                       window | batch, context           ``generation_attention_perf``
``moe``                hidden, inter, topk, experts,     ``moe/<engine>/moe_perf``
                       tp, ep | tokens
``all_reduce``         gpus | elements                   ``comm/<engine>/custom_allreduce_perf``
=====================  ===============================  ====================================

Categories are matched exactly: a GEMM's ``dtype`` (``bfloat16``, ``fp8``, ``fp8_block``,
``nvfp4``, ``int4_wo``, ``int8_wo``, ``sq``), a cache's ``kv_dtype`` (``bfloat16``,
``fp8``), a MoE layer's ``dtype`` and routing ``distribution``.

Conventions read from the tables themselves (and checked against physics in the
tests): latencies are milliseconds per call of one layer's kernel; a generation row's
cached length is ``isl + step``; a collective's ``message_size`` counts 16-bit
elements (an 8-GPU all-reduce of 2^29 elements in 4.0 ms is NCCL's ~470 GB/s bus
bandwidth on NVLink; read as bytes it would be half that).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

import attrs
import numpy as np

from ..errors import Problem
from .grids import FULL_WINDOW, Lookup
from .source import TablesUnavailable, card, engine_versions, read, resolve

#: Bytes per weight and per activation value, and the datasheet rate its products run at.
GEMM_DTYPES: Mapping[str, tuple[float, float, str]] = {
    "bfloat16": (2.0, 2.0, "bfloat16_tc_flops"),
    "float16": (2.0, 2.0, "bfloat16_tc_flops"),
    "fp8": (1.0, 1.0, "fp8_tc_flops"),
    "fp8_block": (1.0, 1.0, "fp8_tc_flops"),
    "nvfp4": (0.5625, 0.5625, "fp4_tc_flops"),
    "int4_wo": (0.5, 2.0, "bfloat16_tc_flops"),
    "int8_wo": (1.0, 2.0, "bfloat16_tc_flops"),
    "sq": (1.0, 1.0, "int8_tc_flops"),
}
MOE_DTYPES: Mapping[str, tuple[float, str]] = {
    "bfloat16": (2.0, "bfloat16_tc_flops"),
    "fp8": (1.0, "fp8_tc_flops"),
    "fp8_block": (1.0, "fp8_tc_flops"),
    "int4_wo": (0.5, "bfloat16_tc_flops"),
    "w4a16_mxfp4": (0.53125, "bfloat16_tc_flops"),
    "w4afp8": (0.5, "fp8_tc_flops"),
    "nvfp4": (0.5625, "fp4_tc_flops"),
}
KV_BYTES = {"bfloat16": 2.0, "fp8": 1.0, "int8": 1.0}
#: The routing a MoE table's rows were measured under, most realistic first.
MOE_DISTRIBUTIONS = ("power_law_1.01", "balanced")
#: Latency of one step of a collective on the card's links (an assumption for the
#: roofline's shape only: measured times never use it).
LINK_STEP = 1e-6


def _peak(card: Mapping[str, float], key: str) -> float:
    return card.get(key) or card.get("bfloat16_tc_flops") or 1e15


@attrs.frozen
class Family:
    """One family of measured kernels."""

    name: str
    directory: str
    table: str
    #: Argument names in call order, and which are configuration and curve axes.
    arguments: tuple[str, ...]
    configs: tuple[str, ...]
    curve: tuple[str, ...]
    #: argument -> table column.
    columns: Mapping[str, str]
    #: category name -> table column.
    categories: Mapping[str, str]
    #: (categories, card) -> (roofline of named arrays, its description at one point).
    roofline: Callable[[Mapping[str, str], Mapping[str, float]], tuple[Callable, Callable]]
    description: str
    #: Column transforms on read (argument -> function of the read columns).
    derived: Mapping[str, Callable[[Mapping[str, np.ndarray]], np.ndarray]] = attrs.field(factory=dict)
    unit_note: str = ""


def _gemm_roofline(categories, card):
    weight, activation, key = GEMM_DTYPES.get(categories["dtype"], (2.0, 2.0, "bfloat16_tc_flops"))
    flops_peak, bandwidth = _peak(card, key), card["mem_bw"]

    def parts(v):
        # Grouped so that a moving m costs few array operations.
        m, n, k = v["m"], v["n"], v["k"]
        return m * (2 * n * k), m * (k * activation + 2 * n) + n * k * weight

    def roofline(v):
        flops, moved = parts(v)
        return np.maximum(flops / flops_peak, moved / bandwidth)

    def describe(v):
        flops, moved = (float(x) for x in parts(v))
        bound = "compute" if flops / flops_peak >= moved / bandwidth else "memory"
        return (f"{bound}-bound: {flops:.4g} FLOP at {flops_peak / 1e12:.4g} TFLOP/s, "
                f"{moved:.4g} B at {bandwidth / 1e12:.4g} TB/s")

    return roofline, describe


def _attention_roofline(decode: bool):
    def make(categories, card):
        kv = KV_BYTES.get(categories["kv_dtype"], 2.0)
        flops_peak, bandwidth = _peak(card, "bfloat16_tc_flops"), card["mem_bw"]

        def parts(v):
            b, h, g, d, w = v["batch"], v["heads"], v["kv_heads"], v["head_dim"], v["window"]
            if decode:
                keys = np.minimum(v["context"], w)
                return 4 * b * h * d * keys, b * keys * 2 * g * d * kv + 4 * b * h * d
            s = v["length"]
            seen = np.minimum(s, w)
            pairs = b * (s * seen - seen * seen / 2)
            return 4 * h * d * pairs, b * s * (2 * h * d * 2 + 2 * g * d * kv)

        def roofline(v):
            flops, moved = parts(v)
            return np.maximum(flops / flops_peak, moved / bandwidth)

        def describe(v):
            flops, moved = (float(x) for x in parts(v))
            bound = "compute" if flops / flops_peak >= moved / bandwidth else "memory"
            return (f"{bound}-bound: {flops:.4g} FLOP at {flops_peak / 1e12:.4g} TFLOP/s, "
                    f"{moved:.4g} B at {bandwidth / 1e12:.4g} TB/s")

        return roofline, describe
    return make


def _moe_roofline(categories, card):
    weight, key = MOE_DTYPES.get(categories["dtype"], (2.0, "bfloat16_tc_flops"))
    flops_peak, bandwidth = _peak(card, key), card["mem_bw"]

    def parts(v):
        t, h, i, k, e, tp, ep = (v[n] for n in ("tokens", "hidden", "inter", "topk", "experts",
                                                 "tp", "ep"))
        touched = e / ep * (1 - (1 - np.minimum(k / e, 1.0)) ** t)
        flops = 6 * t * k * h * i / (tp * ep)
        return flops, touched * 3 * h * i / tp * weight + 4 * t * h

    def roofline(v):
        flops, moved = parts(v)
        return np.maximum(flops / flops_peak, moved / bandwidth)

    def describe(v):
        flops, moved = (float(x) for x in parts(v))
        bound = "compute" if flops / flops_peak >= moved / bandwidth else "memory"
        return (f"{bound}-bound: {flops:.4g} FLOP at {flops_peak / 1e12:.4g} TFLOP/s, "
                f"{moved:.4g} B of experts and activations at {bandwidth / 1e12:.4g} TB/s")

    return roofline, describe


def _all_reduce_roofline(categories, card):
    link = card.get("intra_node_bw") or 4.5e11

    def roofline(v):
        n = v["gpus"]
        return 2 * (n - 1) / n * 2 * v["elements"] / link + (n - 1) * LINK_STEP

    def describe(v):
        return (f"ring all-reduce of {2 * float(v['elements']):.4g} B over {float(v['gpus']):.0f} "
                f"GPUs at {link / 1e9:.4g} GB/s per link, {LINK_STEP * 1e6:g} µs a step")

    return roofline, describe


def _window(columns):
    w = columns["window_size"].astype(float)
    return np.where(w <= 0, FULL_WINDOW, w)


FAMILIES: Mapping[str, Family] = {f.name: f for f in (
    Family("gemm", "gemm", "gemm_perf", ("m", "n", "k"), ("n", "k"), ("m",),
           {"m": "m", "n": "n", "k": "k"}, {"dtype": "gemm_dtype"}, _gemm_roofline,
           "a matrix product of m tokens by an n×k weight"),
    Family("context_attention", "attention", "context_attention_perf",
           ("batch", "length", "heads", "kv_heads", "head_dim", "window"),
           ("heads", "kv_heads", "head_dim", "window"), ("batch", "length"),
           {"batch": "batch_size", "length": "isl", "heads": "num_heads",
            "kv_heads": "num_key_value_heads", "head_dim": "head_dim"},
           {"kv_dtype": "kv_cache_dtype"}, _attention_roofline(False),
           "causal attention of one layer over a batch of prompts (per GPU)",
           derived={"window": _window}),
    Family("generation_attention", "attention", "generation_attention_perf",
           ("batch", "context", "heads", "kv_heads", "head_dim", "window"),
           ("heads", "kv_heads", "head_dim", "window"), ("batch", "context"),
           {"batch": "batch_size", "heads": "num_heads", "kv_heads": "num_key_value_heads",
            "head_dim": "head_dim"},
           {"kv_dtype": "kv_cache_dtype"}, _attention_roofline(True),
           "one layer's attention of a batch of decoding sequences over their caches (per GPU)",
           derived={"window": _window,
                    "context": lambda c: (c["isl"] + c["step"]).astype(float)}),
    Family("moe", "moe", "moe_perf", ("tokens", "hidden", "inter", "topk", "experts", "tp", "ep"),
           ("hidden", "inter", "topk", "experts", "tp", "ep"), ("tokens",),
           {"tokens": "num_tokens", "hidden": "hidden_size", "inter": "inter_size",
            "topk": "topk", "experts": "num_experts", "tp": "moe_tp_size", "ep": "moe_ep_size"},
           {"dtype": "moe_dtype", "distribution": "distribution"}, _moe_roofline,
           "one layer's routed experts for a batch of tokens (grouped GEMMs)"),
    Family("all_reduce", "comm", "custom_allreduce_perf", ("elements", "gpus"), ("gpus",),
           ("elements",), {"elements": "message_size", "gpus": "num_gpus"}, {},
           _all_reduce_roofline, "an all-reduce of 16-bit elements across the tensor-parallel GPUs",
           unit_note=" (message of 16-bit elements)"),
)}


@attrs.frozen
class Unavailable:
    """Why no measured table serves a kernel (the caller falls back to the roofline)."""

    reason: str


def describe_version(system: str, engine: str) -> str:
    versions = engine_versions(system, engine)
    return ", ".join(versions) if versions else "none"


@functools.lru_cache(maxsize=256)
def _lookup(system: str, engine: str, version: str, family: str,
            categories: tuple[tuple[str, str], ...]) -> Lookup | Unavailable:
    spec = FAMILIES[family]
    folder = resolve(system, spec.directory, engine, version)
    if folder is None:
        return Unavailable(f"no {spec.directory} tables measured under {engine} {version} or "
                           f"older on {system}")
    if spec.table not in folder.tables:
        return Unavailable(f"{folder.system}/{folder.family}/{folder.engine}/{folder.version} has "
                           f"no {spec.table} table")
    wanted = dict(categories)
    equal = {spec.categories[k]: v for k, v in wanted.items() if k in spec.categories}
    columns = sorted({*(c for a, c in spec.columns.items() if a not in spec.derived),
                      "latency", "kernel_source",
                      *(("window_size",) if "window" in spec.derived else ()),
                      *(("isl", "step") if "context" in spec.derived else ())})
    rows = read(folder, spec.table, columns, equal)
    if not len(rows["latency"]):
        held = {}
        for column in equal:
            held[column] = sorted({str(v) for v in read(folder, spec.table, (column,))[column]})
        return Unavailable(f"{folder.label(spec.table)} has no rows where "
                           + " and ".join(f"{k} = {v}" for k, v in equal.items())
                           + " (it holds " + "; ".join(f"{k}: {', '.join(v)}"
                                                      for k, v in held.items()) + ")")
    named = {arg: rows[col].astype(float) for arg, col in spec.columns.items()
             if arg not in spec.derived}
    for arg, make in spec.derived.items():
        named[arg] = make(rows)
    named["latency"] = rows["latency"].astype(float) * 1e-3
    roofline, describe = spec.roofline(wanted, card(system))
    return Lookup(name=family, arguments=spec.arguments, configs=spec.configs, curve=spec.curve,
                  table=folder.label(spec.table), categories=equal,
                  kernel_sources=sorted(set(rows["kernel_source"].tolist())), rows=named,
                  roofline=roofline, describe_roofline=describe, unit_note=spec.unit_note)


def lookup(system: str, engine: str, version: str, family: str,
           **categories: str) -> Lookup | Unavailable:
    """The measured lookup of ``family`` on ``system`` under ``engine`` at ``version``
    (its tables filled backward from older versions), for these categories; or why
    there is none. Loaded once per process.

    >>> gemm = lookup("h200_sxm", "vllm", "0.24.0", "gemm", dtype="fp8")  # doctest: +SKIP
    >>> gemm(32.0, 4096.0, 4096.0)          # seconds, m = 32 tokens by a 4096×4096 weight  # doctest: +SKIP
    """
    if family not in FAMILIES:
        raise KeyError(family)
    return _lookup(system, engine, version, family, tuple(sorted(categories.items())))


def check_version(system: str, engine: str, version: str | None) -> str:
    """``version`` if the tables of ``system`` hold it for ``engine``, or the newest they
    hold when None; a :class:`~infermodel.errors.Problem`-carrying error listing the
    versions held otherwise.
    """
    held = engine_versions(system, engine)
    if not held:
        raise TablesUnavailable(Problem(
            f"the measured kernel tables hold nothing measured under {engine} on {system}",
            expected="an engine the tables of this card hold: " + (", ".join(
                e for e in ("vllm", "sglang", "trtllm") if engine_versions(system, e))
                or "none")))
    if version is None:
        return held[-1]
    if version not in held:
        from ..errors import suggest

        raise TablesUnavailable(Problem(
            f"the measured kernel tables of {system} hold no {engine} version {version!r}",
            expected=f"one of the versions they hold: {', '.join(held)}",
            suggestion=suggest(version, held)))
    return version


__all__ = ["FAMILIES", "GEMM_DTYPES", "KV_BYTES", "MOE_DISTRIBUTIONS", "MOE_DTYPES", "Family",
           "Unavailable", "check_version", "lookup"]
