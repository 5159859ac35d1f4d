"""An engine's memory: its fields, the share it keeps back and its activation workspace
(not a plugin: the base physics plugin registers the fields and defines the quantities
through these functions).

* :func:`register_engine_fields` — the ``[efficiency]`` fields of the engine's conventions
  (which prompt positions are scored, which embedding rows are read), its name, scheduler
  limits and memory flag (``memory_fraction``);
* :func:`check_memory_fraction` — a memory flag no engine applies is an error;
* :func:`define_engine_admission` — whether it admits requests on demand or only at
  full length, and whether a prompt's prefill shares its iteration with the decodes;
* :func:`define_engine_reserve` — the chunk the activation workspace is sized for, the
  workspace, the share the engine leaves outside its budget and the memory it reserves
  by its rule (:data:`.engines.ENGINES`).
"""

from __future__ import annotations

import sympy

from infermodel.plugin import S

from . import LAB, M10
from .engines import (
    ADMISSION,
    ADMISSIONS,
    ENGINES,
    MIXED_BATCHES,
    scenario_batching,
    scenario_scheduler,
)
from .unevaluated import Max, Min

BUDGET = f"{M10}, §11 'Budget memory at the accepted maximum length'; {LAB}, 'What it costs to keep it running'"


def register_engine_fields(efficiency) -> None:
    """Declare the ``[efficiency]`` fields of the engine's conventions, memory and
    scheduler (``efficiency``: the physics plugin's ``register`` for that table).
    """
    efficiency("prefill_logits", "choice",
               'positions the output head scores in prefill: "last" (each sequence\'s last prompt '
               'position, what serving engines do) or "all" (every prompt position: prompt '
               'log-probabilities, the documents\' convention)', choices=("last", "all"),
               default="last")
    efficiency("embedding_reads", "choice",
               'what a step reads of an untied input embedding table: "rows" (the rows of the '
               'tokens in the step, what engines do) or "table" (the whole table, the documents\' '
               'convention); a tied table is read once, as the head', choices=("rows", "table"),
               default="rows")
    efficiency("engine", "choice",
               "serving engine whose memory defaults (when hardware.reserve is unset), scheduler "
               "defaults and fitted efficiencies apply: "
               + ", ".join(f'"{name}"' for name in ENGINES), choices=tuple(ENGINES), default="vllm")
    efficiency("prefill_chunk", "int",
               "tokens per iteration, the engine's chunk budget (vLLM max_num_batched_tokens, SGLang "
               "chunked_prefill_size, TensorRT-LLM max_num_tokens); the activation workspace is "
               "sized for it (default: the engine's, by card)", minimum=1, default=None)
    efficiency("max_sequences", "int",
               "most sequences the engine runs at once (vLLM max_num_seqs, SGLang "
               "max_running_requests, TensorRT-LLM max_batch_size; default: the engine's, by "
               "card; under the physical model it caps "
               "max_sequences)", minimum=1, default=None)
    efficiency("chunked_prefill", "bool",
               "the engine splits prompts into chunks that share iterations with decodes "
               "(default: the engine's)", default=None)
    efficiency("block_size", "int", "tokens per KV-cache block (default: the engine's)",
               minimum=1, default=None)
    efficiency("graph_max_batch", "int",
               "largest decode batch the engine captures as a CUDA graph, 0 for none (default: "
               "the engine's, by card and tensor degree)", minimum=0, default=None)
    efficiency("admission", "choice",
               'how the engine admits a request into its KV cache: "paged" (on demand: the '
               "prompt's blocks now, more as the output grows, a running request preempted when "
               'none is free; vLLM, SGLang) or "reserve" (only when the prompt and its whole '
               "requested output fit; TensorRT-LLM's default GUARANTEED_NO_EVICT policy, "
               "MAX_UTILIZATION being its paged one); default: the engine's",
               choices=ADMISSIONS, default=None)
    efficiency("mixed_batches", "bool",
               "a prompt's prefill runs in the same iteration as the running sequences' decodes "
               "(vLLM V1, TensorRT-LLM's in-flight batching; SGLang only with its "
               "enable_mixed_chunk server argument); default: the engine's", default=None)
    efficiency("memory_fraction", "float",
               "share of each card the engine's budget may take, as its own flag states it: "
               "vLLM gpu_memory_utilization (of the whole card, the activation peak inside), "
               "SGLang mem_fraction_static (weights and KV pool), TensorRT-LLM "
               "free_gpu_memory_fraction (of the memory free after weights and activations); "
               "the rest is kept back (engine_kept_fraction = 1 − it; default: the "
               "engine's, SGLang's by card and tensor degree)", minimum=0,
               exclusive_minimum=True, maximum=1, default=None)


def check_memory_fraction(scenario, report) -> None:
    """``efficiency.memory_fraction`` is an engine's own flag: an error beside a stated
    ``hardware.reserve`` or with ``engine = "none"``, which keep no engine's share.
    """
    if scenario.value("efficiency.memory_fraction") is None:
        return
    if scenario.value("hardware.reserve") is not None:
        preset = scenario.presets.get("hardware")
        by_preset = preset is not None and not scenario.given("hardware.reserve")
        report("efficiency.memory_fraction",
               "memory_fraction is the engine's own share of memory, but hardware.reserve "
               + (f"(from the hardware preset {preset!r}) " if by_preset else "")
               + "states what is kept back itself, which replaces the engine's reserve",
               expected="one of efficiency.memory_fraction and hardware.reserve",
               suggestion=("use a card preset that states no reserve, or remove "
                           "memory_fraction" if by_preset else
                           "remove hardware.reserve to let the engine keep 1 − "
                           "memory_fraction back, or remove memory_fraction"))
    elif scenario.value("efficiency.engine") == "none":
        report("efficiency.memory_fraction",
               'memory_fraction is an engine\'s share of memory, but engine = "none" keeps '
               "nothing back", expected='an engine: efficiency.engine = "vllm", "sglang" '
               'or "tensorrt-llm"', suggestion="name the engine whose flag this is, or state "
               "hardware.reserve instead")


def activation_bytes_per_token(value_bytes=2):
    """Activation bytes one token holds at the widest point of a block (16-bit values):
    residual and normalised input (2·d), the Q, K, V outputs, the feed-forward
    intermediates of the experts it uses.
    """
    return value_bytes * (2 * S.d_model + S.query_width + 2 * S.kv_heads * S.head_dim
                          + (S.ffn_matrices - 1) * (S.active_experts + S.shared_experts) * S.expert_d_ff)


def define_engine_admission(scenario, define) -> None:
    """Whether the engine admits requests on demand (:data:`.engines.ADMISSION`) and runs
    a prompt's prefill beside the running decodes (:data:`.engines.MIXED_BATCHES`).
    """
    name = scenario.value("efficiency.engine")
    admission, mixed = scenario_batching(scenario)
    define("engine_mixed_batches", 1 if mixed else 0, unit="1",
           description=f"1 when the engine ({name}) runs a prompt's prefill in the same iteration "
                       "as the running sequences' decodes, 0 when prefill iterations run apart",
           reference=MIXED_BATCHES)
    define("engine_admits_on_demand", 1 if admission == "paged" else 0, unit="1",
           description=f"1 when the engine ({name}) admits a request once its prompt fits the "
                       "cache and pages the output in as it grows (preempting when full), 0 when "
                       "it admits only a request whose prompt and whole output fit",
           reference=ADMISSION)


def define_engine_reserve(scenario, define) -> None:
    """The engine's chunk, activation workspace, kept share and the memory it reserves."""
    name = scenario.value("efficiency.engine")
    engine = ENGINES[name]
    source = f"{engine.source}; {BUDGET}"
    scheduler = scenario_scheduler(scenario)
    chunk = scheduler.chunk_tokens
    define("prefill_chunk_tokens", chunk, unit="token",
           description=f"tokens of one forward pass the activation workspace is sized for ({name})",
           reference=source)
    define("activation_bytes_per_token", activation_bytes_per_token(), unit="B",
           description="activation bytes one token holds at once in a block (residual, normalised "
                       "input, Q/K/V, feed-forward intermediates; 16-bit)", reference=source)
    logit_rows = (S.prefill_chunk_tokens if scenario.value("efficiency.prefill_logits") == "all"
                  else Min(S.batch, S.prefill_chunk_tokens))
    define("activation_workspace_bytes",
           S.prefill_chunk_tokens * S.activation_bytes_per_token + logit_rows * S.vocab * 4, unit="B",
           description="activation workspace of one forward pass at the prefill chunk (plus fp32 "
                       "logits of the scored positions)", reference=source)
    define("engine_kept_fraction", scheduler.kept_fraction, unit="1",
           description=f"share of memory the engine ({name}) leaves outside its budget",
           reference=source)
    kept = S.engine_kept_fraction * S.memory_bytes
    if name == "none":
        reserved = sympy.Integer(0)
    elif engine.rule == "total":
        reserved = kept + S.activation_workspace_bytes
    elif engine.rule == "inside":
        reserved = Max(kept, S.activation_workspace_bytes)
    else:
        reserved = S.activation_workspace_bytes + S.engine_kept_fraction * (
            S.memory_bytes - S.weight_bytes - S.activation_workspace_bytes)
    define("memory_reserved", reserved, unit="B",
           description=f"memory the engine ({name}) keeps back: CUDA graphs, NCCL buffers, "
                       "allocator headroom and the activation workspace", reference=source)


__all__ = ["BUDGET", "activation_bytes_per_token", "check_memory_fraction", "define_engine_admission",
           "define_engine_reserve", "register_engine_fields"]
