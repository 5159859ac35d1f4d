"""Which limit binds: the bottleneck of prefill, of a decode step and of the batch.

A step takes the larger of its memory time and its compute time, plus a fixed time per
step; whichever term is largest is the limit that binds, and the lever that helps is the
one that shortens that term (fewer bytes when bandwidth binds, fewer FLOPs or faster
arithmetic when compute binds). Adding sequences to a batch stops paying off at one of
two limits: the cache fills the card (``max_sequences``) before decode turns
compute-bound (``critical_batch``), or the other way round.

Each limit is a quantity whose value names one outcome of :data:`LIMITS` (0 memory
bandwidth, 1 compute, ...); ``infermodel run`` prints them on one line under its
summary, ``limits: prefill compute · decode memory bandwidth · batch memory capacity``,
and ``infermodel explain SCENARIO decode_limit`` shows the comparison behind one.

* ``prefill_limit``, ``decode_limit``: the fixed step time when ``t0`` exceeds both
  roofline times; time a lever adds to the step (a collective, a host copy) when that
  exceeds them; else compute when the compute time is at least the memory time, else
  memory bandwidth.
* ``batch_limit``: memory capacity when fewer full-length sequences fit than the batch
  at which decode turns compute-bound, else compute.

A plugin that times a phase another way (measured rates) replaces the limit with its own
outcome, ``LIMITS.index("measured rate")``.
"""

from __future__ import annotations

from sympy import GreaterThan, Max, Piecewise, StrictGreaterThan

from infermodel.plugin import S, hookimpl

from . import LAB, M10

ROOFLINE = (f"{M10}, §2 arithmetic intensity and the roofline; {LAB}, 'Two costs for one "
            "answer'")
CAPACITY = f"{M10}, 'Cache traffic limits the batching gain' (capacity remains a separate admission limit)"

#: The outcomes a limit quantity names, by value.
LIMITS = ("memory bandwidth", "compute", "fixed step time", "time a lever adds",
          "measured rate", "memory capacity")
MEMORY, COMPUTE, FIXED, ADDED, MEASURED, CAPACITY_LIMIT = range(len(LIMITS))

#: The limit quantities, with the phase each names and the quantities it compares.
PHASES = {
    "prefill": ("prefill_time_memory", "prefill_time_compute", "prefill_time"),
    "decode": ("decode_time_memory", "decode_time_compute", "decode_step_time"),
}


def coding(names=LIMITS) -> str:
    """``0 memory bandwidth, 1 compute, ...``: how a limit quantity's value reads.

    >>> coding(("a", "b"))
    '0 a, 1 b'
    """
    return ", ".join(f"{i} {name}" for i, name in enumerate(names))


def _larger(*terms):
    """``Max(*terms)``, left unevaluated unless every term is a number: sympy's search for
    comparable arguments among real symbols costs tens of milliseconds per graph build
    and can never decide one here.
    """
    numbers = all(getattr(t, "is_number", True) for t in terms)
    return Max(*terms) if numbers else Max(*terms, evaluate=False)


def _exceeds(a, b, *, strictly: bool = True):
    """``a > b`` (or ``a >= b``), left undecided unless both are numbers: asking sympy's
    assumptions whether one sum of real symbols exceeds another costs milliseconds per
    comparison at every graph build, and the answer depends on the values anyway.
    """
    relation = StrictGreaterThan if strictly else GreaterThan
    numbers = getattr(a, "is_number", True) and getattr(b, "is_number", True)
    return relation(a, b) if numbers else relation(a, b, evaluate=False)


def step_limit(memory, compute, step):
    """The limit of a step ``step = max(memory, compute) + t0 (+ time a lever adds)``."""
    roofline = _larger(memory, compute)
    added = step - roofline - S.t0
    return _cases((FIXED, _exceeds(S.t0, _larger(roofline, added))),
                  (ADDED, _exceeds(added, _larger(roofline, S.t0))),
                  (COMPUTE, _exceeds(compute, memory, strictly=False)),
                  (MEMORY, True))


def _cases(*pairs):
    """``Piecewise(*pairs)``, its conditions left as written unless they are decided
    (sympy's canonical forms of undecided ones ask the same costly questions).
    """
    decided = all(condition in (True, False) for _, condition in pairs)
    return Piecewise(*pairs) if decided else Piecewise(*pairs, evaluate=False)


@hookimpl
def infermodel_define_quantities(scenario, define):
    for phase, (memory, compute, step) in PHASES.items():
        define(f"{phase}_limit", step_limit(S[memory], S[compute], S[step]), unit="1",
               description=f"which limit binds in {phase} ({coding()})", reference=ROOFLINE)
    define("batch_limit",
           _cases((CAPACITY_LIMIT, _exceeds(S.critical_batch, S.max_sequences)),
                  (COMPUTE, True)),
           unit="1", description="what stops a bigger batch paying off: the cache filling memory "
                                 "before decode turns compute-bound, or compute "
                                 f"({coding()})", reference=f"{CAPACITY}; {ROOFLINE}")


@hookimpl
def infermodel_register_headlines(register):
    for phase in (*PHASES, "batch"):
        register("limits", f"{phase}_limit", label=phase, choices=LIMITS)


__all__ = ["LIMITS", "PHASES", "coding", "step_limit"]
