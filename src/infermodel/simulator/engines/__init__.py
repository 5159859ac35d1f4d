"""The simulator's two engines, each with and without speculative decoding.

Both engines apply the same rules (:mod:`infermodel.simulator.policies` states them)
and fill the same :class:`~infermodel.simulator.metrics.RunRecord`; their metrics agree
exactly.  The grid, one module per cell:

=============  =========================================  ===========================================
               plain decoding                             speculative decoding
=============  =========================================  ===========================================
reference      :mod:`~.reference`                         :mod:`~.reference_speculative`
fast           :mod:`~.fast`, :mod:`~.fast_continuous`    :mod:`~.fast_speculative`
=============  =========================================  ===========================================

``reference`` takes one loop turn per model iteration and keeps every token
timestamp: simple enough to check by reading, and the yardstick.  ``fast`` advances
over runs of identical-composition iterations with vectorised arithmetic; its static
policy and its entry point are in :mod:`~.fast`, its continuous policies' state in
:mod:`~.fast_continuous`.  Each engine's entry point (:func:`run_fast`,
:func:`run_reference`) chooses the speculative state when the cost model speculates.
"""

from __future__ import annotations

from .fast import run_fast
from .reference import run_reference

__all__ = ["run_fast", "run_reference"]
