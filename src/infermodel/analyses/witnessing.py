"""Witness experiments: small seeded runs that check a formula against what happens.

A plugin registers a witness with
:func:`~infermodel.hookspecs.infermodel_register_witnesses`; ``infermodel witness``
(or :func:`run_witness`) runs it for a scenario and reports each check as a
:class:`Row`: what was measured, what the formula predicts, and whether the two agree
within the row's tolerance.

>>> w = run_witness(load_scenario("scenarios/case-study-24gb.toml"), "kv_cache")  # doctest: +SKIP
>>> w.passed, print(w.text())  # doctest: +SKIP

A scenario may list the witnesses it wants in a ``[witness]`` table, one key per
witness: ``kv_cache = true`` (default options) or a table of options
(``[witness.kv_cache]`` with ``d = 8``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from ..declarations import OPTION_KINDS, Option, WitnessInfo
from ..errors import InfermodelError, PluginError, Problem, suggest
from ..formatting import json_value


@attrs.frozen
class Row:
    """One check: a measured value beside the formula's prediction.

    ``tolerance`` is the largest accepted ``|measured − predicted|`` (relative to
    ``|predicted|`` when ``relative``); a row without a prediction or a tolerance is
    reported, not judged.

    >>> Row("multiply-adds", 120, 120, "1", tolerance=0).ok
    True
    """

    label: str
    measured: Any
    predicted: Any = None
    unit: str = "1"
    tolerance: float | None = None
    relative: bool = False
    note: str | None = None

    @property
    def difference(self) -> float | None:
        if self.measured is None or self.predicted is None:
            return None
        return float(self.measured) - float(self.predicted)

    @property
    def ok(self) -> bool | None:
        """True or False when the row is judged, None when it is only reported."""
        if self.tolerance is None or self.difference is None:
            return None
        allowed = self.tolerance * (abs(float(self.predicted)) if self.relative else 1.0)
        difference = abs(self.difference)
        return bool(difference <= allowed) if math.isfinite(difference) else False

    def to_dict(self) -> dict:
        return {"label": self.label, "measured": _json(self.measured, json_value),
                "predicted": _json(self.predicted, json_value), "unit": self.unit,
                "tolerance": self.tolerance, "relative": self.relative, "ok": self.ok,
                "note": self.note}


def _json(value, json_value):
    if value is None or isinstance(value, (bool, str)):
        return value
    return json_value(float(value))


def _rows(rows) -> tuple[Row, ...]:
    out = []
    for row in rows:
        if isinstance(row, Row):
            out.append(row)
        elif isinstance(row, (tuple, list)) and 2 <= len(row) <= 4:
            out.append(Row(*row))
        else:
            raise TypeError(f"a witness row is a Row or (label, measured, predicted, unit), not {row!r}")
    return tuple(out)


def _strings(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(values)


@attrs.frozen
class Witness:
    """The outcome of one witness experiment.

    A witness function returns ``Witness(rows=[...], parameters={...}, notes=[...])``;
    :func:`run_witness` fills in ``name``, ``description``, ``reference`` (unless the
    function gave one) and ``plugin`` from the registration.
    """

    rows: tuple[Row, ...] = attrs.field(converter=_rows)
    parameters: Mapping[str, Any] = attrs.field(factory=dict, converter=dict)
    notes: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    name: str | None = None
    description: str | None = None
    reference: str | None = None
    plugin: str | None = None

    @property
    def judged(self) -> list[Row]:
        return [row for row in self.rows if row.ok is not None]

    @property
    def failures(self) -> list[Row]:
        return [row for row in self.rows if row.ok is False]

    @property
    def passed(self) -> bool:
        """Every judged row agrees within its tolerance."""
        return not self.failures

    def text(self) -> str:
        return witness_text(self)

    def __str__(self) -> str:
        return self.text()

    def to_dict(self) -> dict:
        return {"name": self.name, "description": self.description, "reference": self.reference,
                "plugin": self.plugin,
                "parameters": {k: (json_value(v) if isinstance(v, float) else v)
                               for k, v in self.parameters.items()},
                "rows": [row.to_dict() for row in self.rows], "notes": list(self.notes),
                "passed": self.passed}


def _number(value: Any, unit: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    value = float(value)
    if value.is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e7):
        return f"{value:.4g}"
    return f"{value:.4f}".rstrip("0").rstrip(".") if abs(value) < 10 else f"{value:,.2f}"


def _tolerance(row: Row) -> str:
    if row.tolerance is None or row.predicted is None:
        return ""
    if row.relative:
        return f"±{row.tolerance:.0%}" if row.tolerance >= 0.01 else f"±{row.tolerance:.2g} rel."
    return "exact" if row.tolerance == 0 else f"±{_number(row.tolerance, row.unit)}"


def witness_text(witness: Witness) -> str:
    """A plain-text report: heading, parameters, one line per row, verdict, notes."""
    lines = [f"{witness.name}: {witness.description}" if witness.description else str(witness.name)]
    if witness.parameters:
        lines.append("  " + ", ".join(f"{k} = {v}" for k, v in witness.parameters.items()))
    table = [("check", "measured", "predicted", "unit", "tolerance", "")]
    for row in witness.rows:
        verdict = {True: "ok", False: "FAIL", None: ""}[row.ok]
        unit = "" if row.unit == "1" else row.unit
        table.append((row.label, _number(row.measured, row.unit), _number(row.predicted, row.unit),
                      unit, _tolerance(row), verdict))
    widths = [max(len(r[i]) for r in table) for i in range(6)]
    lines.append("")
    for r in table:
        cells = [r[0].ljust(widths[0])] + [r[i].rjust(widths[i]) for i in (1, 2)] + \
                [r[3].ljust(widths[3]), r[4].ljust(widths[4]), r[5]]
        lines.append("  " + "  ".join(cells).rstrip())
    lines.append("")
    judged, failures = len(witness.judged), len(witness.failures)
    if failures:
        lines.append(f"  FAILED: {failures} of {judged} checks outside tolerance")
    else:
        lines.append(f"  passed: {judged} of {judged} checks within tolerance")
    for row in witness.rows:
        if row.note:
            lines.append(f"  - {row.label}: {row.note}")
    lines.extend(f"  {note}" for note in witness.notes)
    if witness.reference:
        lines.append(f"  Reference: {witness.reference}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------
# Finding and running witnesses
# ---------------------------------------------------------------------------------


def witness_registries(scenario, host=None):
    """The registries whose witnesses apply to ``scenario``: those of the host that read
    it, or of ``host`` when one is given.
    """
    return (host or scenario.host).registries


def unknown_witness(name: str, known: Mapping[str, Any], **where) -> Problem:
    listing = ", ".join(sorted(known)) or "none are loaded"
    return Problem(f"no loaded plugin provides a witness named {name!r}",
                   expected=f"one of {listing}",
                   suggestion=suggest(str(name), known)
                   or "`infermodel witness SCENARIO --list` lists them", **where)


def typed_options(info: WitnessInfo, options: Mapping[str, Any] | None, *, problem=None) -> dict[str, Any]:
    """Check ``options`` against a witness's declared options; return them typed, with
    defaults filled in. Raises :class:`InfermodelError` listing every problem.

    ``problem(key, message, expected=None, suggestion=None)`` builds a located
    :class:`Problem` (a scenario's file and line); by default the key is named as
    ``--option key``.
    """
    def default_problem(key, message, expected=None, suggestion=None):
        return Problem(message, key=f"--option {key}", expected=expected, suggestion=suggestion)

    make = problem or default_problem
    options = dict(options or {})
    if not info.options:
        return options      # the witness reads its options itself
    problems = []
    typed = {key: option.default for key, option in info.options.items()}
    for key, value in options.items():
        option = info.options.get(key)
        if option is None:
            problems.append(make(key, f"witness {info.name!r} has no option {key!r}",
                                 expected="one of " + ", ".join(sorted(info.options)),
                                 suggestion=suggest(str(key), info.options)))
            continue
        try:
            typed[key] = option.parse(value)
        except ValueError as exc:
            problems.append(make(key, str(exc), expected=option.expected()))
    if problems:
        raise InfermodelError(problems)
    return typed


def run_witness(scenario, name: str, options: Mapping[str, Any] | None = None, *,
                host=None) -> Witness:
    """Run the witness ``name`` for ``scenario`` with ``options`` (raw values: TOML
    values or ``--option`` text); return its :class:`Witness`.

    Unknown names and options are user errors (:class:`InfermodelError`) with a close
    match; an exception inside the witness is a :class:`PluginError` naming its plugin.

    >>> run_witness(scenario, "kv_cache", {"d": "8"}).passed  # doctest: +SKIP
    True
    """
    witnesses = witness_registries(scenario, host).witnesses
    info = witnesses.get(name)
    if info is None:
        raise InfermodelError(unknown_witness(name, witnesses))
    typed = typed_options(info, options)
    try:
        result = info.function(scenario, typed)
    except InfermodelError:
        raise
    except Exception as exc:
        raise PluginError(f"plugin {info.plugin!r} failed in witness {name!r}: "
                          f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(result, Witness):
        raise PluginError(f"plugin {info.plugin!r}: witness {name!r} returned "
                          f"{type(result).__name__}, not an infermodel.analyses.witnessing.Witness")
    return attrs.evolve(result, name=name, description=info.description,
                        reference=result.reference or info.reference, plugin=info.plugin)


def scenario_witnesses(scenario, *, host=None) -> list[tuple[str, dict[str, Any]]]:
    """The witnesses a scenario's ``[witness]`` table asks for, with their options as
    written (checked against the declared options, so that every problem is found
    before anything runs).

    Each key names a witness; its value is ``true`` (default options), ``false``
    (skipped) or a table of options. Every problem is reported at once, with the file,
    key path and line.
    """
    table = scenario.tables.get("witness") if scenario.tables else None
    if not table:
        return []
    witnesses = witness_registries(scenario, host).witnesses
    problems: list[Problem] = []
    planned = []
    for name, value in table.items():
        key = f"witness.{name}"
        info = witnesses.get(name)
        if info is None:
            base = unknown_witness(name, witnesses)
            located = scenario.problem(key, base.message, expected=base.expected,
                                       suggestion=base.suggestion)
            problems.append(located)
            continue
        if value is False:
            continue
        if value is True:
            value = {}
        if not isinstance(value, Mapping):
            problems.append(scenario.problem(key, f"got {value!r}", expected=(
                f"true, false or a [witness.{name}] table of options")))
            continue

        def located(option, message, expected=None, suggestion=None, _key=key):
            return scenario.problem(f"{_key}.{option}", message, expected=expected,
                                    suggestion=suggestion)

        try:
            typed_options(info, value, problem=located)
            planned.append((name, dict(value)))
        except InfermodelError as exc:
            problems.extend(exc.problems)
    if problems:
        raise InfermodelError(problems)
    return planned


__all__ = ["OPTION_KINDS", "Option", "Row", "Witness", "run_witness", "scenario_witnesses", "typed_options",
           "witness_text"]
