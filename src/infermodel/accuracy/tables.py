"""Which measured kernel tables predict a ledger row: the tables' name for its card and
the engine version whose GEMM, attention and MoE tables it is predicted with.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .ledger import LedgerRow

if TYPE_CHECKING:
    from ..host import PluginHost

__all__ = ["CORE_FAMILIES", "kernel_system", "kernels_table", "lengths_are_values", "tables_version"]


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


def kernels_table(row: LedgerRow, kernels: str, *, host: PluginHost) -> dict[str, Any]:
    """The ``[efficiency]`` table of a row timed by measured kernels: placeholder rates
    that the candidates replace on the compiled inputs (for the operators no table
    covers), ``kernels`` and the row's engine, its version where the row names one the
    tables hold (:func:`tables_version`), and a request's way through the server where
    the ledger states it (:attr:`.ledger.LedgerRow.request_time`).
    """
    table: dict[str, Any] = {"prefill_mfu": 1.0, "decode_mfu": 1.0, "mbu": 1.0, "t0": 0.0,
                             "kernels": kernels, "engine": row.family}
    version, _ = tables_version(row, host=host)
    if version:
        table["engine_version"] = version
    if row.request_time is not None:
        table["request_overhead"] = row.request_time
    return table


LENGTHS = ("workload.prompt_tokens", "workload.output_tokens")
_LENGTH_READS: dict[tuple, bool] = {}


def lengths_are_values(scenario, key: tuple, *, host: PluginHost) -> bool:
    """Whether no plugin reads the prompt or output length while building ``scenario``
    (a measured-kernel plan may), so rows of other lengths can reuse its structure.

    Which fields a plugin reads follows the model, its formats and which levers and
    options a scenario sets, not the cards' number or kind: the answer is kept per
    ``key`` (:func:`.predictions.row_model` gives it; finding it out costs about as much
    as building the graph).
    """
    from ..engine.reads import is_read, plugin_reads

    if key not in _LENGTH_READS:
        built = plugin_reads(scenario, host=host).build
        _LENGTH_READS[key] = not any(is_read(path, built) for path in LENGTHS)
    return _LENGTH_READS[key]
