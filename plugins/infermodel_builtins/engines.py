"""Serving engines' own defaults: the memory they keep back and how they schedule.

Not a plugin (no entry point; it registers nothing): a table the base physics and the
physical efficiency model read. Each engine's values are its documented defaults for a
server started without flags, with the argument that sets each one, so a scenario that
names an engine (``[efficiency] engine = "sglang"``) gets what that engine does unless
it says otherwise:

* **memory** — the share of each card the engine leaves outside its budget and how
  (``rule``), and the tokens of one forward pass its activation workspace is sized for;
* **scheduler** — the most sequences it runs at once (``max_sequences``), its tokens per
  iteration (the chunk budget, ``chunk_tokens``), whether prefill is chunked, the cache
  block size, the largest decode batch it captures as a CUDA graph
  (``graph_max_batch``; 0: no capture, every kernel launched by the host), how it
  admits a request into the cache (``admission``, :data:`ADMISSION`) and whether a
  prompt's prefill shares its iteration with the running decodes (``mixed_batches``,
  :data:`MIXED_BATCHES`).

An engine whose defaults changed with a version has one entry per generation:
``"vllm-v0"`` is vLLM before 0.8 (the V0 engine: at most 256 sequences, prompts not
chunked, decode graphs up to 256 sequences, and a host loop of its own, with an
efficiency preset fitted on that generation's published runs); ``"vllm"`` is the V1
engine, the default since 0.8.

Some defaults depend on the card (vLLM chooses larger budgets on cards of 70 GiB or
more; SGLang its chunk, captured batch and memory fraction by the card's memory) or on
the tensor degree: :func:`scheduler_defaults` applies those rules. SGLang's memory
fraction follows the heuristic of its server since 0.5.3 (:func:`sglang_memory`); a
scenario that states an earlier ``efficiency.engine_version`` gets the fixed shares that
release kept. ``efficiency.memory_fraction`` states the engine's own flag instead.
"""

from __future__ import annotations

import re

import attrs

GIB = 1024**3

VLLM_ARGS = ("vLLM engine arguments (vllm/engine/arg_utils.py, get_batch_defaults: "
             "max_num_seqs 1024 and max_num_batched_tokens 8192 for the API server on cards of "
             "70 GiB or more other than the A100, 256 and 2,048 otherwise; block_size 16; "
             "V1 always chunks prefill; CUDA graphs captured up to 512 sequences)")
SGLANG_ARGS = ("SGLang server arguments (python/sglang/srt/server_args.py, "
               "_handle_gpu_memory_settings, since 0.5.3: PRs 10975 and 11076): by the card's "
               "memory, chunked_prefill_size 2,048 below 35 GiB, 4,096 below 60 GiB, 8,192 "
               "below 160 GiB and 16,384 above, cuda_graph_max_bs 8/24-80/32-160/256-512 "
               "(below/from tensor-parallel size 4) and 512 above 160 GiB; "
               "mem_fraction_static = 1 − reserved / memory with reserved = 512 MiB + 1.5 MiB "
               "per chunk token (at least 2,048) + 2 MiB per graph batch + 1 GiB per 8 "
               "ranks (tensor × data-parallel attention × pipeline; + 3 MiB, and 1.5 more "
               "above 300, per graph batch and "
               "data-parallel attention rank; + 2 GiB for a draft model), at least 10 GiB on "
               "cards above 60 GiB; before 0.5.3, 0.88/0.87/0.85/0.81 at tensor degree "
               "1/2/4/8 and chunked_prefill_size 8,192 from 60 GB; page_size 1; "
               "max_running_requests from the KV pool)")
VLLM_V0_ARGS = ("vLLM 0.6-0.7 engine arguments (the V0 engine, the default before 0.8: "
                "max_num_seqs 256; prompts are not chunked unless enable_chunked_prefill is set "
                "or the context exceeds 32K tokens, a prefill iteration taking whole prompts up "
                "to max_num_batched_tokens = max(max_model_len, 2048), taken here as 8,192, a "
                "model served at an 8K context; block_size 16; decode CUDA graphs captured for "
                "batches up to 256)")
TRTLLM_ARGS = ("TensorRT-LLM build and runtime defaults (max_batch_size 2048, max_num_tokens "
               "8192, KvCacheConfig free_gpu_memory_fraction 0.9, tokens_per_block 64; "
               "enable_chunked_prefill False: a context is not chunked unless it is set, "
               "TensorRT-LLM's 'Long Sequences' page, 'Chunked Context'; the "
               "PyTorch backend, the default since 1.0, captures decode CUDA graphs by default: "
               "TorchLlmArgs.cuda_graph_config = CudaGraphConfig(), whose max_batch_size is 128 "
               "when neither it nor batch_sizes is given; MXFP4 experts on Blackwell run with "
               "MXFP8 activations through its TRTLLM MoE backend, the default there, and with "
               "BF16 ones through Triton on Hopper: TensorRT-LLM's deployment guide for GPT-OSS, "
               "'MoE Backend Support Matrix', 1.2)")


#: How each engine admits a request into its KV cache: ``"paged"`` on demand (the
#: prompt's blocks now, each further block as the output grows, a running request
#: preempted or retracted when none is free), ``"reserve"`` only when the prompt and its
#: whole requested output can be guaranteed.
ADMISSION = ("vLLM (V0 and V1): KV blocks are allocated as tokens arrive and, when none "
             "is free, the newest running request is preempted and later recomputed; "
             "SGLang: a request is admitted when its prompt and an estimated share of the "
             "running requests' remaining outputs (the scheduler's new-token ratio, which "
             "falls while nothing is retracted) fit the pool, and decodes are retracted when "
             "it runs out; TensorRT-LLM: the capacity scheduler's default policy, "
             "GUARANTEED_NO_EVICT, schedules a request only when the blocks for its prompt "
             "and its whole max_tokens output can be guaranteed")
ADMISSIONS = ("paged", "reserve")
#: Which engines run a prompt's prefill in the same iteration as the running decodes.
MIXED_BATCHES = ("vLLM V1: one scheduler step takes the running requests' decode tokens "
                 "first and fills the rest of max_num_batched_tokens with prompt chunks, all "
                 "in one forward pass; TensorRT-LLM: in-flight batching runs context and "
                 "generation requests in one forward pass; SGLang: a prefill batch runs "
                 "apart from the decode batch unless its enable_mixed_chunk server argument "
                 "is set (off by default); vLLM V0 without chunked prefill: prefill "
                 "iterations run alone")


@attrs.frozen
class Engine:
    """A serving engine's memory and scheduler defaults."""

    #: How the engine is written in prose ("vLLM").
    label: str
    #: Its efficiency preset (the ledger's engine family), or "" for none.
    family: str
    #: Share of each card's memory the engine leaves outside its budget (see ``rule``).
    kept_fraction: float
    #: ``"total"``: the fraction is of total memory and the activation workspace comes out
    #: of the budget beside it; ``"inside"``: the workspace lives inside the kept share;
    #: ``"free"``: the fraction is of the memory left after weights and activations.
    rule: str
    #: Tokens of one forward pass (the chunk budget) on a large card.
    chunk_tokens: int
    #: Most sequences running at once on a large card (0: only the cache limits it).
    max_sequences: int
    #: Prefill is split into chunks that share iterations with decodes.
    chunked_prefill: bool
    #: Tokens per cache block.
    block_size: int
    #: Largest decode batch captured as a CUDA graph (0: none).
    graph_max_batch: int
    source: str
    #: The engine family this is an earlier generation of ("" for none): its interval
    #: groups are that engine's.
    generation_of: str = ""
    #: What the engine multiplies MXFP4 experts with on a card that has FP4 tensor cores:
    #: ``"bf16"`` (weight-only, widened before the product) or ``"mxfp8"`` (activations
    #: quantised to MXFP8 first).
    mxfp4_activations: str = "bf16"
    #: Under tensor parallelism the all-reduce after each block also adds the residual and
    #: normalises (one kernel where others launch an all-reduce and a norm; see
    #: :data:`TRTLLM_NORM_FUSION`).
    fused_norms: bool = False
    #: Rotary position embedding is applied inside the attention kernels (their QKV
    #: preprocessing), not launched as a kernel of its own (see :data:`TRTLLM_ROPE_FUSION`).
    fused_rope: bool = False
    #: The shared experts run on a second CUDA stream beside the routed experts: in the
    #: decode batches the engine captures as CUDA graphs (``"graphs"``), in any pass of
    #: at most :attr:`shared_stream_tokens` tokens (``"tokens"``), or never (``""``; see
    #: :data:`SHARED_EXPERT_STREAMS`).
    shared_stream: str = ""
    shared_stream_tokens: int = 0
    #: The overlap holds with an all-to-all expert dispatch too (SGLang's DeepEP path
    #: runs the shared experts in line).
    shared_stream_all_to_all: bool = True
    #: Kernels launched for per-head query/key norms in each attention layer, beside the
    #: rotary embedding (see :data:`QK_NORM_KERNELS`).
    qk_norm_launches: int = 2
    #: Kernels launched for a gated attention output's sigmoid product (see
    #: :data:`QK_NORM_KERNELS`).
    gate_launches: int = 1
    #: How a request is admitted into the cache (:data:`ADMISSION`): ``"paged"`` or
    #: ``"reserve"``.
    admission: str = "paged"
    #: A prompt's prefill shares its iteration with the running sequences' decodes
    #: (:data:`MIXED_BATCHES`).
    mixed_batches: bool = False


#: How each engine launches per-head query/key norms and a gated attention output in
#: decode, as the releases the silicon ledger ran (late 2025 to April 2026) do.
QK_NORM_KERNELS = (
    "vLLM (V1, torch.compile by default): the two norms as one Triton kernel, the rotary "
    "embedding another, the output gate's sigmoid product one; vLLM V0 (eager custom ops): "
    "one norm kernel each for queries and keys; SGLang: queries and keys each reshaped and "
    "normalised, the keys on a second stream (two on the critical path; Qwen3's own q/k "
    "norms are one fused in-place kernel from 0.5.7, so one launch is over-counted there), "
    "and the gate as a copy, a sigmoid and a product (fused from mid-2026); TensorRT-LLM: "
    "Qwen3's norms with the rotary embedding in one kernel (fuse_qk_norm_rope), but "
    "models with a gated output (Qwen3-Next, Qwen3.5) two norm kernels and the rotary "
    "embedding apart")


#: Where each engine runs the shared experts beside the routed ones.
SHARED_EXPERT_STREAMS = (
    "TensorRT-LLM PyTorch backend (DeepseekV3MoE, Glm4MoE and the other MoE blocks with "
    "shared experts): maybe_execute_in_parallel runs the shared experts on an auxiliary "
    "stream, multi-stream being enabled only while a CUDA graph is captured; SGLang "
    "(DeepseekV2MoE and GLM's MoE): forward_normal_dual_stream on its alt_stream in "
    "CUDA-graph capture, or the shared expert fused into the routed kernel as one more "
    "expert, but in line on its DeepEP (all-to-all) path; vLLM from 0.11.1 (FusedMoE with "
    "shared experts, PRs 26440 and 28406): an auxiliary stream on CUDA for passes of at "
    "most VLLM_SHARED_EXPERTS_STREAM_TOKEN_THRESHOLD = 256 tokens")


#: TensorRT-LLM's all-reduce with the residual add and RMSNorm fused in.
TRTLLM_NORM_FUSION = ("TensorRT-LLM PyTorch backend models (LlamaDecoderLayer, "
                      "DeepseekV3DecoderLayer, Qwen3): the all-reduce after attention and "
                      "after the feed-forward block runs with AllReduceFusionOp."
                      "RESIDUAL_RMS_NORM when the tensor degree exceeds 1 and attention is not "
                      "data-parallel")
#: TensorRT-LLM applies the rotary embedding in its attention op.
TRTLLM_ROPE_FUSION = ("TensorRT-LLM PyTorch backend Attention module (rope_fusion): the "
                      "rotary embedding is applied in the attention op's QKV preprocessing "
                      "kernel, with the KV cache write, rather than launched before it")
#: The engines that launch the rotary embedding as a kernel of its own.
SEPARATE_ROPE = ("vLLM: the model's attention calls its RotaryEmbedding (a custom op or, "
                 "compiled, one fused Triton kernel) on q and k before the attention layer; "
                 "SGLang: the model's attention calls rotary_emb before RadixAttention")

ENGINES = {
    "vllm": Engine("vLLM", "vllm", 0.10, "total", 8192, 1024, True, 16, 512,
                   "vLLM engine arguments: gpu_memory_utilization = 0.9 (the KV cache gets the "
                   "rest of that share after weights and the activation peak profiled at "
                   "max_num_batched_tokens, 8192 for the API server on cards of 70 GiB or more); "
                   "CUDA graphs, NCCL buffers and the CUDA context live in the 10 % left out; "
                   + VLLM_ARGS, shared_stream="tokens", shared_stream_tokens=256,
                   qk_norm_launches=1, mixed_batches=True),
    "vllm-v0": Engine("vLLM V0 (before 0.8)", "vllm-v0", 0.10, "total", 8192, 256, False, 16, 256,
                      "vLLM V0 engine arguments: gpu_memory_utilization = 0.9, as V1; "
                      + VLLM_V0_ARGS, generation_of="vllm"),
    "sglang": Engine("SGLang", "sglang", 0.12, "inside", 8192, 0, True, 1, 256,
                     "SGLang server arguments: mem_fraction_static is the share of the card "
                     "its weights and KV pool take (from the card's memory: 0.897 on an H200 "
                     "at tensor degree 8); activations, CUDA graphs and NCCL buffers use the "
                     "rest; " + SGLANG_ARGS,
                     shared_stream="graphs", shared_stream_all_to_all=False, gate_launches=3),
    "tensorrt-llm": Engine("TensorRT-LLM", "trtllm", 0.10, "free", 8192, 2048, False, 64, 128,
                           "TensorRT-LLM KvCacheConfig: free_gpu_memory_fraction = 0.9 of the "
                           "memory free after weights and the activation buffers sized for "
                           "max_num_tokens (8192); " + TRTLLM_ARGS,
                           mxfp4_activations="mxfp8", fused_norms=True, fused_rope=True,
                           shared_stream="graphs", admission="reserve", mixed_batches=True),
    "none": Engine("no engine", "", 0.0, "total", 0, 0, False, 1, 0,
                   "no engine: nothing kept back (a lower bound on memory), no scheduler "
                   "limits; each sequence budgeted at full length, the documents' convention",
                   admission="reserve"),
}


@attrs.frozen
class Scheduler:
    """An engine's scheduler defaults on one card and tensor degree."""

    max_sequences: int
    chunk_tokens: int
    chunked_prefill: bool
    block_size: int
    graph_max_batch: int
    kept_fraction: float
    admission: str = "paged"
    mixed_batches: bool = False


#: The SGLang release whose memory heuristic is modelled (:func:`sglang_memory`); an
#: earlier one kept a fixed share by tensor degree (:data:`SGLANG_OLD_FRACTION`).
SGLANG_HEURISTIC_SINCE = (0, 5, 3)
#: SGLang's mem_fraction_static by tensor degree before 0.5.3 (0.85 otherwise, 0.81 from 8).
SGLANG_OLD_FRACTION = {1: 0.88, 2: 0.87, 4: 0.85}
MIB = 1024**2
_RELEASE = re.compile(r"v?(\d+(?:\.\d+)*)")


@attrs.frozen
class SGLangMemory:
    """What SGLang's server chooses for a card (:func:`sglang_memory`), in its units."""

    chunk_tokens: int
    graph_max_batch: int
    reserved_mib: float
    fraction: float


def sglang_memory(card_memory: float, tensor: int = 1, pipeline: int = 1,
                  attention_data: int = 1, draft: bool = False, chunk_tokens: int | None = None,
                  graph_max_batch: int | None = None) -> SGLangMemory:
    """SGLang's defaults for a card of ``card_memory`` bytes (0.5.3 on, :data:`SGLANG_ARGS`):
    its chunked-prefill size and largest captured decode batch by the card's memory, and
    mem_fraction_static, the share of the card its weights and KV pool may take, from the
    memory it reserves for activations, CUDA graphs and parallel buffers. SGLang's
    ``tp_size`` is every rank of a pipeline stage (``tensor × attention_data`` here) and
    data-parallel attention is on when ``attention_data > 1``. A chunk or a captured batch
    the server is given (``chunk_tokens``, ``graph_max_batch``) replaces its choice before
    the memory it reserves is reckoned, as the server does.

    An H200 (143,771 MiB) at tensor degree 8: 512 + 8,192·1.5 + 512·2 + 8/8·1,024 =
    14,848 MiB reserved, (143,771 − 14,848) / 143,771 = 0.897:

    >>> m = sglang_memory(143_771 * MIB, tensor=8)
    >>> m.chunk_tokens, m.graph_max_batch, m.reserved_mib, m.fraction
    (8192, 512, 14848.0, 0.897)

    A B200 (180 GiB) at tensor degree 4: 512 + 16,384·1.5 + 512·2 + 4/8·1,024 = 26,624 MiB:

    >>> sglang_memory(180 * 1024 * MIB, tensor=4).fraction
    0.856
    """
    mib = card_memory / MIB
    ranks = tensor * attention_data
    if mib < 20 * 1024:
        chunk, graphs = 2048, 8
    elif mib < 35 * 1024:
        chunk, graphs = 2048, (24 if ranks < 4 else 80)
    elif mib < 60 * 1024:
        chunk, graphs = 4096, (32 if ranks < 4 else 160)
    elif mib < 160 * 1024:
        chunk, graphs = 8192, (256 if ranks < 4 else 512)
    else:
        chunk, graphs = 16384, 512
    chunk = chunk if chunk_tokens is None else chunk_tokens
    graphs = graphs if graph_max_batch is None else graph_max_batch
    reserved = 512 + max(chunk, 2048) * 1.5 + graphs * 2 + ranks * pipeline / 8 * 1024
    if attention_data > 1:
        reserved += graphs * attention_data * 3
        if graphs > 300:
            reserved += graphs * attention_data * 1.5
    if mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    if draft:
        reserved += 2 * 1024
    return SGLangMemory(chunk, graphs, float(reserved), round((mib - reserved) / mib, 3))


def version_tuple(text: str | None) -> tuple[int, ...] | None:
    """The leading release numbers of a version string (None where it states none).

    >>> version_tuple("0.4.3.post2"), version_tuple("v0.5.3rc0"), version_tuple("nightly")
    ((0, 4, 3), (0, 5, 3), None)
    """
    found = _RELEASE.match(str(text).strip()) if text else None
    return tuple(int(n) for n in found.group(1).split(".")) if found else None


def scheduler_defaults(name: str, card_memory: float, hardware: str | None,
                       tensor: int = 1, *, pipeline: int = 1, attention_data: int = 1,
                       draft: bool = False, version: str | None = None,
                       chunk_tokens: int | None = None,
                       graph_max_batch: int | None = None) -> Scheduler:
    """The engine's defaults for a card of ``card_memory`` bytes (``hardware``: its preset
    name, if any) at tensor degree ``tensor`` (``pipeline`` stages, ``attention_data``
    data-parallel attention ranks, a ``draft`` model; ``version``: the engine's, where
    its defaults changed with one; ``chunk_tokens`` and ``graph_max_batch``: what the
    scenario states, which SGLang's memory heuristic reckons with).

    >>> scheduler_defaults("vllm", 80 * GIB, "h100-sxm").max_sequences
    1024
    >>> scheduler_defaults("vllm", 80 * GIB, "a100-80gb").chunk_tokens
    2048
    >>> scheduler_defaults("sglang", 143_771 * MIB, "h200", tensor=8).kept_fraction
    0.103
    >>> scheduler_defaults("sglang", 141e9, "h200", tensor=8, version="0.4.3").kept_fraction
    0.19
    """
    engine = ENGINES[name]
    out = Scheduler(engine.max_sequences, engine.chunk_tokens, engine.chunked_prefill,
                    engine.block_size, engine.graph_max_batch, engine.kept_fraction,
                    engine.admission, engine.mixed_batches)
    if name == "vllm" and (card_memory < 70 * GIB or (hardware or "").startswith("a100")):
        out = attrs.evolve(out, max_sequences=256, chunk_tokens=2048)
    elif name == "sglang":
        release = version_tuple(version)
        ranks = tensor * attention_data  # SGLang's tp_size
        if release is not None and release < SGLANG_HEURISTIC_SINCE:
            fraction = SGLANG_OLD_FRACTION.get(ranks, 0.81 if ranks >= 8 else 0.85)
            large = card_memory >= 60e9
            out = attrs.evolve(out, kept_fraction=round(1 - fraction, 6),
                               chunk_tokens=8192 if large else 4096,
                               graph_max_batch=(256 if ranks < 4 else 512) if large
                               else (32 if ranks < 4 else 160))
        else:
            m = sglang_memory(card_memory, tensor, pipeline, attention_data, draft,
                              chunk_tokens, graph_max_batch)
            out = attrs.evolve(out, kept_fraction=round(1 - m.fraction, 6),
                               chunk_tokens=m.chunk_tokens, graph_max_batch=m.graph_max_batch)
    return out


def qk_norm_launches(scenario) -> int:
    """Kernels one attention layer launches for its query/key norms (``model.qk_norm``)
    under the scenario's engine (:data:`QK_NORM_KERNELS`): none without norms, or where
    TensorRT-LLM applies per-head norms in its rotary kernel (every such model with a
    rotary embedding and no gated output); two for norms over the layer (MiniMax-M2: the
    mean squares before their all-reduce and the scaling after it) under every engine;
    otherwise the engine's own count (two where no engine is named).
    """
    if not scenario.value("model.qk_norm"):
        return 0
    if scenario.value("model.qk_norm_scope") == "layer":
        return 2
    engine = ENGINES.get(scenario.value("efficiency.engine") or "")
    if engine is None:
        return 2
    if (engine.fused_rope and not scenario.value("model.attention_output_gate")
            and scenario.value("model.rotary_fraction") != 0):
        return 0
    return engine.qk_norm_launches


def gate_launches(scenario) -> int:
    """Kernels one attention layer launches for a gated output's sigmoid product
    (``model.attention_output_gate``; :data:`QK_NORM_KERNELS`), none without one.
    """
    if not scenario.value("model.attention_output_gate"):
        return 0
    engine = ENGINES.get(scenario.value("efficiency.engine") or "")
    return 1 if engine is None else engine.gate_launches


def tensor_degree(scenario) -> int:
    """Cards each layer is split over: the parallelism lever's tensor degree, else 1."""
    lever = scenario.lever("parallelism")
    if lever is None:
        return 1
    if lever.tensor is not None:
        return lever.tensor
    return max(1, scenario.value("hardware.count") // lever.pipeline)


def scenario_scheduler(scenario) -> Scheduler:
    """The defaults of the scenario's engine (``efficiency.engine``) on its card and
    tensor degree, each replaced by what the scenario's ``[efficiency]`` table states.
    """
    value = scenario.value
    lever = scenario.lever("parallelism")
    try:  # the measured-kernels plugin declares the engine's version
        version = value("efficiency.engine_version")
    except AttributeError:
        version = None
    stated = {"max_sequences": value("efficiency.max_sequences"),
              "chunk_tokens": value("efficiency.prefill_chunk"),
              "chunked_prefill": value("efficiency.chunked_prefill"),
              "block_size": value("efficiency.block_size"),
              "graph_max_batch": value("efficiency.graph_max_batch")}
    out = scheduler_defaults(value("efficiency.engine"), value("hardware.memory"),
                             scenario.presets.get("hardware"), tensor_degree(scenario),
                             pipeline=lever.pipeline if lever is not None else 1,
                             attention_data=lever.attention_data if lever is not None else 1,
                             draft=scenario.lever("speculative") is not None, version=version,
                             chunk_tokens=stated["chunk_tokens"],
                             graph_max_batch=stated["graph_max_batch"])
    fraction = value("efficiency.memory_fraction")
    if fraction is not None:
        stated["kept_fraction"] = 1.0 - fraction
    admission, mixed = scenario_batching(scenario)
    return attrs.evolve(out, admission=admission, mixed_batches=mixed,
                        **{k: v for k, v in stated.items() if v is not None})


def scenario_batching(scenario) -> tuple[str, bool]:
    """How the scenario's engine admits a request (:data:`ADMISSION`) and whether it runs
    a prompt's prefill beside the running decodes (:data:`MIXED_BATCHES`), each as the
    ``[efficiency]`` table states it or the engine's default. vLLM V0 runs prompt chunks
    beside the decodes once its prefill is chunked (``efficiency.chunked_prefill``) and
    prefill iterations alone otherwise. Reads no field of the card (a sweep over its
    memory stays one compiled graph).
    """
    value = scenario.value
    name = value("efficiency.engine")
    engine = ENGINES[name]
    admission = value("efficiency.admission") or engine.admission
    mixed = value("efficiency.mixed_batches")
    if mixed is None and name == "vllm-v0":
        chunked = value("efficiency.chunked_prefill")
        mixed = engine.chunked_prefill if chunked is None else chunked
    return admission, bool(engine.mixed_batches if mixed is None else mixed)


#: Efficiency preset of each engine with one (the ledger's engine families).
FAMILY_ENGINE = {e.family: name for name, e in ENGINES.items() if e.family}
# The measured kernel tables' name for TensorRT-LLM, accepted as the same engine.
ENGINES["trtllm"] = ENGINES["tensorrt-llm"]

__all__ = [
    "ADMISSION",
    "ADMISSIONS",
    "ENGINES",
    "FAMILY_ENGINE",
    "MIXED_BATCHES",
    "SEPARATE_ROPE",
    "SHARED_EXPERT_STREAMS",
    "TRTLLM_NORM_FUSION",
    "TRTLLM_ROPE_FUSION",
    "Engine",
    "SGLangMemory",
    "Scheduler",
    "gate_launches",
    "qk_norm_launches",
    "scenario_batching",
    "scenario_scheduler",
    "scheduler_defaults",
    "sglang_memory",
    "tensor_degree",
    "version_tuple",
]
