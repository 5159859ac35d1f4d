"""Witness ``speculative``: the accept/resample rule reproduces the target exactly.

A seeded first-order Markov target p(·|c) over a few symbols (8 by default) and a
draft q(·|c) = (1 − blend)·p(·|c) + blend·noise(·|c) run real speculative decoding:
the draft proposes k tokens, each is accepted with probability min(1, p/q), the first
rejection is replaced by a draw from max(0, p − q)/(1 − α), and when all k pass the
target adds a bonus token (Inference lab, "Guess ahead, check in one pass").

If the rule is exact the emitted text is a Markov chain with the target's transitions,
so the transitions out of each symbol c are independent draws from p(·|c). The witness
measures the total-variation distance between the emitted transition frequencies and
p, weighted by how often each symbol was the context,

    TV = Σ_c (n_c/n) · ½ Σ_x |N_cx/n_c − p(x|c)|,

at several sample sizes n and compares it with what pure sampling noise gives, the
exact expectation for multinomial counts (the binomial mean absolute deviation,
E|X − mp| = 2ν·C(m, ν)·p^ν·(1 − p)^(m−ν+1) with ν = ⌊mp⌋ + 1). It shrinks like
1/√n; the draft alone stays at its own distance from the target.

The acceptance rate is compared with Σ_x min(p(x|c), q(x|c)) = α(c) averaged over the
contexts in which drafts were actually checked, within five standard errors.

The same run with a lenient ("close enough") rule shows what the exact rule protects
(Inference lab, "Guess ahead", Watch out; Module 10, the speculative sections): accept a
draft token with probability min(1, p/(l·q)) for a leniency l < 1 (within a factor 1/l
counts as good enough) and replace rejections from the same residual. A draft position
then emits

    P_l(x|c) = min(q, p/l) + (1 − α_l(c))·r(x|c),   α_l(c) = Σ_x min(q, p/l),

which is p only at l = 1. Its non-bonus transitions are checked against P_l (within
sampling noise) and their distance from p against the weighted TV(P_l, p): the text it
emits is measurably not the target's, and it gains speed (more tokens per target pass).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from typing import TYPE_CHECKING

import attrs
import numpy as np

from infermodel.plugin import Option, hookimpl

if TYPE_CHECKING:  # annotations only: the witness records load when a witness runs
    from infermodel.plugin import Row, Witness

from . import LAB

REFERENCE = f"{LAB}, 'Guess ahead, check in one pass'"
# Tolerances from the measured spread over seeds 0–399 with the default options
# (8 symbols, k = 4, blend ½, n = 10³, 10⁴, 10⁵):
#: Measured TV over its sampling-noise expectation: accepted relative deviation. The
#: ratio ranged over 0.64–1.42 (standard deviation 0.13).
TV_TOLERANCE = 0.6
#: Accepted deviation of the fitted log–log slope of TV against n from the expected one
#: (the deviation ranged over −0.13–+0.12, standard deviation 0.04).
SLOPE_TOLERANCE = 0.2
#: Standard errors allowed between measured and expected acceptance (the deviation
#: ranged over −4.0 to +2.8 standard errors).
ACCEPTANCE_SIGMAS = 5.0


def markov_models(symbols: int, blend: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded target and draft transition matrices (row c is the law of the next symbol
    after c). The target's rows are Dirichlet(½) draws (peaked, as text is); the
    draft mixes each row with an independent Dirichlet(1) noise row.

    >>> p, q = markov_models(8, 0.5, 0)
    >>> bool(np.allclose(p.sum(axis=1), 1) and np.allclose(q.sum(axis=1), 1))
    True
    """
    rng = np.random.default_rng([seed, 0])
    target = rng.dirichlet(np.full(symbols, 0.5), size=symbols)
    noise = rng.dirichlet(np.ones(symbols), size=symbols)
    return target, (1 - blend) * target + blend * noise


def acceptance(target: np.ndarray, draft: np.ndarray) -> np.ndarray:
    """α(c) = Σ_x min(p(x|c), q(x|c)) for every context c."""
    return np.minimum(target, draft).sum(axis=1)


def residual(target: np.ndarray, draft: np.ndarray) -> np.ndarray:
    """r(x|c) = max(0, p − q)/(1 − α(c)); the target row itself where α(c) = 1 (never used)."""
    excess = np.maximum(target - draft, 0.0)
    mass = excess.sum(axis=1, keepdims=True)
    return np.where(mass > 1e-12, excess / np.where(mass > 1e-12, mass, 1.0), target)


def mean_absolute_deviation(m: int, p: float) -> float:
    """E|X − mp| for X ~ Binomial(m, p), exactly (de Moivre's formula).

    >>> round(mean_absolute_deviation(2, 0.5), 12)   # |0 − 1|, |1 − 1|, |2 − 1| with ¼, ½, ¼
    0.5
    """
    if m <= 0 or p <= 0.0 or p >= 1.0:
        return 0.0
    nu = math.floor(m * p) + 1
    if nu > m:
        return 0.0
    log_term = (math.lgamma(m + 1) - math.lgamma(nu + 1) - math.lgamma(m - nu + 1)
                + nu * math.log(p) + (m - nu + 1) * math.log1p(-p))
    return 2.0 * nu * math.exp(log_term)


def expected_tv(target: np.ndarray, context_counts: np.ndarray) -> float:
    """Expected weighted TV of multinomial transition counts from ``target`` when
    context c was seen ``context_counts[c]`` times.
    """
    n = int(context_counts.sum())
    total = math.fsum(mean_absolute_deviation(int(m), float(p))
                      for c, m in enumerate(context_counts) for p in target[c])
    return total / (2 * n)


def measured_tv(target: np.ndarray, counts: np.ndarray) -> float:
    """Σ_c (n_c/n)·TV(N_c/n_c, p_c) = ½ Σ_cx |N_cx − n_c·p(x|c)| / n."""
    n_c = counts.sum(axis=1, keepdims=True)
    return float(np.abs(counts - n_c * target).sum() / (2 * counts.sum()))


def lenient_law(target: np.ndarray, draft: np.ndarray, leniency: float) -> np.ndarray:
    """P_l(x|c) = min(q, p/l) + (1 − α_l(c))·r(x|c): what a draft position emits when a
    draft token is accepted with probability min(1, p/(l·q)); p itself at l = 1.

    >>> p, q = np.array([[0.6, 0.4]]), np.array([[0.2, 0.8]])
    >>> lenient_law(p, q, 1.0).round(12).tolist(), lenient_law(p, q, 0.5).round(12).tolist()
    ([[0.6, 0.4]], [[0.2, 0.8]])
    """
    accepted = np.minimum(draft, target / leniency)
    rest = 1.0 - accepted.sum(axis=1, keepdims=True)
    return accepted + rest * residual(target, draft)


@attrs.frozen
class SpeculativeRun:
    tokens: np.ndarray          # emitted symbols, in order
    start: int                  # the context before the first one
    target_passes: int          # iterations (one target pass each)
    checked: np.ndarray         # drafts checked, by context
    accepted: np.ndarray        # drafts accepted, by context
    bonus: np.ndarray           # True where the token is the target's bonus draw


def speculative_decode(target: np.ndarray, draft: np.ndarray, k: int, n: int, seed: int,
                       start: int = 0, leniency: float = 1.0) -> SpeculativeRun:
    """Emit at least ``n`` symbols by speculative decoding with draft length ``k``.

    A draft token is accepted with probability min(1, p/(l·q)): ``leniency`` l = 1 is the
    exact rule, l < 1 a lenient one. Pure Python over precomputed cumulative tables and
    one block of seeded uniforms: about a microsecond per random draw.
    """
    symbols = target.shape[0]
    p, q = target.tolist(), draft.tolist()

    def cumulative(matrix):
        rows = np.cumsum(matrix, axis=1)
        rows[:, -1] = 1.0
        return rows.tolist()

    p_cum, q_cum, r_cum = cumulative(target), cumulative(draft), cumulative(residual(target, draft))
    # Each emitted token uses at most 2k + 1 uniforms (k drafts, k tests, one replacement).
    uniforms = np.random.default_rng([seed, 1]).random(n * (2 * k + 1) + 2 * k + 1).tolist()
    j = 0
    out: list[int] = []
    bonus: list[int] = []                          # positions of bonus tokens
    checked, accepted = [0] * symbols, [0] * symbols
    passes = 0
    prev = start
    while len(out) < n:
        passes += 1
        proposal, ctx = [], prev
        for _ in range(k):
            ctx = bisect_right(q_cum[ctx], uniforms[j])
            j += 1
            proposal.append(ctx)
        ctx = prev
        for x in proposal:
            checked[ctx] += 1
            u = uniforms[j]
            j += 1
            if u * leniency * q[ctx][x] < p[ctx][x]:   # accept with probability min(1, p/(l·q))
                accepted[ctx] += 1
                out.append(x)
                ctx = x
            else:                                  # replace from the residual
                ctx = bisect_right(r_cum[ctx], uniforms[j])
                j += 1
                out.append(ctx)
                break
        else:                                      # all k passed: the target's bonus token
            ctx = bisect_right(p_cum[ctx], uniforms[j])
            j += 1
            bonus.append(len(out))
            out.append(ctx)
        prev = ctx
    flags = np.zeros(len(out), dtype=bool)
    flags[bonus] = True
    return SpeculativeRun(np.array(out), start, passes, np.array(checked), np.array(accepted),
                          flags)


def transition_counts(tokens: np.ndarray, start: int, symbols: int,
                      keep: np.ndarray | None = None) -> np.ndarray:
    """N[c, x]: how often x followed c (only at the positions ``keep`` marks, if given)."""
    before = np.concatenate([[start], tokens[:-1]])
    if keep is not None:
        before, tokens = before[keep], tokens[keep]
    counts = np.zeros((symbols, symbols), dtype=np.int64)
    np.add.at(counts, (before, tokens), 1)
    return counts


def stationary(target: np.ndarray) -> np.ndarray:
    """The stationary law π of the target chain (π = πP)."""
    values, vectors = np.linalg.eig(target.T)
    v = np.real(vectors[:, np.argmin(np.abs(values - 1))])
    return v / v.sum()


OPTIONS = {
    "symbols": Option(8, "alphabet size of the Markov models", minimum=2, maximum=64),
    "k": Option(None, "draft tokens per iteration (default: the scenario's speculative lever "
                      "k, else 4)", kind=int, minimum=1, maximum=32),
    "blend": Option(0.5, "weight of noise in the draft, 0 (draft = target) to 1 (pure noise)",
                    minimum=0.0, maximum=1.0),
    "samples": Option(100_000, "largest sample size n (emitted tokens)", minimum=100,
                      maximum=2_000_000),
    "points": Option(3, "sample sizes: samples, samples/10, ... (this many)", minimum=1,
                     maximum=6),
    "seed": Option(0, "seed of the models and of the run", minimum=0),
    "leniency": Option(0.5, "leniency l of the \"close enough\" rule shown beside the exact "
                            "one: accept with probability min(1, p/(l·q)); 1 leaves it out",
                       minimum=0.05, maximum=1.0),
}
#: Sampling-noise multiples allowed between the lenient rule's distance from the target and
#: the distance its emission law P_l predicts.
LENIENT_NOISE = 3.0


def _default_k(scenario) -> int:
    lever = scenario.lever("speculative") if scenario is not None else None
    k = getattr(lever, "k", None)
    return k if isinstance(k, int) and 1 <= k <= 32 else 4


def speculative_witness(scenario, options) -> Witness:
    """Run the rule and compare the emitted transitions with the target's.

    >>> w = speculative_witness(None, {"symbols": 8, "k": 4, "blend": 0.5, "samples": 1000,
    ...                                "points": 2, "seed": 0})
    >>> w.passed
    True
    """
    from infermodel.plugin import Row, Witness  # the analyses, loaded when a witness runs

    symbols, blend, seed = options["symbols"], options["blend"], options["seed"]
    k = options["k"] if options["k"] is not None else _default_k(scenario)
    largest, points = options["samples"], options["points"]
    sizes = sorted({max(1, largest // 10 ** i) for i in range(points)})
    target, draft = markov_models(symbols, blend, seed)
    run = speculative_decode(target, draft, k, largest, seed)
    alpha = acceptance(target, draft)
    rows = []
    measured_tvs, expected_tvs = [], []
    for n in sizes:
        counts = transition_counts(run.tokens[:n], run.start, symbols)
        tv, expected = measured_tv(target, counts), expected_tv(target, counts.sum(axis=1))
        measured_tvs.append(tv)
        expected_tvs.append(expected)
        rows.append(Row(f"TV(emitted, target), n = {n:,}", tv, expected, tolerance=TV_TOLERANCE,
                        relative=True))
    if len(sizes) > 1:
        logs = np.log(np.array(sizes, dtype=float))
        slope = float(np.polyfit(logs, np.log(measured_tvs), 1)[0])
        expected_slope = float(np.polyfit(logs, np.log(expected_tvs), 1)[0])
        rows.append(Row("slope of log TV against log n", slope, expected_slope,
                        tolerance=SLOPE_TOLERANCE, note="−½ for 1/√n"))
    pi = stationary(target)
    draft_tv = float(pi @ (0.5 * np.abs(draft - target).sum(axis=1)))
    rows.append(Row("TV(draft alone, target), long run", None, draft_tv,
                    note="what sampling from the draft would give at any n"))
    checked, accepted = run.checked, run.accepted
    total = int(checked.sum())
    measured_alpha = float(accepted.sum() / total)
    expected_alpha = float(checked @ alpha / total)
    error = math.sqrt(float(checked @ np.clip(alpha * (1 - alpha), 0.0, None))) / total
    rows.append(Row("acceptance rate of checked drafts", measured_alpha, expected_alpha,
                    tolerance=max(ACCEPTANCE_SIGMAS * error, 1e-12),
                    note="Σ min(p, q) averaged over the contexts drafts were checked in; "
                         f"tolerance {ACCEPTANCE_SIGMAS:g} standard errors"))
    long_run = float(pi @ alpha)
    rows.append(Row("long-run Σ min(p, q) (stationary contexts)", None, long_run))
    per_pass = len(run.tokens) / run.target_passes
    textbook = (k + 1.0) if measured_alpha >= 1 else \
        (1 - measured_alpha ** (k + 1)) / (1 - measured_alpha)
    rows.append(Row("tokens per target pass", per_pass, textbook,
                    note="textbook (1 − α^(k+1))/(1 − α) at the measured α: an estimate, "
                         "since α depends on the context"))
    leniency = options["leniency"]
    if leniency < 1.0:
        rows += _lenient_rows(target, draft, k, largest, seed, leniency, per_pass)
    return Witness(rows=rows, parameters={"symbols": symbols, "k": k, "blend": blend,
                                          "samples": largest, "seed": seed,
                                          "target passes": run.target_passes,
                                          "leniency": leniency},
                   notes=["TV rows compare with the expected distance of exact draws from the "
                          "target (sampling noise alone), which shrinks like 1/√n."])


def _lenient_rows(target, draft, k, n, seed, leniency, exact_per_pass) -> list[Row]:
    """The same decoding with the lenient rule: what it emits, and how far from p."""
    from infermodel.plugin import Row  # the analyses, loaded when a witness runs

    symbols = target.shape[0]
    run = speculative_decode(target, draft, k, n, seed, leniency=leniency)
    law = lenient_law(target, draft, leniency)
    drafted = transition_counts(run.tokens, run.start, symbols, keep=~run.bonus)
    everything = transition_counts(run.tokens, run.start, symbols)
    contexts = drafted.sum(axis=1)
    noise_law = expected_tv(law, contexts)
    weights = contexts / contexts.sum()
    distance = float(weights @ (0.5 * np.abs(law - target).sum(axis=1)))
    measured = measured_tv(target, drafted)
    tag = f"lenient l = {leniency:g}"
    return [
        Row(f"{tag}: TV(draft-position tokens, P_l)", measured_tv(law, drafted), noise_law,
            tolerance=TV_TOLERANCE, relative=True,
            note="P_l = min(q, p/l) + (1 − α_l)·r is what the lenient rule emits"),
        Row(f"{tag}: TV(draft-position tokens, target)", measured, distance,
            tolerance=LENIENT_NOISE * noise_law,
            note=f"the weighted TV(P_l, p), within {LENIENT_NOISE:g}× the sampling noise: "
                 "the output distribution has moved"),
        Row(f"{tag}: TV(all emitted, target) over the exact rule's sampling noise",
            measured_tv(target, everything) / expected_tv(target, everything.sum(axis=1)), None,
            note="about 1 for an exact rule"),
        Row(f"{tag}: tokens per target pass", len(run.tokens) / run.target_passes, None,
            note=f"{exact_per_pass:.3f} with the exact rule: speed bought with quality"),
    ]


@hookimpl
def infermodel_register_witnesses(register):
    register("speculative", speculative_witness,
             description="speculative decoding on seeded Markov models: the accept/resample "
                         "rule emits the target's distribution, the acceptance rate is "
                         "Σ min(p, q), and a lenient rule moves the output distribution",
             reference=REFERENCE, options=OPTIONS)
