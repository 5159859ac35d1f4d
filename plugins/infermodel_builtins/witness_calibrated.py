"""Witnesses ``smoothquant``, ``gptq`` and ``awq``: calibrated quantisation on seeded data.

Each method needs calibration data (activations, their covariance), not just a list of
values, so it is a witness rather than a ``quantize`` method: a seeded numpy run checks
the identity or closed form Module 10 states, exactly, and reports what the method does
to the quantised output beside round to nearest (:mod:`.calibrated` has the maths).

* ``smoothquant``: activations with a few outlier channels (×``outlier``) times seeded
  weights. Judged: X·W = (X/s)·(s·W) to rounding; after smoothing at α the channel
  maxima are (A·C)^(1−α) and (A·C)^α (at α = ½ both √(A·C)). Reported: the W8A8
  output error (dynamic per-tensor activations, per-channel weights, as Lab 4 does)
  without and with smoothing, and the activations' max/median channel ratio.
* ``gptq``: a layer whose inputs share a few latent factors (correlated, as real
  activations are). Judged: one GPTQ step equals the constrained optimum solved
  directly (the Lagrange system), and raises the row's squared output error by exactly
  ½·e²/[H⁻¹]_qq. Reported: the output and weight errors of the full column-by-column
  pass against round to nearest.
* ``awq``: groups of N(0, 1) weights sharing one scale, the first channel of each scaled
  by s before rounding. Judged: where the group's step Δ is unchanged the channel's
  effective error stays within Δ/(2s) and its RMS is Δ/(s·√12) (within sampling noise).
  Reported: how often the scaled channel becomes the group's maximum and Δ grows, and
  the output error when that channel's activation is large.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from infermodel.plugin import Option, hookimpl

if TYPE_CHECKING:  # annotations only: the witness records load when a witness runs
    from infermodel.plugin import Witness

from .calibrated import (
    AWQ,
    GPTQ,
    SMOOTHQUANT,
    awq_effective_weights,
    awq_rounding_error,
    eliminate,
    gptq_loss_increase,
    gptq_quantise,
    gptq_update,
    hessian,
    rtn_quantise,
    smooth,
    smoothed_maxima,
    smoothing_factors,
)
from .quantisers import symmetric_grid

#: Largest relative difference accepted where the maths is exact (float64 rounding).
EXACT = 1e-9
#: Standard errors allowed between a measured RMS error and Δ/(s·√12).
SIGMAS = 5.0


def _relative_rms(error: np.ndarray, reference: np.ndarray) -> float:
    return float(np.sqrt(np.mean(error ** 2)) / np.sqrt(np.mean(reference ** 2)))


def _fake_quantise_per_tensor(x: np.ndarray, bits: int) -> np.ndarray:
    codes, scale = symmetric_grid(x.reshape(1, -1), bits)
    return (codes * scale).reshape(x.shape)


# ---------------------------------------------------------------------------------
# smoothquant
# ---------------------------------------------------------------------------------


def outlier_activations(tokens: int, channels: int, outliers: int, factor: float,
                        seed: int) -> np.ndarray:
    """Seeded N(0, 1) activations (tokens × channels) with ``outliers`` channels ×factor."""
    rng = np.random.default_rng([seed, 10])
    x = rng.standard_normal((tokens, channels))
    x[:, rng.choice(channels, size=outliers, replace=False)] *= factor
    return x


def w8a8_error(x: np.ndarray, w: np.ndarray, bits: int) -> float:
    """Relative RMS output error of per-tensor activations and per-channel weights."""
    codes, scale = symmetric_grid(w.T, bits)               # one scale per output channel
    y = _fake_quantise_per_tensor(x, bits) @ (codes * scale).T
    return _relative_rms(y - x @ w, x @ w)


def smoothquant_witness(scenario, options) -> Witness:
    """SmoothQuant's identity and maxima exactly; W8A8 error before and after.

    >>> smoothquant_witness(None, {"alpha": 0.5, "bits": 8, "outlier": 50.0, "seed": 0}).passed
    True
    """
    from infermodel.plugin import Row, Witness  # the analyses, loaded when a witness runs

    alpha, bits, factor, seed = options["alpha"], options["bits"], options["outlier"], options["seed"]
    x = outlier_activations(512, 64, 4, factor, seed)
    w = np.random.default_rng([seed, 11]).standard_normal((64, 32)) / 8
    a, c = np.abs(x).max(axis=0), np.abs(w).max(axis=1)
    s = smoothing_factors(a, c, alpha)
    xs, ws = smooth(x, w, s)
    product = x @ w
    identity = float(np.max(np.abs(xs @ ws - product)) / np.max(np.abs(product)))
    want_a, want_c = smoothed_maxima(a, c, alpha)
    got_a, got_c = np.abs(xs).max(axis=0), np.abs(ws).max(axis=1)
    maxima = float(max(np.max(np.abs(got_a / want_a - 1)), np.max(np.abs(got_c / want_c - 1))))
    rows = [Row("X·W = (X/s)·(s·W), largest relative difference", identity, 0.0,
                tolerance=EXACT, note="exact before rounding: range moves, the product stays"),
            Row(f"channel maxima after smoothing vs (A·C)^(1−α) and (A·C)^α, α = {alpha:g}",
                maxima, 0.0, tolerance=EXACT)]
    if alpha == 0.5:
        balance = float(np.max(np.abs(got_a / np.sqrt(a * c) - 1)))
        rows.append(Row("at α = ½ both maxima are √(A·C), largest relative difference",
                        balance, 0.0, tolerance=EXACT))
    ratio = lambda m: float(m.max() / np.median(m))  # noqa: E731
    rows += [Row("activation max/median channel ratio, before", ratio(a), None),
             Row("activation max/median channel ratio, after", ratio(got_a), None),
             Row(f"W{bits}A{bits} output error, RMS relative, without smoothing",
                 w8a8_error(x, w, bits), None),
             Row(f"W{bits}A{bits} output error, RMS relative, smoothed at α = {alpha:g}",
                 w8a8_error(xs, ws, bits), None)]
    return Witness(rows=rows, parameters={"alpha": alpha, "bits": bits, "outlier": factor,
                                          "seed": seed, "tokens": 512, "channels": 64},
                   notes=["The output-error rows are reported, not judged: smoothing preserves "
                          "the unquantised product, not the rounded one, and no α is best for "
                          "every layer (Module 10 records 40.83 perplexity without, 26.30 at "
                          "α = 0.5 and 23.63 at α = 0.8 in Lab 4)."])


# ---------------------------------------------------------------------------------
# gptq
# ---------------------------------------------------------------------------------


def correlated_inputs(features: int, samples: int, factors: int, seed: int) -> np.ndarray:
    """Inputs (features × samples) that share ``factors`` latent factors plus noise."""
    rng = np.random.default_rng([seed, 20])
    mixing = rng.standard_normal((features, factors))
    return mixing @ rng.standard_normal((factors, samples)) + \
        0.3 * rng.standard_normal((features, samples))


def _constrained_optimum(h: np.ndarray, q: int, error: float) -> np.ndarray:
    """argmin ½·δᵀ·H·δ subject to δ_q = −e, from the Lagrange system solved directly."""
    n = h.shape[0]
    system = np.zeros((n + 1, n + 1))
    system[:n, :n] = h
    system[:n, n] = system[n, :n] = np.eye(n)[q]
    rhs = np.zeros(n + 1)
    rhs[n] = -error
    return np.linalg.solve(system, rhs)[:n]


def gptq_witness(scenario, options) -> Witness:
    """GPTQ's update is the constrained optimum; its output error beside RTN's.

    >>> gptq_witness(None, {"bits": 4, "features": 32, "seed": 0}).passed
    True
    """
    from infermodel.plugin import Row, Witness  # the analyses, loaded when a witness runs

    bits, n, seed = options["bits"], options["features"], options["seed"]
    x = correlated_inputs(n, 8 * n, max(2, n // 8), seed)
    w = np.random.default_rng([seed, 21]).standard_normal((16, n)) / math.sqrt(n)
    h = hessian(x)                                      # undamped: the identities are exact
    h_inverse = np.linalg.inv(h)
    row = w[0]
    _, scale = symmetric_grid(row.reshape(1, -1), bits)
    q = int(np.argmax(np.abs(row / scale[0, 0] - np.round(row / scale[0, 0]))))
    error = float(row[q] - np.round(row[q] / scale[0, 0]) * scale[0, 0])
    delta = gptq_update(h_inverse, q, error)
    direct = _constrained_optimum(h, q, error)
    optimum = float(np.max(np.abs(delta - direct)) / max(float(np.max(np.abs(direct))), 1e-300))
    rise = float(np.sum((delta @ x) ** 2))
    predicted_rise = gptq_loss_increase(h_inverse, q, error)
    remaining = eliminate(h_inverse, q)
    kept = [i for i in range(n) if i != q]
    frozen = float(np.max(np.abs(remaining[np.ix_(kept, kept)]
                                 - np.linalg.inv(h[np.ix_(kept, kept)]))) /
                   np.max(np.abs(remaining)))
    gptq, rtn = gptq_quantise(w, x, bits), rtn_quantise(w, bits)
    out = lambda v: float(np.sum(((w - v) @ x) ** 2))  # noqa: E731
    weight = lambda v: float(np.sum((w - v) ** 2))  # noqa: E731
    rows = [
        Row("one step: δ = −e·H⁻¹[:, q]/[H⁻¹]_qq vs the Lagrange system solved, relative",
            optimum, 0.0, tolerance=EXACT),
        Row("one step: rise of ‖δᵀX‖² over ½·e²/[H⁻¹]_qq", rise, predicted_rise,
            tolerance=EXACT, relative=True, note="exact with H = 2·X·Xᵀ"),
        Row("inverse Hessian after freezing q vs the inverse of the rest, relative", frozen, 0.0,
            tolerance=EXACT, note="one step of Gaussian elimination"),
        Row(f"output error ‖(W − Ŵ)X‖², GPTQ over RTN, int{bits}", out(gptq) / out(rtn), None),
        Row(f"weight error ‖W − Ŵ‖², GPTQ over RTN, int{bits}", weight(gptq) / weight(rtn), None,
            note="GPTQ trades larger weight errors for a smaller output error"),
    ]
    return Witness(rows=rows, parameters={"bits": bits, "features": n, "outputs": 16,
                                          "samples": 8 * n, "seed": seed, "damping": 0.01},
                   notes=["The full pass uses damping 0.01 × the mean diagonal and one "
                          "symmetric scale per row; it is a local optimum for the calibration "
                          "inputs, not a guarantee for the model."])


# ---------------------------------------------------------------------------------
# awq
# ---------------------------------------------------------------------------------


def awq_witness(scenario, options) -> Witness:
    """AWQ's scaled channel keeps Δ/(2s) while Δ holds; when it does not, Δ grows.

    >>> awq_witness(None, {"bits": 4, "group_size": 128, "groups": 4096, "seed": 0}).passed
    True
    """
    from infermodel.plugin import Row, Witness  # the analyses, loaded when a witness runs

    bits, g, groups, seed = options["bits"], options["group_size"], options["groups"], options["seed"]
    rng = np.random.default_rng([seed, 30])
    w = rng.standard_normal((groups, g))
    _, base_step = awq_effective_weights(w, 1.0, bits)
    rows = []
    for s in (1.0, 2.0, 4.0):
        effective, step = awq_effective_weights(w, s, bits)
        held = step == base_step
        error = (effective[held, 0] - w[held, 0]) / base_step[held]
        bound, root = awq_rounding_error(1.0, s)
        over = float(np.mean(np.abs(error) > bound * (1 + 1e-12)))
        measured = math.sqrt(float(np.mean(error ** 2)))
        # Standard error of the RMS of n uniform errors: RMS·√(1/5n) (Var e² = 4a⁴/45).
        spread = root * math.sqrt(0.2 / held.sum())
        rows.append(Row(f"s = {s:g}: share of errors beyond Δ/(2s), Δ held", over, 0.0,
                        tolerance=0.0))
        rows.append(Row(f"s = {s:g}: RMS effective error over Δ, Δ held ({int(held.sum()):,} groups)",
                        measured, root, tolerance=SIGMAS * spread,
                        note=f"Δ/(s·√12); tolerance {SIGMAS:g} standard errors"))
        rows.append(Row(f"s = {s:g}: groups where the scaled channel raised Δ", float(1 - held.mean()),
                        None))
        grown = ~held
        if grown.any():
            rows.append(Row(f"s = {s:g}: mean Δ growth where it grew", float(np.mean(
                step[grown] / base_step[grown])), None))
    activation = np.ones(g)
    activation[0] = 10.0                                   # the salient channel
    for s in (1.0, 2.0, 4.0, 16.0):
        effective, _ = awq_effective_weights(w, s, bits)
        rows.append(Row(f"output error with a ×10 salient input, RMS relative, s = {s:g}",
                        _relative_rms((effective - w) @ activation, w @ activation), None))
    return Witness(rows=rows, parameters={"bits": bits, "group_size": g, "groups": groups,
                                          "seed": seed},
                   notes=["Large s helps the salient channel only while Δ holds; past that the "
                          "whole group's step grows, which is why AWQ searches a small grid of "
                          "scales against the calibration output error."])


OPTIONS_SMOOTHQUANT = {
    "alpha": Option(0.5, "migration strength α", minimum=0.0, maximum=1.0),
    "bits": Option(8, "bits of the weights and activations", minimum=2, maximum=16),
    "outlier": Option(50.0, "factor of the four outlier activation channels", minimum=1.0,
                      maximum=1e4),
    "seed": Option(0, "seed of the activations and weights", minimum=0),
}
OPTIONS_GPTQ = {
    "bits": Option(4, "bits of the weights", minimum=2, maximum=16),
    "features": Option(64, "inputs of the layer (its outputs are 16)", minimum=4, maximum=512),
    "seed": Option(0, "seed of the inputs and weights", minimum=0),
}
OPTIONS_AWQ = {
    "bits": Option(4, "bits of the weights (3 or more: at 2 bits a group has one level "
                      "a side and the uniform-noise model fails)", minimum=3, maximum=16),
    "group_size": Option(128, "weights sharing one scale", minimum=8, maximum=4096),
    "groups": Option(4096, "groups quantised", minimum=256, maximum=65536),
    "seed": Option(0, "seed of the weights", minimum=0),
}


@hookimpl
def infermodel_register_witnesses(register):
    register("smoothquant", smoothquant_witness,
             description="SmoothQuant on seeded outlier activations: the identity and the "
                         "smoothed maxima exactly, the W8A8 error before and after",
             reference=SMOOTHQUANT, options=OPTIONS_SMOOTHQUANT)
    register("gptq", gptq_witness,
             description="GPTQ on correlated seeded inputs: the update is the constrained "
                         "optimum, and its output error beside round to nearest",
             reference=GPTQ, options=OPTIONS_GPTQ)
    register("awq", awq_witness,
             description="AWQ's scaled channel: rounding error Δ/(2s) while the step holds, "
                         "and how the step grows when it does not",
             reference=AWQ, options=OPTIONS_AWQ)
