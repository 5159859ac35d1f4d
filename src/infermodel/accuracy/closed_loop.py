"""Steady state of a closed-loop benchmark: C clients, each sending its next request as
soon as the previous one finishes (how ``vllm bench serve --max-concurrency``, AIPerf and
genai-perf's concurrency mode drive a server).

The analytic model, from two times the roofline gives (the prefill of one prompt
``T_p`` and one decode step at the running batch ``T_d(B)``) and the most sequences
the cache holds ``N``:

* running batch ``B = min(C, N)``; the ``C − B`` other clients wait in a queue;
* Little's law for the running requests: arrival rate ``λ = B / E`` with
  ``E = TTFT + (osl − 1) · ITL`` the end-to-end time of a running request;
* each decoding request is stalled by the prefills of the other ``B − 1`` slots:
  the share of time they take is ``ρ = (B − 1) · T_p / E``, so
  ``ITL = T_d(B) / (1 − ρ)``;
* a new request waits for the step under way (``T_d / 2`` on average when others are
  running) and for prefills ahead of it (an M/D/1 wait ``ρ · T_p / (2 (1 − ρ))``):
  ``TTFT = T_p + T_d / 2 + ρ · T_p / (2 (1 − ρ))``; with ``C = 1`` simply ``T_p``;
* clients beyond the cache's capacity wait ``(C − B) · E / B`` more for a slot;
* output throughput ``= B · osl / E``.

These equations are solved for ``E`` in closed form (a quadratic). At ``C = 1`` they give
the roofline quantities exactly (``TTFT = T_p``, ``ITL = T_d(1)``). A static batch
(every request starts together) has the same throughput to first order (the same
prefill work and decode steps per cycle); its first-token time is the batch's prefill,
which the ledger only records at batch 1.

The ledger's predictions at concurrency > 1 come from the serving simulator
(:mod:`infermodel.accuracy.row_simulation`); this model is the fit's stand-in, evaluated on
every efficiency candidate at once where a simulation per candidate would be too slow,
and scaled per row by its simulated / analytic ratio (:func:`infermodel.accuracy.fits.fit`).
Throughput and ITL agree with the simulation within a few percent below the cache's
capacity; TTFT does not where fixed-length clients stay in phase (see
``docs/accuracy.rst``).
"""

from __future__ import annotations

import math

import attrs
import numpy as np

__all__ = ["ClosedLoop", "closed_loop", "decode_running", "offline_batch", "prefill_pool_wait"]

#: Prefill share at which the iteration stops growing the stall (a saturated prefill
#: queue); beyond it the model is outside its range and says so through ``saturated``.
MAX_PREFILL_SHARE = 0.95


@attrs.frozen
class ClosedLoop:
    """Steady-state serving figures (seconds, tokens per second); arrays broadcast."""

    ttft: np.ndarray
    itl: np.ndarray
    e2e: np.ndarray
    output_tokens_per_s: np.ndarray
    running: np.ndarray
    saturated: np.ndarray


def closed_loop(prefill_time, decode_step_time, concurrency, capacity, output_tokens, *,
                rounds=0, request_time=0.0, held=0.0) -> ClosedLoop:
    """Steady state of ``concurrency`` clients (see the module docstring).

    ``prefill_time`` is one prompt's prefill, ``decode_step_time`` one decode step at
    the running batch ``min(concurrency, capacity)``; all arguments broadcast.

    ``rounds`` > 0 (it broadcasts too) averages the first-token time over that many requests per client
    with the first round measured: every client starts at once, so the first round's
    prompts queue behind one another (the i-th waits for i prefills, a mean of
    ``(B + 1)/2 · T_p``) and the other ``rounds − 1`` see the steady state. A run of one
    round is one burst throughout: its decoding waits for the prompts behind its own, a
    mean of ``(B − 1)/2 · T_p`` over its ``osl − 1`` steps, and every request ends at
    ``B · T_p + (osl − 1) · T_d`` (its inter-token time, end-to-end time and throughput).

    ``request_time`` (it broadcasts) is a request's way through the server outside the
    engine's iterations (API server, tokenisation, the first token's return): it adds to
    every first-token and end-to-end time and to each client's cycle, and holds no slot
    (beyond the cache's capacity the queue for a slot absorbs it first).

    ``held`` (it broadcasts) is time a request spends inside the engine, holding its
    slot, before its first token beyond its prompt's prefill (a scheduler that waits for
    more prompts; the other sequences' decodes in the iteration that prefills it, where
    the engine mixes them): it adds to the first token and to the running request's time,
    so a full engine serves fewer. The others' inter-token time still counts each prefill
    as a whole stall, also where a mixing engine gives them a token in its iteration
    (less than a decode step in the prefill's time).

    >>> r = closed_loop(0.1, 0.02, 1, 10, 101)
    >>> float(r.ttft), float(r.itl), round(float(r.output_tokens_per_s), 3)
    (0.1, 0.02, 48.095)
    """
    tp = np.asarray(prefill_time, dtype=float)
    td = np.asarray(decode_step_time, dtype=float)
    clients = np.asarray(concurrency, dtype=float)
    running = np.minimum(clients, np.maximum(np.floor(np.asarray(capacity, dtype=float)), 1.0))
    steps = np.maximum(np.asarray(output_tokens, dtype=float) - 1.0, 0.0)
    others = running - 1.0
    wait_step = np.where(others > 0, td / 2, 0.0)
    # The fixed point in closed form: with ρ = o·T_p / E, multiplying the equation for E
    # by (1 − ρ) gives E² − C·E − o·T_p·(T_p / 2 − a) = 0, C = o·T_p + a + s·T_d and
    # a = T_p + (T_d / 2 when others run) + held; E is its positive root. Where that root puts ρ
    # above MAX_PREFILL_SHARE the stall is held there (a saturated prefill queue).
    a = tp + wait_step + np.asarray(held, dtype=float)
    c = others * tp + a + steps * td
    e2e = (c + np.sqrt(np.maximum(c * c + 4 * others * tp * (tp / 2 - a), 0.0))) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(e2e > 0, others * tp / e2e, 0.0)
    share = np.minimum(np.nan_to_num(share), MAX_PREFILL_SHARE)
    itl = td / (1.0 - share)
    ttft = a + share * tp / (2.0 * (1.0 - share))
    e2e = ttft + steps * itl
    queued = (clients - running) * e2e / running
    throughput = running * (steps + 1.0) / e2e
    rounds = np.asarray(rounds, dtype=float)
    if np.any(rounds > 0):
        burst = tp * (running + 1.0) / 2.0
        # A run that is one burst decodes after the prompts behind its own: all B
        # prefills take B·T_p, a request's first token comes after (B + 1)/2 of them on
        # average, so the other (B − 1)/2 stall its decoding once, over its steps (not the
        # steady state's B − 1 per request), and every request ends at B·T_p + s·T_d.
        # Runs of several rounds keep the steady state's inter-token time
        # (docs/accuracy.rst, the silicon ledger's clients).
        one = rounds == 1
        burst_itl = np.where(steps > 0, td + tp * (running - 1.0) / 2.0 / np.maximum(steps, 1.0), td)
        with np.errstate(divide="ignore", invalid="ignore"):
            ttft = np.where(rounds > 0, (burst + (rounds - 1) * ttft) / rounds, ttft)
        itl = np.where(one, burst_itl, itl)
        e2e = np.where(one, running * tp + steps * td, e2e)
        throughput = np.where(one, running * (steps + 1.0) / e2e, throughput)
    path = np.asarray(request_time, dtype=float)
    if np.any(path != 0):
        # The time is spent outside the engine and holds no slot: a client's cycle is
        # e2e + path, and a full engine serves `running` requests per e2e, so the queue for
        # a slot absorbs the path first.
        cycle = e2e + path
        queued = np.maximum(clients * e2e / running - cycle, 0.0)
        throughput = np.minimum(clients / cycle, running / e2e) * (steps + 1.0)
        ttft, e2e = ttft + path, cycle
    return ClosedLoop(ttft=ttft + queued, itl=itl, e2e=e2e + queued,
                      output_tokens_per_s=throughput, running=running,
                      saturated=share >= MAX_PREFILL_SHARE)


def offline_batch(batch_prefill_time, decode_step_time, requests, running, output_tokens) -> ClosedLoop:
    """An offline run: ``requests`` identical requests submitted at once, at most
    ``running`` of them at a time (the cache or the engine's sequence cap), served in
    rounds of ``running``: each round prefills its prompts (``batch_prefill_time``, the
    prefill of ``running`` prompts) then decodes ``output_tokens − 1`` steps of
    ``decode_step_time`` at that batch. Throughput is all output over the rounds' time;
    a request's first token comes after the rounds before it and, on average, half its
    round's prefill.

    >>> r = offline_batch(0.4, 0.02, 8, 4, 11)
    >>> float(r.output_tokens_per_s), float(r.ttft)
    (73.33333333333333, 0.5)
    """
    tp = np.asarray(batch_prefill_time, dtype=float)
    td = np.asarray(decode_step_time, dtype=float)
    count = np.asarray(requests, dtype=float)
    running = np.maximum(np.minimum(np.asarray(running, dtype=float), count), 1.0)
    steps = np.maximum(np.asarray(output_tokens, dtype=float) - 1.0, 0.0)
    rounds = np.ceil(count / running)
    round_time = tp + steps * td
    ttft = (rounds - 1.0) / 2.0 * round_time + tp / 2.0
    e2e = ttft + steps * td
    throughput = count * (steps + 1.0) / (rounds * round_time)
    return ClosedLoop(ttft=ttft, itl=td + 0.0 * tp, e2e=e2e, output_tokens_per_s=throughput,
                      running=running, saturated=np.zeros(np.broadcast(tp, td).shape, dtype=bool))


def prefill_pool_wait(service: float, clients: int, think: float, servers: int = 1,
                      full: float | None = None) -> float:
    """Mean time a request spends at a prefill server (queueing and service) when
    ``clients`` clients each send a prompt, wait for it, then spend ``think`` seconds
    elsewhere (the decode pool) before the next: exact mean-value analysis of a closed
    network of one queueing station and one delay,

        R(n) = S · (1 + Q(n − 1)),  X(n) = n / (R(n) + Z),  Q(n) = X(n) · R(n),

    with a station of ``servers`` prompts at once taken as one server of service
    ``S / servers`` plus a pure delay of ``(servers − 1) · S / servers`` (Seidmann's
    approximation). Where a pass over ``servers`` prompts together takes ``full``
    (longer than one prompt's ``S``: the prompts share the pass's GEMMs), the queueing
    server's service is ``full / servers`` and the delay what is left of ``S`` (none
    where the batch gains nothing), so that alone a prompt takes ``S`` and saturated the
    station turns ``servers`` prompts every ``full``.

    >>> prefill_pool_wait(0.1, 1, 1.0)
    0.1
    >>> round(prefill_pool_wait(0.1, 20, 1.0), 2)   # near saturation: 20 · 0.1 − 1.0
    1.0
    """
    queue_service = (service if full is None else full) / servers
    delay = max(service - queue_service, 0.0)
    queued = 0.0
    response = queue_service
    for n in range(1, max(int(clients), 1) + 1):
        response = queue_service * (1.0 + queued)
        throughput = n / (response + delay + think)
        queued = throughput * response
    return response + delay


def decode_running(concurrency: int, workers: int, cap: int, osl: float, between: float,
                   cycle) -> int:
    """Sequences a decode server runs at once in a closed loop of ``concurrency`` clients:
    each client spends its cycle at a prefill server (``cycle(running)[1]``, queue and
    service), ``between`` seconds in transfer and on the request's way, and
    ``(osl − 1) · TPOT`` in decode (``cycle(running)[0]`` the step at ``running``), so the
    decode pool holds the clients' share of the cycle in decode (Little's law), spread
    over its ``workers`` and at most ``cap`` a server.

    The share grows with ``running`` (a longer step leaves the prefill pool less loaded),
    so ``f(n)``, the sequences the share at ``n`` gives, is monotone and the answer is
    its largest fixed point: the largest ``n`` with ``f(n) ≥ n``, found by bisection
    between 1 and the most the clients allow (about log₂ of that many evaluations of
    ``cycle``). A prefill pool that is the bottleneck keeps most clients queued for
    their first token, and the decode batch is then far below the clients.

    >>> decode_running(100, 1, 100, 11, 0.0, lambda n: (0.01, 0.1))   # 0.1 s of 0.2 s
    50
    """
    def settled(running: int) -> int:
        tpot, first = cycle(running)
        decoding = (osl - 1) * tpot
        total = decoding + first + between
        share = decoding / total if total > 0 else 1.0
        return max(1, min(math.ceil(concurrency * share / workers), cap))

    high = max(1, min(math.ceil(concurrency / workers), cap))
    if settled(high) >= high:
        return high
    low = 1  # settled(1) ≥ 1 always
    while high - low > 1:
        middle = (low + high) // 2
        if settled(middle) >= middle:
            low = middle
        else:
            high = middle
    return low
