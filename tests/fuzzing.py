"""A seeded mutation fuzzer for the command line (used by ``test_fuzz.py``).

Each case takes a shipped scenario, mutates its data or its text (types, extremes,
nesting, paths, injected text, new tables), builds a command line for one command from
its argparse definition (values of every option: valid ones, extremes, injected text,
paths, output targets including inputs and device files) and runs it in-process through
:func:`infermodel.cli.main` under a per-case time limit and an address-space limit.

A case passes when the exit status is 0 or 2 (1 only for a witness or a real-model validation that reports a
disagreement, as documented), standard error holds at most one ``error:`` message and no
traceback, the case ended within its time limit, and no file it could read (scenarios,
presets, length files, configs) changed and no device node was replaced.

Every case is a pure function of its seed: ``python tests/fuzzing.py SEED`` replays one
and prints its command line and scenario text.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import math
import os
import random
import resource
import shutil
import signal
import stat
import sys
import time
from pathlib import Path
from typing import Any

import attrs
import tomli

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "scenarios"
DATA = Path(__file__).resolve().parent / "data"

#: The most processor time one case may take (a hang shows as a timeout, not as a stuck
#: suite). Processor time, not elapsed time: on a loaded machine a case's elapsed time
#: grows with the load, its processor time does not.
CASE_SECONDS = 20.0
#: The processor time of a command that measures this machine or a real model for a
#: bounded time (``validate``, ``calibrate``; their ``--quick`` runs, threads included).
MEASURING_SECONDS = 60.0
MEASURING = ("validate", "calibrate")
#: The elapsed time after which a case that waits without computing is stopped.
WALL_SECONDS = 240.0
#: Address space the fuzz may use above what the process holds when it starts.
EXTRA_MEMORY = 3 * 2**30


class CaseTimeout(BaseException):
    """Raised in the main thread when a case runs past its time limit."""


@attrs.define
class Case:
    seed: int
    command: str
    argv: list[str]
    text: str | bytes | None  # the mutated scenario written as case.toml, or None
    note: str = ""
    #: Other files the case writes beside it first (a mutated config.json, a length file).
    extra: dict = attrs.field(factory=dict)

    def describe(self) -> str:
        shown = self.text if isinstance(self.text, str) else repr(self.text)
        if shown is not None and len(shown) > 3000:
            shown = shown[:3000] + f"... ({len(shown)} characters)"
        argv = [a if len(a) < 300 else a[:300] + "..." for a in self.argv]
        return f"seed {self.seed}: infermodel {' '.join(map(repr, argv))}\n{self.note}\n{shown}"


@attrs.define
class Outcome:
    status: int | None
    out: str
    err: str
    seconds: float
    timed_out: bool = False
    memory_error: bool = False


# ---------------------------------------------------------------------------------
# A small TOML writer (inline tables only; enough for any mutated value)
# ---------------------------------------------------------------------------------


def _string(text: str) -> str:
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04x}")
        elif 0xD800 <= code <= 0xDFFF:
            out.append("?")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


class Raw(str):
    """TOML text written as it is (deeply nested values, built without recursion)."""


def toml_value(value: Any) -> str:
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_string(str(k))} = {toml_value(v)}" for k, v in value.items()) + "}"
    return _string(str(value))


def toml_document(data: dict) -> str:
    return "".join(f"{_string(str(k))} = {toml_value(v)}\n" for k, v in data.items())


# ---------------------------------------------------------------------------------
# What the fuzzer knows about the product (built once)
# ---------------------------------------------------------------------------------


@attrs.define
class Context:
    workdir: Path
    scenarios: dict[str, dict]  # name -> parsed data (extends kept)
    fields: list[str]
    quantities: list[str]
    presets: dict[str, list[str]]
    levers: list[str]
    witnesses: list[str]
    preset_files: list[Path]
    parser_options: dict[str, list[argparse.Action]]
    devices: list[Path]
    watched: dict[Path, tuple]  # path -> (inode, size, mtime, bytes or None)

    @classmethod
    def build(cls, workdir: Path) -> Context:
        from infermodel.cli import build_parser
        from infermodel.engine.evaluation import evaluate_afresh as evaluate
        from infermodel.host import get_host

        copy = workdir / "scenarios"
        shutil.copytree(SCENARIOS, copy)
        shutil.copy(DATA / "sim_lengths.csv", copy / "lengths.csv")
        shutil.copy(DATA / "hf" / "llama-3.1-8b.json", copy / "config.json")
        (workdir / "out").mkdir()
        scenarios = {p.name: tomli.loads(p.read_text(encoding="utf-8"))
                     for p in sorted(copy.glob("*.toml"))}
        registries = get_host().registries
        fields = sorted(f"{section}.{name}" for section, specs in registries.fields.items()
                        for name in specs)
        quantities = sorted(evaluate(copy / "case-study-24gb.toml").graph.order)
        presets = {kind: sorted(found) for kind, found in registries.presets.items()}
        preset_files = sorted({Path(info.path) for found in registries.presets.values()
                               for info in found.values()})
        options: dict[str, list[argparse.Action]] = {}
        parser = build_parser()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    options[name] = [a for a in sub._actions
                                     if not isinstance(a, argparse._HelpAction)]
        devices = []
        if hasattr(os, "mknod") and os.geteuid() == 0:
            for name, minor in (("null", 3), ("full", 7), ("zero", 5)):
                node = workdir / "dev" / name
                node.parent.mkdir(exist_ok=True)
                os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
                devices.append(node)
        context = cls(workdir, scenarios, fields, quantities, presets, sorted(registries.levers),
                      sorted(registries.witnesses), preset_files, options, devices, {})
        for path in [*copy.iterdir(), *preset_files]:
            context.watched[path] = _fingerprint(path)
        for node in devices:
            context.watched[node] = _fingerprint(node)
        return context

    def reads(self, case: Case) -> set[Path]:
        """The files a case may read: its scenario and what that extends or names (length
        files, configs), every preset file, the device nodes.
        """
        directory = self.workdir / "scenarios"
        read = {*self.preset_files, *self.devices}
        scenario = next((Path(a) for a in case.argv[1:2]), None)
        pending = [scenario] if scenario is not None else []
        while pending:
            path = pending.pop()
            try:
                if path in read or not path.is_file():
                    continue
                read.add(path)
                data = tomli.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError, RecursionError):
                continue
            strings, stack = set(), [data]
            while stack:
                item = stack.pop()
                if isinstance(item, str):
                    strings.add(item)
                elif isinstance(item, dict):
                    stack.extend(item.values())
                elif isinstance(item, list):
                    stack.extend(item)
            pending.extend(directory / name for name in strings
                           if name and "/" not in name and "\x00" not in name
                           and len(name) < 200 and (directory / name).is_file())
            pending.extend(SCENARIOS / f"{name.removeprefix('infermodel:')}.toml"
                           for name in strings if name in SHIPPED)
        return read

    def changed(self) -> list[Path]:
        """Files a case changed (restored from the copy kept, so later cases start clean)."""
        changed = []
        for path, before in self.watched.items():
            if _fingerprint(path, keep=False)[:3] != before[:3]:
                changed.append(path)
                if before[3] is not None:
                    with contextlib.suppress(OSError):
                        path.unlink()
                    path.write_bytes(before[3])
                    self.watched[path] = _fingerprint(path)
        return changed


def _fingerprint(path: Path, keep: bool = True) -> tuple:
    try:
        info = os.lstat(path)
    except OSError:
        return (None, None, None, None)
    data = path.read_bytes() if keep and stat.S_ISREG(info.st_mode) else None
    return (info.st_ino, info.st_size, info.st_mtime_ns if stat.S_ISREG(info.st_mode) else 0,
            data)


# ---------------------------------------------------------------------------------
# Mutations
# ---------------------------------------------------------------------------------

INJECTED = [
    "__import__('os').system('touch PWNED')", "open('PWNED','w')", "${HOME}", "$(touch PWNED)",
    "`touch PWNED`", "1e999", "-1e999", "0x10", "1_000", "nan", "inf", "-0", "", " ", "\t",
    "\u202e\u0661\u0662", "ｂａｔｃｈ", "😀" * 3, "\\", "\"", "'", "a\nb", "[sweep]", "x = 1",
    "80 GB", "-80 GB", "80 GBB", "1e400 GB", "0 GB", "3.35 TB/s", "1 ms", "1 s", "100 %",
    "h100-sxm", "module10-case", "llama-3.1-8b", "Max(1,2)", "floor(batch)", "batch ** 99999",
    "9" * 400, "tpot < 1", "fits", "fits and not fits", "lambda: 0", "a.__class__",
    "x" * 5000, "x" * 100_000,
]
EXTREME_NUMBERS = [0, 1, -1, 2, 3, 7, 2**31, 2**31 - 1, 2**53 + 1, 2**63, -2**63, 2**64, 10**40,
                   10**400, 0.0, -0.0, 0.5, 1e-300, 5e-324, 1e300, 1.7976931348623157e308,
                   float("inf"), float("-inf"), float("nan"), 1e9, 1e12, 123456789]
PATHS = ["", ".", "..", "/", "/dev/zero", "/dev/null", "/dev/stdin", "/proc/self/status",
         "/etc/passwd", "../../../../etc/passwd", "nonexistent.toml", "no/such/dir/x.toml",
         "a" * 300 + ".toml", ("d" * 200 + "/") * 25 + "x.toml", "a\x00b.toml", "case.toml",
         "case-study-24gb.toml", "lengths.csv", "config.json", "scenarios", "~/x.toml",
         "\u00e9\u00e8.toml", "../out"]

#: Shipped scenarios by name, known, misspelt and escaping ("infermodel:NAME").
SHIPPED = ["infermodel:case-study-24gb", "infermodel:module10-lab3-policies", "infermodel:nope",
           "infermodel:case-study-24g", "infermodel:../../etc/passwd", "infermodel:", "infermodel:/x"]


def _value(rng: random.Random, ctx: Context, depth: int = 0) -> Any:
    kind = rng.random()
    if kind < 0.25:
        return rng.choice(EXTREME_NUMBERS)
    if kind < 0.45:
        return rng.choice(INJECTED)
    if kind < 0.55:
        return rng.choice(PATHS)
    if kind < 0.62:
        return rng.choice([True, False])
    if kind < 0.7:
        return rng.choice(ctx.quantities + ctx.fields + ctx.presets.get("model", []) +
                          ctx.presets.get("hardware", []) + ctx.levers)
    if kind < 0.8 and depth < 3:
        return [_value(rng, ctx, depth + 1) for _ in range(rng.randint(0, 4))]
    if kind < 0.9 and depth < 3:
        keys = ctx.fields + ctx.levers + ["law", "file", "values", "count", "low", "high", "x"]
        return {rng.choice(keys): _value(rng, ctx, depth + 1) for _ in range(rng.randint(0, 4))}
    if kind < 0.95:
        levels = rng.choice([5, 40, 100, 500, 5000])
        if rng.random() < 0.5:
            return Raw("[" * levels + "1" + "]" * levels)
        return Raw("{a = " * levels + "1" + "}" * levels)
    return rng.randint(-10**6, 10**6)


def _leaves(data: Any, prefix: tuple = ()) -> list[tuple]:
    out = []
    if isinstance(data, dict):
        for key, value in data.items():
            out.append(prefix + (key,))
            out.extend(_leaves(value, prefix + (key,)))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            out.append(prefix + (index,))
            out.extend(_leaves(value, prefix + (index,)))
    return out


def _set(data: Any, path: tuple, value: Any) -> None:
    node = data
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value


def _delete(data: Any, path: tuple) -> None:
    node = data
    for part in path[:-1]:
        node = node[part]
    del node[path[-1]]


def _table(rng: random.Random, ctx: Context) -> tuple[str, Any]:
    """A whole new table of one of the feature kinds, with plausible and odd values."""
    which = rng.choice(["sweep", "search", "simulation", "witness", "levers", "model",
                        "hardware", "workload", "extends", "plan"])
    numeric = [f for f in ctx.fields if f.startswith(("workload.", "efficiency.", "hardware.c"))]
    if which == "sweep":
        table = {}
        for _ in range(rng.randint(1, 3)):
            field = rng.choice(numeric + ["hardware.preset", "model.preset"] + ctx.fields)
            table[field] = rng.choice([
                [1, 2, 4], "1..64 log2", "1..1e9 log2", "1..100000000", "0.1..1 step 0.1",
                "1..10 3 points", "1..1e300 log2", "1..2 step 1e-12", "5..1", "1..1e9 1e9 points",
                rng.choice(ctx.presets.get("hardware", ["x"])), _value(rng, ctx)])
        if rng.random() < 0.3:
            table["quantities"] = [rng.choice(ctx.quantities) for _ in range(rng.randint(0, 3))]
        return which, table
    if which == "search":
        formulas = ["fits", "tpot < 0.05", "tokens_per_s_per_user >= 25", "ttft",
                    "cost_per_million_output_tokens", "batch ** batch", "Max(ttft, tpot)",
                    "__import__('os')", "ttft <", "1/0", "log(0)", "ttft if fits else tpot",
                    "9" * 200 + " ** 9" * 20, "(" * 200 + "1" + ")" * 200]
        table = {rng.choice(["minimise", "maximise"]): rng.choice(formulas + ctx.quantities),
                 "constraints": [rng.choice(formulas) for _ in range(rng.randint(0, 3))]}
        if rng.random() < 0.3:
            table["show"] = rng.choice(EXTREME_NUMBERS)
        return which, table
    if which == "simulation":
        table = {"policies": rng.choice([["chunked"], ["static", "paged"], "reserve", ["nope"], []]),
                 "rates": rng.choice([[0.2], 0.3, [0.1, 0.2], [0], [-1], ["x"], [1e300]]),
                 "workload": {"count": rng.choice([5, 20, 50, 0, -1, 10**9, 10**40, 2.5, "10"]),
                              "output": rng.choice([
                                  {"law": "fixed", "value": 16},
                                  {"law": "empirical", "file": rng.choice(["lengths.csv"] + PATHS),
                                   "column": rng.choice(["output_tokens", "nope", 0, 99])},
                                  {"law": "uniform", "low": 1, "high": rng.choice([10, 10**12])},
                                  _value(rng, ctx)])}}
        if rng.random() < 0.3:
            table["capacity"] = rng.choice([5, {"steps": rng.choice([3, 10**9, 0])},
                                            {"low": 1, "high": 0.5}, _value(rng, ctx)])
        if rng.random() < 0.2:
            table["seed"] = rng.choice(EXTREME_NUMBERS)
        return which, table
    if which == "plan":
        objectives = ["p95 <= 1 s", "p99.9 <= 50 ms", "1 s", "none", "p0 <= 1 s", "p95 <= -1 s",
                      "p95 < 1 s", "fast", 0.05, -1, 1e300]
        table = {rng.choice(["rate", "concurrency"]): rng.choice([20, 0.5, 8, 0, -1, 1e300, 1e-300,
                                                                  "x", True]),
                 rng.choice(["ttft", "itl", "tpot", "e2e"]): rng.choice(objectives),
                 "requests": 50, "max_requests": 100, "max_gpus": rng.choice([1, 4, 8, 0, 10**9])}
        for key, values in (("hardware", [["h100-sxm"], ["l4", "nope"], "h200", [], [1]]),
                            ("engines", [["vllm"], ["sglang", "trtllm"], ["nope"], "vllm"]),
                            ("tensor", [[1, 2], [3], [0], [10**9], "x"]),
                            ("pipeline", [[1], [2], [-1]]), ("expert", [[1, 2], [8]]),
                            ("attention_data", [[1], [2]]),
                            ("pools", [["aggregated"], ["1P1D"], ["0P1D"], ["xPyD"]]),
                            ("confidence", [0.95, 0.5, 1, 2]), ("goodput_itl", ["tpot", "mean"]),
                            ("checkpoint", ["meta-llama/x", "a b", "$(rm)"]), ("show", [1, 0])):
            if rng.random() < 0.3:
                table[key] = rng.choice(values)
        return which, table
    if which == "witness":
        names = ctx.witnesses + ["nope"]
        return which, {rng.choice(names): rng.choice([{}, True, {"d": rng.choice(EXTREME_NUMBERS)},
                                                      _value(rng, ctx)])}
    if which == "levers":
        return which, {rng.choice(ctx.levers + ["nope"]): rng.choice([True, False, {}, _value(rng, ctx)])}
    if which in ("model", "hardware"):
        key = rng.choice(["preset", "hf_config"] + [f.split(".", 1)[1] for f in ctx.fields
                                                     if f.startswith(which + ".")])
        return which, {key: rng.choice([_value(rng, ctx), rng.choice(PATHS), "config.json"]
                                       + ctx.presets.get(which, []))}
    if which == "extends":
        return which, rng.choice(PATHS + SHIPPED + ["case.toml", 5, ["x"]])
    return which, {rng.choice(numeric).split(".", 1)[1]: rng.choice(EXTREME_NUMBERS)}


def mutate(rng: random.Random, ctx: Context, data: dict) -> tuple[str | bytes, str]:
    """Mutate a scenario; return its new text and a note of what was done."""
    notes = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        op = rng.random()
        leaves = _leaves(data)
        if op < 0.35 and leaves:
            path = rng.choice(leaves)
            value = _value(rng, ctx)
            _set(data, path, value)
            notes.append(f"set {path} = {toml_value(value)[:80]}")
        elif op < 0.45 and leaves:
            path = rng.choice(leaves)
            _delete(data, path)
            notes.append(f"delete {path}")
        elif op < 0.85:
            name, table = _table(rng, ctx)
            if isinstance(table, dict) and isinstance(data.get(name), dict) and rng.random() < 0.6:
                data[name].update(table)
            else:
                data[name] = table
            notes.append(f"table {name}")
        else:
            key = rng.choice(["bogus", "scenario", "Model", "sweep", "levers"])
            data[key] = _value(rng, ctx)
            notes.append(f"top {key}")
    text = toml_document(data)
    raw = rng.random()
    if raw < 0.06:
        cut = rng.randint(0, len(text))
        text = text[:cut]
        notes.append(f"truncated at {cut}")
    elif raw < 0.1:
        notes.append("raw bytes")
        return text.encode() + rng.choice([b"\xff\xfe", b"\x00", b"[[[", b"\x80abc"]), "; ".join(notes)
    elif raw < 0.13:
        text = text + "\n" + rng.choice(INJECTED) + "\n"
        notes.append("injected line")
    return text, "; ".join(notes)


# ---------------------------------------------------------------------------------
# Command lines
# ---------------------------------------------------------------------------------

OVER_VALUES = ["1,2,4", "1..64 log2", "1..1e9 log2", "1..100000000", "0.5..1 step 0.1",
               "1..100 10 points", "1..1e300 log2", "1..2 step 1e-15", "5..1", "x,y", "",
               "1..", "..5", "1..1e9 100000000 points", "0..0 step 0", "nan..1",
               "1e300..1e308 step 1e-300", "1e-300..1e308 log2", "-1e308..1e308 1000 points",
               "1.." + "9" * 400, "1..2 step 1e-320", "5e-324..1 log2"]


def _option_value(rng: random.Random, ctx: Context, case_dir: Path, action: argparse.Action,
                  scenario: str) -> str:
    dest = action.dest
    if action.choices and rng.random() < 0.85:
        return str(rng.choice(list(action.choices)))
    if dest in ("over",):
        field = rng.choice(ctx.fields + ["hardware.preset", "model.preset", "nope.x", "workload"])
        if field.endswith(".preset"):
            kind = field.split(".")[0]
            values = ",".join(rng.sample(ctx.presets[kind], min(len(ctx.presets[kind]),
                                                                rng.randint(1, 3))))
            return f"{field}={values}"
        return f"{field}={rng.choice(OVER_VALUES + [str(_value(rng, ctx))])}"
    if dest in ("overrides",):
        field = rng.choice(ctx.fields + ["levers." + rng.choice(ctx.levers), "sweep.x",
                                         "simulation.workload.count", "extends", "nope"])
        return f"{field}={toml_value(_value(rng, ctx)) if rng.random() < 0.7 else rng.choice(INJECTED)}"
    if dest in ("output", "plot"):
        return str(_target(rng, ctx, case_dir, scenario))
    if dest in ("quantities", "y", "explain"):
        names = [rng.choice(ctx.quantities + ["nope", "", "tpot,,ttft"]) for _ in range(rng.randint(1, 3))]
        return ",".join(names)
    if dest in ("x",):
        return rng.choice(ctx.fields + ["context", "nope", ""])
    if dest in ("minimise", "maximise", "constraint"):
        return rng.choice(["fits", "tpot", "ttft < 1", "tokens_per_s_total", "__import__('os')",
                           "ttft <", "Max(tpot, ttft)", "x" * 5000, "1/0", "batch ** 1e9"])
    if dest in ("options",):
        return f"{rng.choice(['d', 'n', 'seed', 'x', ''])}={rng.choice(EXTREME_NUMBERS)}"
    if dest in ("policy",):
        return rng.choice(["static", "reserve", "paged", "chunked", "nope"])
    if action.type is int or dest in ("depth", "show", "rejected", "chunk_size", "seed"):
        return str(rng.choice(EXTREME_NUMBERS[:13] + [10**9, -5]))
    if action.type is float or dest in ("rate",):
        return str(rng.choice([0.2, 0.1, 0, -1, 1e300, "nan", "inf", 1e-300]))
    return str(_value(rng, ctx))


def _target(rng: random.Random, ctx: Context, case_dir: Path, scenario: str) -> Path | str:
    ext = rng.choice([".csv", ".json", ".png", ".svg", ".txt", ""])
    pick = rng.random()
    if pick < 0.45:
        return case_dir / "out" / f"result{ext}"
    if pick < 0.55:
        return scenario
    if pick < 0.62:
        return rng.choice(ctx.preset_files)
    if pick < 0.67:
        return case_dir / "scenarios" / rng.choice(["case-study-24gb.toml", "lengths.csv",
                                                    "config.json", "module10-case-base.toml"])
    if pick < 0.75 and ctx.devices:
        return rng.choice(ctx.devices)
    return rng.choice([case_dir / "out", case_dir / "no" / "such" / "dir.csv",
                       case_dir / "out" / ("b" * 300 + ext), "a\x00b.csv",
                       case_dir / "out" / ("c/" * 2100 + "x.csv"), ""])


#: An action standing for ``--set``, to draw a ``--against`` group's setting.
_OVERRIDE = argparse.Action(["--set"], "overrides")


def make_case(seed: int, ctx: Context) -> Case:
    rng = random.Random(seed)
    command = rng.choice(sorted(ctx.parser_options))
    name = rng.choice(sorted(ctx.scenarios))
    scenario_dir = ctx.workdir / "scenarios"
    text: str | bytes | None = None
    note = f"from {name}"
    extra: dict = {}
    if rng.random() < 0.75:
        data = copy.deepcopy(ctx.scenarios[name])
        if rng.random() < 0.12:
            extra["case-config.json"] = _mutated_config(rng, ctx)
            data["model"] = {"hf_config": "case-config.json"}
            note += "; mutated config.json"
        if rng.random() < 0.08:
            extra["case-lengths.csv"] = _mutated_lengths(rng)
            data["simulation"] = {"rates": [0.2], "policies": ["chunked"], "workload": {
                "count": 20, rng.choice(["prompt", "output"]): {
                    "law": "empirical", "file": "case-lengths.csv",
                    "column": rng.choice(["output_tokens", "prompt_tokens", 0, "x"])}}}
            note += "; mutated length file"
        text, what = mutate(rng, ctx, data)
        note += "; " + what
        scenario = str(scenario_dir / "case.toml")
    else:
        scenario = (str(scenario_dir / name) if rng.random() < 0.9
                    else rng.choice(PATHS + SHIPPED))
    argv = [command]
    actions = ctx.parser_options[command]
    for action in actions:
        if action.option_strings:
            continue
        if action.dest == "scenario":
            argv.append(scenario)
        elif action.dest == "quantity":
            argv.append(rng.choice(ctx.quantities + ["nope", "", "x" * 3000]))
        elif action.dest == "kind":
            argv.append(rng.choice(list(action.choices or ["models"])))
        elif action.dest == "name":
            if rng.random() < 0.8:
                argv.append(rng.choice(ctx.witnesses + ["nope"]))
        elif action.dest == "values":       # quantize: numbers, extremes and junk
            argv += [str(rng.choice(EXTREME_NUMBERS + INJECTED[:6] + [0.12, -0.48, "-1e-3"]))
                     for _ in range(rng.choice([1, 2, 8, 40]))]
        elif action.dest == "names":        # formats: known, misspelt and odd names
            argv += rng.sample(["fp8-e4m3", "mxfp4", "int4-g128", "bf16", "nope", "", "x" * 500],
                               rng.randint(0, 3))
        else:
            argv.append(_option_value(rng, ctx, ctx.workdir, action, scenario))
    optional = [a for a in actions if a.option_strings and a.dest != "help"]
    for _ in range(rng.choice([0, 1, 1, 2, 3, 4])):
        if not optional:
            break
        action = rng.choice(optional)
        flag = rng.choice(action.option_strings)
        if action.nargs == 0:
            argv.append(flag)
        else:
            argv += [flag, _option_value(rng, ctx, ctx.workdir, action, scenario)]
    if command in ("calibrate", "validate") and "--quick" not in argv:
        argv.append("--quick")  # it measures this machine: the short measurement will do
    if command == "validate" and "--fit" in argv:
        argv.remove("--fit")  # a refit is a long, bounded computation, not a case to time
    if command == "compare" and rng.random() < 0.8:
        # Usually a second column: another scenario, or the same one under a group.
        if rng.random() < 0.5:
            argv.insert(2, str(scenario_dir / rng.choice(sorted(ctx.scenarios))))
        else:
            argv += ["--against", _option_value(rng, ctx, ctx.workdir, _OVERRIDE, scenario)]
    if command == "simulate" and rng.random() < 0.8:
        # Keep most simulations small so that the fuzz spends its time on many cases.
        argv += ["--set", "simulation.workload.count=" + rng.choice(["20", "40", "5"])]
    if command == "plan":
        # A plan simulates many counts: keep each verdict small, the cards few.
        argv += ["--requests", "50", "--max-requests", "100", "--max-gpus",
                 rng.choice(["2", "4", "8"])]
    if rng.random() < 0.03:
        rng.shuffle(argv)
    return Case(seed, command, argv, text, note, extra)


#: The deployment-layout fields of ``[levers.parallelism]`` and values worth trying on
#: them (degrees that do and do not divide the cards, the heads or the experts).
LAYOUT_FIELDS = ("tensor", "attention_data", "expert", "pipeline", "dense_weights",
                 "expert_dispatch", "expert_imbalance", "attention_imbalance",
                 "dispatch_activation_bytes", "communication")
LAYOUT_VALUES = (0, 1, 2, 3, 4, 6, 7, 8, 16, 64, 256, 257, 4096, -1, 0.5, 1.0, 1.3, 8.5, 2**63,
                 "replicated", "split", "all_gather", "all_to_all", "all_reduce", "efficiency",
                 "", True, [8], {"x": 1})
#: Scenarios the layout cases start from: the shipped DP/EP one, tensor-parallel MoE and
#: dense ones.
LAYOUT_SCENARIOS = ("deepseek-r1-ep8-dp8.toml", "deepseek-v3-8xh200-fp8.toml",
                    "moe-mixtral-int4.toml", "planner-70b-32-users.toml")
LAYOUT_COMMANDS = ("check", "run", "ops", "layers", "explain", "simulate")


def make_layout_case(seed: int, ctx: Context) -> Case:
    """A case that varies the layout fields (and the card count) of a MoE or dense
    scenario and runs one of the commands that evaluate it.
    """
    rng = random.Random(seed)
    name = rng.choice(LAYOUT_SCENARIOS)
    data = copy.deepcopy(ctx.scenarios[name])
    lever = data.setdefault("levers", {}).setdefault("parallelism", {})
    changed = []
    for _ in range(rng.randint(1, 4)):
        field = rng.choice(LAYOUT_FIELDS)
        value = rng.choice(LAYOUT_VALUES) if rng.random() < 0.8 else _value(rng, ctx)
        lever[field] = value
        changed.append(f"{field} = {value!r}"[:80])
    if rng.random() < 0.4:
        data.setdefault("hardware", {})["count"] = rng.choice([1, 2, 4, 6, 8, 16, 64])
        changed.append(f"count = {data['hardware']['count']}")
    command = rng.choice(LAYOUT_COMMANDS)
    scenario = str(ctx.workdir / "scenarios" / "case.toml")
    argv = [command, scenario]
    if command == "explain":
        argv.append(rng.choice(["parallel_weight_bytes_per_card", "max_sequences", "tpot",
                                "parallel_dispatch_time", "parallel_expert_imbalance"]))
    if command == "simulate":
        argv += ["--set", "simulation.workload.count=20", "--rate", "0.2"]
    return Case(seed, command, argv, toml_document(data), f"from {name}; " + "; ".join(changed))


#: The options ``validate --ledger silicon`` adds, with values worth trying on them.
SILICON_OPTIONS = {
    "--kernels": ["measured", "roofline", "", "MEASURED"],
    "--loop": ["analytic", "simulated", "nope"],
    "--jobs": ["1", "0", "-3", "300", "x"],
    "--sample": ["1", "2", "0", "-1", "1e9", "two"],
    "--format": ["json", "table", "csv"],
}
SILICON_FLAGS = ("--compare", "--calibrated", "--rows", "--no-rows", "--fit")


def make_silicon_case(seed: int, ctx: Context) -> Case:
    """``validate --ledger silicon`` on a one- or two-point sample, with the options it
    adds (measured kernels, the comparison, the loop, worker processes, the sample) set
    to valid, invalid and conflicting values, and an output or plot target.
    """
    rng = random.Random(seed)
    argv = ["validate", "--ledger", "silicon", "--sample", rng.choice(["1", "2"])]
    for _ in range(rng.randint(1, 4)):
        if rng.random() < 0.6:
            flag = rng.choice(sorted(SILICON_OPTIONS))
            argv += [flag, rng.choice(SILICON_OPTIONS[flag])]
        else:
            argv.append(rng.choice(SILICON_FLAGS))
    if "--sample" in argv[5:] and rng.random() < 0.7:
        # Keep most cases to a sample of one or two points.
        index = argv.index("--sample", 5)
        del argv[index:index + 2]
    if rng.random() < 0.3:
        argv += [rng.choice(["-o", "--plot"]),
                 str(_target(rng, ctx, ctx.workdir, str(ctx.workdir / "scenarios" / "x.toml")))]
    if "--jobs" not in argv:
        argv += ["--jobs", "1"]  # worker processes are started only when asked
    return Case(seed, "validate", argv, None, "silicon ledger options")


#: Scenarios whose layers or layout the measured kernel tables cover in more than one
#: way (latent attention, state-space and linear-attention layers, DP attention and EP).
MEASURED_SCENARIOS = ("deepseek-r1-ep8-dp8.toml", "deepseek-v3-8xh200-fp8.toml",
                      "qwen3-next-80b-hybrid-state.toml", "nemotron-h-8b-one-h100.toml",
                      "jamba-1.5-mini-256k.toml", "minimax-m1-1m-context.toml",
                      "measured-llama-3.1-8b-fp8-h200.toml")
MEASURED_FIELDS = (("efficiency", "engine", ("vllm", "sglang", "tensorrt-llm", "none", "x")),
                   ("efficiency", "engine_version", ("0.24.0", "0.5.14", "1.3.0rc20", "9", "")),
                   ("hardware", "kernel_system", ("h200_sxm", "h100_sxm", "b200_sxm", "l40s",
                                                  "gb200", "nope")),
                   ("workload", "batch", (1, 3, 64, 1000, 10**6)),
                   ("workload", "prompt_tokens", (1, 4096, 10**6)),
                   ("levers.parallelism", "attention_data", (1, 2, 8, 3)),
                   ("levers.parallelism", "expert", (1, 4, 8, 16)),
                   ("levers.parallelism", "expert_dispatch", ("all_gather", "all_to_all")),
                   ("levers.parallelism", "communication", ("efficiency", "all_reduce")))
MEASURED_COMMANDS = ("check", "run", "ops", "explain", "simulate")


def make_measured_case(seed: int, ctx: Context) -> Case:
    """A case that times a scenario with latent attention, hybrid layers or a layout from
    the measured kernel tables, with its engine, card, version, workload or layout varied.
    """
    rng = random.Random(seed)
    name = rng.choice(MEASURED_SCENARIOS)
    data = copy.deepcopy(ctx.scenarios[name])
    data.setdefault("efficiency", {})["kernels"] = "measured"
    data["efficiency"].setdefault("engine", "vllm")
    changed = []
    for _ in range(rng.randint(1, 3)):
        section, field, values = rng.choice(MEASURED_FIELDS)
        table = data
        for part in section.split("."):
            table = table.setdefault(part, {})
        table[field] = rng.choice(values)
        changed.append(f"{section}.{field} = {table[field]!r}")
    command = rng.choice(MEASURED_COMMANDS)
    scenario = str(ctx.workdir / "scenarios" / "case.toml")
    argv = [command, scenario]
    if command == "explain":
        argv.append(rng.choice(["tpot", "capacity_step_time", "decode_time_kernels",
                                "decode_kernel_state_update_time", "decode_kernel_ffn_time"]))
    if command == "ops":
        argv += ["--phase", rng.choice(["decode", "prefill"])]
    if command == "simulate":
        argv += ["--set", "simulation.workload.count=20", "--rate", "0.2"]
    return Case(seed, command, argv, toml_document(data), f"from {name}; " + "; ".join(changed))


HYBRID_CONFIGS = [ROOT / "src" / "infermodel" / "data" / "configs" / f"{name}.json" for name in (
    "ai21-jamba-1.5-mini", "nemotron-h-8b-base-8k", "minimax-m1", "llama-3.3-nemotron-super-49b-v1",
    "nvidia-nemotron-3-nano-30b-a3b")]


def _mutated_config(rng: random.Random, ctx: Context) -> str:
    """A Hugging Face config.json with a few keys changed, dropped or nested."""
    import json

    # A dense config, or a hybrid whose architectural keys (layer periods, Mamba widths,
    # hybrid patterns, block configs) get mutated too.
    base = rng.choice([DATA / "hf" / "llama-3.1-8b.json", *HYBRID_CONFIGS])
    config = json.loads(base.read_text(encoding="utf-8"))
    for _ in range(rng.randint(1, 4)):
        key = rng.choice(list(config) + ["text_config", "quantization_config", "model_type",
                                         "num_local_experts", "head_dim", "hybrid_override_pattern",
                                         "attn_type_list", "block_configs", "attn_layer_period",
                                         "mamba_d_state", "ssm_state_size", "layers_block_type"])
        pick = rng.random()
        if pick < 0.3 and key in config:
            del config[key]
        elif pick < 0.8:
            value = rng.choice(EXTREME_NUMBERS[:14] + INJECTED[:20] + [None, [], {}])
            if isinstance(value, float) and not math.isfinite(value):
                value = 1e308
            config[key] = value
        else:
            config[key] = {"hidden_size": rng.choice(EXTREME_NUMBERS[:14]), "x": [1, {"y": 2}]}
    text = json.dumps(config)
    if rng.random() < 0.1:
        text = text[: rng.randint(0, len(text))]
    if rng.random() < 0.05:
        text = "[" * 100_000 + "]" * 100_000
    return text


def _mutated_lengths(rng: random.Random) -> str:
    rows = ["output_tokens,prompt_tokens"]
    for _ in range(rng.randint(0, 30)):
        rows.append(f"{rng.choice(EXTREME_NUMBERS[:14] + ['x', '', '1.5', '-3'])},"
                    f"{rng.choice([10, 100, 'y', ''])}")
    if rng.random() < 0.1:
        rows.append("\x00\xff")
    return "\n".join(rows) + "\n"


# ---------------------------------------------------------------------------------
# Running and judging
# ---------------------------------------------------------------------------------


def _alarm(signum, frame):
    raise CaseTimeout()


@contextlib.contextmanager
def memory_limit(extra: int = EXTRA_MEMORY):
    """Cap the address space at what the process holds now plus ``extra`` bytes."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as handle:
        held = int(handle.read().split()[0]) * resource.getpagesize()
    limit = held + extra
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def case_seconds(case: Case) -> float:
    """The processor-time limit of a case."""
    return MEASURING_SECONDS if case.command in MEASURING else CASE_SECONDS


def run_case(case: Case, ctx: Context, seconds: float | None = None,
             wall: float | None = None) -> Outcome:
    """Run one case; ``seconds`` of processor time (default :func:`case_seconds`) or
    ``wall`` seconds elapsed (default :data:`WALL_SECONDS`) stop it.
    """
    from infermodel.cli import main

    seconds = case_seconds(case) if seconds is None else seconds
    wall = max(seconds, WALL_SECONDS) if wall is None else wall

    path = ctx.workdir / "scenarios" / "case.toml"
    if case.text is not None:
        if isinstance(case.text, bytes):
            path.write_bytes(case.text)
        else:
            path.write_text(case.text, encoding="utf-8")
        ctx.watched[path] = _fingerprint(path)
    for name, content in case.extra.items():
        extra = ctx.workdir / "scenarios" / name
        extra.write_text(content, encoding="utf-8", errors="surrogateescape")
        ctx.watched[extra] = _fingerprint(extra)
    out, err = io.StringIO(), io.StringIO()
    status: int | None = None
    timed_out = memory_error = False
    previous = signal.signal(signal.SIGALRM, _alarm)
    previous_prof = signal.signal(signal.SIGPROF, _alarm)
    signal.setitimer(signal.ITIMER_PROF, seconds)  # processor time, every thread's
    signal.setitimer(signal.ITIMER_REAL, wall)
    start = time.monotonic()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main(case.argv)
            except SystemExit as exc:  # argparse's usage errors
                status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except CaseTimeout:
        timed_out = True
    except MemoryError:
        memory_error = True
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGALRM, previous)
        signal.signal(signal.SIGPROF, previous_prof)
    return Outcome(status, out.getvalue(), err.getvalue(), time.monotonic() - start,
                   timed_out, memory_error)


def judge(case: Case, outcome: Outcome, ctx: Context) -> list[str]:
    """What is wrong with a case's outcome (empty when it passed)."""
    wrong = []
    if outcome.timed_out:
        wrong.append(f"ran past the {case_seconds(case):.0f} s processor-time limit "
                     f"(or {WALL_SECONDS:.0f} s elapsed)")
    if outcome.memory_error:
        wrong.append("MemoryError escaped")
    # 1 is a formula disagreeing with an experiment: a witness, or a real-model check.
    allowed = {0, 2} | ({1} if case.command in ("witness", "validate") else set())
    if not outcome.timed_out and outcome.status not in allowed:
        wrong.append(f"exit status {outcome.status}")
    if "Traceback" in outcome.err or "internal error" in outcome.err:
        wrong.append("traceback")
    messages = sum(1 for line in outcome.err.splitlines()
                   if line.startswith("error: ") or ": error: " in line)
    if messages > 1:
        wrong.append(f"{messages} error messages")
    if outcome.status == 2 and messages == 0 and case.command != "plugins":
        wrong.append("exit 2 without an error message")
    if len(outcome.err) > 20_000:
        wrong.append(f"{len(outcome.err):,} characters on standard error")
    read = ctx.reads(case)
    changed = [p for p in ctx.changed() if p in read]
    if changed:
        wrong.append("changed " + ", ".join(str(p) for p in changed))
    for pwned in (ctx.workdir / "PWNED", ctx.workdir / "scenarios" / "PWNED", Path("PWNED")):
        if pwned.exists():
            wrong.append(f"code ran: {pwned} exists")
    return wrong


#: Caps lowered for the fuzz, so that every case that passes them ends well within
#: CASE_SECONDS even on a loaded machine: the time limit then checks that each cap is
#: consulted before the work it bounds, on every path the fuzz reaches. (The real values
#: are tested in test_reliability.py.)
FUZZ_CAPS = {
    "infermodel.sweeping.ranges.MAX_AXIS_VALUES": 20_000,
    "infermodel.sweeping.axes.MAX_AXIS_VALUES": 20_000,
    "infermodel.sweeping.plan.MAX_GRID_POINTS": 200_000,
    "infermodel.sweeping.plan.MAX_BLOCKS": 100,
    "infermodel.sweeping.plan.MAX_VALIDATED_POINTS": 5_000,
    "infermodel.analyses.simulation.plan.MAX_REQUESTS": 2_000,
    "infermodel.analyses.simulation.plan.MAX_RUNS": 12,
    # The host's matrix products ``calibrate --quick`` and ``validate --scenario`` time
    # (the fuzz runs both quick): the same code on smaller matrices (the real quick
    # ones are timed in test_calibrate.py).
    "infermodel.accuracy.calibration.QUICK_WIDTH": 256,
}


@contextlib.contextmanager
def small_caps():
    import importlib

    saved = []
    for target, value in FUZZ_CAPS.items():
        module, _, name = target.rpartition(".")
        loaded = importlib.import_module(module)
        saved.append((loaded, name, getattr(loaded, name)))
        setattr(loaded, name, value)
    try:
        yield
    finally:
        for loaded, name, value in saved:
            setattr(loaded, name, value)


def fuzz(ctx: Context, seeds: range, *, budget: float | None = None) -> tuple[int, list[str]]:
    """Run the cases of ``seeds`` (stopping early when ``budget`` seconds are spent);
    return how many ran and a description of each failure.
    """
    failures = []
    ran = 0
    start = time.monotonic()
    with memory_limit(), small_caps():
        for seed in seeds:
            if budget is not None and time.monotonic() - start > budget:
                break
            case = make_case(seed, ctx)
            outcome = run_case(case, ctx)
            ran += 1
            wrong = judge(case, outcome, ctx)
            if wrong:
                failures.append(f"{'; '.join(wrong)}\n{case.describe()}\nstatus {outcome.status}, "
                                f"{outcome.seconds:.1f} s\n{outcome.err[-3000:]}")
    return ran, failures


def worker(job: tuple[int, int, int, str]) -> tuple[int, list[str], float]:
    """Run ``count`` cases from seed ``first`` in steps of ``step`` in a folder of ``root``
    (one process of the long fuzz); return how many ran, the failures and the seconds.
    """
    os.environ.setdefault("INFERMODEL_DISABLE_PLUGIN_AUTOLOAD", "1")
    first, count, step, root = job
    workdir = Path(root) / f"worker-{first}"
    workdir.mkdir()
    os.chdir(workdir)
    context = Context.build(workdir)
    start = time.monotonic()
    ran, failures = fuzz(context, range(first, first + count * step, step))
    return ran, failures, time.monotonic() - start


if __name__ == "__main__":  # replay: python tests/fuzzing.py SEED [SEED...]
    import tempfile

    os.environ.setdefault("INFERMODEL_DISABLE_PLUGIN_AUTOLOAD", "1")
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        context = Context.build(Path(tmp))
        for arg in sys.argv[1:]:
            first, _, last = arg.partition("-")
            for seed in range(int(first), int(last or first) + 1):
                case = make_case(seed, context)
                with small_caps():
                    outcome = run_case(case, context)
                wrong = judge(case, outcome, context)
                print(f"{'FAIL' if wrong else 'ok'} {outcome.seconds:.2f}s status {outcome.status}"
                      f" {wrong}\n{case.describe()[:2000]}\n{outcome.err[-2000:]}\n")
