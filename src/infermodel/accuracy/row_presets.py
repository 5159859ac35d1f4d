"""Which efficiency a ledger row is predicted at: the physical model's parameters a fit
sets (:data:`FITTED`), the preset that prices a row (its engine family's, or that
family's refinement for its card: :func:`preset_name`), the values and intervals a
preset records, and the rates measured kernels leave to the operators no table covers
(:func:`kernels_efficiency`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..engine import intervals
from .ledger import LedgerRow
from .results import Efficiency

if TYPE_CHECKING:
    from ..host import PluginHost

__all__ = ["FITTED", "kernels_efficiency", "preset_efficiency", "preset_intervals", "preset_name",
           "refined_name"]

#: The physical model's engine parameters a fit sets (``[efficiency]`` fields whose
#: ranges are their physical bounds).
FITTED = ("bandwidth_fraction", "expert_bandwidth_fraction", "gemm_fraction", "attention_fraction",
          "dequant_fraction",
          "kernel_time", "launch_time", "step_overhead", "sequence_overhead",
          "collective_latency")


def preset_efficiency(name: str, *, host: PluginHost) -> Efficiency:
    """The engine parameters an efficiency preset sets (those it writes)."""
    from ..scenario import read_toml
    from ..schema import parse_field

    host.check_loaded()
    registries = host.registries
    info = registries.presets["efficiency"][name]
    data, _ = read_toml(info.path)
    table = data.get("efficiency", {})
    specs = registries.fields["efficiency"]
    return Efficiency.of({n: parse_field(specs[n], table[n]) for n in FITTED
                          if n in table and n in specs})


def preset_intervals(name: str, *, host: PluginHost) -> list[intervals.Entry]:
    """The interval groups an efficiency preset records (none for an unknown preset)."""
    from ..scenario import read_toml

    info = host.registries.presets.get("efficiency", {}).get(name)
    if info is None:
        return []
    data, _ = read_toml(info.path)
    return intervals.entries_of(data.get("preset", {}).get("interval", []))


def kernels_efficiency(family: str, *, host: PluginHost) -> Efficiency:
    """The rates the operators no measured kernel table covers run at: the engine
    preset's sustained bandwidth and GEMM shares (``bandwidth_fraction``,
    ``gemm_fraction``) as MBU and MFU, and no ``t0`` (the tables time the kernels; the
    fixed time stood in for them). Peak rates where the preset states neither. The
    engine's host time per iteration is not among them: the measured-kernels plugin adds
    the scenario's ``efficiency.step_overhead``, else its engine generation's preset's.
    """
    try:
        preset = preset_efficiency(family, host=host).as_dict()
    except KeyError:
        preset = {}
    gemm = preset.get("gemm_fraction", 1.0)
    return Efficiency.of({"prefill_mfu": gemm, "decode_mfu": gemm,
                          "mbu": preset.get("bandwidth_fraction", 1.0), "t0": 0.0})


def refined_name(family: str, hardware: str) -> str:
    """The efficiency preset refining ``family`` on one hardware preset."""
    return f"{family}-{hardware}"


def preset_name(row: LedgerRow, *, host: PluginHost) -> str:
    """The efficiency preset that predicts ``row``: its family's refinement for its card
    where one is shipped, else its family's.
    """
    name = refined_name(row.family, row.hardware)
    host.check_loaded()
    return name if name in host.registries.presets.get("efficiency", {}) else row.family
