"""The serving simulator's iteration priced by measured kernels (not a plugin: the
measured-kernels plugin registers it through ``infermodel_iteration_cost``).

A serving iteration runs T scheduled tokens through the model in one pass: D decodes
(one token each, at their cached lengths) and P prefill chunks of k new tokens each
after c cached ones. Its time is the decode step's operators re-read at those counts,
each as what its time follows (:attr:`.kernel_plan.Timed.shape`)::

    tokens: GEMMs, MoE, all-reduces, norms,       at T tokens (the head at the positions
            embedding                             it scores)
    attention: attention, latent attention        decode: at D sequences, the decodes'
                                                  mean cached length + 1; prefill: at P
                                                  prompts of k tokens, times the pairs a
                                                  chunk after c cached tokens has over
                                                  those of a fresh prompt:
                                                  (k·c + k(k+1)/2) / (k(k+1)/2)
    state: a recurrence (linear attention,        decode: at D sequences; prefill: at P
           state space)                           prompts of k tokens (the state carries
                                                  what is cached: no pair scaling)

Under data-parallel attention each of the D ranks holds whole sequences, and the step
waits for the busiest: a rank's kernels run ⌈D_dec/D⌉ decodes and ⌈P/D⌉ prompts' chunks
(times the stated imbalance), the iteration's own counts as the scenario's step takes its
batch (``kernel_rank_batch``). The expert all-to-all is the prefill pass's kernel in an
iteration that holds a prompt and the decode step's otherwise (:data:`PROMPT_MODE`), and
so is a token operator that fell back to its roofline (which runs at its pass's compute
rate).

Kernels an engine overlaps only in passes it replays as a captured CUDA graph (the
shared experts beside the routed ones under TensorRT-LLM and SGLang) run one after the
other in an iteration with a prompt in it, which no engine replays as a graph.

The engine's scheduler and host time per iteration, ``τ_step`` (the scenario's
``step_overhead``: no table times it), is added.

A latent attention module's operators follow the attention (its projections are inside
the measured module). Each operator's formula is the one the scenario's step uses
(``<phase>_kernel_<op>_time``), compiled once with the moving counts as arguments and
every other quantity at its value.
"""

from __future__ import annotations

import numpy as np
import sympy

from infermodel.plugin import S

#: Token operators whose kernel is the prefill pass's when an iteration holds a prompt
#: and the decode step's otherwise: the expert all-to-all (DeepEP's normal dispatch and
#: combine beside its low-latency ones, as the engines switch between them).
PROMPT_MODE = ("expert_dispatch", "expert_combine")


def _phased(timed) -> set[str]:
    """Token operators that fell back to their roofline in both passes (no table serves
    their kernels): a roofline's compute rate is its pass's (``flops_effective_<phase>``),
    so, like the all-to-all, an iteration with a prompt in it runs the prefill pass's.
    (Elementwise operators, bandwidth-bound, keep the decode step's.)
    """
    by_phase = {phase: {t.name for t in timed if t.phase == phase and t.shape == "tokens"
                        and t.how == "fallback" and t.own is None and t.name != "head"}
                for phase in ("prefill", "decode")}
    return by_phase["prefill"] & by_phase["decode"]


class MeasuredIterations:
    """A :class:`infermodel.simulator.cost.MeasuredIteration` from a scenario's measured
    operators.
    """

    def __init__(self, timed, values, where: str) -> None:
        tokens, decodes, context, chunks, length, rank = sympy.symbols("T D L P K R",
                                                                       positive=True)
        self.where = where
        # The engine's scheduler and host time per iteration (no kernel).
        self.host_step = float(values.get("step_overhead", 0.0))
        # Data-parallel attention: D ranks, each sequence on one of them; the step waits
        # for the busiest, ⌈n/D⌉ sequences times the stated imbalance (as the scenario's
        # step takes ``kernel_rank_batch``).
        self.ranks = float(values.get("parallel_attention_data_degree", 1.0))
        self.imbalance = float(values.get("parallel_attention_imbalance", 1.0))
        self.tokens: list = []
        # Operators whose kernel depends on whether a prompt is in the pass (below).
        self.decode_tokens: list = []
        self.prefill_tokens: list = []
        self.scored: list = []
        self.decode_attention: list = []
        self.prefill_attention: list = []
        self.prefill_state: list = []
        # Token operators with kernels overlapped only under a CUDA graph: (overlapped,
        # one after the other), the second where the iteration holds a prompt.
        self.graph_tokens: list = []
        prompt_mode = set(PROMPT_MODE) | _phased(timed)
        self.prompt_mode = sorted(prompt_mode & {t.name for t in timed if t.phase == "prefill"})
        for t in timed:
            arguments: tuple
            sequences = t.shape != "tokens"
            if t.phase == "prefill" and not sequences:
                if t.name not in prompt_mode:
                    continue
                # An iteration with a prompt in it runs the prefill pass's kernel at its
                # T tokens (B·n = T with n = 1).
                moving = {S.batch: tokens, S.prompt_tokens: sympy.Integer(1)}
                target, arguments = self.prefill_tokens, (tokens, rank)
            elif t.phase == "decode" and sequences:
                moving = {S.batch: decodes, S.context: context}
                target, arguments = self.decode_attention, (decodes, context, rank)
            elif t.phase == "prefill":
                moving = {S.batch: chunks, S.prompt_tokens: length}
                target = self.prefill_attention if t.shape == "attention" else self.prefill_state
                arguments = (chunks, length, rank)
            elif t.name == "head":
                moving = {S.batch: tokens}
                target, arguments = self.scored, (tokens, rank)
            else:
                moving = {S.batch: tokens}
                target = self.decode_tokens if t.name in prompt_mode else self.tokens
                arguments = (tokens, rank)
            expression = (t.expression if isinstance(t.expression, sympy.Basic)
                          else sympy.Float(t.expression))
            # A rank's kernels run R, the busiest rank's share of the iteration's own
            # counts (:meth:`_busiest`), not the scenario's batch.
            moving[S.kernel_rank_batch] = rank
            overlapped = self._compile(timed.expand(expression).xreplace(moving), arguments,
                                       values)
            graphs = [g for g in t.streams if g.graphs] if t.phase == "decode" else []
            if graphs and target is self.tokens:
                # Overlapped only in a pass replayed as a CUDA graph: an iteration with a
                # prompt in it runs the streams one after the other.
                summed = expression.xreplace({g.combined: g.first + g.second for g in graphs})
                self.graph_tokens.append(
                    (overlapped, self._compile(timed.expand(summed).xreplace(moving), arguments,
                                               values)))
            else:
                target.append(overlapped)

    @staticmethod
    def _compile(expression, arguments, values):
        fixed = {s: float(values[s.name]) for s in expression.free_symbols
                 if s not in arguments and s.name in values}
        return sympy.lambdify(arguments, expression.xreplace(fixed), modules="numpy")

    def _busiest(self, sequences, each):
        """The busiest rank's share: ⌈n/D⌉ × the imbalance of ``sequences``, ``each``
        positions apiece.
        """
        return np.ceil(sequences / round(self.ranks)) * self.imbalance * each

    def times(self, tokens, decodes, decode_cached, chunks, chunk_tokens, chunk_cached, scored):
        tokens = np.asarray(tokens, dtype=np.float64)
        decodes = np.asarray(decodes, dtype=np.float64)
        chunks = np.asarray(chunks, dtype=np.float64)
        shape = np.broadcast_shapes(tokens.shape, decodes.shape, chunks.shape,
                                    np.shape(decode_cached), np.shape(chunk_tokens),
                                    np.shape(chunk_cached), np.shape(scored))
        time = np.zeros(shape)
        with np.errstate(all="ignore"):
            prompts = np.maximum(chunks, 1.0)
            k = np.maximum(np.asarray(chunk_tokens, dtype=np.float64) / prompts, 1.0)
            # The busiest attention rank's tokens and scored positions: its decodes and
            # its prompts' chunks (a prompt is whole on one rank).
            rank_tokens = np.maximum(self._busiest(decodes, 1.0)
                                     + np.where(chunks > 0, self._busiest(chunks, k), 0.0), 1.0)
            rank_scored = np.maximum(self._busiest(decodes, 1.0)
                                     + np.where(chunks > 0, self._busiest(chunks, 1.0), 0.0), 1.0)
            busy = np.maximum(tokens, 1.0)
            for part in self.tokens:
                time = time + part(busy, rank_tokens)
            for overlapped, summed in self.graph_tokens:
                time = time + np.where(chunks > 0, summed(busy, rank_tokens),
                                       overlapped(busy, rank_tokens))
            decode_only = sum((part(busy, rank_tokens) for part in self.decode_tokens),
                              np.zeros(shape))
            with_prompts = sum((part(busy, rank_tokens) for part in self.prefill_tokens),
                               np.zeros(shape))
            time = time + np.where(chunks > 0, with_prompts, decode_only)
            for part in self.scored:
                time = time + part(np.maximum(np.asarray(scored, dtype=np.float64), 1.0),
                                   rank_scored)
            some = np.maximum(decodes, 1.0)
            context = np.asarray(decode_cached, dtype=np.float64) / some + 1.0
            rank_decodes = self._busiest(some, 1.0)
            for part in self.decode_attention:
                time = time + np.where(decodes > 0, part(some, context, rank_decodes), 0.0)
            fresh = k * (k + 1) / 2
            pairs = (k * np.asarray(chunk_cached, dtype=np.float64) + fresh) / fresh
            rank_prompts = self._busiest(prompts, 1.0)
            for part in self.prefill_attention:
                time = time + np.where(chunks > 0, part(prompts, k, rank_prompts) * pairs, 0.0)
            for part in self.prefill_state:
                time = time + np.where(chunks > 0, part(prompts, k, rank_prompts), 0.0)
        return time + self.host_step

    def describe(self) -> list[str]:
        return [f"measured kernels ({self.where}): each iteration's GEMMs, MoE layers, "
                "all-reduces and elementwise operators at its tokens, the head at the "
                "positions it scores, generation attention at its decodes and their mean "
                "cached length, context attention at its prefill chunks (scaled by the "
                "pairs a chunk after cached tokens adds), recurrences at its decodes and "
                "prefill chunks"
                + (f" (on the busiest of {round(self.ranks)} data-parallel attention ranks: "
                   "its share of the decodes and of the prompts, each whole)"
                   if self.ranks > 1 else "")
                + (f"; {', '.join(self.prompt_mode)} as the prefill pass's where a prompt is "
                   "in the iteration" if self.prefill_tokens else "")
                + "; the engine's host time "
                f"{self.host_step * 1e3:.4g} ms per iteration"]


__all__ = ["MeasuredIterations"]
