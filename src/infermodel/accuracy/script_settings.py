"""What InferenceMAX's benchmark scripts launch a server with that the silicon file does
not record (:mod:`.silicon`), read from a point's source, model and system: each rule
from the scripts (SemiAnalysisAI/InferenceX, ``benchmarks/``) and the benchmark
configurations (``.github/configs/nvidia-master.yaml``) as they stood when the file's
points were measured. Only points whose source names InferenceMAX's own records (a dated
results file or database dump) are read so: a ``gap-analysis`` file's launch settings
are not published (:data:`UNPUBLISHED_SETTINGS`).

* **The scheduler's reads of new requests**: InferenceMAX's aggregated SGLang scripts for
  DeepSeek-R1 and Qwen3.5 on B200 (and B300 from 17 April 2026) start the server with
  ``--scheduler-recv-interval`` 10 below 16 clients and 30 from 16 (DeepSeek-R1 FP8 on
  four cards and Qwen3.5 FP8 on B300: 10; :func:`recv_interval`);
  those rows state it (:attr:`.ledger.LedgerRow.recv_interval`, the row scenario's
  ``efficiency.recv_interval``), and each request that arrives while others decode waits
  for the next read (``scheduler_recv_hold``).
* **Prompts held for more**: InferenceMAX's TensorRT-LLM scripts for Llama-3.1-70B at
  1,024/1,024 tokens on fewer than eight cards (20 iterations), and for DeepSeek-R1 in FP8
  on B200 there from 64 clients without data-parallel attention (40), set
  ``batch_wait_timeout_iters`` (:func:`batch_wait`); those rows state it
  (:attr:`.ledger.LedgerRow.batch_wait`, ``efficiency.batch_wait_iterations``), and a prompt
  waits ``batch_wait_hold`` before its prefill.
* **Attention ranks balanced**: where InferenceMAX's TensorRT-LLM scripts for DeepSeek-R1
  (B200, H200) and gpt-oss-120b (B200) turn data-parallel attention on, they turn its
  balance on too (``attention_dp_config``, :data:`DP_BALANCE`); those rows state it
  (:attr:`.ledger.LedgerRow.dp_balance`, ``efficiency.dp_balance_timeout`` and
  ``dp_balance_batching``), and a prompt waits ``dp_balance_hold`` for every rank to
  hold one.
* **A 16-bit KV cache where the script states none**: the file's quantised points are
  read with an FP8 cache (:data:`.silicon.QUANTISED_CACHE`), but InferenceMAX's SGLang
  scripts for DeepSeek-R1 and GLM-5 in FP8 on H200 pass no ``--kv-cache-dtype``, and
  SGLang's ``auto`` keeps the model's 16-bit dtype unless the checkpoint's quantisation
  states an FP8 cache (ModelOpt's ``kv_cache_quant_algo``), which these do not
  (:data:`SIXTEEN_BIT_CACHE`, :func:`kv_cache`).
* **gpt-oss-120b on B200**: InferenceMAX's vLLM and TensorRT-LLM scripts pass an FP8
  KV cache for it (:data:`EIGHT_BIT_CACHE`; the file reads its MXFP4 checkpoint with a
  16-bit one), and the vLLM script runs its experts with MXFP8 activations
  (``VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1``, :data:`MXFP8_EXPERT_ACTIVATIONS`), which
  vLLM's default does not; those rows state it (:attr:`.ledger.LedgerRow.mxfp4_activations`,
  the row scenario's ``efficiency.mxfp4_activations``).
* **A MoE runner other than the engine's default**: InferenceMAX's vLLM script for
  MiniMax-M2.5 in FP8 on B200 turned FlashInfer's FP8 MoE and DeepGEMM off (Triton's
  fused MoE) until its vLLM 0.19.0 upgrade, and InferenceMAX's vLLM scripts for
  gpt-oss-120b on H100 and H200 run Marlin's MXFP4 experts (``VLLM_MXFP4_USE_MARLIN=1``)
  from the vLLM 0.13.0 upgrade on (:data:`MOE_RUNNERS`); those rows state it
  (:attr:`.ledger.LedgerRow.moe_backend`, the row scenario's ``efficiency.moe_backend``).
* **SGLang's memory share and scheduler limits**: every InferenceMAX aggregated SGLang
  script passes ``--mem-fraction-static`` and most ``--chunked-prefill-size``,
  ``--max-running-requests`` and ``--cuda-graph-max-bs`` (:data:`SGLANG_LAUNCH`,
  :func:`sglang_launch`); those rows state them (:attr:`.ledger.LedgerRow.launch`, the
  row scenario's ``efficiency.memory_fraction``, ``prefill_chunk``, ``max_sequences`` and
  ``graph_max_batch``). DeepSeek-R1 in FP8 on four B200s, for one, runs at 0.95, where
  the server's own heuristic would not hold its weights.
* **Disaggregated pools the file writes otherwise than they ran**: read as their
  configurations and launch scripts ran them (:mod:`.script_pools`).
* **Speculative runs the file does not mark**: the file has no column for speculative
  decoding, and some of InferenceMAX's points are its multi-token-prediction runs. Where
  InferenceMAX's own configurations show that a point's image ran for its model and
  system only in a speculative configuration (:data:`SPECULATIVE_IMAGES`: TensorRT-LLM
  1.2.0rc6.post3 for DeepSeek-R1 on B200, SGLang v0.5.9-cu130 for Qwen3.5-397B on B200;
  130 points), or that it belongs to a speculative sweep whose image the plain
  configurations ran too (:data:`SPECULATIVE_SWEEPS`: DeepSeek-R1's TensorRT-LLM
  multi-token-prediction sweep of 14 January 2026 on B200 and H200; 73 points), the
  point is listed with that reason: its time per output token is the draft-and-verify
  step over the accepted tokens, and neither the draft length nor the acceptance is
  given. Other points whose image both kinds of configuration ran stay predicted as
  plain decoding.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = [
    "BATCH_WAIT_DEEPSEEK",
    "BATCH_WAIT_LLAMA",
    "CONCURRENCY",
    "DP_BALANCE",
    "EIGHT_BIT_CACHE",
    "MOE_RUNNERS",
    "MXFP8_EXPERT_ACTIVATIONS",
    "RECV_INTERVAL_B300",
    "RECV_INTERVAL_MODELS",
    "SGLANG_LAUNCH",
    "SGLANG_LAUNCH_MODELS",
    "SIXTEEN_BIT_CACHE",
    "SPECULATIVE_IMAGES",
    "SPECULATIVE_SWEEPS",
    "STILL",
    "TF32_MATMUL",
    "UNPUBLISHED_SETTINGS",
    "batch_wait",
    "dp_balance",
    "fp32_matmul",
    "image_of",
    "kv_cache",
    "moe_backend",
    "mxfp4_activations",
    "recv_interval",
    "sglang_launch",
    "speculative_run",
]

#: What the source column of every point whose launch settings are not published names
#: (the aic-auto-gap-analysis runs and ``qwen3.5-397b-gap-analysis.csv``).
UNPUBLISHED_SETTINGS = "gap-analysis"
#: Speculative runs the file does not mark: (backend, system, model, image) → the
#: benchmark configurations that ran that image there. InferenceMAX's configurations
#: (SemiAnalysisAI/InferenceX, ``.github/configs/nvidia-master.yaml``, from February to
#: the end of April 2026, the file's last measurement) ran these images for these models
#: on these systems only in their multi-token-prediction configurations (``…-mtp``); the
#: same models' non-speculative configurations ran other images throughout. The file
#: states neither the draft length nor the acceptance of a speculative run, and its time
#: per output token is not the model's decode step, so these points are listed, not
#: predicted.
SPECULATIVE_IMAGES = {
    ("trtllm", "b200_sxm", "deepseek-ai/DeepSeek-R1", "release:1.2.0rc6.post3"):
        "dsr1-fp4-b200-trt-mtp and dsr1-fp8-b200-trt-mtp (the non-speculative "
        "configurations ran release:1.2.0rc6.post2)",
    ("sglang", "b200_sxm", "Qwen/Qwen3.5-397B-A17B", "sglang:v0.5.9-cu130"):
        "qwen3.5-fp8-b200-sglang-mtp (the non-speculative configuration ran "
        "v0.5.9-cu129-amd64, then v0.5.9-cu130-amd64)",
}
#: SGLang's ``--scheduler-recv-interval`` in InferenceMAX's aggregated benchmark scripts
#: (SemiAnalysisAI/InferenceX: ``benchmarks/dsr1_fp4_b200_docker.sh`` and
#: ``dsr1_fp8_b200_docker.sh`` from October 2025, their ``_slurm`` twins, then
#: ``benchmarks/single_node/{dsr1_fp4,dsr1_fp8,qwen3.5_bf16,qwen3.5_fp8,qwen3.5_fp4}_b200.sh``
#: and, from 17 April 2026, the same models' B300 scripts), as they stood when the file's
#: runs were measured (to 27 April 2026): every one reads new requests every 10 decode
#: iterations below 16 clients and every 30 from 16, but DeepSeek-R1 in FP8 on four
#: cards every 10 (that branch from January 2026, when four-card runs began) and
#: ``qwen3.5_fp8_b300.sh`` every 10 at any concurrency. The file's models
#: (DeepSeek-R1's runs also appear as ``deepseek-ai/DeepSeek-V3``) → the systems whose
#: scripts set it (B300: runs measured from that date on). Only points whose source
#: names InferenceMAX's own records (a dated results file or database dump) are read so:
#: a ``gap-analysis`` file's launch settings are not published.
RECV_INTERVAL_MODELS = ("deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3",
                        "Qwen/Qwen3.5-397B-A17B")
RECV_INTERVAL_B300 = "2026-04-17"
#: TensorRT-LLM's ``batch_wait_timeout_iters`` in InferenceMAX's aggregated scripts:
#: Llama-3.1-70B at 1,024/1,024 tokens on fewer than eight cards, 20 (``benchmarks/
#: 70b_fp{4,8}_b200_trt_{slurm,docker}.sh`` and ``70b_fp8_h200_trt_slurm.sh``, September
#: and October 2025, the model's runs in the file); DeepSeek-R1 in FP8 on B200 at
#: 1,024/1,024 tokens from 64 clients without data-parallel attention, 40
#: (``dsr1_fp8_b200_trt.sh`` from its 1.2.0rc6.post2 image on, 29 January 2026).
BATCH_WAIT_LLAMA = ("meta-llama/Llama-3.1-70B", 20)
BATCH_WAIT_DEEPSEEK = (("deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3"), 40, "2026-01-29")
#: TensorRT-LLM's attention-DP balance (``attention_dp_config`` with ``enable_balance``) in
#: InferenceMAX's aggregated scripts, wherever they turn data-parallel attention on
#: (``DP_ATTENTION=true``): DeepSeek-R1 in FP4 and FP8 on B200 and in FP8 on H200 with
#: ``timeout_iters: 60, batching_wait_iters: 0`` (``benchmarks/dsr1_fp{4,8}_b200_trt_slurm.sh``
#: and ``dsr1_fp8_h200_trt_slurm.sh`` from 18 September 2025, then
#: ``benchmarks/single_node/...``), gpt-oss-120b on B200 with the engine's defaults,
#: 50 and 10 (``gptoss_fp4_b200_trt_{slurm,docker}.sh``), unchanged through the file's
#: runs. The file's model → (systems, (timeout, batching wait)).
DP_BALANCE = {"deepseek-ai/DeepSeek-R1": (("b200_sxm", "h200_sxm"), (60, 0)),
              "deepseek-ai/DeepSeek-V3": (("b200_sxm", "h200_sxm"), (60, 0)),
              "openai/gpt-oss-120b": (("b200_sxm",), (50, 10))}

#: Aggregated InferenceMAX scripts that pass no KV-cache format to an engine whose
#: ``auto`` is the model's 16-bit dtype for their checkpoints: SGLang on H200 for
#: DeepSeek-R1 in FP8 (``benchmarks/dsr1_fp8_h200_slurm.sh`` from September 2025, then
#: ``benchmarks/dsr1_fp8_h200.sh`` and ``benchmarks/single_node/dsr1_fp8_h200.sh``, to
#: the file's last run in April 2026; its runs also appear as DeepSeek-V3) and GLM-5 in
#: FP8 (``benchmarks/single_node/glm5_fp8_h200.sh``, March to April 2026). Their
#: checkpoints (``quant_method`` fp8) name no FP8 cache. (backend, system) → models.
SIXTEEN_BIT_CACHE = {("sglang", "h200_sxm"): ("deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3",
                                              "zhipuai/GLM-5")}
#: Aggregated InferenceMAX scripts that pass an FP8 KV cache for a checkpoint the file
#: reads with a 16-bit one (gpt-oss-120b's MXFP4 experts and 16-bit attention): on B200,
#: vLLM's ``kv-cache-dtype: fp8`` (``benchmarks/gptoss_fp4_b200_docker.sh`` from
#: 5 December 2025, then ``benchmarks/single_node/gptoss_fp4_b200.sh``: the file's vLLM
#: runs of February 2026, not those of 2 November 2025) and TensorRT-LLM's ``kv_cache_config.dtype: fp8``
#: (``gptoss_fp4_b200_trt_slurm.sh`` from 20 October 2025, then
#: ``benchmarks/single_node/gptoss_fp4_b200_trt.sh``; its runs from November 2025).
#: (backend, system) → (models, the first measurement date the script passed it for).
EIGHT_BIT_CACHE = {("vllm", "b200_sxm"): (("openai/gpt-oss-120b",), "2025-12-05"),
                   ("trtllm", "b200_sxm"): (("openai/gpt-oss-120b",), "2025-10-20")}
#: Aggregated InferenceMAX scripts that run MXFP4 experts with MXFP8 activations where the
#: engine's default is 16-bit ones: vLLM's gpt-oss-120b on B200 exports
#: ``VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1`` (``benchmarks/gptoss_fp4_b200_docker.sh``
#: from its first version, September 2025, then ``benchmarks/single_node/
#: gptoss_fp4_b200.sh``), FlashInfer's TensorRT-LLM MXFP4 × MXFP8 MoE kernel.
#: (backend, system) → models.
MXFP8_EXPERT_ACTIVATIONS = {("vllm", "b200_sxm"): ("openai/gpt-oss-120b",)}
#: The last day of a dated script setting still set at the file's last measurement.
STILL = "9999-12-31"
#: Aggregated InferenceMAX scripts that launch the engine with a MoE runner other than its
#: default: vLLM's MiniMax-M2.5 in FP8 on B200 exported ``VLLM_USE_FLASHINFER_MOE_FP8=0``
#: and ``VLLM_MOE_USE_DEEP_GEMM=0`` (Triton's fused MoE) from the script's first version,
#: 11 March 2026, until the vLLM 0.19.0 upgrade of 3 April 2026 removed both
#: (``benchmarks/single_node/minimaxm2.5_fp8_b200.sh``, pull requests 757 and 947).
#: vLLM's gpt-oss-120b on H100 and H200 exports ``VLLM_MXFP4_USE_MARLIN=1`` (Marlin's
#: weight-only MXFP4 MoE, where vLLM's Hopper default is OpenAI's Triton kernel) from the
#: vLLM 0.13.0 upgrade of 2 January 2026 (pull request 327, "Update vLLM version to
#: v0.13.0 for NVIDIA configs", whose notes call it a fix for an H100/H200 regression),
#: unchanged through the file's last measurement (``benchmarks/gptoss_fp4_h100_docker.sh``,
#: ``..._h100_slurm.sh`` and ``..._h200_slurm.sh``, from 22 January
#: ``benchmarks/gptoss_fp4_h{100,200}.sh``, then ``benchmarks/single_node/``).
#: (backend, system, model, precision) → (the backend, its first day, the first day
#: without it; :data:`STILL`: still set at the file's last measurement).
MOE_RUNNERS = {("vllm", "b200_sxm", "MiniMaxAI/MiniMax-M2.5", "fp8"):
               ("triton", "2026-03-11", "2026-04-03"),
               ("vllm", "h100_sxm", "openai/gpt-oss-120b", "fp4"):
               ("marlin", "2026-01-02", STILL),
               ("vllm", "h200_sxm", "openai/gpt-oss-120b", "fp4"):
               ("marlin", "2026-01-02", STILL)}
#: Aggregated InferenceMAX scripts that let PyTorch multiply 32-bit matrices on TF32
#: tensor cores (``VLLM_FLOAT32_MATMUL_PRECISION=high``) where vLLM's default is IEEE FP32:
#: vLLM's MiniMax-M2.5 in FP8 and NVFP4 on B300 from 21 April 2026 and on B200 from 22
#: April (pull requests 1106, 1107, 1068 and 1069, each merged that day, UTC, and each
#: listing its configuration in ``perf-changelog.yaml``, which reruns it): the model's
#: router runs its 32-bit GEMM at the TF32 rate (``efficiency.fp32_matmul``).
#: (backend, system, model, precision) → (the setting, its first day, the first day
#: without it), as :data:`MOE_RUNNERS`.
TF32_MATMUL = {("vllm", "b300_sxm", "MiniMaxAI/MiniMax-M2.5", "fp8"): ("tf32", "2026-04-21", STILL),
               ("vllm", "b300_sxm", "MiniMaxAI/MiniMax-M2.5", "fp4"): ("tf32", "2026-04-21", STILL),
               ("vllm", "b200_sxm", "MiniMaxAI/MiniMax-M2.5", "fp8"): ("tf32", "2026-04-22", STILL),
               ("vllm", "b200_sxm", "MiniMaxAI/MiniMax-M2.5", "fp4"): ("tf32", "2026-04-22", STILL)}

#: SGLang's launch flags in InferenceMAX's aggregated scripts (SemiAnalysisAI/InferenceX,
#: ``benchmarks/`` then ``benchmarks/single_node/``; each script's history to the file's
#: last measurement, April 2026): (model family, system, precision) → the versions, each
#: ``(first date, {the server's cards or None (any): (mem_fraction_static,
#: chunked_prefill_size, max_running_requests, cuda_graph_max_bs)})``, ``CONCURRENCY``
#: standing for the run's client count and None for the server's own default.
#: DeepSeek-R1 (its runs also appear as DeepSeek-V3): FP8 on B200, 0.82 / 32,768 / 128 /
#: 128 on eight cards from September 2025 and 0.95 / 8,192 / 32 / 32 on four from
#: January 2026 (``dsr1_fp8_b200{,_docker,_slurm}.sh``); FP4 on B200, 0.85 / 16,384 /
#: 256 / 256; FP8 on H200, 0.82 / 32,768 and 512 / 512 at 1,024/1,024 tokens, else
#: 256 / 256; the B300 scripts (17 April 2026) as B200's. GLM-5: FP8 on B200 (20 March
#: 2026) and B300, 0.85 / 32,768 / clients / clients; FP4 on B200, 0.80 / 131,072 /
#: clients / clients from 2 April, then 0.90 / 32,768 / default / 256 from 9 April; FP8
#: on H200, 0.85 alone. Qwen3.5-397B: BF16 on B200, 0.80 alone from 16 February, then
#: 0.82 / 32,768 / 128 / clients from 19 February; FP8 on B200, 0.82 / 32,768 / 128 /
#: clients from 3 March, then 0.80 / 16,384 / default / clients from 30 April; FP4 on
#: B200, 0.85 / 32,768 / 128 / clients; FP8 on H200, 0.80 / 16,384 / 128 / clients; on
#: B300 (17 April) BF16 0.82 / 32,768 / 128 / clients, FP4 0.80 / 32,768 / 128 /
#: clients, FP8 0.80 / 16,384 / clients / clients. A run measured before its script's
#: first version states none (its launch is not published).
CONCURRENCY = -1
_DSR1_FP8_TP8 = {8: (0.82, 32768, 128, 128)}
_DSR1_FP8 = {**_DSR1_FP8_TP8, 4: (0.95, 8192, 32, 32)}
_DSR1_FP4 = {None: (0.85, 16384, 256, 256)}
_GLM5_FP8 = {None: (0.85, 32768, CONCURRENCY, CONCURRENCY)}
_QWEN_BF16 = {None: (0.82, 32768, 128, CONCURRENCY)}
SGLANG_LAUNCH: dict[tuple[str, str, str], tuple[tuple[str, dict], ...]] = {
    ("deepseek", "b200_sxm", "fp8"): (("2025-09-23", _DSR1_FP8_TP8), ("2026-01-13", _DSR1_FP8)),
    ("deepseek", "b200_sxm", "fp4"): (("2025-09-19", _DSR1_FP4),),
    ("deepseek", "h200_sxm", "fp8"): (("2025-09-19", {None: (0.82, 32768, 256, 256)}),),
    ("deepseek", "b300_sxm", "fp8"): (("2026-04-17", _DSR1_FP8),),
    ("deepseek", "b300_sxm", "fp4"): (("2026-04-17", _DSR1_FP4),),
    ("glm5", "b200_sxm", "fp8"): (("2026-03-20", _GLM5_FP8),),
    ("glm5", "b300_sxm", "fp8"): (("2026-04-17", _GLM5_FP8),),
    ("glm5", "b200_sxm", "fp4"): (("2026-04-02", {None: (0.80, 131072, CONCURRENCY, CONCURRENCY)}),
                                  ("2026-04-09", {None: (0.90, 32768, None, 256)})),
    ("glm5", "h200_sxm", "fp8"): (("2026-03-18", {None: (0.85, None, None, None)}),),
    ("qwen3.5", "b200_sxm", "bf16"): (("2026-02-16", {None: (0.80, None, None, None)}),
                                      ("2026-02-19", _QWEN_BF16)),
    ("qwen3.5", "b200_sxm", "fp8"): (("2026-03-03", {None: (0.82, 32768, 128, CONCURRENCY)}),
                                     ("2026-04-30", {None: (0.80, 16384, None, CONCURRENCY)})),
    ("qwen3.5", "b200_sxm", "fp4"): (("2026-04-08", {None: (0.85, 32768, 128, CONCURRENCY)}),),
    ("qwen3.5", "h200_sxm", "fp8"): (("2026-03-04", {None: (0.80, 16384, 128, CONCURRENCY)}),),
    ("qwen3.5", "b300_sxm", "bf16"): (("2026-04-17", _QWEN_BF16),),
    ("qwen3.5", "b300_sxm", "fp4"): (("2026-04-17", {None: (0.80, 32768, 128, CONCURRENCY)}),),
    ("qwen3.5", "b300_sxm", "fp8"): (("2026-04-17", {None: (0.80, 16384, CONCURRENCY,
                                                            CONCURRENCY)}),),
}
#: The file's model → its family in :data:`SGLANG_LAUNCH`.
SGLANG_LAUNCH_MODELS = {"deepseek-ai/DeepSeek-R1": "deepseek", "deepseek-ai/DeepSeek-V3": "deepseek",
                        "zhipuai/GLM-5": "glm5", "Qwen/Qwen3.5-397B-A17B": "qwen3.5"}

_MEASURED = re.compile(r"measured=(\d{4}-\d\d-\d\d)")


#: Speculative sweeps whose image the non-speculative configurations ran too, told apart
#: by the day they were measured: (backend, system, model, image tail, day) → the
#: configurations. InferenceMAX's pull request 392 (merged 15 January 2026) added
#: DeepSeek-R1's TensorRT-LLM multi-token-prediction configurations on B200 and H200
#: with the plain ones' image, release:1.1.0rc2.post2; every point the file dates 14
#: January 2026 (73) follows their search spaces — on H200, 1,024 tokens in and 8,192
#: out at 128 clients without data-parallel attention, which only
#: dsr1-fp8-h200-trt-mtp ran — and against the plain configurations' points of 15
#: December 2025 (the same image, layout, lengths and clients, 28 pairs, all FP8; the
#: file labels those DeepSeek-V3, as it does some of DeepSeek-R1's runs) it decodes
#: 1.2–2.1 times as fast with a longer first token in 27: a draft accepted, and the
#: prompt in the chat template the speculative scripts pass. The FP4 points of the day
#: have no plain twin in the file; they follow the same sweep.
_PR392 = ("dsr1-fp4-b200-trt-mtp, dsr1-fp8-b200-trt-mtp and dsr1-fp8-h200-trt-mtp, whose "
          "sweep (InferenceMAX pull request 392) is every point dated 2026-01-14: the plain "
          "configurations ran the same image, but these points follow the speculative "
          "search spaces, and its FP8 points decode 1.2-2.1 times as fast as the plain "
          "points of 2025-12-15 at the same layout, lengths and clients")
SPECULATIVE_SWEEPS = {
    ("trtllm", "b200_sxm", "deepseek-ai/DeepSeek-R1", "release:1.1.0rc2.post2", "2026-01-14"):
        _PR392,
    ("trtllm", "h200_sxm", "deepseek-ai/DeepSeek-R1", "release:1.1.0rc2.post2", "2026-01-14"):
        _PR392,
}


def speculative_run(cells: Mapping[str, str]) -> str:
    """Why a point is a speculative run the file does not mark (see
    :data:`SPECULATIVE_IMAGES` and :data:`SPECULATIVE_SWEEPS`), or ``""``.

    >>> speculative_run({"backend": "trtllm", "system": "b200_sxm",
    ...     "model_path": "deepseek-ai/DeepSeek-R1",
    ...     "silicon_data_source": "measured=2026-02-06; image=nvcr.io#nvidia/"
    ...                            "tensorrt-llm/release:1.2.0rc6.post3"})[:43]
    'a speculative (multi-token prediction) run:'
    """
    image = image_of(cells["silicon_data_source"])
    if not image:
        return ""
    found = _MEASURED.search(cells["silicon_data_source"])
    point = (cells["backend"].strip(), cells["system"].strip(), cells["model_path"].strip(),
             found.group(1) if found else "")
    unknown = "the file states neither the draft length nor the acceptance"
    for (*deployment, tail), configurations in SPECULATIVE_IMAGES.items():
        if tuple(deployment) == point[:3] and image.endswith("/" + tail):
            return ("a speculative (multi-token prediction) run: InferenceMAX ran "
                    f"{tail} for this model on this system only in {configurations}; {unknown}")
    for (*deployment, tail, day), configurations in SPECULATIVE_SWEEPS.items():
        if (*deployment, day) == point and image.endswith("/" + tail):
            return f"a speculative (multi-token prediction) run: it belongs to {configurations}; {unknown}"
    return ""


def image_of(source: str) -> str:
    """The container image a point's source column names (``image=…``, or a bare
    ``registry/name:tag`` field in the database dumps' sources), or ``""``.

    >>> image_of("db-dump/2026-04-27; config_id=736; lmsysorg/sglang:v0.5.10.post1-cu130")
    'lmsysorg/sglang:v0.5.10.post1-cu130'
    """
    for field in source.split(";"):
        field = field.strip()
        if field.startswith("image="):
            return field[len("image="):].strip()
        if "=" not in field and "/" in field and ":" in field:
            return field
    return ""


def sglang_launch(cells: Mapping[str, str], cards: int, concurrency: int, isl: int = 0,
                  osl: int = 0) -> tuple[float | None, int | None, int | None, int | None] | None:
    """The point's SGLang launch flags in its benchmark script (:data:`SGLANG_LAUNCH`):
    ``(mem_fraction_static, chunked_prefill_size, max_running_requests,
    cuda_graph_max_bs)``, None where the script leaves one to the server, or None where
    no script of the point's model, system and precision was in use when it was measured
    (``cards``: the server's).

    >>> sglang_launch({"backend": "sglang", "mode": "agg", "system": "b200_sxm",
    ...                "model_path": "deepseek-ai/DeepSeek-R1", "precision": "fp8",
    ...                "silicon_data_source": "measured=2026-03-25"}, 4, 8)
    (0.95, 8192, 32, 32)
    """
    if (cells["backend"].strip() != "sglang" or cells["mode"].strip() != "agg"
            or UNPUBLISHED_SETTINGS in cells["silicon_data_source"]):
        return None
    family = SGLANG_LAUNCH_MODELS.get(cells["model_path"].strip())
    versions = SGLANG_LAUNCH.get((family or "", cells["system"].strip(),
                                  cells["precision"].strip()))
    measured = _MEASURED.search(cells["silicon_data_source"])
    if versions is None or measured is None:
        return None
    in_use = [flags for since, flags in versions if since <= measured.group(1)]
    if not in_use:
        return None
    flags = in_use[-1].get(cards, in_use[-1].get(None))
    if flags is None:
        return None
    if family == "deepseek" and cells["system"].strip() == "h200_sxm" and (isl, osl) == (1024, 1024):
        flags = (flags[0], flags[1], 512, 512)
    return tuple(concurrency if f == CONCURRENCY else f for f in flags)  # type: ignore[return-value]


def recv_interval(cells: Mapping[str, str], cards: int, concurrency: int) -> int:
    """The decode iterations between the scheduler's reads of new requests in the point's
    benchmark script (:data:`RECV_INTERVAL_MODELS`; ``cards``: the server's), else 1
    (every iteration).

    >>> recv_interval({"backend": "sglang", "mode": "agg", "system": "b200_sxm",
    ...                "model_path": "Qwen/Qwen3.5-397B-A17B", "precision": "fp8",
    ...                "silicon_data_source": "measured=2026-03-20"}, 4, 64)
    30
    """
    if (cells["backend"].strip() != "sglang" or cells["mode"].strip() != "agg"
            or UNPUBLISHED_SETTINGS in cells["silicon_data_source"]
            or cells["model_path"].strip() not in RECV_INTERVAL_MODELS):
        return 1
    system, precision = cells["system"].strip(), cells["precision"].strip()
    qwen = cells["model_path"].strip().startswith("Qwen/")
    if system == "b300_sxm":
        measured = _MEASURED.search(cells["silicon_data_source"])
        if measured is None or measured.group(1) < RECV_INTERVAL_B300:
            return 1
        if qwen and precision == "fp8":
            return 10
    elif system != "b200_sxm":
        return 1
    if not qwen and precision == "fp8" and cards == 4:
        return 10
    return 30 if concurrency >= 16 else 10


def batch_wait(cells: Mapping[str, str], cards: int, attention: int, concurrency: int) -> int:
    """The iterations a new prompt may wait for more in the point's benchmark script
    (:data:`BATCH_WAIT_LLAMA`, :data:`BATCH_WAIT_DEEPSEEK`), else 0.

    >>> batch_wait({"backend": "trtllm", "mode": "agg", "system": "h200_sxm", "isl": "1024",
    ...             "osl": "1024", "model_path": "meta-llama/Llama-3.1-70B", "precision": "fp8",
    ...             "silicon_data_source": "measured=2025-10-29"}, 4, 1, 32)
    20
    """
    if (cells["backend"].strip() != "trtllm" or cells["mode"].strip() != "agg"
            or UNPUBLISHED_SETTINGS in cells["silicon_data_source"]
            or (cells["isl"].strip(), cells["osl"].strip()) != ("1024", "1024")):
        return 0
    model = cells["model_path"].strip()
    if model == BATCH_WAIT_LLAMA[0]:
        return BATCH_WAIT_LLAMA[1] if cards < 8 else 0
    models, iterations, since = BATCH_WAIT_DEEPSEEK
    measured = _MEASURED.search(cells["silicon_data_source"])
    if (model in models and cells["precision"].strip() == "fp8"
            and cells["system"].strip() == "b200_sxm" and concurrency >= 64 and attention == 1
            and measured is not None and measured.group(1) >= since):
        return iterations
    return 0


def dp_balance(cells: Mapping[str, str], attention: int) -> tuple[int, int] | None:
    """The attention-DP balance's timeout and batching wait (iterations) in the point's
    benchmark script (:data:`DP_BALANCE`), else None.

    >>> dp_balance({"backend": "trtllm", "mode": "agg", "system": "h200_sxm",
    ...             "model_path": "deepseek-ai/DeepSeek-R1",
    ...             "silicon_data_source": "measured=2026-01-14"}, 8)
    (60, 0)
    """
    if (cells["backend"].strip() != "trtllm" or cells["mode"].strip() != "agg" or attention <= 1
            or UNPUBLISHED_SETTINGS in cells["silicon_data_source"]):
        return None
    systems, setting = DP_BALANCE.get(cells["model_path"].strip(), ((), (0, 0)))
    return setting if cells["system"].strip() in systems else None


def _scripted(cells: Mapping[str, str]) -> bool:
    """Whether the point is an aggregated one of InferenceMAX's own records, whose launch
    scripts are published (a gap-analysis file's are not: :data:`UNPUBLISHED_SETTINGS`).
    """
    return (cells["mode"].strip() == "agg"
            and UNPUBLISHED_SETTINGS not in cells["silicon_data_source"])


def mxfp4_activations(cells: Mapping[str, str]) -> str:
    """``"mxfp8"`` where the point's InferenceMAX script runs MXFP4 experts with MXFP8
    activations against its engine's default (:data:`MXFP8_EXPERT_ACTIVATIONS`), else
    ``""`` (the engine's own).

    >>> mxfp4_activations({"backend": "vllm", "mode": "agg", "system": "b200_sxm",
    ...                    "model_path": "openai/gpt-oss-120b",
    ...                    "silicon_data_source": "measured=2026-02-25"})
    'mxfp8'
    """
    if not _scripted(cells):
        return ""
    models = MXFP8_EXPERT_ACTIVATIONS.get((cells["backend"].strip(), cells["system"].strip()), ())
    return "mxfp8" if cells["model_path"].strip() in models else ""


def moe_backend(cells: Mapping[str, str]) -> str:
    """The MoE runner the point's InferenceMAX script launched its engine with where it is
    not the engine's default (:data:`MOE_RUNNERS`), else ``""``.

    >>> moe_backend({"backend": "vllm", "mode": "agg", "system": "b200_sxm",
    ...              "model_path": "MiniMaxAI/MiniMax-M2.5", "precision": "fp8",
    ...              "silicon_data_source": "measured=2026-03-28"})
    'triton'
    """
    return _dated(cells, MOE_RUNNERS)


def _dated(cells: Mapping[str, str], table: Mapping[tuple, tuple[str, str, str]]) -> str:
    """The setting a dated script rule gives the point (``table``: (backend, system,
    model, precision) → (the setting, its first day, the first day without it)), where
    the point is one of InferenceMAX's aggregated runs measured within those days; else
    ``""``.
    """
    if not _scripted(cells):
        return ""
    key = (cells["backend"].strip(), cells["system"].strip(), cells["model_path"].strip(),
           cells["precision"].strip())
    setting, since, until = table.get(key, ("", "", ""))
    measured = _MEASURED.search(cells["silicon_data_source"])
    if not setting or measured is None or not since <= measured.group(1) < until:
        return ""
    return setting


def fp32_matmul(cells: Mapping[str, str]) -> str:
    """``"tf32"`` where the point's InferenceMAX script let the engine multiply 32-bit
    matrices on TF32 tensor cores (:data:`TF32_MATMUL`), else ``""`` (the engine's own,
    IEEE FP32).

    >>> cells = {"backend": "vllm", "mode": "agg", "system": "b200_sxm",
    ...          "model_path": "MiniMaxAI/MiniMax-M2.5", "precision": "fp4",
    ...          "silicon_data_source": "measured=2026-04-22T00:00:00.000Z"}
    >>> fp32_matmul(cells), fp32_matmul({**cells, "silicon_data_source": "measured=2026-04-08"})
    ('tf32', '')
    """
    return _dated(cells, TF32_MATMUL)


def kv_cache(cells: Mapping[str, str], quantised: str, eight_bit: str = "") -> str:
    """The point's KV-cache format: 16-bit (``""``) where its InferenceMAX script passes
    none to an engine that keeps the model's dtype (:data:`SIXTEEN_BIT_CACHE`),
    ``eight_bit`` where it passes an FP8 cache for a checkpoint the file reads with a
    16-bit one (:data:`EIGHT_BIT_CACHE`), else ``quantised`` (the file's reading of the
    point: its FP8 cache for a quantised one).

    >>> kv_cache({"backend": "sglang", "mode": "agg", "system": "h200_sxm",
    ...           "model_path": "deepseek-ai/DeepSeek-R1",
    ...           "silicon_data_source": "measured=2026-01-14"}, "fp8-e4m3")
    ''
    >>> kv_cache({"backend": "sglang", "mode": "agg", "system": "b200_sxm",
    ...           "model_path": "deepseek-ai/DeepSeek-R1",
    ...           "silicon_data_source": "measured=2026-01-14"}, "fp8-e4m3")
    'fp8-e4m3'
    """
    if not _scripted(cells):
        return quantised
    where = (cells["backend"].strip(), cells["system"].strip())
    model = cells["model_path"].strip()
    if not quantised:
        models, since = EIGHT_BIT_CACHE.get(where, ((), ""))
        measured = _MEASURED.search(cells["silicon_data_source"])
        return (eight_bit if eight_bit and model in models and measured is not None
                and measured.group(1) >= since else "")
    return "" if model in SIXTEEN_BIT_CACHE.get(where, ()) else quantised
