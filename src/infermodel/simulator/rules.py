"""The scheduling rules both engines follow, and the errors that end a run.

:mod:`infermodel.simulator.policies` states the policies; this module holds the parts
of them that the fast and the reference engine share, so each rule is written once:

* **Before a run** — :func:`check_fits` refuses a request that can never be served,
  :func:`default_iteration_limit` bounds every loop, :func:`reservation_tokens` is the
  output a full-length reservation holds.
* **Prefill** — :func:`prefill_take`: what a prompt takes of an iteration's token
  budget (a chunk of what is left, or the whole prompt or nothing).
* **Admission** — :func:`admission_need`: the cache positions a waiting request must
  find free (its reservation under ``reserve``; otherwise its prompt and generated
  tokens, less what the prefix cache already holds).  A request is admitted, first
  come first served, while that need fits beside the others' within the policy's
  ``admit_fraction`` of the cache.
* **Preemption** — :class:`Evictions`: an evicted request is a *rollback* when it had
  nothing cached of its own, a *preemption* otherwise; its cache is copied to host
  memory (``preemption="swap"``) or discarded and recomputed later; a request rolled
  back in a scheduling turn is not admitted again in that turn; evictions that repeat
  at one instant without an iteration between them end the run (a livelock).
"""

from __future__ import annotations

import numpy as np

from .cost import CostModel
from .errors import SimulationError
from .policies import Policy
from .prefixes import PrefixCache
from .workload import Workload

__all__ = [
    "Evictions",
    "PrefillQueue",
    "admission_need",
    "cannot_admit",
    "check_fits",
    "default_iteration_limit",
    "out_of_iterations",
    "prefill_take",
    "reservation_tokens",
]


# ---------------------------------------------------------------------------- prefill
def prefill_take(remaining: int, left: float, whole: bool, alone: bool) -> int:
    """Tokens a prompt with ``remaining`` tokens to prefill takes of the ``left`` of an
    iteration's budget: under a chunked policy (``whole`` false) what is left, up to its
    remainder; under a whole-prompt policy its remainder if it fits, or if it would run
    ``alone`` (nothing else in the iteration: a prompt longer than the budget), else
    none (0: it waits, and so do the prompts behind it).

    >>> prefill_take(100, 40, False, False), prefill_take(100, 40, True, False)
    (40, 0)
    >>> prefill_take(30, 40, True, False), prefill_take(100, 40, True, True)
    (30, 100)
    """
    if remaining <= left:
        return remaining
    if not whole:
        return int(left)
    return remaining if alone else 0


class PrefillQueue:
    """One turn's prompts in running order, each asking what it takes of the budget
    left (:func:`prefill_take`): under a whole-prompt policy (``whole``) the first that
    does not fit stops the ones behind it, and a prompt may overrun the budget only when
    it would run alone (``alone``: no decode this turn) before any other prompt.

    >>> q = PrefillQueue(True, False)
    >>> q.take(30, 40), q.take(20, 10), q.take(5, 10)
    (30, 0, 0)
    """

    def __init__(self, whole: bool, alone: bool):
        self.whole, self.alone, self.waiting = whole, alone, False

    def take(self, remaining: int, left: float) -> int:
        if self.waiting:
            return 0
        take = prefill_take(remaining, left, self.whole, self.alone)
        if take:
            self.alone = False
        elif self.whole and remaining > 0:
            self.waiting = True
        return take


# ---------------------------------------------------------------------------- before a run
def default_iteration_limit(workload: Workload) -> int:
    """A generous bound on model iterations: every iteration advances at least one
    token, so ten times all prompt and output tokens (plus a margin) is reached only
    by a simulation that thrashes.
    """
    return int(10 * (int(workload.prompts.sum()) + int(workload.outputs.sum())) + 1_000_000)


def reservation_tokens(workload: Workload, policy: Policy) -> int:
    """Output tokens a full-length reservation holds: the policy's, or the longest drawn."""
    return int(policy.reserve_output_tokens or workload.max_output)


def check_fits(workload: Workload, cost: CostModel, policy: Policy) -> None:
    """Raise :class:`SimulationError` naming the first request that can never be
    served within the cache budget under ``policy``.
    """
    speculation = getattr(cost, "speculation", None)
    if speculation is not None and policy.kind != "static" and policy.token_budget < speculation.width:
        budget = "chunk_tokens" if policy.kind == "chunked" else "max_tokens"
        raise SimulationError(
            f"a verification step takes k + 1 = {speculation.width} positions of an iteration, "
            f"more than the {policy.kind} policy's {budget} = {int(policy.token_budget)}: no "
            f"sequence could ever decode; give {budget} at least {speculation.width}")
    kv = cost.kv_bytes_per_token
    memory = cost.cache_memory
    admit_limit = memory * policy.admit_fraction
    if policy.kind == "static" and not policy.static_memory_check:
        return
    prompts, outputs = workload.prompts, workload.outputs
    if policy.kind in ("reserve", "static"):
        need = prompts + reservation_tokens(workload, policy)
        limit, rule = admit_limit, f"{policy.admit_fraction:g} of the cache budget"
    else:
        # admission needs the prompt; growing to completion needs prompt + output − 1
        # positions cached together with the last token's.
        need = np.maximum(prompts, prompts + outputs - 1)
        too_big_admission = prompts * kv > admit_limit
        bad = np.flatnonzero(too_big_admission)
        if bad.size:
            index = int(bad[0])
            raise SimulationError(
                f"request {index} can never be admitted: its prompt of {int(prompts[index]):,} tokens "
                f"needs {prompts[index] * kv:,.0f} bytes of KV cache, more than "
                f"{policy.admit_fraction:g} of the cache budget ({admit_limit:,.0f} of {memory:,.0f} bytes)"
            )
        limit, rule = memory, "the cache budget"
    bad = np.flatnonzero(need * kv > limit)
    if bad.size:
        index = int(bad[0])
        raise SimulationError(
            f"request {index} can never fit the cache: it needs {int(need[index]):,} tokens × "
            f"{kv:,.0f} bytes = {need[index] * kv:,.0f} bytes, more than {rule} "
            f"({limit:,.0f} bytes; cache budget {memory:,.0f} bytes)"
        )


# ---------------------------------------------------------------------------- admission
def admission_need(reserve: bool, request: int, prompt: int, generated: int, reserve_out: int,
                   prefix: PrefixCache | None) -> int:
    """Cache positions ``request`` (``prompt`` tokens, ``generated`` already sent) must
    find free to be admitted: its full-length reservation under ``reserve``, else its
    prompt and generated tokens less the blocks the prefix cache holds for it.
    """
    if reserve:
        return prompt + reserve_out
    total = prompt + generated
    return total if prefix is None else prefix.need(request, total)


# ---------------------------------------------------------------------------- preemption
class Evictions:
    """The preemption rule and what it counts, per request and in total.

    ``preempted[r]`` counts the evictions of ``r`` that discarded (or swapped out)
    cached positions, ``rolled_back[r]`` those of an admission with nothing cached
    yet; ``swapped[r]`` is the positions ``r`` holds in host memory.  ``blocked`` is
    the request rolled back in this scheduling turn (−1: none) and ``stalled`` the
    evictions since the last iteration.
    """

    def __init__(self, count: int, policy: Policy, kv_bytes_per_token: float):
        self.swap = policy.preemption == "swap"
        #: seconds to copy one position to host memory or back
        self.seconds_per_token = (kv_bytes_per_token / policy.swap_bandwidth
                                  if self.swap and policy.swap_bandwidth else 0.0)
        self.max_running = policy.max_running
        self.preempted = [0] * count
        self.rolled_back = [0] * count
        self.swapped = [0] * count
        self.preemptions = self.rollbacks = self.recomputed = self.swapped_tokens = 0
        self.blocked = -1
        self.stalled = 0

    def evict(self, victim: int, own: int, filled: int, now: float) -> float:
        """Count the eviction of ``victim``, which caches ``filled`` positions, ``own`` of
        them not shared prefix blocks; returns the time after its cache is copied out
        (``now`` unless it is swapped).
        """
        if own:
            self.preempted[victim] += 1
        else:
            self.rolled_back[victim] += 1
            self.rollbacks += 1
            self.blocked = victim
        if self.swap and own:
            # every cached position is copied out (its prefix blocks may be evicted
            # before it returns)
            self.swapped[victim] = filled
            self.swapped_tokens += filled
            now += filled * self.seconds_per_token
        else:
            self.recomputed += own
        self.preemptions += 1
        self.stalled += 1
        if self.stalled > self.max_running + 1:
            raise SimulationError(
                "preemption livelock: the cache cannot hold the next iteration of the running "
                f"requests even after {self.stalled} evictions at t = {now:.6g} s"
            )
        return now

    def swap_in(self, request: int, hit: int, now: float) -> tuple[float, int]:
        """At admission: the time after ``request``'s swapped cache comes back (what the
        prefix cache's ``hit`` does not hold), and the positions it brings (0: none).
        """
        held = self.swapped[request]
        if not held:
            return now, 0
        self.swapped[request] = 0
        return now + max(0, held - hit) * self.seconds_per_token, held

    def progress(self) -> None:
        """An iteration runs: the turn's rollback may be admitted again, the stall ends
        (nothing to do while ``stalled`` is 0: a rollback is an eviction too).
        """
        self.stalled = 0
        self.blocked = -1


# ---------------------------------------------------------------------------- errors
def out_of_iterations(limit: int, completed: int, count: int, preemptions: int) -> SimulationError:
    """The error of a run that reached its iteration limit."""
    return SimulationError(
        f"simulation stopped after {limit:,} iterations without finishing "
        f"({completed} of {count} requests done, {preemptions} preemptions); "
        "the policy thrashes on this workload or max_iterations is too small"
    )


def cannot_admit(request: int, tokens: int, kv_bytes_per_token: float,
                 admit_limit: float) -> SimulationError:
    """The error of a request that does not fit an empty server."""
    return SimulationError(
        f"request {request} cannot be admitted into an empty server: it needs "
        f"{tokens * kv_bytes_per_token:,.0f} bytes of cache, budget {admit_limit:,.0f} bytes"
    )
