"""The import rules stated in docs/internals.rst, checked over the source with ``ast``.

Imports inside functions count; imports under ``if TYPE_CHECKING:`` do not (they
never run: they name types for annotations).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "src"
PACKAGE = SOURCE / "infermodel"
PLUGIN_FILES = sorted([*(ROOT / "plugins").rglob("*.py"), *(ROOT / "tests" / "plugins").rglob("*.py")])
STDLIB = set(sys.stdlib_module_names) | {"__future__"}

#: Feature packages built on the engine (and ``python -m infermodel``, which runs the
#: command line); the engine never imports them.
FEATURES = ("infermodel.sweeping", "infermodel.cli", "infermodel.sphinxext", "infermodel.__main__")
#: The wings built on the engine: the analyses (search, plots, simulating a scenario,
#: witnesses), the accuracy checks and the self-contained serving simulator.
WINGS = ("infermodel.analyses", "infermodel.accuracy", "infermodel.simulator")
#: The door for plugins hands them what they may use from every layer (the witness
#: records of the analyses, the simulator): it is an entry point, not part of the engine.
DOOR = ("infermodel.plugin",)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SOURCE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _lazy_names() -> dict[str, str]:
    """Names the package hands out on first use (``_LAZY`` in its ``__init__``): name ->
    the module that defines it. ``from infermodel import evaluate`` imports that module.
    """
    for node in ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8")).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "_LAZY"):
            table = ast.literal_eval(node.value)
            return {name: f"infermodel.{module}" for name, (module, _attr) in table.items()}
    raise AssertionError("src/infermodel/__init__.py has no _LAZY table")


LAZY = _lazy_names()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_nodes(tree: ast.AST):
    """Every node except those under ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                stack.extend(child.orelse)
                continue
            stack.append(child)


def imports(path: Path, module: str | None = None, *,
            through_package: bool = False) -> list[tuple[str, int]]:
    """(imported module, line) for every runtime import in ``path``, relative ones
    resolved; ``from package import name`` also counts ``package.name`` when that is
    a module of the package, and with ``through_package`` the module behind a name the
    package loads on first use (``from infermodel import evaluate``: engine.kept).
    """
    is_package = path.name == "__init__.py"
    found = []
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                assert module is not None, f"{path}: relative import outside the package"
                parts = module.split(".")
                keep = len(parts) - node.level + (1 if is_package else 0)
                base = ".".join(parts[:keep] + ([base] if base else []))
            found.append((base, node.lineno))
            for alias in node.names:
                if f"{base}.{alias.name}" in MODULES:
                    found.append((f"{base}.{alias.name}", node.lineno))
                elif through_package and base == "infermodel" and alias.name in LAZY:
                    found.append((LAZY[alias.name], node.lineno))
    return found


def _package_imports(module: str) -> set[str]:
    """The modules of the package that ``module`` imports (the bare package excluded)."""
    out = set()
    for name, _line in imports(MODULES[module], module, through_package=True):
        if name.startswith("infermodel."):
            while name not in MODULES:
                name = name.rpartition(".")[0]
            out.add(name)
    return out


GRAPH = {module: _package_imports(module) for module in MODULES}


def _in(module: str, prefixes) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_the_source_tree_is_found():
    assert {"infermodel.declarations", "infermodel.scenario", "infermodel.plugin"} <= set(MODULES)
    assert len(PLUGIN_FILES) > 10


def test_declarations_import_nothing_of_the_package():
    assert GRAPH["infermodel.declarations"] == set()


def test_units_uses_only_the_standard_library():
    used = {name.partition(".")[0] for name, _ in imports(MODULES["infermodel.units"], "infermodel.units")}
    assert used <= STDLIB, used - STDLIB


def test_errors_uses_only_the_standard_library():
    used = {name.partition(".")[0] for name, _ in imports(MODULES["infermodel.errors"], "infermodel.errors")}
    assert used <= STDLIB, used - STDLIB


def test_simulator_imports_only_errors_of_the_package():
    for module in MODULES:
        if _in(module, ["infermodel.simulator"]):
            outside = {m for m in GRAPH[module] if not _in(m, ["infermodel.simulator"])}
            assert outside <= {"infermodel.errors"}, (module, outside)


def test_the_kernel_tables_are_read_with_the_bottom_of_the_core_only():
    # docs/internals.rst: infermodel.kernels imports only errors (and the other modules
    # that import nothing of the package); nothing of the engine, the wings or above.
    bottom = {"infermodel.errors", "infermodel.units", "infermodel.formatting",
              "infermodel.declarations"}
    for module in MODULES:
        if _in(module, ["infermodel.kernels"]):
            outside = {m for m in GRAPH[module] if not _in(m, ["infermodel.kernels"])}
            assert outside <= bottom, (module, outside)
    users = {m for m in MODULES if "infermodel.kernels" in {
        i if not i.startswith("infermodel.kernels.") else "infermodel.kernels" for i in GRAPH[m]}}
    assert not any(_in(m, ["infermodel.engine"]) for m in users), users


def test_the_engine_never_imports_the_features():
    engine = [m for m in MODULES if not _in(m, FEATURES + WINGS + DOOR)]
    assert "infermodel.engine.graph" in engine and "infermodel.scenario" in engine
    offenders = {m: sorted(i for i in GRAPH[m] if _in(i, FEATURES + WINGS)) for m in engine}
    assert {m: i for m, i in offenders.items() if i} == {}


def test_layers_read_bottom_up():
    # declarations -> schema -> registry -> host: nothing lower imports anything higher.
    order = ["infermodel.declarations", "infermodel.schema", "infermodel.registry",
             "infermodel.host"]
    for low, module in enumerate(order):
        assert not GRAPH[module] & set(order[low + 1:]), module


def _cycles() -> list[list[str]]:
    cycles, state = [], {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for target in sorted(GRAPH[module]):
            if state.get(target) == "open":
                cycles.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target, [*path, target])
        state[module] = "done"

    for module in sorted(GRAPH):
        if module not in state:
            visit(module, [module])
    return cycles


def test_no_import_cycle_among_the_packages_modules():
    assert _cycles() == []


def test_a_name_the_package_loads_on_first_use_counts_as_its_module(tmp_path):
    # ``from infermodel import Result`` inside a function imports infermodel.engine.evaluation
    # (and ``evaluate``, the kept-structure one, infermodel.engine.kept).
    source = tmp_path / "probe.py"
    source.write_text("def f():\n    from .. import Result, __version__\n", encoding="utf-8")
    assert ("infermodel.engine.evaluation", 2) in imports(source, "infermodel.sweeping.probe",
                                                   through_package=True)
    assert GRAPH["infermodel.sphinxext.loading"] >= {"infermodel.engine.kept",
                                                     "infermodel.scenario"}


def test_the_cycle_check_can_fail(monkeypatch):
    monkeypatch.setitem(GRAPH, "infermodel.declarations", {"infermodel.registry"})
    assert _cycles()


@pytest.mark.parametrize("path", PLUGIN_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_plugins_import_only_the_package_and_its_plugin_door(path):
    allowed = {"infermodel", "infermodel.plugin"}
    bad = []
    for name, line in imports(path, _plugin_module(path)):
        if (name == "infermodel" or name.startswith("infermodel.")) and name not in allowed:
            bad.append(f"{path.name}:{line} imports {name}")
    assert bad == []


def _plugin_module(path: Path) -> str:
    # Plugins' own relative imports resolve inside their own package.
    parts = list(path.relative_to(path.parents[1]).with_suffix("").parts)
    return ".".join(parts)


def test_the_plugin_rule_sees_a_submodule_imported_from_the_package(tmp_path):
    plugin = tmp_path / "sneaky.py"
    plugin.write_text("def f():\n    from infermodel import scenario\n", encoding="utf-8")
    assert ("infermodel.scenario", 2) in imports(plugin, "sneaky")


def test_scenario_text_is_never_executed():
    # No eval, exec or compile builtin, and no sympy parser of text, anywhere in the package.
    builtins = {"eval", "exec", "compile", "__import__"}
    parsers = {"sympify", "parse_expr"}
    calls = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Name) and func.id in builtins | parsers:
                    calls.append(f"{module}:{node.lineno} calls {func.id}")
                elif isinstance(func, ast.Attribute) and func.attr in parsers:
                    calls.append(f"{module}:{node.lineno} calls {func.attr}")
    assert calls == []


def test_the_core_knows_no_lever():
    # Without plugins the core declares nothing: no field, lever, preset or witness.
    from infermodel.host import PluginHost

    registries = PluginHost(autoload=False).registries
    assert registries.all_fields() == [] and registries.levers == {}
    assert registries.presets == {"model": {}, "hardware": {}, "efficiency": {}}
    assert registries.witnesses == {}
    assert registries.number_formats == {} and registries.quantisers == {}


#: Where get_host() may be called: the entry points (the command line, the Sphinx
#: extension, load_scenario, the kept model of a scenario path) and the host module
#: that defines it.
GET_HOST_ALLOWED = ("infermodel.cli", "infermodel.sphinxext", "infermodel.host",
                    "infermodel.scenario:load_scenario",
                    # evaluate(path) and sweep(path) without a host keep a model per path
                    # for the host load_scenario would read it with.
                    "infermodel.engine.kept:model_for")


class _GetHostCalls(ast.NodeVisitor):
    def __init__(self, module: str) -> None:
        self.module, self.functions, self.found = module, [], set()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.functions.append(node.name)
        self.generic_visit(node)
        self.functions.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if (isinstance(func, ast.Name) and func.id == "get_host") or (
                isinstance(func, ast.Attribute) and func.attr == "get_host"):
            self.found.add(f"{self.module}:{self.functions[0]}" if self.functions else self.module)
        self.generic_visit(node)


def _get_host_calls() -> list[str]:
    found = set()
    for module, path in MODULES.items():
        visitor = _GetHostCalls(module)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8")))
        found |= visitor.found
    return sorted(found)


def test_get_host_is_called_only_at_the_entry_points():
    calls = _get_host_calls()
    assert "infermodel.scenario:load_scenario" in calls
    outside = [c for c in calls if not any(c == a or c.startswith((a + ".", a + ":"))
                                           for a in GET_HOST_ALLOWED)]
    assert outside == []


def test_the_get_host_check_sees_a_call_through_a_module():
    visitor = _GetHostCalls("infermodel.graph")
    visitor.visit(ast.parse("def build():\n    return host.get_host()\n"))
    assert visitor.found == {"infermodel.graph:build"}


def _private_writes(tree: ast.AST, where: str) -> list[str]:
    found = []
    for node in ast.walk(tree):
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        for target in targets:
            while isinstance(target, ast.Subscript):
                target = target.value
            if (isinstance(target, ast.Attribute) and target.attr.startswith("_")
                    and not target.attr.startswith("__")
                    and not (isinstance(target.value, ast.Name) and target.value.id in ("self", "cls"))):
                found.append(f"{where}:{node.lineno} writes .{target.attr}")
    return found


def test_nothing_writes_a_private_attribute_of_another_object():
    found = []
    for path in [*MODULES.values(), *PLUGIN_FILES]:
        found += _private_writes(ast.parse(path.read_text(encoding="utf-8")), path.name)
    assert found == []


def test_the_private_write_check_can_fail():
    tree = ast.parse("registries._section_classes['model'] = cls\nself._ok = 1\n")
    assert _private_writes(tree, "x.py") == ["x.py:1 writes ._section_classes"]


def _diagram_rows() -> dict[str, int]:
    """Row of each module in docs/internals.rst's layer diagram (0 = the bottom row)."""
    text = (ROOT / "docs" / "internals.rst").read_text(encoding="utf-8")
    block = text.split("the rows are the longest import chain below each module)::\n\n", 1)[1]
    lines = block.split("\n\n", 1)[0].splitlines()
    rows = {}
    for row, line in enumerate(reversed(lines)):
        names = re.split(r"\s{2,}", line.strip())[0]     # a label may follow the names
        for name in names.split(" · "):
            rows["infermodel." + name.split(" (")[0].strip()] = row
    return rows


def _package_of(module: str) -> str:
    parts = module.split(".")
    packages = ("engine", "kernels", "sweeping", "analyses", "accuracy", "simulator", "cli",
                "sphinxext", "hf_config")
    return ".".join(parts[:2]) if len(parts) > 2 and parts[1] in packages else module


def _upward_imports(rows: dict[str, int]) -> list[str]:
    wrong = []
    for module, imported in GRAPH.items():
        if module == "infermodel":
            continue
        here = _package_of(module)
        assert here in rows, f"{here} is missing from the layer diagram in docs/internals.rst"
        for target in imported:
            there = _package_of(target)
            if there != here and rows[there] >= rows[here]:
                wrong.append(f"{module} imports {target}, on the same row or above")
    return wrong


def test_the_layer_diagram_in_the_docs_is_the_import_graph():
    rows = _diagram_rows()
    assert rows["infermodel.declarations"] == 0 and rows["infermodel.sphinxext"] > rows["infermodel.cli"]
    assert _upward_imports(rows) == []


def test_the_diagram_check_sees_an_upward_import(monkeypatch):
    monkeypatch.setitem(GRAPH, "infermodel.schema", GRAPH["infermodel.schema"] | {"infermodel.host"})
    assert _upward_imports(_diagram_rows()) == [
        "infermodel.schema imports infermodel.host, on the same row or above"]


def test_every_module_in_the_layer_diagram_exists():
    names = set(_diagram_rows())
    assert names - set(MODULES) == set()


def test_the_bottom_modules_import_nothing_of_the_package():
    # docs/internals.rst: declarations, errors, units and formatting import nothing of it.
    for module in ("infermodel.declarations", "infermodel.errors", "infermodel.units",
                   "infermodel.formatting"):
        assert GRAPH[module] == set(), module


def _described_modules(package: str) -> set[str]:
    """The module names (````name```` written alone) in the bullets of the page's entry
    for ``package``.
    """
    text = (ROOT / "docs" / "internals.rst").read_text(encoding="utf-8")
    entry = text.split(f"``infermodel.{package}``\n", 1)[1].split("\n``", 1)[0]
    entry = entry.split("\nLayers\n", 1)[0]
    bullets = re.findall(r"^    \* .*(?:\n      .*)*", entry, flags=re.MULTILINE)
    return {name for bullet in bullets for name in re.findall(r"``([a-z_]+)``", bullet)}


@pytest.mark.parametrize("package", ["engine", "sweeping", "analyses", "accuracy", "sphinxext",
                                     "cli"])
def test_the_page_names_each_feature_packages_modules(package):
    modules = {m.rpartition(".")[2] for m in MODULES
               if m.startswith(f"infermodel.{package}.")} - {"__main__"}
    described = _described_modules(package)
    if package == "cli":
        # "app and one module per command": app is named, the commands are not.
        assert described <= modules and "app" in described
    else:
        assert described == modules


#: The most modules at the top of the package (``__init__`` and ``__main__`` included):
#: anything more goes into a package with one job.
MAX_TOP_LEVEL_MODULES = 20


def test_the_top_of_the_package_holds_few_modules():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


def _module_level_functions(name: str) -> list[str]:
    found = []
    for module, path in MODULES.items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
                found.append(module)
    return found


def test_there_is_one_module_level_evaluate_and_it_is_infermodel_evaluate():
    import infermodel
    from infermodel.engine import kept

    assert _module_level_functions("evaluate") == ["infermodel.engine.kept"]
    assert infermodel.evaluate is kept.evaluate



def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_uses(source: str, module: str, *, is_package: bool = False) -> list[str]:
    """Underscore names of another module of the package that ``module`` imports
    (``from .x import _y``) or reads from an imported module (``x._y``).
    """
    found, bound = [], {}
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")
                keep = len(parts) - node.level + (1 if is_package else 0)
                base = ".".join(parts[:keep] + ([base] if base else []))
            if not (base == "infermodel" or base.startswith("infermodel.")):
                continue
            for alias in node.names:
                if f"{base}.{alias.name}" in MODULES:
                    bound[alias.asname or alias.name] = f"{base}.{alias.name}"
                elif _is_private(alias.name) and base != module:
                    found.append(f"{module} imports {base}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("infermodel.") and alias.asname:
                    bound[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in bound and _is_private(node.attr)):
            found.append(f"{module} reads {bound[node.value.id]}.{node.attr}")
    return found


def test_no_module_uses_another_modules_underscore_names():
    found = []
    for module, path in MODULES.items():
        found += _private_uses(path.read_text(encoding="utf-8"), module,
                               is_package=path.name == "__init__.py")
    assert sorted(found) == []


def test_the_underscore_rule_sees_an_import_and_an_attribute():
    source = ("from .figures import _hidden, shown\n"
              "from . import plots\n"
              "def f():\n    return plots._sweep, plots.plot\n")
    assert _private_uses(source, "infermodel.analyses.probe") == [
        "infermodel.analyses.probe imports infermodel.analyses.figures._hidden",
        "infermodel.analyses.probe reads infermodel.analyses.plots._sweep"]


def _file_writers(source: str) -> set[str]:
    """The calls that replace or create files behind a writer's back (``os.replace``,
    ``os.rename``, ``tempfile``), by name.
    """
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id, node.attr) in {("os", "replace"), ("os", "rename")} \
                    or node.value.id == "tempfile":
                found.add(f"{node.value.id}.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module == "tempfile":
            found.add("tempfile")
    return found


def test_files_are_written_atomically_in_one_place():
    writers = {m for m, path in MODULES.items()
               if _file_writers(path.read_text(encoding="utf-8"))}
    assert "infermodel.output" in writers
    assert writers == {"infermodel.output"}


def test_the_writer_rule_sees_a_rename():
    assert _file_writers("import os\ndef f(a, b):\n    os.replace(a, b)\n") == {"os.replace"}


def test_the_package_ships_py_typed_for_plugins_type_checkers():
    import tomllib

    assert (PACKAGE / "py.typed").is_file()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "py.typed" in project["tool"]["setuptools"]["package-data"]["infermodel"]


#: Measured operator times go into a ``kernels`` package beside the engine
#: (docs/internals.rst): it reads its tables with the bottom of the core only, and the
#: engine and the wings use it, never the other way round.
KERNELS = "infermodel.kernels"
KERNELS_MAY_IMPORT = ("infermodel.declarations", "infermodel.errors", "infermodel.units",
                      "infermodel.formatting", "infermodel.quantity", "infermodel.output",
                      "infermodel.progress", "infermodel.tomlfile")


def _kernel_violations(graph: dict[str, set[str]]) -> list[str]:
    wrong = []
    for module, imported in sorted(graph.items()):
        if _in(module, [KERNELS]):
            wrong += [f"{module} imports {m}" for m in sorted(imported)
                      if not _in(m, [KERNELS, *KERNELS_MAY_IMPORT])]
    return wrong


def test_kernels_sit_beside_the_engine():
    assert _kernel_violations(GRAPH) == []


def test_the_kernels_rule_can_fail(monkeypatch):
    monkeypatch.setitem(GRAPH, "infermodel.kernels.probe",
                        {"infermodel.errors", "infermodel.engine.graph"})
    assert _kernel_violations(GRAPH) == [
        "infermodel.kernels.probe imports infermodel.engine.graph"]
