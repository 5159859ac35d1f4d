"""The ``infermodel-ops`` directive: a scenario's operator table for one phase."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util.docutils import SphinxDirective

from .config import WARNING_TYPE, logger
from .loading import (
    cached_result,
    note_dependencies,
    overrides_option,
    problem_text,
    scenario_files,
    split_overrides,
)
from .nodes import code_node, para_node, table_node


def _phase_option(argument: str | None) -> str:
    return directives.choice(argument, ("decode", "prefill"))


class OperatorsDirective(SphinxDirective):
    """Render a scenario's operator table (``infermodel ops``) for one phase."""

    required_arguments = 1
    final_argument_whitespace = True
    has_content = False
    option_spec: ClassVar[dict] = {"phase": _phase_option, "set": overrides_option}

    def run(self) -> list[nodes.Node]:
        from ..engine.operators import operator_summary, operator_table
        from ..units import format_value

        rel, absolute = self.env.relfn2path(self.arguments[0], self.env.docname)
        path = Path(absolute)
        phase = self.options.get("phase", "decode")
        overrides = split_overrides(self.options.get("set", ""))
        note_dependencies(self.env, scenario_files(path))
        if not path.is_file():
            logger.warning(f"scenario file {rel} not found", location=self.get_location(),
                           type=WARNING_TYPE, subtype="file")
            return []
        try:
            result = cached_result(path, overrides)
            rows = operator_table(result, phase)
        except Exception as exc:  # a warning, never a crash
            logger.warning(f"cannot render the operators of {rel}: {problem_text(exc)}",
                           location=self.get_location(), type=WARNING_TYPE, subtype="scenario")
            return []
        note_dependencies(self.env, (o.file for o in result.scenario.origins.values()))
        body = []
        for r in rows:
            intensity = "∞" if r.intensity == float("inf") else format_value(r.intensity, "FLOP/B", 3)
            body.append([code_node(r.name), format_value(r.flops, "FLOP"), format_value(r.bytes, "B"),
                         intensity, r.bound, format_value(r.time, "s"), f"{r.share:.1%}",
                         r.description])
        title = f"{result.scenario.name}: {phase} operators"
        if overrides:
            title += " (" + "; ".join(overrides) + ")"
        table = table_node(["Operator", "FLOPs", "Bytes", "Intensity", "Bound", "Time", "Share",
                        "What it does"], body, [14, 9, 9, 9, 8, 9, 6, 30], title=title,
                       classes=["infermodel-operators"])
        total = operator_summary(result, phase, rows)
        step = "decode_step_time" if phase == "decode" else "prefill_time"
        note = para_node(f"Operator FLOPs {format_value(total['flops'], 'FLOP')} (whole step "
                     f"{format_value(total['step_flops'], 'FLOP')}); sum of operator times "
                     f"{format_value(total['time_operators'], 's')} against the whole-step "
                     f"roofline's {format_value(total['time_step_roofline'], 's')}; ",
                     code_node(step), f" = {format_value(total['time_scenario'], 's')} (roofline = "
                     f"{result.scenario.value('efficiency.roofline')!r}).")
        container = nodes.container(classes=["infermodel"])
        container.extend([table, note])
        return [container]


__all__ = ["OperatorsDirective"]
