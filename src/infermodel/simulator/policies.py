"""Scheduling policies and service objectives.

Four policies follow the rules of Module 10: Inference and serving, Lab 3:

``static``
    Dispatch a batch of up to ``batch_size`` requests (FIFO) when that many wait or
    when the oldest has waited ``timeout`` seconds.  The batch prefills every prompt in
    one iteration (first tokens at its end), then decodes until its longest output is
    done; finished requests keep their slot (their cache keeps growing, and is read
    every iteration) until then.  Cache memory is not checked unless
    ``static_memory_check`` is set (Lab 3 leaves it unchecked, which favours static
    batching); when set, a batch takes the longest FIFO prefix whose full-length
    reservations (prompt + longest possible output) fit ``admit_fraction`` of the cache.
``reserve``
    Continuous (iteration-level) batching; a request is admitted (FIFO, at most
    ``max_running`` running) only if its full-length reservation, prompt + longest
    possible output, fits beside the others' within ``admit_fraction`` of the cache.
``paged``
    Continuous batching with on-demand admission: a request is admitted when its
    prompt (plus any tokens it already generated) fits beside the positions currently
    cached.  Before each iteration, if the cache would overflow, the newest running
    request is evicted and later re-prefills its prompt and generated tokens
    (preemption by recompute); its earlier token timestamps are kept.
``chunked``
    ``paged`` plus a per-iteration token budget (``chunk_tokens``, default 256) shared
    in running order: each decode takes one token of it, a prefill takes what is left.

In every continuous policy a decode is a one-token chunk over its cached positions;
the first token comes at the end of the prefill and every later token at the end of
its iteration.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs

from .errors import SimulationError

__all__ = ["POLICY_KINDS", "SLO", "Policy", "policy"]

POLICY_KINDS = ("static", "reserve", "paged", "chunked")
#: How an evicted request's cache is handled: discarded and recomputed later, or
#: copied to host memory and back (each copy at ``swap_bandwidth``).
PREEMPTIONS = ("recompute", "swap")


def _positive_int(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SimulationError(f"policy {attribute.name} must be a whole number ≥ 1, got {value!r}")


def _positive_float(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise SimulationError(f"{attribute.name} must be a positive finite number, got {value!r}")


def _non_negative_float(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise SimulationError(f"policy {attribute.name} must be a non-negative finite number, got {value!r}")


@attrs.frozen
class Policy:
    """One scheduling policy with its limits (defaults are Lab 3's).

    :param kind: ``"static"``, ``"reserve"``, ``"paged"`` or ``"chunked"``.
    :param batch_size: static batch size (16).
    :param timeout: static dispatch timeout in seconds for the oldest waiting request (2).
    :param max_running: most sequences running at once in continuous policies (256).
    :param chunk_tokens: token budget per iteration of the chunked policy (256).
    :param admit_fraction: share of the cache memory admission may fill (0.99).
    :param reserve_output_tokens: output tokens a full-length reservation holds;
        ``None`` means the output law's maximum (4,000 in Lab 3).
    :param static_memory_check: make static batches memory-aware (off in Lab 3).
    :param preemption: ``"recompute"`` (Lab 3: an evicted request's cache is discarded
        and re-prefilled) or ``"swap"`` (copied to host memory and back, each way
        taking cached bytes / ``swap_bandwidth``, added to the time).
    :param swap_bandwidth: bytes/s of the host link, for ``preemption="swap"``.
    :param prefix_caching: keep cache blocks of shared prefixes (named prefixes, session
        histories) for later requests (:mod:`infermodel.simulator.prefixes`); on by
        default, as in serving engines.  Without any shared prefix it changes nothing.
    :param block_tokens: positions per cache block of the prefix cache (16).

    >>> Policy("chunked", chunk_tokens=512).name
    'chunked'
    """

    kind: str = attrs.field()
    batch_size: int = attrs.field(default=16, validator=_positive_int)
    timeout: float = attrs.field(default=2.0, validator=_non_negative_float)
    max_running: int = attrs.field(default=256, validator=_positive_int)
    chunk_tokens: int = attrs.field(default=256, validator=_positive_int)
    admit_fraction: float = attrs.field(default=0.99, validator=_positive_float)
    reserve_output_tokens: int | None = attrs.field(default=None)
    static_memory_check: bool = attrs.field(default=False)
    preemption: str = attrs.field(default="recompute")
    swap_bandwidth: float | None = attrs.field(default=None)
    prefix_caching: bool = attrs.field(default=True)
    block_tokens: int = attrs.field(default=16, validator=_positive_int)

    @prefix_caching.validator
    def _prefix_caching(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        if not isinstance(value, bool):
            raise SimulationError(f"policy prefix_caching must be true or false, got {value!r}")

    @preemption.validator
    def _preemption(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value not in PREEMPTIONS:
            raise SimulationError(f"policy preemption must be one of {', '.join(PREEMPTIONS)}, got {value!r}")

    @swap_bandwidth.validator
    def _swap(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is not None:
            _positive_float(self, attribute, value)
        if self.preemption == "swap" and value is None:
            raise SimulationError("swap preemption needs swap_bandwidth, the bytes/s of the link "
                                  "to host memory (e.g. 32e9 for PCIe Gen4 x16 one way)")

    @kind.validator
    def _kind(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value not in POLICY_KINDS:
            raise SimulationError(f"policy must be one of {', '.join(POLICY_KINDS)}, got {value!r}")

    @reserve_output_tokens.validator
    def _reserve(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is not None:
            _positive_int(self, attribute, value)

    @admit_fraction.validator
    def _fraction(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value > 1:
            raise SimulationError(f"policy admit_fraction must be in (0, 1], got {value!r}")

    @property
    def name(self) -> str:
        return self.kind

    @property
    def continuous(self) -> bool:
        return self.kind != "static"


def policy(value: Policy | str | Mapping[str, Any]) -> Policy:
    """A :class:`Policy` from a name, a mapping of its fields, or a policy.

    >>> policy("paged").kind
    'paged'
    >>> policy({"kind": "static", "batch_size": 8}).batch_size
    8
    """
    if isinstance(value, Policy):
        return value
    if isinstance(value, str):
        return Policy(value)
    if isinstance(value, Mapping):
        fields = {field.name for field in attrs.fields(Policy)}
        extra = sorted(set(value) - fields)
        if extra:
            raise SimulationError(f"unknown policy settings: {', '.join(extra)}")
        if "kind" not in value:
            raise SimulationError("a policy table needs 'kind'")
        return Policy(**value)
    raise SimulationError(f"a policy is a name or a table, got {value!r}")


@attrs.frozen
class SLO:
    """Latency objectives, in seconds.

    Two different rules use them, as in Module 10 (its "Keep raw samples" and Lab 3's
    capacity search):

    * **goodput** counts requests whose own TTFT ≤ ``ttft`` *and* whose every
      inter-token gap ≤ ``itl`` (a per-request maximum-gap rule), per second of run;
    * **capacity** passes a run when the pooled p99 of TTFT ≤ ``ttft`` and the pooled
      p99 of inter-token gaps ≤ ``itl``.  A percentile pass is not a per-user bound.

    >>> SLO().ttft, SLO().itl
    (3.0, 0.1)
    """

    ttft: float = attrs.field(default=3.0, validator=_positive_float)
    itl: float = attrs.field(default=0.1, validator=_positive_float)

    def passes(self, metrics: Mapping[str, float]) -> bool:
        """Whether a run's pooled p99 TTFT and p99 ITL meet the objectives (capacity rule).

        >>> SLO().passes({"ttft_p99": 2.9, "itl_p99": 0.06})
        True
        """
        return bool(metrics["ttft_p99"] <= self.ttft and metrics["itl_p99"] <= self.itl)
