"""The batching lever: static or continuous batching, and how cache memory is reserved.

``[levers.batching]`` names the batching policy, the law of output lengths, the cache
block size and the reservation rule::

    [levers.batching]
    policy = "static"               # or "continuous" (iteration-level)
    output = { law = "lognormal", median = 1500, sigma = 0.6, min = 16, max = 4000 }
    block_tokens = 16               # cache block (page) size
    reservation = "paged"           # or "full_length" (contiguous, to the longest output)

**Slot use.** A static batch keeps every slot until its longest request finishes, so a
slot does o − 1 useful decode steps out of o_max − 1 and, in full batches, the share of
useful slot-steps is (E[o] − 1)/(E[o_max of B] − 1) with E[o_max of B] = Σ_k (1 − F(k)^B)
(Inference lab, "Many requests, one pass"). Both expectations come from the output law
through the serving simulator's :func:`~infermodel.simulator.expected_max`, at the
scenario's batch. Under ``policy = "static"`` the batch's useful output
(``tokens_per_s_total``) is multiplied by that share; continuous batching refills a
finished slot at the next step, so its share is 1 (given enough waiting requests).

**Reservation.** Output length is unknown when a request arrives. A contiguous region
reserved for the longest possible output holds prompt + o_max positions; a paged
allocator takes fixed-size blocks as the sequence grows, so its unused tail is at most
block − 1 positions (Module 10: Inference and serving, "A joining prompt can stall
everybody" and "Map logical positions to physical blocks"). Both are compared at each
sequence's final length, the most favourable moment for a reservation. The base
physics' ``max_sequences`` (full-length sequences of ``sequence_length`` tokens) is not
changed: it is ``max_sequences_contiguous`` when the law's longest output is
``workload.output_tokens`` (the default law) and ``sequence_length`` is left at prompt
+ output. ``batching_max_sequences`` is the count under the chosen reservation.

The law describes the spread of output lengths; the base physics still takes its mean
decode context and latency from ``workload.output_tokens``, so set that to the law's
mean (``batching_output_mean``) for a consistent scenario.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np
import sympy
from sympy import Max, Piecewise, ceiling, floor

from infermodel.plugin import FieldValueError, S, Stage, accepts, hookimpl, suggest

from . import LAB, M10
from .shapes import terms as layer_terms


def _simulator():
    # The simulator package is imported only when a law is read: loading this plugin
    # stays cheap for every command that does not use the lever.
    from infermodel.plugin import simulator

    return simulator

SLOTS = f"{LAB}, 'Many requests, one pass'"
RESERVE = f"{M10}, 'A joining prompt can stall everybody' (contiguous reservation to the maximum length)"
PAGES = f"{M10}, 'Map logical positions to physical blocks'"
BUDGET = f"{M10}, §11 'Budget memory at the accepted maximum length'"
LAB3 = f"{M10}, Lab 3 (the static policy)"

POLICIES = ("static", "continuous")
RESERVATIONS = ("full_length", "paged")
LAW_KINDS = ("fixed", "uniform", "lognormal", "empirical")
LAW_EXAMPLE = '{ law = "lognormal", median = 1500, sigma = 0.6, min = 16, max = 4000 }'


# ---------------------------------------------------------------------------------
# Value types: the policy and reservation names, the output-length law table
# ---------------------------------------------------------------------------------


class BatchPolicy(str):
    """The batching policy: ``"static"`` or ``"continuous"``."""

    choices = POLICIES


class Reservation(str):
    """How cache memory is reserved: ``"full_length"`` (contiguous) or ``"paged"``."""

    choices = RESERVATIONS


def _choice_hook(value, type_):
    expected = "one of " + ", ".join(map(repr, type_.choices))
    if not isinstance(value, str):
        raise FieldValueError(f"got {value!r}", expected=expected)
    if value not in type_.choices:
        raise FieldValueError(f"got {value!r}", expected=expected,
                              suggestion=suggest(value, type_.choices))
    return value


def _frozen(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


@attrs.frozen
class OutputLaw:
    """An output-length law as written in the scenario: a table in the serving
    simulator's format (see :func:`infermodel.simulator.length_law`), kept as written so
    that a relative ``file`` is read from the scenario's directory.
    """

    type_description = "output-length law: a table (law, its parameters, or a file)"

    items: tuple[tuple[str, Any], ...]

    def mapping(self) -> dict[str, Any]:
        return {key: list(value) if isinstance(value, tuple) else value for key, value in self.items}

    def resolve(self, base_dir: str | os.PathLike | None = None):
        return _simulator().length_law(self.mapping(), what="output law", base_dir=base_dir)


def _law_hook(value, _type):
    expected = f"a length-law table such as {LAW_EXAMPLE}, or a whole number of tokens"
    if isinstance(value, bool) or not isinstance(value, (Mapping, int)):
        raise FieldValueError(f"got {value!r}", expected=expected)
    if isinstance(value, int):
        value = {"law": "fixed", "value": value}
    kind = value.get("law")
    if kind not in LAW_KINDS:
        hint = suggest(kind, LAW_KINDS) if isinstance(kind, str) else None
        raise FieldValueError("needs 'law', one of " + ", ".join(LAW_KINDS)
                              + (f"; got {kind!r}" if kind is not None else ""),
                              expected=expected, suggestion=hint)
    law = OutputLaw(tuple(sorted((str(k), _frozen(v)) for k, v in value.items())))
    if "file" not in value:  # a file is read at validation, from the scenario's directory
        try:
            law.resolve()
        except _simulator().SimulationError as exc:
            raise FieldValueError(str(exc), expected=expected) from None
    return law


@accepts("≥ 1")
def _block(instance, attribute, value):
    if value < 1:
        raise ValueError(f"{attribute.name} = {value!r} must be at least 1 token")


@attrs.frozen
class Batching:
    """Batching policy, output-length law, cache block size and reservation rule."""

    policy: BatchPolicy = attrs.field(default=BatchPolicy("continuous"), metadata={
        "description": '"static" (the batch runs until its longest output ends) or "continuous" '
                       "(finished requests leave and waiting ones join at every step)"})
    output: OutputLaw | None = attrs.field(default=None, metadata={
        "description": f"output-length law, e.g. {LAW_EXAMPLE} (the simulator's format); "
                       "unset: every output is workload.output_tokens long"})
    block_tokens: int = attrs.field(default=16, validator=_block, metadata={
        "description": "cache block (page) size in tokens"})
    reservation: Reservation = attrs.field(default=Reservation("paged"), metadata={
        "description": '"full_length" (a contiguous region for prompt + longest output) or '
                       '"paged" (whole blocks as the sequence grows)'})

    def simulation_defaults(self, scenario) -> dict:
        """The serving simulator's default policy and output law: static batches of the
        scenario's batch size, or continuous batching reserving the full length
        (``reserve``) or on demand (``paged``); the output law as written.
        """
        if self.policy == "static":
            policy = {"kind": "static", "batch_size": int(scenario.value("workload.batch"))}
        elif self.reservation == "full_length":
            policy = {"kind": "reserve"}
        else:
            policy = {"kind": "paged"}
        return {"policy": policy, "output": self.output.mapping() if self.output else None}


# ---------------------------------------------------------------------------------
# Registration and validation
# ---------------------------------------------------------------------------------


@hookimpl
def infermodel_register_value_types(register):
    register(BatchPolicy, _choice_hook)
    register(Reservation, _choice_hook)
    register(OutputLaw, _law_hook)


@hookimpl
def infermodel_register_levers(register):
    register("batching", Batching,
             description="static or continuous batching (static slot use from the output-length "
                         "law) and contiguous or paged cache reservation",
             reference=f"{SLOTS}; {RESERVE}; {PAGES}")


def _law_dir(scenario) -> str | None:
    """Where a relative ``file`` is read from: the directory of the scenario file that
    writes the law; the current directory for ``--set``.
    """
    origin = scenario.where("levers.batching.output")
    if origin is not None and origin.file == "--set":
        return None
    if origin is not None and origin.file:
        return os.path.dirname(os.path.abspath(origin.file))
    return os.path.dirname(os.path.abspath(scenario.path)) if scenario.path else None


def _law(scenario, lever):
    return lever.output.resolve(_law_dir(scenario))


@hookimpl
def infermodel_validate_scenario(scenario, report):
    lever = scenario.lever("batching")
    if lever is None or lever.output is None:
        return
    try:
        _law(scenario, lever)
    except _simulator().SimulationError as exc:
        report("levers.batching.output", str(exc),
               expected=f"a length-law table such as {LAW_EXAMPLE}")


# ---------------------------------------------------------------------------------
# Quantities
# ---------------------------------------------------------------------------------


def _mean_tail(law, prompt: int, block: int) -> float:
    """E[unused positions of the last block] at a sequence's final length prompt + o."""
    values, probabilities = law.pmf()
    tails = (-(prompt + values.astype(np.int64))) % block
    return float(np.dot(tails.astype(np.float64), probabilities))


@hookimpl
def infermodel_define_quantities(scenario, define):
    lever = scenario.lever("batching")
    if lever is None:
        return
    static = lever.policy == "static"
    block = lever.block_tokens
    define("paged_block_tokens", block, unit="token",
           description="tokens per cache block (page)", reference=PAGES)

    _define_lengths(scenario, lever, define, block)
    arch = layer_terms(scenario)
    _define_slots(lever, define, static, arch)
    _define_reservation(lever, define, arch)


def _define_lengths(scenario, lever, define, block: int) -> None:
    """Output lengths (mean, longest, expected batch longest), last block's unused positions."""
    if lever.output is None:
        # Every output is output_tokens long: the maximum of B equal lengths is that length.
        define("batching_output_mean", S.output_tokens, unit="token", latex=r"\mathrm{E}[o]",
               description="expected output length E[o] (every output is output_tokens long)",
               reference=SLOTS)
        define("batching_output_longest", S.output_tokens, unit="token", latex=r"o_{\max}",
               description="longest output the law allows (every output is output_tokens long)",
               reference=RESERVE)
        define("batching_expected_max_output", S.output_tokens, unit="token",
               latex=r"\mathrm{E}[o_{\max,B}]",
               description="expected longest output of the batch E[o_max of B] (equal lengths: "
                           "output_tokens)", reference=SLOTS)
        final = S.prompt_tokens + S.output_tokens
        define("paged_mean_unused_positions", ceiling(final / S.paged_block_tokens)
               * S.paged_block_tokens - final, unit="token",
               description="unused positions in a sequence's last block at its final length",
               reference=PAGES)
    else:
        law = _law(scenario, lever)
        batch = scenario.value("workload.batch")
        prompt = scenario.value("workload.prompt_tokens")
        define("batching_output_mean", law.mean(), unit="token", latex=r"\mathrm{E}[o]",
               description="expected output length E[o], the mean of the output law's "
                           "probabilities (computed when the scenario is read)", reference=SLOTS)
        define("batching_output_longest", law.maximum, unit="token", latex=r"o_{\max}",
               description="longest output the law allows", reference=RESERVE)
        define("batching_expected_max_output", _simulator().expected_max(law, batch), unit="token",
               latex=r"\mathrm{E}[o_{\max,B}]",
               description=f"expected longest output of a batch of {batch} (workload.batch), "
                           "Σ_k (1 − F(k)^B) over the output law (computed when the scenario "
                           "is read)", reference=SLOTS)
        define("paged_mean_unused_positions", _mean_tail(law, prompt, block), unit="token",
               description=f"expected unused positions in a sequence's last block at its final "
                           f"length, prompt ({prompt}) + o averaged over the output law "
                           "(computed when the scenario is read)", reference=PAGES)


def _define_slots(lever, define, static: bool, arch) -> None:
    """Slot use, and a static batch from its prefill to its longest output."""
    # --- slot use -----------------------------------------------------------------
    mean, maximum = S.batching_output_mean, S.batching_expected_max_output
    define("static_slot_use",
           Piecewise(((mean - 1) / (maximum - 1), maximum > 1), (1, True)), unit="1",
           description="share of a full static batch's decode slot-steps that emit a token, "
                       "(E[o] − 1)/(E[o_max of B] − 1)", reference=SLOTS)
    define("batching_slot_use", S.static_slot_use if static else sympy.Integer(1), unit="1",
           description=f"share of decode slot-steps that emit a token under {lever.policy} "
                       "batching" + ("" if static else " (a finished slot is refilled at the next "
                                                       "step)"), reference=SLOTS)
    define("batching_busy_slots", S.batch * S.batching_slot_use, unit="seq",
           description="sequences that emit a token in an average decode step", reference=SLOTS)

    # --- a static batch from prefill to its longest output --------------------------
    # Lab 3's static rule: the batch prefills its prompts in one pass, then every slot
    # decodes (its cache growing and read each step) until the longest output ends.
    context = S.static_decode_context
    define("static_decode_context", S.prompt_tokens + S.batching_expected_max_output / 2,
           unit="token", description="mean context of a static batch's slots while it decodes "
                                     "(every slot grows until the longest output ends)",
           reference=f"{LAB3}; {SLOTS}")
    define("static_decode_step_time",
           Max((S.weight_bytes_per_step + S.batch * arch.cache_read(context)) / S.bandwidth,
               S.batch * (2 * S.params_matmul + arch.attention_decode(context))
               / S.flops_effective_decode) + S.t0,
           unit="s", description="mean decode step time of a static batch (the decode roofline at "
                                 "static_decode_context)", reference=f"{LAB3}; {SLOTS}")
    define("static_batch_cycle_time",
           S.prefill_time + (S.batching_expected_max_output - 1) * S.static_decode_step_time,
           unit="s", description="time from a static batch's prefill to its longest output's "
                                 "last token", reference=f"{LAB3}; {SLOTS}")
    define("static_tokens_per_s_with_prefill",
           S.batch * S.batching_output_mean / S.static_batch_cycle_time, unit="token/s",
           description="output tokens per second of back-to-back full static batches, prefill "
                       "stalls included", reference=f"{LAB3}; {SLOTS}")


def _define_reservation(lever, define, arch) -> None:
    """Cache reserved per sequence, contiguous or paged, and how many sequences fit."""
    # --- reservation ----------------------------------------------------------------
    define("paged_max_unused_positions", S.paged_block_tokens - 1, unit="token",
           description="most unused positions per sequence under paging (block − 1)",
           reference=PAGES)
    define("batching_final_tokens", S.prompt_tokens + S.batching_output_mean, unit="token",
           description="positions a sequence holds when it finishes, on average (prompt + E[o])",
           reference=RESERVE)
    define("contiguous_reserved_tokens", S.prompt_tokens + S.batching_output_longest,
           unit="token", description="positions a contiguous full-length reservation holds "
                                     "(prompt + longest output)", reference=RESERVE)
    define("paged_reserved_tokens", S.batching_final_tokens + S.paged_mean_unused_positions,
           unit="token", description="positions a paged sequence holds at its final length, on "
                                     "average (whole blocks)", reference=PAGES)
    define("contiguous_reserved_bytes_per_sequence",
           arch.cache_held(S.contiguous_reserved_tokens), unit="B",
           description="cache bytes reserved per sequence, contiguous to the longest output",
           reference=RESERVE)
    define("paged_reserved_bytes_per_sequence", arch.cache_held(S.paged_reserved_tokens),
           unit="B", description="cache bytes a paged sequence holds at its final length, on average",
           reference=PAGES)
    define("contiguous_real_token_share", S.batching_final_tokens / S.contiguous_reserved_tokens,
           unit="1", description="share of a contiguous reservation holding real tokens when the "
                                 "sequence finishes", reference=RESERVE)
    define("paged_real_token_share", S.batching_final_tokens / S.paged_reserved_tokens, unit="1",
           description="share of a paged sequence's blocks holding real tokens when it finishes",
           reference=PAGES)
    define("max_sequences_contiguous",
           Max(0, floor(S.kv_budget_bytes / S.contiguous_reserved_bytes_per_sequence)), unit="seq",
           description="most sequences the cache budget holds with contiguous full-length "
                       "reservations", reference=f"{RESERVE}; {BUDGET}")
    define("max_sequences_paged",
           Max(0, floor(S.kv_budget_bytes / S.paged_reserved_bytes_per_sequence)), unit="seq",
           description="sequences of mean final length the cache budget holds in whole blocks "
                       "(on average; growth past it forces preemption)", reference=PAGES)
    chosen = S.max_sequences_paged if lever.reservation == "paged" else S.max_sequences_contiguous
    define("batching_max_sequences", chosen, unit="seq",
           description=f"most sequences the cache holds under the {lever.reservation} reservation",
           reference=RESERVE if lever.reservation == "full_length" else PAGES)


@hookimpl
def infermodel_transform_quantities(scenario, transform):
    lever = scenario.lever("batching")
    if lever is None or lever.policy != "static":
        return
    transform.wrap("tokens_per_s_total", lambda old: old * S.static_slot_use,
                   reason="static batching keeps a finished request's slot until the batch's "
                          "longest output ends, so only the static slot-use share of the "
                          "batch's slot-steps emits tokens",
                   reference=SLOTS, order=Stage.DEFAULT,
                   description="useful decode tokens per second across a static batch (idle "
                               "finished slots excluded)")


@hookimpl
def infermodel_register_headlines(register):
    register("batching", "batching_slot_use", label="slot-steps that emit a token")
    register("batching", "max_sequences_paged", label="sequences in paged blocks")


@hookimpl
def infermodel_register_typical_settings(register):
    # The batch-efficiency lever: as many sequences as the cache holds at full length.
    def setting(result):
        most = result["max_sequences"]
        if not most >= 1 or most <= result["batch"] or most != most:
            return None
        return {"workload.batch": int(most)}

    register("batch to capacity", setting,
             description="decode as many sequences together as fit at full length "
                         "(workload.batch = max_sequences): the weights are read once per step "
                         "for all of them",
             reference=f"{SLOTS}; {M10}, §11 'Separate quiet-request latency from loaded "
                       "throughput'")


__all__ = ["BatchPolicy", "Batching", "OutputLaw", "Reservation"]
