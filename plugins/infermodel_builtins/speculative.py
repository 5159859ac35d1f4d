"""The speculative-decoding lever: a cheap draft proposes k tokens, the target checks
them in one pass.

``[levers.speculative]`` takes the draft length ``k``; the acceptance rate α, given
or computed as 1 − TV(p, q) from two probability vectors; the draft cost c in target
decode steps, given or derived from a draft model (a preset, or a parameter count)
run on the same hardware at the same batch; and the verification cost v in target
decode steps, given or derived from the roofline as the time to score k + 1
positions per sequence at the scenario's batch.

With independent acceptances of probability α an iteration emits
E = (1 − α^(k+1))/(1 − α) tokens (k + 1 at α = 1) and costs (k·c + v) target steps,
so the speed-up is E/(k·c + v). Because v comes from the roofline, the gain collapses
as the batch walks decode towards the ridge: spare arithmetic is what verification
spends. ``tpot`` and the tokens-per-second quantities are transformed at order 400.
"""

from __future__ import annotations

import math

import attrs
import sympy
from sympy import Eq, Ge, Max, Piecewise

from infermodel.plugin import InfermodelError, S, Stage, accepts, hookimpl

from . import LAB, M10
from .shapes import (
    StackShape,
    attention_decode_flops,
    kv_bytes_per_token,
    stack_params,
)

GUESS = f"{LAB}, 'Guess ahead, check in one pass'"
SPEED = f"{M10}, 'Derive the speed-up rather than naming an acceptance rate'"
OVERLAP = f"{M10}, 'Accept overlap and restore missing mass'; {GUESS}"
LAB5 = f"{M10}, Lab 5 (speculative decoding)"
COLLAPSE = f"{SPEED} (verification at high serving load); {GUESS}, 'In practice'"

#: Draft lengths searched for ``spec_best_k``.
SEARCH_K = range(1, 17)
#: Relative distance from the best speed-up within which a shorter draft wins the tie.
TIE_TOLERANCE = 1e-9
MAX_K = 32
#: How far the sum of a probability vector may stray from 1.
SUM_TOLERANCE = 1e-6


# ---------------------------------------------------------------------------------
# Schema
# ---------------------------------------------------------------------------------


@accepts(f"0 to {MAX_K}")
def _k_range(instance, attribute, value):
    if not 0 <= value <= MAX_K:
        raise ValueError(f"k = {value} is outside 0–{MAX_K} draft tokens per iteration")


@accepts("0 to 1")
def _closed_fraction(instance, attribute, value):
    if value is not None and not 0.0 <= value <= 1.0:
        raise ValueError(f"{attribute.name} = {value!r} is not a probability in [0, 1]")


@accepts("> 0")
def _positive(instance, attribute, value):
    if value is not None and not value > 0:
        raise ValueError(f"{attribute.name} = {value!r} must be greater than 0")


@accepts("1 to 32")
def _bits(instance, attribute, value):
    if not 1 <= value <= 32:
        raise ValueError(f"{attribute.name} = {value!r} is outside 1–32 bits")


@accepts("probabilities that sum to 1")
def _distribution(instance, attribute, value):
    if value is None:
        return
    if len(value) == 0:
        raise ValueError(f"{attribute.name} is empty; give one probability per token id")
    negative = [i for i, p in enumerate(value) if p < 0]
    if negative:
        raise ValueError(f"{attribute.name}[{negative[0]}] = {value[negative[0]]!r} is negative")
    total = math.fsum(value)
    if abs(total - 1.0) > SUM_TOLERANCE:
        raise ValueError(f"{attribute.name} sums to {total!r}, not 1 (a probability distribution "
                         f"over token ids must sum to 1 within {SUM_TOLERANCE:g})")


@attrs.frozen
class Speculative:
    """Draft length, acceptance, draft cost and verification cost.

    Give ``acceptance`` or both ``target_probs`` and ``draft_probs``; give one of
    ``draft_cost``, ``draft_model`` (a model preset) or ``draft_params``. Without
    ``verify_cost`` the verification cost comes from the roofline.
    """

    k: int = attrs.field(default=4, validator=_k_range,
        metadata={"description": "draft tokens proposed per iteration (1 to 16)"})
    acceptance: float | None = attrs.field(default=None, validator=_closed_fraction,
        metadata={"description": (
            "probability α that the target accepts a draft token (or give "
            "target_probs and draft_probs)")})
    target_probs: tuple[float, ...] | None = attrs.field(default=None, validator=_distribution,
        metadata={"description": (
            "the target model's next-token distribution over a few token ids; with "
            "draft_probs gives α = Σ min(p, q)")})
    draft_probs: tuple[float, ...] | None = attrs.field(default=None, validator=_distribution,
        metadata={"description": "the draft model's distribution over the same token ids"})
    draft_cost: float | None = attrs.field(default=None, validator=_positive,
        metadata={"description": "cost c of one draft step, in target decode steps (measured)"})
    draft_model: str | None = attrs.field(default=None,
        metadata={"description": (
            "model preset name of the draft; its step is derived on the same card and"
            " batch, cache included")})
    draft_params: float | None = attrs.field(default=None, validator=_positive,
        metadata={"description": (
            "draft parameter count; its step is derived from its weights (its cache "
            "is not counted: a warning sizes it)")})
    draft_weight_bits: float = attrs.field(default=16.0, validator=_bits,
        metadata={"description": "bits per stored draft weight when draft_model or draft_params is given"})
    verify_cost: float | None = attrs.field(default=None, validator=_positive,
        metadata={"description": (
            "cost v of the verification pass, in target decode steps (default: from "
            "the roofline)")})


def acceptance_from(p, q) -> float:
    """α = Σ min(p(x), q(x)) = 1 − TV(p, q) for two distributions over the same ids."""
    return min(1.0, math.fsum(min(a, b) for a, b in zip(p, q)))


def tokens_per_iteration(alpha, k):
    """Expected tokens per iteration, (1 − α^(k+1))/(1 − α), exactly k + 1 at α = 1.

    Works on sympy expressions and numbers alike.

    >>> tokens_per_iteration(sympy.Integer(1), 4)
    5
    """
    return Piecewise((k + 1, Eq(alpha, 1)), ((1 - alpha ** (k + 1)) / (1 - alpha), True))


# ---------------------------------------------------------------------------------
# Draft model presets
# ---------------------------------------------------------------------------------


def draft_shape(scenario, name: str) -> dict:
    """The shape of draft model preset ``name``, typed and with the physics defaults."""
    table = scenario.preset("model", name)
    heads = table["heads"]
    head_dim = table["head_dim"] if table["head_dim"] is not None else table["d_model"] / heads
    kv_heads = table["kv_heads"] if table["kv_heads"] is not None else heads
    return {
        "layers": table["layers"],
        "d_model": table["d_model"],
        "query_width": heads * head_dim,
        "kv_width": kv_heads * head_dim,
        "d_ff": table["d_ff"],
        "ffn_matrices": 3 if table["ffn"] == "swiglu" else 2,
        "vocab": table["vocab"],
        "tied": bool(table["tied_embeddings"]),
        "experts": table["experts"],
    }


# ---------------------------------------------------------------------------------
# Hooks
# ---------------------------------------------------------------------------------


@hookimpl
def infermodel_register_levers(register):
    register("speculative", Speculative,
             description="speculative decoding: a draft proposes k tokens and the target "
                         "verifies them in one pass (acceptance, draft and verification cost)",
             reference=f"{GUESS}; {SPEED}")


@hookimpl
def infermodel_validate_scenario(scenario, report):
    lever = scenario.lever("speculative")
    if lever is None:
        return
    key = "levers.speculative"
    has_probs = lever.target_probs is not None or lever.draft_probs is not None
    if lever.acceptance is not None and has_probs:
        report(f"{key}.acceptance", "give either acceptance or target_probs and draft_probs, not both")
    elif lever.acceptance is None and not has_probs:
        report(f"{key}.acceptance", "the acceptance rate is missing",
               expected="acceptance = α in [0, 1], or target_probs and draft_probs",
               suggestion="for example acceptance = 0.8")
    elif has_probs:
        if lever.target_probs is None or lever.draft_probs is None:
            missing = "target_probs" if lever.target_probs is None else "draft_probs"
            report(f"{key}.{missing}", f"{missing} is missing",
                   expected="two distributions over the same token ids")
        elif len(lever.target_probs) != len(lever.draft_probs):
            report(f"{key}.draft_probs",
                   f"draft_probs has {len(lever.draft_probs)} entries but target_probs has "
                   f"{len(lever.target_probs)}",
                   expected="one probability per token id in both, in the same order")
    given = [n for n in ("draft_cost", "draft_model", "draft_params") if getattr(lever, n) is not None]
    if len(given) > 1:
        report(f"{key}.{given[1]}", "give one of draft_cost, draft_model or draft_params, not "
               + " and ".join(given))
    elif not given:
        report(f"{key}.draft_cost", "the draft cost is missing",
               expected="draft_cost (in target decode steps), draft_model (a model preset) "
                        "or draft_params (a parameter count)")
    if lever.draft_cost is not None and lever.draft_weight_bits != 16.0:
        report(f"{key}.draft_weight_bits",
               "draft_weight_bits applies only to a draft_model or draft_params")
    if lever.draft_model is not None:
        try:
            shape = draft_shape(scenario, lever.draft_model)
        except InfermodelError as exc:
            problem = exc.problems[0]
            report(f"{key}.draft_model", problem.message,
                   expected="a model preset (`infermodel presets models` lists them)",
                   suggestion=problem.suggestion)
        else:
            if shape["experts"] > 1:
                report(f"{key}.draft_model",
                       f"model preset {lever.draft_model!r} is a mixture of experts",
                       expected="a dense draft model",
                       suggestion="give its cost as draft_cost instead")


@hookimpl
def infermodel_define_quantities(scenario, define):
    lever = scenario.lever("speculative")
    if lever is None:
        return
    define("spec_k", lever.k, unit="1", latex="k",
           description="draft tokens proposed per iteration", reference=SPEED)
    _acceptance(lever, define)
    _draft(scenario, lever, define)
    _verification(lever, define)
    alpha, k, c, v = S.spec_acceptance, S.spec_k, S.spec_draft_cost, S.spec_verify_cost
    define("spec_tokens_per_iteration", tokens_per_iteration(alpha, k), unit="token", latex="E",
           description="expected tokens one iteration emits, (1 − α^(k+1))/(1 − α); k + 1 at α = 1",
           reference=SPEED)
    define("spec_iteration_time", (k * c + v) * S.decode_step_time, unit="s",
           description="time of one iteration: k draft steps and one verification pass",
           reference=SPEED)
    define("spec_speedup", S.spec_tokens_per_iteration / (k * c + v), unit="1",
           description="decode speed-up E/(k·c + v) over plain decoding", reference=SPEED)
    _best_k(lever, define)


def _acceptance(lever, define):
    if lever.acceptance is not None:
        define("spec_acceptance", lever.acceptance, unit="1", latex=r"\alpha",
               description="probability that a draft token is accepted", reference=SPEED)
        return
    p, q = lever.target_probs, lever.draft_probs
    tv = 0.5 * math.fsum(abs(a - b) for a, b in zip(p, q))
    define("spec_total_variation", tv, unit="1", latex=r"\mathrm{TV}(p, q)",
           description="total variation distance between target and draft distributions "
                       f"(½·Σ|p − q| over the {len(p)} token ids given)", reference=OVERLAP)
    define("spec_acceptance", 1 - S.spec_total_variation, unit="1", latex=r"\alpha",
           description="probability that a draft token is accepted, Σ min(p, q) = 1 − TV(p, q)",
           reference=OVERLAP)


def _draft(scenario, lever, define):
    if lever.draft_cost is not None:
        define("spec_draft_cost", lever.draft_cost, unit="1", latex="c",
               description="cost of one draft step, in target decode steps", reference=SPEED)
        return
    define("spec_draft_weight_bits", lever.draft_weight_bits, unit="bit",
           description="bits per stored draft-model weight", reference=SPEED)
    batch_ctx = S.batch * S.context
    if lever.draft_model is not None:
        shape = draft_shape(scenario, lever.draft_model)
        source = f"draft model preset {lever.draft_model!r}"
        for name, unit, what in (("layers", "1", "decoder blocks"), ("d_model", "1", "width"),
                                 ("query_width", "1", "query width heads·head_dim"),
                                 ("kv_width", "1", "key/value width kv_heads·head_dim"),
                                 ("d_ff", "1", "feed-forward width"),
                                 ("ffn_matrices", "1", "matrices per feed-forward block"),
                                 ("vocab", "1", "vocabulary size")):
            define(f"spec_draft_{name}", shape[name], unit=unit,
                   description=f"draft model {what} ({source})")
        L, dq = S.spec_draft_layers, S.spec_draft_query_width
        # The target's own formula (the shape library's uniform stack) with the draft's widths.
        draft = stack_params(StackShape(
            layers=L, d_model=S.spec_draft_d_model, query_width=dq, kv_width=S.spec_draft_kv_width,
            ffn_width=S.spec_draft_d_ff, ffn_matrices=S.spec_draft_ffn_matrices,
            vocab=S.spec_draft_vocab, tied=shape["tied"]))
        define("spec_draft_params", draft.total,
               unit="param", description="draft model parameters (same shape formula as the target)",
               reference=f"{M10}, §11 'Account for the whole weight artifact'")
        define("spec_draft_params_matmul", S.spec_draft_params - draft.lookup, unit="param",
               description="draft weights multiplied per token (an untied input table is a lookup)",
               reference=f"{M10}, §1 'Count operations and traffic separately'")
        define("spec_draft_kv_bytes_per_token",
               kv_bytes_per_token(L, S.spec_draft_kv_width, S.kv_value_bytes), unit="B",
               description="draft KV-cache bytes per token (same cache format as the target)",
               reference=f"{LAB}, 'Memory that grows with every token'")
        memory = (S.spec_draft_weight_bytes + batch_ctx * S.spec_draft_kv_bytes_per_token) / S.bandwidth
        compute = S.batch * (2 * S.spec_draft_params_matmul + attention_decode_flops(L, dq, S.context)) \
            / S.flops_effective_decode
        what = "weights and every sequence's draft cache, or its compute"
    else:
        define("spec_draft_params", lever.draft_params, unit="param",
               description="draft model parameters (given; its cache traffic is not counted)",
               reference=SPEED)
        memory = S.spec_draft_weight_bytes / S.bandwidth
        compute = S.batch * 2 * S.spec_draft_params / S.flops_effective_decode
        what = "weights, or its compute"
    define("spec_draft_weight_bytes", S.spec_draft_params * S.spec_draft_weight_bits / 8, unit="B",
           description="size of the draft model's weights", reference=SPEED)
    define("spec_draft_step_time", Max(memory, compute) + S.t0, unit="s",
           description=f"one draft decode step on the same hardware and batch ({what}, plus t0)",
           reference=f"{LAB}, 'Two costs for one answer'; {SPEED}")
    define("spec_draft_cost", S.spec_draft_step_time / S.decode_step_time, unit="1", latex="c",
           description="cost of one draft step, in target decode steps", reference=SPEED)


def _verify_time(j):
    """Roofline time to score j + 1 positions per sequence: same traffic, (j + 1)× the FLOPs."""
    mem, cmp_ = S.decode_time_memory, S.decode_time_compute
    return S.decode_step_time + Max(mem, (j + 1) * cmp_) - Max(mem, cmp_)


def _verification(lever, define):
    if lever.verify_cost is not None:
        define("spec_verify_cost_given", lever.verify_cost, unit="1",
               description="measured cost of one verification pass, in target decode steps",
               reference=SPEED)
        # With k = 0 nothing is verified: the iteration is a plain decode step.
        define("spec_verify_cost", Piecewise((1, Eq(S.spec_k, 0)), (S.spec_verify_cost_given, True)),
               unit="1", latex="v_k",
               description="cost of one verification pass, in target decode steps (1 at k = 0)",
               reference=SPEED)
        return
    define("spec_verify_time", _verify_time(S.spec_k), unit="s",
           description="roofline time to score k + 1 positions per sequence at the batch "
                       "(the step's traffic, k + 1 times its FLOPs)", reference=COLLAPSE)
    define("spec_verify_cost", S.spec_verify_time / S.decode_step_time, unit="1", latex="v_k",
           description="cost of one verification pass, in target decode steps", reference=COLLAPSE)


def _speedup_at(j, lever):
    alpha, c = S.spec_acceptance, S.spec_draft_cost
    expected = sympy.Add(*[alpha ** i for i in range(j + 1)])  # exact at α = 1
    if lever.verify_cost is not None:
        v = S.spec_verify_cost_given
    else:
        v = _verify_time(j) / S.decode_step_time
    return expected / (j * c + v)


def _best_k(lever, define):
    names = []
    for j in SEARCH_K:
        name = f"spec_speedup_k{j}"
        define(name, _speedup_at(j, lever), unit="1",
               description=f"speed-up with k = {j} draft tokens (one point of the search curve)",
               reference=GUESS)
        names.append(getattr(S, name))
    define("spec_best_speedup", Max(*names, evaluate=False), unit="1",
           description=f"largest speed-up over draft lengths k = {SEARCH_K[0]}..{SEARCH_K[-1]}",
           reference=GUESS)
    # The maximum is one of the curve's values, but equal speed-ups computed by different
    # k can differ in the last bits (α = 1 and c = v gives (k+1)/((k+1)·c) for every k):
    # the smallest k within a relative 1e-9 of the maximum wins, so a tie picks the
    # shortest draft.
    pieces = [(j, Ge(point, S.spec_best_speedup * (1 - TIE_TOLERANCE)))
              for j, point in zip(SEARCH_K, names)]
    pieces[-1] = (SEARCH_K[-1], True)
    # When no draft length beats plain decoding, the best choice is to switch it off.
    pieces.insert(0, (0, S.spec_best_speedup < 1))
    define("spec_best_k", Piecewise(*pieces), unit="1",
           description=f"draft length with the largest speed-up, searched over "
                       f"k = {SEARCH_K[0]}..{SEARCH_K[-1]} (0: off, no k beats plain decoding)",
           reference=GUESS)


@hookimpl
def infermodel_transform_quantities(scenario, transform):
    lever = scenario.lever("speculative")
    if lever is None:
        return
    why = "speculative decoding emits E tokens per iteration of k draft steps and one verification"
    transform.wrap("tpot", lambda old: old / S.spec_speedup, reason=why, reference=SPEED, order=Stage.ALGORITHMS)
    transform.wrap("tokens_per_s_per_user", lambda old: old * S.spec_speedup, reason=why,
                   reference=SPEED, order=Stage.ALGORITHMS)
    transform.wrap("tokens_per_s_total", lambda old: old * S.spec_speedup, reason=why,
                   reference=SPEED, order=Stage.ALGORITHMS)
    if lever.draft_cost is None:
        draft = S.spec_draft_weight_bytes
        if lever.draft_model is not None:
            cache = S.batch * S.sequence_length * S.spec_draft_kv_bytes_per_token
            transform.wrap("memory_required", lambda old: old + draft + cache,
                           reason="the draft model's weights and cache share the cards",
                           reference=SPEED, order=Stage.ALGORITHMS)
            share = S.kv_bytes_per_token / (S.kv_bytes_per_token + S.spec_draft_kv_bytes_per_token)
            transform.wrap("kv_budget_bytes", lambda old: (old - draft) * share,
                           reason="the draft's weights leave the cache budget, and each token's "
                                  "draft cache takes its share of what is left",
                           reference=SPEED, order=Stage.ALGORITHMS)
        else:
            transform.wrap("memory_required", lambda old: old + draft,
                           reason="the draft model's weights share the cards", reference=SPEED,
                           order=Stage.ALGORITHMS)
            transform.wrap("kv_budget_bytes", lambda old: old - draft,
                           reason="the draft model's weights leave the cache budget",
                           reference=SPEED, order=Stage.ALGORITHMS)


@hookimpl
def infermodel_register_headlines(register):
    register("speculative decoding", "spec_speedup", label="decode speed-up at k")
    register("speculative decoding", "spec_best_k", label="best draft length")
    register("speculative decoding", "spec_best_speedup", label="speed-up at the best k")


@hookimpl
def infermodel_check_result(result, warn):
    lever = result.scenario.lever("speculative")
    if lever is None:
        return
    speedup = result["spec_speedup"]
    if speedup < 1:
        best_k = int(result["spec_best_k"])
        advice = ("no draft length beats plain decoding here (spec_best_k = 0: switch it off)"
                  if best_k == 0 else
                  f"k = {best_k} would give {result['spec_best_speedup']:.2f}×")
        warn("spec_speedup", f"speculative decoding slows decoding down: {speedup:.2f}× plain "
                             f"decoding at k = {lever.k} (tpot {result.show('tpot')} instead of "
                             f"{result.show('tpot', result['tpot'] * speedup)}); {advice}")
    if lever.draft_cost is None and lever.draft_model is None:
        # Only a parameter count is known: scale the target's cache by the size ratio.
        per_token = result["kv_bytes_per_token"] * result["spec_draft_params"] / result["params_total"]
        traffic = result["batch"] * result["context"] * per_token
        share = traffic / (traffic + result["spec_draft_weight_bytes"])
        warn("spec_draft_cost", "the draft model's own KV cache is not counted (draft_params "
                                "gives no shape): scaled from the target's cache by the "
                                f"parameter ratio it reads about {result.show('decode_bytes', traffic)} "
                                f"per draft step, {share:.0%} of the draft step's bytes, and "
                                "holds memory that fits does not include; give draft_model "
                                "(a model preset) to count both")


#: The typical setting ``infermodel rank`` applies: four draft tokens per iteration, each
#: accepted with probability 0.7 (acceptance of 0.6 to 0.8 is common on easy text), from
#: a draft whose step costs a tenth of the target's; the verification cost comes from the
#: roofline at the scenario's batch, as the lever computes it, so the gain shrinks as the
#: batch grows.
TYPICAL = {"k": 4, "acceptance": 0.7, "draft_cost": 0.1}


@hookimpl
def infermodel_register_typical_settings(register):
    def setting(result):
        if result.scenario.lever("speculative") is not None:
            return None
        return {f"levers.speculative.{key}": value for key, value in TYPICAL.items()}

    register("speculative decoding", setting, lever="speculative",
             description=f"a draft proposes {TYPICAL['k']} tokens, each accepted with "
                         f"probability {TYPICAL['acceptance']:g}, at {TYPICAL['draft_cost']:g} of "
                         "a target step each; verification from the roofline at the batch",
             reference=f"{GUESS} ('In practice': acceptance 0.6 to 0.8); {SPEED}")


__all__ = ["LAB5", "Speculative", "acceptance_from", "draft_shape", "tokens_per_iteration"]
