"""Search: the best sweep point under constraints, checked against brute force."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest

from infermodel.analyses.searching import FEASIBLE, OBJECTIVE, search
from infermodel.cli import main
from infermodel.engine.evaluation import evaluate_afresh as evaluate
from infermodel.errors import FormulaError, InfermodelError, ScenarioError
from infermodel.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
PLANNER = ROOT / "scenarios" / "planner-70b-32-users.toml"
CASE = ROOT / "scenarios" / "case-study-24gb.toml"
BASE = ROOT / "scenarios" / "module10-case-base.toml"


def test_planner_winner_matches_brute_force():
    """Inference lab, 'What it costs to keep it running': the planning task.

    Every choice is evaluated one at a time with the scalar path; the cheapest that
    fits and gives every user at least 25 tokens/s must be the search's winner.
    """
    scenario = load_scenario(PLANNER)
    found = search(scenario)
    assert len(found.sweep) == 5 * 4 * 4
    table = scenario.tables["sweep"]
    weights = table["choices"]["weights"]
    best = None
    feasible = 0
    for index, (preset, count, weight) in enumerate(itertools.product(
            table["hardware.preset"], table["hardware.count"], weights)):
        overrides = {"hardware.preset": preset, "hardware.count": count, **weights[weight]}
        result = evaluate(scenario, overrides)
        ok = result["fits"] and result["tokens_per_s_per_user"] >= 25
        cost = result["cost_per_million_output_tokens"]
        assert math.isclose(found.values[index], cost, rel_tol=1e-12)
        assert (found.failed[index] == FEASIBLE) == ok
        if ok:
            feasible += 1
            if best is None or cost < best[0]:
                best = (cost, preset, count, weight)
    assert feasible == len(found.ranking)
    assert best is not None
    labels = found.best_labels
    assert (labels["hardware.preset"], labels["hardware.count"], labels["weights"]) == best[1:]
    assert math.isclose(found.values[found.best], best[0], rel_tol=1e-12)


def test_planner_report_and_explain():
    found = search(PLANNER)
    text = found.report()
    assert text.startswith("search over 80 choices of planner-70b-32-users: minimise "
                           "cost_per_million_output_tokens")
    assert "subject to: fits; tokens_per_s_per_user >= 25" in text
    assert "runners-up:" in text and "rejected:" in text
    assert "fails fits (fits = no, " in text  # what the failed condition compares
    assert "memory_required = " in text
    assert "reproduce: infermodel run" in text
    derivation = found.explain("tpot")
    assert derivation.target == "tpot"
    best = found.evaluate_best()
    assert math.isclose(best["cost_per_million_output_tokens"], found.values[found.best],
                        rel_tol=1e-12)


def test_rejected_choice_names_first_failed_constraint():
    found = search(CASE, {"workload.batch": "1..64 log2"}, maximise="tokens_per_s_total",
                   constraints=["tokens_per_s_per_user >= 100", "fits"], use_table=False)
    labels = [found.sweep.labels(i)["workload.batch"] for i in range(len(found.sweep))]
    assert labels == [1, 2, 4, 8, 16, 32, 64]
    # batch 1, 2, 4 are fast enough; 8 and beyond fail speed first (and 32, 64 also memory).
    assert [found.failure(i) for i in range(7)] == [
        None, None, None] + ["tokens_per_s_per_user >= 100"] * 4
    assert found.best_labels == {"workload.batch": 4}
    assert [found.sweep.labels(int(i))["workload.batch"] for i in found.ranking] == [4, 2, 1]
    assert found.rejected_counts() == {"tokens_per_s_per_user >= 100": 4}


def test_minimise_and_ties_keep_grid_order():
    found = search(CASE, {"workload.batch": [1, 2], "efficiency.prefill_mfu": [0.5, 0.6]},
                   minimise="tpot", use_table=False)
    # tpot does not depend on the prefill MFU: a tie broken by grid order.
    assert found.best == 0
    assert found.ranking.tolist() == [0, 1, 2, 3]


def test_objective_formula_and_undefined_objective():
    found = search(BASE, {"hardware.preset": ["module10-24gb", "module10-48gb"]},
                   minimise="cost_per_million_output_tokens * 2", use_table=False)
    assert found.failed.tolist() == [FEASIBLE, OBJECTIVE]  # the 48 GB card has no price
    assert "objective" in found.report()
    nothing = search(BASE, {"workload.batch": [64, 128]}, minimise="tpot",
                     constraints=["fits"], use_table=False)
    assert nothing.best is None
    assert "no choice satisfies every constraint" in nothing.report()
    with pytest.raises(InfermodelError):
        nothing.explain("tpot")


def test_to_dict():
    found = search(CASE, {"workload.batch": [1, 18, 64]}, maximise="tokens_per_s_total",
                   constraints=["fits"], use_table=False)
    data = json.loads(json.dumps(found.to_dict()))
    assert data["best"]["choice"] == {"workload.batch": 18}
    assert round(data["best"]["objective"], 1) == 958.9
    assert data["best"]["set"] == ["workload.batch=18"]
    assert data["rejected"][0]["failed"] == "fits"
    assert data["feasible"] == 2


SEARCH = """\
extends = "{base}"

[sweep]
"workload.batch" = [1, 2, 4]

[search]
{body}
"""


@pytest.mark.parametrize("body, message, line", [
    ('maximise = "tokens_per_s_totl"', "did you mean 'tokens_per_s_total'", 7),
    ('maximise = "tokens_per_s_total"\nconstraints = ["tokens_per_s_per_user"]',
     "not a condition", 8),
    ('maximise = "tokens_per_s_total"\nconstraints = ["fits and"]', "not valid syntax", 8),
    ('maximise = "fits"', "a condition, not a number", 7),
    ('maximise = "tpot"\nminimise = "tpot"', "one objective", None),
    ('maximize = 3', "got 3", 7),
    ('objective = "tpot"', "unknown key 'objective'", 7),
    ('constraints = ["fits"]', "no objective", None),
    ('maximise = "tpot"\nconstraints = "fits > 1"', "needs numbers", 8),
    ('maximise = "tpot"\nshow = -1', "number of runners-up", 8),
])
def test_search_table_errors(write_scenario, body, message, line):
    path = write_scenario(SEARCH.format(base=BASE.as_posix(), body=body))
    with pytest.raises((ScenarioError, FormulaError)) as caught:
        search(path)
    text = str(caught.value)
    assert message in text
    if line is not None:
        assert f"scenario.toml:{line}" in text



def test_every_problem_of_a_search_table_is_reported_at_once(write_scenario):
    body = 'maximize = 3\nshow = -1\nobjectiv = "tpot"\nquantities = "tpot"'
    path = write_scenario(SEARCH.format(base=BASE.as_posix(), body=body))
    with pytest.raises(ScenarioError) as caught:
        search(path)
    text = str(caught.value)
    assert "4 errors encountered" in text
    for line, fragment in [(7, "search.maximize: got 3"), (8, "search.show: got -1"),
                           (9, "search.objectiv: unknown key 'objectiv'"),
                           (10, "search.quantities: got 'tpot'")]:
        assert f"scenario.toml:{line}: {fragment}" in text, (fragment, text)


def run_cli(capsys, *argv):
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_cli_search_explain(capsys):
    status, out, err = run_cli(capsys, "search", PLANNER, "--explain", "tpot", "--rejected", "3")
    assert status == 0, err
    assert "best: " in out
    assert "derivation of tpot at the winner:" in out
    assert "... and " in out


def test_cli_search_overrides_and_json(capsys):
    status, out, err = run_cli(capsys, "search", CASE, "--over", "workload.batch=1..64 log2",
                               "--maximise", "tokens_per_s_total", "--constraint", "fits",
                               "--format", "json", "--explain", "tokens_per_s_total")
    assert status == 0, err
    data = json.loads(out)
    assert data["best"]["choice"] == {"workload.batch": 16}
    assert data["explain"]["tokens_per_s_total"]


@pytest.mark.parametrize("arguments, message", [
    (["--minimise", "tpot", "--constraint", "tokens_per_s_total"], "not a condition"),
    (["--minimise", "tpot", "--constraint", "tokens_per_s_per_usr >= 30"],
     "did you mean 'tokens_per_s_per_user'"),
    (["--minimise", "tpot", "--constraint", "__import__('os')"], "not an allowed function"),
    (["--minimise", "tpot", "--over", "workload.bach=1,2"], "did you mean 'workload.batch'"),
    ([], "no objective"),
    (["--minimise", "tpot", "--constraint", "batch > 100", "--explain", "tpot"],
     "no winner to explain"),
])
def test_cli_search_errors(capsys, arguments, message):
    status, _out, err = run_cli(capsys, "search", CASE, "--over", "workload.batch=1,2",
                               *arguments)
    assert status == 2
    assert message in err
    assert "Traceback" not in err
