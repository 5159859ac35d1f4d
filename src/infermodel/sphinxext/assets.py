"""Files the HTML pages load: the extension's stylesheet and, by default, MathJax itself.

Sphinx loads MathJax from a CDN, so a page read offline (a built folder opened from
disk, a machine without network) shows every formula as raw LaTeX. With
``infermodel_offline_math = True`` (the default) the extension points ``mathjax_path``
at a copy of MathJax 3 inside the build: the TeX-to-HTML component with its fonts, TeX
extensions and accessibility parts, taken from the ``sphinx-mathjax-offline`` package
(a data-only wheel of MathJax 3.2.2, installed with ``infermodel[docs]``). KaTeX was the
other choice, but its Sphinx extension loads it from a CDN too unless Node.js renders
the pages at build time. A project that sets its own ``mathjax_path`` keeps it, and
``infermodel_offline_math = False`` keeps Sphinx's CDN.

Files are copied once and again only when their size or time stamp changed, so an
incremental build does not copy megabytes.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from .config import InfermodelSphinxError
from .layout import STATIC, STYLESHEET

#: Where the bundled MathJax is copied, relative to the build's ``_static`` folder.
MATHJAX_DIR = "mathjax"
MATHJAX_ENTRY = "tex-chtml.js"
MATHJAX_PACKAGE = "sphinx-mathjax-offline"
#: Parts of the MathJax tree the TeX-to-HTML component loads (fonts, autoloaded TeX
#: extensions, the menu and its accessibility tools); the other combined components,
#: the SVG and MathML outputs are left out.
MATHJAX_PARTS = ("output/chtml", "input/tex/extensions", "ui", "a11y", "sre", "adaptors")


def bundled_mathjax() -> Path | None:
    """The folder of the bundled MathJax 3 tree, or None when its package is missing."""
    try:
        spec = importlib.util.find_spec(MATHJAX_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "static" / "mathjax"
    return folder if (folder / MATHJAX_ENTRY).is_file() else None


def _check_math(app, config) -> None:
    """config-inited: use the bundled MathJax unless the project chose otherwise."""
    from sphinx.ext.mathjax import MATHJAX_URL

    if not config.infermodel_offline_math or getattr(config, "mathjax_path", None) != MATHJAX_URL:
        return
    if bundled_mathjax() is None:
        raise InfermodelSphinxError(
            "infermodel_offline_math is on, but the MathJax bundle (the sphinx-mathjax-offline "
            "package) is not installed: install it (pip install 'infermodel[docs]'), or set "
            "infermodel_offline_math = False in conf.py to load MathJax from its CDN")
    config.mathjax_path = f"{MATHJAX_DIR}/{MATHJAX_ENTRY}"


def _mathjax_files(root: Path) -> Iterator[Path]:
    yield root / MATHJAX_ENTRY
    for part in MATHJAX_PARTS:
        folder = root / part
        if folder.is_dir():
            yield from (p for p in sorted(folder.rglob("*")) if p.is_file())


def _copy_if_changed(source: Path, target: Path) -> bool:
    try:
        there = target.stat()
        here = source.stat()
        if there.st_size == here.st_size and there.st_mtime_ns >= here.st_mtime_ns:
            return False
    except OSError:
        pass
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target)
    return True


def copy_assets(app, exception) -> None:
    """build-finished: copy the stylesheet, and MathJax when the pages load the bundle."""
    builder = app.builder
    if exception is not None or getattr(builder, "format", None) != "html":
        return
    static = Path(builder.outdir) / "_static"
    _copy_if_changed(STATIC / STYLESHEET, static / STYLESHEET)
    if app.config.mathjax_path != f"{MATHJAX_DIR}/{MATHJAX_ENTRY}":
        return
    if getattr(builder, "math_renderer_name", "mathjax") != "mathjax":
        return
    root = bundled_mathjax()
    if root is None:
        return
    for source in _mathjax_files(root):
        _copy_if_changed(source, static / MATHJAX_DIR / os.path.relpath(source, root))


def setup_assets(app) -> None:
    app.connect("config-inited", _check_math)
    app.connect("build-finished", copy_assets)


__all__ = ["MATHJAX_DIR", "MATHJAX_ENTRY", "bundled_mathjax", "copy_assets", "setup_assets"]
