"""Page layout that fits any theme: folded details, names that wrap, the extension's CSS.

Folding uses HTML's own ``<details>`` element rather than a dependency (sphinx-design's
dropdown needs its CSS and JavaScript and only renders in HTML): a browser opens and
closes it without script, and the other builders (LaTeX, text, man) print the summary as
a heading line followed by the content, so nothing is lost on paper.

Quantity names are long snake_case words (``kv_bytes_per_sequence_at_max_context``) that
a table cell cannot break: :class:`name_literal` is a literal whose HTML has a break
opportunity (``<wbr>``) after each underscore, which copying the name leaves out.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import ClassVar

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util.docutils import SphinxDirective

#: The stylesheet every HTML page of a project using the extension loads.
STYLESHEET = "infermodel.css"
STATIC = Path(__file__).resolve().parent / "static"


class details(nodes.General, nodes.Element):
    """A folded block: a one-line summary, then the content (``<details>`` in HTML)."""


class name_literal(nodes.literal):
    """A quantity or field name in code type that may wrap after its underscores."""


def folded(summary: str, content: list[nodes.Node], *, opened: bool = False) -> details:
    """A :class:`details` node holding ``content`` under ``summary``."""
    node = details(summary=summary, opened=opened, classes=["infermodel-details"])
    node.extend(content)
    return node


def name(text: str) -> name_literal:
    return name_literal(text, text)


def _visit_details_html(self, node: details) -> None:
    opened = " open" if node.get("opened") else ""
    classes = " ".join(node["classes"])
    self.body.append(f'<details class="{classes}"{opened}><summary>'
                     f"{html.escape(node['summary'])}</summary>\n")


def _depart_details_html(self, node: details) -> None:
    self.body.append("</details>\n")


def _visit_details_other(self, node: details) -> None:
    # Builders without folding show the summary as a line of its own above the content.
    title = nodes.paragraph("", "", nodes.strong(node["summary"], node["summary"]))
    node.insert(0, title)


def _depart_details_other(self, node: details) -> None:
    pass


def _visit_name_html(self, node: name_literal) -> None:
    text = node.astext()
    pieces = [html.escape(part) for part in text.split("_")]
    self.body.append('<code class="docutils literal notranslate infermodel-name">'
                     '<span class="pre">' + "_<wbr>".join(pieces) + "</span></code>")
    raise nodes.SkipNode


class DetailsDirective(SphinxDirective):
    """``.. infermodel-details:: summary`` folds its content (``:open:`` starts it open)."""

    required_arguments = 1
    final_argument_whitespace = True
    has_content = True
    option_spec: ClassVar[dict] = {"open": directives.flag}

    def run(self) -> list[nodes.Node]:
        node = folded(self.arguments[0], [], opened="open" in self.options)
        self.set_source_info(node)
        self.state.nested_parse(self.content, self.content_offset, node)
        return [node]


def setup_layout(app) -> None:
    """Register the nodes, the details directive and the stylesheet."""
    other = (_visit_details_other, _depart_details_other)
    app.add_node(details, html=(_visit_details_html, _depart_details_html),
                 latex=other, text=other, man=other, texinfo=other)
    app.add_node(name_literal, html=(_visit_name_html, None))
    app.add_directive("infermodel-details", DetailsDirective)
    app.add_css_file(STYLESHEET)


__all__ = ["STATIC", "STYLESHEET", "DetailsDirective", "details", "folded", "name",
           "name_literal", "setup_layout"]
