"""The quantity catalogue: ``.. infermodel-quantities::``."""

from __future__ import annotations

import glob as globmodule
import os
from collections.abc import Iterable
from pathlib import Path
from typing import ClassVar

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util.docutils import SphinxDirective

from .config import WARNING_TYPE, logger
from .loading import Shower, cached_result, note_dependencies, problem_text, scenario_files
from .nodes import changed_text, code_node, inline_math_node, para_node, reference_node, table_node


def glob_files(pattern: str) -> list[Path]:
    return sorted(Path(os.path.normpath(p)) for p in globmodule.glob(pattern) if os.path.isfile(p))


def collect_catalogue(paths: Iterable[Path], *, host=None
                      ) -> tuple[dict[str, dict], list[tuple[Path, str]], list[str]]:
    """Union the quantities of the scenarios at ``paths``.

    Returns (catalogue, failures, levers not exercised). The catalogue maps each
    quantity name to its unit, description, LaTeX symbol, the distinct definitions
    (plugin and formula, or input and where from), the changes levers made, the
    references and the scenarios that define it. A registered lever no scenario uses is
    evaluated with its default settings on the first scenario where they evaluate.

    >>> paths = Path("scenarios").glob("*.toml")
    >>> catalogue, failures, unused = collect_catalogue(paths)  # doctest: +SKIP
    >>> catalogue["tpot"]["unit"]  # doctest: +SKIP
    's'
    """
    from .. import evaluate
    from ..host import get_host

    host = host or get_host()
    catalogue: dict[str, dict] = {}
    failures: list[tuple[Path, str]] = []
    results = []
    for path in paths:
        try:
            result = cached_result(path, host=host)
        except Exception as exc:
            failures.append((path, problem_text(exc)))
            continue
        results.append((path.stem, result))
    used = {lever for _, r in results for lever in r.scenario.levers}
    bases = [r.scenario for _, r in results]
    unexercised = []
    for lever in sorted(host.registries.levers) if not host.load_errors else []:
        if lever in used:
            continue
        # The first scenario on which the lever's defaults evaluate (a lever may need,
        # say, a mixture-of-experts model).
        for base in bases:
            try:
                result = evaluate(base.with_overrides({f"levers.{lever}": {}}, host=host), host=host)
            except Exception:
                continue
            results.append((f"{base.name} with [levers.{lever}] at its defaults", result))
            break
        else:
            unexercised.append(lever)
    for label, result in results:
        for name in result.graph.order:
            q = result.graph[name]
            entry = catalogue.setdefault(name, {
                "name": name, "unit": q.unit, "descriptions": [], "latex": q.latex,
                "definitions": [], "changes": [], "references": [], "scenarios": [],
                "plugins": []})
            first = q.history[0]
            if first.kind == "input":
                definition = ("input", first.plugin, first.field)
            else:
                definition = ("define", first.plugin, first.expression)
            if definition not in entry["definitions"]:
                entry["definitions"].append(definition)
            for change in q.history[1:]:
                item = (change.kind, change.plugin, change.reason, change.reference)
                if item not in entry["changes"]:
                    entry["changes"].append(item)
            for value, key in ((q.description, "descriptions"), (first.reference, "references"),
                               (first.plugin, "plugins"), (label, "scenarios")):
                if value and value not in entry[key]:
                    entry[key].append(value)
            if entry["latex"] is None and q.latex:
                entry["latex"] = q.latex
    return dict(sorted(catalogue.items())), failures, unexercised


class CatalogueDirective(SphinxDirective):
    """The quantity catalogue of the loaded plugins, grouped by defining plugin."""

    has_content = False
    option_spec: ClassVar[dict] = {"scenarios": directives.unchanged_required}

    def run(self) -> list[nodes.Node]:
        pattern = self.options.get("scenarios")
        if pattern:
            _rel, pattern = self.env.relfn2path(pattern, self.env.docname)
        else:
            configured = (self.config.infermodel_catalogue_scenarios
                          or self.config.infermodel_scenario_pages)
            if not configured:
                logger.warning("infermodel-quantities needs :scenarios: or "
                               "infermodel_catalogue_scenarios in conf.py",
                               location=self.get_location(), type=WARNING_TYPE, subtype="config")
                return []
            pattern = configured  # made absolute when the configuration was read
        paths = glob_files(pattern)
        if not paths:
            logger.warning(f"infermodel-quantities: no scenario matches {pattern}",
                           location=self.get_location(), type=WARNING_TYPE, subtype="file")
            return []
        for path in paths:
            note_dependencies(self.env, scenario_files(path))
        try:
            catalogue, failures, unexercised = collect_catalogue(paths)
        except Exception as exc:
            logger.warning(f"cannot build the quantity catalogue: {problem_text(exc)}",
                           location=self.get_location(), type=WARNING_TYPE, subtype="scenario")
            return []
        shower = Shower(self.env.srcdir)
        for path, problem in failures:
            logger.warning(f"scenario {shower.path(str(path))} left out of the catalogue: {problem}",
                           location=self.get_location(), type=WARNING_TYPE, subtype="scenario")
        out: list[nodes.Node] = []
        summary = para_node(f"{len(catalogue)} quantities from {len(paths) - len(failures)} scenarios.")
        if unexercised:
            summary += nodes.Text(" Levers no scenario exercises (their quantities are missing): "
                                  + ", ".join(unexercised) + ".")
        out.append(summary)
        by_plugin: dict[str, list[dict]] = {}
        for entry in catalogue.values():
            by_plugin.setdefault(entry["plugins"][0], []).append(entry)
        for plugin in sorted(by_plugin):
            heading = nodes.rubric("", "", ids=[nodes.make_id(f"quantities-of-{plugin}")])
            heading += nodes.Text("Defined by plugin ")
            heading += code_node(plugin)
            out.append(heading)
            out.append(self._table(by_plugin[plugin]))
        return out

    def _table(self, entries: list[dict]) -> nodes.table:
        from ..printing import formula_latex, latex_name

        rows = []
        for entry in entries:
            name = entry["name"]
            display = {name: entry["latex"]} if entry["latex"] else {}
            first = para_node(code_node(name), ids=[nodes.make_id(f"quantity-{name}")])
            described = [first] + [para_node(text) for text in entry["descriptions"]]
            definitions = []
            for kind, plugin, payload in entry["definitions"]:
                if kind == "input":
                    text = f"input from {payload}" if payload else f"input set by {plugin}"
                    definitions.append(para_node(text))
                else:
                    definitions.append(para_node(inline_math_node(
                        f"{latex_name(name, entry['latex'])} = {formula_latex(payload, display)}")))
            provenance = [para_node(f"defined by {', '.join(entry['plugins'])}")]
            for kind, plugin, reason, _cited_by in entry["changes"]:
                provenance.append(para_node(f"{changed_text(kind)} {plugin}: {reason}"))
            references = sorted({*entry["references"],
                                 *(c[3] for c in entry["changes"] if c[3])})
            symbol = inline_math_node(entry["latex"]) if entry["latex"] else ""
            rows.append([described, symbol, entry["unit"],
                         definitions, provenance, [reference_node(r) for r in references] or ""])
        return table_node(["Quantity", "Symbol", "Unit", "Definition", "Provenance", "Reference"],
                      rows, [22, 8, 6, 30, 18, 20], classes=["infermodel-catalogue"])
