"""Disaggregated pools of the silicon file (:mod:`.silicon`) that InferenceMAX's
configurations and launch scripts ran otherwise than the file's layout columns write them,
read as they ran (:func:`pool_layout`), each rule from its published source. Only points
whose source names InferenceMAX's own records are read so (a ``gap-analysis`` file's
launch settings are not published: :data:`.script_settings.UNPUBLISHED_SETTINGS`).

* **SGLang's December pools on GB200**: the file writes every pool of InferenceMAX's
  Dynamo-SGLang runs of DeepSeek-R1 there (December 2025) as data-parallel attention over
  tensor-parallel experts; their launch scripts (Dynamo's, one per benchmark mode) ran the
  low-latency pools tensor-parallel, the throughput pools' experts expert-parallel, and
  the FP4 throughput prefill pools at 8,192-token prompts tensor-parallel
  (:data:`SCRIPTED_POOLS`, :func:`pool_layout`).
* **vLLM's data-parallel pools, written as tensor-parallel ones**: InferenceMAX's
  Dynamo-vLLM disaggregated runs of Kimi-K2.5 on GB200 (configuration
  ``kimik2.5-fp4-gb200-dynamo-vllm`` of 7 April 2026, its recipes NVIDIA/srt-slurm
  ``recipes/vllm/kimi-k2.5/``) run every prefill worker with data-parallel attention
  over four cards (``data-parallel-size 4``, ``tensor-parallel-size 1``, experts over
  the four) and every decode worker wider than four cards the same way (8 or 16 ranks);
  the file writes those pools' widths as their tensor degree. Their pools are read as
  the recipes ran them (:data:`DATA_PARALLEL_POOLS`, :func:`pool_layout`), each rank
  holding its share of the file's batch, the experts reached all-to-all
  (``all2all-backend flashinfer_nvlink_one_sided``).
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from .ledger import Pool
from .script_settings import UNPUBLISHED_SETTINGS, image_of
from .silicon_layouts import Layout, pool_dispatch, whole

__all__ = ["DATA_PARALLEL_POOLS", "SCRIPTED_POOLS", "pool_layout"]

#: Disaggregated InferenceMAX runs whose pools ran data-parallel attention where the file
#: writes a tensor degree: vLLM's Kimi-K2.5 in FP4 on GB200 through Dynamo (configuration
#: ``kimik2.5-fp4-gb200-dynamo-vllm``, SemiAnalysisAI/InferenceX pull request 1008,
#: 7 April 2026; its six recipes, NVIDIA/srt-slurm ``recipes/vllm/kimi-k2.5/{1k1k,8k1k}/``
#: of 6 April: prefill ``dep4`` in all six, decode ``tep4`` in two and ``dep8`` or
#: ``dep16`` in four). (backend, system, model) → the widest pool (cards) each stage
#: runs with tensor parallelism, wider ones being data-parallel: prefill 0 (always
#: data-parallel), decode 4.
DATA_PARALLEL_POOLS = {("vllm", "gb200", "moonshotai/Kimi-K2.5"): {"prefill": 0, "decode": 4}}
#: Disaggregated InferenceMAX runs whose pools the file writes as data-parallel attention
#: over tensor-parallel experts (``attention_dp`` the pool's width, ``moe_tp`` the width,
#: ``moe_ep`` 1) where their launch scripts ran something else: SGLang's DeepSeek-R1 on
#: GB200 through Dynamo on the ``lmsysorg/sglang:v0.5.5.post2`` image (configurations
#: ``dsr1-fp{4,8}-gb200-dynamo-sglang`` of December 2025, whose ``tp``, ``ep`` and
#: ``dp-attn`` fields are placeholders, the FP8 one noting that they "do nothing"). Their
#: benchmark scripts (``benchmarks/dsr1_fp{4,8}_gb200_dynamo-sglang_slurm.sh``) check out
#: Dynamo at b7107d0 and start ``examples/backends/sglang/slurm_jobs/scripts/
#: gb200-fp{4,8}/disagg/<mode>.sh``: the low-latency scripts start both pools with
#: ``--tensor-parallel-size`` of their cards (four), ``--data-parallel-size 1`` and
#: ``--expert-parallel-size 1``; the throughput ones (``max-tpt``, ``middle-curve``) start
#: their decode pools with data-parallel attention and the experts over all their cards
#: (``--ep-size``, DeepEP low-latency), their FP8 prefill pools the same way (DeepEP
#: normal), their FP4 prefill pools at 1,024-token prompts with data-parallel attention and
#: ``--ep-size`` but no all-to-all backend, and at 8,192-token prompts with ``--tp-size``
#: of their cards, ``--dp-size 1 --ep-size 1``. A run is a low-latency one where its decode
#: pools are no wider than four cards (the throughput ones' are 32 or 48). (backend,
#: system, image) → (the widest low-latency decode pool, the (precision, prompt tokens) of
#: the throughput runs whose prefill pools are tensor-parallel).
SCRIPTED_POOLS = {("sglang", "gb200", "lmsysorg/sglang:v0.5.5.post2"): (4, (("fp4", "8192"),))}


def pool_layout(cells: Mapping[str, str], stage: str, pool: Pool) -> Pool:
    """The ``stage`` pool as the point's published recipe ran it where the file writes a
    data-parallel pool's width as its tensor degree (:data:`DATA_PARALLEL_POOLS`): one
    attention rank a card, each with its share of the file's batch (the worker's
    sequences, rounded up; at least one), the experts over all of them and reached
    all-to-all; else the pool as read.

    >>> cells = {"backend": "vllm", "mode": "disagg", "system": "gb200",
    ...          "model_path": "moonshotai/Kimi-K2.5",
    ...          "silicon_data_source": "db-dump/2026-04-27; measured=2026-04-07"}
    >>> pool_layout(cells, "decode", Pool(workers=1, batch=1024, tensor=16, expert=16))
    Pool(workers=1, batch=64, tensor=1, pipeline=1, attention_dp=16, expert=16, dispatch='all_to_all')
    >>> pool_layout(cells, "decode", Pool(workers=4, batch=32, tensor=4, expert=4)).tensor
    4
    >>> pool_layout(cells, "prefill", Pool(workers=1, batch=1, tensor=4, expert=4)).attention_dp
    4

    And where the file writes a pool as data-parallel attention over tensor-parallel
    experts that its script ran otherwise (:data:`SCRIPTED_POOLS`): split by expert
    parallelism, reached as the pool's engine reaches them there
    (:func:`.silicon_layouts.pool_dispatch`); or, where the script starts it
    tensor-parallel, one attention rank over the pool's cards, a decode worker's rank
    holding the sequences the file gives each of its ranks:

    >>> dec = {"backend": "sglang", "mode": "disagg", "system": "gb200", "precision": "fp4",
    ...        "isl": "1024", "decode_moe_tp_size": "32", "decode_tp_size": "1",
    ...        "decode_attention_dp_size": "32", "prefill_moe_tp_size": "4",
    ...        "silicon_data_source": "measured=2025-12-21; lmsysorg/sglang:v0.5.5.post2"}
    >>> pool_layout(dec, "decode", Pool(workers=1, batch=256, tensor=1, attention_dp=32))
    Pool(workers=1, batch=256, tensor=1, pipeline=1, attention_dp=32, expert=32, dispatch='all_to_all')
    >>> pool_layout(dec, "prefill", Pool(workers=4, batch=1, tensor=1, attention_dp=4)).expert
    4
    >>> pool_layout(dec | {"isl": "8192"}, "prefill",
    ...             Pool(workers=4, batch=1, tensor=1, attention_dp=4)).tensor
    4
    >>> low = dec | {"decode_moe_tp_size": "4", "decode_attention_dp_size": "4"}
    >>> pool_layout(low, "decode", Pool(workers=2, batch=4, tensor=1, attention_dp=4))
    Pool(workers=2, batch=16, tensor=4, pipeline=1, attention_dp=1, expert=1, dispatch='all_gather')
    """
    if cells["mode"].strip() != "disagg" or UNPUBLISHED_SETTINGS in cells["silicon_data_source"]:
        return pool
    backend, system = cells["backend"].strip(), cells["system"].strip()
    precision = cells.get("precision", "").strip()
    scripted = SCRIPTED_POOLS.get((backend, system, image_of(cells["silicon_data_source"])))
    width = pool.attention_dp
    if (scripted is not None and width > 1 and pool.tensor == 1 and pool.expert == 1
            and whole(cells.get(f"{stage}_moe_tp_size", "")) == width):
        narrow, tensor_prefill = scripted
        decode = [whole(cells.get(f"decode_{c}", "")) or 1 for c in ("tp_size", "attention_dp_size")]
        low_latency = decode[0] * decode[1] <= narrow
        if low_latency or (stage == "prefill" and (precision, cells.get("isl", "").strip())
                           in tensor_prefill):
            return attrs.evolve(pool, batch=pool.batch * width if stage == "decode" else pool.batch,
                                tensor=width, attention_dp=1, dispatch="all_gather")
        layout = Layout(tensor=1, pipeline=pool.pipeline, attention_dp=width, expert=width)
        return attrs.evolve(pool, expert=width, dispatch=pool_dispatch(
            backend, system, layout, stage, precision))
    widest = DATA_PARALLEL_POOLS.get(
        (cells["backend"].strip(), cells["system"].strip(), cells["model_path"].strip()), {})
    width = pool.tensor * pool.attention_dp
    if (stage not in widest or width <= widest[stage] or pool.attention_dp != 1
            or pool.pipeline != 1 or pool.expert != width):
        return pool
    return attrs.evolve(pool, batch=-(-pool.batch // width), tensor=1, attention_dp=width,
                        dispatch="all_to_all")
