"""The ``infermodel-compare`` directive: two or more scenarios side by side.

The numbers come from :func:`infermodel.analyses.comparison.compare`; this module only
lays them out: a column of values per scenario, then each later scenario's difference
from the first and its ratio to it.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util.docutils import SphinxDirective

from .config import WARNING_TYPE, logger
from .freshness import note_document
from .layout import name as name_node
from .loading import (
    cached_result,
    note_dependencies,
    overrides_option,
    problem_text,
    quantity_list,
    scenario_files,
    split_names,
    split_overrides,
)
from .nodes import para_node, table_node

#: The column groups a comparison can show, in this order.
COMPARE_COLUMNS = ("values", "difference", "ratio")


def _compare_columns(argument: str | None) -> list[str]:
    names = split_names(argument or "")
    unknown = [n for n in names if n not in COMPARE_COLUMNS]
    if not names or unknown:
        raise ValueError(f"columns are {', '.join(COMPARE_COLUMNS)}"
                         + (f", not {', '.join(unknown)}" if unknown else ""))
    return names


def _labels_option(argument: str | None) -> list[str]:
    labels = [part.strip() for part in (argument or "").split(",") if part.strip()]
    if not labels:
        raise ValueError("give one label per scenario, separated by commas")
    return labels


def ratio_text(ratio: float | None) -> str:
    """``0.355×``, or an em dash where there is no ratio.

    >>> ratio_text(0.35494), ratio_text(None)
    ('0.355×', '—')
    """
    return "—" if ratio is None else f"{ratio:.3g}×"


def difference_text(difference: float | None, unit: str) -> str:
    """``+1.2 ms``, ``−10.36 GB``, ``0 s`` or an em dash.

    >>> difference_text(-0.0031, "s"), difference_text(2.0, "seq")
    ('−3.1 ms', '+2 seq')
    """
    from ..printing import show

    if difference is None:
        return "—"
    text = show(abs(difference), unit)
    if difference > 0:
        return "+" + text
    return "−" + text if difference < 0 else text


class CompareDirective(SphinxDirective):
    """Two or more scenarios side by side, with differences and ratios to the first."""

    required_arguments = 2
    optional_arguments = 14
    final_argument_whitespace = False
    has_content = False
    option_spec: ClassVar[dict] = {
        "quantities": quantity_list,
        "labels": _labels_option,
        "columns": _compare_columns,
        "set": overrides_option,
        "changed": directives.flag,
    }

    def run(self) -> list[nodes.Node]:
        from ..analyses.comparison import compare

        note_document(self.env)
        overrides = split_overrides(self.options.get("set", ""))
        results = []
        for argument in self.arguments:
            rel, absolute = self.env.relfn2path(argument, self.env.docname)
            path = Path(absolute)
            note_dependencies(self.env, scenario_files(path))
            if not path.is_file():
                return self._warn(f"scenario file {rel} not found", "file")
            try:
                result = cached_result(path, overrides)
            except Exception as exc:
                return self._warn(f"cannot compare scenario {rel}: "
                                  f"{problem_text(exc, overrides_as=':set')}", "scenario")
            note_dependencies(self.env, (o.file for o in result.scenario.origins.values()))
            results.append(result)
        labels = self.options.get("labels") or [r.scenario.name for r in results]
        if len(labels) != len(results):
            return self._warn(f"infermodel-compare: {len(labels)} labels for {len(results)} "
                              "scenarios", "option")
        names = self.options.get("quantities") or self._default_names(results)
        missing = [n for n in names if not any(n in r.values for r in results)]
        if missing:
            return self._warn(f"infermodel-compare: no scenario defines {', '.join(missing)}",
                              "quantity")
        rows = compare(results, names)
        if "changed" in self.options:
            rows = [row for row in rows if row.changed]
        container = nodes.container(classes=["infermodel", "infermodel-comparison"])
        container += self._table(rows, labels)
        if not rows:
            container += para_node("No quantity differs between these scenarios.")
        return [container]

    @staticmethod
    def _default_names(results) -> list[str]:
        """The first scenario's headline quantities that every scenario defines."""
        first = results[0]
        names = [h.name for h in first.graph.headlines if all(h.name in r.values for r in results)]
        return names or [n for n in first.graph.order if all(n in r.values for r in results)]

    def _warn(self, message: str, subtype: str) -> list[nodes.Node]:
        logger.warning(message, location=self.get_location(), type=WARNING_TYPE, subtype=subtype)
        return []

    def _table(self, rows, labels: list[str]) -> nodes.table:
        from ..printing import show

        groups = self.options.get("columns") or list(COMPARE_COLUMNS)
        base, others = labels[0], labels[1:]
        headers = ["Quantity"]
        if "values" in groups:
            headers += labels
        if "difference" in groups:
            headers += [f"{label} − {base}" for label in others]
        if "ratio" in groups:
            headers += [f"{label} / {base}" for label in others]
        body = []
        for row in rows:
            cells: list = [[para_node(name_node(row.name)), para_node(row.description)]]
            if "values" in groups:
                cells += ["—" if v is None else show(v, row.unit) for v in row.values]
            if "difference" in groups:
                cells += [difference_text(d, row.unit) for d in row.differences]
            if "ratio" in groups:
                cells += [ratio_text(r) for r in row.ratios]
            body.append(cells)
        numbers = len(headers) - 1
        widths = [max(24, 100 - 11 * numbers)] + [11] * numbers
        title = " against ".join([", ".join(others), base]) if len(others) < 3 else f"against {base}"
        return table_node(headers, body, widths, title=title, classes=["infermodel-compare"],
                      numeric=range(1, len(headers)))


__all__ = ["COMPARE_COLUMNS", "CompareDirective", "difference_text", "ratio_text"]
