"""Sphinx configuration of the infermodel documentation.

Build with ``sphinx-build -W -b html docs docs/_build/html`` (``tox -e docs``). The
pages under ``scenarios/`` are generated at the start of every build from
``../scenarios/*.toml`` by :mod:`infermodel.sphinxext`; they are not committed.
"""

from __future__ import annotations

import os
from importlib import metadata

import infermodel

# The documentation describes what ships: the built-in plugins and the worked
# third-party example (plugins/infermodel-kv-offload, which must be installed), not
# whatever other plugins happen to be installed where the docs are built.
WORKED_PLUGIN = "kv_offload"
if not any(ep.name == WORKED_PLUGIN for ep in metadata.entry_points(group="infermodel")):
    raise RuntimeError("the documentation renders the worked plugin: install it first with "
                       "`pip install -e plugins/infermodel-kv-offload`")
_builtin = sorted(ep.name for ep in metadata.entry_points(group="infermodel")
                  if ep.dist is not None and ep.dist.metadata["Name"] == "infermodel")
os.environ["INFERMODEL_LOAD_PLUGINS"] = ",".join([*_builtin, WORKED_PLUGIN])
os.environ.pop("INFERMODEL_DISABLE_PLUGIN_AUTOLOAD", None)
from infermodel.host import PluginHost, set_host  # noqa: E402 (after the environment is set)

set_host(PluginHost())

project = "infermodel"
copyright = "the infermodel authors"
version = release = infermodel.__version__

extensions = [
    "sphinx.ext.autodoc",
    "infermodel.sphinxext",
]

infermodel_scenario_pages = "../scenarios/*.toml"
infermodel_scenario_pages_dir = "scenarios"
infermodel_command_cwd = ".."

root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
# Pages other parts of the project add (levers/*, sweeps, simulator) are picked up by
# glob patterns in the tables of contents. Sphinx warns about a pattern that matches no
# page and that warning cannot be suppressed, so patterns listed here are dropped from
# the index while no page matches them.
OPTIONAL_PAGES = ("sweeps*", "simulator*")

autodoc_member_order = "bysource"
autodoc_typehints = "none"

html_theme = "alabaster"
html_title = f"infermodel {release}"
# Alabaster's default 940 px page leaves tables of five columns about 650 px; the page
# is as wide as a 1,280 px screen allows, and the body has no narrower cap of its own.
# (The extension's stylesheet makes its tables fit whatever the content width is.)
html_theme_options = {
    "description": "What happens to the speed, memory and bill of serving a language model "
                   "if you change X — with the working shown.",
    "fixed_sidebar": True,
    "page_width": "min(1220px, 100%)",
    "sidebar_width": "230px",
    "body_max_width": "none",
}
html_static_path = ["_static"]
html_css_files = ["infermodel-docs.css"]


def _drop_unmatched_patterns(app, docname, source):
    if docname != root_doc:
        return
    from pathlib import Path

    lines = []
    for line in source[0].splitlines():
        pattern = line.strip()
        if pattern in OPTIONAL_PAGES and not any(Path(app.srcdir).glob(pattern + ".rst")):
            continue
        lines.append(line)
    source[0] = "\n".join(lines) + "\n"


def _readme_command_directive():
    """``.. readme-command:: N``: the N-th ``sh`` block of README.md, so the getting-started
    page always shows the README's own commands.
    """
    import re
    from pathlib import Path

    from docutils import nodes
    from sphinx.util.docutils import SphinxDirective

    class ReadmeCommand(SphinxDirective):
        required_arguments = 1

        def run(self):
            readme = Path(self.env.srcdir).parent / "README.md"
            self.env.note_dependency(str(readme))
            blocks = re.findall(r"```sh\n(.*?)\n```", readme.read_text(encoding="utf-8"), flags=re.DOTALL)
            index = int(self.arguments[0]) - 1
            if not 0 <= index < len(blocks):
                raise self.error(f"README.md has {len(blocks)} sh blocks, not {index + 1}")
            block = nodes.literal_block(blocks[index], blocks[index], language="sh")
            return [block]

    return ReadmeCommand


def setup(app):
    app.connect("source-read", _drop_unmatched_patterns)
    app.add_directive("readme-command", _readme_command_directive())
