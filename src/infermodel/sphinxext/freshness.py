"""Incremental builds that notice a changed plugin.

A page that shows a scenario depends on more than the TOML files it names: the plugins
decide every formula, default and reference on it. Sphinx only re-reads a page whose
source or noted files changed, so after a plugin was edited or upgraded an incremental
build published the old text. Every document in which one of the extension's directives
ran is recorded in the environment, with a fingerprint of the plugins: the entry points
of the ``infermodel`` group (name, distribution, version), the installed version of
infermodel, and the size and time stamp of every Python file of the packages the loaded
plugins (and infermodel itself) come from. When the fingerprint differs at the start of
a build, those documents are read again (``env-get-outdated``).
"""

from __future__ import annotations

import hashlib
import os
import sys
import types
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

#: Environment attributes (pickled with the environment between builds).
DOCUMENTS = "infermodel_documents"
FINGERPRINT = "infermodel_plugin_fingerprint"
#: Python files looked at per package, at most (a guard against a package that is a
#: whole site-packages folder).
FILES_PER_PACKAGE = 5000


def note_document(env) -> None:
    """Record that the document being read uses the extension."""
    documents = getattr(env, DOCUMENTS, None)
    if documents is None:
        documents = set()
        setattr(env, DOCUMENTS, documents)
    documents.add(env.docname)


def _package_folders(host) -> set[Path]:
    """The folder of each top-level package (or the file of each lone module) behind the
    loaded plugins, and infermodel's own.
    """
    modules: list[types.ModuleType] = []
    for _name, plugin in host.pm.list_name_plugin():
        if isinstance(plugin, types.ModuleType):
            module: types.ModuleType | None = plugin
        else:
            owner = plugin if isinstance(plugin, type) else type(plugin)
            module = sys.modules.get(owner.__module__)
        if module is not None:
            modules.append(sys.modules.get(module.__name__.split(".")[0], module))
    modules.append(sys.modules["infermodel"])
    folders = set()
    for module in modules:
        file = getattr(module, "__file__", None)
        if file:
            path = Path(file)
            folders.add(path.parent if path.name == "__init__.py" else path)
    return folders


def _python_files(folder: Path) -> Iterable[Path]:
    if folder.is_file():
        return [folder]
    return sorted(folder.rglob("*.py"))[:FILES_PER_PACKAGE]


def plugin_fingerprint(host=None) -> str:
    """A digest of the plugins a build renders with; it changes when a plugin is
    installed, removed, upgraded or edited.
    """
    from .. import __version__
    from ..host import ENTRY_POINT_GROUP, get_host

    host = host or get_host()
    digest = hashlib.sha256(f"infermodel {__version__}\n".encode())
    for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        dist = getattr(ep, "dist", None)
        version = dist.version if dist is not None else ""
        digest.update(f"{ep.name}={ep.value} {version}\n".encode())
    for name, plugin in sorted(host.pm.list_name_plugin(), key=lambda item: item[0]):
        digest.update(f"loaded {name} {type(plugin).__name__}\n".encode())
    for folder in sorted(_package_folders(host)):
        for file in _python_files(folder):
            try:
                stat = os.stat(file)
            except OSError:
                continue
            digest.update(f"{file} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _outdated(app, env, added, changed, removed) -> list[str]:
    """env-get-outdated: the documents using the extension, when the plugins changed."""
    current = plugin_fingerprint()
    previous = getattr(env, FINGERPRINT, None)
    setattr(env, FINGERPRINT, current)
    if previous is None or previous == current:
        return []
    return sorted(getattr(env, DOCUMENTS, set()) & set(env.found_docs))


def _purge(app, env, docname) -> None:
    getattr(env, DOCUMENTS, set()).discard(docname)


def _merge(app, env, docnames, other) -> None:
    documents = getattr(env, DOCUMENTS, None)
    if documents is None:
        documents = set()
        setattr(env, DOCUMENTS, documents)
    documents.update(getattr(other, DOCUMENTS, set()) & set(docnames))


def setup_freshness(app) -> None:
    app.connect("env-get-outdated", _outdated)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)


__all__ = ["note_document", "plugin_fingerprint", "setup_freshness"]
