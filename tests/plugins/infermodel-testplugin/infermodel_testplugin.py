"""A third-party lever for the test suite: a fixed host overhead per decode step.

``[levers.host_overhead] per_step = "1 ms"`` adds that time to every decode step.
"""

import attrs

from infermodel.plugin import S, Seconds, hookimpl


@attrs.frozen
class HostOverhead:
    per_step: Seconds = attrs.field(default=1e-3, metadata={
        "description": "host time added to every decode step"})


@hookimpl
def infermodel_register_levers(register):
    register("host_overhead", HostOverhead, description="fixed host time added to every decode step")


@hookimpl
def infermodel_define_quantities(scenario, define):
    lever = scenario.lever("host_overhead")
    if lever is not None:
        define("host_overhead_time", float(lever.per_step), unit="s",
               description="host time added to each decode step")


@hookimpl
def infermodel_transform_quantities(scenario, transform):
    if scenario.lever("host_overhead") is not None:
        transform.wrap("decode_step_time", lambda old: old + S.host_overhead_time,
                       reason="the host adds a fixed time to every step")
