"""``infermodel layers``: what the tool believes the model is, one row per layer kind.

The rows are the quantities a plugin defines under the names
``layer_kind_<kind>_count``, ``_params``, ``_cache_bytes_per_token``, ``_state_bytes``
and ``_flops_per_token`` (the built-in architecture plugin defines one set per distinct
mixer and feed-forward block), with ``params_outside_layers`` and
``flops_per_token_outside_layers`` for the embedding, head and final norm. Every number
printed is such a quantity, so ``infermodel explain`` derives it.
"""

from __future__ import annotations

import json
import re

from . import add_scenario_arguments, load

FORMATS = ("table", "json")
#: The columns of a row: (quantity suffix, JSON key, unit, heading).
COLUMNS = (("count", "count", "1", "layers"),
           ("params", "params", "param", "parameters"),
           ("cache_bytes_per_token", "cache_bytes_per_token", "B", "cache B/token"),
           ("state_bytes", "state_bytes", "B", "state B/sequence"),
           ("flops_per_token", "flops_per_token", "FLOP", "FLOPs/token"))
_COUNT = re.compile(r"^layer_kind_(\w+)_count$")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "layers", help="the model's layers, one row per kind (mixer + feed-forward block)",
        description="Print the per-layer model: one row per distinct layer kind (its mixer — "
                    "full, sliding, chunked or latent attention, linear attention, Mamba-1/2, "
                    "a projection or none — and its feed-forward block), with the number of "
                    "such layers, their parameters, the cache bytes each cached token adds or "
                    "the fixed state one sequence keeps, and their FLOPs per decoded token at "
                    "the mean context; then what lies outside the layers and the model's "
                    "totals. A deployment that places the layers on several cards (expert "
                    "parallelism, data-parallel attention) adds their parameters on the "
                    "fullest card. JSON gives base units (params, B, FLOP).")
    add_scenario_arguments(parser)
    parser.add_argument("--format", choices=FORMATS, default="table")
    parser.add_argument("--output", "-o", metavar="FILE", help="write to FILE (atomically)")
    parser.set_defaults(handler=handle)


#: A column a plugin may add for a deployment over several cards (the parallelism lever's
#: layouts): ``layer_kind_<kind>_params_per_card`` and ``params_outside_layers_per_card``.
PER_CARD = ("params_per_card", "params_per_card", "param", "parameters/card")


def _columns(result) -> tuple:
    return COLUMNS + ((PER_CARD,) if "params_outside_layers_per_card" in result.values else ())


def layer_rows(result) -> list[dict]:
    """One dict per layer kind: ``kind``, ``label`` and the :data:`COLUMNS` values (and
    ``params_per_card`` where a plugin places the layers on several cards).
    """
    rows = []
    for name in result.values:
        match = _COUNT.match(name)
        if match is None:
            continue
        kind = match.group(1)
        label = result.quantity(name).description.removeprefix("layers of ")
        row = {"kind": kind, "label": label}
        for suffix, key, _, _ in _columns(result):
            row[key] = float(result[f"layer_kind_{kind}_{suffix}"])
        rows.append(row)
    return rows


def _totals(result, rows: list[dict]) -> dict:
    outside = {"params": float(result["params_outside_layers"]),
               "flops_per_token": float(result["flops_per_token_outside_layers"])}
    model = {"count": float(result["layers"]), "params": float(result["params_total"]),
             "cache_bytes_per_token": float(result["kv_bytes_per_token"]),
             "state_bytes": float(result.values.get("linear_state_bytes_per_sequence", 0.0)),
             "flops_per_token": float(result["decode_flops"] / result["batch"])}
    if "params_outside_layers_per_card" in result.values:
        outside["params_per_card"] = float(result["params_outside_layers_per_card"])
        model["params_per_card"] = outside["params_per_card"] + sum(r["params_per_card"] for r in rows)
    return {"outside_layers": outside, "model": model}


def format_json(result, rows: list[dict]) -> str:
    return json.dumps({"scenario": result.scenario.name, "rows": rows, **_totals(result, rows)},
                      indent=2) + "\n"


def format_table(result, rows: list[dict]) -> str:
    from ..units import format_value

    columns = _columns(result)

    def cells(label, values):
        return [label] + [format_value(values[key], unit) if key in values else ""
                          for _, key, unit, _ in columns]

    totals = _totals(result, rows)
    header = ["layer kind"] + [heading for *_, heading in columns]
    body = [cells(row["label"], row) for row in rows]
    tail = [cells("embedding, head, final norm", totals["outside_layers"]),
            cells("model", totals["model"])]
    widths = [max(len(line[k]) for line in [header, *body, *tail]) for k in range(len(header))]

    def line(values):
        return "  ".join(c.ljust(w) if k == 0 else c.rjust(w)
                         for k, (c, w) in enumerate(zip(values, widths))).rstrip()

    rule = line(["-" * w for w in widths])
    context = format_value(float(result["context"]), "token")
    return "\n".join([f"{result.scenario.name}: layers (FLOPs per decoded token at the mean "
                      f"context of {context})", line(header), rule, *map(line, body), rule,
                      *map(line, tail)]) + "\n"


def handle(args) -> int:
    from ..engine.evaluation import evaluate_afresh
    from ..errors import InfermodelError, Problem
    from ..output import emit

    result = evaluate_afresh(load(args))
    rows = layer_rows(result)
    if not rows:
        raise InfermodelError(Problem(
            "the loaded plugins define no layer table for this scenario",
            expected="the built-in architecture plugin (it defines the layer_kind_* quantities)"))
    text = format_json(result, rows) if args.format == "json" else format_table(result, rows)
    emit(text.rstrip("\n"), args.output)
    return 0


__all__ = ["COLUMNS", "PER_CARD", "add_parser", "format_json", "format_table", "handle", "layer_rows"]
