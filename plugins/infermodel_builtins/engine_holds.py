"""Scheduler holds: how long an engine's scheduler holds a new request before its
prefill, where the scenario states a setting that makes it wait.

* ``efficiency.recv_interval`` — SGLang's ``--scheduler-recv-interval``: new requests are
  read every N decode iterations (``scheduler_recv_hold``);
* ``efficiency.batch_wait_iterations`` — TensorRT-LLM's ``batch_wait_timeout_iters``:
  new prompts wait for more before their prefill (``batch_wait_hold``);
* ``efficiency.dp_balance_timeout`` — TensorRT-LLM's attention-DP balance
  (``attention_dp_config``: ``enable_balance`` with ``timeout_iters``, and
  ``efficiency.dp_balance_batching`` for its ``batching_wait_iters``): with data-parallel
  attention ranks (``levers.parallelism.attention_data``), a new prompt waits until every
  rank holds one, or the timeout (``dp_balance_hold``).

None is in ``ttft`` (one request alone, which no engine holds); the accuracy ledger's
closed loops add them to every request that arrives while others run, and ``simulate``
says it does not hold them.
"""

from __future__ import annotations

from sympy import Piecewise

from infermodel.plugin import S, hookimpl

__all__ = ["BALANCE", "BATCH_WAIT", "ENGINE_OF_FIELD", "RECV", "balance_fill"]

#: TensorRT-LLM's default ``attention_dp_config.batching_wait_iters`` (``AttentionDpConfig``).
BALANCE_BATCHING_DEFAULT = 10

#: The engine whose setting each field is, its name there, and the value that holds
#: nothing (every engine's default; None: only an unstated field holds nothing).
ENGINE_OF_FIELD = {"recv_interval": ("sglang", "SGLang's --scheduler-recv-interval", 1),
                   "batch_wait_iterations": ("trtllm", "TensorRT-LLM's batch_wait_timeout_iters",
                                             0),
                   "dp_balance_timeout": ("trtllm", "TensorRT-LLM's attention_dp_config "
                                          "timeout_iters (enable_balance)", None)}


@hookimpl
def infermodel_register_fields(register):
    def efficiency(name, description, minimum):
        register("efficiency", name, kind="int", description=description, minimum=minimum,
                 maximum=100_000, default=None)

    efficiency("recv_interval",
               "decode iterations between the scheduler's reads of newly arrived requests "
               "(SGLang --scheduler-recv-interval; every engine reads them at every iteration "
               "by default, 1): a request that arrives while others decode waits (N − 1)/2 "
               "decode steps more on average (scheduler_recv_hold)", 1)
    efficiency("batch_wait_iterations",
               "iterations a new prompt may wait for more prompts before its prefill while "
               "others decode (TensorRT-LLM batch_wait_timeout_iters; 0, no wait, is its "
               "default): the first prompt of a wait waits them all, later ones less "
               "(batch_wait_hold); the release at a share of the tokens per iteration "
               "(batch_wait_max_tokens_ratio) is not modelled", 0)
    efficiency("dp_balance_timeout",
               "with data-parallel attention ranks, iterations a new prompt may wait until "
               "every rank holds one (TensorRT-LLM attention_dp_config with enable_balance, "
               "its timeout_iters; unset: no balancing, the engine's default): "
               "dp_balance_hold", 0)
    efficiency("dp_balance_batching",
               "with dp_balance_timeout, iterations the balance waits for more prompts once "
               "every rank holds one (TensorRT-LLM attention_dp_config batching_wait_iters; "
               f"default {BALANCE_BATCHING_DEFAULT}, the engine's)", 0)


@hookimpl
def infermodel_define_quantities(scenario, define):
    _recv_hold(scenario, define)
    _batch_wait_hold(scenario, define)
    _balance_hold(scenario, define)


def _setting(scenario, define, field: str, meaning: str, reference: str) -> bool:
    """Define the quantity of the ``efficiency`` field of that name where the scenario
    states it; whether it does.
    """
    value = scenario.value(f"efficiency.{field}")
    if value is None:
        return False
    define(field, value, unit="1", description=f"{meaning} (efficiency.{field})",
           reference=reference)
    return True


@hookimpl
def infermodel_check_result(result, warn):
    """Warn where a hold's setting is stated for an engine that has no such setting, and
    where the attention-DP balance is stated without data-parallel attention ranks.
    """
    scenario = result.scenario
    engine = scenario.value("efficiency.engine")
    for field, (owner, name, idle) in ENGINE_OF_FIELD.items():
        value = scenario.value(f"efficiency.{field}")
        if value is not None and value != idle and engine != owner:
            warn(field if field in result.values else "ttft", f"efficiency.{field} = {value:g} is {name}; the scenario's engine is "
                        f"{engine!r}, whose scheduler has no such setting: the hold "
                        "(scheduler_recv_hold, batch_wait_hold, dp_balance_hold) is priced as "
                        "that engine would hold requests")
    timeout = scenario.value("efficiency.dp_balance_timeout")
    batching = scenario.value("efficiency.dp_balance_batching")
    if timeout is None and batching is not None:
        warn("ttft", f"efficiency.dp_balance_batching = {batching:g} without "
                     "efficiency.dp_balance_timeout: the attention-DP balance is off (TensorRT-"
                     "LLM's enable_balance), so nothing is held; state the timeout to turn it on")
    if timeout is not None and _ranks(scenario) <= 1:
        warn("ttft", f"efficiency.dp_balance_timeout = {timeout:g} balances data-parallel "
                     "attention ranks, and the scenario has none (levers.parallelism."
                     "attention_data is 1): nothing is held")


RECV = ("SGLang scheduler (python/sglang/srt/managers/scheduler_recv_skipper.py: with the "
        "server argument scheduler_recv_interval N > 1 it reads new requests once its counter "
        "reaches N, a decode iteration adding 1 and a prefill iteration enough to read at "
        "the next one)")


def _recv_hold(scenario, define):
    """A scheduler that reads new requests every ``N`` decode iterations: a request that
    arrives while a batch decodes waits for the next read, ``(N − 1)/2`` decode steps
    more on average than one read at every iteration (arrivals fall evenly over the
    ``N`` steps between reads). Alone (a batch of one) the engine is idle, and its idle
    passes, which count like decode iterations, take microseconds: the read comes at
    once. A prefill iteration brings the next read forward; that shortening is not
    modelled. Defined only where the scenario states the interval.
    """
    if not _setting(scenario, define, "recv_interval", "decode iterations between the "
                    "scheduler's reads of new requests", RECV):
        return
    define("scheduler_recv_hold",
           Piecewise(((S.recv_interval - 1) / 2 * S.decode_step_time, S.batch > 1), (0, True)),
           unit="s",
           description="mean time a request that arrives while the batch decodes waits for the "
                       "scheduler's next read of new requests, beyond one read per iteration "
                       "(none for a request alone: the idle engine's passes reach the read "
                       "within microseconds)",
           reference=RECV)


def _arrivals(define, name: str, reference: str) -> None:
    """Define ``name``: new requests arriving per decode iteration in a steady state of
    ``batch`` sequences running (Little's law: ``batch / e2e_latency``, times the step).
    """
    define(name, S.batch * S.decode_step_time / S.e2e_latency, unit="1", reference=reference,
           description="new requests arriving per decode iteration in a steady state of batch "
                       "sequences running (Little's law: batch / e2e_latency, times the step)")


BATCH_WAIT = ("TensorRT-LLM PyExecutor._waiting_requests (PyTorch backend): while generation "
              "requests run and no attention-DP is used, new context requests wait until the "
              "waited iterations reach batch_wait_timeout_iters or the scheduled tokens reach "
              "batch_wait_max_tokens_ratio of max_num_tokens; the count restarts at each release")


def _batch_wait_hold(scenario, define):
    """Delayed batching: prompts that arrive while others decode wait for more prompts,
    at most ``T`` iterations from the first one waiting. With ``λ`` arrivals per
    iteration (Little's law at the batch: ``batch / e2e_latency`` per second, times the
    decode step), a wait holds the first prompt ``T`` iterations and the ``λT`` that
    join it ``T/2`` on average: ``T (1 + λT/2) / (1 + λT)`` iterations a prompt. The
    release when the waiting prompts fill a share of the tokens per iteration is not
    modelled (an upper estimate where they fill it within ``T``). Alone, a prompt is
    scheduled at once (the engine does not wait without generation requests).
    """
    if not _setting(scenario, define, "batch_wait_iterations", "iterations a new prompt may "
                    "wait for more before its prefill", BATCH_WAIT):
        return
    _arrivals(define, "batch_wait_arrivals", BATCH_WAIT)
    t, rate = S.batch_wait_iterations, S.batch_wait_arrivals
    define("batch_wait_hold",
           Piecewise((S.decode_step_time * t * (1 + rate * t / 2) / (1 + rate * t), S.batch > 1),
                     (0, True)),
           unit="s",
           description="mean time a prompt that arrives while the batch decodes waits for more "
                       "prompts before its prefill (none for a request alone)",
           reference=BATCH_WAIT)


BALANCE = ("TensorRT-LLM PyExecutor._balance_adp_requests (PyTorch backend, attention_dp_config "
           "with enable_balance): while not every attention-DP rank has a context request, "
           "each iteration counts one and holds them all, releasing them when the count "
           "reaches timeout_iters (the count restarts) or when some rank has no generation "
           "request, and once every rank has one after batching_wait_iters more iterations "
           "while every rank generates); TensorRT-LLM tech blog 10, 'ADP Balance Strategy'")


def _ranks(scenario) -> int:
    lever = scenario.lever("parallelism")
    return int(lever.attention_data) if lever is not None else 1


def balance_fill(ranks: int) -> float:
    """New requests, on average, until each of ``ranks`` data-parallel attention ranks
    holds one, when each goes to the rank whose sequence just finished (a rank chosen at
    random): the coupon collector's ``D · H_D``.

    >>> balance_fill(1), round(balance_fill(2), 6), round(balance_fill(8), 4)
    (1.0, 3.0, 21.7429)
    """
    return ranks * sum(1.0 / i for i in range(1, ranks + 1))


def _balance_hold(scenario, define):
    """Attention-DP balance (TensorRT-LLM): a context request is held until every one of
    the ``D`` attention ranks holds one, at most ``T`` counted iterations. The count runs
    in every iteration that is not released, so it restarts ``T`` iterations after the
    last release whether prompts wait or not. With ``λ`` new requests an iteration
    (Little's law, as :func:`_batch_wait_hold`), each going to the rank whose sequence
    finished, every rank holds one after ``K = D·H_D`` of them (:func:`balance_fill`):

    * where ``λT ≥ K`` the ranks fill first: a prompt waits ``(K − 1)/(2λ)`` iterations
      on average, then the ``W`` iterations of ``batching_wait_iters``;
    * else the timeout releases them: arrivals fall evenly over the ``T`` iterations, a
      prompt waits ``T/2``.

    Only while every rank still generates after one of its sequences finishes (at least
    two a rank, ``batch ≥ 2D``); with fewer the rank left without a sequence releases its
    prompt at once, and alone a prompt is never held. The larger prefill of the prompts
    released together is not priced (each prompt's own prefill is). Defined only where
    the scenario states the timeout and has data-parallel attention ranks.
    """
    timeout = scenario.value("efficiency.dp_balance_timeout")
    ranks = _ranks(scenario)
    if timeout is None or ranks <= 1:
        return
    batching = scenario.value("efficiency.dp_balance_batching")
    define("dp_balance_timeout", timeout, unit="1", reference=BALANCE,
           description="iterations a prompt may be held until every attention-DP rank holds "
                       "one (efficiency.dp_balance_timeout)")
    define("dp_balance_batching", BALANCE_BATCHING_DEFAULT if batching is None else batching,
           unit="1", reference=BALANCE,
           description="iterations the balance waits for more prompts once every rank holds "
                       "one (efficiency.dp_balance_batching"
                       + (f"; the engine's default, {BALANCE_BATCHING_DEFAULT})"
                          if batching is None else ")"))
    define("dp_balance_fill", balance_fill(ranks), unit="1", reference=BALANCE,
           description=f"new requests until each of the {ranks} attention-DP ranks holds one, "
                       "on average (each goes to the rank whose sequence finished: the coupon "
                       "collector's D·H_D)")
    _arrivals(define, "dp_balance_arrivals", BALANCE)
    rate, t, fill = S.dp_balance_arrivals, S.dp_balance_timeout, S.dp_balance_fill
    busy = S.batch >= 2 * S.parallel_attention_data_degree
    # Nested, not And(...): numpy's logical_and.reduce would need the two conditions in
    # one shape, and a vectorised evaluation broadcasts them.
    waited = Piecewise((S.decode_step_time * ((fill - 1) / (2 * rate) + S.dp_balance_batching),
                        rate * t >= fill), (S.decode_step_time * t / 2, True))
    define("dp_balance_hold", Piecewise((waited, busy), (0, True)),
           unit="s", reference=BALANCE,
           description="mean time a prompt that arrives while every attention-DP rank "
                       "generates waits, in its slot, until every rank holds one "
                       "(none below two sequences a rank, nor for a request alone)")
