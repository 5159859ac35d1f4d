"""Measured kernels: every operator of a step timed from NVIDIA's measured kernel tables.

``[efficiency] kernels = "measured"`` replaces the roofline of each operator (the
operators plugin's table: ``infermodel ops``) by the latency the tables measured for the
kernels it is made of, on the card ``hardware.kernel_system`` names (the hardware
presets name theirs), under the engine ``efficiency.engine`` at ``engine_version``
(default: the newest the tables hold for that card; a table family the version lacks is
served by the newest older one, else by the oldest later one, with a warning)::

    t_op    = Σ over its kernels  share · calls · lookup(shape after tensor parallelism)
              + Σ over its elementwise kernels  (roofline on a pipeline stage + calls · τ_ew)
    t_step  = Σ measured operators + Σ operators no table covers (at their roofline)
              + n_ew · τ_ew + τ_step + t0

An operator's kernels are what its plugin declares (:class:`infermodel.plugin.Kernel`):
GEMMs with the dtype its weight class's format implies (bf16, FP8 per tensor or per
block, INT4/INT8 weight-only, NVFP4), context and generation attention (per window
size), the grouped MoE kernel (MXFP4 experts with 16-bit or MXFP8 activations:
``efficiency.mxfp4_activations``, default the engine's own), the all-reduces of tensor
parallelism. ``lookup`` is a
table read as a function (:mod:`infermodel.kernels`): log–log interpolation inside the
measured grid, the roofline ratio from the nearest measured point outside it (with a
warning that says how far). The norms and the embedding lookup are elementwise: no table
covers them and they keep their roofline (stated in the step's derivation), each launch
plus the measured system's fixed time of an elementwise kernel
(``τ_ew``: ``elementwise_kernel_latency``, its ``mem_empirical_constant_latency``; ``n_ew``
the launches: two norms a block, the final norm, the lookup). So do the elementwise
kernels inside measured operators, within their operator's time: each dense block's
activation between its GEMMs, and the rotary embedding before attention where the engine
launches it apart (vLLM, SGLang; TensorRT-LLM applies it in its attention op).

No table times the engine's own work between the kernels: its scheduler and host work per
iteration ``τ_step`` (``step_overhead``: ``efficiency.step_overhead`` where the scenario
sets it, else the one its engine generation's efficiency preset was fitted to on the
accuracy ledger; none for an engine without a preset). No host time per scheduled sequence is added: current engines
prepare the next batch while the GPU runs the step (vLLM's asynchronous scheduling,
SGLang's and TensorRT-LLM's overlap schedulers), and added in full it over-predicted the
measured TPOT above 128 clients (``docs/kernels.rst``). ``efficiency.t0`` adds any other
fixed time per step (0 by default). No table times a request's way through the server
either (API server, tokenisation, the engine's queues, the first token's return through
the streaming response): ``ttft`` (and so ``e2e_latency``) adds ``request_overhead``,
the scenario's ``efficiency.request_overhead`` (0 where it states none, with a warning
that says how large it was on NVIDIA's measured deployments, ``docs/kernels.rst``) plus
``efficiency.request_overhead_per_token`` for each prompt token where it states one;
``ttft_batch``, the batch's prefill pass that the card-time figures read, does not.

An unmapped card or engine, or an operator whose kernels no table holds, falls back to
the roofline with a warning naming the operators and their share of the step.

References: NVIDIA aiconfigurator-core 0.12 measured kernel tables (Apache-2.0),
``systems/data/<system>/<family>/<engine>/<version>/*.parquet``; Module 10: Inference and
serving, §1–§2 (the roofline each operator falls back to).
"""

from __future__ import annotations

from pathlib import Path

import sympy

import infermodel.plugin as door
from infermodel.plugin import (
    InfermodelError,
    S,
    Stage,
    hookimpl,
    suggest,
)

from . import M10, kernel_plan, measured_checks
from . import unmeasured_times as unmeasured
from .efficiency_parameters import HOST
from .engines import MIXED_BATCHES, SEPARATE_ROPE, TRTLLM_NORM_FUSION, TRTLLM_ROPE_FUSION
from .kernel_plan import PHASES, Plan, Setup, time_name
from .kernel_setup import ENGINE_TABLES, setup
from .layout_kernels import all_reduce, collective_kernels, qk_norm_all_reduce
from .layouts import layer_counts
from .moe_selection import SELECTION_SOURCE
from .parallelism import degrees
from .parallelism import layout as parallel_layout

TABLES = ("NVIDIA aiconfigurator-core 0.12 measured kernel tables (Apache-2.0): "
          "systems/data/<system>/<family>/<engine>/<version>")
ROOFLINE = f"{M10}, §1–§2 (each operator on its own roofline)"
CHOICES = ("roofline", "measured")
#: What an engine may multiply MXFP4 experts with (``efficiency.mxfp4_activations``).
MXFP4_ACTIVATIONS = ("bf16", "mxfp8")
#: The MoE runners ``efficiency.moe_backend`` names (the kernel tables' own list,
#: ``infermodel.kernels.MOE_BACKENDS``, is read only when a table is).
MOE_BACKEND_CHOICES = ("triton", "flashinfer_trtllm", "flashinfer_cutlass", "marlin")


# ---------------------------------------------------------------------------------
# Fields
# ---------------------------------------------------------------------------------


@hookimpl
def infermodel_register_fields(register):
    register("efficiency", "kernels", kind="choice", choices=CHOICES, default="roofline",
             description='operator times: "roofline" (the formulas of the roofline) or '
                         '"measured" (each operator from NVIDIA\'s measured kernel tables for '
                         'hardware.kernel_system under efficiency.engine; needs the extra '
                         'infermodel[kernels])')
    register("efficiency", "engine_version", kind="str", default=None,
             description="the engine's version: whose measured kernel tables time the "
                         'operators (efficiency.kernels = "measured"; default: the newest the '
                         "tables hold for the card), and which of its defaults apply where "
                         "they changed (SGLang before 0.5.3 kept a fixed share of memory by "
                         "tensor degree; default: the current ones)")

    def kernel_choice(name, choices, description):
        register("efficiency", name, kind="choice", choices=choices, default=None,
                 description=description)

    kernel_choice("mxfp4_activations", MXFP4_ACTIVATIONS,
                  "under measured kernels, what the engine multiplies MXFP4 experts "
                  'with on a card with FP4 tensor cores: "bf16" (weight-only, the MoE '
                  "tables' w4a16_mxfp4) or "
                  '"mxfp8" (activations quantised to MXFP8 first, w4a8_mxfp4_mxfp8: '
                  "vLLM with VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1); default: the "
                  "engine's own (TensorRT-LLM on Blackwell: mxfp8; vLLM and SGLang: "
                  "bf16). Cards without FP4 tensor cores always widen to bf16")
    kernel_choice("moe_backend", MOE_BACKEND_CHOICES,
                  "under measured kernels, the MoE runner the engine was launched with: "
                  'the grouped-MoE rows of that backend only ("triton": the Triton '
                  "kernels, vLLM's and SGLang's fused MoE among them; "
                  '"flashinfer_trtllm", "flashinfer_cutlass": FlashInfer\'s '
                  "TensorRT-LLM or CUTLASS kernels; "
                  '"marlin"), from the newest table at or below the engine version that '
                  "measured it (vLLM with VLLM_USE_FLASHINFER_MOE_FP8=0 and "
                  "VLLM_MOE_USE_DEEP_GEMM=0 runs Triton; SGLang's --moe-runner-backend); "
                  "default: the fastest row of each cell. SGLang's DeepEP tables and most "
                  "of TensorRT-LLM's name no backend (the former are read as they are)")
    register("efficiency", "request_overhead_per_token", kind="quantity", unit="s", minimum=0,
             default=None, quantity="measured_request_overhead_per_token",
             description="under measured kernels, the time each prompt token adds to a "
                         "request's way through the server beside efficiency.request_overhead "
                         "(tokenising and processing the prompt, and whatever else grows with "
                         "it that no kernel table times): request_overhead = "
                         "efficiency.request_overhead + this × workload.prompt_tokens")
    register("hardware", "kernel_system", kind="str", default=None,
             description="the measured kernel tables' name for this card (\"h200_sxm\"); the "
                         "hardware presets name theirs")


# ---------------------------------------------------------------------------------
# What a scenario's measured kernels are
# ---------------------------------------------------------------------------------


def _measured(scenario) -> bool:
    return scenario.value("efficiency.kernels") == "measured"


@hookimpl
def infermodel_validate_scenario(scenario, report):
    unmeasured.check_per_token(scenario, report, measured=_measured(scenario))
    if not _measured(scenario):
        return
    if scenario.value("efficiency.model") == "physical":
        # Both price every operator: the tables time them, and what they do not cover
        # runs at the engine preset's rates already.
        expected = ("measured kernels without the physical efficiency model (the operators "
                    "the tables do not cover run at the engine preset's sustained bandwidth "
                    "and GEMM shares)")
        preset = scenario.presets.get("efficiency")
        origin = scenario.origins.get("efficiency.model")
        if (preset is not None and origin is not None and origin.file is not None
                and Path(origin.file).stem == preset and origin.file != str(scenario.path)):
            # The preset file wrote it, not the scenario.
            report("efficiency.preset", f'the efficiency preset {preset!r} prices the model '
                   'with the physical efficiency model (model = "physical"), which kernels = '
                   '"measured" replaces', expected=expected,
                   suggestion="remove efficiency.preset (measured kernels read the engine "
                              "preset's rates themselves), or efficiency.kernels")
        else:
            report("efficiency.model", 'kernels = "measured" times every operator from the '
                   'measured tables, so it cannot be combined with the physical efficiency '
                   'model', expected=expected,
                   suggestion='remove efficiency.model = "physical", or efficiency.kernels')
        return
    kernels = door.kernels
    try:
        kernels.root()
    except InfermodelError as exc:
        problem = exc.problems[0]
        report("efficiency.kernels", problem.message, expected=problem.expected,
               suggestion=problem.suggestion)
        return
    system = scenario.value("hardware.kernel_system")
    if system is not None and system not in kernels.systems():
        report("hardware.kernel_system", f"the measured kernel tables have no system {system!r}",
               expected="one of " + ", ".join(kernels.systems()),
               suggestion=suggest(system, kernels.systems()))
        return
    try:
        setup(scenario)
    except InfermodelError as exc:
        problem = exc.problems[0]
        key = ("efficiency.engine_version" if scenario.value("efficiency.engine_version")
               else "efficiency.engine")
        report(key, problem.message, expected=problem.expected, suggestion=problem.suggestion)


def plan(scenario) -> Plan:
    """Every operator of both phases with its measured (or roofline) time (kept for the
    scenario object's life).
    """
    return kernel_plan.plan(scenario, setup)


# ---------------------------------------------------------------------------------
# Operators, quantities and transformations
# ---------------------------------------------------------------------------------


@hookimpl
def infermodel_define_operators(scenario, define):
    """Under measured kernels, the collectives of the layout as operators of their own
    (the tensor-parallel all-reduces, two per layer; under data-parallel attention or
    expert parallelism the all-reduces within each attention rank, the gathers over the
    stage and the expert all-to-all), unless the parallelism lever times them
    (``communication = "all_reduce"``; its default ``"collectives"`` leaves them to the
    measured tables).
    """
    if not _measured(scenario):
        return
    lever = scenario.lever("parallelism")
    tensor = degrees(scenario)[0] if lever is not None else scenario.value("hardware.count")
    if lever is not None and lever.communication == "all_reduce":
        return
    lay = parallel_layout(scenario) if lever is not None else None
    phases = (("decode", S.batch), ("prefill", S.batch * S.prompt_tokens))
    if lay is not None and lay.active:
        wire = (lever.dispatch_activation_bytes if lever.dispatch_activation_bytes is not None
                else lever.activation_bytes)
        for phase, tokens in phases:
            for name, kernels in collective_kernels(scenario, lay, tokens,
                                                    layer_counts(scenario, lay), wire).items():
                if kernels:
                    define(phase, name, flops=0, bytes=_moved(kernels), time=S[time_name(phase, name)],
                           description=f"the layout's {name.replace('_', ' ')}, timed from the "
                                       "measured collective tables", reference=TABLES,
                           kernels=kernels)
        return
    if tensor < 2:
        return
    from .shapes import QK_NORM_REDUCED_BYTES, qk_norm_reductions, tensor_parallel_reductions

    reductions = tensor_parallel_reductions(scenario)
    for phase, tokens in phases:
        define(phase, "all_reduce", flops=0,
               bytes=reductions * tokens * S.d_model * 2
               + qk_norm_reductions(scenario) * tokens * QK_NORM_REDUCED_BYTES,
               time=S[time_name(phase, "all_reduce")],
               description="tensor-parallel all-reduces of the activations (two per layer), "
                           "timed from the measured collective tables",
               reference=TABLES,
               kernels=all_reduce(tokens * S.d_model, S.kernel_tensor_degree, reductions)
               + qk_norm_all_reduce(scenario, tokens, S.kernel_tensor_degree))


def _moved(kernels) -> object:
    """Bytes a collective operator moves: its messages, 16-bit elements (all-to-all: each
    token's k copies).
    """
    total = 0
    for k in kernels:
        if "elements" in k.shape:
            total += k.calls * k.shape["elements"] * 2
        elif "tokens" in k.shape:
            total += k.calls * k.shape["tokens"] * k.shape["topk"] * k.shape["hidden"] * 2
    return total


#: The decode operators whose work is each sequence's own: attention over its cached
#: positions and a recurrence's state (the operators of ``infermodel ops``).
PER_SEQUENCE_OPERATORS = ("attention_score", "attention_value", "state_update")


def _mixed_iteration(timed, layout: bool, define) -> None:
    """``mixed_iteration_decode_time``: what the other running sequences' decodes add to
    the iteration that prefills a new prompt, in an engine that runs them together
    (``engine_mixed_batches``): the decode step's per-sequence operators
    (:data:`PER_SEQUENCE_OPERATORS`), at the others' share of the sequences the prompt's
    rank runs (``B − 1`` of ``B``; of ``kernel_rank_batch`` under a layout, where each
    data-parallel attention rank holds its own). The projections and the feed-forward
    take the decodes' rows beside the prompt's thousands, which the prefill's own times
    cover to within those rows. A latent attention's measured module holds its
    projections too: the score and value operators' share of it is taken.
    """
    per_sequence = [S[time_name("decode", t.name)] for t in timed
                    if t.phase == "decode" and t.own is None and t.name in PER_SEQUENCE_OPERATORS]
    if not per_sequence:
        return
    sequences = S.kernel_rank_batch if layout else S.batch
    define("mixed_iteration_decode_time",
           S.engine_mixed_batches * sympy.Max(sequences - 1, 0, evaluate=False) / sequences
           * sympy.Add(*per_sequence, evaluate=False),
           unit="s",
           description="time the other running sequences' decodes add to the iteration that "
                       "prefills a new prompt, where the engine runs them together: the decode "
                       "step's attention and state-update operators at the others' share of the "
                       "prompt's rank's sequences (not in ttft, one request alone)",
           reference=f"{TABLES}; {MIXED_BATCHES}")


@hookimpl
def infermodel_define_quantities(scenario, define):
    if not _measured(scenario):
        return
    st = setup(scenario)
    define("kernel_tensor_degree", st.tensor, unit="1",
           description="GPUs each measured kernel's shape is split across (the tensor-parallel "
                       "degree; of an attention rank under data-parallel attention)",
           reference=TABLES)
    if st.layout:
        define("kernel_stage_cards", S.parallel_stage_cards, unit="1",
               description="GPUs of a pipeline stage, which the layers run across the stage "
                           "split over", reference=TABLES)
        define("kernel_expert_degree", S.parallel_expert_degree, unit="1",
               description="expert ranks the measured MoE kernel's experts are split over (its "
                           "EP size; MoE TP: the stage's cards over them)", reference=TABLES)
        define("kernel_rank_batch", S.batch * S.parallel_attention_batch_factor
               / S.parallel_attention_data_degree, unit="seq",
               description="sequences of the busiest attention rank, whose kernels the step "
                           "waits for: ⌈B/D⌉ times the stated imbalance", reference=TABLES)
    _elementwise_latency(st, define)
    if st.fallback is None:
        card = door.kernels.card(st.system)
        if card.get("inter_node_bw"):
            define("kv_transfer_bandwidth", card["inter_node_bw"] * st.tensor, unit="B/s",
                   description="bandwidth a disaggregated deployment moves a prompt's cache at "
                               "between servers: the measured system's network per GPU "
                               f"({st.system}: inter_node_bw) times the GPUs of a server",
                   reference=f"{TABLES}: systems/{st.system}.yaml")
        if card.get("p2p_latency") is not None:
            define("kv_transfer_latency", card["p2p_latency"], unit="s",
                   description="latency of one cache transfer between servers (the measured "
                               f"system's p2p_latency, {st.system})",
                   reference=f"{TABLES}: systems/{st.system}.yaml")
    timed = plan(scenario)
    for phase, name, whole in timed.shared:
        define(name, whole, unit="s",
               description=f"{phase} time of a kernel operators share (each takes its part), "
                           f"from the measured kernel tables ({st.system}, {st.engine} "
                           f"{st.version})", reference=TABLES)
    for phase in PHASES:
        summed: list = []
        roofline: list = []
        for t in (t for t in timed if t.phase == phase):
            name = time_name(phase, t.name)
            if t.how == "measured":
                where = f"{st.system}, {st.engine} {st.version}"
                description = f"{phase} time of operator {t.name}, from the measured kernel " \
                              f"tables ({where})"
                reference = TABLES
            else:
                description = f"{phase} time of operator {t.name} at its roofline ({t.reason})"
                reference = ROOFLINE
            define(name, t.expression, unit="s", description=description, reference=reference)
            if t.own is None:
                (summed if t.how == "measured" else roofline).append(S[name])
        define(f"{phase}_time_kernels_measured", sympy.Add(*summed, evaluate=False), unit="s",
               description=f"{phase}: the operators the measured kernel tables time (with the "
                           "elementwise kernels inside them at their roofline: an activation, "
                           "the rotary embedding), summed",
               reference=TABLES)
        define(f"{phase}_time_kernels_roofline", sympy.Add(*roofline, evaluate=False), unit="s",
               description=f"{phase}: the operators no table covers (elementwise: norms, the "
                           "embedding lookup) or that fell back, each at its roofline, summed",
               reference=ROOFLINE)
        define(f"{phase}_time_kernels",
               S[f"{phase}_time_kernels_measured"] + S[f"{phase}_time_kernels_roofline"],
               unit="s", description=f"{phase} time as its operators: measured kernels plus the "
                                     "roofline of what no table covers", reference=TABLES)
    _mixed_iteration(timed, bool(st.layout), define)
    _capacity(scenario, st, timed, define)
    unmeasured.host_time(scenario, define)
    unmeasured.request_time(scenario, define)


def _elementwise_latency(st: Setup, define) -> None:
    """Each elementwise kernel's fixed time (launch to first byte, ramp, tail), which its
    bandwidth roofline does not hold: the measured system's
    ``mem_empirical_constant_latency``, the constant the tables' authors add to every
    memory-bound kernel (3 µs on every system they ship); none without a measured system.
    """
    value = 0.0 if st.fallback else door.kernels.card(st.system).get(
        "mem_empirical_constant_latency", 0.0)
    origin = (f"{st.system}: mem_empirical_constant_latency" if value else
              "none: no measured system states one")
    define("elementwise_kernel_latency", value, unit="s",
           description="fixed time of one elementwise kernel (a norm, the embedding lookup, "
                       "an activation, the rotary embedding, the experts' selection where a MoE "
                       "table's rows leave it out) "
                       f"beyond its bandwidth roofline ({origin}); under TensorRT-LLM with "
                       "tensor parallelism the norms ride in the all-reduce",
           reference=f"{TABLES}: systems/<system>.yaml; {TRTLLM_NORM_FUSION}; "
                     f"{TRTLLM_ROPE_FUSION}; {SEPARATE_ROPE}; {SELECTION_SOURCE}")


def _expression(value) -> sympy.Basic:
    """A kernel's time as a sympy expression (a constant one may be a plain number)."""
    if isinstance(value, sympy.Basic):
        return value
    return sympy.Integer(value) if isinstance(value, int) else sympy.Float(value)


def _capacity(scenario, st: Setup, timed: Plan, define) -> None:
    """The decode step with the cache full: every decode operator's time at
    ``max(1, max_sequences)`` sequences (and each layout factor at that count).
    """
    at = capacity_point(scenario, st)
    # A kernel operators share is read once with the cache full too.
    for phase, name, whole in timed.shared:
        if phase == "decode":
            full = "capacity" + name[len("decode"):]
            define(full, _expression(whole).xreplace(at), unit="s",
                   description="decode time of a kernel operators share, with the cache full "
                               "(max(1, max_sequences) sequences)", reference=TABLES)
            at[S[name]] = S[full]
    for how, what in (("measured", "the operators the measured kernel tables time"),
                      ("roofline", "the operators no table covers, at their roofline")):
        parts = [_expression(t.expression).xreplace(at) for t in timed
                 if t.phase == "decode" and t.own is None and (t.how == "measured") == (how == "measured")]
        define(f"capacity_time_kernels_{how}", sympy.Add(*parts, evaluate=False), unit="s",
               description=f"decode step with the cache full: {what}, at max(1, max_sequences) "
                           "sequences", reference=TABLES if how == "measured" else ROOFLINE)
    define("capacity_time_kernels",
           S.capacity_time_kernels_measured + S.capacity_time_kernels_roofline, unit="s",
           description="decode step with the cache full as its operators: measured kernels plus "
                       "the roofline of what no table covers", reference=TABLES)


def capacity_point(scenario, st: Setup) -> dict:
    """What changes in a decode step's formulas when the cache is full: the batch becomes
    ``max(1, max_sequences)``, and so do the quantities the layout and the experts derive
    from it (as the physics' own capacity terms take them).
    """
    full = sympy.Max(1, S.max_sequences, evaluate=False)
    at = {S.batch: full}
    if scenario.value("model.experts") > 1:
        at[S.weight_bytes_per_step] = S.weight_bytes_read_at_capacity - S.embedding_bytes_unread
    lever = scenario.lever("parallelism")
    if lever is not None:
        at[S.parallel_microbatches] = sympy.Min(full, S.parallel_pipeline_degree, evaluate=False)
    if st.data > 1:
        ranks = S.parallel_attention_data_degree
        at[S.kernel_rank_batch] = sympy.ceiling(full / ranks) * S.parallel_attention_imbalance
        at[S.parallel_attention_batch_factor] = (sympy.ceiling(full / ranks) * ranks / full
                                                 * S.parallel_attention_imbalance)
    if st.expert > 1 and scenario.value("model.experts") > 1:
        at[S.parallel_expert_imbalance] = S.parallel_expert_imbalance_capacity
    return at


@hookimpl
def infermodel_transform_quantities(scenario, transform):
    if not _measured(scenario):
        return
    why = ("measured kernels: the sum of the operators' measured times and the roofline of "
           "what the tables do not cover, plus the engine's scheduler and host time per "
           "iteration (no kernel); t0 adds any other fixed time")
    order = Stage.MODEL_STRUCTURE + 60
    transform.replace("decode_step_time", S.decode_time_kernels + S.step_overhead + S.t0,
                      order=order, reason=why, reference=f"{TABLES}; {HOST}",
                      description="time of one decode step (measured kernels summed, plus the "
                                  "engine's host time and t0)")
    transform.replace("prefill_time", S.prefill_time_kernels + S.step_overhead + S.t0,
                      order=order, reason=why, reference=f"{TABLES}; {HOST}",
                      description="time to prefill the batch's prompts in one pass (measured "
                                  "kernels summed, plus the engine's host time and t0)")
    transform.replace("capacity_step_time",
                      S.capacity_time_kernels + S.step_overhead + S.t0, order=order,
                      reason="measured kernels: the decode step's operators at max(1, "
                             "max_sequences) sequences, the cache full, and the engine's host "
                             "time per iteration", reference=f"{TABLES}; {HOST}",
                      description="decode step time with the cache full (measured kernels summed "
                                  "at max_sequences, plus the host time and t0)")
    timed = plan(scenario)
    owned: dict[str, list] = {}
    for t in timed:
        if t.own is not None:
            owned.setdefault(t.own, []).append(t)
    for quantity, parts in owned.items():
        if any(t.how == "measured" for t in parts):
            names = ", ".join(t.name for t in parts if t.how == "measured")
            transform.replace(quantity, sympy.Add(*(S[time_name(t.phase, t.name)] for t in parts)),
                              order=order, reason=f"measured: the {names} kernels from the tables",
                              reference=TABLES)
            if quantity == "parallel_decode_comm_time":
                # The same collectives with the cache full.
                at = capacity_point(scenario, setup(scenario))
                full = sympy.Add(*(timed.expand(_expression(t.expression)).xreplace(at)
                                   for t in parts))
                transform.replace("parallel_capacity_comm_time", full, order=order,
                                  reason=f"measured: the {names} kernels from the tables at "
                                         "max(1, max_sequences) sequences", reference=TABLES)
    unmeasured.first_token(scenario, transform, order)
    lever = scenario.lever("parallelism")
    if lever is not None and getattr(lever, "pipeline", 1) not in (None, 1):
        transform.warn('efficiency.kernels = "measured" sums the operators of the whole model '
                       "on one timeline: the pipeline's micro-batches and bubbles are not "
                       "applied to that sum", quantity="decode_step_time")


@hookimpl
def infermodel_time_operators(scenario, register):
    if not _measured(scenario):
        return
    for t in plan(scenario):
        register(t.phase, t.name, time_name(t.phase, t.name),
                 label="measured" if t.how == "measured" else "roofline")


@hookimpl
def infermodel_iteration_cost(scenario, values, register):
    """The simulator's iterations priced by the same measured operators, at each
    iteration's own tokens, decodes and prefill chunks (:mod:`.kernel_iterations`).
    """
    if not _measured(scenario):
        return
    from .kernel_iterations import MeasuredIterations

    st = setup(scenario)
    where = (f"{st.system}, {st.engine} {st.version}" if st.fallback is None
             else f"roofline fallback: {st.fallback}")
    register(MeasuredIterations(plan(scenario), values, where))


# ---------------------------------------------------------------------------------
# What a reader must know
# ---------------------------------------------------------------------------------


@hookimpl
def infermodel_check_result(result, warn):
    scenario = result.scenario
    if not _measured(scenario):
        for field in ("mxfp4_activations", "moe_backend"):
            if scenario.value(f"efficiency.{field}") is not None:
                warn("decode_step_time", f"efficiency.{field} chooses a measured kernel and has "
                                         'no effect: efficiency.kernels is not "measured"')
        return
    try:
        timed = plan(scenario)
    except InfermodelError:
        return
    measured_checks.check(result, timed, warn,
                          tables=ENGINE_TABLES.get(scenario.value("efficiency.engine")))


__all__ = ["CHOICES", "ENGINE_TABLES", "plan", "setup"]
