"""Every data file the packages read at run time is declared, so an installed copy has it.

An editable install reads the checkout and hides a missing ``package-data`` glob; a plain
``pip install`` (what a user and a plugin author's fresh environment get) ships only what
the globs name. Setuptools expands each glob with :func:`glob.glob` under the package's
folder, and so does this test, without building a wheel.
"""

from __future__ import annotations

import glob
import tomllib
from pathlib import Path

import pytest
from setuptools import find_packages

ROOT = Path(__file__).resolve().parents[1]
# Read by people, never at run time.
DOCUMENTATION = {"README.rst"}


def package_folders() -> dict[str, Path]:
    """The package → folder map of ``setup.py``."""
    folders = {name: ROOT / "src" / name.replace(".", "/")
               for name in find_packages(ROOT / "src", include=["infermodel*"])}
    folders.update({name: ROOT / "plugins" / name.replace(".", "/")
                    for name in find_packages(ROOT / "plugins", include=["infermodel*"])})
    folders["infermodel_scenarios"] = ROOT / "scenarios"
    return folders


def declared_files(folders: dict[str, Path]) -> set[Path]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    globs = config["tool"]["setuptools"]["package-data"]
    files = set()
    for name, folder in folders.items():
        for pattern in [*globs.get("*", []), *globs.get(name, [])]:
            files.update(Path(p) for p in glob.glob(str(folder / pattern)))
    return files


def data_files(folders: dict[str, Path]) -> set[Path]:
    files = set()
    for folder in folders.values():
        for path in folder.rglob("*"):
            if (path.is_file() and path.suffix not in {".py", ".pyc"}
                    and path.name not in DOCUMENTATION and "__pycache__" not in path.parts
                    and not any(p.endswith(".egg-info") for p in path.parts)):
                files.add(path)
    return files


def test_every_data_file_of_a_package_is_declared():
    folders = package_folders()
    missing = sorted(str(p.relative_to(ROOT)) for p in data_files(folders) - declared_files(folders))
    assert not missing, "not in [tool.setuptools.package-data]: " + ", ".join(missing)


@pytest.mark.parametrize("kind", ["models", "hardware", "efficiency"])
def test_the_builtin_presets_are_declared(kind):
    folders = package_folders()
    presets = set((folders["infermodel_builtins"] / "presets" / kind).glob("*.toml"))
    assert presets and presets <= declared_files(folders)
