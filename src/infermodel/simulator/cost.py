"""Iteration cost of one serving iteration: the roofline of the whole forward pass.

One iteration of a serving engine runs every scheduled position through the model
once.  The weights are read once for the whole iteration and each scheduled sequence
reads its own cached keys and values, so the time is the larger of the memory time
and the compute time of the *whole* iteration (Module 10: Inference and serving,
"A joining prompt can stall everybody" and Lab 3's cost model)::

    positions = Σ 1 (one per decode)      + Σ k            (new tokens per chunk)
    attention = Σ c (decode contexts)     + Σ (k·c + k(k+1)/2)
    cached    = Σ c (decode contexts)     + Σ c            (cached tokens per chunk)
    bytes     = W + kv · cached
    flops     = 2·N_matmul · positions + 4 · layers · d_q · attention
    time      = max(bytes / bandwidth, flops / compute) + overhead

A chunk ``(k, c)`` is ``k`` new prompt positions whose queries attend to the ``c``
cached positions and, causally, to each other (hence ``k(k+1)/2``).

Those are Lab 3's whole-model conventions (every weight byte read, the output head
applied to every position).  A scenario on the engine conventions prices two terms
more exactly (both optional fields, read by :meth:`CostModel.from_quantities`):

* ``efficiency.embedding_reads = "rows"``: an iteration reads one row of the untied
  input table per position, so ``W`` is replaced by
  ``W − row_bytes · (vocab − min(positions, vocab))``;
* ``efficiency.prefill_logits = "last"``: the head scores one position per scheduled
  sequence (a decode, or the last position of a prompt chunk, as engines compute the
  logits of every scheduled sequence's last position and discard a partial prompt's
  sample), so ``2·N_matmul · positions`` becomes
  ``2·(N_matmul − N_head) · positions + 2·N_head · sequences``.

A scenario on the physical efficiency model (``efficiency.model = "physical"``) prices an
iteration term by term instead (read from its quantities, see :data:`PHYSICAL_QUANTITIES`)::

    rows      = ⌈positions / tile⌉ · tile           (experts: ⌈T·k/E_read / tile⌉ · tile each)
    gpu       = max(W / BW, F_products(rows) / F_gemm) + max(kv · cached / BW, F_attn / F_attn_rate)
              + K · τ_kernel + all-reduces by size (one-shot below a limit, ring above)
    time      = gpu                      a decode-only batch up to graph_max_batch (graph replay)
              = max(gpu, K · τ_launch)   otherwise (the host launches every kernel)
              + τ_step + τ_seq · sequences

Every term is an integer count multiplied by a constant, so the vectorised form
:meth:`CostModel.iteration_times` gives bit-for-bit the same floats as the scalar
:meth:`CostModel.iteration_time` as long as the counts stay below 2**53.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import attrs
import numpy as np
import numpy.typing as npt

from .cost_inputs import (
    CONVENTION_QUANTITIES,
    EXTENSION_QUANTITIES,
    PHYSICAL_QUANTITIES,
    QUANTITY_NAMES,
    cost_fields,
)
from .errors import SimulationError
from .layout import ParallelLayout
from .physical import Collectives, Physical, one_iteration, products, step
from .speculation import Speculation

__all__ = ["CONVENTION_QUANTITIES", "EXTENSION_QUANTITIES", "PHYSICAL_QUANTITIES", "QUANTITY_NAMES",
           "Collectives", "CostModel", "MeasuredIteration", "Physical"]


class MeasuredIteration(Protocol):
    """A forward pass priced from measured kernels, for :attr:`CostModel.measured`.

    ``times`` receives float64 arrays of one shape (or numbers): the pass's tokens (all
    positions), its decodes and their cached positions (summed), its prefill chunks, their
    new tokens (summed) and their mean cached positions, and the positions the head
    scores; it returns the pass's time in seconds (collectives included; the cost model
    adds ``overhead``). ``describe`` gives the lines a simulation's derivation prints.
    """

    def times(self, tokens: Any, decodes: Any, decode_cached: Any, chunks: Any,
              chunk_tokens: Any, chunk_cached: Any, scored: Any) -> np.ndarray: ...

    def describe(self) -> Sequence[str]: ...


#: An attrs validator: (instance, attribute, value), raising on a bad value.
Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]


def _positive(name: str) -> Validator:
    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise SimulationError(f"cost model: {name} must be a number, got {value!r}")
        if not math.isfinite(value) or value <= 0:
            raise SimulationError(f"cost model: {name} must be a positive finite number, got {value!r}")

    return check


def _whole(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise SimulationError(f"cost model: {attribute.name} must be a whole number ≥ 1, got {value!r}")


def _fraction(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise SimulationError(f"cost model: {attribute.name} must be in [0, 1), got {value!r}")


def _positive_or_inf(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise SimulationError(f"cost model: {attribute.name} must be a positive number, got {value!r}")


def _at_least_one(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 1 <= value < math.inf:
        raise SimulationError(f"cost model: {attribute.name} must be a number ≥ 1, got {value!r}")


def _non_negative(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise SimulationError(f"cost model: {attribute.name} must be a number, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise SimulationError(
            f"cost model: {attribute.name} must be a non-negative finite number, got {value!r}"
        )


@attrs.frozen
class CostModel:
    """The cost of one serving iteration on one device (Module 10, Lab 3).

    :param weight_bytes: W, bytes of weights read once per iteration.
    :param kv_bytes_per_token: bytes of keys and values stored per cached position.
    :param params_matmul: N_matmul, parameters that take part in matrix products.
    :param layers: transformer layers.
    :param query_width: d_q = heads · head_dim (Lab 3 uses d_model).
    :param bandwidth: memory bandwidth in bytes/s.
    :param compute: effective FLOP/s (peak already multiplied by the MFU).
    :param cache_memory: bytes available to the KV cache (after weights and reserve).
    :param overhead: a fixed time added to every iteration (t0); 0 in Lab 3.
    :param embedding_row_bytes: bytes of one input-table row when an iteration reads
        rows, not the table (0: the whole of ``weight_bytes`` is read, as in Lab 3).
    :param embedding_rows: rows of that table (the vocabulary).
    :param head_params: N_head when the head scores one position per scheduled
        sequence (0: every position, as in Lab 3).

    Example, Lab 3's 24 GB card (16 GB left for the cache)::

        >>> lab = CostModel.lab3()
        >>> round(lab.iteration_time([], [(4000, 0)]), 3)      # prefill of 4,000 tokens
        0.923
        >>> round(1000 * lab.iteration_time([5000] * 18, []), 2)  # 18 decodes at 5,000
        18.77
    """

    weight_bytes: float = attrs.field(validator=_positive("weight_bytes"))
    kv_bytes_per_token: float = attrs.field(validator=_positive("kv_bytes_per_token"))
    params_matmul: float = attrs.field(validator=_positive("params_matmul"))
    layers: float = attrs.field(validator=_positive("layers"))
    query_width: float = attrs.field(validator=_positive("query_width"))
    bandwidth: float = attrs.field(validator=_positive("bandwidth"))
    compute: float = attrs.field(validator=_positive("compute"))
    cache_memory: float = attrs.field(validator=_positive("cache_memory"))
    overhead: float = attrs.field(default=0.0, validator=_non_negative)
    stages: int = attrs.field(default=1, validator=_whole)
    comm_fixed: float = attrs.field(default=0.0, validator=_non_negative)
    comm_per_token: float = attrs.field(default=0.0, validator=_non_negative)
    host_fraction: float = attrs.field(default=0.0, validator=_fraction)
    host_bandwidth: float = attrs.field(default=math.inf, validator=_positive_or_inf)
    host_overlap: bool = attrs.field(default=False)
    routed_expert_bytes: float = attrs.field(default=0.0, validator=_non_negative)
    experts: float = attrs.field(default=1.0, validator=_at_least_one)
    active_experts: float = attrs.field(default=1.0, validator=_at_least_one)
    embedding_row_bytes: float = attrs.field(default=0.0, validator=_non_negative)
    embedding_rows: float = attrs.field(default=0.0, validator=_non_negative)
    head_params: float = attrs.field(default=0.0, validator=_non_negative)
    #: Speculative decoding: decodes become verification steps (None: plain decoding).
    speculation: Speculation | None = attrs.field(default=None)
    #: The physical efficiency model's terms (None: the whole-iteration roofline).
    physical: Physical | None = attrs.field(default=None)
    #: All-reduces priced by size (None: none, or the linear comm terms above).
    collectives: Collectives | None = attrs.field(default=None)
    #: Expert parallelism and DP attention: the busiest card (None: one combined device).
    layout: ParallelLayout | None = attrs.field(default=None)
    #: Measured kernels (:class:`MeasuredIteration`): the forward pass priced from measured
    #: kernel tables at the iteration's own prefill and decode counts, in place of the
    #: roofline of the whole pass (None: the roofline).
    measured: Any = attrs.field(default=None)

    @property
    def simple(self) -> bool:
        """Whether this is Lab 3's single-device cost (no stages, communication, host
        cache share, expert coverage or engine conventions): the arithmetic then is
        exactly Lab 3's.
        """
        return (self.stages == 1 and not self.comm_fixed and not self.comm_per_token
                and not self.host_fraction and not self.routed_expert_bytes
                and not self.embedding_row_bytes and not self.head_params
                and self.layout is None and self.measured is None
                and self.physical is None and self.collectives is None)

    def microbatches(self, positions: float, sequences: float | None = None) -> float:
        """Micro-batches in flight: min(stages, sequences), at least 1."""
        count = positions if sequences is None else sequences
        return float(max(1, min(self.stages, count)))

    def weights_read(self, tokens: np.ndarray) -> np.ndarray | float:
        """Weight bytes one micro-batch of ``tokens`` reads: the routed experts that at
        least one token chose, E·(1 − (1 − k/E)^tokens) per layer under uniform routing
        (the MoE lever's expert coverage); all of W for a dense model. With
        :attr:`embedding_row_bytes`, less the input-table rows no token reads.
        """
        weights: np.ndarray | float = self.weight_bytes
        if self.routed_expert_bytes:
            e, k = self.experts, self.active_experts
            read = e * (1 - (1 - k / e) ** np.asarray(tokens, dtype=np.float64))
            weights = weights - self.routed_expert_bytes * (e - read)
        if self.embedding_row_bytes:
            rows = self.embedding_rows
            weights = weights - self.embedding_row_bytes * (
                rows - np.minimum(np.asarray(tokens, dtype=np.float64), rows))
        return weights

    # Products computed once so the scalar and vectorised paths do the same float
    # operations in the same order.
    @property
    def flops_per_position(self) -> float:
        """2 · N_matmul: FLOPs of the matrix products for one position."""
        return 2.0 * self.params_matmul

    @property
    def flops_per_body_position(self) -> float:
        """2 · (N_matmul − N_head): FLOPs of a position the head does not score."""
        return 2.0 * (self.params_matmul - self.head_params)

    @property
    def flops_per_head_position(self) -> float:
        """2 · N_head: FLOPs of the head for one scored position."""
        return 2.0 * self.head_params

    @property
    def flops_per_attention_pair(self) -> float:
        """4 · layers · d_q: FLOPs of one query attending to one key (scores and mix)."""
        return 4.0 * self.layers * self.query_width

    # ------------------------------------------------------------------ constructors
    @classmethod
    def lab3(cls, **changes: Any) -> CostModel:
        """Module 10 Lab 3's reference device: W = 5.5 GB, kv 147,456 B/token, 16 GB
        of cache, 1 TB/s, 50 % of 165 TFLOP/s, the case model's N_matmul
        8,927,875,072, 36 layers and d = 4,096.  Keyword arguments replace fields
        (Lab 3's capacity profiles: ``kv_bytes_per_token=73728`` for the 8-bit cache,
        ``cache_memory=72e9, bandwidth=3.35e12, compute=0.5 * 989e12`` for an H100,
        ``bandwidth=0.30e12, compute=0.5 * 121e12`` for an L4).

        >>> CostModel.lab3(kv_bytes_per_token=73728).kv_bytes_per_token
        73728
        """
        values: dict[str, Any] = {
            "weight_bytes": 5.5e9,
            "kv_bytes_per_token": 147456,
            "params_matmul": 8927875072,
            "layers": 36,
            "query_width": 4096,
            "bandwidth": 1e12,
            "compute": 0.5 * 165e12,
            "cache_memory": 16e9,
        }
        values.update(changes)
        return cls(**values)

    @classmethod
    def from_quantities(
        cls, values: Mapping[str, float], cache_memory: float | None = None,
        measured: Any = None,
    ) -> CostModel:
        """Build the cost model from evaluated scenario quantities (base units).

        Names read (see :data:`QUANTITY_NAMES`):

        * ``weight_bytes``, ``kv_bytes_per_token``, ``params_matmul``, ``layers``,
          ``query_width``, ``bandwidth`` — required;
        * compute: ``flops_effective_prefill`` if present, otherwise
          ``flops_peak`` × ``prefill_mfu`` (``prefill_mfu`` defaults to 1);
        * cache memory: the ``cache_memory`` argument if given, else
          ``kv_budget_bytes``, else ``memory_bytes − weight_bytes − reserve_bytes``
          (``reserve_bytes`` defaults to 0);
        * ``t0`` (optional, default 0): a fixed time added to every iteration;
        * the engine conventions (optional): ``embedding_bytes_unread`` > 0 (the
          scenario reads input-table rows) sets :attr:`embedding_row_bytes` and
          :attr:`embedding_rows` from ``embedding_row_bytes`` and ``vocab``;
          ``prefill_logit_positions`` < ``prompt_tokens`` (the head scores the last
          prompt position) sets :attr:`head_params` from ``params_head_matmul``;
        * ``measured``: a :class:`MeasuredIteration` that prices the forward pass from
          measured kernel tables (a plugin's ``infermodel_iteration_cost``).

        >>> q = dict(weight_bytes=5.5e9, kv_bytes_per_token=147456, params_matmul=8927875072,
        ...          layers=36, query_width=4096, bandwidth=1e12, flops_peak=165e12,
        ...          prefill_mfu=0.5, memory_bytes=24e9, reserve_bytes=2.5e9)
        >>> CostModel.from_quantities(q).cache_memory
        16000000000.0
        """
        return cls(**cost_fields(values, cache_memory, measured))

    # ------------------------------------------------------------------ costs
    def time_from_counts(self, positions: float, attention: float, cached: float,
                         sequences: float | None = None, scored: float | None = None,
                         decodes: float | None = None) -> float:
        """Iteration time from the three integer counts (see the module docstring);
        ``sequences`` (the sequences scheduled, default ``positions``) sets the
        micro-batches of a pipeline; ``scored`` (default ``sequences``) the positions
        the head scores when it scores one per sequence (a speculative verification
        scores all k + 1 of its positions); ``decodes`` (the scheduled sequences that
        decode one token; default: all of them when every sequence has one position,
        else all but one prefill chunk) splits the pass for measured kernels.
        """
        if (self.layout is not None or self.measured is not None or self.physical is not None
                or self.collectives is not None):
            # The physical terms have their own one-iteration path in iteration_times.
            return float(self.iteration_times(positions, attention, cached, sequences, scored,
                                              decodes))
        if not self.simple:
            return self._scalar_time(float(positions), float(attention), float(cached),
                                     None if sequences is None else float(sequences),
                                     None if scored is None else float(scored))
        memory_time = (self.weight_bytes + self.kv_bytes_per_token * cached) / self.bandwidth
        compute_time = (
            self.flops_per_position * positions + self.flops_per_attention_pair * attention
        ) / self.compute
        return max(memory_time, compute_time) + self.overhead

    def _scalar_time(self, positions: float, attention: float, cached: float,
                     sequences: float | None, scored: float | None) -> float:
        """:meth:`iteration_times` for one iteration without a :attr:`layout`,
        :attr:`measured` kernels, :attr:`physical` terms or :attr:`collectives`, in Python
        floats: the same operations in the same order (so the same bits), without numpy's
        per-call cost, which dominated runs of many short blocks (a replica fleet's).
        ``tests/test_simulator_objectives.py`` holds the two paths equal.
        """
        count = positions if sequences is None else sequences
        micro = max(1.0, min(float(self.stages), count))
        scale = self.stages / micro
        resident = 1.0 - self.host_fraction
        tokens = positions / micro
        weights = self.weight_bytes
        if self.routed_expert_bytes:
            e, k = self.experts, self.active_experts
            read = e * (1 - (1 - k / e) ** tokens)
            weights = weights - self.routed_expert_bytes * (e - read)
        if self.embedding_row_bytes:
            rows = self.embedding_rows
            weights = weights - self.embedding_row_bytes * (rows - min(tokens, rows))
        if self.head_params:
            heads = count if scored is None else scored
            matmul = (self.flops_per_body_position * positions
                      + self.flops_per_head_position * heads)
        else:
            matmul = self.flops_per_position * positions
        pairs = self.flops_per_attention_pair * attention
        comm = self.comm_per_token * positions / micro
        memory_time = (self.stages * weights
                       + scale * resident * self.kv_bytes_per_token * cached) / self.bandwidth
        compute_time = scale * (matmul + pairs) / self.compute
        time = max(memory_time, compute_time)
        if self.host_fraction:
            host = self.host_fraction * self.kv_bytes_per_token * cached / self.host_bandwidth
            time = max(time, host) if self.host_overlap else time + host
        return time + self.overhead + self.comm_fixed + comm

    def iteration_time(
        self,
        decode_contexts: Sequence[int] | Iterable[int],
        chunks: Sequence[tuple[int, int]] | Iterable[tuple[int, int]] = (),
        scored: int | None = None,
    ) -> float:
        """Time of one iteration with decodes at ``decode_contexts`` cached positions
        and prefill ``chunks`` of ``(new_tokens, cached_tokens)``; ``scored``: see
        :meth:`time_from_counts`.

        >>> lab = CostModel.lab3()
        >>> round(1000 * lab.iteration_time([5000] * 17, [(512, 0)]), 2)
        116.04
        >>> round(1000 * lab.iteration_time([5000] * 17, [(512, 2000)]), 2)
        123.36
        """
        contexts = [int(c) for c in decode_contexts]
        decodes = len(contexts)
        positions = len(contexts)
        sequences = positions
        attention = sum(contexts)
        cached = attention
        for new, old in chunks:
            new, old = int(new), int(old)
            if new < 0 or old < 0:
                raise SimulationError(f"a chunk needs non-negative token counts, got ({new}, {old})")
            positions += new
            attention += new * old + new * (new + 1) // 2
            cached += old
            sequences += 1
        return self.time_from_counts(positions, attention, cached, sequences, scored, decodes)

    def iteration_times(self, positions: npt.ArrayLike, attention: npt.ArrayLike,
                        cached: npt.ArrayLike, sequences: npt.ArrayLike | None = None,
                        scored: npt.ArrayLike | None = None,
                        decodes: npt.ArrayLike | None = None) -> np.ndarray:
        """Vectorised :meth:`time_from_counts` over arrays of counts (float64 of
        integers); the fast engine computes whole runs of iterations with it.

        >>> lab = CostModel.lab3()
        >>> t = lab.iteration_times(np.array([18.0, 18.0]), np.array([90000.0, 90018.0]),
        ...                         np.array([90000.0, 90018.0]))
        >>> [round(1000 * float(x), 4) for x in t]
        [18.771, 18.7737]
        """
        positions = np.asarray(positions, dtype=np.float64)
        attention = np.asarray(attention, dtype=np.float64)
        cached = np.asarray(cached, dtype=np.float64)
        if self.simple:
            memory_time = (self.weight_bytes + self.kv_bytes_per_token * cached) / self.bandwidth
            compute_time = (
                self.flops_per_position * positions + self.flops_per_attention_pair * attention
            ) / self.compute
            return np.maximum(memory_time, compute_time) + self.overhead
        # P stages, m = min(P, sequences) micro-batches: every micro-batch re-reads each
        # stage's weights and a token traverses every stage, so one iteration (every
        # scheduled sequence one step on) takes P/m times the work of a micro-batch
        # on the combined device, the weights read P times in all (Module 10,
        # "Choose a deployment, not only a chip"; the parallelism lever's step time).
        count = positions if sequences is None else np.asarray(sequences, dtype=np.float64)
        if self.measured is not None:
            heads = count if scored is None else np.asarray(scored, dtype=np.float64)
            return self._measured_times(positions, attention, cached, count, heads, decodes)
        if positions.size == 1 and self.physical is not None and self.layout is None:
            # The fast engine asks for one iteration at a time most often: plain floats.
            first = positions.item()
            count1 = first if sequences is None else float(np.asarray(sequences).item())
            heads1 = count1 if scored is None else float(np.asarray(scored).item())
            return np.full(positions.shape, one_iteration(
                self, first, attention.item(), cached.item(), count1, heads1))
        micro = np.maximum(1.0, np.minimum(float(self.stages), count))
        scale = self.stages / micro
        resident = 1.0 - self.host_fraction
        weights = self.weights_read(positions / micro)
        heads = count if scored is None else np.asarray(scored, dtype=np.float64)
        if self.physical is not None:
            matmul = products(self, positions, heads, micro)
        elif self.head_params:
            # The head scores one position per scheduled sequence (engine convention).
            matmul = (self.flops_per_body_position * positions
                      + self.flops_per_head_position * heads)
        else:
            matmul = self.flops_per_position * positions
        pairs = self.flops_per_attention_pair * attention
        comm = self.comm_per_token * positions / micro
        if self.layout is not None:
            weights, cached, matmul, pairs, comm = self._busiest(
                positions, count, micro, weights, cached, matmul, pairs, comm)
        if self.physical is not None:
            time = step(self, positions, count, micro, weights, cached, matmul, pairs)
        else:
            memory_time = (self.stages * weights
                           + scale * resident * self.kv_bytes_per_token * cached) / self.bandwidth
            compute_time = scale * (matmul + pairs) / self.compute
            time = np.maximum(memory_time, compute_time)
        if self.host_fraction:
            # The host-resident share of every cached position crosses the host link.
            host = self.host_fraction * self.kv_bytes_per_token * cached / self.host_bandwidth
            time = np.maximum(time, host) if self.host_overlap else time + host
        if self.collectives is not None:
            time = time + self.collectives.time(positions / micro)
        # All-reduces and stage hops: not overlapped with the step (an upper bound).
        return time + self.overhead + self.comm_fixed + comm

    def _busiest(self, positions: np.ndarray, sequences: np.ndarray, micro: np.ndarray,
                 weights: Any, cached: np.ndarray, matmul: Any, pairs: Any,
                 comm: Any) -> tuple[Any, np.ndarray, Any, Any, Any]:
        """The iteration's terms on the busiest card of :attr:`layout` (see
        :mod:`infermodel.simulator.layout`).
        """
        lay = self.layout
        assert lay is not None
        tokens = positions / micro
        f_dp = lay.attention_factor(sequences)
        f_ep = lay.expert_factor(tokens)
        weights = weights + lay.replica_bytes
        if self.routed_expert_bytes:
            e, k = self.experts, self.active_experts
            read = e * (1 - (1 - k / e) ** tokens)
            weights = weights + (f_ep - 1) * self.routed_expert_bytes * read
        else:
            weights = weights + (f_ep - 1) * lay.routed_read_bytes
        matmul = (matmul + 2.0 * lay.local_params * positions * (f_dp - 1)
                  + 2.0 * lay.routed_params * positions * (f_ep - 1))
        comm = comm + (lay.comm_attention * f_dp + lay.comm_expert * f_ep) * tokens
        return weights, cached * f_dp, matmul, pairs * f_dp, comm

    def _measured_times(self, positions: np.ndarray, attention: np.ndarray, cached: np.ndarray,
                        sequences: np.ndarray, scored: np.ndarray,
                        decodes: npt.ArrayLike | None) -> np.ndarray:
        """The pass priced by :attr:`measured`, split into its decodes and its prefill
        chunks from the counts.

        D decodes and P = sequences − D chunks of K = positions − D new tokens: the
        decodes' cached positions C_d and the chunks' mean cached c follow from the
        pairs and the cached positions, A = C_d + D + P·(k·c + k(k+1)/2) and
        C = C_d + P·c with k = K/P (exact for one chunk; the chunks' mean for several).
        """
        if decodes is None:
            # One position per sequence: all decode; otherwise one chunk among decodes.
            d = np.where(positions <= sequences, sequences, np.maximum(sequences - 1.0, 0.0))
        else:
            d = np.asarray(decodes, dtype=np.float64)
        chunks = np.maximum(sequences - d, 0.0)
        new = np.maximum(positions - d, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            k = np.where(chunks > 0, new / np.maximum(chunks, 1.0), 0.0)
            mean_cached = np.where(
                (chunks > 0) & (k > 1),
                ((attention - cached - d) / np.maximum(chunks, 1.0) - k * (k + 1) / 2)
                / np.maximum(k - 1, 1.0), 0.0)
        mean_cached = np.clip(mean_cached, 0.0, None)
        decode_cached = np.maximum(cached - chunks * mean_cached, 0.0)
        time = self.measured.times(positions, d, decode_cached, chunks, new, mean_cached, scored)
        if self.host_fraction:
            host = self.host_fraction * self.kv_bytes_per_token * cached / self.host_bandwidth
            time = np.maximum(time, host) if self.host_overlap else time + host
        # The measured kernels include the collectives: no link time is added on top.
        return time + self.overhead

    def cache_tokens(self) -> float:
        """How many cached positions fit in :attr:`cache_memory`."""
        return self.cache_memory / self.kv_bytes_per_token

    def unmodelled(self) -> list[str]:
        """Effects of the terms above that the iteration cost leaves out, each with its
        size (result warnings of a simulation).
        """
        notes = [] if self.speculation is None else self.speculation.unmodelled(self)
        return notes + ([] if self.layout is None else self.layout.unmodelled())

    def describe(self) -> list[str]:
        """The terms of the iteration time beyond Lab 3's, one line each (for the
        derivation printed with a simulation).
        """
        lines = []
        if self.stages > 1:
            lines.append(f"pipeline: {self.stages} stages, m = min({self.stages}, sequences) "
                         f"micro-batches; weights read {self.stages}× per iteration, cache and "
                         f"compute × {self.stages}/m")
        if self.comm_fixed or self.comm_per_token:
            lines.append(f"communication: {self.comm_fixed * 1e3:.4g} ms + "
                         f"{self.comm_per_token * 1e6:.4g} µs per token of a micro-batch, "
                         "added to every iteration")
        if self.host_fraction:
            how = "overlapping the step" if self.host_overlap else "added to the step"
            lines.append(f"host-resident cache: {self.host_fraction:g} of every cached position "
                         f"over {self.host_bandwidth / 1e9:.4g} GB/s, {how}")
        if self.embedding_row_bytes:
            lines.append(f"input-table rows: W − {self.embedding_row_bytes:.6g} B × (vocab "
                         f"{self.embedding_rows:g} − min(positions, vocab)) read per iteration "
                         '(efficiency.embedding_reads = "rows")')
        if self.head_params:
            lines.append(f"output head: 2 × {self.head_params:.6g} FLOPs per scheduled sequence "
                         "(its last position), not per position "
                         '(efficiency.prefill_logits = "last")')
        if self.routed_expert_bytes:
            lines.append(f"expert coverage: W − {self.routed_expert_bytes / 1e9:.4g} GB × "
                         f"(E − E·(1 − k/E)^tokens), E = {self.experts:g}, k = {self.active_experts:g}")
        if self.physical is not None:
            lines.append(self.physical.describe())
        if self.collectives is not None:
            lines.append(self.collectives.describe())
        if self.speculation is not None:
            lines.append(self.speculation.describe())
        if self.layout is not None:
            lines.append(self.layout.describe())
        if self.measured is not None:
            lines += list(self.measured.describe())
        return lines
