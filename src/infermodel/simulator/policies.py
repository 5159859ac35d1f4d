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

``reserve`` and ``paged`` prefill whole prompts.  Without ``max_tokens`` (Lab 3's rule)
an iteration takes every admitted prompt at once; with it, an iteration carries at most
that many tokens, as an engine that does not chunk prompts bounds its batches
(TensorRT-LLM's ``max_num_tokens``, vLLM's ``max_num_batched_tokens`` without chunked
prefill): each decode takes one token of it, then the waiting prompts in running order
while each fits whole in what is left; the first that does not waits for a later
iteration, and so do the prompts behind it.  A prompt longer than the whole budget runs
when nothing else does (an engine would refuse it; ``simulate`` warns).

Every continuous policy runs a prompt's prefill in the iteration that carries the
running decodes (``mixed_batches``, vLLM V1's and TensorRT-LLM's in-flight batching).
With ``mixed_batches=False`` an iteration that prefills carries no decode: while any
admitted prompt is still to be prefilled, the iterations take only prompts (under the
policy's budget) and the running sequences wait for their next token, as SGLang's
scheduler does without ``enable_mixed_chunk``.

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

__all__ = [
    "GOODPUT_ITL_RULES",
    "POLICY_KINDS",
    "SLO",
    "SLO_METRICS",
    "SLO_RULES",
    "WHOLE_PROMPT_KINDS",
    "Policy",
    "percentile_key",
    "policy",
]

POLICY_KINDS = ("static", "reserve", "paged", "chunked")
#: Continuous policies that prefill a prompt in one piece (``max_tokens`` bounds them).
WHOLE_PROMPT_KINDS = ("reserve", "paged")
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
    :param max_tokens: token budget per iteration of the reserve and paged policies,
        whose prompts are prefilled whole (None: no budget, Lab 3's rule).
    :param mixed_batches: continuous policies: whether an iteration that prefills also
        carries the running decodes (True, Lab 3's rule) or prompts alone (False).
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
    max_tokens: int | None = attrs.field(default=None)
    mixed_batches: bool = attrs.field(default=True)
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

    @max_tokens.validator
    def _max_tokens(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is None:
            return
        _positive_int(self, attribute, value)
        if self.kind not in WHOLE_PROMPT_KINDS:
            raise SimulationError(
                f"policy max_tokens bounds the iterations of a policy that prefills whole "
                f"prompts ({' or '.join(WHOLE_PROMPT_KINDS)}), not {self.kind}"
                + ("; the chunked policy's budget is chunk_tokens" if self.kind == "chunked" else ""))

    @mixed_batches.validator
    def _mixed(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        if not isinstance(value, bool):
            raise SimulationError(f"policy mixed_batches must be true or false, got {value!r}")
        if not value and self.kind == "static":
            raise SimulationError("policy mixed_batches belongs to the continuous policies "
                                  "(reserve, paged, chunked): a static batch prefills every "
                                  "prompt before it decodes")

    @property
    def token_budget(self) -> float:
        """Tokens one iteration may carry: the chunked policy's ``chunk_tokens``, the
        whole-prompt policies' ``max_tokens``, else no bound.

        >>> Policy("reserve", max_tokens=8192).token_budget, Policy("paged").token_budget
        (8192, inf)
        """
        if self.kind == "chunked":
            return self.chunk_tokens
        return self.max_tokens if self.max_tokens is not None else math.inf

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


#: The latency metrics an objective can bound (each judged at a percentile of its samples).
SLO_METRICS = ("ttft", "itl", "tpot", "e2e")
#: Per-request rules for the inter-token objective in goodput: every gap of the request
#: within the objective (Module 10's maximum-gap rule), or its mean gap, TPOT (the rule of
#: vLLM's benchmark goodput, ``--goodput tpot:MS``, whose per-request keys are ttft, tpot
#: and e2el).
GOODPUT_ITL_RULES = ("max_gap", "tpot")
#: How a run is judged against the objectives: its percentiles alone (Module 10 Lab 3's
#: capacity rule), or its percentiles and its goodput share (``"joint"``).
SLO_RULES = ("percentiles", "joint")


def percentile_key(percentile: float) -> str:
    """The metric suffix of a percentile: ``p95``, ``p99``, ``p99_9`` (no dot, so that the
    name is an identifier a search formula may use).

    >>> percentile_key(95), percentile_key(99.9), percentile_key(50.0)
    ('p95', 'p99_9', 'p50')
    """
    text = f"{float(percentile):.6f}".rstrip("0").rstrip(".")
    return "p" + text.replace(".", "_")


def _latency(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    # math.inf: no objective on this metric
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or value <= 0:
        raise SimulationError(f"{attribute.name} must be a positive time in seconds, got {value!r}")


def _percentile(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 100:
        raise SimulationError(f"{attribute.name} must be a percentile in (0, 100), got {value!r}")


def _one_of(choices: tuple[str, ...]):
    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value not in choices:
            raise SimulationError(f"{attribute.name} must be one of {', '.join(choices)}, "
                                  f"got {value!r}")
    return check


@attrs.frozen
class SLO:
    """Latency objectives, in seconds, each at a percentile of its samples.

    Two rules use them, as in Module 10 (its "Keep raw samples" and Lab 3's capacity
    search):

    * **goodput** counts the requests that meet every objective themselves: TTFT ≤
      ``ttft``, every inter-token gap ≤ ``itl`` (``goodput_itl="max_gap"``, the default) or
      their mean gap ≤ ``itl`` (``"tpot"``), TPOT ≤ ``tpot`` and E2E ≤ ``e2e``;
    * **a run meets the objectives** when each pooled percentile is within its objective
      (``ttft_p99 <= ttft``, ...) and, with ``rule="joint"``, when the goodput share
      reaches the lowest of the percentiles' shares (p95 objectives: 95 % of requests
      meeting every objective).  ``rule="percentiles"`` (the default, Lab 3's capacity
      rule) judges the percentiles alone: a percentile pass is not a per-user bound.

    An objective of ``math.inf`` is no objective (TPOT and E2E have none by default).

    >>> SLO().ttft, SLO().itl
    (3.0, 0.1)
    >>> SLO(ttft=1.0, itl=0.05, ttft_percentile=95, itl_percentile=95).targets()
    (('ttft', 95, 1.0), ('itl', 95, 0.05))
    """

    ttft: float = attrs.field(default=3.0, validator=_latency)
    itl: float = attrs.field(default=0.1, validator=_latency)
    ttft_percentile: float = attrs.field(default=99, validator=_percentile)
    itl_percentile: float = attrs.field(default=99, validator=_percentile)
    tpot: float = attrs.field(default=math.inf, validator=_latency)
    tpot_percentile: float = attrs.field(default=99, validator=_percentile)
    e2e: float = attrs.field(default=math.inf, validator=_latency)
    e2e_percentile: float = attrs.field(default=99, validator=_percentile)
    goodput_itl: str = attrs.field(default="max_gap", validator=_one_of(GOODPUT_ITL_RULES))
    rule: str = attrs.field(default="percentiles", validator=_one_of(SLO_RULES))

    def targets(self) -> tuple[tuple[str, float, float], ...]:
        """``(metric, percentile, objective)`` of every finite objective."""
        out = []
        for metric in SLO_METRICS:
            limit = getattr(self, metric)
            if math.isfinite(limit):
                out.append((metric, getattr(self, f"{metric}_percentile"), limit))
        return tuple(out)

    def names(self) -> tuple[str, ...]:
        """The metric name of each objective's percentile (``ttft_p95``, ...)."""
        return tuple(f"{m}_{percentile_key(q)}" for m, q, _ in self.targets())

    @property
    def share(self) -> float:
        """Share of requests goodput must reach under the joint rule: the lowest
        objective percentile over 100 (0.95 for p95 objectives).
        """
        shares = [q / 100 for _, q, _ in self.targets()]
        return min(shares) if shares else 0.0

    def request_meets(self, ttft, max_gap, tpot, e2e):
        """Per request, whether it meets every objective itself (numpy arrays; a request
        with one token has no gap and a TPOT of 0).
        """
        gap = max_gap if self.goodput_itl == "max_gap" else tpot
        return (ttft <= self.ttft) & (gap <= self.itl) & (tpot <= self.tpot) & (e2e <= self.e2e)

    def percentiles_hold(self, metrics: Mapping[str, float]) -> bool:
        """Whether every objective's pooled percentile is within it."""
        return all(metrics[name] <= limit
                   for name, (_, _, limit) in zip(self.names(), self.targets()))

    def passes(self, metrics: Mapping[str, float]) -> bool:
        """Whether a run meets the objectives: its percentiles, and with the joint rule
        its goodput share (``goodput_fraction`` ≥ :attr:`share`).

        >>> SLO().passes({"ttft_p99": 2.9, "itl_p99": 0.06})
        True
        >>> SLO(rule="joint").passes({"ttft_p99": 2.9, "itl_p99": 0.06, "goodput_fraction": 0.5})
        False
        """
        held = self.percentiles_hold(metrics)
        if self.rule == "joint":
            held = held and metrics["goodput_fraction"] >= self.share
        return bool(held)

    def describe(self) -> str:
        """The objectives in words: ``p95 TTFT <= 1 s, p95 ITL <= 50 ms; goodput >= 95 %``."""
        parts = []
        for metric, q, limit in self.targets():
            shown = f"{limit:g} s" if limit >= 1 else f"{limit * 1000:g} ms"
            parts.append(f"{percentile_key(q)} {metric.upper()} <= {shown}")
        text = ", ".join(parts)
        if self.rule == "joint":
            rule = "every gap" if self.goodput_itl == "max_gap" else "its TPOT"
            text += (f"; and >= {self.share:.4g} of requests meeting every objective "
                     f"(ITL judged on {rule})")
        return text

    def to_dict(self) -> dict[str, Any]:
        """The objectives as JSON-ready data (seconds; ``null`` for no objective)."""
        out: dict[str, Any] = {}
        for metric in SLO_METRICS:
            limit = getattr(self, metric)
            out[metric] = limit if math.isfinite(limit) else None
            out[f"{metric}_percentile"] = getattr(self, f"{metric}_percentile")
        out["goodput_itl"] = self.goodput_itl
        out["rule"] = self.rule
        out["share"] = self.share if self.rule == "joint" else None
        return out
