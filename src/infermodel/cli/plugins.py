"""``infermodel plugins``: what is loaded, from which distribution and version."""

from __future__ import annotations

from typing import Any


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("plugins", help="list loaded plugins",
                                   description="List the plugins loaded from the 'infermodel' "
                                               "entry-point group, with distribution and version. "
                                               "Built-in plugins are shown with --all.")
    parser.add_argument("--all", action="store_true", help="include the built-in plugins")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    import json

    from ..host import get_host

    host = get_host()
    levers: dict[str, list[str]] = {}
    if not host.load_errors:
        for info in host.registries.levers.values():
            levers.setdefault(info.plugin, []).append(info.name)
    rows: list[dict[str, Any]] = []
    for record in sorted(host.records.values(), key=lambda r: r.name):
        if record.builtin and not args.all and not record.error:
            continue
        hooks = sorted(h.name for h in host.pm.get_hookcallers(host.pm.get_plugin(record.name)) or []) \
            if host.pm.get_plugin(record.name) is not None else []
        rows.append({"name": record.name, "distribution": record.distribution,
                     "version": record.version, "module": record.module, "builtin": record.builtin,
                     "levers": sorted(levers.get(record.name, [])), "hooks": hooks,
                     "error": record.error})
    if args.format == "json":
        print(json.dumps(rows, indent=2))
    elif not rows:
        print("no third-party plugins loaded (use --all to include the built-in ones)")
    else:
        for r in rows:
            origin = f"{r['distribution']} {r['version']}" if r["distribution"] else "registered directly"
            status = f"  FAILED: {r['error']}" if r["error"] else ""
            tag = " (built-in)" if r["builtin"] else ""
            print(f"{r['name']}{tag}: {r['module']} from {origin}{status}")
            if r["levers"]:
                print(f"    levers: {', '.join(r['levers'])}")
            if r["hooks"]:
                print(f"    hooks:  {', '.join(r['hooks'])}")
    return 2 if any(r["error"] for r in rows) else 0
