"""Every hook infermodel calls, grouped by phase.

A plugin implements any subset of these with ``@infermodel.hookimpl`` and is found
through the ``infermodel`` entry-point group. The built-in physics and every shipped
lever use exactly these hooks; nothing else is open to them.

Hooks are called one plugin at a time, in plugin-name order, so that a failure is
reported with the plugin's name and the result never depends on load order. For the
same reason the host honours none of pluggy's ordering options: an implementation
marked ``tryfirst``, ``trylast``, ``wrapper`` or ``hookwrapper`` is refused with a
message naming its plugin.

The callbacks a hook receives are typed below as :class:`typing.Protocol` classes;
plugins reach them (and everything else they may use) through
:mod:`infermodel.plugin`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import pluggy

if TYPE_CHECKING:  # annotations only: the host imports this module first
    import sympy

    from .analyses.witnessing import Witness
    from .declarations import Encoding, Kernel, Option, Quantisation
    from .engine.evaluation import Result
    from .scenario import Scenario

hookspec = pluggy.HookspecMarker("infermodel")
hookimpl = pluggy.HookimplMarker("infermodel")

#: pluggy hookimpl options the host does not honour (hooks run in plugin-name order).
UNSUPPORTED_HOOKIMPL_OPTIONS = ("tryfirst", "trylast", "wrapper", "hookwrapper")


# ---------------------------------------------------------------------------------
# The callbacks handed to plugins
# ---------------------------------------------------------------------------------


class FieldRegistrar(Protocol):
    """``register`` of :func:`infermodel_register_fields`."""

    def __call__(self, section: str, name: str, *, kind: str, description: str,
                 unit: str = "1", default: Any = ..., minimum: float | None = None,
                 maximum: float | None = None, exclusive_minimum: bool = False,
                 choices: Sequence[str] | None = None, quantity: str | None = None) -> None: ...


class LeverRegistrar(Protocol):
    """``register`` of :func:`infermodel_register_levers`."""

    def __call__(self, name: str, schema: type, *, description: str,
                 reference: str | None = None) -> None: ...


class ValueTypeRegistrar(Protocol):
    """``register`` of :func:`infermodel_register_value_types`."""

    def __call__(self, type_: type, function: Callable[[Any, type], Any]) -> None: ...


class PresetRegistrar(Protocol):
    """``register`` of :func:`infermodel_register_presets`."""

    def __call__(self, kind: str, directory: str | os.PathLike[str]) -> None: ...


class WitnessRegistrar(Protocol):
    """``register`` of :func:`infermodel_register_witnesses`."""

    def __call__(self, name: str, function: Callable[[Scenario, dict[str, Any]], Witness], *,
                 description: str, reference: str | None = None,
                 options: Mapping[str, Option] | None = None) -> None: ...


class NumberFormatRegistrar(Protocol):
    """``register`` of :func:`infermodel_register_number_formats`."""

    def __call__(self, name: str, *, description: str, bits: float, element: Encoding,
                 metadata_bits: float = 0.0, granularity: str = "none",
                 values_per_scale: int | None = None, scale: Encoding | None = None,
                 reference: str | None = None) -> None: ...


class Quantiser(Protocol):
    """A quantiser a plugin registers with :func:`infermodel_register_quantisers`."""

    def __call__(self, values: Sequence[float], *, bits: int,
                 zero_point: bool) -> Quantisation: ...


class QuantiserRegistrar(Protocol):
    """``register`` of :func:`infermodel_register_quantisers`."""

    def __call__(self, name: str, function: Quantiser, *, description: str,
                 reference: str | None = None) -> None: ...


class HeadlineRegistrar(Protocol):
    """``register`` of :func:`infermodel_register_headlines`."""

    def __call__(self, group: str, name: str, *, label: str | None = None,
                 choices: Sequence[str] | None = None,
                 interval: tuple[str, str] | None = None) -> None: ...


class TypicalSettingRegistrar(Protocol):
    """``register`` of :func:`infermodel_register_typical_settings`."""

    def __call__(self, name: str, setting: Callable[[Result], Mapping[str, Any] | None], *,
                 description: str, lever: str | None = None,
                 reference: str | None = None) -> None: ...


class Warn(Protocol):
    """``warn`` of :func:`infermodel_check_result`."""

    def __call__(self, quantity: str | None, message: str) -> None: ...


class Report(Protocol):
    """``report`` of :func:`infermodel_validate_scenario`."""

    def __call__(self, key: str, message: str, *, expected: str | None = None,
                 suggestion: str | None = None) -> None: ...


class Define(Protocol):
    """``define`` of :func:`infermodel_define_quantities`."""

    def __call__(self, name: str, definition: sympy.Basic | float, *, unit: str,
                 description: str, reference: str | None = None,
                 latex: str | None = None, at: Mapping[str, float] | None = None) -> None: ...


class Transform(Protocol):
    """``transform`` of :func:`infermodel_transform_quantities`."""

    def replace(self, name: str, expression: sympy.Basic | float, *, reason: str,
                reference: str | None = None, order: int = 500,
                description: str | None = None) -> None: ...

    def wrap(self, name: str, function: Callable[[Any], Any], *, reason: str,
             reference: str | None = None, order: int = 500,
             description: str | None = None) -> None: ...

    def warn(self, message: str, *, quantity: str | None = None) -> None: ...


class OperatorDefine(Protocol):
    """``define`` of :func:`infermodel_define_operators`."""

    def __call__(self, phase: str, name: str, *, flops: sympy.Basic | float,
                 bytes: sympy.Basic | float, description: str, reference: str | None = None,
                 time: sympy.Basic | float | None = None, replace: bool = False,
                 kernels: Sequence[Kernel] = (),
                 compute_time: sympy.Basic | float | None = None) -> None: ...


class IterationCostRegistrar(Protocol):
    """``register`` of :func:`infermodel_iteration_cost`."""

    def __call__(self, cost: Any) -> None: ...


class OperatorTimeRegistrar(Protocol):
    """``register`` of :func:`infermodel_time_operators`."""

    def __call__(self, phase: str, operator: str, quantity: str, *, label: str) -> None: ...


# ---------------------------------------------------------------------------------
# Registration: what a scenario may contain
# ---------------------------------------------------------------------------------


@hookspec
def infermodel_register_fields(register: FieldRegistrar) -> None:
    """Declare scenario fields in the ``[model]``, ``[hardware]``, ``[workload]``,
    ``[efficiency]`` or ``[pricing]`` sections.

    Called once per session, before any scenario is read.

    :param register: ``register(section, name, *, kind, unit="1", default=REQUIRED,
        description, minimum=None, maximum=None, exclusive_minimum=False,
        choices=None, quantity=None)``. ``kind`` is one of ``"int"``, ``"float"``,
        ``"quantity"`` (a number in base units or a string with a unit such as
        ``"24 GB"``), ``"bool"``, ``"str"``, ``"choice"`` or ``"size_or_fraction"``.
        ``default`` may be a value, ``None`` (absent: the plugin derives it) or
        ``REQUIRED``. When ``quantity`` names a quantity, the field's value becomes
        an input quantity of that name. A field registered twice is an error that
        names both plugins.
    :return: ignored.
    """


@hookspec
def infermodel_register_levers(register: LeverRegistrar) -> None:
    """Declare the levers this plugin provides.

    Called once per session. A scenario's ``[levers.<name>]`` table is structured into
    the lever's schema by the core's strict converter, so unknown keys, wrong types and
    values rejected by the schema's attrs validators are reported with the file, key
    path and line, exactly as for the core sections.

    :param register: ``register(name, schema, *, description, reference=None)`` where
        ``schema`` is a frozen attrs class whose fields are the table's keys. Use the
        unit types in :mod:`infermodel.plugin` (``Bytes``, ``Seconds``, ...) for fields
        that accept unit strings.
    :return: ignored.
    """


@hookspec
def infermodel_register_value_types(register: ValueTypeRegistrar) -> None:
    """Teach the scenario reader a value type used in a lever schema.

    Called once per session, before any scenario is read. Use it for a lever field
    that accepts something the standard types do not (a format given either by name or
    as a table, say). The reader stays strict: the function decides what is accepted.

    :param register: ``register(type_, function)``. ``function(value, type_)`` receives
        the raw TOML value and returns the typed value, or raises
        :class:`infermodel.plugin.FieldValueError` (or ``ValueError``) saying what was
        expected. Inside it, :func:`infermodel.plugin.structure` types nested tables.
        A type registered by two plugins is an error naming both.
    :return: ignored.
    """


@hookspec
def infermodel_register_presets(register: PresetRegistrar) -> None:
    """Contribute directories of preset files.

    Called once per session. Each ``*.toml`` file in a directory is one preset, named
    by its file stem; it holds a ``[preset]`` table (``description``, ``source``) and
    one table (``[model]``, ``[hardware]`` or ``[efficiency]``) with the same keys a
    scenario uses. An efficiency preset (a serving engine's efficiencies) may also hold
    a ``[hardware]`` table with that engine's ``reserve`` and ``interconnect_latency``,
    which apply unless the scenario writes them.

    :param register: ``register(kind, directory)`` with ``kind`` ``"model"``,
        ``"hardware"`` or ``"efficiency"`` and ``directory`` a :class:`pathlib.Path`. A
        preset name that two plugins provide is an error naming both.
    :return: ignored.
    """


@hookspec
def infermodel_register_witnesses(register: WitnessRegistrar) -> None:
    """Contribute witness experiments: small seeded runs that check a formula against
    what actually happens and report both.

    Called once per session. A witness runs only when asked for, by ``infermodel witness
    SCENARIO NAME`` or a scenario's ``[witness]`` table, never during evaluation.

    :param register: ``register(name, function, *, description, reference=None,
        options=None)`` where ``function(scenario, options)`` returns a
        :class:`infermodel.plugin.Witness` and must give the same result for the
        same options (seed every random number). ``options`` maps each option's name to
        an :class:`infermodel.plugin.Option` (default, description, bounds); the
        core checks what a user writes against them, fills in the defaults and passes
        ``function`` a dict of typed values. A name registered twice is an error naming
        both plugins.
    :return: ignored.
    """


@hookspec
def infermodel_register_number_formats(register: NumberFormatRegistrar) -> None:
    """Describe the number formats values may be stored in: the range and resolution of
    their codes, and the scale metadata beside them.

    Called once per session. ``infermodel formats`` lists what is registered; nothing
    here changes a scenario (a lever that stores values in these formats reads its own
    tables).

    :param register: ``register(name, *, description, bits, element, metadata_bits=0.0,
        granularity="none", values_per_scale=None, scale=None, reference=None)``.
        ``element`` is an :class:`infermodel.plugin.Encoding` (the codes: kind, bits,
        largest finite and most negative values, smallest normal and subnormal, machine
        epsilon, infinities, NaN, what overflow becomes); ``scale``, when the codes share
        a scale, is the scale's own encoding, and ``metadata_bits`` the bits of one
        scale plus its zero point, shared by ``values_per_scale`` values (None when that
        depends on the tensor). A name registered twice is an error naming both plugins.
    :return: ignored.
    """


@hookspec
def infermodel_register_quantisers(register: QuantiserRegistrar) -> None:
    """Contribute quantisers of given values: ``infermodel quantize`` rounds the numbers
    a user gives with one of them and prints the scale, zero point, codes,
    reconstruction and error.

    Called once per session.

    :param register: ``register(name, function, *, description, reference=None)`` where
        ``function(values, *, bits, zero_point)`` receives a tuple of finite floats, the
        bits of the integer codes and whether to use a zero point (a min-max grid of
        unsigned codes) rather than a symmetric grid, and returns an
        :class:`infermodel.plugin.Quantisation`. It raises
        :class:`infermodel.plugin.InfermodelError` for bits it does not support. A name
        registered twice is an error naming both plugins.
    :return: ignored.
    """


@hookspec
def infermodel_register_headlines(register: HeadlineRegistrar) -> None:
    """Name the quantities ``infermodel run`` shows first, in its short summary.

    Called once per session. The summary groups rows under a heading each; the core
    knows no quantity by name, so the base physics names its memory, latency,
    throughput and cost figures here and a lever names its headline gain (a speed-up,
    the bytes it saves) the same way. A row appears only when the evaluated scenario
    has the quantity, so a lever's rows appear exactly when the lever is active.

    :param register: ``register(group, name, *, label=None, choices=None)``: show
        quantity ``name`` under the heading ``group`` (``"memory"``, ``"latency"``,
        ``"throughput"`` and ``"cost"`` come first, in that order; any other group, such
        as a lever's name, follows in plugin order) with ``label`` as its short row label
        (default: the quantity's name). ``choices`` names the outcomes of a quantity whose
        value is a whole number 0, 1, ... (which limit binds, say): the summary, the
        tables and ``explain`` show ``choices[value]`` instead of the number. ``interval``
        names two quantities (low, high) bounding where a measurement of it is expected
        (an efficiency preset's calibrated 80 % interval); the summary shows them beside
        the value where the result has both. The groups
        ``"limits"`` and ``"assumptions"`` are printed as one line each under the table:
        which limit binds in each phase, and the inputs a reader must know to trust the
        figures (efficiencies, reserve, utilisation). A quantity registered twice is an
        error naming both plugins.
    :return: ignored.
    """


@hookspec
def infermodel_register_typical_settings(register: TypicalSettingRegistrar) -> None:
    """Declare the typical setting at which ``infermodel rank`` applies a lever.

    Called once per session. ``infermodel rank SCENARIO`` evaluates the scenario, then
    each registered setting applied to it on its own, and ranks them by the cost per
    million tokens each saves. The core knows no lever: what a lever's typical setting
    is (int4 weights, a batch filled to capacity, a fifth of the requests routed to a
    smaller model) is the plugin's to say, with its source.

    :param register: ``register(name, setting, *, description, lever=None,
        reference=None)``. ``name`` labels the ranking's row; ``setting(result)``
        receives the evaluated :class:`infermodel.engine.evaluation.Result` of the scenario as
        written and returns the fields to set (dotted key paths to values, as ``--set``
        writes them: ``{"levers.quantization.linear": "int4-g128"}``), or None when the
        setting does not apply to this scenario (the lever is already on, say).
        ``description`` states the setting in words; ``lever`` names the lever table it
        writes, if any. A name registered twice is an error naming both plugins.
    :return: ignored.
    """


# ---------------------------------------------------------------------------------
# Validation: is this scenario consistent?
# ---------------------------------------------------------------------------------


@hookspec
def infermodel_validate_scenario(scenario: Scenario, report: Report) -> None:
    """Check rules that involve several fields (``kv_heads`` divides ``heads``, ...).

    Called for every scenario after its fields have been typed and range-checked
    and before any quantity is defined. Report every problem; the core collects all
    of them and raises once.

    :param scenario: the :class:`infermodel.scenario.Scenario`.
    :param report: ``report(key, message, *, expected=None, suggestion=None)`` where
        ``key`` is the dotted key path the problem belongs to
        (``"model.kv_heads"``); the core adds the file and line.
    :return: ignored.
    """


# ---------------------------------------------------------------------------------
# Graph: quantities and their transformations
# ---------------------------------------------------------------------------------


@hookspec
def infermodel_define_quantities(scenario: Scenario, define: Define) -> None:
    r"""Add quantities to the graph.

    Called once per scenario evaluation, for every plugin, after validation. A lever
    plugin normally adds its quantities only when ``scenario.levers`` has its table.

    :param scenario: the :class:`infermodel.scenario.Scenario`.
    :param define: ``define(name, definition, *, unit, description, reference=None,
        latex=None, at=None)``. ``definition`` is a sympy expression over quantity symbols
        (``infermodel.S.layers``) or a number (an input quantity). A name defined by
        two plugins is an error naming both. ``unit`` is one of the unit words
        (``"B"``, ``"s"``, ``"FLOP/s"``, ``"token"``, ``"1"`` …) and ``description`` one
        line. ``reference`` names the published source of the formula, by title and
        section (``"Module 10: Inference and serving, §3"``) or a paper: ``explain``,
        JSON output and the documentation's tables show it beside the quantity.
        ``latex`` is the symbol formulas print for the quantity (``r"\mathrm{TPOT}"``,
        ``"d_q"``; default ``\mathrm{name}``). ``at`` maps input quantities to fixed
        numbers: the definition is then read with those inputs held, every lever's
        change included (``ttft`` is ``prefill_time`` at ``{"batch": 1}``: one request
        alone); each quantity it uses that depends on a held input gets a twin named
        ``<name>_at_<input>_<value>`` that ``explain`` shows.
    :return: ignored.
    """


@hookspec
def infermodel_transform_quantities(scenario: Scenario, transform: Transform) -> None:
    """Replace or wrap quantities other plugins defined.

    Called once per scenario evaluation, after every plugin's
    :func:`infermodel_define_quantities`. Requests are collected from every plugin
    and then applied in a deterministic order: ascending ``order`` (default
    ``Stage.DEFAULT``, 500), then plugin name, then the order of the calls. The
    stages are named by :class:`infermodel.plugin.Stage`: 100 number formats, 200
    model structure, 300 hardware and parallelism, 400 algorithms (speculation,
    caching), 500 everything else, 900 cost.

    :param scenario: the :class:`infermodel.scenario.Scenario`.
    :param transform: an object with ``replace(name, expression, *, reason,
        reference=None, order=Stage.DEFAULT, description=None)`` (a new definition) and
        ``wrap(name, function, *, reason, reference=None, order=Stage.DEFAULT,
        description=None)`` where ``function`` receives the current definition and
        returns the new one. ``description`` replaces the quantity's one-line meaning
        when the change alters it. Each change is recorded in the quantity's history
        and shown by ``infermodel explain``. ``warn(message, quantity=None)`` attaches a
        warning to every result of the scenario (what the model leaves out, and how much
        it matters), about ``quantity`` if it concerns one.
    :return: ignored.
    """


# ---------------------------------------------------------------------------------
# Operators: a step split into the kernels that run
# ---------------------------------------------------------------------------------


@hookspec
def infermodel_define_operators(scenario: Scenario, define: OperatorDefine) -> None:
    """Describe the operators of one prefill pass and one decode step.

    Called when an operator table is asked for (``infermodel ops``, the
    ``infermodel-ops`` directive, :func:`infermodel.operator_table`) and when a plugin
    collects the operators to time a step by them (``efficiency.roofline =
    "operator"``). An attention family, say, defines its own operators and takes the
    place of the built-in ones with ``replace=True``.

    :param scenario: the :class:`infermodel.scenario.Scenario`.
    :param define: ``define(phase, name, *, flops, bytes, description, reference=None,
        time=None, replace=False, kernels=(), compute_time=None)``. ``phase`` is
        ``"prefill"`` or ``"decode"``; ``flops`` and ``bytes`` are sympy expressions over
        quantity symbols (or numbers). ``time``, when given, is the operator's own time (a
        collective over a link): the table shows it, and the plugin that defines it adds
        it to the step time itself. ``compute_time``, when given, is the operator's compute
        time where its FLOPs do not run at the phase's rate (a GEMM the engine keeps in 32
        bits): its roofline (the table, the operator roofline, a measured-kernels
        fallback) takes it in place of ``flops / rate``. ``kernels`` names the measured kernels the operator
        is made of (:class:`infermodel.plugin.Kernel`: a table family, its whole-model
        shape, calls per pass, the arguments tensor parallelism splits, the weight class
        that sets the dtype), so that measured kernel tables can time it
        (``efficiency.kernels = "measured"``); an operator without kernels keeps its
        roofline time there. A name defined twice in a phase is an error naming both
        plugins, unless the second passes ``replace=True``.
    :return: ignored.
    """


@hookspec
def infermodel_time_operators(scenario: Scenario, register: OperatorTimeRegistrar) -> None:
    """Say which quantity holds the time a scenario's step charges an operator, when it
    is not the operator's own roofline (a measured kernel time, say).

    Called when an operator table is asked for (``infermodel ops``, the
    ``infermodel-ops`` directive, :func:`infermodel.operator_table`), after the
    operators are collected; the table shows that quantity's value beside the
    roofline's, and what share of the roofline it reaches.

    :param scenario: the :class:`infermodel.scenario.Scenario`.
    :param register: ``register(phase, operator, quantity, *, label)``: in ``phase``,
        ``operator`` is charged the value of ``quantity`` (a quantity name the scenario's
        graph defines); ``label`` says what that time is (``"measured"``). An operator
        timed twice is an error naming both plugins.
    :return: ignored.
    """


@hookspec
def infermodel_iteration_cost(scenario: Scenario, values: Mapping[str, float],
                              register: IterationCostRegistrar) -> None:
    """Price the serving simulator's iterations some other way than the roofline of the
    whole pass (from measured kernel tables, say).

    Called when a scenario is simulated (``infermodel simulate``, the ``[simulation]``
    table), once its quantities are evaluated.

    :param scenario: the :class:`infermodel.scenario.Scenario`.
    :param values: every quantity's value (base units) at the point simulated.
    :param register: ``register(cost)`` with a
        :class:`infermodel.simulator.cost.MeasuredIteration`: ``cost.times(tokens, decodes,
        decode_cached, chunks, chunk_tokens, chunk_cached, scored)`` prices a pass from
        its counts on numpy arrays, ``cost.describe()`` says how. Two plugins registering
        one is an error naming both.
    :return: ignored.
    """


# ---------------------------------------------------------------------------------
# Results: what a reader must know about the numbers
# ---------------------------------------------------------------------------------


@hookspec
def infermodel_check_result(result: Result, warn: Warn) -> None:
    """Say what a reader of an evaluated scenario must know: a lever that makes things
    slower, an effect the formulas leave out, a default the scenario did not state.

    Called for every plugin the first time a result's warnings are read (``run``,
    ``explain``, notebooks and the Sphinx directives show them). Never a silent
    approximation: when something is not modelled, say how big its effect is.

    :param result: the :class:`infermodel.engine.evaluation.Result`; ``result["tpot"]`` is a
        value, ``result.scenario`` the scenario.
    :param warn: ``warn(quantity, message)``: a warning about ``quantity`` (a name, or
        None for the whole scenario), recorded as a
        :class:`infermodel.quantity.ResultWarning`.
    :return: ignored.
    """
