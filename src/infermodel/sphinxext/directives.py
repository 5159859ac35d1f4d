"""The ``infermodel``, ``infermodel-fields``, ``infermodel-levers``, ``infermodel-cli`` and
``infermodel-command`` directives.
"""

from __future__ import annotations

import argparse
import contextlib
import math
from pathlib import Path
from typing import Any, ClassVar

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util.docutils import SphinxDirective

from .config import WARNING_TYPE, logger
from .loading import (
    Shower,
    cached_result,
    note_dependencies,
    overrides_option,
    problem_text,
    quantity_list,
    scenario_files,
    split_overrides,
)
from .nodes import (
    changed_text,
    cited_nodes,
    code_node,
    inline_math_node,
    math_block_node,
    para_node,
    plugins_text,
    reference_node,
    table_node,
)


class ScenarioDirective(SphinxDirective):
    """Render a scenario's results, or the derivation chains of chosen quantities."""

    required_arguments = 1
    optional_arguments = 0
    final_argument_whitespace = True
    has_content = False
    option_spec: ClassVar[dict] = {
        "quantities": quantity_list,
        "chain": directives.flag,
        "depth": directives.nonnegative_int,
        "set": overrides_option,
    }

    def run(self) -> list[nodes.Node]:
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
        else:
            out = [self._results(result, names or None, overrides)]
        notes = []
        for warning in result.warnings:
            if names and warning.quantity is not None and warning.quantity not in names:
                continue
            value = result.values.get(warning.quantity) if warning.quantity else None
            if isinstance(value, float) and math.isnan(value):
                # a number that could not be computed breaks the page: a build warning
                logger.warning(f"scenario {rel}: {warning}", location=self.get_location(),
                               type=WARNING_TYPE, subtype="nan")
            else:
                notes.append(warning)
        container = nodes.container(classes=["infermodel"])
        container.extend(out)
        if notes:
            # what a reader must know about the numbers is shown beside them
            box = nodes.admonition(classes=["warning", "infermodel-warnings"])
            box += nodes.title("", "Read these figures with")
            items = nodes.bullet_list()
            for warning in notes:
                items += nodes.list_item("", para_node(str(warning)))
            box += items
            container += box
        return [container]

    def _warn(self, message: str, subtype: str) -> list[nodes.Node]:
        logger.warning(message, location=self.get_location(), type=WARNING_TYPE, subtype=subtype)
        return []

    # -- results -----------------------------------------------------------------

    def _results(self, result, names, overrides) -> nodes.table:
        from ..printing import show

        title = result.scenario.name
        if overrides:
            title += " (" + "; ".join(overrides) + ")"
        rows = []
        for name in names or result.graph.order:
            q = result.graph[name]
            value = show(result.values[name], q.unit)
            rows.append([code_node(name), value, q.description, plugins_text(q),
                         reference_node(q.reference)])
        return table_node(["Quantity", "Value", "Meaning", "Defined by", "Reference"],
                      rows, [16, 10, 34, 14, 26], title=title, classes=["infermodel-results"])

    # -- derivation chains ---------------------------------------------------------

    def _chains(self, result, names, shower) -> list[nodes.Node]:
        from ..derivation import derive
        from ..printing import show, step_latex, symbol_legend

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
            inputs = []
            for step in derivation.steps:
                if step.is_input:
                    inputs.append(step)
                    continue
                formula, substituted = step_latex(step, derivation.values, display)
                assert substituted is not None  # a derived step (not an input) has one
                step_box = nodes.container(classes=["infermodel-step"])
                step_box += para_node(nodes.strong("", "", code_node(step.name)), " = ",
                                  show(step.value, step.unit), f" — {step.description}")
                aligned = (formula.replace(" = ", " &= ", 1) + r" \\ "
                           + substituted.replace(" = ", " &= ", 1))
                step_box += math_block_node(aligned, self.env.docname)
                step_box += self._provenance(step, display)
                box += step_box
            legend = symbol_legend(derivation.steps)
            if legend:
                symbols = nodes.paragraph(classes=["infermodel-legend"])
                symbols += nodes.Text("Symbols: ")
                for index, (symbol, name, meaning) in enumerate(legend):
                    symbols += inline_math_node(symbol)
                    symbols += nodes.Text(" is ")
                    symbols += code_node(name)
                    symbols += nodes.Text(f" ({meaning})" + ("; " if index < len(legend) - 1 else "."))
                box += symbols
            if inputs:
                rows = []
                for step in inputs:
                    rows.append([code_node(step.name), show(step.value, step.unit), step.description,
                                 self._input_source(result, step, shower),
                                 reference_node(step.reference)])
                box += table_node(["Input", "Value", "Meaning", "From", "Reference"], rows,
                              [14, 10, 30, 24, 22], classes=["infermodel-inputs"])
            out.append(box)
        return out

    def _provenance(self, step, display) -> nodes.field_list:
        from ..printing import formula_latex, latex_name, plain_number

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
        return fields

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


def _field(name: str, body: list[nodes.Node]) -> nodes.field:
    field = nodes.field()
    field += nodes.field_name(name, name)
    content = nodes.field_body()
    content += para_node(*body)
    field += content
    return field




# ---------------------------------------------------------------------------------
# .. infermodel-fields::  and  .. infermodel-levers::
# ---------------------------------------------------------------------------------


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return repr(value)


def _default_text(spec) -> str:
    from ..registry import REQUIRED

    if spec.default is REQUIRED:
        return "required"
    if spec.default is None:
        return "optional (derived when absent)"
    return _toml_value(spec.default)


def _host_registries(directive) -> Any | None:
    from ..host import get_host

    try:
        host = get_host()
        host.check_loaded()
        return host.registries
    except Exception as exc:
        logger.warning(f"cannot read the plugins' registrations: {problem_text(exc)}",
                       location=directive.get_location(), type=WARNING_TYPE, subtype="plugin")
        return None


class FieldsDirective(SphinxDirective):
    """The fields the loaded plugins declare, one table per section."""

    has_content = False
    option_spec: ClassVar[dict] = {"sections": quantity_list}

    def run(self) -> list[nodes.Node]:
        from ..registry import FIELD_SECTIONS

        registries = _host_registries(self)
        if registries is None:
            return []
        sections = self.options.get("sections") or list(FIELD_SECTIONS)
        unknown = [s for s in sections if s not in FIELD_SECTIONS]
        if unknown:
            logger.warning(f"infermodel-fields: unknown section(s) {', '.join(unknown)}; sections "
                           f"are {', '.join(FIELD_SECTIONS)}", location=self.get_location(),
                           type=WARNING_TYPE, subtype="option")
            return []
        out: list[nodes.Node] = []
        for section in sections:
            rows = []
            for spec in registries.fields[section].values():
                key = para_node(code_node(spec.name), ids=[nodes.make_id(f"field-{spec.path}")])
                rows.append([key, spec.expected(), "" if spec.unit == "1" else spec.unit,
                             _default_text(spec), spec.description,
                             code_node(spec.quantity) if spec.quantity else "", spec.plugin])
            out.append(table_node(["Key", "Accepts", "Unit", "Default", "Meaning", "Quantity", "Plugin"],
                              rows, [14, 22, 6, 12, 30, 12, 10], title=f"[{section}]",
                              classes=["infermodel-fields"]))
        return out


def type_text(annotation: Any) -> str:
    import types
    import typing

    from ..schema import Fraction, UnitValue

    if annotation is None or annotation is type(None):
        return "none"
    if isinstance(annotation, str):
        return annotation
    if isinstance(annotation, type):
        # a value type says how a reader should think of it
        described = annotation.__dict__.get("type_description")
        if isinstance(described, str):
            return described
        choices = annotation.__dict__.get("choices")
        if isinstance(choices, tuple) and all(isinstance(c, str) for c in choices):
            return "one of " + ", ".join(_toml_value(c) for c in choices)
        if issubclass(annotation, UnitValue):
            return f"quantity in {annotation.unit} (a number or a string with a unit)"
        if issubclass(annotation, Fraction):
            return "fraction in (0, 1]"
        return {bool: "true or false", int: "integer", float: "number", str: "string"}.get(
            annotation, annotation.__name__)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        # (an optional key shows "not set" as its default: no need to say it twice)
        return " or ".join(type_text(a) for a in typing.get_args(annotation)
                           if a is not type(None))
    if origin is typing.Literal:
        return "one of " + ", ".join(_toml_value(a) for a in typing.get_args(annotation))
    if origin is dict:
        key_value = typing.get_args(annotation)
        return "table of " + (type_text(key_value[1]) + "s" if len(key_value) == 2 else "values")
    if origin in (list, tuple):
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        return "list of " + (type_text(args[0]) + "s" if args else "values")
    return str(annotation)


class LeversDirective(SphinxDirective):
    """Every registered lever's ``[levers.<name>]`` table: keys, types and defaults."""

    has_content = False
    option_spec: ClassVar[dict] = {"levers": quantity_list}

    def run(self) -> list[nodes.Node]:
        import attrs

        from ..host import get_host

        registries = _host_registries(self)
        if registries is None:
            return []
        names = self.options.get("levers") or sorted(registries.levers)
        out: list[nodes.Node] = []
        for name in names:
            info = registries.levers.get(name)
            if info is None:
                logger.warning(f"infermodel-levers: no loaded plugin provides lever {name!r}",
                               location=self.get_location(), type=WARNING_TYPE, subtype="option")
                continue
            heading = nodes.rubric("", "", ids=[nodes.make_id(f"lever-{name}")])
            heading += code_node(f"[levers.{name}]")
            out.append(heading)
            record = get_host().records.get(info.plugin)
            origin = ""
            if record is not None and record.distribution and not record.builtin:
                origin = f" (distribution {record.distribution} {record.version})"
            about = para_node(f"{info.description[:1].upper()}{info.description[1:]}. "
                          f"Provided by plugin ", code_node(info.plugin), origin + ".")
            if info.reference:
                about += nodes.Text(" Reference: ")
                about.extend(cited_nodes(info.reference))
                about += nodes.Text(".")
            out.append(about)
            with contextlib.suppress(Exception):  # unresolvable annotations are shown as written
                attrs.resolve_types(info.schema)
            rows = []
            for attribute in attrs.fields(info.schema):
                default = attribute.default
                if default is attrs.NOTHING:
                    shown = "required"
                elif isinstance(default, attrs.Factory):  # type: ignore[arg-type]
                    shown = "(computed)"
                elif default is None:
                    shown = "not set"
                else:
                    shown = _toml_value(default)
                meta = attribute.metadata
                about_key = meta.get("description") or meta.get("help") or ""
                rows.append([code_node(attribute.name), type_text(attribute.type), shown, about_key])
            if rows:
                out.append(table_node(["Key", "Accepts", "Default", "Meaning"], rows, [18, 30, 12, 40],
                                  classes=["infermodel-lever"]))
        return out


# ---------------------------------------------------------------------------------
# .. infermodel-cli::
# ---------------------------------------------------------------------------------

HELP_WIDTH = 88


def _fixed_width(parser: argparse.ArgumentParser) -> None:
    # The terminal's width must not change the documentation.
    formatter = parser.formatter_class
    parser.formatter_class = lambda prog: formatter(prog, width=HELP_WIDTH)  # type: ignore[call-arg]


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


class CliDirective(SphinxDirective):
    """The command line's help, one section per subcommand."""

    has_content = False
    option_spec: ClassVar[dict] = {"commands": quantity_list}

    def run(self) -> list[nodes.Node]:
        from ..cli import build_parser

        try:
            parser = build_parser()
        except Exception as exc:
            logger.warning(f"cannot build the command-line parser: {problem_text(exc)}",
                           location=self.get_location(), type=WARNING_TYPE, subtype="cli")
            return []
        _fixed_width(parser)
        commands = subcommands(parser)
        wanted = self.options.get("commands") or list(commands)
        out: list[nodes.Node] = []
        if not self.options.get("commands"):
            out.append(nodes.literal_block(parser.format_help(), parser.format_help(),
                                           language="text"))
        for name in wanted:
            sub = commands.get(name)
            if sub is None:
                logger.warning(f"infermodel-cli: no subcommand {name!r}",
                               location=self.get_location(), type=WARNING_TYPE, subtype="option")
                continue
            _fixed_width(sub)
            section = nodes.section(ids=[nodes.make_id(f"cli-{name}")], names=[f"infermodel {name}"])
            section += nodes.title("", "", code_node(f"infermodel {name}"))
            text = sub.format_help()
            section += nodes.literal_block(text, text, language="text")
            out.append(section)
        return out


class CommandDirective(SphinxDirective):
    """Run ``infermodel <arguments>`` and show the command with its output.

    Paths in the arguments are relative to ``infermodel_command_cwd`` (relative to the
    configuration directory; default: the configuration directory itself), so the page
    shows exactly what a reader typing the command there sees. Scenario files named in
    the arguments are page dependencies; a non-zero exit status is a located warning.
    """

    required_arguments = 1
    final_argument_whitespace = True
    has_content = False
    option_spec: ClassVar[dict] = {}

    def run(self) -> list[nodes.Node]:
        import io
        import shlex

        from ..cli import main

        command = " ".join(self.arguments[0].split())
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            logger.warning(f"infermodel-command: cannot split {command!r}: {exc}",
                           location=self.get_location(), type=WARNING_TYPE, subtype="command")
            return []
        cwd = Path(self.config.infermodel_command_cwd)  # absolute since the config was read
        for arg in argv:
            if arg.endswith(".toml"):
                note_dependencies(self.env, scenario_files(cwd / arg))
        out, err = io.StringIO(), io.StringIO()
        with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main(argv)
            except SystemExit as exc:  # argparse rejects the arguments
                status = exc.code if isinstance(exc.code, int) else 2
        if status:
            logger.warning(f"infermodel {command} exited with status {status}: "
                           f"{err.getvalue().strip()}", location=self.get_location(),
                           type=WARNING_TYPE, subtype="command")
            return []
        text = f"$ infermodel {command}\n{out.getvalue().rstrip()}"
        return [nodes.literal_block(text, text, language="text", classes=["infermodel-command"])]
