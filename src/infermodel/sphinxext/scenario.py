"""The ``infermodel`` directive: a scenario's results, headline summary or derivations."""

from __future__ import annotations

import math
from pathlib import Path
from typing import ClassVar

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util.docutils import SphinxDirective

from .config import RESULT_COLUMN_NAMES, WARNING_TYPE, logger
from .freshness import note_document
from .layout import name as name_node
from .loading import (
    Shower,
    cached_result,
    note_dependencies,
    overrides_option,
    problem_text,
    quantity_list,
    scenario_files,
    split_names,
    split_overrides,
)
from .nodes import (
    ReferenceNotes,
    changed_text,
    cited_nodes,
    code_node,
    inline_math_node,
    math_block_node,
    para_node,
    plugins_text,
    table_node,
)

#: The columns a results table can show: key -> (heading, relative width).
RESULT_COLUMNS = dict(zip(RESULT_COLUMN_NAMES, [("Quantity", 21), ("Value", 11), ("Meaning", 34),
                                                ("Defined by", 14), ("Reference", 20)]))


def columns_option(argument: str | None) -> list[str]:
    """``:columns: quantity, value, meaning`` — which columns, in this order."""
    names = split_names(argument or "")
    unknown = [n for n in names if n not in RESULT_COLUMNS]
    if not names or unknown:
        raise ValueError(f"columns are {', '.join(RESULT_COLUMNS)}"
                         + (f", not {', '.join(unknown)}" if unknown else ""))
    return names


class ScenarioDirective(SphinxDirective):
    """Render a scenario's results, its headline summary, or the derivation chains of
    chosen quantities.
    """

    required_arguments = 1
    optional_arguments = 0
    final_argument_whitespace = True
    has_content = False
    option_spec: ClassVar[dict] = {
        "quantities": quantity_list,
        "chain": directives.flag,
        "depth": directives.nonnegative_int,
        "set": overrides_option,
        "columns": columns_option,
        "summary": directives.flag,
    }

    def run(self) -> list[nodes.Node]:
        note_document(self.env)
        rel, absolute = self.env.relfn2path(self.arguments[0], self.env.docname)
        path = Path(absolute)
        overrides = split_overrides(self.options.get("set", ""))
        note_dependencies(self.env, scenario_files(path))
        if not path.is_file():
            return self._warn(f"scenario file {rel} not found", "file")
        try:
            result = cached_result(path, overrides)
        except Exception as exc:
            problem = problem_text(exc, overrides_as=":set")  # reads ":set: key: ..."
            return self._warn(f"cannot render scenario {rel}: {problem}", "scenario")
        note_dependencies(self.env, (o.file for o in result.scenario.origins.values()))

        names = self.options.get("quantities") or list(self.config.infermodel_default_quantities)
        unknown = [n for n in names if n not in result]
        if unknown:
            from ..errors import suggest

            hints = []
            for n in unknown:
                hint = suggest(n, result.values)
                hints.append(f"{n!r}" + (f" ({hint})" if hint else ""))
            return self._warn(f"scenario {rel} defines no quantity {', '.join(hints)}", "quantity")
        shower = Shower(self.env.srcdir)
        if "chain" in self.options:
            out = self._chains(result, names or list(result.graph.order), shower)
        elif "summary" in self.options:
            out = self._summary(result, overrides)
        else:
            out = self._results(result, names or None, overrides)
        container = nodes.container(classes=["infermodel"])
        container.extend(out)
        notes = self._notes(result, rel, names)
        if notes:
            container += notes
        return [container]

    def _warn(self, message: str, subtype: str) -> list[nodes.Node]:
        logger.warning(message, location=self.get_location(), type=WARNING_TYPE, subtype=subtype)
        return []

    def _notes(self, result, rel: str, names: list[str]) -> nodes.admonition | None:
        """What a reader must know about the numbers, beside them; a NaN is a build warning."""
        notes = []
        for warning in result.warnings:
            if names and warning.quantity is not None and warning.quantity not in names:
                continue
            value = result.values.get(warning.quantity) if warning.quantity else None
            if isinstance(value, float) and math.isnan(value):
                logger.warning(f"scenario {rel}: {warning}", location=self.get_location(),
                               type=WARNING_TYPE, subtype="nan")
            else:
                notes.append(warning)
        if not notes:
            return None
        box = nodes.admonition(classes=["warning", "infermodel-warnings"])
        box += nodes.title("", "Read these figures with")
        items = nodes.bullet_list()
        for warning in notes:
            items += nodes.list_item("", para_node(str(warning)))
        box += items
        return box

    # -- results and summary --------------------------------------------------------

    def _results(self, result, names, overrides) -> list[nodes.Node]:
        from ..printing import show

        title = result.scenario.name
        if overrides:
            title += " (" + "; ".join(overrides) + ")"
        columns = self.options.get("columns") or list(self.config.infermodel_result_columns)
        references = ReferenceNotes(self.env)
        rows = []
        for quantity in names or result.graph.order:
            q = result.graph[quantity]
            cells = {"quantity": name_node(quantity), "value": show(result.values[quantity], q.unit),
                     "meaning": q.description, "defined-by": plugins_text(q),
                     "reference": references.cell(q.reference) if "reference" in columns else ""}
            rows.append([cells[c] for c in columns])
        table = table_node([RESULT_COLUMNS[c][0] for c in columns], rows,
                       [RESULT_COLUMNS[c][1] for c in columns], title=title,
                       classes=["infermodel-results"],
                       numeric=[i for i, c in enumerate(columns) if c == "value"])
        return [table, *references.notes()]

    def _summary(self, result, overrides) -> list[nodes.Node]:
        """The headline figures by group (memory, latency, throughput, cost, levers')."""
        from ..printing import assumptions_line, limits_line, show, summary_groups

        title = f"{result.scenario.name}: headline figures"
        if overrides:
            title += " (" + "; ".join(overrides) + ")"
        rows = []
        for group, headlines in summary_groups(result):
            for index, headline in enumerate(headlines):
                q = result.graph[headline.name]
                rows.append([group if index == 0 else "", headline.label,
                             show(result.values[headline.name], q.unit), name_node(headline.name)])
        if not rows:
            return self._results(result, None, overrides)
        out: list[nodes.Node] = [table_node(["Group", "Figure", "Value", "Quantity"], rows,
                                        [15, 37, 16, 32], title=title, numeric=[2],
                                        classes=["infermodel-summary"])]
        # Under the table, as under `infermodel run`'s summary: which limit binds in each
        # phase, then the efficiencies assumed.
        for line in (limits_line(result), assumptions_line(result)):
            if line:
                out.append(para_node(line[:1].upper() + line[1:] + "."))
        return out

    # -- derivation chains ---------------------------------------------------------

    def _chains(self, result, names, shower) -> list[nodes.Node]:
        from ..derivation import derive

        out: list[nodes.Node] = []
        display = {n: q.latex for n, q in result.graph.quantities.items() if q.latex}
        for target in names:
            derivation = derive(result, target, depth=self.options.get("depth"))
            box = nodes.container(classes=["infermodel-derivation"])
            heading = nodes.rubric("", "")
            heading += nodes.Text("Derivation of ")
            heading += code_node(target)
            heading += nodes.Text(f" in {result.scenario.name}")
            box += heading
            for step in derivation.steps:
                if not step.is_input:
                    box += self._step(step, derivation, display)
            box.extend(self._legend(derivation))
            inputs = [step for step in derivation.steps if step.is_input]
            if inputs:
                box.extend(self._inputs(result, inputs, shower))
            out.append(box)
        return out

    def _step(self, step, derivation, display) -> nodes.container:
        from ..printing import show, step_rows

        below = self._changed_below(step, derivation)
        step_box = nodes.container(classes=["infermodel-step"]
                                   + (["infermodel-changed-below"] if below else []))
        head = para_node(nodes.strong("", "", code_node(step.name)), " = ", show(step.value, step.unit),
                     f" — {step.description}")
        if below:
            head += nodes.Text(" ")
            head += nodes.inline("◆", "◆", classes=["infermodel-mark"])
        step_box += head
        step_box += math_block_node(r" \\ ".join(step_rows(step, derivation.values, display)),
                                self.env.docname)
        if step.tables:
            # What each table lookup read: the table, the grid points, the latency.
            text = "\n".join(step.tables)
            step_box += nodes.literal_block(text, text, classes=["infermodel-tables"])
        step_box += self._provenance(step, display, below, derivation)
        return step_box

    @staticmethod
    def _changed_below(step, derivation) -> list:
        cut = {s.name for s in derivation.cut}
        dependencies = sorted(s.name for s in step.expression.free_symbols) if step.expression is not None else []
        return [c for d in dependencies if d in cut for c in derivation.changed_below.get(d, ())]

    def _provenance(self, step, display, below, derivation) -> nodes.field_list:
        from ..printing import formula_latex, latex_name, plain_number, show

        fields = nodes.field_list(classes=["infermodel-provenance"])
        first = step.history[0]
        body = [nodes.Text(first.plugin)]
        if len(step.history) > 1:
            original = (plain_number(first.expression) if first.kind == "input"
                        else formula_latex(first.expression, display))
            body += [nodes.Text(", originally "),
                     inline_math_node(f"{latex_name(step.name, display.get(step.name))} = {original}")]
        if first.reference:
            body += [nodes.Text(" — "), *cited_nodes(first.reference)]
        fields += _field("defined by", body)
        for change in step.history[1:]:
            body = [nodes.Text(f"{change.plugin}: {change.reason}")]
            if change.reference:
                body += [nodes.Text(" — "), *cited_nodes(change.reference)]
            fields += _field(changed_text(change.kind), body)
        if below:
            body = [nodes.inline("◆", "◆", classes=["infermodel-mark"]),
                    nodes.Text(" a lever changed what this rests on, below the depth shown: ")]
            for index, change in enumerate(below):
                if index:
                    body.append(nodes.Text("; "))
                value = show(derivation.values[change.quantity], change.unit)
                body += [code_node(change.quantity), nodes.Text(f" = {value} ({changed_text(change.kind)} "
                                                            f"{change.plugin}: {change.reason})")]
            fields += _field("changed below", body)
        return fields

    def _legend(self, derivation) -> list[nodes.Node]:
        """Every declared symbol the formulas use, and what the depth cut leaves out."""
        from ..printing import derivation_legend, show

        out: list[nodes.Node] = []
        legend = derivation_legend(derivation)
        if legend:
            symbols = nodes.paragraph(classes=["infermodel-legend"])
            symbols += nodes.Text("Symbols: ")
            for index, (symbol, quantity, meaning) in enumerate(legend):
                symbols += inline_math_node(symbol)
                symbols += nodes.Text(" is ")
                symbols += code_node(quantity)
                symbols += nodes.Text(f" ({meaning})" + ("; " if index < len(legend) - 1 else "."))
            out.append(symbols)
        if derivation.cut:
            cut = nodes.paragraph(classes=["infermodel-cut"])
            cut += nodes.Text("Below the depth shown: ")
            for index, step in enumerate(derivation.cut):
                if index:
                    cut += nodes.Text("; ")
                cut += code_node(step.name)
                cut += nodes.Text(f" = {show(step.value, step.unit)}")
                changes = derivation.changed_below.get(step.name, ())
                if changes:
                    plugins = ", ".join(dict.fromkeys(c.plugin for c in changes))
                    cut += nodes.Text(" ")
                    cut += nodes.inline("◆", "◆", classes=["infermodel-mark"])
                    cut += nodes.Text(f" (changed by {plugins})")
            cut += nodes.Text(". ")
            cut += code_node(f"infermodel explain SCENARIO {derivation.target}")
            cut += nodes.Text(" shows every level.")
            out.append(cut)
        return out

    def _inputs(self, result, inputs, shower) -> list[nodes.Node]:
        from ..printing import show

        references = ReferenceNotes(self.env)
        rows = []
        for step in inputs:
            rows.append([name_node(step.name), show(step.value, step.unit), step.description,
                         self._input_source(result, step, shower), references.cell(step.reference)])
        table = table_node(["Input", "Value", "Meaning", "From", "Reference"], rows,
                       [18, 11, 29, 24, 18], classes=["infermodel-inputs"], numeric=[1])
        return [table, *references.notes()]

    def _input_source(self, result, step, shower) -> str:
        first = step.history[0]
        key = first.field
        if first.kind == "input" and key is not None:
            origin = result.scenario.origins.get(key)
            if origin is None:
                return f"{key} (default)"
            where = shower.path(origin.file)
            if origin.line:
                where += f":{origin.line}"
            return f"{key} ({where})"
        return f"set by plugin {first.plugin}"


def _field(label: str, body: list[nodes.Node]) -> nodes.field:
    field = nodes.field()
    field += nodes.field_name(label, label)
    content = nodes.field_body()
    content += para_node(*body)
    field += content
    return field


__all__ = ["RESULT_COLUMNS", "ScenarioDirective", "columns_option"]
