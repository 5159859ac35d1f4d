"""Expert parallelism and data-parallel attention in the iteration cost: the busiest card.

A deployment with D data-parallel attention ranks and X expert ranks runs each iteration
as one step of every card; the step waits for the busiest. The iteration cost of
:class:`~infermodel.simulator.cost.CostModel` stays that of the combined device, and
:class:`ParallelLayout` adds what the busiest card does beyond the mean:

* every DP rank reads its own copy of the replicated weights (``replica_bytes`` more
  per iteration);
* the largest DP rank holds ⌈n/D⌉ of the iteration's n scheduled sequences (engines
  balance requests across ranks by count), times a stated ``attention_imbalance``:
  f_dp = ⌈n/D⌉·D/n · imbalance multiplies the cache reads, the attention FLOPs, the
  weights the ranks multiply for their own tokens (``local_params``) and the attention
  all-reduce time;
* the busiest expert rank takes f_ep times the mean of the t tokens' routed work
  (stated, or the expected maximum over X ranks under uniform routing, the
  parallelism lever's formula)::

      f_ep(t) = min(X·min(k, ⌈E/X⌉)/k,  ρ·(1 + √(2·ln X·(X − 1)(E − k)/((E − 1)·k·t))))

  which multiplies the routed experts' FLOPs (``routed_params``), their weight reads
  (the cost model's expert coverage under uniform routing, ``routed_read_bytes``
  otherwise) and the dispatch and combine time.

The scenario's quantities that carry it are :data:`LAYOUT_QUANTITIES` (the parallelism
lever's names). The KV cache is one pool of the scenario's budget: a real DP rank holds
whole sequences, so up to D − 1 full-length sequences fewer fit (the lever's
``max_sequences`` rounds the pooled count down to a multiple of D); the unmodelled note
says so.

References: vLLM docs, "Expert Parallel Deployment" and "Data Parallel Deployment";
SGLang docs, "Understanding TP, DP, and DP-Attention"; DeepSeek-V3 technical report
(arXiv:2412.19437) §3.4.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import numpy as np

from .errors import SimulationError

__all__ = ["LAYOUT_QUANTITIES", "ParallelLayout", "expert_imbalance"]

#: Scenario quantities read by :meth:`ParallelLayout.from_quantities` (the parallelism
#: lever defines them for a layout with ``attention_data > 1`` or ``expert > 1``).
LAYOUT_QUANTITIES = (
    "attention_data_ranks",           # D, data-parallel attention ranks
    "attention_rank_imbalance",       # stated factor on the largest rank beyond rounding
    "attention_local_params",         # weights a DP rank multiplies for its own tokens
    "replicated_weight_reads",        # B the other ranks read of their own copies
    "expert_ranks",                   # X, expert-parallel ranks
    "expert_rank_share",              # ρ, the fullest rank's experts over the mean
    "routed_params_active",           # routed-expert weights one token multiplies
    "expert_imbalance_given",         # a measured busiest/mean expert load (else uniform)
    "routed_read_bytes",              # routed bytes read per step when routing ignores tokens
    "comm_time_per_token_attention",  # s per token of the attention all-reduce, even ranks
    "comm_time_per_token_expert",     # s per token of dispatch and combine, even ranks
)


def expert_imbalance(tokens: np.ndarray | float, ranks: float, experts: float, active: float,
                     share: float = 1.0) -> np.ndarray:
    """f_ep(t), the busiest of ``ranks`` expert ranks over the mean under uniform routing.

    >>> round(float(expert_imbalance(16, 8, 256, 8)), 4)
    1.4703
    """
    t = np.maximum(np.asarray(tokens, dtype=np.float64), 1.0)
    per_rank = math.ceil(experts / ranks)
    cap = ranks * min(active, per_rank) / active
    spread = 2 * math.log(ranks) * (ranks - 1) * (experts - active) / ((experts - 1) * active)
    return np.minimum(cap, share * (1 + np.sqrt(spread / t)))


def _whole(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise SimulationError(f"layout: {attribute.name} must be a whole number ≥ 1, got {value!r}")


def _non_negative(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not 0 <= value < math.inf):
        raise SimulationError(f"layout: {attribute.name} must be a non-negative number, got {value!r}")


def _factor(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 1 <= value < math.inf:
        raise SimulationError(f"layout: {attribute.name} must be a number ≥ 1, got {value!r}")


@attrs.frozen
class ParallelLayout:
    """The busiest card of a data-parallel-attention and expert-parallel deployment.

    >>> lay = ParallelLayout(data_ranks=8, expert_ranks=8, experts=256, active_experts=8)
    >>> [round(float(x), 3) for x in lay.attention_factor(np.array([8.0, 9.0, 1.0]))]
    [1.0, 1.778, 8.0]
    """

    data_ranks: int = attrs.field(default=1, validator=_whole)
    attention_imbalance: float = attrs.field(default=1.0, validator=_factor)
    local_params: float = attrs.field(default=0.0, validator=_non_negative)
    replica_bytes: float = attrs.field(default=0.0, validator=_non_negative)
    expert_ranks: int = attrs.field(default=1, validator=_whole)
    rank_share: float = attrs.field(default=1.0, validator=_factor)
    routed_params: float = attrs.field(default=0.0, validator=_non_negative)
    experts: float = attrs.field(default=1.0, validator=_factor)
    active_experts: float = attrs.field(default=1.0, validator=_factor)
    expert_imbalance_given: float | None = attrs.field(default=None, validator=_factor)
    #: Routed-expert bytes every step reads (routing "all" or "active"); 0: the cost
    #: model's expert coverage (uniform routing) gives them.
    routed_read_bytes: float = attrs.field(default=0.0, validator=_non_negative)
    comm_attention: float = attrs.field(default=0.0, validator=_non_negative)
    comm_expert: float = attrs.field(default=0.0, validator=_non_negative)

    @classmethod
    def from_quantities(cls, values: Mapping[str, Any],
                        number: Callable[[str], float]) -> ParallelLayout | None:
        """The layout from the lever's quantities, or None without one."""
        if "attention_data_ranks" not in values:
            return None
        fields: dict[str, Any] = {"data_ranks": round(number("attention_data_ranks"))}
        for name, field in (("attention_rank_imbalance", "attention_imbalance"),
                            ("attention_local_params", "local_params"),
                            ("replicated_weight_reads", "replica_bytes"),
                            ("comm_time_per_token_attention", "comm_attention"),
                            ("comm_time_per_token_expert", "comm_expert")):
            if name in values:
                fields[field] = number(name)
        if "expert_ranks" in values and round(number("expert_ranks")) > 1:
            fields.update(expert_ranks=round(number("expert_ranks")),
                          rank_share=number("expert_rank_share"),
                          routed_params=number("routed_params_active"),
                          experts=number("experts"), active_experts=number("active_experts"))
            if "expert_imbalance_given" in values:
                fields["expert_imbalance_given"] = number("expert_imbalance_given")
            if "routed_read_bytes" in values:
                fields["routed_read_bytes"] = number("routed_read_bytes")
        return cls(**fields)

    def attention_factor(self, sequences: np.ndarray) -> np.ndarray:
        """f_dp: the largest DP rank's share of the sequences times D (1 for no sequence)."""
        n = np.maximum(np.asarray(sequences, dtype=np.float64), 1.0)
        d = float(self.data_ranks)
        return np.ceil(n / d) * d / n * self.attention_imbalance

    def expert_factor(self, tokens: np.ndarray) -> np.ndarray:
        """f_ep: the busiest expert rank's load over the mean (1 without expert ranks)."""
        t = np.asarray(tokens, dtype=np.float64)
        if self.expert_ranks == 1:
            return np.ones_like(t)
        if self.expert_imbalance_given is not None:
            return np.full_like(t, self.expert_imbalance_given)
        return expert_imbalance(t, self.expert_ranks, self.experts, self.active_experts,
                                self.rank_share)

    def describe(self) -> str:
        parts = []
        if self.data_ranks > 1:
            parts.append(f"{self.data_ranks} DP attention ranks: the largest holds ⌈n/"
                         f"{self.data_ranks}⌉ of n sequences (cache, attention and "
                         f"{self.local_params:.4g} DP-local weights scaled by it); the other "
                         f"ranks read {self.replica_bytes / 1e9:.4g} GB more weights")
        if self.expert_ranks > 1:
            how = (f"stated {self.expert_imbalance_given:g}" if self.expert_imbalance_given
                   is not None else "the expected maximum under uniform routing")
            parts.append(f"{self.expert_ranks} expert ranks: the busiest takes f_ep times the mean "
                         f"routed work ({how})")
        return "layout: " + "; ".join(parts)

    def unmodelled(self) -> list[str]:
        if self.data_ranks == 1:
            return []
        return [f"the KV cache is one pool of the scenario's budget across the "
                f"{self.data_ranks} DP attention ranks: a real rank holds whole sequences, so up "
                f"to {self.data_ranks - 1} full-length sequences fewer fit than the simulator "
                "admits"]
