"""Which measured table times each operator, and how (not a plugin: the measured-kernels
plugin asks for a scenario's plan).

For each operator of each phase (:func:`infermodel.plugin.collect_operators`) the plan
takes the kernels it declares (:class:`infermodel.plugin.Kernel`) and makes each one's
time an expression::

    share · calls · lookup(shape on one GPU)

The shape on one GPU: under a layout (``[levers.parallelism]`` with ``attention_data``
D > 1 or ``expert`` X > 1) a kernel of the mixers runs on the busiest attention rank's
tokens (⌈B/D⌉ sequences, the lever's ``parallel_attention_batch_factor``) split over its
T tensor cards; dense layers, the head and the router, and shared experts, where the
layout puts their weights (each rank's own tokens over T cards, or every token of the
stage over its G cards); the routed experts on every token of the stage at MoE TP
G/X and EP X. Without one, every kernel splits over the T tensor-parallel cards.

Of an operator's alternative kernels (``option``), the first the tables all serve is
used. Work no table measures (the family ``"roofline"``) keeps its roofline and is
reported with its share; an operator none of whose kernels a table serves falls back to
its own roofline, with the reason.
"""

from __future__ import annotations

import re
import weakref

import attrs
import sympy
from sympy import ceiling

import infermodel.plugin as door
from infermodel.plugin import Kernel, S, collect_operators, tabulated

from .kernel_dtypes import (
    MXFP4_WEIGHT_ONLY,
    categories,
    families_of,
    formats_of,
    gemm_dtype,
    moe_dtype,
)
from .kernel_rows import deepep_rescaled, later, rows_read
from .moe_selection import selection_left_out, selection_time
from .operator_kernels import ELEMENTWISE, FULL
from .unevaluated import Max, Min

#: Work no table measures, named by its operator (timed at its roofline, reported).
ROOFLINE = "roofline"
PHASES = ("prefill", "decode")
#: How each engine's per-tensor FP8 GEMM rows scale the activation (their collectors):
#: TensorRT-LLM's load no input scale, so each call computes the amax first; vLLM's
#: build the layer with static activation scales. SGLang's rows are used as measured.
FP8_GEMM_SCALES = {"trtllm": "dynamic", "vllm": "static"}
#: Tables that do not time the kernel an engine serves with, by (engine, family, dtype):
#: (the categories whose rows stand in, the activation scales they are charged as, why).
#: The table's own rows stay an upper bound: the kernel is charged the lesser of the two.
#: vLLM's block-FP8 GEMM rows were collected without CUDA graphs (its collector's
#: ``use_cuda_graph=False`` for that dtype alone): at small and medium shapes they time
#: the host's launches, not the kernel a graph-captured decode step replays — about 55–430
#: µs a call on the data-centre cards (4 × 4096 × 4096 on H200: 57 µs, where its
#: per-tensor FP8 row is 10 µs), 6–9 times the per-tensor rows up to 128 tokens on H200.
#: At thousands of tokens they are the kernel's own time (1.06 times the per-tensor rows
#: at 8,192 tokens on H200, 0.9 at 16,384 on B200), which a prefill that large runs
#: without a graph anyway. Its per-tensor FP8 rows stand in, charged vLLM's own dynamic
#: quantisation (block-scaled activations take their scales per token group, on the fly).
STAND_INS: dict[tuple[str, str, str], tuple[dict[str, str], str, str]] = {("vllm", "gemm", "fp8_block"): (
    {"dtype": "fp8"}, "dynamic",
    "vLLM's per-tensor FP8 GEMM rows with its dynamic activation quantisation stand in for "
    "block-scaled FP8 where they are less than its block-FP8 rows, which were measured "
    "without CUDA graphs (57 µs or more a call below about a hundred tokens: the host's "
    "launches)")}
#: Short names of the families in table-function names.
SHORT = {"dispatch": "a2ad", "combine": "a2ac", "deepep_dispatch_ll": "deepepdll",
         "deepep_combine_ll": "deepepcll", "deepep_dispatch_normal": "deepepdn",
         "deepep_combine_normal": "deepepcn", "nccl_all_gather": "ag", "nccl_reduce_scatter": "rs",
         "nccl_all_reduce": "ncclar", "nccl_alltoall": "a2a", "gemm": "gemm", "context_attention": "ctx", "generation_attention": "gen",
         "moe": "moe", "selection": "msel", "all_reduce": "ar", "latent_context": "mlactx", "latent_generation": "mlagen",
         "mla_context": "mlac", "mla_generation": "mlag", "mla_bmm_pre": "bmmpre",
         "mla_bmm_post": "bmmpost", "gdn_conv_context": "gdnconvc",
         "gdn_conv_generation": "gdnconvg", "gdn_context": "gdnc", "gdn_generation": "gdng",
         "mamba2_conv_context": "m2convc", "mamba2_conv_generation": "m2convg",
         "deepep_moe_generation": "dmoeg", "deepep_moe_context": "dmoec",
         "nvlink_dispatch": "nvld", "nvlink_combine": "nvlc", "nvlink_prepare": "nvlp"}
#: Arguments a family multiplies by the split rather than dividing (a MoE layer's TP).
MULTIPLIED = ("tp",)
#: Arguments rounded up to whole numbers when split (KV heads replicated below TP).
WHOLE = ("kv_heads",)


@attrs.frozen
class Setup:
    """Card, engine and version whose tables time the operators, the layout, and why
    every operator falls back to the roofline (None when none does).
    """

    system: str | None
    engine: str | None
    version: str | None
    #: T: cards splitting each attention layer (of an attention rank).
    tensor: int
    fallback: str | None = None
    #: D attention ranks, G = T·D cards of a stage, X expert ranks.
    data: int = 1
    stage: int = 0
    expert: int = 1
    #: Where dense layers go (``"replicated"`` on each attention rank, ``"split"`` over
    #: the stage) and whether shared experts stay on each rank.
    dense: str = "replicated"
    shared_local: bool = True
    #: The MoE table's dtype for MXFP4 experts: weight-only (``w4a16_mxfp4``), or with
    #: MXFP8 activations where the engine runs them so on this card (``w4a8_mxfp4_mxfp8``).
    mxfp4_experts: str = MXFP4_WEIGHT_ONLY
    #: The MoE backend the engine runs (``efficiency.moe_backend``; the tables' kernels of
    #: that backend, :data:`infermodel.kernels.MOE_BACKENDS`), or "" for the fastest row
    #: of each cell.
    moe_backend: str = ""
    #: The layout dispatches tokens to the expert ranks all-to-all (DeepEP, pplx) rather
    #: than gathering every rank's tokens.
    all_to_all: bool = False
    #: How per-tensor FP8 activations take their scale: the checkpoint's calibrated
    #: ``"static"`` scales or each pass's ``"dynamic"`` amax.
    activation_scales: str = "static"
    #: P pipeline stages: the measured kernels are summed over every layer for one rank
    #: of a stage, so work at its roofline is the whole model's over one stage's cards.
    pipeline: int = 1

    @property
    def layout(self) -> bool:
        return self.data > 1 or self.expert > 1


def time_name(phase: str, name: str) -> str:
    """The quantity an operator's measured time is defined as in one phase."""
    return f"{phase}_kernel_{name}_time"


def _function_name(family: str, st: Setup, chosen, found=None) -> str:
    """The tabulated function's name: the family, card, engine, the stated release (and
    the later one read, where it stands in) and the categories.
    """
    read = [found.version] if getattr(found, "later_than", "") else []
    parts = [SHORT.get(family, family), st.system, st.engine, st.version, *read,
             *map(str, chosen.values())]
    name = re.sub(r"[^A-Za-z0-9]+", "_", "k_" + "_".join(str(p) for p in parts)).strip("_")
    if len(name) > 64:
        import hashlib

        name = name[:55] + "_" + hashlib.sha1(name.encode()).hexdigest()[:8]
    return name


# ---------------------------------------------------------------------------------
# One kernel
# ---------------------------------------------------------------------------------


def _placement(kernel, st: Setup):
    """(cards the kernel's split divides by, whether it runs on one attention rank's
    tokens) under the scenario's layout.
    """
    T, G = S.kernel_tensor_degree, S.kernel_stage_cards
    if not st.layout or kernel.group == "mixer":
        return T, st.data > 1
    if kernel.group == "dense":
        return (G, False) if st.dense == "split" else (T, st.data > 1)
    if kernel.group == "shared":
        return (T, st.data > 1) if st.shared_local else (G, False)
    return G, False   # routed: every token of the stage


def shape_arguments(kernel, spec, st: Setup) -> list:
    """The kernel's arguments on one GPU, in the family's order."""
    divisor, on_rank = _placement(kernel, st)
    kernels = door.kernels
    out = []
    for name in spec.arguments:
        value = kernel.shape[name]
        if on_rank and isinstance(value, sympy.Basic):
            value = value.xreplace({S.batch: S.kernel_rank_batch})
        if name in kernel.split:
            value = (ceiling(value / divisor) if name in WHOLE else value * divisor
                     if name in MULTIPLIED else value / divisor)
        if name == "window" and value == FULL:
            value = kernels.FULL_WINDOW
        out.append(value)
    if kernel.family == "moe" and st.layout:
        # The routed experts at MoE TP G/X over X expert ranks.
        where = spec.arguments
        out[where.index("tp")] = S.kernel_stage_cards / S.kernel_expert_degree
        out[where.index("ep")] = S.kernel_expert_degree
    return out


def kernel_time(kernel, st: Setup, formats, activations, kv, shared=None, phase="",
                notes: list[str] | None = None):
    """(time expression of one kernel in one pass, or the reason no table serves it).
    Where other rows stand in for a table that does not time the engine's kernel
    (:data:`STAND_INS`), or no table times the FP8 amax between the rows' activation
    scales and the scenario's, why is appended to ``notes``.

    A kernel operators share (``share`` other than 1: attention's score and value, a
    latent attention module) is read once: its time becomes a quantity of its own,
    recorded in ``shared`` (name -> expression), and each operator takes its share.
    """
    kernels = door.kernels
    found: object = None
    chosen: dict = {}
    family, spec = "", None
    for family in families_of(kernel, st, phase):
        spec = kernels.FAMILIES.get(family)
        if spec is None:
            return f"no table family {family!r}"
        attempts = categories(kernel, formats, activations, kv, st, phase, family)
        if isinstance(attempts, str):
            return attempts
        for attempt in attempts:
            found = kernels.lookup(st.system, st.engine, st.version, family, **attempt)
            if isinstance(found, kernels.Lookup):
                chosen = attempt
                break
        if isinstance(found, kernels.Lookup):
            break
        if family.startswith("deepep_moe_"):
            scaled = deepep_rescaled(st, family, spec, attempts, notes)
            if scaled is not None:
                found, chosen = scaled
                break
    if not isinstance(found, (kernels.Lookup, kernels.Rescaled)) or spec is None:
        return getattr(found, "reason", None) or "no table"
    found, chosen = rows_read(st, family, spec, chosen, found, notes)
    scales = st.activation_scales
    stand_in = STAND_INS.get((st.engine or "", family, chosen.get("dtype", "")))
    bound: tuple[dict, object] | None = None
    if stand_in is not None:
        bound = (chosen, found)  # the table's own rows: an upper bound on the kernel
        chosen, scales, why = stand_in
        found = kernels.lookup(st.system, st.engine, st.version, family, **chosen)
        if not isinstance(found, kernels.Lookup):
            return f"{why}, but {getattr(found, 'reason', 'no table')}"
        later(found, st, notes)
        if notes is not None:
            notes.append(why)
    missing = [a for a in spec.arguments if a not in kernel.shape]
    if missing:
        return f"the {family} kernel needs {', '.join(missing)}"
    function = tabulated(_function_name(family, st, chosen, found), found)
    arguments = shape_arguments(kernel, spec, st)
    one = function(*arguments)
    measured_with = FP8_GEMM_SCALES.get(st.engine or "")
    if family == "gemm" and chosen.get("dtype") == "fp8" and measured_with not in (
            None, scales):
        # The table's FP8 GEMM rows take the activation's scale one way, the scenario's
        # checkpoint the other: the amax, which the tables time on their own, is taken
        # away (a checkpoint with calibrated scales does not compute it) or added. (On
        # every measured FP8 row of the eight cards' TensorRT-LLM tables what remains is
        # 7 % of the row or more; the floor only guards a scaling outside both grids.)
        scale = kernels.lookup(st.system, st.engine, st.version, "activation_scale", dtype="fp8")
        if isinstance(scale, kernels.Lookup):
            later(scale, st, notes)
            m, _n, k = arguments
            amax = tabulated(_function_name("activation_scale", st, {"dtype": "fp8"}, scale),
                             scale)(m, k)
            one = Max(one - amax, 0) if measured_with == "dynamic" else one + amax
        elif notes is not None:
            # The row as measured, the amax's difference stated (on the eight cards
            # whose tables time it: 0.5–4.5 µs a GEMM under vLLM, 6–15 µs under
            # TensorRT-LLM).
            notes.append(f"the FP8 GEMM rows take {measured_with} activation scales, the "
                         f"scenario {scales} ones, and no table times the amax between "
                         f"them ({scale.reason}): the rows are read as measured (the amax "
                         "is 0.5–4.5 µs a GEMM under vLLM, 6–15 µs under TensorRT-LLM, on "
                         "the cards whose tables time it)")
    if bound is not None:
        one = Min(one, tabulated(_function_name(family, st, bound[0], bound[1]),
                                 bound[1])(*arguments))
    one = _at_its_rate(kernel, family, chosen, arguments, one, notes)
    if family == "moe" and isinstance(found, kernels.Lookup):
        left_out = selection_left_out(found, st.engine or "")
        if left_out is not None:
            # The share of the MoE rows at the point that leave the selection out.
            share = tabulated(_function_name("selection", st, chosen, found), left_out)
            one = one + share(*arguments) * selection_time(kernel, st.pipeline, phase)
    whole = kernel.calls * one
    share = kernel.share if isinstance(kernel.share, sympy.Basic) else (
        sympy.Integer(1) if kernel.share == 1 else sympy.Rational(kernel.share))
    if share == 1 or shared is None:
        return share * whole
    label = re.sub(r"[^A-Za-z0-9]+", "_", kernel.label or kernel.family).strip("_").lower()
    name = f"{phase}_kernel_{label}_time"
    while name in shared and shared[name] != whole:
        name = name.replace("_time", "_2_time")
    shared[name] = whole
    return share * S[name]


def _at_its_rate(kernel, family: str, chosen: dict, arguments, one, notes: list[str] | None):
    """A GEMM in a format no table holds (``Kernel.compute_rate``: a 32-bit router): the
    rows of the dtype they hold (``one``), or its ``2·m·n·k`` FLOPs at the card's rate for
    that format where longer, noted; any other kernel's ``one`` as it is.
    """
    if kernel.compute_rate is None or family != "gemm":
        return one
    m, n, k = arguments
    if notes is not None:
        notes.append(f"multiplies in 32-bit floats, which no table times: the "
                     f"{chosen.get('dtype', '16-bit')} rows stand in, or its FLOPs at the "
                     "card's 32-bit rate where that takes longer")
    return Max(one, 2 * m * n * k / kernel.compute_rate)


# ---------------------------------------------------------------------------------
# The plan: which operator is timed how
# ---------------------------------------------------------------------------------


@attrs.frozen
class Streams:
    """An overlap group of an operator's kernels: each stream's time, the condition under
    which they overlap, whether only in passes replayed as a CUDA graph, and the term the
    operator's time holds for them (the longer where the condition holds, else the sum).
    """

    name: str
    first: object
    second: object
    when: object
    graphs: bool
    combined: object


@attrs.frozen
class Timed:
    """One operator's time under measured kernels."""

    phase: str
    name: str
    #: "measured", "roofline" (no table covers it by nature) or "fallback".
    how: str
    expression: object
    reason: str = ""
    #: The quantity an operator that times itself (a collective) takes its time from.
    own: str | None = None
    #: Parts of a measured operator no table measures, at their roofline: (what, time).
    stand_ins: tuple[tuple[str, object], ...] = ()
    #: What a reader of its measured time must know (why): rows that stand in for a table
    #: that does not time the engine's kernel, an FP8 amax no table times.
    notes: tuple[str, ...] = ()
    #: What its time follows in a serving iteration: "tokens" (the pass's tokens),
    #: "attention" (sequences and their positions) or "state" (sequences and their new
    #: tokens, whatever is cached).
    shape: str = "tokens"
    #: Kernels run on two streams at once (the operator takes the longer where the
    #: condition holds).
    streams: tuple[Streams, ...] = ()


@attrs.frozen
class Plan:
    """Every operator of both phases with its time, and the kernels operators share
    (``(phase, quantity name, expression)``: a quantity each, read once).
    """

    timed: tuple[Timed, ...]
    shared: tuple[tuple[str, str, object], ...]

    def __iter__(self):
        return iter(self.timed)

    def expand(self, expression):
        """``expression`` with every shared kernel's quantity written out."""
        return expression.xreplace({S[name]: whole for _phase, name, whole in self.shared})


#: Plans of recent scenarios: a scenario's plan is asked for by several hooks in one
#: evaluation (quantities, transformations, warnings, the operator table).
_PLANS: dict[int, tuple[weakref.ref, Plan]] = {}


def plan(scenario, setup) -> Plan:
    """Every operator of both phases with its measured (or roofline) time (kept for the
    scenario object's life). ``setup`` makes the scenario's :class:`Setup`.
    """
    found = _PLANS.get(id(scenario))
    if found is not None and found[0]() is scenario:
        return found[1]
    made = _plan(scenario, setup(scenario))
    if len(_PLANS) > 32:
        _PLANS.clear()
    _PLANS[id(scenario)] = (weakref.ref(scenario), made)
    return made


#: Families whose time follows sequences and positions rather than tokens alone.
ATTENTION_FAMILIES = ("context_attention", "generation_attention", "latent_context",
                      "latent_generation", "mla_context", "mla_generation")
STATE_FAMILIES = ("gdn_conv_context", "gdn_conv_generation", "gdn_context", "gdn_generation",
                  "mamba2_conv_context", "mamba2_conv_generation")


def _shape(kernels) -> str:
    families = {k.family for k in kernels}
    if families & set(ATTENTION_FAMILIES):
        return "attention"
    if families & set(STATE_FAMILIES) or any(k.family == ROOFLINE for k in kernels):
        return "state"
    return "tokens"


def _alternatives(kernels):
    """The kernel lists to try in order: the kernels without an option with each option's."""
    common = [k for k in kernels if not k.option]
    options = list(dict.fromkeys(k.option for k in kernels if k.option))
    if not options:
        return [common]
    return [common + [k for k in kernels if k.option == o] for o in options]


def _own(op, phase: str) -> str | None:
    """The quantity that holds the time of an operator another plugin times itself: its
    time's own quantity, or, for the parallelism lever's layout collectives (each timed
    by an expression), the communication time they add up to.
    """
    if op.time is None or op.plugin == "measured_kernels":
        return None
    if isinstance(op.time, sympy.Symbol):
        return op.time.name
    return f"parallel_{phase}_comm_time" if op.plugin == "parallelism" else None


def _stand_in(kernel, phase, pipeline=1, ranks=False):
    """Work no table measures at its roofline (or at the time its shape states: a link):
    the whole model's FLOPs and bytes over one pipeline stage's cards, as the measured
    kernels beside it are summed over every layer for one rank of a stage. A ``whole``
    kernel is one card's: the busiest attention rank's share of the tokens (``ranks``:
    more than one data-parallel attention rank; else all of them) through every layer, at
    one card's bandwidth (the cards' even share of the compute, which a norm hardly uses).
    """
    if "time" in kernel.shape:
        return kernel.shape["time"]
    rate = S[f"flops_effective_{phase}"]
    if kernel.whole:
        tokens = S.kernel_rank_batch / S.batch if ranks else sympy.Integer(1)
        return tokens * Max(kernel.shape["flops"] * S.card_count / rate,
                            kernel.shape["bytes"] / (S.card_bandwidth * S.mbu))
    return pipeline * Max(kernel.shape["flops"] / rate, kernel.shape["bytes"] / S.bandwidth)


def _its_share(kernel, time):
    """``time`` times the kernel's ``share`` (an operator's part of a kernel)."""
    return time if kernel.share == 1 else kernel.share * time


def _elementwise(kernels, phase, pipeline, chosen, ranks=False):
    """The elementwise kernels of a measured operator (an activation between its GEMMs,
    the rotary embedding before attention) that belong to the alternative ``chosen`` (or
    to every one), each with its time: no table measures them, so each is its roofline
    (one card's for a ``whole`` kernel; its ``share`` of it; none where its shape states no
    work) plus the card's fixed time per launch, by nature rather than as a stand-in.
    """
    return [(k, (_its_share(k, _stand_in(k, phase, pipeline, ranks)) if k.shape else 0)
             + k.calls * S.elementwise_kernel_latency)
            for k in kernels if k.family == ELEMENTWISE and k.option in ("", *chosen)]


def _streams(timed):
    """The time of an operator's kernels, each ``(kernel, time)``: one after another,
    but a group that names an ``overlap`` takes the longer of its two streams (the
    kernels with ``side`` on the second) where its ``overlap_when`` holds, else their
    sum. Returns the time and each group (:class:`Streams`).
    """
    plain = [t for k, t in timed if not k.overlap]
    groups: dict[str, tuple[list, list, Kernel]] = {}
    for k, t in timed:
        if k.overlap:
            main, side, first_kernel = groups.setdefault(k.overlap, ([], [], k))
            if (k.overlap_when, k.overlap_graphs) != (first_kernel.overlap_when,
                                                      first_kernel.overlap_graphs):
                raise ValueError(f"the kernels of overlap group {k.overlap!r} state different "
                                 "conditions (overlap_when, overlap_graphs)")
            (side if k.side else main).append(t)
    streams = []
    for name, (main, side, kernel) in groups.items():
        first, second = sympy.Add(*main), sympy.Add(*side)
        when = kernel.overlap_when
        both = Max(first, second)
        always = when is True or when == sympy.true
        combined = both if always else sympy.Piecewise((both, when), (first + second, True))
        plain.append(combined)
        streams.append(Streams(name, first, second, sympy.true if always else when,
                               kernel.overlap_graphs, combined))
    return sympy.Add(*plain), tuple(streams)


def _plan(scenario, st: Setup) -> Plan:
    formats, activations, kv = formats_of(scenario)
    out = []
    shared_all: list[tuple[str, str, object]] = []
    for phase in PHASES:
        shared: dict[str, object] = {}
        rate = S[f"flops_effective_{phase}"]
        for op in collect_operators(scenario, phase):
            own = _own(op, phase)
            # A collective's roofline is its own time over the link.
            roofline = (op.time if op.time is not None and op.plugin != "measured_kernels"
                        else Max(op.flops / rate if op.compute_time is None else op.compute_time,
                                 op.bytes / S.bandwidth))
            kernels = [k for k in op.kernels if k.family != ELEMENTWISE]
            shape = _shape(kernels)
            if op.time is not None and not kernels:
                continue  # timed by its own plugin, which adds it to the step
            tabled = [k for k in kernels if k.family != ROOFLINE]
            if not tabled:
                how = "roofline" if op.kernels and not kernels else "fallback"
                reason = ("elementwise: no table measures it; each launch adds the "
                          "system's fixed kernel time" if how == "roofline" else
                          "; ".join(k.label for k in kernels) if kernels
                          else "no measured kernel is declared for it")
                if how == "roofline":
                    # Each elementwise launch has a fixed time the roofline does not hold;
                    # the roofline is one pipeline stage's, as the measured kernels' sums,
                    # or the kernels' own where each states its work (a norm over the
                    # whole width on every tensor rank).
                    elementwise = [k for k in op.kernels if k.family == ELEMENTWISE]
                    launches = sum((k.calls for k in elementwise), sympy.Integer(0))
                    if all(k.shape for k in elementwise):
                        roofline = sympy.Add(*(_its_share(k, _stand_in(
                            k, phase, st.pipeline, st.data > 1)) for k in elementwise))
                        if any(k.whole for k in elementwise):
                            reason += ("; one card's roofline: every tensor card runs it over "
                                       "its attention rank's whole width")
                        if any(k.share != 1 for k in elementwise):
                            reason += "; the operator's share of it (the rest fused elsewhere)"
                    else:
                        roofline = st.pipeline * roofline
                    roofline = roofline + launches * S.elementwise_kernel_latency
                out.append(Timed(phase, op.name, how, roofline, reason, shape=shape))
                continue
            if st.fallback:
                out.append(Timed(phase, op.name, "fallback", roofline, st.fallback, own,
                                 shape=shape))
                continue
            reasons: list[str] = []
            for candidate in _alternatives(kernels):
                trial: dict[str, object] = dict(shared)
                notes: list[str] = []
                measured = [k for k in candidate if k.family != ROOFLINE]
                times = [kernel_time(k, st, formats, activations, kv, trial, phase, notes)
                         for k in measured]
                missing = [t for t in times if isinstance(t, str)]
                if missing:
                    reasons += missing
                    continue
                stand_ins = tuple((k.label, _stand_in(k, phase, st.pipeline)) for k in candidate
                                  if k.family == ROOFLINE)
                shared = trial
                timed = [*zip(measured, times),
                         *_elementwise(op.kernels, phase, st.pipeline,
                                       {k.option for k in candidate}, st.data > 1)]
                kernels_time, streams = _streams(timed)
                out.append(Timed(phase, op.name, "measured",
                                 kernels_time + sympy.Add(*(t for _, t in stand_ins)), "", own,
                                 stand_ins, tuple(dict.fromkeys(notes)), shape, streams))
                break
            else:
                out.append(Timed(phase, op.name, "fallback", roofline,
                                 "; ".join(dict.fromkeys(reasons)), own, shape=shape))
        shared_all += [(phase, name, whole) for name, whole in shared.items()]
    return Plan(tuple(out), tuple(shared_all))


__all__ = ["ELEMENTWISE", "PHASES", "ROOFLINE", "STAND_INS", "Plan", "Setup", "Streams", "Timed",
           "categories", "families_of", "formats_of", "gemm_dtype", "kernel_time", "moe_dtype",
           "plan", "shape_arguments", "time_name"]
