"""How long an engine's scheduler holds a new request before its prefill, where the
scenario states a setting that makes it wait (not a plugin: the base physics defines
these quantities through :func:`scheduler_holds`).

* ``efficiency.recv_interval`` — SGLang's ``--scheduler-recv-interval``: new requests are
  read every N decode iterations (``scheduler_recv_hold``);
* ``efficiency.batch_wait_iterations`` — TensorRT-LLM's ``batch_wait_timeout_iters``:
  new prompts wait for more before their prefill (``batch_wait_hold``).

Neither is in ``ttft`` (one request alone, which no engine holds); the accuracy ledger's
closed loops add them to every request that arrives while others run.
"""

from __future__ import annotations

from sympy import Piecewise

from infermodel.plugin import S

__all__ = ["BATCH_WAIT", "ENGINE_OF_FIELD", "RECV", "check_holds", "scheduler_holds"]


#: The engine whose setting each field is, its name there, and the value that holds
#: nothing (every engine's default).
ENGINE_OF_FIELD = {"recv_interval": ("sglang", "SGLang's --scheduler-recv-interval", 1),
                   "batch_wait_iterations": ("trtllm", "TensorRT-LLM's batch_wait_timeout_iters",
                                             0)}


def scheduler_holds(scenario, define) -> None:
    """Define the holds whose settings the scenario states (see the module docstring)."""
    _recv_hold(scenario, define)
    _batch_wait_hold(scenario, define)


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


def check_holds(result, warn) -> None:
    """Warn where a hold's setting is stated for an engine that has no such setting."""
    engine = result.scenario.value("efficiency.engine")
    for field, (owner, name, idle) in ENGINE_OF_FIELD.items():
        value = result.scenario.value(f"efficiency.{field}")
        if value is not None and value != idle and engine != owner:
            warn(field, f"efficiency.{field} = {value:g} is {name}; the scenario's engine is "
                        f"{engine!r}, whose scheduler has no such setting: the hold "
                        "(scheduler_recv_hold, batch_wait_hold) is priced as that engine would "
                        "hold requests")


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
    define("batch_wait_arrivals", S.batch * S.decode_step_time / S.e2e_latency, unit="1",
           description="new requests arriving per decode iteration in a steady state of "
                       "batch sequences running (Little's law: batch / e2e_latency, times the step)",
           reference=BATCH_WAIT)
    t, rate = S.batch_wait_iterations, S.batch_wait_arrivals
    define("batch_wait_hold",
           Piecewise((S.decode_step_time * t * (1 + rate * t / 2) / (1 + rate * t), S.batch > 1),
                     (0, True)),
           unit="s",
           description="mean time a prompt that arrives while the batch decodes waits for more "
                       "prompts before its prefill (none for a request alone)",
           reference=BATCH_WAIT)
