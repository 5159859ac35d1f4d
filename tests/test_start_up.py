"""A cold ``infermodel run`` imports only what it needs, and the start-up's shortcuts give
what the general machinery gives (``benchmarks/bench_cli.py`` measures the time).
"""

from __future__ import annotations

import gc
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import cattrs
import pluggy
import pytest
from cattrs.gen import make_dict_structure_fn

from infermodel import hookspecs
from infermodel.host import (
    ENTRY_POINT_GROUP,
    ModulePluginManager,
    PluginHost,
    distribution_name_and_version,
)
from infermodel.schema import structure_errors

ROOT = Path(__file__).resolve().parents[1]

#: Modules a plain ``infermodel run`` has no use for: the wings (the witness records the
#: plugin door offers included), the sweeps, the derivations, the optional extras, and
#: standard modules only a mistake, another output format or importlib.metadata needs.
NOT_FOR_RUN = ("networkx", "scipy", "dask", "pyarrow", "pandas", "matplotlib", "rich",
               "infermodel.sweeping", "infermodel.simulator", "infermodel.accuracy",
               "infermodel.analyses", "infermodel.derivation", "infermodel.kernels",
               "json", "html", "difflib", "tomllib", "importlib.metadata", "email")


def test_run_imports_only_what_it_needs():
    code = (
        "import contextlib, io, sys\n"
        "from infermodel.cli.app import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    status = main(['run', 'scenarios/case-study-24gb.toml'])\n"
        f"print(status, sorted(m for m in {NOT_FOR_RUN!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    assert out.stdout.split(None, 1) == ["0", "[]\n"], out.stdout + out.stderr


def test_the_console_script_collects_again_once_started():
    code = (
        "import gc\n"
        "from infermodel.cli import app\n"
        "gc.disable()\n"
        "states = []\n"
        "def started():\n"
        "    app.freeze_start_up()\n"
        "    states.append((gc.isenabled(), gc.get_freeze_count() > 0))\n"
        "app.main(['plugins'], started=started)\n"
        "print(states)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    assert out.stdout.strip().splitlines()[-1] == "[(True, True)]"
    assert gc.isenabled()  # in-process callers of main() keep their collector


def _hookimpls(manager: pluggy.PluginManager, plugins) -> list[tuple]:
    manager.add_hookspecs(hookspecs)
    for name, plugin in plugins:
        manager.register(plugin, name=name)
    return sorted((hook, impl.plugin_name, impl.function.__qualname__,
                   tuple(sorted(impl.opts.items())))
                  for hook, caller in vars(manager.hook).items()
                  for impl in caller.get_hookimpls())


def test_the_hosts_plugin_scan_finds_what_pluggy_finds():
    host = PluginHost(builtins_only=True)
    plugins = [(name, host.pm.get_plugin(name)) for name in host.records]

    class Plugin:  # an object plugin goes through pluggy's own scan
        @hookspecs.hookimpl
        def infermodel_register_fields(self, register):
            pass

    plugins.append(("object", Plugin()))
    ours = _hookimpls(ModulePluginManager("infermodel"), plugins)
    assert ours == _hookimpls(pluggy.PluginManager("infermodel"), plugins)
    assert len(ours) > 50


_COMPARE_ENTRY_POINTS = """
import sys
from importlib import metadata
from infermodel.host import ENTRY_POINT_GROUP, distribution_name_and_version, scan_entry_points
group = sys.argv[1]
ours = scan_entry_points(group)
theirs = list(metadata.entry_points(group=group))
assert ours is not None and len(theirs) > 0, (ours, theirs)
assert [(e.name, e.value, e.group) for e in ours] == [(e.name, e.value, e.group) for e in theirs]
for found, entry in zip(ours, theirs):
    assert found.dist.read_text("METADATA") == entry.dist.read_text("METADATA")
    if group == ENTRY_POINT_GROUP:
        assert found.load() is entry.load()
        assert distribution_name_and_version(found.dist) == (
            entry.dist.metadata["Name"], entry.dist.metadata["Version"])
"""


@pytest.mark.parametrize("group", [ENTRY_POINT_GROUP, "console_scripts", "pytest11"])
def test_entry_points_are_found_as_importlib_metadata_finds_them(group):
    # In a fresh interpreter, as a command starts: tests earlier in a run may leave an
    # import hook or a path behind, under which the host rightly asks importlib.metadata.
    done = subprocess.run([sys.executable, "-c", _COMPARE_ENTRY_POINTS, group],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_name_and_version_read_as_the_metadata_parser_reads_them():
    names = ("infermodel", "infermodel-testplugin", "infermodel-kv-offload", "pluggy", "attrs")
    for name in names:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        assert distribution_name_and_version(dist) == (dist.metadata["Name"], dist.metadata["Version"])


@pytest.mark.parametrize("section,table", [
    ("workload", {"prompt_tokens": 4000, "output_tokens": 2000}),
    ("workload", {"prompt_tokens": "x", "batch": 2.5, "bogus": 1, "zz": 2}),
    ("workload", {"prompt_tokens": 4000, "output_tokens": 2000, "batch": True}),
    ("model", {}),
    ("model", {"layers": -1, "d_model": "3", "vocab": 1}),
    ("hardware", {"memory": "24 XB", "bandwidth": "1 TB/s"}),
    ("efficiency", {"mbu": 2}),
    ("pricing", {"x": 1}),
])
def test_sections_are_structured_as_cattrs_would(section, table):
    registries = PluginHost(builtins_only=True).registries
    cls = registries.section_classes[section]
    converter = registries.converter

    def outcome(function):
        try:
            return ("ok", repr(function(dict(table), cls)))
        except Exception as exc:
            failures = [(type(e).__name__, str(e), [repr(n) for n in getattr(e, "__notes__", [])])
                        for e in getattr(exc, "exceptions", [])]
            return ("error", type(exc).__name__, str(exc), failures,
                    [(p.path, p.message, p.missing, tuple(p.unknown_keys))
                     for p in structure_errors(exc)],
                    cattrs.transform_error(exc, path="$"))

    ours = converter.get_structure_hook(cls)
    assert ours.__name__ == "structure_section"
    assert outcome(ours) == outcome(make_dict_structure_fn(cls, converter))
