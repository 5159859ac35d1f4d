"""Kept structures: a scenario evaluated again and again builds its structure once.

A scenario's **structure** is what decides its formulas: the loaded plugins, the levers
and their settings, presets, choice fields, every field a plugin reads while defining
or transforming quantities. Everything else is a **value**: a numeric (or true/false)
field that feeds an input quantity and that no plugin inspects, such as
``workload.batch`` or ``hardware.bandwidth`` in most scenarios.

A :class:`KeptScenario` (and :class:`~infermodel.sweeping.model.Model`, which adds
``sweep``) keeps, per structure, the resolved scenario, its quantity graph, its
compiled numpy function and which fields are values. Evaluating with only values
changed puts the new numbers into that compiled function (after the same typing,
range and cross-field checks loading would do); any other change builds the structure
it names once and keeps it. Results are those of a fresh :func:`infermodel.evaluate`
to the bit: the same compiled function called on the same float64 inputs, and the
same scenario, graph and values in the result. Which fields are values is the analysis
of :mod:`.reads`, the one a sweep uses to choose its vector axes.

>>> import infermodel
>>> model = infermodel.Model("scenarios/case-study-24gb.toml")  # doctest: +SKIP
>>> [model.evaluate(workload__batch=b)["tpot"] for b in (1, 8, 18)]  # doctest: +SKIP
>>> model.sweep({"workload.batch": "1..64"}, quantities=["tpot"])  # doctest: +SKIP

:func:`evaluate` (``infermodel.evaluate``) and :func:`infermodel.sweep` keep one per
scenario file (and per scenario object) they are given, so a loop over ``evaluate(path,
overrides)`` reuses it too. A model made from a path notices when that file, a file it
``extends``, a preset or a Hugging Face config it reads changes on disk, and reloads.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import attrs
import numpy as np

from .reads import PluginReads

#: Structures kept per model, and models kept for :func:`model_for`.
STRUCTURES_KEPT = 32
MODELS_KEPT = 16

#: Origins that name no file (``Origin.file`` of an override or a sweep's value).
NOT_FILES = frozenset({"--set", "sweep", ""})
_FLOAT = np.dtype(np.float64)


def _freeze(value: Any) -> Any:
    """A hashable stand-in for an override value (types kept apart: 1, 1.0, True)."""
    if isinstance(value, Mapping):
        return ("table", tuple(sorted((str(k), _freeze(v)) for k, v in value.items())))
    if isinstance(value, list | tuple):
        return ("list", tuple(_freeze(v) for v in value))
    return (type(value).__name__, value if isinstance(value, int | float | str | bool) else
            repr(value))


def _overlaps(path: str, others: Iterable[str]) -> bool:
    """Whether ``path`` is, contains or lies inside one of ``others``."""
    for other in others:
        if other == path or other.startswith(path + ".") or path.startswith(other + "."):
            return True
    return False


def _plain(value: Any) -> Any:
    # As evaluation._plain (a bool array to bool, anything else to float), quicker on the
    # scalar types the compiled function returns.
    kind = type(value)
    if kind is np.float64 or kind is float:
        return float(value)
    if kind is np.bool_ or kind is bool:
        return bool(value)
    array = np.asarray(value)
    return bool(array) if array.dtype == bool else float(array)


def _set_path(data: dict, path: str, value: Any) -> dict:
    """``data`` with ``path`` set, copying only the tables along the way."""
    head, _, rest = path.partition(".")
    out = dict(data)
    if rest:
        child = out.get(head)
        out[head] = _set_path(child if isinstance(child, dict) else {}, rest, value)
    else:
        out[head] = value
    return out


@attrs.frozen(eq=False)
class _ValueField:
    """A field whose value reaches the formulas only as one input quantity's number."""

    path: str
    spec: Any
    position: int  # of its quantity among the compiled function's inputs


#: The value change from which a structure evaluates on plain floats (see .pointwise).
POINT_AFTER = 3


class Structure:
    """One resolved scenario's graph, compiled function and value fields (see module doc)."""

    def __init__(self, scenario, host) -> None:
        from .evaluation import compile_graph
        from .graph import build_graph

        self.scenario = scenario
        self.host = host
        self.graph = build_graph(scenario, host=host)
        self.compiled = compile_graph(self.graph)
        quantities = self.graph.quantities
        self.arguments = tuple(np.asarray(quantities[n].value, dtype=float)
                               for n in self.compiled.inputs)
        self._reads: PluginReads | None = None
        self._value_fields: Mapping[str, _ValueField] | None = None
        self._result: tuple | None = None
        self._subsets: OrderedDict[tuple, tuple[Any, Any]] = OrderedDict()
        self._scalar_arguments: tuple | None = None
        self._scalar_inputs: frozenset[int] = frozenset()
        self._float_arguments: list[float] | None = None
        # Value changes so far; from POINT_AFTER on they run on plain floats
        # (.pointwise), whose function is compiled then (tens of milliseconds, which a
        # structure evaluated once or twice should not pay).
        self._changes = 0
        self._point: Any = None

    @property
    def reads(self):
        """Which fields the plugins read to validate and build (found on first use)."""
        from .reads import plugin_reads

        if self._reads is None:
            self._reads = plugin_reads(self.scenario, host=self.host)
        return self._reads

    @property
    def value_fields(self) -> Mapping[str, _ValueField]:
        """The fields that are values in this structure, by path."""
        if self._value_fields is None:
            self._value_fields = self._find_value_fields()
        return self._value_fields

    def _find_value_fields(self) -> Mapping[str, _ValueField]:
        from .reads import is_read

        quantities = self.graph.quantities
        position = {n: i for i, n in enumerate(self.compiled.inputs)}
        registries = self.host.registries
        fields: dict[str, _ValueField] = {}
        for spec in registries.all_fields():
            name = spec.quantity
            if name is None or not (spec.numeric or spec.kind == "bool"):
                continue
            q = quantities.get(name)
            simple = (q is not None and q.is_input and len(q.history) == 1
                      and q.history[0].kind == "input" and q.history[0].plugin == spec.plugin
                      and name in position)
            if simple and not is_read(spec.path, self.reads.build):
                fields[spec.path] = _ValueField(spec.path, spec, position[name])
        return MappingProxyType(fields)

    def subset(self, wanted: Sequence[str], cut) -> tuple[Any, Any]:
        """The part of the graph ``wanted`` needs (``cut(graph, wanted)``) and its
        compiled function, kept per list of names.
        """
        from .evaluation import compile_graph

        key = tuple(wanted)
        found = self._subsets.get(key)
        if found is not None:
            self._subsets.move_to_end(key)
            return found
        sub = cut(self.graph, wanted)
        found = self._subsets[key] = (sub, compile_graph(sub))
        if len(self._subsets) > STRUCTURES_KEPT:
            self._subsets.popitem(last=False)
        return found

    @property
    def scalar_arguments(self) -> tuple:
        """The inputs for a value change: numpy scalars where that is exact, else 0-d
        arrays (as a fresh evaluation passes them).

        The compiled function computes the same IEEE operations either way, save where
        numpy treats an array operand differently from a scalar one: ``**`` (an array
        takes shortcuts for some exponents) and the operators other than ``+ - * /``. An
        input that is an operand of one of those stays a 0-d array; the others become
        numpy scalars, whose arithmetic skips the array machinery (about half the cost).
        """
        if self._scalar_arguments is None:
            self._scalar_inputs = self._exact_as_scalars()
            self._scalar_arguments = tuple(
                np.float64(a) if i in self._scalar_inputs else a
                for i, a in enumerate(self.arguments))
        return self._scalar_arguments

    def _exact_as_scalars(self) -> frozenset[int]:
        import ast
        import inspect

        try:
            tree = ast.parse(inspect.getsource(self.compiled.function))
        except (OSError, TypeError, SyntaxError):
            return frozenset()
        names = set(self.compiled.inputs)
        exact = (ast.Add, ast.Sub, ast.Mult, ast.Div)
        held: set[str] = set()
        for node in ast.walk(tree):
            operands: list = []
            if isinstance(node, ast.BinOp) and not isinstance(node.op, exact):
                operands = [node.left, node.right]
            elif isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
            elif isinstance(node, ast.AugAssign | ast.BoolOp | ast.Subscript):
                operands = list(ast.iter_child_nodes(node))
            held.update(n.id for n in operands if isinstance(n, ast.Name) and n.id in names)
        return frozenset(i for i, n in enumerate(self.compiled.inputs) if n not in held)

    def result(self):
        """The result of the structure's own scenario."""
        from .evaluation import Result

        if self._result is None:
            self._result = (self._values(self.arguments),)
        return Result(self.scenario, self.graph, dict(self._result[0]))

    def _values(self, arguments: Sequence[Any]) -> dict[str, Any]:
        with np.errstate(all="ignore"):
            raw = self.compiled.function(*arguments)
        out = {}
        for name, value in zip(self.compiled.outputs, raw):
            kind = type(value)
            if kind is np.float64 or (kind is np.ndarray and value.dtype == _FLOAT):
                out[name] = float(value)
            else:
                out[name] = _plain(value)
        return out

    def with_values(self, typed: Mapping[str, Any], raw: Mapping[str, Any]):
        """The result with value fields set: ``typed`` as loading types them, ``raw`` as
        written. None when a cross-field check fails (the caller loads the scenario the
        ordinary way to report it).
        """
        from ..quantity import INPUT, Change
        from ..scenario import Origin
        from .evaluation import Result

        base = self.scenario
        sections = dict(base.sections)
        changes: dict[str, dict[str, Any]] = {}
        for path, value in typed.items():
            section, _, name = path.partition(".")
            changes.setdefault(section, {})[name] = value
        for section, values in changes.items():
            sections[section] = attrs.evolve(sections[section], **values)
        data = dict(base.raw)
        origins = dict(base.origins)
        for path, value in raw.items():
            data = _set_path(data, path, value)
            origins[path] = Origin("--set")
        scenario = attrs.evolve(base, sections=MappingProxyType(sections),
                                origins=MappingProxyType(origins), raw=MappingProxyType(data))
        if self._needs_validation(typed):
            problems: list = []

            def report(key, message, *, expected=None, suggestion=None):
                problems.append(key)

            self.host.call_each("infermodel_validate_scenario",
                                lambda plugin: {"scenario": scenario, "report": report},
                                "validation")
            if problems:
                return None
        quantities = dict(self.graph.quantities)
        changed: dict[int, float] = {}
        for path, value in typed.items():
            field = self.value_fields[path]
            number = float(value)
            q = quantities[field.spec.quantity]
            quantities[q.name] = attrs.evolve(q, value=number, history=(
                Change(INPUT, field.spec.plugin, number, f"from {path}", field=path),))
            changed[field.position] = number
        graph = attrs.evolve(self.graph, quantities=MappingProxyType(quantities))
        return Result(scenario, graph, self._changed_values(changed))

    def _changed_values(self, changed: Mapping[int, float]) -> dict[str, Any]:
        """Every quantity with the inputs at ``changed`` positions set: on plain floats
        once the structure has been changed often enough, else (and wherever the float
        function declines) with numpy; the same values to the bit either way.
        """
        from .pointwise import compile_point, evaluate_point

        self._changes += 1
        if self._changes >= POINT_AFTER:
            if self._point is None:
                self._point = compile_point(self.graph, self.compiled.outputs)
                self._float_arguments = [float(a) for a in self.arguments]
            floats = list(self._float_arguments or ())
            for position, number in changed.items():
                floats[position] = number
            raw = evaluate_point(self._point, floats)
            if raw is not None:
                return {name: value if type(value) is float else _plain(value)
                        for name, value in zip(self.compiled.outputs, raw)}
        arguments = list(self.scalar_arguments)
        scalar = self._scalar_inputs
        for position, number in changed.items():
            arguments[position] = (np.float64(number) if position in scalar
                                   else np.asarray(number, dtype=float))
        return self._values(arguments)

    def _needs_validation(self, typed: Mapping[str, Any]) -> bool:
        from .reads import is_read

        return any(is_read(path, self.reads.validation) for path in typed)


class KeptScenario:
    """A scenario (a path or a :class:`~infermodel.scenario.Scenario`) ready to be
    evaluated many times with changed fields; its structures are kept.

    ``evaluate`` takes overrides as :func:`infermodel.evaluate` does (a mapping of
    dotted field paths, or ``--set`` style ``"key=value"`` strings) and as keywords,
    with ``__`` for the dot: ``model.evaluate(workload__batch=18)``.

    >>> model = KeptScenario("scenarios/case-study-24gb.toml")  # doctest: +SKIP
    >>> model.evaluate({"workload.batch": 18})["tokens_per_s_total"]  # doctest: +SKIP
    958.9...
    """

    def __init__(self, scenario, *, host=None) -> None:
        from ..scenario import Scenario, load_raw, load_scenario

        self._given_host = host
        if isinstance(scenario, Scenario):
            # As evaluate() does: build with the host given, else the scenario's.
            self._host = host or scenario.host
            self._base = scenario
            self._raw: tuple[dict, dict] | None = None
            self.path = scenario.path
            self._files: tuple = ()
        else:
            self.path = Path(scenario)
            self._base = load_scenario(self.path, host=host)
            self._host = self._base.host
            self._raw = load_raw(self.path)
            self._files = files_signature(_files_read(self.path, self._base))
        self._structures: OrderedDict[Any, Structure] = OrderedDict()
        self._plans: OrderedDict[Any, tuple[Structure, tuple[str, ...]]] = OrderedDict()
        #: Sweep plans by their arguments (see :func:`~infermodel.sweeping.entry.sweep`).
        self.sweep_plans: OrderedDict[Any, Any] = OrderedDict()

    @property
    def scenario(self):
        """The scenario as loaded, without overrides."""
        return self._base

    @property
    def host(self):
        return self._host

    def stale(self) -> bool:
        """Whether a file the model was read from has changed since."""
        return bool(self._files) and files_signature(tuple(p for p, *_ in self._files)) != self._files

    # -- evaluation ------------------------------------------------------------------

    def evaluate(self, overrides: Mapping[str, Any] | Iterable[str] | None = None, /,
                 **keywords: Any):
        """Every quantity with ``overrides`` applied, as :func:`infermodel.evaluate` gives."""
        from ..errors import InfermodelError
        from ..schema import FieldValueError, parse_field

        wanted = self._overrides(overrides, keywords)
        try:
            structure, values = self._plan(wanted)
        except InfermodelError:
            # Loading with every override reports every mistake at once.
            return self._fresh(wanted)
        if not values:
            return structure.result()
        typed = {}
        for path in values:
            try:
                typed[path] = parse_field(structure.value_fields[path].spec, wanted[path])
            except FieldValueError:
                return self._fresh(wanted)  # reported as loading reports it
        result = structure.with_values(typed, {p: wanted[p] for p in values})
        return result if result is not None else self._fresh(wanted)

    def structure(self, overrides: Mapping[str, Any] | None = None) -> Structure:
        """The structure of the scenario with ``overrides`` (built once, then kept)."""
        return self._plan(self._overrides(overrides, {}))[0]

    @staticmethod
    def _overrides(overrides, keywords) -> dict[str, Any]:
        from ..scenario import parse_assignment

        if overrides is None:
            out: dict[str, Any] = {}
        elif isinstance(overrides, Mapping):
            out = dict(overrides)
        else:
            out = dict(parse_assignment(o) for o in overrides)
        for key, value in keywords.items():
            out[key.replace("__", ".")] = value
        return out

    def _plan(self, wanted: Mapping[str, Any]) -> tuple[Structure, tuple[str, ...]]:
        """The structure for ``wanted`` and which of its paths are values there."""
        registries = self._host.registries
        candidates = []
        structural = {}
        for path, value in wanted.items():
            spec = registries.field(path)
            if (spec is not None and spec.quantity is not None
                    and (spec.numeric or spec.kind == "bool")
                    and not _overlaps(path, [p for p in wanted if p != path])):
                candidates.append(path)
            else:
                structural[path] = value
        key = (tuple(sorted((p, _freeze(v)) for p, v in structural.items())), tuple(candidates))
        found = self._plans.get(key)
        if found is not None:
            self._plans.move_to_end(key)
            return found
        values = list(candidates)
        while True:
            structure = self._structure(structural)
            moved = [p for p in values if p not in structure.value_fields]
            if not moved:
                break
            for path in moved:
                structural[path] = wanted[path]
                values.remove(path)
        found = (structure, tuple(values))
        if not any(p in structural for p in candidates):
            # Which candidates are values depends only on the structural part: keep it.
            self._plans[key] = found
            if len(self._plans) > STRUCTURES_KEPT * 4:
                self._plans.popitem(last=False)
        return found

    def _structure(self, structural: Mapping[str, Any]) -> Structure:
        key = tuple(sorted((p, _freeze(v)) for p, v in structural.items()))
        found = self._structures.get(key)
        if found is not None:
            self._structures.move_to_end(key)
            return found
        found = Structure(self._resolve(structural), self._host)
        self._structures[key] = found
        if len(self._structures) > STRUCTURES_KEPT:
            self._structures.popitem(last=False)
        return found

    def _resolve(self, overrides: Mapping[str, Any]):
        """The scenario with ``overrides``, exactly as loading it afresh would resolve it."""
        from ..scenario import apply_overrides, resolve

        if not overrides:
            return self._base
        if self._raw is None:
            return self._base.with_overrides(overrides, host=self._given_host)
        data, origins = self._raw
        origins = dict(origins)
        data = apply_overrides(data, origins, overrides)
        return resolve(data, origins, self.path, host=self._host)

    def _fresh(self, wanted: Mapping[str, Any]):
        # The ordinary path: load, build, compile (cached), evaluate; raises its errors.
        from .evaluation import evaluate_afresh

        return evaluate_afresh(self._resolve(wanted), host=self._host)


# ---------------------------------------------------------------------------------
# Models kept for infermodel.evaluate and infermodel.sweep
# ---------------------------------------------------------------------------------

_MODELS: OrderedDict[tuple, tuple[KeptScenario, Any]] = OrderedDict()


def _files_read(path: Path, scenario) -> tuple[str, ...]:
    """Every file a scenario was read from: its ``extends`` chain, presets, HF config."""
    from ..scenario import read_toml

    files: list[str] = []
    current: Path | None = path
    while current is not None and len(files) < 64:
        files.append(str(current))
        try:
            data, _ = read_toml(current)
        except Exception:
            break
        parent = data.get("extends")
        current = current.parent / parent if isinstance(parent, str) else None
    for origin in scenario.origins.values():
        if origin.file not in NOT_FILES and origin.file not in files:
            files.append(origin.file)
    return tuple(files)


def files_signature(files: Iterable[str]) -> tuple:
    """What says whether ``files`` changed on disk: each one's time, size and inode."""
    out: list[tuple] = []
    for file in files:
        try:
            st = os.stat(file)
            out.append((file, st.st_mtime_ns, st.st_size, st.st_ino))
        except OSError:
            out.append((file, None, None, None))
    return tuple(out)


def model_for(scenario, *, host=None) -> KeptScenario:
    """The kept model for a scenario path (reloaded when its files change) or object."""
    from ..host import get_host
    from ..scenario import Scenario

    given = host
    if isinstance(scenario, Scenario):
        host = host or scenario.host
        key: tuple = ("scenario", id(scenario), id(host), given is None)
    else:
        # An entry point, as load_scenario is: a path without a host reads with the
        # process-wide one, so its kept model is that host's.
        host = host or get_host()
        key = ("path", os.path.abspath(scenario), id(host), given is None)
    found = _MODELS.get(key)
    if found is not None:
        model, kept = found
        # ``kept`` holds what the key's ids name, so that they cannot be reused meanwhile.
        if (kept[0] is scenario or not isinstance(scenario, Scenario)) and kept[1] is host \
                and kept[2] is host.registries and not model.stale():
            _MODELS.move_to_end(key)
            return model
        del _MODELS[key]
    model = KeptScenario(scenario, host=given)
    _MODELS[key] = (model, (scenario, host, host.registries))
    if len(_MODELS) > MODELS_KEPT:
        _MODELS.popitem(last=False)
    return model


def clear_models() -> None:
    """Forget every kept model (and so every kept structure)."""
    _MODELS.clear()


def evaluate(scenario, overrides: Mapping[str, Any] | Iterable[str] | None = None, *,
             host=None):
    """Every quantity of a scenario (a path or a :class:`~infermodel.scenario.Scenario`),
    as :func:`~infermodel.engine.evaluation.evaluate_afresh` gives them, keeping the structure.

    This is ``infermodel.evaluate``: evaluating the same scenario again with only values
    changed (``workload.batch``, ``hardware.bandwidth``, ...) skips loading and building.

    >>> r = evaluate("scenarios/case-study-24gb.toml", {"workload.batch": 18})  # doctest: +SKIP
    >>> round(r["tokens_per_s_total"], 1)  # doctest: +SKIP
    958.9
    """
    return model_for(scenario, host=host).evaluate(overrides)
