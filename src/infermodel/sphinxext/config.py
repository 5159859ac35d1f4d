"""Configuration values of the extension, checked when the configuration is read."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sphinx.errors import SphinxError
from sphinx.util import logging

from .loading import split_names

logger = logging.getLogger(__package__)

# A documentation build reports a broken scenario, plugin or command; it does not crash.
# That is why the directives catch any exception (``noqa: BLE001``) and turn it
# into a warning located at the directive, which ``sphinx-build -W`` makes fatal.

WARNING_TYPE = "infermodel"


class InfermodelSphinxError(SphinxError):
    """A configuration mistake in a project that uses the infermodel extension."""

    category = "infermodel extension error"


# ---------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------

CONFIG_VALUES: dict[str, tuple[Any, str]] = {
    "infermodel_scenario_pages": ("", "glob of scenarios to generate pages for, relative to conf.py"),
    "infermodel_scenario_pages_dir": ("scenarios", "folder of the generated pages, in the source dir"),
    "infermodel_headline_quantities": (
        ["tpot", "ttft", "max_sequences", "cost_per_million_output_tokens"],
        "quantities whose derivations the generated pages show"),
    "infermodel_catalogue_scenarios": ("", "glob of scenarios the catalogue is built from"),
    "infermodel_default_quantities": ([], "quantities .. infermodel:: shows by default"),
    "infermodel_command_cwd": (".", "folder infermodel-command runs in, relative to conf.py"),
}


def setup_config(app) -> None:
    for name, (default, _about) in CONFIG_VALUES.items():
        app.add_config_value(name, default, "env", types=frozenset({type(default), type(None)}))
    app.connect("config-inited", _check_config)


def _check_config(app, config) -> None:
    """Reject configuration values of the wrong shape with a message naming them."""
    # Paths are written relative to conf.py; directives see them made absolute.
    for name in ("infermodel_scenario_pages", "infermodel_catalogue_scenarios",
                 "infermodel_command_cwd"):
        value = getattr(config, name)
        if value is None:
            value = ""
        if not isinstance(value, str):
            raise InfermodelSphinxError(f"{name} must be a path or glob string such as "
                                        f"'../scenarios/*.toml', not {value!r}")
        if value or name == "infermodel_command_cwd":
            value = os.path.normpath(os.path.join(app.confdir, value or "."))
        setattr(config, name, value)
    pages_dir = config.infermodel_scenario_pages_dir
    if (not isinstance(pages_dir, str) or not pages_dir.strip() or os.path.isabs(pages_dir)
            or ".." in Path(pages_dir).parts):
        raise InfermodelSphinxError("infermodel_scenario_pages_dir must be a folder inside the "
                                    f"source directory, such as 'scenarios', not {pages_dir!r}")
    for name in ("infermodel_headline_quantities", "infermodel_default_quantities"):
        value = getattr(config, name)
        if value is None:
            setattr(config, name, [])
        elif isinstance(value, str):
            setattr(config, name, split_names(value))
        elif not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise InfermodelSphinxError(f"{name} must be a list of quantity names, not {value!r}")
        else:
            setattr(config, name, [n for v in value for n in split_names(v)])
