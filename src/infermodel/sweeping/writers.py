"""Streaming CSV and JSON writers of sweep chunks."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np

from ..formatting import json_number, non_finite_json

if TYPE_CHECKING:
    from .plan import SweepPlan
    from .result import Chunk


def _number_text(values: np.ndarray) -> list[str]:
    """Shortest round-trip text of floats; integral values without a decimal point."""
    if values.dtype == bool:
        return ["true" if v else "false" for v in values.tolist()]
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        integral = np.isfinite(values) & (values == np.trunc(values)) & (np.abs(values) < 2**53)
    if integral.all():
        return values.astype(np.int64).astype(str).tolist()
    return list(map(float.__repr__, values.tolist()))


def _csv_field(text: str) -> str:
    if any(c in text for c in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text


class _CsvWriter:
    def __init__(self, plan: SweepPlan):
        self.plan = plan
        self.names = [a.name for a in plan.axes] + list(plan.quantities)
        self._label_text = {a.name: {lbl: _csv_field(str(lbl)) for lbl in a.labels}
                            for a in plan.axes if not a.numeric}

    def header(self) -> str:
        return ",".join(_csv_field(n) for n in self.names) + "\n"

    def chunk(self, chunk: Chunk) -> str:
        texts = []
        for axis in self.plan.axes:
            values = chunk.labels[axis.name]
            if axis.numeric:
                texts.append(_number_text(values))
            else:
                lookup = self._label_text[axis.name]
                texts.append([lookup[v] for v in values.tolist()])
        for name in self.plan.quantities:
            text = _number_text(chunk.columns[name])
            mask = chunk.defined.get(name)
            if mask is not None and not mask.all():
                text = [t if ok else "" for t, ok in zip(text, mask.tolist())]
            texts.append(text)
        if not texts:
            return ""
        return "\n".join(map(",".join, zip(*texts))) + "\n"

    def footer(self) -> str:
        return ""


def _json_text(values: np.ndarray) -> list[str]:
    """JSON text of a column: numbers, true/false, and "inf"/"-inf"/"nan" as strings."""
    text = _number_text(values)
    if values.dtype != bool and not np.isfinite(values).all():
        # The float text of a NaN or an infinity becomes the shared JSON convention's.
        special = {word: json.dumps(non_finite_json(float(word)))
                   for word in ("inf", "-inf", "nan")}
        text = [special.get(t, t) for t in text]
    return text


class _JsonWriter:
    def __init__(self, plan: SweepPlan):
        self.plan = plan
        self._first = True
        names = [a.name for a in plan.axes] + list(plan.quantities)
        self._row = "{" + ", ".join(json.dumps(n, ensure_ascii=False).replace("%", "%%") + ": %s"
                                    for n in names) + "}"
        self._label_json = {a.name: {lbl: json.dumps(lbl, ensure_ascii=False) for lbl in a.labels}
                            for a in plan.axes if not a.numeric}

    def header(self) -> str:
        plan = self.plan
        head = {
            "scenario": plan.scenario.name,
            "points": None,
            "axes": [{"name": a.name, "fields": list(a.paths),
                      "values": [json_number(v) if a.numeric else v for v in a.labels]}
                     for a in plan.axes],
            "quantities": {n: {"unit": plan.units[n], "description": plan.descriptions[n]}
                           for n in plan.quantities},
        }
        text = json.dumps(head, indent=1, ensure_ascii=False)
        # The point list is streamed: open it where the placeholder is.
        before, _, after = text.partition('"points": null')
        self._tail = after
        return before + '"count": ' + str(plan.total) + ',\n "points": ['

    def chunk(self, chunk: Chunk) -> str:
        plan = self.plan
        texts = []
        for axis in plan.axes:
            values = chunk.labels[axis.name]
            if axis.numeric:
                texts.append(_json_text(values))
            else:
                lookup = self._label_json[axis.name]
                texts.append([lookup[v] for v in values.tolist()])
        for name in plan.quantities:
            text = _json_text(chunk.columns[name])
            mask = chunk.defined.get(name)
            if mask is not None and not mask.all():
                text = [t if ok else "null" for t, ok in zip(text, mask.tolist())]
            texts.append(text)
        if not texts or chunk.stop == chunk.start:
            return ""
        rows = [self._row % row for row in zip(*texts)]
        prefix = "\n  " if self._first else ",\n  "
        self._first = False
        return prefix + ",\n  ".join(rows)

    def footer(self) -> str:
        return "\n ]" + self._tail + "\n"


WRITERS: dict[str, type[_CsvWriter] | type[_JsonWriter]] = {"csv": _CsvWriter, "json": _JsonWriter}
