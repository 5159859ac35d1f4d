"""Every shipped scenario's numbers, exactly as ``infermodel run --format json`` prints them.

The snapshot ``tests/data/scenario_numbers.json`` holds, per scenario, each quantity's value
as JSON (floats written with Python's shortest round-trip repr). Floats are compared to
within a few units in the last place (:data:`ULPS`): numpy releases can differ in the last bit
of their vectorised ``log`` and ``exp`` (the measured tables' log–log interpolation), which no
change of ours moves; a changed formula or input moves a number by far
more. A change meant to leave the numbers alone (a speed-up, a refactoring) keeps this
test passing unchanged; a change meant to alter the physics regenerates the snapshot, with
the installed plugins (the kv-offload example included) autoloaded, by running::

    .venv/bin/python tests/test_scenario_numbers.py --write

and the diff of the snapshot shows exactly which numbers moved.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "scenarios"
SNAPSHOT = Path(__file__).resolve().parent / "data" / "scenario_numbers.json"
#: Units in the last place a float may differ by from the snapshot (see the module docstring).
ULPS = 4


def same(snapshot, now) -> bool:
    """Whether a value is the snapshot's: the same type, and equal (floats within ULPS).

    >>> same(0.0005642240047454835, 0.0005642240047454834), same(1.0, 1.0000001), same(1, 1.0)
    (True, False, False)
    """
    if type(snapshot) is not type(now):
        return False
    if isinstance(snapshot, float) and snapshot != now:
        return abs(snapshot - now) <= ULPS * math.ulp(max(abs(snapshot), abs(now)))
    return snapshot == now


def scenario_numbers() -> dict[str, dict[str, object]]:
    """``{scenario file name: {quantity: value}}`` from ``run --format json``, in-process."""
    from infermodel.cli import main

    numbers = {}
    for path in sorted(SCENARIOS.glob("*.toml")):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = main(["run", str(path), "--format", "json"])
        assert status == 0, path
        quantities = json.loads(out.getvalue())["quantities"]
        numbers[path.name] = {name: q["value"] for name, q in quantities.items()}
    return numbers


def test_every_shipped_scenario_matches_its_snapshot_to_the_bit(autoload_host):
    expected = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    actual = scenario_numbers()
    assert sorted(actual) == sorted(expected), "scenarios added or removed: regenerate"
    for scenario, values in expected.items():
        got = actual[scenario]
        assert sorted(got) == sorted(values), f"{scenario}: quantities added or removed"
        moved = {n: (v, got[n]) for n, v in values.items() if not same(v, got[n])}
        assert not moved, f"{scenario}: (snapshot, now) {moved}"


def test_kept_structures_give_the_snapshot_too(autoload_host):
    # infermodel.evaluate keeps each scenario's structure; a value set to what the file
    # says goes through the kept path (no rebuild) and must give the same numbers.
    import infermodel
    from infermodel.engine.kept import clear_models
    from infermodel.formatting import json_value

    expected = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    clear_models()
    for path in sorted(SCENARIOS.glob("*.toml")):
        first = infermodel.evaluate(path)
        batch = first.scenario.value("workload.batch")
        again = infermodel.evaluate(path, {"workload.batch": batch})
        for result in (first, again):
            got = {name: json_value(value) for name, value in result.values.items()}
            values = expected[path.name]
            assert sorted(got) == sorted(values), path.name
            moved = {n: (v, got[n]) for n, v in values.items() if not same(v, got[n])}
            assert not moved, f"{path.name}: (snapshot, now) {moved}"
    clear_models()


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_scenario_numbers.py --write")
    text = json.dumps(scenario_numbers(), indent=1, sort_keys=True) + "\n"
    SNAPSHOT.write_text(text, encoding="utf-8")
    print(f"wrote {SNAPSHOT.relative_to(ROOT)}")
