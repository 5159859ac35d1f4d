"""Which scenario fields plugins read while validating and building.

A field no plugin reads while building reaches the formulas only as an input
quantity's value, so a sweep may vary it in arrays.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs


def _recording_scenario(scenario, reads: set):
    from ..scenario import Scenario

    class Recording(Scenario):
        """The scenario, noting every field and lever a plugin asks for."""

        def value(self, path: str):
            reads.add(path)
            return Scenario.value(scenario, path)

        def lever(self, name: str):
            reads.add(f"levers.{name}")
            return Scenario.lever(scenario, name)

        def given(self, path: str):
            # Whether anything under ``path`` is written: every field below it counts.
            reads.add(path)
            reads.add(f"{path}.*")
            return Scenario.given(scenario, path)

    class Sections(Mapping):
        def __init__(self, data, prefix):
            self._data = data
            self._prefix = prefix

        def __getitem__(self, key):
            reads.add(f"{self._prefix}{key}.*")
            return self._data[key]

        def __iter__(self):
            reads.add(f"{self._prefix}*")
            return iter(self._data)

        def __len__(self):
            return len(self._data)

    values = {f.name: getattr(scenario, f.name) for f in attrs.fields(Scenario)}
    values["sections"] = Sections(scenario.sections, "")
    values["levers"] = Sections(scenario.levers, "levers.")
    return Recording(**values)


@attrs.frozen
class PluginReads:
    """Field paths (and ``levers.NAME``) plugins read from a scenario.

    ``validation``: read by ``infermodel_validate_scenario``; ``build``: read while
    defining or transforming quantities. A path ending in ``.*`` means a whole
    section or lever table was read.
    """

    validation: frozenset
    build: frozenset


def plugin_reads(scenario, *, host=None) -> PluginReads:
    """Which fields the loaded plugins read to validate ``scenario`` and to build its graph.

    The hooks are called with a recording copy of the scenario and callbacks that
    do nothing; a field no plugin reads while building can only reach the
    formulas as an input quantity's value, so a sweep may vary it in arrays.
    """
    from .graph import Transformer

    host = host or scenario.host

    def ignore(*args, **kwargs):
        return None

    validation: set[str] = set()
    recorder = _recording_scenario(scenario, validation)
    host.call_each("infermodel_validate_scenario",
                   lambda p: {"scenario": recorder, "report": ignore}, "validation")
    build: set[str] = set()
    recorder = _recording_scenario(scenario, build)
    host.call_each("infermodel_define_quantities",
                   lambda p: {"scenario": recorder, "define": ignore}, "define")
    host.call_each("infermodel_transform_quantities",
                   lambda p: {"scenario": recorder, "transform": Transformer(p, [])}, "transform")
    return PluginReads(frozenset(validation), frozenset(build))


def is_read(path: str, reads: frozenset[str]) -> bool:
    if path in reads or "*" in reads:
        return True
    parts = path.split(".")
    return any(".".join(parts[:i]) + ".*" in reads for i in range(1, len(parts)))
