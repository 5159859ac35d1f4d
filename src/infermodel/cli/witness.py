"""``infermodel witness``: run a seeded experiment that checks a formula against reality."""

from __future__ import annotations

from . import add_scenario_arguments, load

FORMATS = ("text", "json")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "witness", help="run a witness experiment: a formula checked against a seeded run",
        description="Run a witness experiment contributed by a plugin (a tiny seeded numpy "
                    "experiment) and print what it measured beside what the formula predicts. "
                    "Without NAME, run the witnesses the scenario's [witness] table lists. "
                    "Exit status 1 when a check falls outside its tolerance: the formula and "
                    "the experiment disagree, which is a bug to report.")
    add_scenario_arguments(parser)
    parser.add_argument("name", nargs="?", help="witness name, e.g. kv_cache (see --list)")
    parser.add_argument("--option", dest="options", action="append", default=[],
                        metavar="KEY=VALUE", help="set an option of the witness, e.g. --option "
                                                  "d=8 (repeatable; see --list)")
    parser.add_argument("--list", action="store_true",
                        help="list the loaded witnesses and their options, then stop")
    parser.add_argument("--format", choices=FORMATS, default="text")
    parser.add_argument("--output", "-o", metavar="FILE", help="write to FILE (atomically)")
    parser.set_defaults(handler=handle)


def _parse_options(items: list[str]) -> dict[str, str]:
    from ..errors import InfermodelError, Problem

    options: dict[str, str] = {}
    problems = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            problems.append(Problem(f"--option {item!r} is not KEY=VALUE", expected="e.g. d=8"))
            continue
        options[key.strip()] = value.strip()
    if problems:
        raise InfermodelError(problems)
    return options


def _listing(scenario, fmt: str) -> str:
    import json

    from ..analyses.witnessing import witness_registries

    witnesses = witness_registries(scenario).witnesses
    asked = set(scenario.tables.get("witness") or {})
    if fmt == "json":
        return json.dumps([
            {"name": info.name, "description": info.description, "plugin": info.plugin,
             "reference": info.reference, "in_scenario": info.name in asked,
             "options": {key: {"default": option.default, "kind": option.kind.__name__,
                               "description": option.description,
                               "minimum": option.minimum, "maximum": option.maximum}
                         for key, option in info.options.items()}}
            for info in sorted(witnesses.values(), key=lambda i: i.name)], indent=2)
    if not witnesses:
        return "no loaded plugin provides a witness"
    lines = []
    for info in sorted(witnesses.values(), key=lambda i: i.name):
        mark = "  (listed in the scenario's [witness] table)" if info.name in asked else ""
        lines.append(f"{info.name}: {info.description} [plugin {info.plugin}]{mark}")
        for key, option in info.options.items():
            default = "derived" if option.default is None else repr(option.default)
            lines.append(f"    {key} = {default}: {option.description}")
    return "\n".join(lines)


def handle(args) -> int:
    import json
    import sys

    from ..analyses.witnessing import run_witness, scenario_witnesses
    from ..errors import InfermodelError, Problem
    from ..output import emit

    scenario = load(args)
    if args.list:
        emit(_listing(scenario, args.format), args.output)
        return 0
    options = _parse_options(args.options)
    planned = scenario_witnesses(scenario)
    if args.name is None:
        if options:
            raise InfermodelError(Problem("--option needs a witness NAME",
                                          suggestion="name the witness the options are for"))
        if not planned:
            raise InfermodelError(Problem(
                "no witness named, and the scenario has no [witness] table",
                expected="infermodel witness SCENARIO NAME",
                suggestion="`infermodel witness SCENARIO --list` lists the witnesses"))
        runs = planned
    else:
        # Options the scenario's table gives this witness, then the command line's.
        from_table = dict(planned).get(args.name, {})
        runs = [(args.name, {**from_table, **options})]
    results = [run_witness(scenario, name, opts) for name, opts in runs]
    if args.format == "json":
        data = [w.to_dict() for w in results]
        text = json.dumps(data[0] if args.name is not None else data, indent=2)
    else:
        text = "\n\n".join(w.text() for w in results)
    emit(text, args.output)
    failed = [w for w in results if not w.passed]
    for w in failed:
        sys.stdout.flush()
        print(f"witness {w.name!r}: {len(w.failures)} of {len(w.judged)} checks outside "
              "tolerance", file=sys.stderr)
    return 1 if failed else 0
