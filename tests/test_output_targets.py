"""Every writer refuses a target that is not a regular file before it does any work.

Found by the 2,262-case fuzz of the command line: ``run --format latex -o FIFO`` waited
forever for a reader. A named pipe, a device, a directory or a stream of the process
(``/dev/stdout``) is now one message and exit status 2, at once, for ``run -o``,
``sweep -o``, ``plot -o`` and the generated documentation pages alike; the target is
left as it was.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from conftest import SCENARIOS
from infermodel.cli import main

QUANT = SCENARIOS / "quant-bf16.toml"

COMMANDS = {
    "run": ["run", QUANT, "--format", "latex", "-o"],
    "explain": ["explain", QUANT, "tpot", "-o"],
    "sweep": ["sweep", QUANT, "--over", "workload.batch=1,2,4", "--format", "csv", "-o"],
    "plot": ["plot", QUANT, "throughput", "-o"],
}


def _targets(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    directory = tmp_path / "folder.png"
    directory.mkdir()
    link = tmp_path / "link.png"
    link.symlink_to("/dev/null")
    return {"fifo": (fifo, "a named pipe, not a regular file"),
            "device": (Path("/dev/null"), "a character device, not a regular file"),
            "link to a device": (link, "a character device, not a regular file"),
            "stdout": (Path("/dev/stdout"), "a stream of this process"),
            "directory": (directory, "it is a directory")}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_target_that_is_not_a_regular_file_is_refused_at_once(command, tmp_path, capsys,
                                                                 host):
    for kind, (target, fragment) in _targets(tmp_path).items():
        mode = os.lstat(target).st_mode
        start = time.monotonic()
        status = main([str(a) for a in COMMANDS[command]] + [str(target)])
        elapsed = time.monotonic() - start
        err = capsys.readouterr().err
        assert status == 2, (kind, err)
        assert err.startswith("error: ") and fragment in err, (kind, err)
        assert "Traceback" not in err
        assert elapsed < 15, (kind, elapsed)
        assert os.lstat(target).st_mode == mode, kind  # left as it was
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file


def test_a_regular_file_and_a_link_to_one_are_still_written(tmp_path, capsys, host):
    real = tmp_path / "out.tex"
    real.write_text("old", encoding="utf-8")
    link = tmp_path / "link.tex"
    link.symlink_to(real)
    assert main(["run", str(QUANT), "--format", "latex", "-o", str(link)]) == 0
    assert link.is_symlink() and real.read_text(encoding="utf-8").startswith(r"\begin")
    assert stat.S_ISREG(os.stat(real).st_mode)


def test_the_check_names_each_kind():
    from infermodel.output import not_regular

    assert not_regular("/dev/null") == "a character device"
    assert not_regular("/dev/stdout") == "a stream of this process (under /proc or /dev/fd)"
    assert not_regular("/proc/self/status").startswith("a stream")
    assert not_regular("/") == "a directory"
    assert not_regular("no-such-file.csv") is None


def test_a_generated_docs_page_that_is_a_pipe_is_a_configuration_error(tmp_path):
    from types import SimpleNamespace

    from infermodel import sphinxext

    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "alpha.toml").write_text(f'extends = "{QUANT}"\n', encoding="utf-8")
    pages = tmp_path / "src" / "generated"
    pages.mkdir(parents=True)
    os.mkfifo(pages / "alpha.rst")
    config = SimpleNamespace(infermodel_scenario_pages=str(scenarios / "*.toml"),
                             infermodel_scenario_pages_dir="generated",
                             infermodel_headline_quantities=["tpot"])
    app = SimpleNamespace(config=config, srcdir=str(tmp_path / "src"))
    start = time.monotonic()
    with pytest.raises(sphinxext.InfermodelSphinxError, match="a named pipe, not a regular file"):
        sphinxext.generate_scenario_pages(app)
    assert time.monotonic() - start < 15
    assert stat.S_ISFIFO(os.stat(pages / "alpha.rst").st_mode)
