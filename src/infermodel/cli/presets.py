"""``infermodel presets``: list model, hardware and efficiency presets with their figures and
sources; ``presets show NAME`` prints one; ``presets scenarios`` lists the shipped
scenarios a scenario may extend as ``"infermodel:NAME"``.
"""

from __future__ import annotations


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("presets", help="list model, hardware and efficiency presets",
                                   description="List the presets the loaded plugins provide, with "
                                               "their key figures (memory, bandwidth, compute, "
                                               "price; a model's shape), descriptions and "
                                               "sources. `presets show NAME` prints one preset "
                                               "in full; `presets scenarios` lists the scenarios "
                                               "installed with infermodel, which a scenario "
                                               "extends as \"infermodel:NAME\".")
    parser.add_argument("kind", nargs="?",
                        choices=("models", "hardware", "efficiency", "show", "scenarios"),
                        help="only this kind, `show` one preset, or the shipped `scenarios`")
    parser.add_argument("name", nargs="?", help="with `show`: the preset to print")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.set_defaults(handler=handle)


#: The figures a listing shows for each kind, in order, as the preset writes them.
FIGURES = {"hardware": ("memory", "bandwidth", "flops", "price_per_hour"),
           "model": ("layers", "d_model", "heads", "kv_heads", "d_ff", "vocab", "experts"),
           "efficiency": ("engine", "prefill_mfu", "decode_mfu", "mbu", "t0")}


def figures(kind: str, table: dict) -> str:
    """``memory 80 GB · bandwidth 3.35 TB/s · ...`` from a preset's table."""
    parts = []
    for key in FIGURES.get(kind, ()):
        if key in table:
            value = table[key]
            if key == "price_per_hour" and isinstance(value, (int, float)):
                value = f"USD {value:g}/h"
            elif isinstance(value, int) and not isinstance(value, bool):
                value = f"{value:,}"
            parts.append(f"{'price' if key == 'price_per_hour' else key} {value}")
    return " · ".join(parts)


def show(registries, name: str | None) -> int:
    from ..errors import InfermodelError, Problem, suggest

    found = [registries.presets[kind][name] for kind in registries.presets
             if name in registries.presets[kind]]
    if not name or not found:
        known = [n for kind in registries.presets for n in registries.presets[kind]]
        raise InfermodelError(Problem(
            f"no preset named {name!r}" if name else "`presets show` needs a preset name",
            expected="a preset name (`infermodel presets` lists them)",
            suggestion=suggest(name, known) if name else None))
    for info in found:
        print(f"{info.kind} preset {info.name}  ({info.path}, plugin {info.plugin})")
        print(info.path.read_text(encoding="utf-8").rstrip())
    return 0


def scenarios(fmt: str) -> int:
    """The shipped scenarios: name, description and installed file."""
    import json

    from ..tomlfile import SHIPPED_PREFIX, read_toml, shipped_scenarios

    rows = []
    for name, path in shipped_scenarios().items():
        data, _ = read_toml(path)
        about = data.get("scenario", {}) if isinstance(data.get("scenario"), dict) else {}
        rows.append({"name": f"{SHIPPED_PREFIX}{name}", "description": about.get("description", ""),
                     "path": str(path)})
    if fmt == "json":
        print(json.dumps(rows, indent=2))
        return 0
    print(f"shipped scenarios ({len(rows)}), for extends = \"{SHIPPED_PREFIX}NAME\":")
    width = max([len(r["name"]) for r in rows] + [4])
    for r in rows:
        print(f"  {r['name'].ljust(width)}  {r['description']}")
    return 0


def handle(args) -> int:
    import json

    import tomli

    from ..host import get_host

    host = get_host()
    host.check_loaded()
    host.warn_load_errors()
    registries = host.registries
    if args.kind == "show":
        return show(registries, args.name)
    if args.kind == "scenarios":
        return scenarios(args.format)
    kinds = {"models": "model", "hardware": "hardware", "efficiency": "efficiency"}
    wanted = [kinds[args.kind]] if args.kind else ["model", "hardware", "efficiency"]
    rows = []
    for kind in wanted:
        for name, info in sorted(registries.presets[kind].items()):
            with open(info.path, "rb") as handle:
                data = tomli.load(handle)
            meta = data.get("preset", {})
            table = data.get(kind, {})
            row = {"kind": kind, "name": name, "description": meta.get("description", ""),
                   "source": meta.get("source", ""), "plugin": info.plugin,
                   "path": str(info.path), "values": table, "figures": figures(kind, table)}
            if kind == "efficiency":
                from ..accuracy.preset_files import describe_preset

                row["details"] = describe_preset(name, data)
                row["fit"] = {k: v for k, v in meta.items() if k not in ("description", "source")}
            rows.append(row)
    if args.format == "json":
        print(json.dumps(rows, indent=2))
        return 0
    for kind in wanted:
        group = [r for r in rows if r["kind"] == kind]
        print(f"{kind} presets ({len(group)}):")
        width = max([len(r["name"]) for r in group] + [4])
        for r in group:
            print(f"  {r['name'].ljust(width)}  {r['description']}")
            if r["figures"]:
                print(f"  {''.ljust(width)}  {r['figures']}")
            print(f"  {''.ljust(width)}  source: {r['source']}")
            for line in r.get("details", []):
                print(f"  {''.ljust(width)}  {line}")
        print()
    return 0
