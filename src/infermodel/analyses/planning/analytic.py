"""The analytic screen: what a candidate can serve at best, before any simulation.

From the simulator's own iteration cost (:class:`~infermodel.simulator.CostModel`) and
the workload's mean prompt p̄ and output ō, with the engine's token budget k and its
running limit:

* **Alone.**  One request's prefill (its prompt in chunks of at most k tokens) and one
  decode step at the mean context c̄ = p̄ + ō/2.  No number of replicas makes a
  percentile at or above the median faster than these: a candidate whose lone request
  already misses an objective is dropped.
* **Loaded (mean field).**  At λ requests/s on one replica, B sequences decode at once
  (an engine that runs prompts apart from the decodes: :func:`_apart`).
  Each prompt takes n = ⌈p̄/(k − B)⌉ *prefill iterations* of time t_s = T(B decodes and a
  chunk), the rest are *decode iterations* of time t_d = T(B decodes); so per second
  λ·n prefill iterations take a share ρ = λ·n·t_s of the time, the mean iteration lasts
  t̄ = 1/(λ·n + (1 − ρ)/t_d), and a share f = λ·n·t̄ of all inter-token gaps are prefill
  stalls.  Little's law closes the loop: B = λ·ō·t̄, a fixed point found by iteration.
  The load is carried when the fixed point exists (ρ < 1) within the budget, the running
  limit and the cache; when decode steps are within the ITL objective and, if a stall is
  not, stalls are rare enough (f ≤ 1 − q for a pooled q-th percentile; every gap of a
  share of requests, (1 − f)^ō ≥ share, under the maximum-gap goodput rule); and when the
  prefill (n·t_s), TPOT (t̄) and E2E are within theirs.  The largest such λ is the
  replica's **optimistic capacity**: means only, no queueing, no bursts.

``replicas = ⌈rate / capacity⌉`` is then a lower bound on the replicas the simulation
will need, and its price a lower bound on the candidate's; the plan simulates
candidates in the order of these bounds and drops those whose bound cannot beat a
deployment already found.
"""

from __future__ import annotations

import math

import attrs

#: Iterations of the fixed point t = T(B(t), P(t)) before it is judged divergent.
FIXED_POINT_STEPS = 200


@attrs.frozen
class Screen:
    """A candidate's analytic bounds.

    :param solo_ttft: one request's prefill alone (mean prompt).
    :param solo_itl: one decode step alone (mean context).
    :param capacity: optimistic requests/s one replica serves within the objectives.
    :param reason: why no replica count can serve it (empty when some may).
    """

    solo_ttft: float
    solo_itl: float
    capacity: float
    reason: str = ""
    clients: float = math.nan

    @property
    def feasible(self) -> bool:
        return not self.reason


def mean_lengths(workload) -> tuple[float, float]:
    """Mean prompt and output of a workload spec (its trace's, when it replays one)."""
    if workload.trace is not None:
        return float(workload.trace.prompts.mean()), float(workload.trace.outputs.mean())
    return float(workload.prompt.mean()), float(workload.output.mean())


def _iteration(cost, decodes: float, prefill: float, prompt: float, context: float) -> float:
    """Mean-field iteration time: ``decodes`` sequences at ``context`` cached positions and
    a chunk of ``prefill`` new prompt tokens (half a prompt cached before it when the
    prompt takes several chunks).
    """
    cached_prefill = max(prompt - prefill, 0.0) / 2 if prefill > 0 else 0.0
    positions = decodes + prefill
    attention = decodes * context + prefill * (cached_prefill + (prefill + 1) / 2)
    cached = decodes * context + cached_prefill
    # Fewer than one sequence on average is priced as one, as its positions are: a
    # decode-only iteration's positions and sequences agree (a captured graph where the
    # engine captures one), not an eager launch that makes the fixed point oscillate.
    return cost.time_from_counts(max(positions, 1.0), attention, cached,
                                 max(decodes + (prefill > 0), 1.0))


def solo(cost, prompt: float, output: float, budget: int) -> tuple[float, float]:
    """One request alone: its prefill in chunks of at most ``budget`` tokens, and one
    decode step at the mean context.
    """
    ttft, done = 0.0, 0.0
    while done < prompt:
        chunk = min(budget, prompt - done)
        ttft += cost.time_from_counts(chunk, chunk * (done + (chunk + 1) / 2), done, 1)
        done += chunk
    context = prompt + output / 2
    return ttft, cost.time_from_counts(1, context, context, 1)


@attrs.frozen
class Steady:
    """The mean-field steady state of one replica at a rate (see the module docstring)."""

    decodes: float
    chunks: float
    stall: float
    step: float
    mean: float
    stall_share: float
    busy: float


def steady(cost, rate: float, prompt: float, output: float, budget: int, *,
           prefill: bool = True, mixed: bool = True) -> Steady | None:
    """The fixed point B = λ·ō·t̄(B), or None when the load is beyond the iteration;
    ``prefill=False`` for a decode server of a disaggregated unit, which receives each
    prompt's cache and never stalls on a prefill; ``mixed=False`` for an engine that runs
    prompts apart from the decodes (:func:`_apart`).
    """
    context = prompt + output / 2
    if prefill and not mixed:
        return _apart(cost, rate, prompt, output, budget, context)
    decodes = 0.0
    state = None
    for _ in range(FIXED_POINT_STEPS):
        room = budget - decodes
        if room < 1:
            return None
        chunks = math.ceil(prompt / room) if prefill and prompt > 0 else 0
        step = _iteration(cost, decodes, 0.0, prompt, context)
        stall = _iteration(cost, decodes, prompt / chunks, prompt, context) if chunks else step
        busy = rate * chunks * stall
        if busy >= 1:
            return None
        mean = 1 / (rate * chunks + (1 - busy) / step)
        state = Steady(decodes, chunks, stall, step, mean, rate * chunks * mean, busy)
        nxt = rate * output * mean
        if abs(nxt - decodes) <= 1e-6 * max(nxt, 1.0):
            return state
        decodes = nxt
    return None  # oscillating or still growing: treated as beyond the iteration


def _apart(cost, rate: float, prompt: float, output: float, budget: int,
           context: float) -> Steady | None:
    """The steady state where prompts run apart from the decodes: each prompt takes
    n = ⌈p̄/k⌉ iterations of its own (t_s, no decode beside it), a share ρ = λ·n·t_s of
    the time; the decodes step at t_d the rest of it, so their mean gap is
    t̄ = t_d / (1 − ρ), one gap in λ·t̄ holds a whole prefill (n·t_s + t_d), and
    B = λ·ō·t̄.
    """
    chunks = math.ceil(prompt / budget) if prompt > 0 else 0
    alone = _iteration(cost, 0.0, prompt / chunks, prompt, context) if chunks else 0.0
    busy = rate * chunks * alone
    if busy >= 1:
        return None
    decodes = 0.0
    for _ in range(FIXED_POINT_STEPS):
        step = _iteration(cost, decodes, 0.0, prompt, context)
        mean = step / (1 - busy)
        state = Steady(decodes, 1.0, chunks * alone + step, step, mean, rate * mean, busy)
        nxt = rate * output * mean
        if abs(nxt - decodes) <= 1e-6 * max(nxt, 1.0):
            return state
        decodes = nxt
    return None


def carries(cost, rate: float, prompt: float, output: float, slo, budget: int,
            running: int, *, prefill: bool = True, mixed: bool = True) -> bool:
    """Whether one server carries ``rate`` within the objectives of ``slo`` (mean field)."""
    found = steady(cost, rate, prompt, output, budget, prefill=prefill, mixed=mixed)
    if found is None:
        return False
    context = prompt + output / 2
    if found.decodes > running or found.decodes * context > cost.cache_tokens():
        return False
    objectives = {m: (limit, q / 100) for m, q, limit in slo.targets() if q >= 50}
    if "itl" in objectives:
        limit, q = objectives["itl"]
        if found.step > limit:
            return False
        if found.stall > limit:
            if found.stall_share > 1 - q:
                return False
            if slo.rule == "joint" and slo.goodput_itl == "max_gap" and (
                    (1 - found.stall_share) ** output < slo.share):
                return False
        if slo.rule == "joint" and slo.goodput_itl == "tpot" and found.mean > limit:
            return False
    ttft = found.chunks * found.stall
    bounds = {"ttft": ttft, "tpot": found.mean, "e2e": ttft + output * found.mean}
    return all(bounds[m] <= limit for m, (limit, _) in objectives.items() if m in bounds)


def capacity(cost, prompt: float, output: float, slo, budget: int, running: int, *,
             prefill: bool = True, mixed: bool = True) -> float:
    """The largest λ one server carries within the objectives (mean field; 0 when none)."""
    low, high = 0.0, 1e-3
    while carries(cost, high, prompt, output, slo, budget, running, prefill=prefill, mixed=mixed):
        low, high = high, high * 2
        if high > 1e9:
            return math.inf
    for _ in range(30):
        middle = (low + high) / 2
        if carries(cost, middle, prompt, output, slo, budget, running, prefill=prefill,
                   mixed=mixed):
            low = middle
        else:
            high = middle
    return low


def screen(cost, workload, slo, budget: int, running: int, pools=None, *,
           mixed: bool = True) -> Screen:
    """A candidate's :class:`Screen` against the objectives of ``slo`` (those at or above
    the median; a lower percentile is not bounded by means); ``mixed=False`` for an
    engine that runs its prompts apart from the decodes.
    """
    prompt, output = mean_lengths(workload)
    ttft, itl = solo(cost, prompt, output, budget)
    limits = {m: limit for m, q, limit in slo.targets() if q >= 50}
    for metric, alone in (("ttft", ttft), ("itl", itl), ("tpot", itl),
                          ("e2e", ttft + max(output - 1, 0) * itl)):
        if alone > limits.get(metric, math.inf):
            return Screen(ttft, itl, 0.0, f"one request alone already has {metric.upper()} "
                                          f"{_shown(alone)} > {_shown(limits[metric])}")
    if pools is not None and pools.disaggregated:
        # Prefill servers run prompts back to back; decode servers never stall on one.
        prefill_rate = 1 / ttft
        decode = capacity(cost, prompt, output, slo, budget, running, prefill=False)
        found = min(pools.prefill * prefill_rate, pools.decode * decode)
    else:
        found = capacity(cost, prompt, output, slo, budget, running, mixed=mixed)
    if found <= 0:
        return Screen(ttft, itl, 0.0, "even a light load misses the objectives on average")
    state = steady(cost, found, prompt, output, budget, mixed=mixed)
    e2e = ttft + output * (state.mean if state is not None else itl)
    return Screen(ttft, itl, found, clients=found * e2e)


def _shown(seconds: float) -> str:
    return f"{seconds:.3g} s" if seconds >= 1 else f"{seconds * 1000:.3g} ms"


__all__ = ["Screen", "Steady", "capacity", "carries", "mean_lengths", "screen", "solo", "steady"]
