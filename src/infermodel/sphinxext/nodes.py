"""Small docutils node builders shared by the directives."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from docutils import nodes


def table_node(headers: list[str], rows: list[list[Any]], widths: list[int], *, title: str | None = None,
           classes: Iterable[str] = ()) -> nodes.table:
    table = nodes.table(classes=["infermodel-table", *classes])
    if title:
        table += nodes.title(title, title)
    group = nodes.tgroup(cols=len(headers))
    table += group
    for width in widths:
        group += nodes.colspec(colwidth=width)
    head = nodes.thead()
    group += head
    head += _row(headers)
    body = nodes.tbody()
    group += body
    for row in rows:
        body += _row(row)
    return table


def _row(cells: list[Any]) -> nodes.row:
    row = nodes.row()
    for cell in cells:
        entry = nodes.entry()
        for item in cell if isinstance(cell, list) else [cell]:
            entry += _block(item)
        row += entry
    return row


def _block(item: Any) -> nodes.Node:
    """A body element for a table cell: paragraphs and tables as they are, the rest wrapped."""
    if isinstance(item, (nodes.paragraph, nodes.table, nodes.literal_block, nodes.bullet_list)):
        return item
    if isinstance(item, nodes.Node):
        return para_node(item)
    return para_node(str(item))


def para_node(*children, **attributes) -> nodes.paragraph:
    para = nodes.paragraph("", "", **attributes)
    for child in children:
        para += nodes.Text(child) if isinstance(child, str) else child
    return para


def code_node(text: str) -> nodes.literal:
    return nodes.literal(text, text)


def inline_math_node(latex: str) -> nodes.math:
    return nodes.math(latex, latex)


def math_block_node(latex: str, docname: str) -> nodes.math_block:
    return nodes.math_block(latex, latex, nowrap=False, number=None, docname=docname, label=None)


#: Source documents cited by title, and the label of their entry on the sources page.
SOURCES = {"Module 10: Inference and serving": "source-module-10",
           "Inference lab": "source-inference-lab"}


def cited_nodes(text: str) -> list[nodes.Node]:
    """``text`` with every source title in it a link to that source's entry."""
    from sphinx import addnodes

    out: list[nodes.Node] = []
    rest = text
    while rest:
        found = [(rest.find(title), title) for title in SOURCES if title in rest]
        if not found:
            out.append(nodes.Text(rest))
            break
        at, title = min(found)
        if at:
            out.append(nodes.Text(rest[:at]))
        link = addnodes.pending_xref("", refdomain="std", reftype="ref",
                                     reftarget=SOURCES[title], refexplicit=True)
        link += nodes.inline(title, title)
        out.append(link)
        rest = rest[at + len(title):]
    return out


def reference_node(text: str | None) -> nodes.paragraph | str:
    """A reference cell: the text, with its cited sources linked."""
    return para_node(*cited_nodes(text)) if text else ""


def changed_text(kind: str) -> str:
    return {"replace": "replaced by", "wrap": "wrapped by"}.get(kind, f"{kind} by")


def plugins_text(q) -> str:
    return " → ".join([q.plugin, *q.changed_by])
