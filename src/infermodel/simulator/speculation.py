"""Speculative decoding in the simulator: verification steps and accepted tokens.

With speculation on, every iteration in which a running sequence decodes is a
*verification step* for it: a draft model proposes ``k`` tokens in ``k`` sequential
draft steps, and the target scores the sequence's last token and the ``k`` proposals,
``k + 1`` positions, in one pass.  Each proposal is accepted independently with
probability α and the step keeps the leading accepted proposals plus the target's own
next token, so a step emits ``L + 1`` tokens where ``L = min(k, G)`` and ``G`` counts
the successes before the first failure (P(L = j) = α^j(1 − α) for j < k, P(L = k) = α^k),
with mean E = (1 − α^(k+1))/(1 − α) — the independent-acceptance law of Module 10:
Inference and serving, "Derive the speed-up rather than naming an acceptance rate", and
the Inference lab, "Guess ahead, check in one pass".  The cache grows by the tokens
kept (the request's last token and the accepted proposals).  A step never emits more
tokens than the request still has to produce.

The time of an iteration with verifying sequences at cached positions ``c_i`` and
prefill chunks is the target's pass plus the draft's ``k`` steps (:meth:`step_time`):

* target, roofline (no measured ``verify_cost``): each verifying sequence is a chunk of
  ``k + 1`` new positions over its ``c_i`` cached ones, priced by
  :meth:`CostModel.iteration_time` with the prefill chunks; where the head scores one
  position per sequence (``prefill_logits = "last"``) it scores all ``k + 1`` of a
  verification, whose every position needs its logits;
* target, measured ratio ``v``: the plain iteration (one position per decoding
  sequence) plus ``(v − 1)`` times the plain decode step of the decoding sequences;
* draft, a model (weights, matrix parameters, cache per token, layers, query width):
  ``k`` roofline steps over the decoding sequences, step ``j`` with every sequence at
  ``c_i + j`` cached positions: max(bytes/bandwidth, FLOPs/compute) + t0;
* draft, a measured ratio ``c``: ``k·c`` times the plain decode step of the decoding
  sequences.

Draws are per request and reproducible: request ``r`` of a workload drawn with seed
``s`` takes its step counts from ``numpy.random.default_rng([s, r, SALT])``, in the
order of its verification steps, so both engines, every deployment and every rate see
the same acceptance outcomes for the same request.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from .errors import SimulationError

if TYPE_CHECKING:
    from .cost import CostModel

__all__ = ["SPECULATION_QUANTITIES", "Acceptance", "Draft", "Speculation"]

#: Scenario quantities read by :meth:`Speculation.from_quantities` (the speculative
#: lever's names; the simulator prices speculation only when ``spec_k`` and
#: ``spec_acceptance`` are present and ``spec_k`` ≥ 1).
SPECULATION_QUANTITIES = (
    "spec_k",                         # draft tokens proposed per verification step
    "spec_acceptance",                # α, probability a proposal is accepted
    "spec_draft_cost",                # c, a draft step in plain target decode steps
    "spec_draft_weight_bytes",        # draft roofline: bytes of draft weights
    "spec_draft_params_matmul",       # ... parameters in matrix products
    "spec_draft_params",              # ... (when only a parameter count is known)
    "spec_draft_kv_bytes_per_token",  # ... draft cache per position
    "spec_draft_layers",              # ... layers (attention FLOPs)
    "spec_draft_query_width",         # ... heads · head_dim
    "spec_verify_cost_given",         # v, a measured verification pass in target steps
)

#: Mixed into every request's seed so speculation draws are their own stream.
SALT = 0x5BEC


@attrs.frozen
class Draft:
    """The roofline of one draft decode step (weights once, each sequence's draft cache,
    matrix and attention FLOPs); ``kv_bytes_per_token``, ``layers`` and ``query_width``
    are 0 when only the draft's parameter count is known.
    """

    weight_bytes: float
    params_matmul: float
    kv_bytes_per_token: float = 0.0
    layers: float = 0.0
    query_width: float = 0.0


def _probability(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise SimulationError(f"speculation: {attribute.name} must be in [0, 1], got {value!r}")


def _draft_length(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= value <= 64:
        raise SimulationError(f"speculation: k must be a whole number in 1–64, got {value!r}")


def _positive_or_none(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                              or not 0 < value < math.inf):
        raise SimulationError(f"speculation: {attribute.name} must be a positive number, got {value!r}")


@attrs.frozen
class Speculation:
    """Speculative decoding as the simulator prices and draws it (see the module text).

    :param k: draft tokens proposed per verification step.
    :param acceptance: α, the probability that a proposal is accepted.
    :param draft: the draft model's roofline, or ``None`` with ``draft_cost``.
    :param draft_cost: c, a draft step as a share of the plain target decode step.
    :param verify_cost: v, a measured verification pass in plain target decode steps;
        ``None`` prices the ``k + 1`` positions per sequence on the roofline.

    >>> spec = Speculation(4, 0.8, draft_cost=0.1)
    >>> round(spec.expected_tokens, 4)
    3.3616
    """

    k: int = attrs.field(validator=_draft_length)
    acceptance: float = attrs.field(validator=_probability)
    draft: Draft | None = None
    draft_cost: float | None = attrs.field(default=None, validator=_positive_or_none)
    verify_cost: float | None = attrs.field(default=None, validator=_positive_or_none)

    def __attrs_post_init__(self) -> None:
        if (self.draft is None) == (self.draft_cost is None):
            raise SimulationError("speculation: give the draft as a model (draft) or as a cost "
                                  "ratio (draft_cost), exactly one")

    @property
    def width(self) -> int:
        """Positions a verifying sequence scores per step: k + 1."""
        return self.k + 1

    @property
    def expected_tokens(self) -> float:
        """E = (1 − α^(k+1))/(1 − α) tokens per step; k + 1 at α = 1."""
        a = self.acceptance
        return float(self.k + 1) if a == 1 else (1 - a ** (self.k + 1)) / (1 - a)

    # ------------------------------------------------------------------ draws
    def draws(self, seed: int | None, request: int, count: int) -> np.ndarray:
        """Tokens emitted by request ``request``'s first ``count`` verification steps."""
        if self.acceptance >= 1:
            return np.full(count, self.k + 1, dtype=np.int64)
        rng = np.random.default_rng([int(seed or 0) & 0xFFFFFFFF, int(request), SALT])
        leading = rng.geometric(1.0 - self.acceptance, size=count) - 1
        return np.minimum(leading, self.k) + 1

    # ------------------------------------------------------------------ cost
    def step_time(self, cost: CostModel, contexts: Sequence[int],
                  chunks: Sequence[tuple[int, int]] = ()) -> float:
        """Time of an iteration whose decoding sequences verify at ``contexts`` cached
        positions, with prefill ``chunks`` of ``(new, cached)`` tokens (both engines
        call this with the same integers, so their times are the same floats).
        """
        if not contexts:
            return cost.iteration_time([], chunks)
        if self.verify_cost is None:
            # the head scores all k + 1 positions of a verification, one of a prompt chunk
            width = self.width
            target = cost.iteration_time([], [*((width, c) for c in contexts), *chunks],
                                         scored=width * len(contexts) + len(chunks))
        else:
            target = (cost.iteration_time(contexts, chunks)
                      + (self.verify_cost - 1) * cost.iteration_time(contexts))
        return target + self.draft_time(cost, contexts)

    def draft_time(self, cost: CostModel, contexts: Sequence[int]) -> float:
        """The draft's k sequential steps over the decoding sequences."""
        d, n = self.draft, len(contexts)
        if d is None:
            if self.draft_cost is None:  # excluded by __attrs_post_init__
                raise SimulationError("speculation: the draft needs a model or a cost ratio")
            return self.k * self.draft_cost * cost.iteration_time(contexts)
        cached = sum(int(c) for c in contexts)
        total = 0.0
        for j in range(self.k):
            step_cached = cached + n * j
            memory = (d.weight_bytes + d.kv_bytes_per_token * step_cached) / cost.bandwidth
            flops = 2.0 * d.params_matmul * n + 4.0 * d.layers * d.query_width * (step_cached + n)
            total += max(memory, flops / cost.compute) + cost.overhead
        return total

    # ------------------------------------------------------------------ text
    def describe(self) -> str:
        """One line for the derivation printed with a simulation."""
        if self.verify_cost is None:
            verify = f"target scores k + 1 = {self.width} positions per decoding sequence (roofline)"
        else:
            verify = f"target pass = plain step + {self.verify_cost - 1:.4g} × plain decode step (measured v)"
        if self.draft is None:
            draft = f"draft {self.k} × {self.draft_cost:.4g} × plain decode step (measured c)"
        else:
            draft = (f"draft {self.k} roofline steps ({self.draft.weight_bytes / 1e9:.4g} GB of "
                     "weights" + (", its own cache" if self.draft.kv_bytes_per_token else "") + ")")
        return (f"speculative decoding: every decode is a verification step, k = {self.k}, "
                f"α = {self.acceptance:.4g}, 1 + min(k, leading acceptances) tokens per step "
                f"(mean {self.expected_tokens:.4g}, seeded per request); {verify}; {draft}")

    def unmodelled(self, cost: CostModel) -> list[str]:
        """What the simulated speculation leaves out, each with its size."""
        notes = [
            f"speculative decoding: the up to k = {self.k} rejected proposals a verifying "
            f"sequence writes into the cache during its step are not reserved ({self.k} "
            f"positions, {self.k * cost.kv_bytes_per_token / 1e6:.3g} MB, per running sequence; "
            f"{self.k * cost.kv_bytes_per_token / cost.cache_memory:.2%} of the cache each)"]
        if self.draft is not None:
            share = self.draft.params_matmul / cost.params_matmul
            notes.append(f"speculative decoding: the draft model's prefill of every prompt is not "
                         f"priced (about {share:.1%} of the target's prefill FLOPs)")
        else:
            notes.append(f"speculative decoding: the draft model's prefill of every prompt is not "
                         f"priced (about c = {self.draft_cost:.3g} of the target's prefill if it "
                         "costs the same share as a draft step)")
        return notes

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_quantities(cls, values: Mapping[str, float],
                        number: Callable[[str], float]) -> Speculation | None:
        """The speculation the scenario's quantities describe (``None`` without ``spec_k``
        and ``spec_acceptance``, or with k = 0); ``number`` reads one as a float.
        """
        if "spec_k" not in values or "spec_acceptance" not in values:
            return None
        k = round(number("spec_k"))
        if k < 1:
            return None
        draft = None
        draft_cost = None
        if "spec_draft_weight_bytes" in values:
            matmul = "spec_draft_params_matmul" if "spec_draft_params_matmul" in values \
                else "spec_draft_params"
            extra = {field: number(name) for field, name in (
                ("kv_bytes_per_token", "spec_draft_kv_bytes_per_token"),
                ("layers", "spec_draft_layers"), ("query_width", "spec_draft_query_width"))
                if name in values}
            draft = Draft(number("spec_draft_weight_bytes"), number(matmul), **extra)
        elif "spec_draft_cost" in values:
            draft_cost = number("spec_draft_cost")
        else:
            raise SimulationError("speculation needs the draft's cost: spec_draft_cost or "
                                  "spec_draft_weight_bytes")
        verify = number("spec_verify_cost_given") if "spec_verify_cost_given" in values else None
        return cls(k, min(1.0, max(0.0, number("spec_acceptance"))), draft, draft_cost, verify)


class Acceptance:
    """Per-request draw streams for one run: the tokens of each verification step."""

    def __init__(self, speculation: Speculation, seed: int | None, outputs: Sequence[int]):
        self.speculation = speculation
        self.seed = seed
        self.outputs = outputs
        self.steps = [0] * len(outputs)  # verification steps each request has taken
        self._draws: dict[int, np.ndarray] = {}

    def tokens(self, request: int, remaining: int) -> int:
        """Tokens request ``request``'s next verification step emits (at most ``remaining``)."""
        draws = self._draws.get(request)
        if draws is None:
            # Each step emits at least one token, so a request takes at most
            # outputs − 1 verification steps.
            draws = self.speculation.draws(self.seed, request, max(1, int(self.outputs[request])))
            self._draws[request] = draws
        return min(int(draws[self.steps[request]]), remaining)

    def taken(self, request: int, done: bool) -> None:
        """Record that the request took its step (``done``: it has all its tokens)."""
        self.steps[request] += 1
        if done:
            self._draws.pop(request, None)
