"""The ``infermodel-fields``, ``infermodel-levers``, ``infermodel-cli`` and
``infermodel-command`` directives (``infermodel`` itself is in :mod:`.scenario`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

from .config import WARNING_TYPE, logger
from .freshness import note_document
from .layout import name as name_node
from .loading import (
    note_dependencies,
    problem_text,
    quantity_list,
    scenario_files,
    split_names,
)
from .nodes import (
    cited_nodes,
    code_node,
    para_node,
    table_node,
)

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
                key = para_node(name_node(spec.name), ids=[nodes.make_id(f"field-{spec.path}")])
                rows.append([key, spec.expected(), "" if spec.unit == "1" else spec.unit,
                             _default_text(spec), spec.description,
                             code_node(spec.quantity) if spec.quantity else "", spec.plugin])
            out.append(table_node(["Key", "Accepts", "Unit", "Default", "Meaning", "Quantity", "Plugin"],
                              rows, [14, 22, 6, 12, 30, 12, 10], title=f"[{section}]",
                              classes=["infermodel-fields"]))
        return out


def accepts_text(attribute: Any) -> str:
    """A lever field's type and, where known, its bounds: ``integer, 0 to 32`` (the
    field's ``metadata["accepts"]``, else :func:`~infermodel.declarations.validator_bounds`
    of its validator).
    """
    from ..declarations import validator_bounds

    bounds = attribute.metadata.get("accepts") or validator_bounds(attribute.validator)
    text = type_text(attribute.type)
    return f"{text}, {bounds}" if bounds else text


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
                rows.append([name_node(attribute.name), accepts_text(attribute), shown, about_key])
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
                                           language="text", classes=["infermodel-cli"]))
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
            section += nodes.literal_block(text, text, language="text", classes=["infermodel-cli"])
            out.append(section)
        return out


def _plugins_option(argument: str | None) -> list[str]:
    names = split_names(argument or "")
    if not names:
        raise ValueError("give entry-point names of plugins, and 'builtin' for every "
                         "plugin that ships with infermodel")
    return names


#: Plugin hosts of ``:plugins:`` selections, kept for the process (loading is slow).
_HOSTS: dict[tuple[str, ...], Any] = {}
BUILTIN = "builtin"


@contextlib.contextmanager
def _environment(**values: str | None):
    saved = {key: os.environ.get(key) for key in values}
    try:
        for key, value in values.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _selected_host(names: list[str]):
    """A plugin host that loads only ``names`` from the entry points (``builtin``: every
    built-in plugin), made once per selection.
    """
    from ..host import ENTRY_POINT_GROUP, OWN_DISTRIBUTION, PluginHost

    key = tuple(sorted(set(names)))
    if key not in _HOSTS:
        wanted = set(names) - {BUILTIN}
        if BUILTIN in names:
            wanted |= {ep.name for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)
                       if ep.dist is not None and ep.dist.metadata["Name"] == OWN_DISTRIBUTION}
        with _environment(INFERMODEL_LOAD_PLUGINS=",".join(sorted(wanted)),
                          INFERMODEL_DISABLE_PLUGIN_AUTOLOAD=None):
            _HOSTS[key] = PluginHost()
    return _HOSTS[key]


@contextlib.contextmanager
def _plugins(names: list[str] | None):
    """Run with only the plugins ``names`` loaded (None: the build's own host)."""
    from ..host import get_host, set_host

    if names is None:
        yield
        return
    previous = get_host()
    set_host(_selected_host(names))
    try:
        yield
    finally:
        set_host(previous)


def _unknown_plugins(names: list[str]) -> list[str]:
    from ..errors import suggest
    from ..host import ENTRY_POINT_GROUP

    known = sorted({ep.name for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)} | {BUILTIN})
    out = []
    for plugin in names:
        if plugin not in known:
            hint = suggest(plugin, known)
            out.append(f"{plugin!r}" + (f" ({hint})" if hint else ""))
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
    option_spec: ClassVar[dict] = {"plugins": _plugins_option}

    def run(self) -> list[nodes.Node]:
        import io
        import shlex

        from ..cli import main

        note_document(self.env)
        command = " ".join(self.arguments[0].split())
        selection = self.options.get("plugins")
        unknown = _unknown_plugins(selection or [])
        if unknown:
            logger.warning(f"infermodel-command: :plugins: names no installed plugin "
                           f"{', '.join(unknown)}", location=self.get_location(),
                           type=WARNING_TYPE, subtype="option")
            return []
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
        with (_plugins(selection), contextlib.chdir(cwd), contextlib.redirect_stdout(out),
              contextlib.redirect_stderr(err)):
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
