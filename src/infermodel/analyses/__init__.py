"""Analyses built on the engine and sweeps, one job per module.

* :mod:`.searching` — the best point of a sweep under constraints (``[search]``), with
  :mod:`.formula` parsing its objective and constraints safely;
* :mod:`.plots` — roofline, throughput, memory, cost, operator and sweep plots, drawn
  with the shared figure helpers of :mod:`.figures`;
* :mod:`.simulation` — the bridge from a scenario to the serving simulator
  (:mod:`infermodel.simulator`): its ``[simulation]`` table (:mod:`.simulation.table`),
  the plan read from it (:mod:`.simulation.plan`), the runs (:mod:`.simulation.runs`) and
  their reports (:mod:`.simulation.reports`);
* :mod:`.witnessing` — witness experiments, small seeded runs that check a formula.

A deployment planner belongs here too. The engine never imports this package; this
package imports nothing on its own.
"""
