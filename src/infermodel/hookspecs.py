"""Every hook infermodel calls, grouped by phase.

A plugin implements any subset of these with ``@infermodel.hookimpl`` and is found
through the ``infermodel`` entry-point group. The built-in physics and every shipped
lever use exactly these hooks; nothing else is open to them.

Hooks are called one plugin at a time, in plugin-name order, so that a failure is
reported with the plugin's name and the result never depends on load order.
"""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("infermodel")
hookimpl = pluggy.HookimplMarker("infermodel")


# ---------------------------------------------------------------------------------
# Registration: what a scenario may contain
# ---------------------------------------------------------------------------------


@hookspec
def infermodel_register_fields(register):
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
def infermodel_register_levers(register):
    """Declare the levers this plugin provides.

    Called once per session. A scenario's ``[levers.<name>]`` table is structured into
    the lever's schema by the core's strict converter, so unknown keys, wrong types and
    values rejected by the schema's attrs validators are reported with the file, key
    path and line, exactly as for the core sections.

    :param register: ``register(name, schema, *, description, reference=None)`` where
        ``schema`` is a frozen attrs class whose fields are the table's keys. Use the
        unit types in :mod:`infermodel.schema` (``Bytes``, ``Seconds``, ...) for fields
        that accept unit strings.
    :return: ignored.
    """


@hookspec
def infermodel_register_value_types(register):
    """Teach the scenario reader a value type used in a lever schema.

    Called once per session, before any scenario is read. Use it for a lever field
    that accepts something the standard types do not (a format given either by name or
    as a table, say). The reader stays strict: the function decides what is accepted.

    :param register: ``register(type_, function)``. ``function(value, type_)`` receives
        the raw TOML value and returns the typed value, or raises
        :class:`infermodel.schema.FieldValueError` (or ``ValueError``) saying what was
        expected. Inside it, :func:`infermodel.schema.structure` types nested tables.
        A type registered by two plugins is an error naming both.
    :return: ignored.
    """


@hookspec
def infermodel_register_presets(register):
    """Contribute directories of preset files.

    Called once per session. Each ``*.toml`` file in a directory is one preset, named
    by its file stem; it holds a ``[preset]`` table (``description``, ``source``) and
    one table (``[model]`` or ``[hardware]``) with the same keys a scenario uses.

    :param register: ``register(kind, directory)`` with ``kind`` ``"model"`` or
        ``"hardware"`` and ``directory`` a :class:`pathlib.Path`. A preset name that
        two plugins provide is an error naming both.
    :return: ignored.
    """


@hookspec
def infermodel_register_witnesses(register):
    """Contribute witness experiments: small seeded runs that check a formula against
    what actually happens and report both.

    Called once per session. A witness runs only when asked for, by ``infermodel witness
    SCENARIO NAME`` or a scenario's ``[witness]`` table, never during evaluation.

    :param register: ``register(name, function, *, description, reference=None,
        options=None)`` where ``function(scenario, options)`` returns a
        :class:`infermodel.witnessing.Witness` and must give the same result for the
        same options (seed every random number). ``options`` maps each option's name to
        an :class:`infermodel.witnessing.Option` (default, description, bounds); the
        core checks what a user writes against them, fills in the defaults and passes
        ``function`` a dict of typed values. A name registered twice is an error naming
        both plugins.
    :return: ignored.
    """


@hookspec
def infermodel_register_headlines(register):
    """Name the quantities ``infermodel run`` shows first, in its short summary.

    Called once per session. The summary groups rows under a heading each; the core
    knows no quantity by name, so the base physics names its memory, latency,
    throughput and cost figures here and a lever names its headline gain (a speed-up,
    the bytes it saves) the same way. A row appears only when the evaluated scenario
    has the quantity, so a lever's rows appear exactly when the lever is active.

    :param register: ``register(group, name, *, label=None)``: show quantity ``name``
        under the heading ``group`` (``"memory"``, ``"latency"``, ``"throughput"`` and
        ``"cost"`` come first, in that order; any other group, such as a lever's name,
        follows in plugin order) with ``label`` as its short row label (default: the
        quantity's name). The group ``"assumptions"`` is printed as one line under the
        table: the inputs a reader must know to trust the figures (efficiencies,
        reserve, utilisation). A quantity registered twice is an error naming both
        plugins.
    :return: ignored.
    """


# ---------------------------------------------------------------------------------
# Validation: is this scenario consistent?
# ---------------------------------------------------------------------------------


@hookspec
def infermodel_validate_scenario(scenario, report):
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
def infermodel_define_quantities(scenario, define):
    """Add quantities to the graph.

    Called once per scenario evaluation, for every plugin, after validation. A lever
    plugin normally adds its quantities only when ``scenario.levers`` has its table.

    :param scenario: the :class:`infermodel.scenario.Scenario`.
    :param define: ``define(name, definition, *, unit, description, reference=None,
        latex=None)``. ``definition`` is a sympy expression over quantity symbols
        (``infermodel.S.layers``) or a number (an input quantity). A name defined by
        two plugins is an error naming both.
    :return: ignored.
    """


@hookspec
def infermodel_transform_quantities(scenario, transform):
    """Replace or wrap quantities other plugins defined.

    Called once per scenario evaluation, after every plugin's
    :func:`infermodel_define_quantities`. Requests are collected from every plugin
    and then applied in a deterministic order: ascending ``order`` (default 500),
    then plugin name, then the order of the calls. Documented stages: 100 number
    formats, 200 model structure, 300 hardware and parallelism, 400 algorithms
    (speculation, caching), 500 everything else, 900 cost.

    :param scenario: the :class:`infermodel.scenario.Scenario`.
    :param transform: an object with ``replace(name, expression, *, reason,
        reference=None, order=500, description=None)`` (a new definition) and
        ``wrap(name, function, *, reason, reference=None, order=500,
        description=None)`` where ``function`` receives the current definition and
        returns the new one. ``description`` replaces the quantity's one-line meaning
        when the change alters it. Each change is recorded in the quantity's history
        and shown by ``infermodel explain``.
    :return: ignored.
    """


# ---------------------------------------------------------------------------------
# Results: what a reader must know about the numbers
# ---------------------------------------------------------------------------------


@hookspec
def infermodel_check_result(result, warn):
    """Say what a reader of an evaluated scenario must know: a lever that makes things
    slower, an effect the formulas leave out, a default the scenario did not state.

    Called for every plugin the first time a result's warnings are read (``run``,
    ``explain``, notebooks and the Sphinx directives show them). Never a silent
    approximation: when something is not modelled, say how big its effect is.

    :param result: the :class:`infermodel.evaluation.Result`; ``result["tpot"]`` is a
        value, ``result.scenario`` the scenario.
    :param warn: ``warn(quantity, message)``: a warning about ``quantity`` (a name, or
        None for the whole scenario), recorded as a
        :class:`infermodel.quantity.ResultWarning`.
    :return: ignored.
    """
