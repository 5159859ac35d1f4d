"""Which measured kernel tables predict a ledger row: the tables' name for its card and
the engine version whose GEMM, attention and MoE tables it is predicted with.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .ledger import LedgerRow

if TYPE_CHECKING:
    from ..host import PluginHost

__all__ = ["CORE_FAMILIES", "kernel_system", "tables_version"]


def kernel_system(hardware: str, *, host: PluginHost) -> str | None:
    """The measured tables' name for a hardware preset's card (None: it names none)."""
    from ..scenario import read_toml

    host.check_loaded()
    info = host.registries.presets.get("hardware", {}).get(hardware)
    if info is None:
        return None
    data, _ = read_toml(info.path)
    system = data.get("hardware", {}).get("kernel_system")
    return system if isinstance(system, str) else None


#: Table families a step mostly rests on: a row's engine version is used for its
#: kernels only where each of these has tables at or below it.
CORE_FAMILIES = ("gemm", "attention", "moe")


def tables_version(row: LedgerRow, *, host: PluginHost) -> tuple[str | None, str]:
    """The engine version whose kernel tables predict ``row``, and a note where it is not
    the row's own: the row's version where the GEMM, attention and MoE tables each hold
    it or an older one (tables fill backward, as the package's own version slots do);
    else the newest version the tables hold (what the package's own estimator falls
    back to), None meaning the scenario's default, also the newest.
    """
    from ..kernels import TablesUnavailable
    from ..kernels.source import folders, resolve

    system = kernel_system(row.hardware, host=host)
    wanted = row.engine_version
    if not system:
        return None, ""
    try:
        held = {f.version for family in CORE_FAMILIES for f in folders(system, family, row.family)}
        covered = bool(wanted) and re.match(r"\d+\.\d+", wanted) is not None and all(
            resolve(system, family, row.family, wanted) is not None
            for family in CORE_FAMILIES if folders(system, family, row.family))
    except TablesUnavailable:
        return None, ""
    if covered:
        return wanted, ""
    if not held:
        return None, ""
    return None, (f"{row.family} {wanted or '(no version)'} has no GEMM, attention or MoE "
                  f"tables at or below it on {system}: the newest tables")
