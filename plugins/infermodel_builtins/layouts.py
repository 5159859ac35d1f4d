"""Expert parallelism and data-parallel attention: where a deployment keeps its weights,
its cache and its work, and what moving tokens between its cards costs.

Not a plugin (no entry point): the parallelism lever's hooks call it when
``[levers.parallelism]`` asks for ``attention_data > 1`` or ``expert > 1``.

**The layout.** ``hardware.count`` = N cards = T·D·P: ``tensor`` T cards split each
attention layer (heads), ``attention_data`` D such groups each serve their own
sequences, ``pipeline`` P stages. A stage has G = T·D cards, and every
feed-forward block that is not per DP rank runs across all G of them. ``expert`` X
ranks split the routed experts of each MoE layer; each rank is G/X cards that split
its experts' matrices (X = G: each card holds whole experts).

**Weights by class** (b: bytes per block-linear weight)::

    W_attn   = params_attention · b            the mixers (attention projections)
    W_embed  = the input embedding table
    W_shared = moe_layers · s · m·d·f_shared · b  shared experts
    W_routed = every routed expert             (weight_bytes_routed_experts)
    W_dense  = W − the four above              dense feed-forward layers, routers, norms, head

and the fullest card of the largest stage (s_P = P·⌈L/P⌉/L) holds::

    w_card = s_P/P · (W_attn/T + W_embed/e + W_dense/g + W_shared/h + ρ·W_routed/G),
    ρ = X·⌈E/X⌉/E   (the fullest expert rank holds ⌈E/X⌉ experts)

``dense_weights = "replicated"`` (vLLM: each DP rank is an engine of T cards; TensorRT-LLM's
attention DP replicates the GEMM weights): g = e = h = T. ``"split"`` (SGLang's DP
attention): dense layers and shared experts split over the G cards (g = h = G), the input
table whole on every card (e = 1: SGLang does not shard it under DP attention), and with
``expert_dispatch = "all_to_all"`` the shared experts stay on each DP rank (h = T), as
its DeepEP path computes them on the rank's own tokens.

**Cache.** Each sequence lives on one DP rank of T cards: the cache is split by KV head
over T (a latent cache is whole on each of the T cards), not over N, and each rank holds
only its own sequences. The pooled count of sequences is rounded down to a multiple of D
(whole sequences per rank).

**The busiest card.** A step waits for its slowest card. Two factors say how much more
than the mean it carries:

* the largest DP rank's share of the B sequences, f_dp = ⌈B/D⌉·D/B (engines balance
  requests across DP ranks by count), times the stated ``attention_imbalance``: it
  multiplies the work each rank does for its own sequences (cache reads, attention, the
  DP-local weight multiplies);
* the busiest expert rank, f_ep: stated (``expert_imbalance``, a measured max/mean
  token load, 1/balancedness of vLLM's EPLB log) or, by default, the expected maximum
  over X ranks under uniform routing. t tokens each pick k distinct experts of E; one
  rank receives a hypergeometric share with mean t·k/X and variance
  t·k·(1/X)(1 − 1/X)(E − k)/(E − 1), and the expected maximum of X such loads is at most
  mean + σ·√(2·ln X)::

      f_ep(t) = min(X·min(k, ⌈E/X⌉)/k,  ρ·(1 + √(2·ln X·(X − 1)(E − k)/((E − 1)·k·t))))

  It multiplies the routed experts' weight reads and FLOPs. Real routing is more skewed
  than uniform (a warning says by how much a measurement found).

Each DP rank also reads its own copy of the replicated weights every step (a rank with no
sequence still runs the step, as vLLM's and SGLang's DP ranks do).

**Communication** (``communication = "all_reduce"``, D > 1), per layer, priced as ring
collectives over the link (the parallelism lever's model, one place to replace):

* attention all-reduce within each DP rank: a ring over T of the busiest rank's tokens;
* the DP gather: a feed-forward block computed across the G cards gathers every rank's
  tokens and scatters the result back (an all-gather and a reduce-scatter: one ring
  all-reduce over G of the step's tokens) — dense layers under ``"split"``, and every MoE
  layer under ``expert_dispatch = "all_gather"`` (vLLM's default all2all backend
  ``allgather_reducescatter``; SGLang's default ``--moe-a2a-backend none``);
* the expert all-to-all (``expert_dispatch = "all_to_all"``: DeepEP, pplx): per MoE
  layer each token goes to its k experts' ranks (dispatch) and comes back (combine),
  t·k·d·a bytes across the group, (X − 1)/X of them leaving their card, spread over the
  G cards, the busiest rank receiving f_ep times its share; plus an all-reduce over the
  G/X cards of an expert rank when they split its experts.

References: vLLM "Expert Parallel Deployment" and "Data Parallel Deployment"
(EP_SIZE = TP_SIZE × DP_SIZE; attention weights replicated, experts split; EPLB
balancedness = mean / max tokens per expert rank); SGLang "Understanding TP, DP, and
DP-Attention" and "DP, DPA and SGLang DP Router" (attn_tp_size = tp/dp; each DP rank keeps
only its requests' cache; MLA's latent cache is the same size at any attention TP);
TensorRT-LLM "Parallelism in TensorRT LLM" (attention DP replicates the GEMM weights and
partitions the cache); DeepSeek-V3 technical report (arXiv:2412.19437) §3.4 (attention
DP with expert parallelism, dispatch and combine all-to-all, redundant experts for load
balance).
"""

from __future__ import annotations

import math

import attrs
import sympy
from sympy import ceiling, floor

from infermodel.plugin import S

from .layout_comm import (
    comm_coefficients,
    comm_parts,
    dispatch_terms,
    layer_counts,
    qk_norm_comm,
    ring,
    routed_width,
)
from .layout_kernels import collective_kernels
from .shapes import (
    ffn_block,
    latent_projections,
    moe_layer_count,
    row_label,
    row_terms,
    structure,
    terms,
)
from .unevaluated import Max, Min

VLLM_EP = ("vLLM docs, 'Expert Parallel Deployment' (EP_SIZE = TP_SIZE × DP_SIZE; attention "
           "weights replicated, expert weights split) and 'Data Parallel Deployment'")
SGLANG_DPA = ("SGLang docs, 'Understanding TP, DP, and DP-Attention' (attn_tp_size = tp_size / "
              "dp_size; each DP rank keeps only its own requests' cache)")
TRTLLM_DP = ("TensorRT-LLM docs, 'Parallelism in TensorRT LLM' (attention DP: GEMM weights "
             "replicated, KV cache partitioned)")
DEEPSEEK = ("DeepSeek-V3 technical report (arXiv:2412.19437), §3.4 'Inference and Deployment' "
            "(attention DP, expert parallelism, all-to-all dispatch and combine)")
LAYOUT = f"{VLLM_EP}; {SGLANG_DPA}"
IMBALANCE = ("expected maximum of X ranks' loads under uniform routing (mean + σ·√(2·ln X)); "
             "vLLM docs, 'Expert Parallel Load Balancer' (balancedness = mean / max)")
#: A measured effect of expert imbalance, quoted by the default's warning: SGLang's
#: DeepSeek-V3 prefill at EP32 (4 nodes of 8 H100, 16,384 tokens per device, 4,096-token
#: inputs) reached 50,302 tokens/s per node with the default expert placement and 59,337
#: with a simulated perfect balance (LMSYS blog, 2025-05-05, "Deploying DeepSeek with PD
#: Disaggregation and Large-scale Expert Parallelism on 96 H100 GPUs", Profile Results).
MEASURED_SLOWDOWN = (59_337, 50_302)
MEASURED = ("LMSYS blog 2025-05-05, 'Deploying DeepSeek with PD Disaggregation and Large-scale "
            "Expert Parallelism on 96 H100 GPUs'")

DENSE_CHOICES = ("replicated", "split")
DISPATCH_CHOICES = ("all_gather", "all_to_all")
#: The engine default for ``dense_weights`` (``efficiency.engine``): SGLang splits the dense
#: layers over the whole group under DP attention; vLLM and TensorRT-LLM keep every
#: non-expert weight on each DP rank.
DENSE_BY_ENGINE = {"sglang": "split"}


@attrs.frozen
class Layout:
    """The degrees of a deployment and where its weights go."""

    tensor: int
    pipeline: int
    data: int
    expert: int
    dense: str
    dispatch: str
    moe: bool

    @property
    def stage_cards(self) -> int:
        """G = T·D: the cards of one pipeline stage."""
        return self.tensor * self.data

    @property
    def active(self) -> bool:
        """Data-parallel attention or expert parallelism is asked for."""
        return self.data > 1 or self.expert > 1

    @property
    def a2a(self) -> bool:
        """MoE layers move tokens by all-to-all (needs DP ranks with tokens of their own)."""
        return self.dispatch == "all_to_all" and self.moe and self.data > 1 and self.expert > 1

    @property
    def shared_local(self) -> bool:
        """Shared experts stay on each DP rank (split over T only)."""
        return self.dense == "replicated" or self.a2a


def dense_placement(lever, engine: str) -> str:
    """``dense_weights`` as given, or the engine's default."""
    if lever.dense_weights is not None:
        return lever.dense_weights
    return DENSE_BY_ENGINE.get(engine, "replicated")


def expert_imbalance(rho, tokens, ranks=None, experts=None, active=None):
    """f_ep(t): the busiest of X expert ranks' token load over the mean under uniform
    routing (see the module docstring); plain numbers give a number.

    DeepSeek-V3 (E = 256, k = 8) on 8 ranks: one token, and a batch of 256 tokens:

    >>> round(expert_imbalance(1, 1, 8, 256, 8), 3), round(expert_imbalance(1, 256, 8, 256, 8), 3)
    (2.881, 1.118)
    """
    if ranks is None:
        ranks, experts, active = (S.parallel_expert_degree, S.experts, S.active_experts)
    numeric = all(isinstance(v, (int, float)) for v in (rho, tokens, ranks, experts, active))
    per_rank = (math.ceil(experts / ranks) if numeric else ceiling(experts / ranks))
    if numeric:
        spread = 2 * math.log(ranks) * (ranks - 1) * (experts - active) / ((experts - 1) * active * tokens)
        return min(ranks * min(active, per_rank) / active, rho * (1 + math.sqrt(spread)))
    spread = 2 * sympy.log(ranks) * (ranks - 1) * (experts - active) / ((experts - 1) * active * tokens)
    return Min(ranks * Min(active, per_rank) / active, rho * (1 + sympy.sqrt(spread)))


# ---------------------------------------------------------------------------------
# Quantities
# ---------------------------------------------------------------------------------


def define_layout(scenario, lever, lay: Layout, define, linear_bytes) -> None:
    """The layout's weights, cache and busiest-card quantities (``lay.active``)."""
    _weights(scenario, lay, define, linear_bytes)
    _busiest(scenario, lever, lay, define)
    _interface(scenario, lever, lay, define)
    _traffic(scenario, lever, lay, define)
    _rows(scenario, lay, define)


def _rows(scenario, lay: Layout, define) -> None:
    """Parameters per card of each layer kind (``infermodel layers`` prints them)."""
    st = structure(scenario)
    if not st.rows:
        return
    T, G = S.parallel_tensor_degree, S.parallel_stage_cards
    rest = G if lay.dense == "split" else T
    stage = S.parallel_weight_stage_factor / S.parallel_pipeline_degree
    for row in st.rows:
        sums = row_terms(scenario, st, row)
        card = sums.mixer_params / T + (sums.params - sums.mixer_params - sums.routed_params
                                        - sums.shared_params) / rest
        if lay.moe:
            card += (sums.shared_params / (T if lay.shared_local else G)
                     + S.parallel_expert_rank_share * sums.routed_params / G)
        define(f"layer_kind_{row.key}_params_per_card", stage * card, unit="param",
               description=f"weights of the layers of {row_label(row, st)} on the fullest card: "
                           "mixers over the tensor cards of a DP rank, routed experts over the "
                           "expert ranks, the rest " + ("over the stage's cards" if rest is G
                                                        else "over the tensor cards"),
               reference=LAYOUT)
    table = 1 if lay.dense == "split" and lay.data > 1 else T
    define("params_outside_layers_per_card",
           stage * (S.params_embedding / table + (S.params_head + S.d_model) / rest), unit="param",
           description="weights outside the layers on the fullest card: the input table "
                       + ("whole" if table == 1 else "over the tensor cards") + ", the head and "
                       "final norm " + ("over the stage's cards" if rest is G else
                                        "over the tensor cards"), reference=LAYOUT)


def _traffic(scenario, lever, lay: Layout, define) -> None:
    """Bytes the layout moves between cards per layer (whatever prices them)."""
    define("parallel_activation_bytes", lever.activation_bytes, unit="B",
           description="bytes per activation value exchanged", reference=LAYOUT)
    if lay.data > 1:
        define("parallel_attention_gather_bytes", S.batch * S.d_model * S.parallel_activation_bytes,
               unit="B", description="bytes of one DP gather in a decode step: every rank's tokens "
                                     "(B·d·a) for a layer run across the stage's cards",
               reference=SGLANG_DPA)
    if lay.moe and lay.expert > 1:
        dispatch = lever.dispatch_activation_bytes
        define("parallel_dispatch_activation_bytes",
               dispatch if dispatch is not None else S.parallel_activation_bytes, unit="B",
               description="bytes per activation value in the expert dispatch" +
                           (" (given)" if dispatch is not None else " (activation_bytes)"),
               reference=DEEPSEEK)
        routed = S.batch * S.active_experts * routed_width(scenario)
        define("parallel_expert_dispatch_bytes", routed * S.parallel_dispatch_activation_bytes,
               unit="B", description="bytes one MoE layer dispatches in a decode step: each "
                                     "token to its k experts (B·k·d·a; d the experts' latent "
                                     "width where they have one), across the ranks",
               reference=DEEPSEEK)
        define("parallel_expert_combine_bytes", routed * S.parallel_activation_bytes, unit="B",
               description="bytes one MoE layer combines in a decode step (B·k·d·a)",
               reference=DEEPSEEK)


def _shared_width(scenario):
    return S.shared_expert_d_ff if structure(scenario).ffn else S.expert_d_ff


def _weights(scenario, lay: Layout, define, linear_bytes) -> None:
    T, D, G = S.parallel_tensor_degree, S.parallel_attention_data_degree, S.parallel_stage_cards
    define("parallel_attention_weight_bytes", S.params_attention * linear_bytes, unit="B",
           description="bytes of the attention (mixer) projections, kept whole on every DP rank "
                       "and split over its tensor cards", reference=LAYOUT)
    if lay.moe:
        define("parallel_shared_expert_weight_bytes",
               moe_layer_count(scenario) * S.shared_experts
               * ffn_block(S.ffn_matrices, S.d_model, _shared_width(scenario))
               * linear_bytes, unit="B",
               description="bytes of the shared experts of every MoE layer", reference=LAYOUT)
        define("parallel_experts_per_rank", ceiling(S.experts / S.parallel_expert_degree), unit="1",
               description="routed experts of each MoE layer the fullest expert rank holds (whole "
                           "experts)", reference=VLLM_EP)
        define("parallel_expert_rank_share", S.parallel_expert_degree * S.parallel_experts_per_rank
               / S.experts, unit="1",
               description="the fullest expert rank's experts over the mean share (1 when the "
                           "experts divide evenly)", reference=VLLM_EP)
        shared, routed = S.parallel_shared_expert_weight_bytes, S.weight_bytes_routed_experts
    else:
        shared = routed = sympy.Integer(0)
    latent = sympy.Integer(0)
    if lay.moe and scenario.value("model.moe_latent_size") is not None:
        define("parallel_latent_projection_weight_bytes",
               moe_layer_count(scenario) * latent_projections(scenario) * linear_bytes, unit="B",
               description="bytes of a latent mixture of experts' projections into and out of "
                           "the experts' width (2·d·l a MoE layer), whole on every card",
               reference=LAYOUT)
        latent = S.parallel_latent_projection_weight_bytes
    define("parallel_dense_weight_bytes",
           S.weight_bytes - S.parallel_attention_weight_bytes - S.embedding_table_bytes - shared - routed
           - latent,
           unit="B", description="bytes of the other weights: dense feed-forward layers, routers, "
                                 "norms and the output head", reference=LAYOUT)
    split = lay.dense == "split"
    per_card = (S.parallel_attention_weight_bytes / T
                + S.embedding_table_bytes / (1 if split and lay.data > 1 else T)
                + S.parallel_dense_weight_bytes / (G if split else T) + latent)
    if lay.moe:
        per_card += (S.parallel_shared_expert_weight_bytes / (T if lay.shared_local else G)
                     + S.parallel_expert_rank_share * S.weight_bytes_routed_experts / G)
    where = ("dense layers split over the stage's cards, the input table whole on each"
             if split else "every non-expert weight on each DP rank")
    define("parallel_weight_bytes_per_card",
           S.parallel_weight_stage_factor / S.parallel_pipeline_degree * per_card, unit="B",
           description=f"weights on the fullest card: attention split over the tensor cards of "
                       f"its DP rank, routed experts over the expert ranks ({where})",
           reference=f"{LAYOUT}; {TRTLLM_DP}")
    define("parallel_weight_bytes_replicated",
           S.card_count * S.parallel_weight_bytes_per_card - S.weight_bytes, unit="B",
           description="bytes the cards store beyond one copy of the weights (the fullest card "
                       "times the cards, less the artifact): replicas on the DP ranks",
           reference=LAYOUT)
    # What each DP rank reads of its own copy every step, the others' copies included.
    local = S.parallel_attention_weight_bytes
    if not split:
        local += S.parallel_dense_weight_bytes
    if lay.moe and lay.shared_local:
        local += S.parallel_shared_expert_weight_bytes
    define("parallel_replica_read_bytes", (D - 1) * local + (G - 1) * latent, unit="B",
           description="weight bytes the other D − 1 DP ranks read of their own copies each step "
                       "(attention" + ("" if split else ", dense layers") +
                       (", shared experts" if lay.moe and lay.shared_local else "") + ")"
                       + ("; and every card but one its own copy of the latent projections"
                          if latent != 0 else ""),
           reference=LAYOUT)


def _busiest(scenario, lever, lay: Layout, define) -> None:
    D = S.parallel_attention_data_degree
    define("parallel_attention_imbalance", lever.attention_imbalance, unit="1",
           description="stated factor on the largest DP rank's share beyond whole-sequence "
                       "rounding (1: engines balance requests across DP ranks by count)",
           reference=SGLANG_DPA)
    define("parallel_attention_batch_factor",
           ceiling(S.batch / D) * D / S.batch * S.parallel_attention_imbalance, unit="1",
           description="the largest DP rank's share of the batch times D: ⌈B/D⌉·D/B times the "
                       "stated imbalance (1 when the ranks are even)", reference=SGLANG_DPA)
    local = S.params_attention
    if lay.dense == "replicated":
        local = S.params_matmul - (S.params_routed_active if lay.moe else 0)
    elif lay.moe and lay.shared_local:
        local += moe_layer_count(scenario) * S.shared_experts * ffn_block(
            S.ffn_matrices, S.d_model, _shared_width(scenario))
    define("parallel_attention_local_params", local, unit="param",
           description="weights each DP rank multiplies for its own tokens (" +
                       ("every non-expert weight" if lay.dense == "replicated" else "the attention "
                        "projections" + (" and shared experts" if lay.moe and lay.shared_local else ""))
                       + ")", reference=LAYOUT)
    if not lay.moe:
        return
    given = lever.expert_imbalance
    for name, tokens, when in (("parallel_expert_imbalance", S.batch, "a decode step's B tokens"),
                               ("parallel_expert_imbalance_prefill", S.batch * S.prompt_tokens,
                                "the prefill's B·n tokens"),
                               ("parallel_expert_imbalance_capacity", Max(1, S.max_sequences),
                                "a decode step with the cache full")):
        if given is not None:
            define(name, given, unit="1", reference=VLLM_EP,
                   description=f"busiest expert rank's token load over the mean for {when} "
                               "(stated: expert_imbalance)")
        else:
            define(name, expert_imbalance(S.parallel_expert_rank_share, tokens), unit="1",
                   reference=IMBALANCE,
                   description=f"busiest expert rank's token load over the mean for {when}: "
                               "expected maximum of X ranks under uniform routing, "
                               "min(X·min(k, ⌈E/X⌉)/k, ρ·(1 + √(2·ln X·(X−1)(E−k)/((E−1)·k·t))))")


def _interface(scenario, lever, lay: Layout, define) -> None:
    """The serving simulator's names for the layout (its iteration cost reads these)."""
    define("attention_data_ranks", S.parallel_attention_data_degree, unit="1",
           description="DP attention ranks: the serving simulator's busiest rank holds ⌈n/D⌉ of "
                       "an iteration's n sequences", reference=SGLANG_DPA)
    define("attention_rank_imbalance", S.parallel_attention_imbalance, unit="1",
           description="stated factor on the largest DP rank beyond whole-sequence rounding (the "
                       "serving simulator's)", reference=SGLANG_DPA)
    define("attention_local_params", S.parallel_attention_local_params, unit="param",
           description="weights a DP rank multiplies for its own tokens (the serving simulator "
                       "scales them with the busiest rank)", reference=LAYOUT)
    define("replicated_weight_reads", S.parallel_replica_read_bytes, unit="B",
           description="weight bytes the other DP ranks read per iteration (the serving "
                       "simulator adds them to W)", reference=LAYOUT)
    if lay.moe and lay.expert > 1:
        define("expert_ranks", S.parallel_expert_degree, unit="1",
               description="expert-parallel ranks: the serving simulator scales the routed "
                           "experts' work by the busiest rank's load", reference=VLLM_EP)
        define("expert_rank_share", S.parallel_expert_rank_share, unit="1",
               description="the fullest expert rank's experts over the mean share (the serving "
                           "simulator's ρ)", reference=VLLM_EP)
        define("routed_params_active", S.params_routed_active, unit="param",
               description="routed-expert weights one token multiplies (the serving simulator "
                           "scales their FLOPs by the busiest expert rank)", reference=VLLM_EP)
        moe = scenario.lever("moe")
        if moe is not None and moe.routing != "uniform":
            define("routed_read_bytes", _routed_read(lay, S.experts_read_per_layer), unit="B",
                   description="routed-expert bytes a step reads whatever its tokens (routing = "
                               f"\"{moe.routing}\"; the serving simulator scales them by the "
                               "busiest expert rank)", reference=VLLM_EP)
        if lever.expert_imbalance is not None:
            define("expert_imbalance_given", lever.expert_imbalance, unit="1",
                   description="the stated busiest/mean expert load the serving simulator uses",
                   reference=VLLM_EP)


# ---------------------------------------------------------------------------------
# The busiest card's extra time
# ---------------------------------------------------------------------------------


def _ep(lay: Layout, name: str):
    """f_ep − 1 (0 without expert parallelism)."""
    return (S[name] - 1) if lay.moe and lay.expert > 1 else 0


def _routed_read(lay: Layout, experts_read):
    return S.weight_bytes_routed_experts * experts_read / S.experts if lay.moe else 0


def _routed_flops(lay: Layout, tokens):
    return 2 * tokens * S.params_routed_active if lay.moe else 0


def _staged(weights, other, compute, rate, pipeline: bool):
    """(extra memory time, extra compute time) with P pipeline stages and m micro-batches:
    each micro-batch re-reads the weights (×P), the rest is done P/m times over, as the
    pipeline's own step time counts them.
    """
    if pipeline:
        p, m = S.parallel_pipeline_degree, S.parallel_microbatches
        return (p * weights + p / m * other) / S.bandwidth, p / m * compute / rate
    return (weights + other) / S.bandwidth, compute / rate


def decode_extra(scenario, lay: Layout):
    """(extra memory time, extra compute time) of the busiest card in a decode step."""
    f_dp = S.parallel_attention_batch_factor
    cache = S.decode_bytes - S.weight_bytes_per_step
    weights = (S.parallel_replica_read_bytes + _ep(lay, "parallel_expert_imbalance")
               * _routed_read(lay, S.experts_read_per_layer if lay.moe else 0))
    local = S.decode_flops - 2 * S.batch * (S.params_matmul - S.parallel_attention_local_params)
    compute = ((f_dp - 1) * local
               + _ep(lay, "parallel_expert_imbalance") * _routed_flops(lay, S.batch))
    return _staged(weights, (f_dp - 1) * cache, compute, S.flops_effective_decode,
                   lay.pipeline > 1)


def prefill_extra(scenario, lay: Layout):
    """(extra memory time, extra compute time) of the busiest card in prefill (a prompt's
    tokens reach every expert: the whole routed read).
    """
    f_dp = S.parallel_attention_batch_factor
    n = S.prompt_tokens
    moved = S.prefill_bytes - S.weight_bytes + S.embedding_bytes_unread_prefill
    weights = (S.parallel_replica_read_bytes
               + _ep(lay, "parallel_expert_imbalance_prefill") * _routed_read(lay, S.experts))
    # Weights multiplied outside the DP ranks: every position but the head's, which
    # multiplies only the scored positions (prefill_logit_positions per sequence).
    outside = S.params_matmul - S.parallel_attention_local_params
    if lay.dense == "split":
        remote = (2 * S.batch * n * (outside - S.params_head_matmul)
                  + 2 * S.batch * S.prefill_logit_positions * S.params_head_matmul)
    else:
        remote = 2 * S.batch * n * outside
    compute = ((f_dp - 1) * (S.prefill_flops - remote)
               + _ep(lay, "parallel_expert_imbalance_prefill") * _routed_flops(lay, S.batch * n))
    return _staged(weights, (f_dp - 1) * moved, compute, S.flops_effective_prefill,
                   lay.pipeline > 1)


def capacity_extra(scenario, lay: Layout):
    """(extra memory time, extra compute time) of the busiest card with the cache full."""
    layer_terms = terms(scenario)
    full = Max(1, S.max_sequences)
    D = S.parallel_attention_data_degree
    f_dp = ceiling(full / D) * D / full * S.parallel_attention_imbalance
    memory = (S.parallel_replica_read_bytes + (f_dp - 1) * full * layer_terms.cache_read(S.context)
              + _ep(lay, "parallel_expert_imbalance_capacity")
              * _routed_read(lay, S.experts_read_at_capacity if lay.moe else 0))
    local = full * (2 * S.parallel_attention_local_params + layer_terms.attention_decode(S.context))
    compute = ((f_dp - 1) * local
               + _ep(lay, "parallel_expert_imbalance_capacity") * _routed_flops(lay, full))
    return memory / S.bandwidth, compute / S.flops_effective_decode


def round_sequences(old):
    """Whole sequences on each DP rank: the pooled count rounded down to a multiple of D."""
    D = S.parallel_attention_data_degree
    return D * floor(old / D)


# ---------------------------------------------------------------------------------
# Communication under data-parallel attention
# ---------------------------------------------------------------------------------


def _comm_total(scenario, lay: Layout, tokens, f_dp, f_ep, hops):
    return sympy.Add(*(time for time, _ in comm_parts(scenario, lay, tokens, f_dp, f_ep).values()),
                     hops(tokens))


def define_communication(scenario, lay: Layout, define, hops) -> None:
    """The collectives of a data-parallel-attention layout (``communication = "all_reduce"``),
    each a quantity of its own so that a collective model can price it.
    """
    per_micro = S.batch / S.parallel_microbatches
    f_dp = S.parallel_attention_batch_factor
    D, T, G = S.parallel_attention_data_degree, S.parallel_tensor_degree, S.parallel_stage_cards
    define("parallel_allreduce_time", ring(T, per_micro * f_dp / D), unit="s",
           description="one ring all-reduce within the largest DP rank's tensor cards of its "
                       "decode tokens: 2(T−1)/T·bytes/link + 2(T−1)·latency", reference=SGLANG_DPA)
    define("parallel_attention_gather_time", ring(G, per_micro), unit="s",
           description="gathering every DP rank's decode tokens for a layer run across the "
                       "stage's cards and scattering the result back (all-gather + reduce-"
                       "scatter, priced as one ring all-reduce over G)", reference=SGLANG_DPA)
    if lay.a2a:
        dispatch, combine, inner = dispatch_terms(scenario, lay, per_micro,
                                                  S.parallel_expert_imbalance)
        define("parallel_dispatch_time", dispatch, unit="s",
               description="all-to-all dispatch of one MoE layer in decode: each token to its k "
                           "experts' ranks, the busiest rank's share over the link",
               reference=DEEPSEEK)
        define("parallel_combine_time", combine + inner, unit="s",
               description="all-to-all combine of one MoE layer in decode (the experts' outputs "
                           "back to their tokens' ranks" + (", and the all-reduce within an "
                           "expert rank's cards" if lay.stage_cards > lay.expert else "") + ")",
               reference=DEEPSEEK)
    f_ep = S.parallel_expert_imbalance if lay.moe and lay.expert > 1 else 1
    define("parallel_decode_comm_time", _comm_total(scenario, lay, per_micro, f_dp, f_ep, hops),
           unit="s", description="communication per decode step: the attention all-reduces within "
                                 "the DP ranks, the DP gathers" + (", the expert dispatch and "
                                 "combine" if lay.a2a else "") + " and the pipeline hops, not "
                                 "overlapped", reference=LAYOUT)
    f_ep = S.parallel_expert_imbalance_prefill if lay.moe and lay.expert > 1 else 1
    define("parallel_prefill_comm_time",
           _comm_total(scenario, lay, per_micro * S.prompt_tokens, f_dp, f_ep, hops), unit="s",
           description="communication in prefill: the same collectives for the prompts' tokens",
           reference=LAYOUT)
    full = Max(1, S.max_sequences)
    f_full = ceiling(full / D) * D / full * S.parallel_attention_imbalance
    f_ep = S.parallel_expert_imbalance_capacity if lay.moe and lay.expert > 1 else 1
    define("parallel_capacity_comm_time",
           _comm_total(scenario, lay, full / Min(full, S.parallel_pipeline_degree), f_full, f_ep, hops),
           unit="s", description="communication per decode step with the cache full", reference=LAYOUT)
    fixed, group, attention, expert = comm_coefficients(scenario, lay)
    define("comm_time_per_iteration", fixed, unit="s",
           description="latency part of an iteration's communication (the serving simulator adds "
                       "it to every iteration)", reference=LAYOUT)
    define("comm_time_per_token", group, unit="s",
           description="communication per token of a micro-batch across the stage: DP gathers "
                       "and stage hops (the serving simulator's iteration cost)", reference=LAYOUT)
    define("comm_time_per_token_attention", attention, unit="s",
           description="attention all-reduce time per token of an iteration at even DP ranks (the "
                       "serving simulator scales it by the busiest rank)", reference=SGLANG_DPA)
    define("comm_time_per_token_expert", expert, unit="s",
           description="expert dispatch and combine time per token at even expert ranks (the "
                       "serving simulator scales it by the busiest expert rank)", reference=DEEPSEEK)


def define_operators(scenario, lay: Layout, define, wire=None) -> None:
    """The layout's collectives as operators with their own times (decode and prefill), and
    the measured kernels each is made of (:mod:`.layout_kernels`); ``wire``: bytes of a
    dispatched value.
    """
    f_dp = S.parallel_attention_batch_factor
    what = {"all_reduce": "ring all-reduces within each DP rank's tensor cards (attention" +
                          (", dense layers" if lay.dense == "replicated" else "") +
                          (", shared experts" if lay.a2a else "") + ") and the pipeline hops",
            "attention_gather": "DP gathers: every rank's tokens to the cards of the stage for the "
                                "layers run across them, and the reduce-scatter back",
            "expert_dispatch": "all-to-all dispatch of each token to its k experts' ranks",
            "expert_combine": "all-to-all combine of the experts' outputs back to the tokens' ranks"}
    for phase, tokens, imbalance in (("decode", S.batch, "parallel_expert_imbalance"),
                                     ("prefill", S.batch * S.prompt_tokens,
                                      "parallel_expert_imbalance_prefill")):
        per_micro = tokens / S.parallel_microbatches
        f_ep = S[imbalance] if lay.moe and lay.expert > 1 else 1
        hops = (S.parallel_pipeline_degree - 1) * (
            per_micro * S.d_model * S.parallel_activation_bytes / S.parallel_link_bandwidth
            + S.parallel_link_latency)
        kernels = collective_kernels(scenario, lay, per_micro, layer_counts(scenario, lay),
                                     wire, hops)
        for name, (time, moved) in comm_parts(scenario, lay, per_micro, f_dp, f_ep).items():
            if name == "all_reduce":
                if lay.tensor == 1 and lay.pipeline == 1:
                    continue  # no all-reduce within a one-card rank, no stage to cross
                time += hops
            if name == "attention_gather" and lay.dense == "replicated" and lay.a2a:
                continue  # nothing is gathered: dense layers per rank, experts by all-to-all
            define(phase, name, flops=0, bytes=moved * S.parallel_microbatches, time=time,
                   description=what[name] + "; added to the step by the parallelism lever",
                   reference=DEEPSEEK if name.startswith("expert") else SGLANG_DPA,
                   kernels=kernels.get(name, ()))


__all__ = [
    "DENSE_BY_ENGINE",
    "DENSE_CHOICES",
    "DISPATCH_CHOICES",
    "MEASURED",
    "MEASURED_SLOWDOWN",
    "Layout",
    "capacity_extra",
    "comm_coefficients",
    "comm_parts",
    "decode_extra",
    "define_communication",
    "define_layout",
    "define_operators",
    "dense_placement",
    "dispatch_terms",
    "expert_imbalance",
    "layer_counts",
    "prefill_extra",
    "qk_norm_comm",
    "ring",
    "round_sequences",
    "routed_width",
]
