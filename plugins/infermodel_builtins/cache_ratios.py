"""The cache measured against the weights: the ratios a reader asks for directly.

The weights are read once per decode step whatever the batch; every sequence adds its
own cache to that read and to the memory it holds (Module 10, "Cache traffic limits the
batching gain"; Inference lab, "Memory that grows with every token"). Three figures put
the two side by side:

* ``kv_weight_parity_context`` = W / kv: the context at which one sequence's cache is as
  large as the weight artifact (every cached layer keeping every position; a windowed
  or fixed-state layer does not grow with every token: windows cap the growth, so such
  a model reaches parity later, a fixed state adds its size at once, so sooner, and a
  warning says which);
* ``kv_sequence_weight_ratio``: one full-length sequence's cache as a multiple of the
  weights, and ``kv_batch_weight_ratio`` the whole batch's;
* ``decode_cache_share``: the share of a decode step's bytes that is cache rather than
  weights (the cache read per step itself is ``decode_cache_read_bytes``).

A ratio between two scenarios (a 128k and a 1k context, a 16-bit and an 8-bit cache) is
``infermodel compare``'s job.
"""

from __future__ import annotations

from infermodel.plugin import S, hookimpl

from . import LAB, M10

TRAFFIC = f"{M10}, 'Cache traffic limits the batching gain'"
GROWTH = f"{LAB}, 'Memory that grows with every token'; {M10}, §3 'Derive capacity from a configuration'"
BUDGET = f"{M10}, §11 'Budget memory at the accepted maximum length'"
#: The relative difference between held and linear cache above which parity is approximate.
LINEAR_TOLERANCE = 0.01


@hookimpl
def infermodel_define_quantities(scenario, define):
    define("kv_weight_parity_context", S.weight_bytes / S.kv_bytes_per_token, unit="token",
           description="context at which one sequence's cache is as large as the weights "
                       "(W / kv, every cached layer keeping every position)",
           reference=f"{GROWTH}; {BUDGET}")
    define("kv_sequence_weight_ratio", S.kv_bytes_per_sequence / S.weight_bytes, unit="1",
           description="one full-length sequence's cache as a multiple of the weights",
           reference=f"{GROWTH}; {BUDGET}")
    define("kv_batch_weight_ratio", S.kv_bytes_total / S.weight_bytes, unit="1",
           description="the whole batch's cache at full length as a multiple of the weights",
           reference=f"{GROWTH}; {BUDGET}")
    define("decode_cache_share", (S.decode_bytes - S.weight_bytes_per_step) / S.decode_bytes,
           unit="1", description="share of a decode step's bytes that is cache, not weights",
           reference=TRAFFIC)


@hookimpl
def infermodel_check_result(result, warn):
    values = result.values
    needed = ("kv_bytes_per_sequence", "kv_bytes_per_token", "sequence_length",
              "kv_weight_parity_context")
    if not all(name in values for name in needed):
        return
    linear = values["kv_bytes_per_token"] * values["sequence_length"]
    held = values["kv_bytes_per_sequence"]
    if held > 0 and abs(linear / held - 1) > LINEAR_TOLERANCE and "kv_layers" in values:
        # Windows cap the growth (parity later, or never); a fixed state adds its size
        # from the first token (parity sooner).
        when = "later" if held < linear else "sooner"
        warn("kv_weight_parity_context",
             "this model's windowed or fixed-state layers do not grow with every token, so "
             f"one sequence holds {result.show('kv_bytes_per_sequence')} at full length, not "
             f"{result.show('kv_bytes_per_sequence', linear)}: its cache reaches the weights "
             f"{when} than kv_weight_parity_context says (kv_sequence_weight_ratio is exact)")


__all__ = ["LINEAR_TOLERANCE"]
