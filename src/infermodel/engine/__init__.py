"""The engine: a resolved scenario's quantity graph, its compiled evaluation, and reuse.

One job per module:

* :mod:`.graph` — the quantity graph built in named stages from every plugin's
  definitions and transformations;
* :mod:`.evaluation` — the graph compiled once per structure into one numpy function,
  and :class:`~.evaluation.Result`; :func:`~.evaluation.evaluate_afresh` loads, builds,
  compiles and evaluates;
* :mod:`.reads` — which fields plugins read while validating and building (so which
  fields are values that reach the formulas only as numbers);
* :mod:`.kept` — kept structures: a scenario evaluated again with only values changed
  reuses its graph and compiled function; :func:`~.kept.evaluate` is
  ``infermodel.evaluate``;
* :mod:`.operators` — the operators plugins describe for one prefill pass and one decode
  step, evaluated into a table.

The engine imports the core below it (scenario reading, the plugin host, quantities,
derivations) and never the sweeps, the analyses, the accuracy checks, the command line
or the Sphinx extension. Measured operator times (a ``kernels`` package) sit beside it.
This package imports nothing on its own, so that ``import infermodel.engine.graph``
loads only what that module needs.
"""
