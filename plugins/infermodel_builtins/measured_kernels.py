"""Measured kernels: every operator of a step timed from NVIDIA's measured kernel tables.

``[efficiency] kernels = "measured"`` replaces the roofline of each operator (the
operators plugin's table: ``infermodel ops``) by the latency the tables measured for the
kernels it is made of, on the card ``hardware.kernel_system`` names (the hardware
presets name theirs), under the engine ``efficiency.engine`` at ``engine_version``
(default: the newest the tables hold for that card; a table family the version lacks is
served by the newest older one, never a newer one)::

    t_op    = Σ over its kernels  share · calls · lookup(shape after tensor parallelism)
    t_step  = Σ measured operators + Σ operators no table covers (at their roofline) + t0

An operator's kernels are what its plugin declares (:class:`infermodel.plugin.Kernel`):
GEMMs with the dtype its weight class's format implies (bf16, FP8 per tensor or per
block, INT4/INT8 weight-only, NVFP4), context and generation attention (per window
size), the grouped MoE kernel, the all-reduces of tensor parallelism. ``lookup`` is a
table read as a function (:mod:`infermodel.kernels`): log–log interpolation inside the
measured grid, the roofline ratio from the nearest measured point outside it (with a
warning that says how far). The norms and the embedding lookup are elementwise: no table
covers them and they keep their roofline (stated in the step's derivation); sampling and
the scheduler are what ``efficiency.t0`` adds.

An unmapped card or engine, or an operator whose kernels no table holds, falls back to
the roofline with a warning naming the operators and their share of the step.

References: NVIDIA aiconfigurator-core 0.12 measured kernel tables (Apache-2.0),
``systems/data/<system>/<family>/<engine>/<version>/*.parquet``; Module 10: Inference and
serving, §1–§2 (the roofline each operator falls back to).
"""

from __future__ import annotations

import re
import weakref

import attrs
import sympy
from sympy import Max as _Max
from sympy import ceiling

import infermodel.plugin as door
from infermodel.plugin import (
    InfermodelError,
    S,
    Stage,
    collect_operators,
    hookimpl,
    suggest,
    table_of,
    tabulated,
    tabulated_calls,
)

from . import M10
from .operator_kernels import FULL
from .parallelism import degrees
from .quantization import effective_lever, weight_formats

TABLES = ("NVIDIA aiconfigurator-core 0.12 measured kernel tables (Apache-2.0): "
          "systems/data/<system>/<family>/<engine>/<version>")
ROOFLINE = f"{M10}, §1–§2 (each operator on its own roofline)"
CHOICES = ("roofline", "measured")
#: efficiency.engine -> the engine's folder name in the tables.
ENGINE_TABLES = {"vllm": "vllm", "sglang": "sglang", "tensorrt-llm": "trtllm", "trtllm": "trtllm"}
PHASES = ("prefill", "decode")
#: Kernel families that no table measures: the operator keeps its roofline by nature.
ELEMENTWISE = "elementwise"
#: Short names of the families in table-function names.
SHORT = {"gemm": "gemm", "context_attention": "ctx", "generation_attention": "gen",
         "moe": "moe", "all_reduce": "ar"}


def Max(*args):
    return _Max(*args, evaluate=False)


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
             description="engine version whose measured kernel tables time the operators "
                         '(efficiency.kernels = "measured"; default: the newest the tables hold '
                         "for the card)")
    register("hardware", "kernel_system", kind="str", default=None,
             description="the measured kernel tables' name for this card (\"h200_sxm\"); the "
                         "hardware presets name theirs")


# ---------------------------------------------------------------------------------
# What a scenario's measured kernels are
# ---------------------------------------------------------------------------------


@attrs.frozen
class Setup:
    """Card, engine and version whose tables time the operators, the tensor degree, and
    why every operator falls back to the roofline (None when none does).
    """

    system: str | None
    engine: str | None
    version: str | None
    tensor: int
    fallback: str | None = None


def _measured(scenario) -> bool:
    return scenario.value("efficiency.kernels") == "measured"


def setup(scenario) -> Setup:
    """The scenario's :class:`Setup` (raises what validation reports)."""
    lever = scenario.lever("parallelism")
    tensor = degrees(scenario)[0] if lever is not None else scenario.value("hardware.count")
    system = scenario.value("hardware.kernel_system")
    engine = ENGINE_TABLES.get(scenario.value("efficiency.engine"))
    if system is None:
        return Setup(None, engine, None, tensor,
                     "the card names no measured kernel tables (hardware.kernel_system unset)")
    if engine is None:
        return Setup(system, None, None, tensor,
                     f"efficiency.engine = {scenario.value('efficiency.engine')!r} has no measured "
                     "kernel tables (they hold vllm, sglang and trtllm)")
    if lever is not None and (getattr(lever, "attention_data", 1) > 1
                              or getattr(lever, "expert", 1) > 1):
        return Setup(system, engine, None, tensor,
                     "data-parallel attention and expert parallelism are not yet mapped to the "
                     "measured tables (attention ranks' batches, the MoE kernel's EP size, the "
                     "all-to-all tables)")
    kernels = door.kernels
    version = kernels.check_version(system, engine, scenario.value("efficiency.engine_version"))
    return Setup(system, engine, version, tensor)


@hookimpl
def infermodel_validate_scenario(scenario, report):
    if not _measured(scenario):
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


# ---------------------------------------------------------------------------------
# Dtypes from number formats
# ---------------------------------------------------------------------------------


def _fp8(fmt) -> bool:
    return fmt.bits == 8 and fmt.kind == "float"


def gemm_dtype(fmt, activations) -> str | None:
    """The GEMM table's dtype for weights in ``fmt`` (None: no table measures it).

    >>> from infermodel_builtins.formats import NAMED_FORMATS as F
    >>> [gemm_dtype(F[n], None) for n in ("bf16", "fp8-e4m3", "fp8-b128", "int4-g128", "nvfp4")]
    ['bfloat16', 'fp8', 'fp8_block', 'int4_wo', 'nvfp4']
    """
    if fmt.bits >= 16:
        return "bfloat16"
    if _fp8(fmt):
        return "fp8_block" if (fmt.block_side or fmt.granularity == "group") else "fp8"
    if fmt.kind == "float" and fmt.bits == 4:
        return "nvfp4" if fmt.group_size == 16 else None
    if fmt.kind == "int" and fmt.bits == 8:
        return "sq" if activations == "int8" else "int8_wo"
    if fmt.kind == "int" and fmt.bits == 4:
        return "int4_wo"
    return None


def moe_dtype(fmt) -> str | None:
    """The MoE table's dtype for experts in ``fmt`` (None: no table measures it)."""
    if fmt.bits >= 16:
        return "bfloat16"
    if _fp8(fmt):
        return "fp8_block" if (fmt.block_side or fmt.granularity == "group") else "fp8"
    if fmt.kind == "float" and fmt.bits == 4:
        return "nvfp4" if fmt.group_size == 16 else "w4a16_mxfp4"
    if fmt.kind == "int" and fmt.bits == 4:
        return "int4_wo"
    return None


def _formats(scenario):
    lever = effective_lever(scenario)
    formats = weight_formats(scenario, lever) if lever is not None else {}
    activations = getattr(lever, "activations", None)
    kv = getattr(lever, "kv_cache", None)
    return {k: f for k, (f, _why) in formats.items()}, activations, kv


def _categories(kernel, formats, activations, kv):
    """(family categories, or a reason no table measures this kernel)."""
    from .formats import NAMED_FORMATS

    bf16 = NAMED_FORMATS["bf16"]
    if kernel.family == "gemm":
        fmt = formats.get(kernel.weights, bf16) if kernel.weights else bf16
        dtype = gemm_dtype(fmt, activations)
        return ({"dtype": dtype} if dtype else
                f"no measured GEMM for weights in {fmt.name or 'this format'}")
    if kernel.family in ("context_attention", "generation_attention"):
        if kv is None or kv.bits >= 16:
            return {"kv_dtype": "bfloat16"}
        if _fp8(kv):
            return {"kv_dtype": "fp8"}
        return f"no measured attention over a {kv.name or 'this'} cache"
    if kernel.family == "moe":
        fmt = formats.get("experts", formats.get("linear", bf16))
        dtype = moe_dtype(fmt)
        return ({"dtype": dtype} if dtype else
                f"no measured MoE kernel for experts in {fmt.name or 'this format'}")
    return {}


def _function_name(family: str, lookup_setup: Setup, categories) -> str:
    parts = [SHORT.get(family, family), lookup_setup.system, lookup_setup.engine,
             lookup_setup.version, *map(str, categories.values())]
    name = re.sub(r"[^A-Za-z0-9]+", "_", "k_" + "_".join(str(p) for p in parts)).strip("_")
    if len(name) > 64:
        import hashlib

        name = name[:55] + "_" + hashlib.sha1(name.encode()).hexdigest()[:8]
    return name


def kernel_time(kernel, st: Setup, formats, activations, kv, shared=None, phase=""):
    """(time expression of one kernel in one pass, or the reason no table serves it).

    A kernel two operators share (``share`` below 1: attention's score and value) is read
    once: its time becomes a quantity of its own, recorded in ``shared`` (name ->
    expression), and each operator takes its share of that quantity.
    """
    categories = _categories(kernel, formats, activations, kv)
    if isinstance(categories, str):
        return categories
    kernels = door.kernels
    spec = kernels.FAMILIES.get(kernel.family)
    if spec is None:
        return f"no table family {kernel.family!r}"
    found = None
    tried = ([categories | {"distribution": d} for d in kernels.MOE_DISTRIBUTIONS]
             if kernel.family == "moe" else [categories])
    for attempt in tried:
        found = kernels.lookup(st.system, st.engine, st.version, kernel.family, **attempt)
        if isinstance(found, kernels.Lookup):
            categories = attempt
            break
    if not isinstance(found, kernels.Lookup):
        return found.reason if found is not None else "no table"
    missing = [a for a in spec.arguments if a not in kernel.shape]
    if missing:
        return f"the {kernel.family} kernel needs {', '.join(missing)}"
    tp = S.kernel_tensor_degree
    arguments = []
    for name in spec.arguments:
        value = kernel.shape[name]
        if name in kernel.split:
            value = (ceiling(value / tp) if name == "kv_heads" else value * tp if name == "tp"
                     else value / tp)
        if name == "window" and value == FULL:
            value = kernels.FULL_WINDOW
        arguments.append(value)
    function = tabulated(_function_name(kernel.family, st, categories), found)
    if kernel.share == 1 or shared is None:
        share = sympy.Integer(1) if kernel.share == 1 else sympy.Rational(kernel.share)
        return share * kernel.calls * function(*arguments)
    label = re.sub(r"[^A-Za-z0-9]+", "_", kernel.label or kernel.family).strip("_").lower()
    name = f"{phase}_kernel_{label}_time"
    whole = kernel.calls * function(*arguments)
    while name in shared and shared[name] != whole:
        name = name.replace("_time", "_2_time")
    shared[name] = whole
    return sympy.Rational(kernel.share) * S[name]


# ---------------------------------------------------------------------------------
# The plan: which operator is timed how
# ---------------------------------------------------------------------------------


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


def plan(scenario) -> Plan:
    """Every operator of both phases with its measured (or roofline) time (kept for the
    scenario object's life).
    """
    found = _PLANS.get(id(scenario))
    if found is not None and found[0]() is scenario:
        return found[1]
    made = _plan(scenario)
    if len(_PLANS) > 32:
        _PLANS.clear()
    _PLANS[id(scenario)] = (weakref.ref(scenario), made)
    return made


def _plan(scenario) -> Plan:
    st = setup(scenario)
    formats, activations, kv = _formats(scenario)
    out = []
    shared_all: list[tuple[str, str, object]] = []
    for phase in PHASES:
        shared: dict[str, object] = {}
        rate = S[f"flops_effective_{phase}"]
        for op in collect_operators(scenario, phase):
            own = (op.time.name if op.time is not None and isinstance(op.time, sympy.Symbol)
                   and op.plugin != "measured_kernels" else None)
            roofline = Max(op.flops / rate, op.bytes / S.bandwidth)
            kernels = [k for k in op.kernels if k.family != ELEMENTWISE]
            if op.time is not None and not kernels:
                continue  # timed by its own plugin, which adds it to the step
            if not kernels:
                how = "roofline" if op.kernels else "fallback"
                reason = ("elementwise: no table measures it" if op.kernels
                          else "no measured kernel is declared for it")
                out.append(Timed(phase, op.name, how, roofline, reason))
                continue
            if st.fallback:
                out.append(Timed(phase, op.name, "fallback", roofline, st.fallback, own))
                continue
            trial: dict[str, object] = dict(shared)
            times = [kernel_time(k, st, formats, activations, kv, trial, phase) for k in kernels]
            missing = [t for t in times if isinstance(t, str)]
            if missing:
                out.append(Timed(phase, op.name, "fallback", roofline, "; ".join(
                    dict.fromkeys(missing)), own))
            else:
                shared = trial
                out.append(Timed(phase, op.name, "measured", sympy.Add(*times), "", own))
        shared_all += [(phase, name, whole) for name, whole in shared.items()]
    return Plan(tuple(out), tuple(shared_all))


def _time_name(phase: str, name: str) -> str:
    return f"{phase}_kernel_{name}_time"


# ---------------------------------------------------------------------------------
# Operators, quantities and transformations
# ---------------------------------------------------------------------------------


@hookimpl
def infermodel_define_operators(scenario, define):
    """Under measured kernels, the tensor-parallel all-reduces (two per layer) as an
    operator of their own, unless a lever already times them (the parallelism lever's
    ``communication = "all_reduce"``).
    """
    if not _measured(scenario):
        return
    lever = scenario.lever("parallelism")
    tensor = degrees(scenario)[0] if lever is not None else scenario.value("hardware.count")
    if tensor < 2 or (lever is not None and lever.communication == "all_reduce"):
        return
    from .shapes import tensor_parallel_reductions

    reductions = tensor_parallel_reductions(scenario)
    for phase, tokens in (("decode", S.batch), ("prefill", S.batch * S.prompt_tokens)):
        define(phase, "all_reduce", flops=0, bytes=reductions * tokens * S.d_model * 2,
               time=S[_time_name(phase, "all_reduce")],
               description="tensor-parallel all-reduces of the activations (two per layer), "
                           "timed from the measured collective tables",
               reference=TABLES,
               kernels=(door.Kernel("all_reduce", {"elements": tokens * S.d_model,
                                                   "gpus": S.kernel_tensor_degree},
                                    calls=reductions, label="all_reduce"),))


@hookimpl
def infermodel_define_quantities(scenario, define):
    if not _measured(scenario):
        return
    st = setup(scenario)
    define("kernel_tensor_degree", st.tensor, unit="1",
           description="GPUs each measured kernel's shape is split across (the tensor-parallel "
                       "degree)", reference=TABLES)
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
            name = _time_name(phase, t.name)
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
               description=f"{phase}: the operators the measured kernel tables time, summed",
               reference=TABLES)
        define(f"{phase}_time_kernels_roofline", sympy.Add(*roofline, evaluate=False), unit="s",
               description=f"{phase}: the operators no table covers (elementwise: norms, the "
                           "embedding lookup) or that fell back, each at its roofline, summed",
               reference=ROOFLINE)
        define(f"{phase}_time_kernels",
               S[f"{phase}_time_kernels_measured"] + S[f"{phase}_time_kernels_roofline"],
               unit="s", description=f"{phase} time as its operators: measured kernels plus the "
                                     "roofline of what no table covers", reference=TABLES)


@hookimpl
def infermodel_transform_quantities(scenario, transform):
    if not _measured(scenario):
        return
    why = ("measured kernels: the sum of the operators' measured times and the roofline of "
           "what the tables do not cover; t0 adds what no kernel is (sampling, scheduling)")
    order = Stage.MODEL_STRUCTURE + 60
    transform.replace("decode_step_time", S.decode_time_kernels + S.t0, order=order, reason=why,
                      reference=TABLES,
                      description="time of one decode step (measured kernels summed, plus t0)")
    transform.replace("prefill_time", S.prefill_time_kernels + S.t0, order=order, reason=why,
                      reference=TABLES,
                      description="time to prefill the batch's prompts in one pass (measured "
                                  "kernels summed, plus t0)")
    for t in plan(scenario):
        if t.own is not None and t.how == "measured":
            transform.replace(t.own, S[_time_name(t.phase, t.name)], order=order,
                              reason=f"measured: the {t.name} kernels from the tables",
                              reference=TABLES)
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
        register(t.phase, t.name, _time_name(t.phase, t.name),
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
        return
    try:
        timed = plan(scenario)
    except InfermodelError:
        return
    if "capacity_step_time" in result and "decode_time_memory" in result:
        roofline = max(result["decode_time_memory"], result["decode_time_compute"]) + result["t0"]
        if roofline > 0:
            warn("capacity_step_time",
                 "measured kernels time the step at the scenario's batch; capacity_step_time "
                 "(the step with the cache full, behind tokens_per_s_at_capacity) keeps the "
                 "roofline, which at the scenario's batch is "
                 f"{result['decode_step_time'] / roofline:.3g}× faster than the measured step")
    for phase in PHASES:
        total = result[f"{phase}_time_kernels"]
        falls = [t for t in timed if t.phase == phase and t.how == "fallback"]
        if falls and total > 0:
            share = sum(result[_time_name(phase, t.name)] for t in falls) / total
            by_reason: dict[str, list[str]] = {}
            for t in falls:
                by_reason.setdefault(t.reason, []).append(t.name)
            reasons = "; ".join(f"{', '.join(names)}: {reason}"
                                for reason, names in by_reason.items())
            warn(f"{phase}_time_kernels",
                 f"measured kernels: {len(falls)} {phase} operator(s) fell back to the roofline, "
                 f"{share:.1%} of the {phase} operators' time ({reasons})")
        for t in timed:
            if t.phase != phase or t.how != "measured":
                continue
            name = _time_name(phase, t.name)
            expression = timed.expand(result.quantity(name).expression)
            outside: dict[str, list[str]] = {}
            for call in tabulated_calls(expression):
                known = {s: result[s.name] for s in call.free_symbols}
                try:
                    values = [float(a.xreplace(known)) for a in call.args]
                except (TypeError, ValueError):
                    continue
                far = table_of(call).outside(*values)
                if far:
                    outside.setdefault(far, []).append(call.func.__name__)
            if outside:
                where = "; ".join(f"{', '.join(dict.fromkeys(calls))}: {far}"
                                  for far, calls in outside.items())
                warn(name, f"measured kernels: {phase} {t.name} lies outside the measured grid "
                           f"({where})")


__all__ = ["CHOICES", "ENGINE_TABLES", "Setup", "gemm_dtype", "kernel_time", "moe_dtype", "plan",
           "setup"]
