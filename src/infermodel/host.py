"""The plugin host: loads plugins, calls hooks one plugin at a time, keeps registries.

Plugins come from the ``infermodel`` entry-point group, the built-in physics and
levers included. Environment variables:

``INFERMODEL_LOAD_PLUGINS``
    Comma-separated entry-point names: load only these (an empty value loads none).
``INFERMODEL_DISABLE_PLUGIN_AUTOLOAD``
    When set to anything but an empty value, ``0``, ``false``, ``no`` or ``off``, load
    only the plugins that ship with infermodel itself, not third-party distributions
    (the test suite sets it).

A plugin that fails to import does not stop the others: a scenario that resolves
without it runs, with a warning naming it; a scenario that does not resolve has the
failure added to its problems (the broken plugin may be what it needs). A plugin named
in ``INFERMODEL_LOAD_PLUGINS`` that fails or is missing is an error, since it was asked
for.
``INFERMODEL_TRACE_PLUGINS``
    When set, print every hook call and which plugin answered to standard error.
"""

from __future__ import annotations

import os
import sys
import traceback
import types
import warnings
from collections.abc import Callable
from typing import Any

import attrs
import pluggy

from . import hookspecs
from .errors import PLUGIN_FAILURES, InfermodelError, PluginError, Problem, suggest
from .registry import Registries, build_registries

ENTRY_POINT_GROUP = "infermodel"
OWN_DISTRIBUTION = "infermodel"
#: Values of a switch variable that mean "off".
FALSE_VALUES = ("", "0", "false", "no", "off")


class PluginLoadWarning(UserWarning):
    """A plugin failed to import; the command went on without it."""


def switched_on(name: str) -> bool:
    """Whether the environment variable ``name`` is set to a true value.

    >>> os.environ["X_FLAG"] = "0"; switched_on("X_FLAG")
    False
    """
    return os.environ.get(name, "").strip().lower() not in FALSE_VALUES


@attrs.define
class PluginRecord:
    """What the host knows about one loaded (or failed) plugin."""

    name: str
    module: str
    distribution: str | None
    version: str | None
    builtin: bool
    error: str | None = None
    traceback: str | None = None
    #: Named in INFERMODEL_LOAD_PLUGINS: its failure is an error, not a warning.
    asked: bool = False


#: What pluggy may take for a hook implementation (:func:`pluggy._manager._static_hook_attr`).
_HOOKABLE = (types.FunctionType, types.MethodType, staticmethod, classmethod)


class ModulePluginManager(pluggy.PluginManager):
    """pluggy's manager, scanning a module plugin's names without ``inspect``.

    pluggy looks at every name of a plugin with :func:`inspect.getattr_static` (about
    1,400 names over the built-in plugins). A module's
    names are the keys of its ``__dict__`` and what ``getattr_static`` finds there is
    the value itself: a plain function's marker is read off it as pluggy reads it, a
    value that is not a function or method cannot be a hook implementation, and every
    other name goes through pluggy's own check unchanged.
    """

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> Any:
        if isinstance(plugin, types.ModuleType):
            value = plugin.__dict__.get(name, _HOOKABLE)
            if type(value) is types.FunctionType:
                # pluggy reads the marker's options off the function itself
                opts = getattr(value, self.project_name + "_impl", None)
                return opts if isinstance(opts, dict) else None
            if value is not _HOOKABLE and not isinstance(value, _HOOKABLE):
                return None
        return super().parse_hookimpl_opts(plugin, name)


def distribution_name_and_version(dist: Any) -> tuple[str | None, str | None]:
    """A distribution's ``Name`` and ``Version``, read from the head of its metadata file.

    ``dist.metadata`` parses the whole file with the :mod:`email` parser, README
    included; the two fields are single-line headers before the first blank line
    (core metadata specification), so read those lines and fall back to the parser
    only where one is missing.
    """
    found: dict[str, str] = {}
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    for line in text.splitlines():
        if not line.strip():
            break
        key, colon, value = line.partition(":")
        if colon and key in ("Name", "Version") and key not in found:
            found[key] = value.strip()
    if len(found) < 2:
        meta = dist.metadata
        return meta["Name"], meta["Version"]
    return found["Name"], found["Version"]


class _FoundDistribution:
    """A distribution found by :func:`entry_points_of`: what the host reads of one."""

    def __init__(self, path: str) -> None:
        self.path = path

    def read_text(self, filename: str) -> str | None:
        try:
            with open(os.path.join(self.path, filename), encoding="utf-8") as handle:
                return handle.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
            return None

    @property
    def metadata(self) -> Any:
        from importlib import metadata

        return metadata.PathDistribution(_path_of(self.path)).metadata


def _path_of(path: str) -> Any:
    from pathlib import Path

    return Path(path)


class _FoundEntryPoint:
    """An entry point found by :func:`entry_points_of`, loaded as
    ``importlib.metadata.EntryPoint.load`` loads one.
    """

    def __init__(self, name: str, value: str, group: str, dist: _FoundDistribution) -> None:
        self.name, self.value, self.group, self.dist = name, value, group, dist

    def load(self) -> Any:
        import functools
        import importlib
        import re

        match = re.match(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$",
                         self.value)
        module = importlib.import_module(match.group("module"))  # type: ignore[union-attr]
        names = filter(None, (match.group("attr") or "").split("."))  # type: ignore[union-attr]
        return functools.reduce(getattr, names, module)


def entry_points_of(group: str) -> list[Any]:
    """The entry points of ``group`` in the installed distributions, in the order
    ``importlib.metadata.entry_points(group=group)`` gives them.

    :mod:`importlib.metadata` imports the :mod:`email` package, :mod:`zipfile` and
    :mod:`csv` to offer every kind of metadata, a share of a cold start; the host needs
    one file of each distribution. Where every place a distribution can be is a folder on
    ``sys.path`` (no zip file, no egg folder, no import hook that finds distributions of
    its own), they are read here as :mod:`importlib.metadata` reads them: each folder's
    ``*.dist-info`` and ``*.egg-info`` in listing order, the first of each normalised
    name, the ``[group]`` lines of its ``entry_points.txt``. Anywhere else, or where
    :mod:`importlib.metadata` is loaded already, it is asked.
    """
    found = None if "importlib.metadata" in sys.modules else scan_entry_points(group)
    if found is None:
        from importlib import metadata

        return list(metadata.entry_points(group=group))
    return found


def _normalize(name: str) -> str:
    import re

    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


def scan_entry_points(group: str) -> list[Any] | None:
    """:func:`entry_points_of` read from the folders on ``sys.path``; None where a
    distribution may be somewhere this does not read (a zip file, an egg, an import hook's
    own distributions, a metadata folder named in capitals).
    """
    from importlib.machinery import PathFinder

    if any(hasattr(finder, "find_distributions") for finder in sys.meta_path
           if finder is not PathFinder):
        return None
    seen: set[str] = set()
    found: list[Any] = []
    for entry in sys.path:
        root = entry or "."
        if os.path.isfile(root) or os.path.basename(root).lower().endswith(".egg"):
            return None  # a zip file or an egg: importlib.metadata reads those
        try:
            children = os.listdir(root)
        except OSError:
            continue
        for child in children:
            if not child.lower().endswith((".dist-info", ".egg-info")):
                continue
            if not child.endswith((".dist-info", ".egg-info")):
                return None  # importlib.metadata names such a one from its metadata
            name = _normalize(os.path.splitext(child)[0].partition("-")[0])
            if name in seen:
                continue
            seen.add(name)
            dist = _FoundDistribution(os.path.join(root, child))
            section = None
            for line in (dist.read_text("entry_points.txt") or "").splitlines():
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                if line.startswith("[") and line.endswith("]"):
                    section = line.strip("[]")
                elif section is not None:
                    key, value = line.split("=", 1)  # a line without one fails as there
                    if section == group:
                        found.append(_FoundEntryPoint(key.strip(), value.strip(), group, dist))
    return found


class PluginHost:
    """Owns the pluggy manager and the registries filled by registration hooks.

    ``autoload`` (default True) loads the ``infermodel`` entry-point group as the
    environment variables above say; False loads nothing at all, not even the built-in
    physics, for an application that registers every plugin itself. ``builtins_only``
    loads exactly the plugins that ship with infermodel, whatever the environment says
    (:mod:`infermodel.testing` builds its hosts so, then registers the plugin under
    test).
    """

    def __init__(self, *, autoload: bool = True, builtins_only: bool = False) -> None:
        self.pm = ModulePluginManager(ENTRY_POINT_GROUP)
        self.pm.add_hookspecs(hookspecs)
        self.records: dict[str, PluginRecord] = {}
        self._registries: Registries | None = None
        self._warned = False
        self.none_asked = False
        self.trace = switched_on("INFERMODEL_TRACE_PLUGINS")
        if autoload or builtins_only:
            self.load_entry_points(builtins_only=builtins_only)

    # -- loading -----------------------------------------------------------------

    def load_entry_points(self, *, builtins_only: bool = False) -> None:
        """Import every plugin of the entry-point group, one failure at a time (with
        ``builtins_only``, the built-in ones, the environment variables not read).
        """
        only = None if builtins_only else os.environ.get("INFERMODEL_LOAD_PLUGINS")
        wanted = None if only is None else {n.strip() for n in only.split(",") if n.strip()}
        self.none_asked = wanted is not None and not wanted
        builtins_only = builtins_only or switched_on("INFERMODEL_DISABLE_PLUGIN_AUTOLOAD")
        found = sorted(entry_points_of(ENTRY_POINT_GROUP), key=lambda e: e.name)
        for name in sorted((wanted or set()) - {ep.name for ep in found}):
            hint = suggest(name, [ep.name for ep in found])
            self.records[name] = PluginRecord(name, "", None, None, False, error=(
                f"INFERMODEL_LOAD_PLUGINS names {name!r}, which no installed distribution "
                f"provides in the {ENTRY_POINT_GROUP!r} entry-point group"
                + (f" ({hint})" if hint else "")), asked=True)
        # A distribution's metadata file is read on every access: once per distribution
        # (a tenth of a cold start was the same few files parsed twice per entry point).
        about: dict[int, tuple[str | None, str | None]] = {}
        for ep in found:
            dist = getattr(ep, "dist", None)
            if dist is None:
                dist_name, version = None, None
            else:
                if id(dist) not in about:
                    about[id(dist)] = distribution_name_and_version(dist)
                dist_name, version = about[id(dist)]
            builtin = dist_name == OWN_DISTRIBUTION
            if wanted is not None and ep.name not in wanted:
                continue
            if builtins_only and not builtin:
                continue
            if ep.name in self.records:
                continue
            record = PluginRecord(ep.name, ep.value, dist_name, version, builtin,
                                  asked=wanted is not None)
            self.records[ep.name] = record
            try:
                plugin = ep.load()
                self.pm.register(plugin, name=ep.name)
            except PLUGIN_FAILURES as exc:  # any failure is that plugin's, not ours
                who = f"{dist_name} {version}" if dist_name else "unknown distribution"
                record.error = f"Error importing plugin {ep.name!r} ({who}): {type(exc).__name__}: {exc}"
                record.traceback = traceback.format_exc()
                continue
            refused = self._unsupported_options(ep.name)
            if refused:
                self.pm.unregister(name=ep.name)
                record.error = refused

    def register(self, plugin: Any, name: str, *, builtin: bool = False) -> None:
        """Register a plugin object directly (tests and embedding applications)."""
        if name in self.records:
            raise PluginError(f"a plugin named {name!r} is already registered")
        try:
            self.pm.register(plugin, name=name)
        except ValueError as exc:  # pluggy: the same object under another name
            raise PluginError(
                f"cannot register plugin {name!r}: {exc}; an installed entry point already "
                "loaded it (set INFERMODEL_DISABLE_PLUGIN_AUTOLOAD=1 for the built-ins only, "
                "or INFERMODEL_LOAD_PLUGINS to choose)") from None
        except pluggy.PluginValidationError as exc:
            raise PluginError(f"plugin {name!r} does not match the hook specifications: {exc}") from None
        refused = self._unsupported_options(name)
        if refused:
            self.pm.unregister(name=name)
            raise PluginError(refused)
        module = getattr(plugin, "__module__", None) or getattr(plugin, "__name__", repr(plugin))
        self.records[name] = PluginRecord(name, str(module), None, None, builtin)
        self._registries = None

    def _unsupported_options(self, name: str) -> str | None:
        """Why plugin ``name``'s hook implementations cannot be honoured, or None.

        Hooks run in plugin-name order, so pluggy's ordering and wrapping options
        would be silently ignored: refuse them instead.
        """
        plugin = self.pm.get_plugin(name)
        found = []
        for caller in self.pm.get_hookcallers(plugin) or []:
            for impl in caller.get_hookimpls():
                if impl.plugin_name != name:
                    continue
                options = [o for o in hookspecs.UNSUPPORTED_HOOKIMPL_OPTIONS if getattr(impl, o)]
                if options:
                    found.append(f"{caller.name} ({', '.join(options)})")
        if not found:
            return None
        return (f"plugin {name!r} marks hook implementations with options infermodel does not "
                f"honour: {'; '.join(sorted(found))}. Hooks run one plugin at a time in "
                "plugin-name order; use @hookimpl without tryfirst, trylast, wrapper or "
                "hookwrapper (transformations take order=Stage....)")

    def unregister(self, name: str) -> None:
        self.pm.unregister(name=name)
        self.records.pop(name, None)
        self._registries = None

    @property
    def load_errors(self) -> list[PluginRecord]:
        return [r for r in self.records.values() if r.error]

    def load_problems(self, records: list[PluginRecord] | None = None) -> list[Problem]:
        """One problem per plugin that failed to load."""
        return [Problem(r.error or "", suggestion=(
                    "fix or uninstall it, or set INFERMODEL_LOAD_PLUGINS to the plugins you want"))
                for r in (self.load_errors if records is None else records)]

    def check_loaded(self) -> None:
        """Raise a :class:`PluginError` for what must load: every plugin named in
        ``INFERMODEL_LOAD_PLUGINS`` (and a clear message when that list is empty).
        """
        failed = [r for r in self.load_errors if r.asked]
        if failed:
            raise PluginError(self.load_problems(failed))
        if self.none_asked and not self.pm.get_plugins():
            raise PluginError(Problem(
                "no plugins are loaded: INFERMODEL_LOAD_PLUGINS is set but empty, which "
                "loads none, and a scenario needs at least the built-in ones",
                expected="INFERMODEL_LOAD_PLUGINS unset (load every installed plugin) or a "
                         "comma-separated list of entry-point names",
                suggestion="`infermodel plugins --all` lists them"))

    def warn_load_errors(self) -> None:
        """Warn once, naming each plugin that failed to import, that the run goes on
        without it.
        """
        if self._warned:
            return
        self._warned = True
        for record in self.load_errors:
            warnings.warn(f"{record.error}; going on without it (fix or uninstall it, or set "
                          "INFERMODEL_LOAD_PLUGINS to the plugins you want)",
                          PluginLoadWarning, stacklevel=2)

    # -- calling -----------------------------------------------------------------

    def call_each(self, hook_name: str, make_kwargs: Callable[[str], dict[str, Any]], stage: str) -> None:
        """Call ``hook_name`` on every plugin, in plugin-name order, attributing failures.

        ``make_kwargs(plugin_name)`` builds the arguments, so that callbacks such as
        ``define`` know which plugin is calling them.
        """
        hook = getattr(self.pm.hook, hook_name)
        impls = sorted(hook.get_hookimpls(), key=lambda i: i.plugin_name)
        for impl in impls:
            if self.trace:
                print(f"[infermodel] {stage}: {hook_name} -> plugin {impl.plugin_name!r}",
                      file=sys.stderr)
            kwargs = make_kwargs(impl.plugin_name)
            try:
                impl.function(*[kwargs[a] for a in impl.argnames])
            except InfermodelError:
                raise
            except PLUGIN_FAILURES as exc:
                raise PluginError(
                    f"plugin {impl.plugin_name!r} failed in {hook_name} ({stage}): "
                    f"{type(exc).__name__}: {exc}"
                ) from exc

    # -- registries ----------------------------------------------------------------

    @property
    def registries(self) -> Registries:
        """Fields, levers and presets declared by the loaded plugins (built once)."""
        if self._registries is None:
            self._registries = build_registries(self)
        return self._registries


_HOST: PluginHost | None = None


def get_host() -> PluginHost:
    """The process-wide plugin host, loading entry points on first use."""
    global _HOST
    if _HOST is None:
        _HOST = PluginHost()
    return _HOST


def set_host(host: PluginHost | None) -> None:
    """Replace the process-wide host (tests use this to start from a clean one)."""
    global _HOST
    _HOST = host
