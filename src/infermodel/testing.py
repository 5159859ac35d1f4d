"""Testing a plugin in isolation, through the door: pytest fixtures and two helpers.

infermodel installs this module as a pytest plugin (the ``pytest11`` entry point), so a
plugin's own tests have the fixtures below with nothing to import. Each is
session-scoped, which is what lets a test use them under Hypothesis's ``@given``
(Hypothesis refuses function-scoped fixtures such as ``monkeypatch`` and ``tmp_path``
there, since they are not reset between its examples).

``infermodel_plugins``
    The plugins under test, ``{name: module or object}``: empty unless the test suite's
    ``conftest.py`` overrides it, session-scoped too::

        @pytest.fixture(scope="session")
        def infermodel_plugins():
            import my_package.host_overhead as plugin
            return {"host_overhead": plugin}

``infermodel_host``
    A plugin host with the plugins that ship with infermodel and ``infermodel_plugins``,
    and nothing else: neither another installed distribution's plugins, nor the plugin's
    own installed entry point, nor an ``INFERMODEL_*`` environment variable changes
    what it loads.
``infermodel_scenario``
    ``infermodel_scenario(source, overrides=None)``: a scenario read with that host,
    which ``infermodel.evaluate`` (and every analysis) then uses. ``source`` is a shipped
    scenario's name (``"infermodel:case-study-24gb"``), a path, or TOML text (written to
    a file of the session's temporary folder; it ``extends`` a shipped scenario by
    name); ``overrides`` maps dotted keys to values, as ``--set`` does.

Outside pytest, :func:`plugin_host` builds such a host and :func:`read_scenario` reads a
scenario with it.

>>> host = plugin_host()                                # doctest: +SKIP
>>> read_scenario("infermodel:case-study-24gb", {"workload.batch": 4}, host=host)  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .host import PluginHost
    from .scenario import Scenario

#: Characters that make a source TOML text rather than a name or a path.
_TEXT_MARKS = ("\n", "=", "[")


def plugin_host(plugins: Mapping[str, Any] | None = None) -> PluginHost:
    """A plugin host with the built-in plugins and ``plugins`` (``{name: plugin}``),
    nothing else installed and no environment variable read.

    A plugin that does not match the hook specifications, or a name taken, is a
    :class:`~infermodel.errors.PluginError` naming it.
    """
    from .host import PluginHost

    host = PluginHost(autoload=False, builtins_only=True)
    for name, plugin in (plugins or {}).items():
        host.register(plugin, name)
    return host


def read_scenario(source: str | Path, overrides: Mapping[str, Any] | None = None, *,
                  host: PluginHost, folder: Path | None = None) -> Scenario:
    """The scenario ``source`` (a shipped scenario's ``"infermodel:NAME"``, a path, or
    TOML text) read with ``host`` and ``overrides`` (``{"workload.batch": 4}``). TOML
    text is written to ``folder``, one file per text (a relative ``extends`` is read
    from there: name a shipped scenario instead).
    """
    from .errors import InfermodelError, Problem
    from .scenario import load_scenario

    if isinstance(source, str) and any(mark in source for mark in _TEXT_MARKS):
        if folder is None:
            raise InfermodelError(Problem("a scenario given as TOML text needs a folder to be "
                                          "written to", expected="folder=Path(...)"))
        from .output import atomic_write

        digest = hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]
        path = folder / f"scenario-{digest}.toml"
        if not path.exists():
            atomic_write(path, source)
        source = path
    return load_scenario(source, dict(overrides) if overrides else None, host=host)


try:
    import pytest
except ImportError:  # used outside pytest: the helpers above only
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture(scope="session")
    def infermodel_plugins() -> Mapping[str, Any]:
        """The plugins under test: override in ``conftest.py`` (session-scoped)."""
        return {}

    @pytest.fixture(scope="session")
    def infermodel_host(infermodel_plugins: Mapping[str, Any]) -> PluginHost:
        """The built-in plugins and ``infermodel_plugins``, nothing else."""
        return plugin_host(infermodel_plugins)

    @pytest.fixture(scope="session")
    def infermodel_scenario(infermodel_host: PluginHost, tmp_path_factory: Any
                            ) -> Callable[..., Scenario]:
        """``infermodel_scenario(source, overrides=None)``: a scenario read with
        ``infermodel_host``.
        """
        folder = tmp_path_factory.mktemp("infermodel-scenarios")

        def read(source: str | Path, overrides: Mapping[str, Any] | None = None) -> Scenario:
            return read_scenario(source, overrides, host=infermodel_host, folder=folder)

        return read


__all__ = ["plugin_host", "read_scenario"]
