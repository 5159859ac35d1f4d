"""Base physics: model shape, hardware, the decode and prefill roofline, memory and
capacity, basic cost and queueing sanity checks.

Every formula is stated in the source documents with its reasoning; each quantity
carries a reference to the section it comes from. Without a number-format lever,
weights and the KV cache hold 16-bit values (2 bytes each).
"""

from __future__ import annotations

from pathlib import Path

import sympy
from sympy import Piecewise, floor, oo

from infermodel.plugin import S, hookimpl

from . import LAB, M10
from .engine_memory import (
    BUDGET,
    check_memory_fraction,
    define_engine_admission,
    define_engine_reserve,
    register_engine_fields,
)
from .shapes import ffn_params, kv_bytes_per_token, stack_params, target_stack, terms
from .unevaluated import Max, Min

COUNT_OPS = f"{M10}, §1 'Count operations and traffic separately'; {LAB}, 'Two costs for one answer'"
TWO_TIMES = f"{M10}, §1 'Estimate the two times'"
ROOFLINE = f"{M10}, §2 arithmetic intensity and the roofline; {LAB}, 'Two costs for one answer'"
CACHE = f"{M10}, §3 'Derive capacity from a configuration'; {LAB}, 'Memory that grows with every token'"
WEIGHTS = f"{M10}, §11 'Account for the whole weight artifact'"
PRICE = f"{M10}, §11 'Price output at the utilisation actually purchased'; {LAB}, 'What it costs to keep it running'"
QUEUE = f"{M10}, §12 'Queueing rises sharply near saturation'"
LAB1 = f"{M10}, Lab 1"

PRESETS = Path(__file__).parent / "presets"


# ---------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------


@hookimpl
def infermodel_register_presets(register):
    register("model", PRESETS / "models")
    register("hardware", PRESETS / "hardware")
    register("efficiency", PRESETS / "efficiency")


@hookimpl
def infermodel_register_fields(register):
    def model(name, kind, description, **kw):
        register("model", name, kind=kind, description=description, **kw)

    model("layers", "int", "number of decoder blocks", minimum=1, quantity="layers")
    model("d_model", "int", "model width (hidden size)", minimum=1, quantity="d_model")
    model("heads", "int", "query heads per layer", minimum=1, quantity="heads")
    model("kv_heads", "int", "key/value heads per layer (default: heads, i.e. multi-head attention)",
          minimum=1, default=None, quantity="kv_heads")
    model("head_dim", "int", "width of one attention head (default: d_model / heads)",
          minimum=1, default=None, quantity="head_dim")
    model("d_ff", "int", "feed-forward (intermediate) width", minimum=1, quantity="d_ff")
    model("ffn", "choice", 'feed-forward kind: "swiglu" (3 matrices) or "gelu" (2 matrices)',
          choices=("swiglu", "gelu"), default="swiglu")
    model("vocab", "int", "vocabulary size", minimum=1, quantity="vocab")
    model("tied_embeddings", "bool", "the output head shares the input embedding table",
          default=False)
    model("experts", "int", "routed experts per MoE layer (1: a dense model)", minimum=1,
          default=1, quantity="experts")
    model("active_experts", "int", "routed experts each token uses", minimum=1, default=1,
          quantity="active_experts")
    model("shared_experts", "int", "experts every token uses in addition to the routed ones",
          minimum=0, default=0, quantity="shared_experts")
    model("expert_d_ff", "int", "intermediate width of one expert (default: d_ff)", minimum=1,
          default=None, quantity="expert_d_ff")
    model("weight_bytes", "quantity", "size of the weight artifact, overriding the derived size",
          unit="B", minimum=0, exclusive_minimum=True, default=None, quantity="weight_bytes")

    def hardware(name, kind, description, **kw):
        register("hardware", name, kind=kind, description=description, **kw)

    hardware("memory", "quantity", "memory of one card", unit="B", minimum=0,
             exclusive_minimum=True, quantity="card_memory")
    hardware("bandwidth", "quantity", "peak memory bandwidth of one card", unit="B/s",
             minimum=0, exclusive_minimum=True, quantity="card_bandwidth")
    hardware("flops", "quantity", "dense peak compute of one card", unit="FLOP/s", minimum=0,
             exclusive_minimum=True, quantity="card_flops")
    hardware("count", "int", "number of cards; memory, bandwidth and compute add ideally",
             minimum=1, default=1, quantity="card_count")
    hardware("price_per_hour", "quantity", "rental price of one card for one hour", unit="USD/h",
             minimum=0, default=None, quantity="price_per_card_hour")
    hardware("power", "quantity", "power drawn by one card under load", unit="W", minimum=0,
             default=None, quantity="card_power")
    hardware("reserve", "size_or_fraction",
             "memory kept back for the runtime, activations included: a size (\"2.5 GB\") or a "
             "fraction of memory (0.1); unset: the engine's own reserve and activation workspace "
             "(efficiency.engine)", default=None)

    def workload(name, kind, description, **kw):
        register("workload", name, kind=kind, description=description, **kw)

    workload("batch", "int", "sequences decoded together", minimum=1, default=1, quantity="batch")
    workload("prompt_tokens", "int", "tokens in each prompt", minimum=1, quantity="prompt_tokens")
    workload("output_tokens", "int", "tokens generated for each request", minimum=1,
             quantity="output_tokens")
    workload("context", "float", "mean context during decode (default: prompt + output / 2)",
             minimum=0, default=None, quantity="context")
    workload("sequence_length", "int",
             "tokens a sequence holds at its longest (default: prompt + output)", minimum=1,
             default=None, quantity="sequence_length")
    workload("requests_per_day", "float", "request volume per day", minimum=0, default=None)
    workload("requests_per_month", "float", "request volume per month (30.4375 days)", minimum=0,
             default=None)

    def efficiency(name, kind, description, **kw):
        register("efficiency", name, kind=kind, description=description, **kw)

    efficiency("prefill_mfu", "float", "fraction of peak compute reached in prefill", minimum=0,
               exclusive_minimum=True, maximum=1, default=1.0, quantity="prefill_mfu")
    efficiency("decode_mfu", "float", "fraction of peak compute reached in decode", minimum=0,
               exclusive_minimum=True, maximum=1, default=1.0, quantity="decode_mfu")
    efficiency("mbu", "float", "fraction of peak memory bandwidth reached", minimum=0,
               exclusive_minimum=True, maximum=1, default=1.0, quantity="mbu")
    efficiency("t0", "quantity", "fixed time per step (kernel launches, sampling)", unit="s",
               minimum=0, default=0.0, quantity="t0")
    register_engine_fields(efficiency)

    register("pricing", "utilisation", kind="float", minimum=0, exclusive_minimum=True, maximum=1,
             default=1.0, quantity="utilisation",
             description="share of paid hours the service is busy")


@hookimpl
def infermodel_validate_scenario(scenario, report):
    heads = scenario.value("model.heads")
    kv_heads = scenario.value("model.kv_heads")
    if kv_heads is not None and heads % kv_heads:
        # Point at the value the scenario wrote, not at the preset line it overrides.
        key = ("model.heads" if scenario.given("model.heads") and not scenario.given("model.kv_heads")
               else "model.kv_heads")
        report(key, f"kv_heads = {kv_heads} does not divide heads = {heads}",
               expected="a divisor of heads (grouped-query attention shares whole groups)")
    kind, amount = scenario.value("hardware.reserve") or ("fraction", 0.0)
    if kind == "bytes" and amount >= scenario.value("hardware.memory"):
        report("hardware.reserve", f"the reserve ({amount / 1e9:g} GB) is not smaller than the "
               f"card's memory ({scenario.value('hardware.memory') / 1e9:g} GB)",
               expected="a reserve smaller than one card's memory")
    check_memory_fraction(scenario, report)
    experts = scenario.value("model.experts")
    active = scenario.value("model.active_experts")
    if active > experts:
        report("model.active_experts", f"active_experts = {active} exceeds experts = {experts}",
               expected=f"at most {experts}")
    if (scenario.value("workload.requests_per_day") is not None
            and scenario.value("workload.requests_per_month") is not None):
        report("workload.requests_per_month",
               "give either requests_per_day or requests_per_month, not both")
    context = scenario.value("workload.context")
    length = scenario.value("workload.sequence_length")
    if context is not None and length is not None and context > length:
        report("workload.context", f"mean decode context {context:g} exceeds sequence_length {length}",
               expected=f"at most {length}")


@hookimpl
def infermodel_register_headlines(register):
    for group, rows in HEADLINES.items():
        for name, label in rows:
            # An engine preset's calibrated interval (the efficiency plugin's quantities).
            interval = ((f"{name}_expected_low", f"{name}_expected_high")
                        if name in INTERVALS else None)
            register(group, name, label=label, interval=interval)


#: Headlines an efficiency preset's held-out errors give an interval.
INTERVALS = ("ttft", "tpot", "tokens_per_s_total")


#: What ``infermodel run`` shows first: a planner's answer at a glance.
HEADLINES = {
    "memory": (("weight_bytes", "weights"),
               ("kv_bytes_per_sequence", "KV cache per full-length sequence"),
               ("memory_required", "weights + batch cache + reserve"),
               ("max_sequences", "most full-length sequences that fit"),
               ("fits", "the batch fits")),
    "latency": (("ttft", "time to first token, one request"),
                ("ttft_batch", "time to first token, whole batch prefilled"),
                ("tpot", "time per output token"),
                ("e2e_latency", "end-to-end, one request")),
    "throughput": (("tokens_per_s_per_user", "output tokens/s one user sees"),
                   ("tokens_per_s_total", "output tokens/s of the batch"),
                   ("tokens_per_s_at_capacity", "output tokens/s with the cache full")),
    # Each price says what it assumes: the batch's busy rates, every paid hour divided by
    # the utilisation (the rate meeting latency objectives is `simulate --capacity`'s and
    # `plan`'s).
    "cost": (("cost_per_hour", "rent of the cards per hour"),
             ("cost_per_million_output_tokens",
              "per 1M output tokens (decode time only), busy ÷ utilisation"),
             ("cost_per_million_tokens", "per 1M tokens in + out (prefill paid), busy ÷ utilisation")),
    "assumptions": (("prefill_mfu", "prefill MFU"), ("decode_mfu", "decode MFU"),
                    ("mbu", "MBU"), ("t0", "t0"), ("memory_reserved", "reserve"),
                    ("utilisation", "utilisation")),
}


# ---------------------------------------------------------------------------------
# Quantities
# ---------------------------------------------------------------------------------


@hookimpl
def infermodel_define_quantities(scenario, define):
    layer_terms = terms(scenario)
    _model(scenario, define, layer_terms)
    _hardware(scenario, define)
    _workload(scenario, define)
    _decode(define, layer_terms)
    _prefill(scenario, define, layer_terms)
    _memory(scenario, define, layer_terms)
    _cost(scenario, define)


def _model(scenario, define, terms):
    value = scenario.value
    if value("model.kv_heads") is None:
        define("kv_heads", S.heads, unit="1", description="key/value heads per layer (multi-head attention)",
               reference=CACHE)
    if value("model.head_dim") is None:
        define("head_dim", S.d_model / S.heads, unit="1", description="width of one attention head",
               reference=CACHE)
    if value("model.expert_d_ff") is None:
        define("expert_d_ff", S.d_ff, unit="1", description="intermediate width of one expert")
    define("query_width", S.heads * S.head_dim, unit="1", latex="d_q",
           description="query width d_q = heads · head_dim", reference=COUNT_OPS)
    matrices = 3 if value("model.ffn") == "swiglu" else 2
    define("ffn_matrices", matrices, unit="1",
           description=f"matrices in one feed-forward block ({value('model.ffn')})", reference=WEIGHTS)
    # The shape library's uniform stack, unless the layer model says otherwise.
    stack = stack_params(target_stack(scenario))
    attention_params = stack.attention if terms.plain else S.params_attention_stack
    define("params_attention", attention_params,
           unit="param", description="attention projection weights (Q, K, V, O) in all layers",
           reference=WEIGHTS)
    ffn_all, ffn_active = ffn_params(scenario) or (stack.ffn, stack.ffn_active)
    define("params_ffn", ffn_all,
           unit="param", description="feed-forward weights in all layers (every expert)",
           reference=WEIGHTS)
    define("params_ffn_active", ffn_active,
           unit="param", description="feed-forward weights one token uses",
           reference=f"{M10}, mixture-of-experts paragraph")
    define("params_block_linear", S.params_attention + S.params_ffn, unit="param",
           description="weights of the block linears (attention and feed-forward)", reference=WEIGHTS)
    define("params_norm", stack.norms if terms.plain else terms.block_norms() + S.params_norm_attention,
           unit="param",
           description="normalisation weights (two per block and a final one)", reference=WEIGHTS)
    define("params_embedding", stack.embedding, unit="param",
           description="input embedding table", reference=WEIGHTS)
    tied = value("model.tied_embeddings")
    define("params_head", stack.head, unit="param",
           description="output head weights" + (" (tied to the embedding table)" if tied else ""),
           reference=WEIGHTS)
    define("params_total", S.params_block_linear + S.params_norm + S.params_embedding + S.params_head,
           unit="param", latex="N", description="all parameters N", reference=WEIGHTS)
    define("params_active",
           S.params_attention + S.params_ffn_active + S.params_norm + S.params_embedding + S.params_head,
           unit="param", description="parameters one token uses (all of them unless MoE)",
           reference=f"{M10}, mixture-of-experts paragraph")
    # An untied input table is a lookup, not a matrix multiply.
    define("params_matmul", S.params_active - (0 if tied else S.params_embedding), unit="param",
           latex=r"N_{\mathrm{matmul}}",
           description="weights multiplied per token (excludes an untied input embedding)",
           reference=COUNT_OPS)
    define("weight_value_bytes", 2, unit="B",
           description="bytes per weight value (16-bit without a number-format lever)")
    if value("model.weight_bytes") is None:
        define("weight_bytes", S.params_total * S.weight_value_bytes, unit="B", latex="W",
               description="size of the weight artifact W", reference=WEIGHTS)
    _embedding_reads(scenario, define)
    rows = _reads_rows(scenario)
    if value("model.experts") > 1:
        define("weight_bytes_per_step", S.weight_bytes * S.params_active / S.params_total
               - (S.embedding_bytes_unread if rows else 0), unit="B",
               description="weight bytes read per decode step (active experts at batch 1"
                           + ("; embedding rows, not the table)" if rows else ")"),
               reference=f"{M10}, mixture-of-experts paragraph" + (f"; {ROWS}" if rows else ""))
    elif rows:
        define("weight_bytes_per_step", S.weight_bytes - S.embedding_bytes_unread, unit="B",
               description="weight bytes read per decode step (the input embedding rows used, "
                           "not the whole table)", reference=f"{TWO_TIMES}; {ROWS}")
    else:
        define("weight_bytes_per_step", S.weight_bytes, unit="B",
               description="weight bytes read per decode step (the whole artifact, input table "
                           "included: the documents' convention)", reference=TWO_TIMES)
    define("kv_value_bytes", 2, unit="B",
           description="bytes per cached key or value element (16-bit without a number-format lever)")
    per_token = (kv_bytes_per_token(S.layers, S.kv_heads * S.head_dim, S.kv_value_bytes) if terms.plain
                 else S.kv_layers * S.kv_values_per_layer_token * S.kv_value_bytes)
    if terms.st.indexer:
        # DeepSeek Sparse Attention: the indexer's FP8 keys, in the cache's own format or not.
        per_token += S.kv_layers * S.index_cache_bytes
    define("kv_bytes_per_token", per_token, unit="B", latex=r"\mathrm{kv}",
           description="KV-cache bytes per token of one sequence (keys and values, every layer)",
           reference=CACHE)


def _hardware(scenario, define):
    define("memory_bytes", S.card_memory * S.card_count, unit="B", latex="M",
           description="memory of all cards together", reference=f"{M10}, §4")
    define("bandwidth", S.card_bandwidth * S.card_count * S.mbu, unit="B/s", latex=r"\mathrm{BW}",
           description="memory bandwidth reached (all cards, times MBU)", reference=ROOFLINE)
    define("flops_peak", S.card_flops * S.card_count, unit="FLOP/s", latex="F",
           description="dense peak compute of all cards", reference=ROOFLINE)
    define("flops_effective_prefill", S.flops_peak * S.prefill_mfu, unit="FLOP/s",
           description="compute reached in prefill (peak times prefill MFU)", reference=TWO_TIMES)
    define("flops_effective_decode", S.flops_peak * S.decode_mfu, unit="FLOP/s",
           description="compute reached in decode (peak times decode MFU)", reference=TWO_TIMES)
    define("ridge_intensity", S.flops_peak / S.bandwidth, unit="FLOP/B", latex="I^*",
           description="arithmetic intensity where compute and bandwidth limits meet", reference=ROOFLINE)
    define_engine_admission(scenario, define)
    if scenario.value("hardware.reserve") is None:
        define_engine_reserve(scenario, define)
        return
    kind, amount = scenario.value("hardware.reserve")
    define("reserve_fraction", amount if kind == "fraction" else 0.0, unit="1",
           description="share of memory kept back for the runtime", reference=BUDGET)
    define("reserve_bytes", amount if kind == "bytes" else 0.0, unit="B",
           description="memory kept back for the runtime, as a size", reference=BUDGET)
    # Every card keeps its own runtime reserve (engine context and workspaces live on each).
    define("memory_reserved", (S.reserve_bytes + S.reserve_fraction * S.card_memory) * S.card_count,
           unit="B", description="memory kept back on every card for engine context, workspaces "
                                 "and the allocator", reference=BUDGET)


def _workload(scenario, define):
    if scenario.value("workload.context") is None:
        define("context", S.prompt_tokens + S.output_tokens / 2, unit="token", latex="L",
               description="mean context during decode", reference=TWO_TIMES)
    if scenario.value("workload.sequence_length") is None:
        define("sequence_length", S.prompt_tokens + S.output_tokens, unit="token",
               description="tokens one sequence holds at its longest", reference=BUDGET)


def _decode(define, terms):
    if not (terms.st.windows or terms.st.linear):
        # (with windowed or fixed-state layers the architecture plugin defines it)
        define("kv_bytes_read_per_sequence", S.context * S.kv_bytes_per_token, unit="B",
               description="cache bytes one sequence's decode step reads at the mean context",
               reference=ROOFLINE)
    define("decode_bytes", S.weight_bytes_per_step + S.batch * terms.cache_read(S.context),
           unit="B", description="bytes read per decode step: weights plus every sequence's cache",
           reference=ROOFLINE)
    attention = terms.attention_decode(S.context)
    define("decode_flops", S.batch * (2 * S.params_matmul + attention), unit="FLOP",
           description="FLOPs per decode step: projections plus attention over the context",
           reference=COUNT_OPS)
    define("decode_time_memory", S.decode_bytes / S.bandwidth, unit="s",
           description="decode step time if bandwidth were the only limit", reference=ROOFLINE)
    define("decode_time_compute", S.decode_flops / S.flops_effective_decode, unit="s",
           description="decode step time if compute were the only limit", reference=ROOFLINE)
    define("decode_step_time", Max(S.decode_time_memory, S.decode_time_compute) + S.t0, unit="s",
           description="time of one decode step (the slower limit, plus t0)", reference=ROOFLINE)
    define("decode_intensity", S.decode_flops / S.decode_bytes, unit="FLOP/B",
           description="arithmetic intensity of a decode step", reference=ROOFLINE)
    define("decode_compute_bound", sympy.Ge(S.decode_time_compute, S.decode_time_memory), unit="bool",
           description="decode is limited by compute rather than bandwidth", reference=ROOFLINE)
    define("tpot", S.decode_step_time, unit="s", latex=r"\mathrm{TPOT}",
           description="time per output token after the first", reference=TWO_TIMES)
    define("tokens_per_s_per_user", 1 / S.decode_step_time, unit="token/s",
           description="decode speed one user sees", reference=ROOFLINE)
    define("tokens_per_s_total", S.batch / S.decode_step_time, unit="token/s",
           description="decode tokens per second across the batch", reference=ROOFLINE)
    define("critical_batch_bracket",
           (2 * S.params_matmul + attention) / S.flops_effective_decode
           - terms.cache_read(S.context) / S.bandwidth, unit="s",
           description="compute time minus cache-read time per added sequence (≤ 0: never compute-bound)",
           reference=ROOFLINE)
    define("critical_batch",
           Piecewise(((S.weight_bytes_per_step / S.bandwidth) / S.critical_batch_bracket,
                      S.critical_batch_bracket > 0), (oo, True)),
           unit="seq", latex="B^*",
           description="batch at which decode turns compute-bound (∞: the cache keeps it memory-bound)",
           reference=ROOFLINE)


def _prefill(scenario, define, terms):
    n = S.prompt_tokens
    _prefill_flops(scenario, define, terms)
    weights = S.weight_bytes - S.embedding_bytes_unread_prefill if _reads_rows(scenario) else S.weight_bytes
    define("prefill_bytes", weights + S.batch * n * (S.kv_bytes_per_token + 4 * S.d_model * S.layers),
           unit="B", description="bytes moved in prefill: weights once, cache writes and activations"
                                 + (" (input embedding: the rows used)" if _reads_rows(scenario) else ""),
           reference=f"{LAB}, 'Two costs for one answer'")
    define("prefill_time_compute", S.prefill_flops / S.flops_effective_prefill, unit="s",
           description="prefill time if compute were the only limit", reference=TWO_TIMES)
    define("prefill_time_memory", S.prefill_bytes / S.bandwidth, unit="s",
           description="prefill time if bandwidth were the only limit", reference=ROOFLINE)
    define("prefill_time", Max(S.prefill_time_compute, S.prefill_time_memory) + S.t0, unit="s",
           description="time to prefill the batch's prompts in one pass", reference=TWO_TIMES)
    define("prefill_intensity", S.prefill_flops / S.prefill_bytes, unit="FLOP/B",
           description="arithmetic intensity of prefill", reference=ROOFLINE)
    # One request's TTFT is its own prompt's prefill (a continuous-batching engine admits
    # it alone); the batch's prompts prefilled in one pass is a separate figure.
    define("ttft", S.prefill_time, unit="s", latex=r"\mathrm{TTFT}", at={"batch": 1},
           description="time to first token of one request alone (its own prompt's prefill)",
           reference=TWO_TIMES)
    define("ttft_batch", S.prefill_time, unit="s", latex=r"\mathrm{TTFT}_B",
           description="time to first token when the batch's prompts are prefilled together",
           reference=TWO_TIMES)
    define("e2e_latency", S.ttft + (S.output_tokens - 1) * S.tpot, unit="s",
           description="end-to-end latency of one request: TTFT plus the remaining tokens",
           reference=TWO_TIMES)


def _memory(scenario, define, terms):
    define("memory_usable", S.memory_bytes - S.memory_reserved, unit="B",
           description="memory left for weights and cache after the reserve", reference=BUDGET)
    define("kv_budget_bytes", S.memory_usable - S.weight_bytes, unit="B",
           description="memory left for the KV cache", reference=BUDGET)
    # Per-sequence and shared parts are separate quantities so that levers compose:
    # prefix sharing moves bytes into the shared part, offload moves the per-sequence part.
    define("kv_bytes_per_sequence", terms.cache_held(S.sequence_length), unit="B",
           description="KV-cache bytes one sequence holds on its own at full length",
           reference=CACHE)
    # The positions those bytes are spread over: the serving simulator stores each cached
    # position of a request at kv_bytes_per_sequence / kv_positions_per_sequence, so a
    # lever that shrinks a sequence's cache (an eviction rule, a compressed format)
    # changes the simulated capacity too; a lever that shares positions lowers both.
    define("kv_positions_per_sequence", S.sequence_length, unit="token",
           description="positions of one full-length sequence whose cache it holds on its own "
                       "(sequence_length; a lever that shares positions lowers it)",
           reference=CACHE)
    define("kv_bytes_shared", 0, unit="B",
           description="KV-cache bytes stored once and shared by every sequence (none unless "
                       "a lever shares them)", reference=CACHE)
    define("kv_bytes_total", S.kv_bytes_shared + S.kv_bytes_per_sequence * S.batch, unit="B",
           description="KV cache of the whole batch at full length", reference=CACHE)
    define("memory_required", S.weight_bytes + S.kv_bytes_total + S.memory_reserved, unit="B",
           description="weights, full-length cache and reserve", reference=BUDGET)
    define("fits", sympy.Le(S.memory_required, S.memory_bytes), unit="bool",
           description="the batch fits in memory at full length", reference=BUDGET)
    define("max_sequences",
           Max(0, floor((S.kv_budget_bytes - S.kv_bytes_shared) / S.kv_bytes_per_sequence)), unit="seq",
           description="most full-length sequences the cache budget holds", reference=BUDGET)
    define("max_context", terms.max_context(S.kv_budget_bytes, S.batch),
           unit="token", description="longest context each of the batch's sequences can reach",
           reference=CACHE)
    full = Max(1, S.max_sequences)
    # Memory and compute apart, as for the decode step, so that a lever can change one.
    define("capacity_time_memory",
           (S.weight_bytes_per_step + full * terms.cache_read(S.context)) / S.bandwidth, unit="s",
           description="decode step time with the cache full if bandwidth were the only limit",
           reference=LAB1)
    define("capacity_time_compute",
           full * (2 * S.params_matmul + terms.attention_decode(S.context)) / S.flops_effective_decode,
           unit="s", description="decode step time with the cache full if compute were the only limit",
           reference=LAB1)
    define("capacity_step_time", Max(S.capacity_time_memory, S.capacity_time_compute) + S.t0,
           unit="s", description="decode step time with the cache full (max_sequences, at least 1)",
           reference=LAB1)
    # Zero when not even one full-length sequence fits (Lab 1 divides B by the step at
    # max(1, B)).
    define("tokens_per_s_at_capacity", Max(0, S.max_sequences) / S.capacity_step_time,
           unit="token/s", description="decode tokens per second with the cache full", reference=LAB1)


def _cost(scenario, define):
    value = scenario.value
    if value("hardware.price_per_hour") is not None:
        define("cost_per_hour", S.price_per_card_hour * S.card_count, unit="USD/h",
               description="rental price of all cards per hour", reference=PRICE)
        # Written unevaluated, so the formula shows as stated, not as 2500·cost/(9·...).
        with sympy.evaluate(False):
            per_million_output = (S.cost_per_hour * 10**6
                                  / (3600 * S.tokens_per_s_total * S.utilisation))
            per_million = (S.cost_per_hour * S.device_seconds_per_request * 10**6
                           / (3600 * S.utilisation * (S.prompt_tokens + S.output_tokens)))
        define("cost_per_million_output_tokens", per_million_output, unit="USD",
               description="price of a million output tokens at the decode throughput and utilisation",
               reference=PRICE)
        define("cost_per_request", S.cost_per_million_output_tokens * S.output_tokens / 10**6,
               unit="USD", description="output-token cost of one request", reference=PRICE)
        # The whole bill: the batch's prompts are prefilled, then decoded; each of its
        # requests pays a share of both, and every token it moves (input and output) counts.
        define("device_seconds_per_request",
               (S.ttft_batch + (S.output_tokens - 1) * S.tpot) / S.batch, unit="s",
               description="card time one request occupies: its share of the batch's prefill "
                           "and decode", reference=PRICE)
        define("cost_per_million_tokens", per_million, unit="USD", description="price of a million tokens, input and output together, "
                                       "prefill and decode time both paid, at the utilisation",
               reference=PRICE)
    if value("hardware.power") is not None:
        define("power_total", S.card_power * S.card_count, unit="W",
               description="power drawn by all cards", reference=PRICE)
        define("energy_per_token", S.power_total / S.tokens_per_s_total, unit="J",
               description="energy per output token at the decode throughput", reference=PRICE)
    per_day = value("workload.requests_per_day")
    per_month = value("workload.requests_per_month")
    if per_day is not None or per_month is not None:
        if per_day is not None:
            define("requests_per_day", per_day, unit="1", description="requests per day")
        else:
            define("requests_per_month", per_month, unit="1", description="requests per month")
            define("requests_per_day", S.requests_per_month / sympy.Rational(4870, 160), unit="1",
                   description="requests per day (a month is 30.4375 days)")
        define("arrival_rate", S.requests_per_day / 86400, unit="1/s",
               description="mean arrival rate λ", reference=QUEUE)
        define("requests_in_system", S.arrival_rate * S.e2e_latency, unit="1",
               description="Little's law: mean requests in the system L = λ·W", reference=QUEUE)
        define("slot_utilisation", S.requests_in_system / S.batch, unit="1",
               description="share of the batch's slots busy on average (ρ)", reference=QUEUE)
        define("mm1_time_in_system",
               Piecewise((S.e2e_latency / (1 - S.slot_utilisation), S.slot_utilisation < 1), (oo, True)),
               unit="s", description="M/M/1 knee S/(1 − ρ): mean time in system near saturation",
               reference=QUEUE)


# ---------------------------------------------------------------------------------
# Engine conventions: what a serving engine computes, reads and keeps back
# ---------------------------------------------------------------------------------
# Defaults follow vLLM, SGLang and TensorRT-LLM; the documents' simplifications stay
# available as stated conventions (the Module 10 and Inference lab scenarios state them):
#   efficiency.prefill_logits  "last" (engines) | "all" (every prompt position: the documents)
#   efficiency.embedding_reads "rows" (engines) | "table" (the whole input table every step)
#   hardware.reserve unset     the engine's reserve plus the activation workspace


LOGITS = ("vLLM, SGLang and TensorRT-LLM compute the output head only for each sequence's "
          "last prompt position unless prompt log-probabilities are requested")
ROWS = f"{M10}, §1 'Why the simple byte estimate is useful' (the input embedding is a row lookup)"


def _reads_rows(scenario) -> bool:
    return (scenario.value("efficiency.embedding_reads") == "rows"
            and not scenario.value("model.tied_embeddings"))


def _embedding_reads(scenario, define):
    if scenario.value("model.weight_bytes") is None:
        table = S.params_embedding * S.weight_value_bytes
    else:
        table = S.weight_bytes * S.params_embedding / S.params_total
    define("embedding_table_bytes", table, unit="B",
           description="bytes of the input embedding table", reference=WEIGHTS)
    define("embedding_row_bytes", S.embedding_table_bytes / S.vocab, unit="B",
           description="bytes of one row of the input embedding table (one token's vector)",
           reference=ROWS)
    if _reads_rows(scenario):
        define("embedding_bytes_unread",
               (S.vocab - Min(S.batch, S.vocab)) * S.embedding_row_bytes, unit="B",
               description="input-table bytes a decode step does not read (all but the batch's rows)",
               reference=ROWS)
        define("embedding_bytes_unread_prefill",
               (S.vocab - Min(S.batch * S.prompt_tokens, S.vocab)) * S.embedding_row_bytes,
               unit="B", description="input-table bytes prefill does not read (all but one row per "
                                     "prompt token)", reference=ROWS)
    else:
        why = ("tied: the table is read once, as the head" if scenario.value("model.tied_embeddings")
               else "the documents' convention: the whole table is read")
        define("embedding_bytes_unread", 0, unit="B",
               description=f"input-table bytes a decode step does not read ({why})", reference=ROWS)
        define("embedding_bytes_unread_prefill", 0, unit="B",
               description=f"input-table bytes prefill does not read ({why})", reference=ROWS)


def _prefill_flops(scenario, define, terms):
    n = S.prompt_tokens
    define("params_head_matmul", S.vocab * S.d_model, unit="param",
           description="weights the output head multiplies for one scored position (vocab · d)",
           reference=COUNT_OPS)
    if scenario.value("efficiency.prefill_logits") == "all":
        define("prefill_logit_positions", n, unit="token",
               description="prompt positions per sequence the head scores (all: the documents' "
                           "convention, prompt log-probabilities)", reference=COUNT_OPS)
        define("prefill_flops",
               S.batch * (2 * S.params_matmul * n + terms.attention_prefill(n)), unit="FLOP",
               description="FLOPs to prefill the batch's prompts (causal attention: half the square; "
                           "the head scores every prompt position)", reference=COUNT_OPS)
        return
    define("prefill_logit_positions", 1, unit="token",
           description="prompt positions per sequence the head scores (the last one, as serving "
                       "engines do)", reference=LOGITS)
    define("prefill_flops",
           S.batch * (2 * (S.params_matmul - S.params_head_matmul) * n
                      + 2 * S.params_head_matmul * S.prefill_logit_positions
                      + terms.attention_prefill(n)), unit="FLOP",
           description="FLOPs to prefill the batch's prompts (causal attention: half the square; "
                       "the head scores the last position only)", reference=f"{COUNT_OPS}; {LOGITS}")


@hookimpl
def infermodel_transform_quantities(scenario, transform):
    # A stated reserve (0 included) is the scenario's own choice; only a reserve left to
    # an engine that keeps nothing back is worth a warning.
    if scenario.value("hardware.reserve") is None and scenario.value("efficiency.engine") == "none":
        transform.warn('efficiency.engine = "none" and no hardware.reserve stated: no memory is '
                       "kept back for the runtime or activations; a vLLM engine keeps 10 % of each "
                       "card plus the activation workspace, so capacity is overstated by about that",
                       quantity="memory_reserved")


# ---------------------------------------------------------------------------------
# Warnings: what a reader must know about the figures
# ---------------------------------------------------------------------------------

#: An MBU that serving engines commonly reach, used to size the missing-efficiency warning.
EXAMPLE_MBU = 0.8


@hookimpl
def infermodel_check_result(result, warn):
    scenario = result.scenario
    if not result["fits"]:
        warn("fits", f"the batch of {result['batch']:g} does not fit: it needs "
                     f"{result.show('memory_required')} of {result.show('memory_bytes')} and at "
                     f"most {result['max_sequences']:g} full-length sequences fit, so this "
                     "batch's speed and cost cannot be reached")
    if not scenario.given("efficiency") and all(
            result[name] == 1 for name in ("prefill_mfu", "decode_mfu", "mbu")):
        slower = 1 / EXAMPLE_MBU - 1
        warn("mbu", "no [efficiency] stated: every card is assumed to reach its peak compute "
                    "and bandwidth (prefill_mfu = decode_mfu = mbu = 1), which engines do not; "
                    f"at mbu = {EXAMPLE_MBU:g} a bandwidth-bound decode step takes {slower:.0%} "
                    f"longer (tpot {result.show('tpot', result['tpot'] / EXAMPLE_MBU)} instead "
                    f"of {result.show('tpot')})")
