"""``infermodel presets``: list model, hardware and efficiency presets with their sources."""

from __future__ import annotations


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("presets", help="list model, hardware and efficiency presets",
                                   description="List the presets the loaded plugins provide, with "
                                               "their descriptions and sources.")
    parser.add_argument("kind", nargs="?", choices=("models", "hardware", "efficiency"), help="only this kind")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    import json

    import tomli

    from ..host import get_host

    host = get_host()
    host.check_loaded()
    host.warn_load_errors()
    registries = host.registries
    kinds = {"models": "model", "hardware": "hardware", "efficiency": "efficiency"}
    wanted = [kinds[args.kind]] if args.kind else ["model", "hardware", "efficiency"]
    rows = []
    for kind in wanted:
        for name, info in sorted(registries.presets[kind].items()):
            with open(info.path, "rb") as handle:
                meta = tomli.load(handle).get("preset", {})
            rows.append({"kind": kind, "name": name, "description": meta.get("description", ""),
                         "source": meta.get("source", ""), "plugin": info.plugin,
                         "path": str(info.path)})
    if args.format == "json":
        print(json.dumps(rows, indent=2))
        return 0
    for kind in wanted:
        group = [r for r in rows if r["kind"] == kind]
        print(f"{kind} presets ({len(group)}):")
        width = max([len(r["name"]) for r in group] + [4])
        for r in group:
            print(f"  {r['name'].ljust(width)}  {r['description']}")
            print(f"  {''.ljust(width)}  source: {r['source']}")
        print()
    return 0
