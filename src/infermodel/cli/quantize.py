"""``infermodel quantize``: round given values onto a grid of integer codes and show what
comes back: scale, zero point, codes, reconstruction and error.
"""

from __future__ import annotations

import math
from typing import Any

#: The most values one command quantises (a list for a person to read, not a tensor).
MAX_VALUES = 100_000
#: Bits the command passes to any quantiser; a plugin may accept fewer.
MAX_BITS = 32
#: The largest magnitude accepted: the spread of two such values stays finite.
MAX_MAGNITUDE = 1e300


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "quantize", help="quantise given values: scale, zero point, codes, reconstruction, error",
        description="Round the VALUES onto a grid of B-bit integer codes with one scale, "
                    "symmetric (codes -(2^(B-1)-1) … 2^(B-1)-1, scale max|w|/(2^(B-1)-1)) or, "
                    "with --zero-point, a min-max grid of unsigned codes 0 … 2^B-1 with a zero "
                    "point; print the scale, zero point, codes, reconstruction, each error and "
                    "the RMS error. Negative values may be written as they are: -0.48.")
    parser.add_argument("values", nargs="+", metavar="VALUE", help="the numbers to quantise")
    parser.add_argument("--bits", "-b", type=int, required=True, metavar="B",
                        help="bits per code")
    parser.add_argument("--zero-point", action="store_true",
                        help="a min-max grid with a zero point instead of a symmetric one")
    parser.add_argument("--method", metavar="NAME",
                        help="the quantiser (default: the only one the plugins provide)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--output", "-o", metavar="FILE", help="write to FILE (atomically)")
    parser.set_defaults(handler=handle)


def parse_values(texts: list[str]) -> tuple[float, ...]:
    """The numbers a user wrote, every mistake named at once.

    >>> parse_values(["0.5", "-1e-3"])
    (0.5, -0.001)
    """
    from ..errors import InfermodelError, Problem

    if len(texts) > MAX_VALUES:
        raise InfermodelError(Problem(f"{len(texts):,} values are more than {MAX_VALUES:,}",
                                      expected=f"at most {MAX_VALUES:,} values"))
    values, problems = [], []
    for position, text in enumerate(texts, 1):
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or abs(value) > MAX_MAGNITUDE:
            problems.append(Problem(f"value {position} is {text!r}", key="VALUE",
                                    expected=f"a finite number of magnitude at most {MAX_MAGNITUDE:g}"))
        values.append(value)
    if problems:
        raise InfermodelError(problems[:20])
    return tuple(values)


def _quantiser(registries, name: str | None):
    from ..errors import InfermodelError, Problem, suggest

    found = registries.quantisers
    listing = ", ".join(sorted(found)) or "none are loaded"
    if name is None:
        if len(found) == 1:
            return next(iter(found.values()))
        raise InfermodelError(Problem(
            "no loaded plugin provides a quantiser" if not found else
            f"{len(found)} quantisers are loaded: choose one with --method",
            expected=f"--method NAME, one of {listing}"))
    if name not in found:
        raise InfermodelError(Problem(f"no loaded plugin provides a quantiser named {name!r}",
                                      key="--method", expected=f"one of {listing}",
                                      suggestion=suggest(name, found)))
    return found[name]


def quantisation_dict(result, info) -> dict[str, Any]:
    """A :class:`~infermodel.declarations.Quantisation` as JSON data."""
    from ..formatting import json_value

    errors = [r - v for r, v in zip(result.reconstruction, result.values)]
    return {"quantiser": info.name, "method": result.method, "plugin": info.plugin,
            "reference": info.reference, "bits": result.bits,
            "scale": json_value(result.scale), "zero_point": result.zero_point,
            "code_range": [result.lowest_code, result.highest_code],
            "values": [json_value(v) for v in result.values], "codes": list(result.codes),
            "reconstruction": [json_value(v) for v in result.reconstruction],
            "errors": [json_value(e) for e in errors],
            "rms_error": json_value(result.rms_error), "max_error": json_value(result.max_error)}


def text(result) -> str:
    """A plain report: the grid, then one line per value, then the errors."""
    lines = [f"{result.method}, {result.bits} bits: codes {result.lowest_code} … "
             f"{result.highest_code}",
             f"  scale       {result.scale:.6g}",
             f"  zero point  {result.zero_point}", ""]
    rows = [("value", "code", "reconstruction", "error")]
    for value, code, back in zip(result.values, result.codes, result.reconstruction):
        rows.append((f"{value:.6g}", str(code), f"{back:.6g}", f"{back - value:+.3g}"))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines += ["  " + "  ".join(cell.rjust(width) for cell, width in zip(row, widths))
              for row in rows]
    lines += ["", f"  RMS error {result.rms_error:.4g}, largest error {result.max_error:.4g}"]
    return "\n".join(lines)


def handle(args) -> int:
    import json

    from ..declarations import Quantisation
    from ..errors import InfermodelError, PluginError, Problem
    from ..host import get_host
    from ..output import check_target, emit

    if args.output:
        check_target(args.output)
    values = parse_values(args.values)
    if not 1 <= args.bits <= MAX_BITS:
        raise InfermodelError(Problem(f"--bits {args.bits} is outside 1–{MAX_BITS}", key="--bits",
                                      expected=f"an integer from 1 to {MAX_BITS}"))
    host = get_host()
    host.check_loaded()
    host.warn_load_errors()
    info = _quantiser(host.registries, args.method)
    try:
        result = info.function(values, bits=args.bits, zero_point=args.zero_point)
    except InfermodelError:
        raise
    except Exception as exc:
        raise PluginError(f"plugin {info.plugin!r} failed in quantiser {info.name!r}: "
                          f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(result, Quantisation):
        raise PluginError(f"plugin {info.plugin!r}: quantiser {info.name!r} returned "
                          f"{type(result).__name__}, not an infermodel.plugin.Quantisation")
    out = json.dumps(quantisation_dict(result, info), indent=2) if args.format == "json" \
        else text(result)
    emit(out, args.output)
    return 0
