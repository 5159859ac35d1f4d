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


class MeasuredIterations:
    """A :class:`infermodel.simulator.cost.MeasuredIteration` from a scenario's measured
    operators.
    """

    def __init__(self, timed, values, where: str) -> None:
        tokens, decodes, context, chunks, length = sympy.symbols("T D L P K", positive=True)
        self.where = where
        # The engine's scheduler and host time per iteration (no kernel).
        self.host_step = float(values.get("step_overhead", 0.0))
        self.tokens: list = []
        self.scored: list = []
        self.decode_attention: list = []
        self.prefill_attention: list = []
        self.prefill_state: list = []
        for t in timed:
            arguments: tuple
            sequences = t.shape != "tokens"
            if t.phase == "prefill" and not sequences:
                continue
            if t.phase == "decode" and sequences:
                moving = {S.batch: decodes, S.context: context}
                target, arguments = self.decode_attention, (decodes, context)
            elif t.phase == "prefill":
                moving = {S.batch: chunks, S.prompt_tokens: length}
                target = self.prefill_attention if t.shape == "attention" else self.prefill_state
                arguments = (chunks, length)
            elif t.name == "head":
                moving = {S.batch: tokens}
                target, arguments = self.scored, (tokens,)
            else:
                moving = {S.batch: tokens}
                target, arguments = self.tokens, (tokens,)
            expression = (t.expression if isinstance(t.expression, sympy.Basic)
                          else sympy.Float(t.expression))
            expression = timed.expand(expression).xreplace(moving)
            fixed = {s: float(values[s.name]) for s in expression.free_symbols
                     if s not in arguments and s.name in values}
            target.append(sympy.lambdify(arguments, expression.xreplace(fixed), modules="numpy"))

    def times(self, tokens, decodes, decode_cached, chunks, chunk_tokens, chunk_cached, scored):
        tokens = np.asarray(tokens, dtype=np.float64)
        decodes = np.asarray(decodes, dtype=np.float64)
        chunks = np.asarray(chunks, dtype=np.float64)
        shape = np.broadcast_shapes(tokens.shape, decodes.shape, chunks.shape,
                                    np.shape(decode_cached), np.shape(chunk_tokens),
                                    np.shape(chunk_cached), np.shape(scored))
        time = np.zeros(shape)
        with np.errstate(all="ignore"):
            for part in self.tokens:
                time = time + part(np.maximum(tokens, 1.0))
            for part in self.scored:
                time = time + part(np.maximum(np.asarray(scored, dtype=np.float64), 1.0))
            some = np.maximum(decodes, 1.0)
            context = np.asarray(decode_cached, dtype=np.float64) / some + 1.0
            for part in self.decode_attention:
                time = time + np.where(decodes > 0, part(some, context), 0.0)
            prompts = np.maximum(chunks, 1.0)
            k = np.maximum(np.asarray(chunk_tokens, dtype=np.float64) / prompts, 1.0)
            fresh = k * (k + 1) / 2
            pairs = (k * np.asarray(chunk_cached, dtype=np.float64) + fresh) / fresh
            for part in self.prefill_attention:
                time = time + np.where(chunks > 0, part(prompts, k) * pairs, 0.0)
            for part in self.prefill_state:
                time = time + np.where(chunks > 0, part(prompts, k), 0.0)
        return time + self.host_step

    def describe(self) -> list[str]:
        return [f"measured kernels ({self.where}): each iteration's GEMMs, MoE layers, "
                "all-reduces and elementwise operators at its tokens, the head at the "
                "positions it scores, generation attention at its decodes and their mean "
                "cached length, context attention at its prefill chunks (scaled by the "
                "pairs a chunk after cached tokens adds), recurrences at its decodes and "
                "prefill chunks; the engine's host time "
                f"{self.host_step * 1e3:.4g} ms per iteration"]


__all__ = ["MeasuredIterations"]
