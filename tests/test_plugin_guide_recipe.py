"""The plugin guide's testing recipe, run as written: its files are read from the code
blocks of ``docs/plugin-guide.rst`` that name a file (``:caption: PATH``), written into a
plugin's folder and tested with pytest — quickly against this environment's infermodel,
and (slow) in a fresh virtual environment with infermodel and the plugin installed by
pip as the guide says.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "plugin-guide.rst"
BLOCK = re.compile(r"^\.\. code-block:: \w+\n   :caption: (\S+)\n\n((?:   .*\n|\n)+)", re.M)


def recipe_files() -> dict[str, str]:
    """``{path: text}`` of every code block of the guide that names its file."""
    files = {}
    for path, body in BLOCK.findall(GUIDE.read_text(encoding="utf-8")):
        lines = [line[3:] if line.startswith("   ") else line for line in body.splitlines()]
        files[path] = "\n".join(lines).strip("\n") + "\n"
    return files


def write_recipe(folder: Path) -> Path:
    for name, text in recipe_files().items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return folder


def clean_environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("INFERMODEL_", "PYTHON", "PYTEST_"))}
    env.update(extra)
    return env


def test_the_guide_names_every_file_of_a_plugin_folder():
    assert set(recipe_files()) == {"src/my_package/host_overhead.py", "src/my_package/__init__.py",
                                   "pyproject.toml", "tests/conftest.py",
                                   "tests/test_host_overhead.py"}


def test_the_recipe_passes_against_this_infermodel(tmp_path):
    # Every plugin installed here is on the path (the test plugin, whose lever is also
    # named host_overhead, and kv_offload): the recipe's host loads none of them.
    folder = write_recipe(tmp_path / "my-plugin")
    env = clean_environment(PYTHONPATH=str(folder / "src"))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout


@pytest.mark.slow
def test_the_recipe_passes_in_a_fresh_virtual_environment(tmp_path):
    folder = write_recipe(tmp_path / "my-plugin")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    env = clean_environment()
    # "pip install infermodel pytest hypothesis": this checkout stands for the release
    for args in ([str(ROOT), "pytest", "hypothesis"], ["-e", "."]):
        done = subprocess.run([*pip, *args], cwd=folder, env=env, capture_output=True,
                              text=True, timeout=1200)
        assert done.returncode == 0, done.stdout + done.stderr
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pytest", "-q", "tests"],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout
    # the shipped scenarios came with the installed package, not from this checkout
    shown = subprocess.run([str(venv / "bin" / "infermodel"), "presets", "scenarios"],
                           cwd=folder, env=env, capture_output=True, text=True, timeout=120)
    assert str(venv) in subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "from infermodel.tomlfile import shipped_folder; print(shipped_folder())"],
        cwd=folder, env=env, capture_output=True, text=True, timeout=120).stdout
    assert "infermodel:case-study-24gb" in shown.stdout
