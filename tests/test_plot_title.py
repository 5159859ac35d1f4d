r"""A plot title matplotlib cannot draw is one message before any drawing (found by the
2,262-case fuzz: ``plot --title '$\frac{$'`` ended in a mathtext parse traceback).
"""

from __future__ import annotations

import pytest

from conftest import SCENARIOS
from infermodel.cli import main

QUANT = SCENARIOS / "quant-bf16.toml"


@pytest.mark.parametrize("title", [r"$\frac{$", r"$\undefinedcommand$", r"$x^$"])
def test_an_unparsable_mathtext_title_is_one_message_and_exit_2(title, tmp_path, capsys, host):
    output = tmp_path / "plot.png"
    status = main(["plot", str(QUANT), "throughput", "--title", title, "-o", str(output)])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith("error: the plot title is not valid mathtext")
    assert "Traceback" not in err and len(err.splitlines()) == 1
    assert not output.exists()


@pytest.mark.parametrize("title", [r"decode at $\alpha = 0.8$", "a plain $5 title", r"costs \$5"])
def test_valid_titles_are_drawn(title, tmp_path, capsys, host):
    output = tmp_path / "plot.svg"
    assert main(["plot", str(QUANT), "throughput", "--title", title, "-o", str(output)]) == 0
    assert output.stat().st_size > 0
