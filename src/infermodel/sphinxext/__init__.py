"""Sphinx extension: scenarios, derivations and the plugin surface in documentation.

Add it to a Sphinx project's ``conf.py``::

    extensions = ["infermodel.sphinxext"]

Directives
----------

``.. infermodel:: path/to/scenario.toml``
    Evaluate a scenario (path relative to the document, or to the source directory when
    it starts with ``/``) and render its quantities. Options:

    ``:quantities: tpot, ttft``
        only these quantities (default: every quantity, or ``infermodel_default_quantities``).
    ``:chain:``
        show each chosen quantity's derivation chain: its formula and the formula with
        numbers as display math, the value with its unit, the plugin that defined it,
        every lever's change and the published reference, down to the inputs and where
        they were written. Without it, a table of results.
    ``:depth: 2``
        with ``:chain:``, stop that many levels below each quantity.
    ``:set: workload.batch=64; hardware.count=2``
        override fields as ``infermodel run --set`` does; several overrides are separated
        by ``;`` or newlines.

    The page is rebuilt when the scenario file, a file it ``extends``, a preset it uses
    or a Hugging Face config it reads changes. A scenario that fails to load gives a
    warning located at the directive (``-W`` turns it into a failure), not a crash.

``.. infermodel-quantities::``
    The quantity catalogue: every quantity the loaded plugins define in a set of
    scenarios (``:scenarios: glob``, default ``infermodel_catalogue_scenarios``), with
    symbol, unit, definition, the plugin that defines it, the levers that change it and
    the reference. A registered lever that none of the scenarios uses is evaluated once
    with its default settings on the first scenario where they evaluate, so its quantities
    are listed too.

``.. infermodel-fields::``
    The scenario fields the loaded plugins declare (``:sections: model, hardware``).

``.. infermodel-levers::``
    Each registered lever's table: its keys, types and defaults (``:levers: a, b``).

``.. infermodel-cli::``
    The command-line reference, one section per subcommand, from the argument parser.

``.. infermodel-ops:: scenario.toml``
    A scenario's operator table for one phase (``:phase: decode`` or ``prefill``,
    ``:set:``), as ``infermodel ops`` prints it (:mod:`.operators`).
``.. infermodel-command:: explain scenarios/x.toml tpot``
    Run an ``infermodel`` command (from ``infermodel_command_cwd``) and show it with its
    output.

Configuration (all validated when the configuration is read)
------------------------------------------------------------

``infermodel_scenario_pages``
    A glob, relative to the configuration directory (for example
    ``"../scenarios/*.toml"``): when set, a page per matching scenario is generated at
    the start of each build into ``infermodel_scenario_pages_dir`` (default
    ``"scenarios"``), with an ``index`` page listing them. Generated files carry a marker
    line; stale ones are removed, unchanged ones are not rewritten.
``infermodel_headline_quantities``
    Quantities whose derivation chains the generated pages show (those a scenario
    defines), besides every quantity a lever changed.
``infermodel_catalogue_scenarios``
    The default glob of ``infermodel-quantities`` (default: ``infermodel_scenario_pages``).
``infermodel_default_quantities``
    The quantities ``.. infermodel::`` shows without ``:quantities:`` (default: all).
``infermodel_command_cwd``
    Where ``infermodel-command`` runs, relative to the configuration directory.

Modules
-------

:mod:`.config` (configuration values), :mod:`.loading` (evaluating scenarios, cached),
:mod:`.nodes` (docutils node builders), :mod:`.directives` (the scenario, fields,
levers and command-line directives), :mod:`.catalogue` (the quantity catalogue),
:mod:`.pages` (generated scenario pages); :func:`setup` registers them.
"""

from __future__ import annotations

from typing import Any

from .. import __version__
from .catalogue import CatalogueDirective, collect_catalogue
from .config import CONFIG_VALUES, InfermodelSphinxError, setup_config
from .directives import (
    CliDirective,
    CommandDirective,
    FieldsDirective,
    LeversDirective,
    ScenarioDirective,
    subcommands,
    type_text,
)
from .loading import split_names, split_overrides
from .operators import OperatorsDirective
from .pages import GENERATED_MARKER, generate_pages, generate_scenario_pages, scenario_page

# The helpers' earlier private names, which the package has always offered.
_subcommands, _type_text, _split_names, _split_overrides = (subcommands, type_text, split_names,
                                                            split_overrides)


def _setup_directives(app) -> None:
    app.add_directive("infermodel", ScenarioDirective)
    app.add_directive("infermodel-quantities", CatalogueDirective)
    app.add_directive("infermodel-fields", FieldsDirective)
    app.add_directive("infermodel-levers", LeversDirective)
    app.add_directive("infermodel-cli", CliDirective)
    app.add_directive("infermodel-command", CommandDirective)
    app.add_directive("infermodel-ops", OperatorsDirective)


def _setup_pages(app) -> None:
    app.connect("builder-inited", generate_pages)


def setup(app) -> dict[str, Any]:
    """Register the directives, configuration values and page generation."""
    setup_config(app)
    _setup_directives(app)
    _setup_pages(app)
    return {"version": __version__, "env_version": 1,
            "parallel_read_safe": True, "parallel_write_safe": True}


__all__ = [
    "CONFIG_VALUES",
    "GENERATED_MARKER",
    "CatalogueDirective",
    "CliDirective",
    "CommandDirective",
    "FieldsDirective",
    "InfermodelSphinxError",
    "LeversDirective",
    "OperatorsDirective",
    "ScenarioDirective",
    "collect_catalogue",
    "generate_scenario_pages",
    "scenario_page",
    "setup",
]
