"""The prefix-caching lever: a stable prompt prefix computed once and reused.

``[levers.prefix_cache]`` gives the shared prefix length, the share of requests that
find it cached (hit rate) and the cache block size. Two separate effects follow, as
Module 10 insists ("keep storage sharing and traffic reuse separate"):

* **Work.** A hit skips the prefix's projections and its causal attention; the new
  tokens still attend to the whole prompt. The expected prefill time (hence ``ttft``)
  falls by the hit rate times the saving; ``prefix_ttft_cold`` and ``prefix_ttft_warm``
  show both ends.
* **Memory.** Sequences that share the prefix hold its whole blocks once (a partly
  filled block is private: copy-on-write), so ``kv_bytes_total`` shrinks and
  ``max_sequences`` grows. Decode traffic is unchanged: each sequence's queries still
  read the shared keys and values.

Only whole blocks are reused, for work as for memory; ``block_tokens = 1`` is the
ideal, token-granular model. At least the last prompt token is always computed, since
its logits give the first output token. ``prefix_cached_input_tokens`` feeds the
hosted-API cached-input price of the pricing plugin.
"""

from __future__ import annotations

import attrs
import sympy
from sympy import Max, Min, Piecewise, floor

from infermodel.plugin import S, Stage, accepts, hookimpl

from . import M10
from .shapes import terms as layer_terms

REUSE = f"{M10}, 'Reuse a stable prefix across separate requests'"
SHARE = f"{M10}, 'Share only states with the same identity' and 'Map logical positions to physical blocks'"
CASE = f"{M10}, §11 'Budget memory at the accepted maximum length' and 'Separate quiet-request latency from loaded throughput'"


@accepts("≥ 0")
def _non_negative(instance, attribute, value):
    if value < 0:
        raise ValueError(f"{attribute.name} = {value!r} must not be negative")


@accepts("0 to 1")
def _probability(instance, attribute, value):
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{attribute.name} = {value!r} is not a share in [0, 1]")


@accepts("≥ 1")
def _block(instance, attribute, value):
    if value < 1:
        raise ValueError(f"{attribute.name} = {value!r} must be at least 1 token")


@attrs.frozen
class PrefixCache:
    """A shared prompt prefix: its length, how often it is found cached, the block size."""

    prefix_tokens: int = attrs.field(validator=_non_negative,
        metadata={"description": (
            "prompt tokens every request shares at its start (system prompt, schemas,"
            " documents)")})
    hit_rate: float = attrs.field(default=1.0, validator=_probability,
        metadata={"description": "share of requests that find the prefix cached"})
    block_tokens: int = attrs.field(default=16, validator=_block,
        metadata={"description": (
            "tokens per cache block; only whole blocks are shared (1: the ideal, "
            "token-granular model)")})
    share_memory: bool = attrs.field(default=True,
        metadata={"description": (
            "hold the prefix's cache once for every sequence (false: save prefill "
            "time only)")})


@hookimpl
def infermodel_register_levers(register):
    register("prefix_cache", PrefixCache,
             description="prefix caching: a shared prompt prefix is computed once, its whole "
                         "cache blocks are shared in memory, and hits skip its prefill",
             reference=f"{REUSE}; {SHARE}")


@hookimpl
def infermodel_validate_scenario(scenario, report):
    lever = scenario.lever("prefix_cache")
    if lever is None:
        return
    prompt = scenario.value("workload.prompt_tokens")
    if lever.prefix_tokens > prompt:
        report("levers.prefix_cache.prefix_tokens",
               f"the shared prefix of {lever.prefix_tokens:,} tokens is longer than the "
               f"prompt of {prompt:,} tokens (workload.prompt_tokens)",
               expected=f"at most {prompt:,} tokens, the prefix being part of the prompt",
               suggestion="lower prefix_tokens or raise workload.prompt_tokens")


@hookimpl
def infermodel_define_quantities(scenario, define):
    lever = scenario.lever("prefix_cache")
    if lever is None:
        return
    define("prefix_tokens", lever.prefix_tokens, unit="token",
           description="tokens of the stable prefix shared by requests", reference=REUSE)
    define("prefix_hit_rate", lever.hit_rate, unit="1", latex="h",
           description="share of requests that find the prefix cached", reference=REUSE)
    define("prefix_block_tokens", lever.block_tokens, unit="token",
           description="tokens per cache block (1: the ideal, token-granular cache)",
           reference=SHARE)
    define("prefix_block_aligned_tokens",
           floor(S.prefix_tokens / S.prefix_block_tokens) * S.prefix_block_tokens, unit="token",
           description="prefix tokens in whole cache blocks (a partly filled block is not shared)",
           reference=SHARE)
    define("warm_prefix_tokens", S.prefix_block_aligned_tokens, unit="token",
           description="shared prefix the serving simulator gives its requests (whole "
                       "blocks); once computed, requests find it in the prefix cache and "
                       "prefill only what follows it", reference=SHARE)
    define("warm_prefix_hit_rate", S.prefix_hit_rate, unit="1",
           description="share of simulated requests whose prompt starts with the prefix "
                       "(a seeded draw)",
           reference=REUSE)
    define("prefix_reused_tokens", Min(S.prefix_block_aligned_tokens, S.prompt_tokens - 1),
           unit="token",
           description="prompt tokens a hit skips (whole blocks; the last prompt token is always computed)",
           reference=REUSE)
    define("prefix_effective_prefill_tokens",
           S.prompt_tokens - S.prefix_hit_rate * S.prefix_reused_tokens, unit="token",
           description="prompt tokens computed per request on average", reference=REUSE)
    r = S.prefix_reused_tokens
    arch = layer_terms(scenario)
    # Under prefill_logits = "last" the head never scored the prefix's positions.
    scored = (S.params_matmul if scenario.value("efficiency.prefill_logits") == "all"
              else S.params_matmul - S.params_head_matmul)
    define("prefix_saved_prefill_flops",
           S.batch * (2 * scored * r + arch.attention_prefill(r)), unit="FLOP",
           description="prefill FLOPs a hit skips: the prefix's projections and its causal attention",
           reference=f"{REUSE}; {CASE}")
    define("prefix_saved_prefill_bytes", S.batch * r * 4 * S.d_model * S.layers, unit="B",
           description="prefill bytes a hit skips: the prefix's activations (reading its cached "
                       "keys and values replaces writing them)", reference=REUSE)
    # Written over the base prefill times, so that any lever which scales them (MFU,
    # 8-bit activations, pipeline stages) applies to the warm prefill too.
    define("prefix_ttft_cold", Max(S.prefill_time_compute, S.prefill_time_memory) + S.t0,
           unit="s", description="time to first token when the prefix is not cached (whole prompt)",
           reference=CASE)
    define("prefix_ttft_warm",
           Max(S.prefill_time_compute * (1 - S.prefix_saved_prefill_flops / S.prefill_flops),
               S.prefill_time_memory - S.prefix_saved_prefill_bytes / S.bandwidth) + S.t0,
           unit="s", description="time to first token when the prefix is cached (new tokens only, "
                                 "attending to the whole prompt)", reference=CASE)
    define("prefix_prefill_time_saved", S.prefix_ttft_cold - S.prefix_ttft_warm, unit="s",
           description="prefill time a hit saves", reference=REUSE)
    define("prefix_cached_input_tokens", S.prefix_hit_rate * S.prefix_tokens, unit="token",
           description="input tokens per request a hosted API would bill at its cached-input price",
           reference=f"{M10}, §11 'Price output at the utilisation actually purchased'")
    if lever.share_memory:
        shared = S.prefix_block_aligned_tokens
        description = "prefix tokens held once for all sequences (whole blocks)"
    else:
        shared = sympy.Integer(0)
        description = "prefix tokens held once for all sequences (sharing switched off)"
    define("prefix_shared_tokens", shared, unit="token", description=description, reference=SHARE)
    windowed = arch.st.windows or arch.st.linear
    # Windowed layers slide past the prefix and fixed-state layers keep a state per
    # sequence: only full-attention layers keep the prefix for every sequence to share.
    per_token = S.kv_bytes_per_token * (S.kv_full_layer_share if windowed else 1)
    define("prefix_shared_bytes",
           Piecewise((per_token * S.prefix_shared_tokens, S.prefix_hit_rate > 0), (0, True)),
           unit="B", description="cache bytes of the shared prefix blocks, stored once"
                                 + (" (full-attention layers only)" if windowed else ""),
           reference=SHARE)
    define("prefix_private_tokens_per_sequence",
           S.sequence_length - S.prefix_hit_rate * S.prefix_shared_tokens, unit="token",
           description="cache positions one sequence holds privately on average at full length",
           reference=SHARE)


@hookimpl
def infermodel_transform_quantities(scenario, transform):
    lever = scenario.lever("prefix_cache")
    if lever is None:
        return
    transform.wrap("prefill_time", lambda old: old - S.prefix_hit_rate * S.prefix_prefill_time_saved,
                   reason="a cached prefix is not computed again: prefill falls by the hit rate "
                          "times the saving", reference=REUSE, order=Stage.ALGORITHMS)
    # Through the base physics' shared and per-sequence parts, so that max_sequences,
    # kv_bytes_total and any other lever built on them (offload) see the sharing.
    transform.replace("kv_bytes_shared", S.prefix_shared_bytes,
                      reason="the prefix's whole blocks are stored once and shared",
                      reference=SHARE, order=Stage.ALGORITHMS)
    transform.replace("kv_positions_per_sequence", S.prefix_private_tokens_per_sequence,
                      reason="the shared prefix's whole blocks are held once, not by each sequence",
                      reference=SHARE, order=Stage.ALGORITHMS)
    if layer_terms(scenario).st.windows or layer_terms(scenario).st.linear:
        transform.wrap("kv_bytes_per_sequence",
                       lambda old: old - S.prefix_hit_rate * S.prefix_shared_bytes,
                       reason="the full-attention layers' shared prefix blocks are stored once; "
                              "windowed layers (past the prefix at full length) and fixed states "
                              "stay private", reference=f"{SHARE}; {CASE}", order=Stage.ALGORITHMS)
    else:
        transform.replace("kv_bytes_per_sequence",
                          S.kv_bytes_per_token * S.prefix_private_tokens_per_sequence,
                          reason="shared prefix blocks are stored once, so each sequence needs "
                                 "only its private positions", reference=f"{SHARE}; {CASE}",
                          order=Stage.ALGORITHMS)


@hookimpl
def infermodel_register_headlines(register):
    register("prefix cache", "prefix_prefill_time_saved", label="prefill time a hit saves")
    register("prefix cache", "prefix_hit_rate", label="hit rate")


#: The typical setting ``infermodel rank`` applies: the share of each prompt that is a
#: stable prefix (Module 10's case: 3,000 of 4,000 tokens) and how often it is found.
TYPICAL_PREFIX_SHARE = 0.5
TYPICAL_HIT_RATE = 0.9


@hookimpl
def infermodel_register_typical_settings(register):
    def setting(result):
        prompt = int(result.scenario.value("workload.prompt_tokens"))
        if result.scenario.lever("prefix_cache") is not None or prompt < 2:
            return None
        return {"levers.prefix_cache.prefix_tokens": int(prompt * TYPICAL_PREFIX_SHARE),
                "levers.prefix_cache.hit_rate": TYPICAL_HIT_RATE}

    register("prefix caching", setting, lever="prefix_cache",
             description=f"{TYPICAL_PREFIX_SHARE:.0%} of each prompt a stable prefix (system "
                         f"prompt, schemas, documents), found cached by {TYPICAL_HIT_RATE:.0%} "
                         "of requests", reference=REUSE)


__all__ = ["PrefixCache"]
