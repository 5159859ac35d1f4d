"""``infermodel rank``: every lever at its typical setting, ranked by what it saves.

Each plugin declares its levers' typical settings
(:func:`~infermodel.hookspecs.infermodel_register_typical_settings`); the core knows no
lever. ``rank`` evaluates the scenario as written, then each setting applied to it on its
own, and orders them by the cost per million tokens each saves.

The figure compared is ``cost_per_million_tokens`` (input and output tokens, prefill and
decode time paid, at the utilisation). A lever that shortens the requests serves the same
requests with fewer tokens, so every variant is counted per million tokens *of the
requests as written*: its cost per request over the scenario's tokens per request,
``cost_per_million_tokens · (n' + m') / (n + m)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from . import add_scenario_arguments, load

FORMATS = ("table", "json", "markdown")
#: The quantity ranked: the whole bill per million tokens.
METRIC = "cost_per_million_tokens"
#: Shown beside each row: what the lever does to speed and fit.
SIDE = ("ttft", "tpot", "fits")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "rank", help="apply every lever at its typical setting and rank them by cost saved",
        description="Evaluate the scenario, then each lever's typical setting on its own (as "
                    "each plugin declares it), and rank them by the cost per million tokens "
                    "each saves, with its time to first token, time per output token and "
                    "whether the batch still fits. Needs hardware.price_per_hour.")
    add_scenario_arguments(parser)
    parser.add_argument("--format", choices=FORMATS, default="table")
    parser.add_argument("--output", "-o", metavar="FILE", help="write to FILE (atomically)")
    parser.set_defaults(handler=handle)


@attrs.frozen
class Ranked:
    """One typical setting applied: what it sets, and the figures with it."""

    name: str
    description: str
    plugin: str
    lever: str | None
    reference: str | None
    overrides: Mapping[str, Any]
    #: "applied", "not applicable" or "rejected" (the scenario refused the setting).
    status: str
    message: str = ""
    #: The variant's cost per million of the scenario's own tokens, and the saving.
    cost: float = float("nan")
    saving: float = float("nan")
    side: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class Ranking:
    """The scenario as written and every typical setting, best saving first."""

    baseline: Any  # the evaluated scenario
    rows: tuple[Ranked, ...]

    @property
    def base_cost(self) -> float:
        return float(self.baseline[METRIC])


def _tokens(result) -> float:
    return float(result["prompt_tokens"]) + float(result["output_tokens"])


def _overrides(info, result) -> Mapping[str, Any] | None:
    from ..errors import PLUGIN_FAILURES, PluginError

    try:
        wanted = info.setting(result)
    except PLUGIN_FAILURES as exc:
        raise PluginError(f"plugin {info.plugin!r}: typical setting {info.name!r} failed: "
                          f"{type(exc).__name__}: {exc}") from exc
    if wanted is not None and (not isinstance(wanted, Mapping)
                               or not all(isinstance(k, str) for k in wanted)):
        raise PluginError(f"plugin {info.plugin!r}: typical setting {info.name!r} returned "
                          f"{type(wanted).__name__}, not a mapping of key paths to values or None")
    return wanted


def _apply(info, baseline) -> Ranked:
    from ..engine.evaluation import evaluate_afresh
    from ..errors import InfermodelError, PluginError

    record = {"name": info.name, "description": info.description, "plugin": info.plugin,
              "lever": info.lever, "reference": info.reference}
    wanted = _overrides(info, baseline)
    if wanted is None:
        on = info.lever is not None and baseline.scenario.lever(info.lever) is not None
        return Ranked(**record, overrides={}, status="not applicable",
                      message="already in the scenario" if on else "does not apply here")
    try:
        variant = evaluate_afresh(baseline.scenario.with_overrides(dict(wanted)))
    except PluginError:
        raise
    except InfermodelError as exc:
        return Ranked(**record, overrides=dict(wanted), status="rejected",
                      message=exc.problems[0].message)
    cost = float(variant[METRIC]) * _tokens(variant) / _tokens(baseline)
    side = {name: variant[name] for name in SIDE if name in variant}
    return Ranked(**record, overrides=dict(wanted), status="applied", cost=cost,
                  saving=float(baseline[METRIC]) - cost, side=side)


def rank(scenario) -> Ranking:
    """Every registered typical setting applied to ``scenario``, best saving first.

    >>> ranking = rank(load_scenario("scenarios/cost-module10-case.toml"))  # doctest: +SKIP
    >>> ranking.rows[0].name  # doctest: +SKIP
    'batch to capacity'
    """
    from ..engine.evaluation import evaluate_afresh
    from ..errors import InfermodelError, Problem

    baseline = evaluate_afresh(scenario)
    if METRIC not in baseline:
        raise InfermodelError(Problem(
            f"rank compares {METRIC}, which this scenario does not have: it needs a price",
            key="hardware.price_per_hour", file=str(scenario.path) if scenario.path else None,
            expected="hardware.price_per_hour, the rent of one card per hour",
            suggestion="add --set hardware.price_per_hour=1 to rank in units of that rent"))
    settings = scenario.host.registries.typical_settings
    rows = [_apply(settings[name], baseline) for name in sorted(settings)]
    applied = sorted((r for r in rows if r.status == "applied"),
                     key=lambda r: (-r.saving if r.saving == r.saving else float("inf"), r.name))
    return Ranking(baseline, tuple(applied + [r for r in rows if r.status != "applied"]))


def to_dict(ranking: Ranking) -> dict:
    from ..formatting import json_value

    base = ranking.baseline
    return {
        "scenario": base.scenario.name, "metric": METRIC, "unit": base.unit(METRIC),
        "baseline": {"cost": json_value(ranking.base_cost),
                     **{n: json_value(base[n]) for n in SIDE if n in base}},
        "rows": [{"name": r.name, "description": r.description, "plugin": r.plugin,
                  "lever": r.lever, "reference": r.reference, "status": r.status,
                  "message": r.message, "overrides": dict(r.overrides),
                  "cost": json_value(r.cost), "saving": json_value(r.saving),
                  "saving_share": json_value(r.saving / ranking.base_cost
                                             if ranking.base_cost else float("nan")),
                  **{n: json_value(v) for n, v in r.side.items()}} for r in ranking.rows],
    }


def _cells(ranking: Ranking) -> tuple[list[str], list[list[str]]]:
    base = ranking.baseline
    head = ["#", "setting", "cost / 1M tokens", "saved / 1M", "saved", *SIDE]

    def side(values) -> list[str]:
        return [base.show(n, values[n]) if n in values else "" for n in SIDE]

    rows = [["", "as written", base.show(METRIC), "", "", *side(base.values)]]
    for i, r in enumerate(ranking.rows, 1):
        if r.status != "applied":
            rows.append(["", r.name, r.status, r.message, "", *[""] * len(SIDE)])
            continue
        share = r.saving / ranking.base_cost if ranking.base_cost else float("nan")
        rows.append([str(i), r.name, base.show(METRIC, r.cost), base.show(METRIC, r.saving),
                     f"{share:.1%}", *side(r.side)])
    return head, rows


def table(ranking: Ranking) -> str:
    head, rows = _cells(ranking)
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head))]
    line = [f"{ranking.baseline.scenario.name}: levers at their typical settings, ranked by "
            "the cost per million tokens (of the requests as written) each saves", ""]
    for row in [head, ["-" * w for w in widths], *rows]:
        line.append("  ".join(c.rjust(w) if i in (2, 3, 4) else c.ljust(w)
                              for i, (c, w) in enumerate(zip(row, widths))).rstrip())
    line.append("")
    line.extend(f"{r.name}: {r.description}" + (f" [{r.reference}]" if r.reference else "")
                for r in ranking.rows)
    return "\n".join(line)


def markdown(ranking: Ranking) -> str:
    head, rows = _cells(ranking)
    out = [f"**{ranking.baseline.scenario.name}**: levers at their typical settings", "",
           "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    out += [""] + [f"* **{r.name}**: {r.description}" for r in ranking.rows]
    return "\n".join(out)


def handle(args) -> int:
    import json

    from ..output import emit

    ranking = rank(load(args))
    if args.format == "json":
        text = json.dumps(to_dict(ranking), indent=2)
    elif args.format == "markdown":
        text = markdown(ranking)
    else:
        text = table(ranking)
    emit(text, args.output)
    return 0
