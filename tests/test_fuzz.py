"""The command-line fuzz: every shipped scenario mutated, every command's options varied.

A short run (300 cases) is part of the default suite; 10,000 cases run behind the
``slow`` marker, split over the machine's cores. That long run (about 16 minutes on 2 idle
cores) runs in CI (the ``CI`` environment variable set, as ``.ci/run`` is run) and when
selected explicitly, so that a plain local ``pytest`` stays quick: ``pytest -m slow
tests/test_fuzz.py`` (tox's ``fuzz`` environment), or any run with
``INFERMODEL_FUZZ_CASES=N`` set (N cases, the default 10,000 when empty). Each case must end
with exit status 0 or 2 (1 only for a witness or validate reporting a disagreement), at most one ``error:`` message, no
traceback, within its time limit and address-space limit, with no file it read changed
(see ``tests/fuzzing.py``; ``python tests/fuzzing.py SEED`` replays a case).
"""

from __future__ import annotations

import collections
import importlib.util
import multiprocessing
import os
import time
from pathlib import Path

import pytest

import fuzzing

SHORT_CASES = 300
SLOW_CASES = 10_000


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    from infermodel.host import set_host

    set_host(None)  # a fresh host with the built-in plugins only
    workdir = tmp_path_factory.mktemp("fuzz")
    here = os.getcwd()
    os.chdir(workdir)  # plots without -o are written to the working directory
    try:
        yield fuzzing.Context.build(workdir)
    finally:
        os.chdir(here)
        set_host(None)


def _report(ran: int, failures: list[str]) -> str:
    """The failures by kind (what went wrong and the command), then the first ten whole;
    every one is written to the file ``INFERMODEL_FUZZ_REPORT`` names, if set.
    """
    kinds = collections.Counter(
        (f.split("\n")[0].split(" (")[0], f.split("\n")[1].split("'")[1]) for f in failures)
    summary = "\n".join(f"  {n} × {what} ({command})" for (what, command), n in kinds.most_common())
    target = os.environ.get("INFERMODEL_FUZZ_REPORT")
    if target:
        Path(target).write_text("\n\n".join(failures), encoding="utf-8")
    shown = "\n\n".join(failures[:10])
    return f"{len(failures)} of {ran} fuzz cases failed:\n{summary}\n\n{shown}"


def test_fuzz_short(context):
    ran, failures = fuzzing.fuzz(context, range(SHORT_CASES))
    assert ran == SHORT_CASES
    assert not failures, _report(ran, failures)


#: Cases of the commands that evaluate a scenario several times (each one its own case).
FOCUSED = {"rank": 8, "compare": 16}


def test_fuzz_the_ranking_and_comparison_commands(context):
    seeds, wanted = [], dict(FOCUSED)
    for seed in range(200_000, 210_000):
        command = fuzzing.make_case(seed, context).command
        if wanted.get(command, 0) > 0:
            seeds.append(seed)
            wanted[command] -= 1
        if not any(wanted.values()):
            break
    assert len(seeds) == sum(FOCUSED.values())
    ran, failures = fuzzing.fuzz(context, seeds)
    assert ran == len(seeds)
    assert not failures, _report(ran, failures)


def test_fuzz_the_layout_fields(context):
    # Expert parallelism and data-parallel attention: degrees that do and do not divide
    # the cards, heads or experts, wrong types and extremes, on MoE and dense scenarios.
    failures = []
    with fuzzing.memory_limit(), fuzzing.small_caps():
        for seed in range(300_000, 300_012):
            case = fuzzing.make_layout_case(seed, context)
            outcome = fuzzing.run_case(case, context)
            wrong = fuzzing.judge(case, outcome, context)
            if wrong:
                failures.append(f"{'; '.join(wrong)}\n{case.describe()}\nstatus "
                                f"{outcome.status}\n{outcome.err[-3000:]}")
    assert not failures, _report(12, failures)


@pytest.mark.skipif(importlib.util.find_spec("aiconfigurator_core") is None,
                    reason='the silicon ledger needs pip install "infermodel[kernels]"')
def test_fuzz_the_silicon_ledger_options(context):
    # validate --ledger silicon: measured kernels, the comparison, the loop, worker
    # processes and the sample, valid, invalid and conflicting, on one or two points.
    failures = []
    with fuzzing.memory_limit(), fuzzing.small_caps():
        for seed in range(400_000, 400_006):
            case = fuzzing.make_silicon_case(seed, context)
            outcome = fuzzing.run_case(case, context)
            wrong = fuzzing.judge(case, outcome, context)
            if wrong:
                failures.append(f"{'; '.join(wrong)}\n{case.describe()}\nstatus "
                                f"{outcome.status}\n{outcome.err[-3000:]}")
    assert not failures, _report(6, failures)


@pytest.mark.skipif(importlib.util.find_spec("aiconfigurator_core") is None,
                    reason='the measured kernel tables are not installed (pip install "infermodel[kernels]")')
def test_fuzz_measured_kernels_over_latent_hybrid_and_layout_scenarios(context):
    # Measured kernels on latent attention, state-space and linear-attention layers and
    # DP/EP layouts, with engines, cards, versions and workloads the tables do and do not
    # hold: a result with its warnings, or one message.
    failures = []
    with fuzzing.memory_limit(), fuzzing.small_caps():
        for seed in range(400_000, 400_010):
            case = fuzzing.make_measured_case(seed, context)
            outcome = fuzzing.run_case(case, context)
            wrong = fuzzing.judge(case, outcome, context)
            if wrong:
                failures.append(f"{'; '.join(wrong)}\n{case.describe()}\nstatus "
                                f"{outcome.status}\n{outcome.err[-3000:]}")
    assert not failures, _report(10, failures)


def _overall_limit(cases: int, workers: int) -> float:
    """Seconds the whole long run may take: four times its pace on two idle cores (about
    0.19 s of one core per case), at least ten minutes. Past it the run fails instead of
    hanging, so a stuck worker is reported, not waited for.
    """
    return max(600.0, 4 * 0.19 * cases / workers)


@pytest.mark.slow
def test_fuzz_ten_thousand_cases(tmp_path, request):
    from infermodel.host import set_host

    asked = os.environ.get("INFERMODEL_FUZZ_CASES")
    in_ci = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
    if (asked is None and not in_ci
            and "slow" not in (request.config.getoption("markexpr") or "")):
        pytest.skip("the 10,000-case fuzz runs in CI (CI=true), with -m slow (tox -e fuzz) "
                    "or with INFERMODEL_FUZZ_CASES")
    cases = int(asked) if asked else SLOW_CASES
    set_host(None)
    workers = max(1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                         else os.cpu_count() or 1))
    base = 1_000_000  # seeds apart from the short run's
    jobs = [(base + k, len(range(k, cases, workers)), workers, str(tmp_path))
            for k in range(workers)]
    here = os.getcwd()
    try:
        # Fresh interpreters, not forks: the suite's process holds threads (numeric
        # libraries' pools) by the time this runs, and a fork can inherit a held lock.
        with multiprocessing.get_context("spawn").Pool(workers) as pool:
            pending = pool.map_async(fuzzing.worker, jobs)
            try:
                results = pending.get(timeout=_overall_limit(cases, workers))
            except multiprocessing.TimeoutError:
                pytest.fail(f"the {cases}-case fuzz did not finish within "
                            f"{_overall_limit(cases, workers):.0f} s: a worker waits without end "
                            "(each case has its own limit, so this is the harness itself)")
    finally:
        os.chdir(here)
        set_host(None)
    ran = sum(r[0] for r in results)
    failures = [f for r in results for f in r[1]]
    assert ran == cases
    print(f"\nfuzz: {ran} cases in {max(r[2] for r in results):.0f} s on {workers} workers, "
          f"{len(failures)} failures")
    assert not failures, _report(ran, failures)


# ---------------------------------------------------------------------------------
# The judge itself catches what it is meant to
# ---------------------------------------------------------------------------------


def _case(command="run"):
    return fuzzing.Case(0, command, [command, "x.toml"], None)


def test_judge_flags_a_traceback_and_an_internal_error_status(context):
    outcome = fuzzing.Outcome(1, "", "Traceback (most recent call last):\n  ...\ninternal error: x",
                              0.1)
    wrong = fuzzing.judge(_case(), outcome, context)
    assert "traceback" in wrong and "exit status 1" in wrong


def test_judge_flags_two_messages_and_a_silent_exit_2(context):
    two = fuzzing.Outcome(2, "", "error: one\nerror: two\n", 0.1)
    assert "2 error messages" in fuzzing.judge(_case(), two, context)
    silent = fuzzing.Outcome(2, "", "", 0.1)
    assert "exit 2 without an error message" in fuzzing.judge(_case(), silent, context)
    fine = fuzzing.Outcome(2, "", "error: x.toml:3: workload.batch: got -1\n", 0.1)
    assert fuzzing.judge(_case(), fine, context) == []


def test_judge_flags_a_changed_input_and_restores_it(context):
    # A stand-in preset file (the real ones are left alone: other runs may read them).
    preset = context.workdir / "stand-in-preset.toml"
    preset.write_bytes(b"[hardware]\n")
    context.preset_files.append(preset)
    context.watched[preset] = fuzzing._fingerprint(preset)
    try:
        os.replace(_write_beside(preset, b"overwritten"), preset)
        wrong = fuzzing.judge(_case(), fuzzing.Outcome(0, "", "", 0.1), context)
        assert any(w.startswith("changed ") and str(preset) in w for w in wrong)
        assert preset.read_bytes() == b"[hardware]\n"
    finally:
        context.preset_files.remove(preset)
        del context.watched[preset]


def _write_beside(path: Path, data: bytes) -> Path:
    other = path.with_name(path.name + ".fuzz-tmp")
    other.write_bytes(data)
    return other


def test_run_case_stops_a_case_at_its_processor_time_limit(context, monkeypatch):
    import infermodel.cli

    def busy(argv):
        end = time.monotonic() + 5
        while time.monotonic() < end:
            pass
        return 0

    monkeypatch.setattr(infermodel.cli, "main", busy)
    outcome = fuzzing.run_case(_case(), context, seconds=0.2)
    assert outcome.timed_out and outcome.seconds < 3
    assert "ran past" in " ".join(fuzzing.judge(_case(), outcome, context))


def test_run_case_stops_a_waiting_case_at_its_elapsed_time_limit(context, monkeypatch):
    import infermodel.cli

    def waiting(argv):
        time.sleep(5)
        return 0

    monkeypatch.setattr(infermodel.cli, "main", waiting)
    outcome = fuzzing.run_case(_case(), context, seconds=0.2, wall=0.3)
    assert outcome.timed_out and outcome.seconds < 3


def test_measuring_commands_have_the_longer_processor_time_limit():
    assert fuzzing.case_seconds(_case("validate")) == fuzzing.MEASURING_SECONDS
    assert fuzzing.case_seconds(_case("run")) == fuzzing.CASE_SECONDS < fuzzing.MEASURING_SECONDS


def test_memory_limit_turns_a_runaway_allocation_into_memory_error():
    with fuzzing.memory_limit(extra=256 * 2**20), pytest.raises(MemoryError):
        bytearray(2 * 2**30)


def test_cases_are_reproducible_from_their_seed(context):
    assert fuzzing.make_case(1234, context) == fuzzing.make_case(1234, context)
    commands = {fuzzing.make_case(seed, context).command for seed in range(200)}
    assert commands == set(context.parser_options)  # every command is fuzzed
