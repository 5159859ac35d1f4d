"""The chunked-prefill lever: the cost of one hybrid iteration, decodes plus a prompt chunk.

``[levers.chunked_prefill]`` describes one iteration of a scheduler that limits the new
prompt positions it takes per pass::

    [levers.chunked_prefill]
    chunk_tokens = 512        # new prompt positions in this iteration
    decode_sequences = 17     # sequences decoding beside it (default: batch − 1)
    decode_context = 5000     # cached positions each decode reads (default: context)
    cached_tokens = 0         # prompt positions already processed before this chunk

The chunk and the decodes share one forward pass, so the weights are read once and the
iteration takes the larger of its memory time and its compute time (Module 10:
Inference and serving, "A joining prompt can stall everybody", and Lab 3's cost
model). Counting as Lab 3 does, with D decodes at context c, a chunk of k new
positions after p cached ones::

    positions = D + k
    attention = D·c + k·p + k(k + 1)/2     (query–key pairs: decodes, chunk to cache, causal)
    bytes     = W + kv·(D·c + p)
    FLOPs     = 2·N_matmul·positions + 4·layers·d_q·attention
    time      = max(bytes / BW, FLOPs / F_prefill) + t0

Lab 3 runs every iteration at 50 % of peak, the case study's prefill MFU, so the compute
rate is ``flops_effective_prefill``. ``chunk_stall_vs_decode`` compares the iteration
with a plain decode step of the scenario's batch (``decode_step_time``): the gap the
streaming users see while the chunk is processed. The lever adds quantities and changes
none of the base physics.
"""

from __future__ import annotations

import attrs
from sympy import Max, ceiling

from infermodel.plugin import S, accepts, hookimpl

from . import M10
from .shapes import terms as layer_terms

STALL = f"{M10}, 'A joining prompt can stall everybody'"
LAB3 = f"{M10}, Lab 3 (cost model: one hybrid iteration)"
BOTH = f"{STALL}; {LAB3}"


def _at_least(minimum):
    @accepts(f"≥ {minimum}")
    def check(instance, attribute, value):
        if value is not None and value < minimum:
            raise ValueError(f"{attribute.name} = {value!r} must be at least {minimum}")
    return check


@attrs.frozen
class ChunkedPrefill:
    """One hybrid iteration: a prompt chunk beside ongoing decodes."""

    chunk_tokens: int = attrs.field(default=256, validator=_at_least(1), metadata={
        "description": "new prompt positions processed in the iteration"})
    decode_sequences: int | None = attrs.field(default=None, validator=_at_least(0), metadata={
        "description": "sequences decoding in the same iteration; unset: workload.batch − 1"})
    decode_context: float | None = attrs.field(default=None, validator=_at_least(0), metadata={
        "description": "cached positions each decode reads; unset: the mean decode context"})
    cached_tokens: int = attrs.field(default=0, validator=_at_least(0), metadata={
        "description": "prompt positions already processed before this chunk"})

    def simulation_defaults(self, scenario) -> dict:
        """The serving simulator's default policy: chunked, with this chunk."""
        return {"policy": {"kind": "chunked", "chunk_tokens": self.chunk_tokens}}


@hookimpl
def infermodel_register_levers(register):
    register("chunked_prefill", ChunkedPrefill,
             description="chunked prefill: the cost of one iteration mixing a prompt chunk "
                         "with ongoing decodes", reference=BOTH)


@hookimpl
def infermodel_validate_scenario(scenario, report):
    lever = scenario.lever("chunked_prefill")
    if lever is None:
        return
    prompt = scenario.value("workload.prompt_tokens")
    chunk, cached = lever.chunk_tokens, lever.cached_tokens
    if chunk > prompt:
        report("levers.chunked_prefill.chunk_tokens",
               f"a chunk of {chunk:,} tokens is larger than the prompt of {prompt:,} tokens "
               "(workload.prompt_tokens)",
               expected=f"at most {prompt:,} tokens, the chunk being part of the prompt",
               suggestion="lower chunk_tokens or raise workload.prompt_tokens")
    elif cached + chunk > prompt:
        report("levers.chunked_prefill.cached_tokens",
               f"{cached:,} cached tokens plus a chunk of {chunk:,} run past the prompt of "
               f"{prompt:,} tokens (workload.prompt_tokens)",
               expected=f"cached_tokens at most {prompt - chunk:,} (prompt − chunk_tokens)",
               suggestion="lower cached_tokens or chunk_tokens")


@hookimpl
def infermodel_define_quantities(scenario, define):
    lever = scenario.lever("chunked_prefill")
    if lever is None:
        return
    define("chunk_tokens", lever.chunk_tokens, unit="token", latex="k",
           description="new prompt positions in the hybrid iteration", reference=STALL)
    define("chunk_cached_tokens", lever.cached_tokens, unit="token", latex="p",
           description="prompt positions cached before the chunk", reference=LAB3)
    if lever.decode_sequences is None:
        define("chunk_decode_sequences", Max(0, S.batch - 1), unit="seq", latex="D",
               description="sequences decoding beside the chunk (the batch less the joining one)",
               reference=STALL)
    else:
        define("chunk_decode_sequences", lever.decode_sequences, unit="seq", latex="D",
               description="sequences decoding beside the chunk", reference=STALL)
    if lever.decode_context is None:
        define("chunk_decode_context", S.context, unit="token", latex="c",
               description="cached positions each decode reads (the mean decode context)",
               reference=LAB3)
    else:
        define("chunk_decode_context", lever.decode_context, unit="token", latex="c",
               description="cached positions each decode reads", reference=LAB3)

    k, p = S.chunk_tokens, S.chunk_cached_tokens
    d, c = S.chunk_decode_sequences, S.chunk_decode_context
    define("hybrid_positions", d + k, unit="token",
           description="positions the iteration runs through the model (one per decode, the chunk's)",
           reference=LAB3)
    define("hybrid_attention_pairs", d * c + k * p + k * (k + 1) / 2, unit="1",
           description="query–key pairs: each decode over its cache, the chunk over the cached "
                       "prompt and causally over itself", reference=LAB3)
    arch = layer_terms(scenario)
    define("hybrid_bytes", S.weight_bytes + d * arch.cache_read(c) + arch.cache_held(p), unit="B",
           description="bytes read by the iteration: weights once, every decode's cache and the "
                       "chunk's cached prompt", reference=BOTH)
    attention = (4 * S.layers * S.query_width * S.hybrid_attention_pairs if arch.plain
                 else d * arch.attention_decode(c) + arch.attention_chunk(p, k))
    windowed = "" if arch.plain else (" (the chunk's queries each see at most a window of keys "
                                      "in windowed layers)")
    if scenario.value("efficiency.prefill_logits") == "all":
        define("hybrid_flops", 2 * S.params_matmul * S.hybrid_positions + attention, unit="FLOP",
               description="FLOPs of the iteration: projections for every position (the head "
                           "scoring each) plus attention" + windowed, reference=BOTH)
    else:
        # The head scores each decode's position and, at most, the chunk's last one.
        define("hybrid_flops", 2 * (S.params_matmul - S.params_head_matmul) * S.hybrid_positions
               + 2 * S.params_head_matmul * (d + 1) + attention, unit="FLOP",
               description="FLOPs of the iteration: projections for every position, the head for "
                           "the decodes and the chunk's last position, plus attention" + windowed,
               reference=BOTH)
    define("hybrid_time_memory", S.hybrid_bytes / S.bandwidth, unit="s",
           description="iteration time if bandwidth were the only limit", reference=BOTH)
    define("hybrid_time_compute", S.hybrid_flops / S.flops_effective_prefill, unit="s",
           description="iteration time if compute were the only limit (at the prefill MFU, as "
                       "Lab 3 runs every iteration)", reference=LAB3)
    define("hybrid_iteration_time", Max(S.hybrid_time_memory, S.hybrid_time_compute) + S.t0,
           unit="s", description="time of one iteration mixing the chunk with the decodes "
                                 "(the slower limit, plus t0)", reference=BOTH)
    define("chunk_stall_vs_decode", S.hybrid_iteration_time / S.decode_step_time, unit="1",
           description="the hybrid iteration over a plain decode step of the batch: how much "
                       "longer the streaming users' gap is", reference=STALL)
    define("prefill_chunks", ceiling(S.prompt_tokens / S.chunk_tokens), unit="1",
           description="chunks needed to prefill one prompt", reference=STALL)


@hookimpl
def infermodel_register_headlines(register):
    register("chunked prefill", "chunk_stall_vs_decode", label="hybrid step over a decode step")


__all__ = ["ChunkedPrefill"]
