"""``infermodel formats``: the number formats the loaded plugins describe, with the range and
resolution of their codes and the scale metadata beside them.
"""

from __future__ import annotations

from typing import Any


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "formats", help="list number formats: bits, metadata, range and resolution",
        description="List the number formats values may be stored in: bits per code, scale "
                    "and zero-point bits and how many values share them, bits per value, and "
                    "the codes' range, machine epsilon (the spacing above one), largest finite "
                    "value, smallest normal and subnormal values, infinities, NaN and what an "
                    "overflow becomes. Integer grids are given in codes (units of the scale).")
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help="only these formats (default: every one)")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.add_argument("--output", "-o", metavar="FILE", help="write to FILE (atomically)")
    parser.set_defaults(handler=handle)


def encoding_dict(encoding) -> dict[str, Any]:
    """An :class:`~infermodel.declarations.Encoding` as JSON data."""
    from ..formatting import json_value

    return {"name": encoding.name, "kind": encoding.kind, "bits": encoding.bits,
            "description": encoding.description,
            "range": [json_value(encoding.lowest), json_value(encoding.largest)],
            "epsilon": json_value(encoding.epsilon),
            "largest_finite": json_value(encoding.largest),
            "smallest_normal": json_value(encoding.smallest_normal),
            "smallest_subnormal": json_value(encoding.smallest_subnormal),
            "infinity": encoding.infinity, "nan": encoding.nan, "overflow": encoding.overflow}


def format_dict(info) -> dict[str, Any]:
    """A :class:`~infermodel.declarations.NumberFormatInfo` as JSON data: its own bits and
    metadata, its codes' figures at the top level, and the scale's encoding.
    """
    element = encoding_dict(info.element)
    figures = {key: element[key] for key in ("kind", "range", "epsilon", "largest_finite",
                                             "smallest_normal", "smallest_subnormal", "infinity",
                                             "nan", "overflow")}
    return {"name": info.name, "description": info.description, "bits": info.bits,
            "metadata_bits": info.metadata_bits, "granularity": info.granularity,
            "values_per_scale": info.values_per_scale, "bits_per_value": info.bits_per_value,
            **figures, "element": element,
            "scale": encoding_dict(info.scale) if info.scale is not None else None,
            "plugin": info.plugin, "reference": info.reference}


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if float(value).is_integer() and abs(value) < 1e6 else f"{value:.4g}"


def _shared(info) -> str:
    if info.granularity == "none":
        return "none"
    per = {"tensor": "tensor", "channel": "row"}.get(info.granularity, f"{info.values_per_scale}")
    scale = info.scale.name if info.scale is not None else "?"
    return f"{info.metadata_bits:g} bits ({scale}) per {per}"


def table(formats) -> str:
    """The formats as an aligned text table."""
    head = ("name", "bits", "metadata", "bits/value", "codes", "range", "epsilon",
            "smallest normal", "inf/NaN")
    rows = [head]
    for info in formats:
        e = info.element
        unit = " (codes)" if e.kind == "int" else ""
        specials = ("inf, " if e.infinity else "") + ("NaN" if e.nan else "finite only")
        rows.append((info.name, f"{info.bits:g}", _shared(info),
                     "-" if info.bits_per_value is None else f"{info.bits_per_value:g}",
                     e.name, f"{_number(e.lowest)} … {_number(e.largest)}{unit}",
                     _number(e.epsilon), _number(e.smallest_normal), specials))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
             for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def handle(args) -> int:
    import json

    from ..errors import InfermodelError, Problem, suggest
    from ..host import get_host
    from ..output import emit

    host = get_host()
    host.check_loaded()
    host.warn_load_errors()
    known = host.registries.number_formats
    unknown = [name for name in args.names if name not in known]
    if unknown:
        raise InfermodelError([Problem(f"no loaded plugin describes a number format named "
                                       f"{name!r}", expected="a name `infermodel formats` lists",
                                       suggestion=suggest(name, known)) for name in unknown])
    chosen = [known[name] for name in (args.names or known)]
    if args.format == "json":
        text = json.dumps([format_dict(info) for info in chosen], indent=2)
    elif not chosen:
        text = "no loaded plugin describes a number format"
    else:
        text = table(chosen)
    emit(text, args.output)
    return 0
