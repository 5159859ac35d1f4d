"""Accuracy: how close the predictions are to measurements, one job per module.

* :mod:`.ledger` — the accuracy ledger, published serving measurements one figure a row;
* :mod:`.silicon` — the silicon ledger: the measured deployments shipped with the
  measured kernel tables (``infermodel[kernels]``), read from the installed package;
* :mod:`.row_scenarios` — a ledger row as a scenario: its tables and layout;
* :mod:`.predictions` — every ledger row predicted, its errors and their summaries;
* :mod:`.pools` — a disaggregated row from one server of each pool;
* :mod:`.workers` — a ledger's predictions spread over worker processes;
* :mod:`.row_simulation` — a row at concurrency > 1 as a closed loop of its clients in
  the serving simulator;
* :mod:`.closed_loop` — the analytic closed-loop stand-in the fit searches on;
* :mod:`.fits` — engine efficiency presets fitted on the ledger, judged on whole held-out
  sources;
* :mod:`.report` — the per-row and per-metric tables, the fit's side-by-side table and
  the measured-against-predicted plot;
* :mod:`.calibration` — this machine measured (Module 10 Lab 1), written as a hardware
  preset;
* :mod:`.decoder` — a real random decoder of a scenario's shape, its cache, logits and
  step times checked against the predictions.

``infermodel validate`` and ``infermodel calibrate`` are its commands. The engine never
imports this package; this package imports nothing on its own.
"""
