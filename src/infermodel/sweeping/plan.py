"""Planning and evaluating a sweep: structural blocks, vector axes, chunks."""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import attrs
import numpy as np

from ..engine.reads import PluginReads, is_read, plugin_reads
from ..errors import (
    InfermodelError,
    Problem,
    ScenarioError,
    UnknownQuantityError,
    count_text,
    suggest,
)
from ..output import atomic_stream
from .axes import Axis
from .result import Chunk, SweepResult
from .writers import WRITERS

#: Points evaluated per chunk: small enough that the working set stays in cache.
DEFAULT_CHUNK = 16384
#: The largest chunk evaluated at a time.
MAX_CHUNK = 1_000_000
#: The most points one grid may have (the product of its axes' lengths), checked before
#: anything is planned. Points are evaluated and written in chunks, so memory does not
#: grow with the grid; this bounds the time.
MAX_GRID_POINTS = 10_000_000
#: The most structural combinations (presets, levers, fields read while the graph is
#: built) one sweep may have: each is a scenario and a graph of its own.
MAX_BLOCKS = 10_000
#: The most points whose validation hooks are run one by one (vector fields that a
#: plugin's validation reads).
MAX_VALIDATED_POINTS = 1_000_000
#: The most values (points × columns) a sweep may hold in memory at once
#: (:meth:`SweepPlan.run`, :func:`sweep`): 400 MB of float64.
MAX_IN_MEMORY_VALUES = 50_000_000
_MISSING = object()
_FLOAT = np.dtype(np.float64)
_BOOL = np.dtype(bool)


def _chunk_size(chunk_size: Any) -> int:
    """A checked chunk size (None: :data:`DEFAULT_CHUNK`)."""
    if chunk_size is None:
        return DEFAULT_CHUNK
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) \
            or not 1 <= chunk_size <= MAX_CHUNK:
        raise InfermodelError(Problem(f"chunk size {str(chunk_size)[:40]} is not a point count",
                                      expected=f"a whole number from 1 to {MAX_CHUNK:,}"))
    return int(chunk_size)


@attrs.frozen
class _Block:
    scenario: Any
    compiled: Any
    base: Mapping[str, Any]
    names: frozenset
    vectors: tuple  # (axis index, quantity name, float64 values per label)
    #: The compiled function's arguments with the scenario's values (float64 0-d arrays,
    #: as :class:`~infermodel.engine.evaluation.CompiledGraph` makes them), made once.
    arguments: tuple = ()
    #: Per vector, the position of its quantity among the arguments.
    positions: tuple = ()
    #: Per quantity asked for: (name, position among the outputs or None, whether bool).
    outputs: tuple = ()


def _subgraph(graph, wanted: Sequence[str]):
    """The part of ``graph`` that ``wanted`` needs (so a sweep computes nothing more)."""
    from ..engine.graph import QuantityGraph

    keep = set()
    for name in wanted:
        if name in graph:
            keep.add(name)
            keep.update(graph.ancestors(name))
    if len(keep) == len(graph.order):
        return graph
    order = tuple(n for n in graph.order if n in keep)
    return QuantityGraph(MappingProxyType({n: graph.quantities[n] for n in order}), order)


#: Structural blocks whose scenarios :meth:`SweepPlan.warnings` evaluates.
WARNING_BLOCKS = 8


class SweepPlan:
    """A checked grid, ready to evaluate in chunks (see :func:`plan_sweep`)."""

    def __init__(self, scenario, axes: list[Axis], quantities: list[str] | None, *, host=None,
                 progress: bool | None = False, select: bool = True):
        self.scenario = scenario
        self.axes = list(axes)
        self.host = host or scenario.host
        self.shape = tuple(len(a) for a in self.axes)
        self.total = math.prod(self.shape)
        if self.total > MAX_GRID_POINTS:
            sizes = " × ".join(f"{len(a):,} ({a.name})" for a in self.axes)
            raise ScenarioError(Problem(
                f"the sweep has {count_text(self.total)} points ({sizes}), more than the "
                f"{MAX_GRID_POINTS:,} one sweep may have",
                file=str(scenario.path) if scenario.path else None,
                expected=f"at most {MAX_GRID_POINTS:,} points",
                suggestion="use coarser ranges (\"A..B log2\", \"A..B N points\"), or run one "
                           "sweep per value of an axis, each written to its own file with -o"))
        self._progress = progress
        self._cache: dict[tuple, tuple] = {}
        # Made on first use, and shared by the copies a kept plan hands out (see
        # _kept_plan): the label arrays, the whole grid's indices, the result's dtypes.
        self._memo: dict[str, Any] = {}
        self._where = {}
        from ..scenario import Origin

        for axis in self.axes:
            if axis.origin == "table" and axis.key:
                origin = scenario.where(axis.key)
            else:
                origin = Origin(axis.origin or "sweep")
            for path in axis.paths:
                if origin is not None:
                    self._where[path] = origin
        self.structural = self._classify()
        self._plan(quantities, select)

    # -- classification ------------------------------------------------------------

    def _vector_capable(self, axis: Axis) -> bool:
        for path in axis.paths:
            spec = self.host.registries.field(path)
            if spec is None or spec.quantity is None or (not spec.numeric and spec.kind != "bool"):
                return False
        return True

    def _classify(self) -> set[int]:
        # The scenario's own structure is kept (see .structures): its graph, reads and
        # compiled subsets serve every sweep of it.
        from ..engine.kept import model_for

        self._kept = model_for(self.scenario, host=self.host).structure()
        self._base_reads = self._kept.reads
        structural = set()
        for i, axis in enumerate(self.axes):
            if not self._vector_capable(axis) or any(is_read(p, self._base_reads.build)
                                                     for p in axis.paths):
                structural.add(i)
        return structural

    def _block_for(self, combination: tuple) -> tuple:
        """(scenario, graph, reads) for one combination of structural choices."""
        found = self._cache.get(combination)
        if found is not None:
            return found
        if not combination:
            found = self._cache[combination] = (self.scenario, self._kept.graph, self._base_reads)
            return found
        from ..engine.graph import build_graph

        overrides: dict[str, Any] = {}
        for axis_index, label_index in combination:
            overrides.update(self.axes[axis_index].setting(label_index))
        try:
            scenario = self.scenario.with_values(overrides, host=self.host, where=self._where)
            graph = build_graph(scenario, host=self.host)
        except InfermodelError as exc:
            shown = ", ".join(f"{self.axes[a].name} = {self.axes[a].labels[k]!r}"
                              for a, k in combination)
            raise type(exc)(exc.problems, heading=f"at the sweep point {shown}") from None
        reads = plugin_reads(scenario, host=self.host) if combination else self._base_reads
        found = (scenario, graph, reads)
        self._cache[combination] = found
        return found

    def _plan(self, quantities: list[str] | None, select: bool = True) -> None:
        from ..progress import Progress

        while True:
            structural = sorted(self.structural)
            vector = [i for i in range(len(self.axes)) if i not in self.structural]
            blocks = math.prod(len(self.axes[i]) for i in structural)
            if blocks > MAX_BLOCKS:
                swept = ", ".join(self.axes[i].name for i in structural)
                raise ScenarioError(Problem(
                    f"the sweep has {count_text(blocks)} structural combinations (of {swept}), "
                    f"more than the {MAX_BLOCKS:,} one sweep may build: each is a scenario and "
                    "a quantity graph of its own",
                    file=str(self.scenario.path) if self.scenario.path else None,
                    expected=f"at most {MAX_BLOCKS:,} combinations of presets, levers and "
                             "fields read while the graph is built",
                    suggestion="sweep fewer of those values at once (one sweep per preset, say)"))
            combos = list(itertools.product(*[
                [(i, j) for j in range(len(self.axes[i]))] for i in structural]))
            promote: set[int] = set()
            graphs = []
            with Progress(len(combos), "preparing", unit="blocks",
                          enabled=self._progress if self._progress is not None else None,
                          delay=1.0) as bar:
                for combination in combos:
                    scenario, graph, reads = self._block_for(tuple(combination))
                    for i in vector:
                        if any(is_read(p, reads.build) for p in self.axes[i].paths):
                            promote.add(i)
                            continue
                        for path in self.axes[i].paths:
                            spec = self.host.registries.field(path)
                            q = graph.quantities.get(spec.quantity)
                            simple = (q is not None and q.is_input and len(q.history) == 1
                                      and q.history[0].kind == "input"
                                      and q.history[0].plugin == spec.plugin)
                            if not simple or (not self.axes[i].everywhere(path)
                                              and scenario.value(path) is None):
                                promote.add(i)
                    graphs.append((combination, scenario, graph, reads))
                    bar.update(1)
            if not promote:
                break
            self.structural |= promote
        self.vector = vector
        names: dict[str, Any] = {}
        for _, _, graph, _ in graphs:
            for name in graph.order:
                names.setdefault(name, graph.quantities[name])
        clash = [a.name for a in self.axes if a.name in names]
        if clash:
            raise ScenarioError(Problem(f"the choice name {clash[0]!r} is also a quantity name",
                                        expected="a choice name that names no quantity"))
        for combination, scenario, _graph, reads in graphs:
            self._validate_points(combination, scenario, reads, vector)
        self._graphs = graphs
        #: Every quantity some block defines, name -> Quantity (of the first block defining it).
        self.all_quantities = MappingProxyType(names)
        if select:
            self.select(quantities)
        self._structural_strides: list[tuple[int, int]] = []
        stride = 1
        for i in reversed(structural):
            self._structural_strides.insert(0, (i, stride))
            stride *= len(self.axes[i])
        strides: list[int] = []
        stride = 1
        for length in reversed(self.shape):
            strides.insert(0, stride)
            stride *= length
        self.strides = strides

    def select(self, quantities: Sequence[str] | None) -> None:
        """Compute only ``quantities`` (and what they depend on); None: every quantity."""
        from ..engine.evaluation import compile_graph

        names = self.all_quantities
        if quantities is None:
            wanted = list(names)
        else:
            wanted = []
            for name in quantities:
                if name not in names:
                    raise UnknownQuantityError(Problem(
                        f"no quantity named {name!r}", expected="a quantity defined by a loaded plugin",
                        suggestion=(suggest(str(name), names) or "check for typos?")
                        + " (`infermodel run SCENARIO --format json` lists every quantity)"))
                if name not in wanted:
                    wanted.append(name)
        self.quantities = wanted
        self.units = {n: names[n].unit for n in wanted}
        self.descriptions = {n: names[n].description for n in wanted}
        self.blocks: list[_Block] = []
        for _combination, scenario, graph, _reads in self._graphs:
            if graph is self._kept.graph:
                sub, compiled = self._kept.subset(wanted, _subgraph)
            else:
                sub = _subgraph(graph, wanted)
                compiled = compile_graph(sub)
            base = {n: sub.quantities[n].value for n in compiled.inputs}
            vectors = []
            for i in self.vector:
                axis = self.axes[i]
                for path in axis.paths:
                    spec = self.host.registries.field(path)
                    if spec.quantity not in base:
                        continue  # the quantities asked for do not depend on it
                    vectors.append((i, spec.quantity, self._vector_values(axis, path, spec, scenario)))
            place = {n: k for k, n in enumerate(compiled.inputs)}
            out = {n: k for k, n in enumerate(compiled.outputs)}
            self.blocks.append(_Block(
                scenario, compiled, base, frozenset(sub.order), tuple(vectors),
                tuple(np.asarray(base[n], dtype=float) for n in compiled.inputs),
                tuple(place[q] for _, q, _ in vectors),
                tuple((n, out.get(n), self.units[n] == "bool") for n in wanted)))

    def _validate_points(self, combination, scenario, reads: PluginReads, vector) -> None:
        """Run the validation hooks on every combination of the vector values they read.

        A vector value never goes through :func:`~infermodel.scenario.resolve`, so the
        cross-field checks that read it are run here, on the block's scenario with
        those fields replaced, once per distinct combination.
        """
        from ..progress import Progress
        from ..schema import parse_field

        checked = [i for i in vector if any(is_read(p, reads.validation) for p in self.axes[i].paths)]
        if not checked:
            return
        registries = self.host.registries
        count = math.prod(len(self.axes[i]) for i in checked)
        if count > MAX_VALIDATED_POINTS:
            names = ", ".join(self.axes[i].name for i in checked)
            raise ScenarioError(Problem(
                f"the sweep has {count_text(count)} combinations of fields that validation "
                f"checks one by one ({names}), more than {MAX_VALIDATED_POINTS:,}",
                file=str(self.scenario.path) if self.scenario.path else None,
                expected=f"at most {MAX_VALIDATED_POINTS:,} such combinations",
                suggestion="sweep fewer values of those fields at once"))
        with Progress(count, "validating", unit="points", enabled=self._progress, delay=1.0) as bar:
            for labels in itertools.product(*[range(len(self.axes[i])) for i in checked]):
                sections = dict(scenario.sections)
                changes: dict[str, dict[str, Any]] = {}
                for i, j in zip(checked, labels):
                    for path, raw in self.axes[i].setting(j).items():
                        section, _, name = path.partition(".")
                        changes.setdefault(section, {})[name] = parse_field(registries.field(path), raw)
                for section, values in changes.items():
                    sections[section] = attrs.evolve(sections[section], **values)
                point = attrs.evolve(scenario, sections=MappingProxyType(sections))
                problems: list[Problem] = []

                def report(key, message, *, expected=None, suggestion=None, point=point,
                           problems=problems):
                    problems.append(point.problem(key, message, expected=expected,
                                                  suggestion=suggestion))

                def arguments(plugin, point=point, report=report) -> dict:
                    return {"scenario": point, "report": report}

                self.host.call_each("infermodel_validate_scenario", arguments, "validation")
                if problems:
                    shown = ", ".join(
                        [f"{self.axes[a].name} = {self.axes[a].labels[k]!r}" for a, k in combination]
                        + [f"{self.axes[i].name} = {self.axes[i].labels[j]!r}"
                           for i, j in zip(checked, labels)])
                    raise ScenarioError(problems, heading=f"at the sweep point {shown}")
                bar.update(1)

    @staticmethod
    def _vector_values(axis: Axis, path: str, spec, scenario) -> np.ndarray:
        from ..schema import parse_field

        if axis.field == path:
            return np.asarray(axis.labels, dtype=np.float64)  # labels hold the typed values
        values = np.empty(len(axis), dtype=np.float64)
        for j, setting in enumerate(axis.settings or ()):
            raw = setting.get(path, _MISSING)
            typed = scenario.value(path) if raw is _MISSING else parse_field(spec, raw)
            values[j] = float(typed)
        return values

    # -- evaluation ----------------------------------------------------------------

    def __len__(self) -> int:
        return self.total

    def indices(self, start: int, stop: int) -> list[np.ndarray]:
        """Each axis's label index for the points ``start`` to ``stop`` (grid order)."""
        flat = np.arange(start, stop, dtype=np.int64)
        return [(flat // stride) % length for stride, length in zip(self.strides, self.shape)]

    def _index(self, start: int, stop: int) -> list[np.ndarray]:
        # indices(), kept read-only for a whole grid of one chunk (every call of a kept
        # plan asks for the same).
        if start or stop != self.total or stop > DEFAULT_CHUNK:
            return self.indices(start, stop)
        found = self._memo.get("index")
        if found is None:
            found = self._memo["index"] = self.indices(start, stop)
            for array in found:
                array.flags.writeable = False
        return found

    def evaluate_range(self, start: int, stop: int, *,
                       shared_constants: bool = False) -> tuple[dict, dict]:
        """Quantity columns (and masks of where each is defined) for points ``start``..``stop``.

        With ``shared_constants``, a quantity the swept fields do not reach is a read-only
        view of its one value rather than a filled array.
        """
        n = stop - start
        index = self._index(start, stop)
        if self._structural_strides:
            block_id: np.ndarray = np.add.reduce([index[i] * s for i, s in self._structural_strides])
            first = int(block_id[0])
            if n and (block_id == first).all():
                groups: list[tuple[_Block, np.ndarray | None]] = [(self.blocks[first], None)]
            else:
                order = np.argsort(block_id, kind="stable")
                ordered = block_id[order]
                cuts = np.flatnonzero(np.diff(ordered)) + 1
                groups = [(self.blocks[int(ordered[a])], order[a:b])
                          for a, b in zip(np.r_[0, cuts], np.r_[cuts, n])]
        else:
            groups = [(self.blocks[0], None)]
        if groups[0][1] is None:
            return self._whole(groups[0][0], index, n, shared_constants)
        columns: dict[str, np.ndarray] = {}
        defined: dict[str, np.ndarray] = {}
        for block, selection in groups:
            assert selection is not None
            inputs = dict(block.base)
            for axis_index, quantity, values in block.vectors:
                inputs[quantity] = values[index[axis_index][selection]]
            size = len(selection)
            outputs = block.compiled(inputs)
            for name in self.quantities:
                boolean = self.units[name] == "bool"
                value = outputs.get(name)
                if name not in columns:
                    columns[name] = np.zeros(n, bool) if boolean else np.full(n, np.nan)
                if value is None:
                    defined.setdefault(name, np.ones(n, bool))[selection] = False
                    continue
                columns[name][selection] = np.broadcast_to(np.asarray(value), (size,))
        return columns, defined

    def _whole(self, block: _Block, index: list[np.ndarray], n: int,
               shared_constants: bool) -> tuple[dict, dict]:
        """:meth:`evaluate_range` where every point is in one block: its function is called
        once on the block's arguments, each vector's values put in place.
        """
        arguments = list(block.arguments)
        for (axis_index, _, values), position in zip(block.vectors, block.positions):
            arguments[position] = values[index[axis_index]]
        outputs = block.compiled.call(arguments)
        columns: dict[str, np.ndarray] = {}
        defined: dict[str, np.ndarray] = {}
        # Quantities the swept fields do not reach come out as one value; with shared
        # constants they become rows of one read-only broadcast table (one view each).
        constant: list[tuple[str, Any, bool]] = []
        for name, position, boolean in block.outputs:
            if position is None:
                columns[name] = np.zeros(n, bool) if boolean else np.full(n, np.nan)
                defined[name] = np.zeros(n, bool)
                continue
            value = outputs[position]
            dtype = _BOOL if boolean else _FLOAT
            if type(value) is np.ndarray and value.shape == (n,):
                if value.dtype != dtype or not value.flags.writeable:
                    value = np.array(value, dtype=dtype)
                columns[name] = value
            elif np.ndim(value) == 0:
                if shared_constants:
                    columns[name] = None  # type: ignore[assignment]  # keeps the order
                    constant.append((name, value, boolean))
                else:
                    columns[name] = np.full(n, value, dtype=dtype)
            else:
                columns[name] = np.array(np.broadcast_to(np.asarray(value), (n,)), dtype=dtype)
        for boolean in (False, True):
            group = [(name, value) for name, value, b in constant if b is boolean]
            if group:
                row = np.array([value for _, value in group], dtype=_BOOL if boolean else _FLOAT)
                table = np.broadcast_to(row[:, None], (len(group), n))
                for k, (name, _) in enumerate(group):
                    columns[name] = table[k]
        return columns, defined

    def label_columns(self, index: list[np.ndarray]) -> dict[str, np.ndarray]:
        """The axes' label columns for a chunk's indices."""
        arrays = self._memo.get("labels")
        if arrays is None:
            arrays = self._memo["labels"] = [
                np.asarray(a.labels, dtype=np.float64 if a.numeric else object) for a in self.axes]
        return {axis.name: labels[positions]
                for axis, labels, positions in zip(self.axes, arrays, index)}

    def chunks(self, chunk_size: int | None = None) -> Iterator[Chunk]:
        """Evaluate the grid chunk by chunk, in grid order, showing progress if asked."""
        from ..progress import Progress

        chunk_size = _chunk_size(chunk_size)
        with Progress(self.total, "sweep", enabled=self._progress) as bar:
            for start in range(0, self.total, chunk_size):
                stop = min(start + chunk_size, self.total)
                columns, defined = self.evaluate_range(start, stop)
                labels = self.label_columns(self.indices(start, stop))
                yield Chunk(start, stop, labels, columns, defined)
                bar.update(stop - start)

    def run(self, chunk_size: int | None = None) -> SweepResult:
        """Evaluate every point and keep the columns in memory.

        Refused, before anything is allocated, when the columns would hold more than
        :data:`MAX_IN_MEMORY_VALUES` values: :meth:`write` and :meth:`chunks` stream
        any grid instead.
        """
        chunk_size = _chunk_size(chunk_size)
        width = len(self.axes) + len(self.quantities)
        held = self.total * width
        if held > MAX_IN_MEMORY_VALUES:
            raise InfermodelError(Problem(
                f"keeping {count_text(self.total)} points × {width} columns in memory is "
                f"{count_text(held)} values, more than the {MAX_IN_MEMORY_VALUES:,} one sweep "
                "result may hold",
                expected="fewer points or fewer quantities",
                suggestion="stream the points instead: SweepPlan.write(path) or "
                           "SweepPlan.chunks() (the command line's sweep -o FILE.csv does), or "
                           "ask for only the quantities you need"))
        dtypes = self._dtypes()
        defined: dict[str, np.ndarray] = {}
        if 0 < self.total <= int(chunk_size or DEFAULT_CHUNK):
            # One chunk: its columns are the result (none shared between two names; a
            # constant one stays a read-only view until read, see SweepResult).
            from ..progress import Progress

            with Progress(self.total, "sweep", enabled=self._progress) as bar:
                columns, defined = self.evaluate_range(0, self.total, shared_constants=True)
                labels = self.label_columns(self._index(0, self.total))
                bar.update(self.total)
            whole: dict[str, np.ndarray] = {}
            seen: set[int] = set()
            for name, values in {**labels, **columns}.items():
                if values.dtype != dtypes[name] or (id(values) in seen and values.flags.writeable):
                    values = np.array(values, dtype=dtypes[name])
                seen.add(id(values))
                whole[name] = values
            return SweepResult(self, {name: whole[name] for name in dtypes}, defined)
        columns = {name: np.empty(self.total, dtype=dtype) for name, dtype in dtypes.items()}
        for chunk in self.chunks(chunk_size):
            for name, values in {**chunk.labels, **chunk.columns}.items():
                columns[name][chunk.start:chunk.stop] = values
            for name, mask in chunk.defined.items():
                defined.setdefault(name, np.ones(self.total, bool))[chunk.start:chunk.stop] = mask
        return SweepResult(self, columns, defined)

    def _dtypes(self) -> dict[str, np.dtype]:
        """Each column's dtype, by name: axes, then the quantities selected."""
        quantities, dtypes = self._memo.get("dtypes", (None, None))
        if quantities is not self.quantities or dtypes is None:
            dtypes = {a.name: np.dtype(np.float64 if a.numeric else object) for a in self.axes}
            for name in self.quantities:
                dtypes[name] = _BOOL if self.units[name] == "bool" else _FLOAT
            self._memo["dtypes"] = (self.quantities, dtypes)
        return dtypes

    def write(self, output: str | os.PathLike | None, format: str = "csv", *,
              chunk_size: int | None = None, stream=None) -> None:
        """Write every point as CSV or JSON, chunk by chunk.

        To a file: through a temporary file renamed into place at the end, so an
        interruption (Ctrl-C) leaves no partial file. Without ``output``: to
        ``stream`` (standard output).
        """
        writer = WRITERS[format](self)
        if output is None:
            import sys

            stream = stream or sys.stdout
            stream.write(writer.header())
            for chunk in self.chunks(chunk_size):
                stream.write(writer.chunk(chunk))
            stream.write(writer.footer())
            return
        with atomic_stream(output) as handle:
            handle.write(writer.header())
            for chunk in self.chunks(chunk_size):
                handle.write(writer.chunk(chunk))
            handle.write(writer.footer())

    # -- points ----------------------------------------------------------------------

    def point_indices(self, index: int) -> tuple[int, ...]:
        if not 0 <= index < self.total:
            raise IndexError(f"point {index} outside the sweep's {self.total} points")
        return tuple(int(i) for i in np.unravel_index(index, self.shape)) if self.axes else ()

    def labels(self, index: int) -> dict[str, Any]:
        """The axis labels of point ``index``: ``{"workload.batch": 8, ...}``."""
        return {a.name: a.labels[j] for a, j in zip(self.axes, self.point_indices(index))}

    def overrides(self, index: int) -> dict[str, Any]:
        """The field settings of point ``index`` (``REMOVE`` removes a lever table)."""
        out: dict[str, Any] = {}
        for axis, j in zip(self.axes, self.point_indices(index)):
            out.update(axis.setting(j))
        return out

    def scenario_at(self, index: int):
        """The scenario of point ``index``, resolved and validated."""
        return self.scenario.with_values(self.overrides(index), host=self.host, where=self._where)

    def warnings(self, limit: int = WARNING_BLOCKS) -> list[tuple[str | None, Any]]:
        """The result warnings (:attr:`~infermodel.engine.evaluation.Result.warnings`) of
        each structural block's scenario at its own values — the scenario's, with the
        block's presets, levers and structural fields — as ``(label, warning)``, the label
        naming the block's choices (None for a sweep of one block). At most ``limit``
        blocks are evaluated, in grid order; a point's values may raise others (a batch
        that does not fit), which its own ``infermodel run`` shows.
        """
        from ..engine.evaluation import evaluate_afresh

        found: list[tuple[str | None, Any]] = []
        for combination, scenario, _graph, _reads in self._graphs[:limit]:
            label = ", ".join(f"{self.axes[a].name} = {self.axes[a].labels[k]}"
                              for a, k in combination) or None
            found.extend((label, w) for w in evaluate_afresh(scenario).warnings)
        return found
