"""The silicon ledger's layouts: one server's cards, and a disaggregated point's pools,
as :mod:`.silicon` reads them from the file's columns (each rule checked against the
file itself).

* **Layout** (aggregated rows): one server on ``tp × pp × attention_dp`` cards, the
  experts split over ``moe_tp × moe_ep`` of them, which must be the same cards. A missing
  (or zero) ``attention_dp_size`` is 1, the engines' default; a dense model ignores the
  expert columns. One recording is read differently: ``moe_tp = moe_ep = e > 1`` with
  ``tp × attention_dp = e²`` is the engine's *tp e, ep e* on e cards, the tensor (or
  attention-data) degree written as its product with the expert degree — the file holds
  the same measurement under both recordings (``tp 64, moe 8 × 8`` and ``tp 8,
  moe 1 × 8``: identical TTFT and TPOT to the last digit in 60 pairs), and its ids say
  ``tp8_ep8``.
* **Disaggregated rows**: a prefill and a decode pool, each ``*_num_workers`` servers of
  their own layout and ``*_batch_size``; a row without them is listed as not expressible.
  A pool with data-parallel attention and expert parallelism dispatches its tokens
  all-to-all (the parallelism lever's ``expert_dispatch = "all_to_all"``;
  :func:`pool_dispatch`) where its engine does:

  * SGLang's, through DeepEP (``--moe-a2a-backend deepep``), where the recipes of the
    file's disaggregated SGLang runs set it (InferenceMAX's ``dynamo-sglang``
    configurations, February to April 2026, and their NVIDIA srt-slurm recipes,
    ``recipes/{b200,gb200,gb300,h100,h200}*/``): every data-parallel decode pool on
    GB200 and GB300 (low-latency kernels) and the FP8 prefill pools there (normal ones).
    Their B200, H100 and H200 pools and the FP4 prefill pools on GB200 and GB300 pass no
    backend, and SGLang's default (``none``) gathers every rank's tokens;
  * TensorRT-LLM's on GB200 and GB300 (:data:`RACKS`) with the experts split by EP
    alone: its Blackwell MoE backend picks its one-sided NVLink all-to-all whenever
    attention is data-parallel, MoE TP is 1 and the cards share a multi-node NVLink
    domain, whatever the expert ranks against top-k (``TRTLLMGenFusedMoE.
    select_alltoall_method_type``, PyTorch backend); on one 8-GPU node it gathers.

  vLLM's pools gather by default; the one set of its pools the file writes with the
  wrong degrees (data-parallel ranks as a tensor degree) is read as its recipes ran it,
  all-to-all included (:func:`.script_pools.pool_layout`).

  A pool's router hands the request to the decode server after the prefill under Dynamo
  (the TensorRT-LLM and vLLM pools: :data:`SEQUENTIAL_HANDOFF`), with the prefill under
  SGLang's bootstrap (:attr:`.ledger.Pools.handoff`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import attrs

from .ledger import Pool

__all__ = ["RACKS", "SEQUENTIAL_HANDOFF", "Layout", "handoff", "number", "pool_dispatch",
           "read_layout", "read_pool", "whole"]

#: Engines whose disaggregated deployments hand a request to the decode server after its
#: prefill has answered (:attr:`.ledger.Pools.handoff`): the file's TensorRT-LLM and vLLM
#: pools ran under Dynamo (its tensorrtllm-runtime and vllm-runtime images, and
#: InferenceMAX's dynamo-vllm configuration on the vllm-openai image), whose prefill
#: router answers before the decode routing. SGLang's decode server takes the request at
#: the same time as the prefill server (its bootstrap handshake), under either router.
SEQUENTIAL_HANDOFF = ("trtllm", "vllm")


def handoff(backend: str) -> str:
    """How the router of a pool pair of ``backend`` hands a request over
    (:attr:`.ledger.Pools.handoff`; see :data:`SEQUENTIAL_HANDOFF`).

    >>> handoff("trtllm"), handoff("sglang")
    ('sequential', 'concurrent')
    """
    return "sequential" if backend in SEQUENTIAL_HANDOFF else "concurrent"


def number(text: str) -> float | None:
    """A finite number the file writes, or None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def whole(text: str) -> int | None:
    """A whole number the file writes, or None."""
    value = number(text)
    return int(value) if value is not None and value == int(value) else None


@attrs.frozen
class Layout:
    """One server's cards as the file gives them, read by the rules above."""

    tensor: int
    pipeline: int
    attention_dp: int
    expert: int


def read_layout(cells: Mapping[str, str], prefix: str, experts: int) -> Layout | str:
    """The layout in the columns ``{prefix}tp_size`` … ``{prefix}moe_ep_size``, or why it
    is not one (see the module docstring).

    >>> read_layout({"tp_size": "64", "pp_size": "1", "attention_dp_size": "1",
    ...              "moe_tp_size": "8", "moe_ep_size": "8"}, "", 256)
    Layout(tensor=8, pipeline=1, attention_dp=1, expert=8)
    """
    tensor = whole(cells[f"{prefix}tp_size"])
    pipeline = whole(cells[f"{prefix}pp_size"]) or 1
    attention_text = cells[f"{prefix}attention_dp_size"]
    attention = whole(attention_text) or 1
    if tensor is None or tensor < 1:
        return f"{prefix}tp_size is {cells[f'{prefix}tp_size'] or 'not given'}"
    if experts <= 1:
        return Layout(tensor, pipeline, attention, 1)
    moe_tp, moe_ep = whole(cells[f"{prefix}moe_tp_size"]), whole(cells[f"{prefix}moe_ep_size"])
    if not moe_tp or not moe_ep:
        return (f"a mixture of experts without {prefix}moe_tp_size and {prefix}moe_ep_size: "
                "the experts' layout is not given")
    width = tensor * attention
    if moe_tp == moe_ep > 1 and width == moe_ep * moe_ep and attention_text.strip():
        # The engine's "tp e, ep e" written with its degrees multiplied (see above).
        if attention > 1:
            attention //= moe_ep
        else:
            tensor //= moe_ep
        return Layout(tensor, pipeline, attention, moe_ep)
    if moe_tp * moe_ep != width:
        return (f"{prefix}moe_tp_size × {prefix}moe_ep_size = {moe_tp} × {moe_ep} cards, but "
                f"{prefix}tp_size × {prefix}attention_dp_size = {tensor} × {attention}: the "
                "experts and the attention must share the same cards")
    return Layout(tensor, pipeline, attention, moe_ep)


#: Systems whose cards share one NVLink domain across trays (multi-node NVLink, MNNVL).
RACKS = ("gb200", "gb300")


def pool_dispatch(backend: str, system: str, layout: Layout, stage: str = "decode",
                  precision: str = "") -> str:
    """How a disaggregated pool's MoE layers reach the tokens of other attention ranks
    (the parallelism lever's ``expert_dispatch``): all-to-all where the engine runs it
    for the pool's layout, else every rank's tokens gathered.

    >>> wide = Layout(tensor=1, pipeline=1, attention_dp=32, expert=32)
    >>> [pool_dispatch(b, "gb200", wide) for b in ("sglang", "trtllm", "vllm")]
    ['all_to_all', 'all_to_all', 'all_gather']
    >>> pool_dispatch("trtllm", "b200_sxm", wide), pool_dispatch("sglang", "b200_sxm", wide)
    ('all_gather', 'all_gather')
    >>> [pool_dispatch("sglang", "gb300", wide, "prefill", p) for p in ("fp4", "fp8")]
    ['all_gather', 'all_to_all']
    """
    if layout.attention_dp <= 1 or layout.expert <= 1:
        return "all_gather"
    if backend == "sglang":
        return ("all_to_all" if system in RACKS and (stage == "decode" or precision == "fp8")
                else "all_gather")
    if backend == "trtllm" and system in RACKS and layout.expert == layout.tensor * layout.attention_dp:
        return "all_to_all"
    return "all_gather"


def read_pool(cells: Mapping[str, str], stage: str, experts: int) -> Pool | str:
    """The ``stage`` pool (``"prefill"`` or ``"decode"``) of a disaggregated point, or why
    it is not one.
    """
    layout = read_layout(cells, f"{stage}_", experts)
    if isinstance(layout, str):
        return layout
    workers = whole(cells[f"{stage}_num_workers"])
    batch = whole(cells[f"{stage}_batch_size"])
    if not workers or not batch:
        return (f"a disaggregated point without {stage}_num_workers and {stage}_batch_size: "
                "the pools' sizes are not given")
    dispatch = pool_dispatch(cells["backend"].strip(), cells["system"].strip(), layout, stage,
                             cells["precision"].strip())
    return Pool(workers=workers, batch=batch, tensor=layout.tensor, pipeline=layout.pipeline,
                attention_dp=layout.attention_dp, expert=layout.expert, dispatch=dispatch)
