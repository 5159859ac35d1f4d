"""Small docutils node builders shared by the directives."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from docutils import nodes


def table_node(headers: list[str], rows: list[list[Any]], widths: list[int], *, title: str | None = None,
           classes: Iterable[str] = (), numeric: Iterable[int] = ()) -> nodes.table:
    """A table whose columns keep the relative ``widths`` given (HTML: a ``colgroup``
    and, with the extension's stylesheet, a fixed layout as wide as the content);
    columns at the indices in ``numeric`` are aligned right.
    """
    table = nodes.table(classes=["infermodel-table", "colwidths-given", *classes])
    if title:
        table += nodes.title(title, title)
    group = nodes.tgroup(cols=len(headers))
    table += group
    for width in widths:
        group += nodes.colspec(colwidth=width)
    right = set(numeric)
    head = nodes.thead()
    group += head
    head += _row(headers, right)
    body = nodes.tbody()
    group += body
    for row in rows:
        body += _row(row, right)
    return table


def _row(cells: list[Any], numeric: set[int] | None = None) -> nodes.row:
    row = nodes.row()
    for index, cell in enumerate(cells):
        entry = nodes.entry(classes=["infermodel-number"] if numeric and index in numeric else [])
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


#: A short label's longest part (a source's name before its first comma or colon).
SHORT_REFERENCE = 28


def short_reference(text: str) -> str:
    """A reference in a few words: each cited work's name and section, the rest left to
    the note that holds the full text.

    >>> short_reference("Module 10: Inference and serving, §2 the roofline; "
    ...                 "Inference lab, 'Two costs for one answer'")
    'Module 10 §2; Inference lab'
    """
    import re

    labels: list[str] = []
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        head = part.split(",")[0].strip()
        if ":" in head and len(head.split(":")[0]) <= SHORT_REFERENCE:
            head = head.split(":")[0].strip()
        if len(head) > SHORT_REFERENCE:
            head = head[:SHORT_REFERENCE - 1].rstrip() + "…"
        section = re.search(r"§\s*\d+(?:\.\d+)*", part)
        label = f"{head} {section.group()}" if section else head
        if label not in labels:
            labels.append(label)
    return "; ".join(labels)


class ReferenceNotes:
    """Compact reference cells for one table: a short label (the full text on hover)
    linked to a numbered note below the table; one note per distinct reference.
    """

    def __init__(self, env):
        self.env = env
        self.texts: list[str] = []
        self.ids: list[str] = []

    def cell(self, *texts: str | None) -> nodes.paragraph | str:
        wanted = [t for t in dict.fromkeys(texts) if t]
        if not wanted:
            return ""
        para = para_node()
        for position, text in enumerate(wanted):
            if text not in self.texts:
                self.texts.append(text)
                self.ids.append(f"infermodel-note-{self.env.new_serialno('infermodel-note')}")
            index = self.texts.index(text)
            link = nodes.reference("", "", internal=True, refid=self.ids[index], reftitle=text,
                                   classes=["infermodel-reference"])
            link += nodes.Text(f"{short_reference(text)} [{index + 1}]")
            if position:
                para += nodes.Text("; ")
            para += link
        return para

    def notes(self) -> list[nodes.Node]:
        """The numbered full references, to place right after the table."""
        if not self.texts:
            return []
        box = nodes.container(classes=["infermodel-notes"])
        items = nodes.enumerated_list(enumtype="arabic", prefix="", suffix=".")
        for text, anchor in zip(self.texts, self.ids):
            item = nodes.list_item(ids=[anchor])
            item += para_node(*cited_nodes(text))
            items += item
        box += items
        return [box]


def changed_text(kind: str) -> str:
    return {"replace": "replaced by", "wrap": "wrapped by"}.get(kind, f"{kind} by")


def plugins_text(q) -> str:
    return " → ".join([q.plugin, *q.changed_by])
