"""Signal-to-quantisation-noise ratio: the prediction and a seeded witness experiment.

Symmetric absmax round-to-nearest with b bits has q = 2^(b−1) − 1 levels on each side
of zero and step s = max|w|/q. If rounding errors are uniform on [−s/2, s/2] their
variance is s²/12, so

    SQNR = 10·log10(σ² / E[e²]) = 10·log10(12·q²·σ²/max²)          (exact under the model)
         ≈ 6.02·b + 4.77 − 20·log10(max/σ)                        (q ≈ 2^(b−1))

and dropping the −1 costs 20·log10(2^(b−1)/q): 1.2 dB at 4 bits, 0.07 dB at 8
(Inference lab, "Fewer bits per weight"; Module 10: Inference and serving, "Symmetric
round-to-nearest").

``max/σ`` is an input. For a named distribution it is computed here:

* ``uniform``: max/σ = √3 exactly (the largest value of a uniform law over its RMS);
* ``gaussian`` with n weights sharing one scale: the root-mean-square of the largest
  |w| among n independent standard normal weights, sqrt(E[max²]), from the order
  statistic integral E[max²] = ∫₀^∞ 2x·(1 − erf(x/√2)^n) dx (numerical, trapezoid
  rule). The root-mean-square is the right average: each group's noise is
  proportional to its own max², so the total noise follows the mean of max².

:func:`sqnr_experiment` is the witness: it quantises seeded Gaussian weights with numpy
and reports measured and predicted SQNR; :func:`measured_sqnr` returns the measured
number alone. The prediction ignores that the largest weight of each group rounds
exactly, which raises the measured SQNR by at most 10·log10(g/(g − 1)) (0.14 dB for
groups of 32).
"""

from __future__ import annotations

import math
from functools import lru_cache

import attrs
import numpy as np

DB_PER_BIT = 20 * math.log10(2)                      # 6.0206 dB per bit
OFFSET_DB = 10 * math.log10(12) - 20 * math.log10(2)  # 4.7712 dB


def levels(bits: int) -> int:
    """Non-zero levels on each side of zero of a symmetric b-bit grid."""
    return 2 ** (bits - 1) - 1


def predicted_sqnr(bits: int, max_over_sigma: float) -> float:
    """10·log10(12·(2^(b−1) − 1)²·σ²/max²) in dB."""
    q = levels(bits)
    return 10 * math.log10(12 * q * q / max_over_sigma ** 2)


def approximate_sqnr(bits: int, max_over_sigma: float) -> float:
    """6.02·b + 4.77 − 20·log10(max/σ) in dB (exact constants)."""
    return DB_PER_BIT * bits + OFFSET_DB - 20 * math.log10(max_over_sigma)


def sqnr_correction(bits: int) -> float:
    """The dB the approximation overstates: 20·log10(2^(b−1)/(2^(b−1) − 1))."""
    return 20 * math.log10(2 ** (bits - 1) / levels(bits))


@lru_cache(maxsize=256)
def gaussian_max_over_sigma(n: int) -> float:
    """sqrt(E[max_i w_i²]) for n independent standard normal weights (σ = 1).

    >>> gaussian_max_over_sigma(1)  # doctest: +ELLIPSIS
    1.0...
    """
    if n < 1:
        raise ValueError("n must be at least 1")
    upper = math.sqrt(2 * math.log(n + 1)) + 12.0
    x = np.linspace(0.0, upper, 40001)
    erf = np.asarray(np.frompyfunc(math.erf, 1, 1)(x / math.sqrt(2))).astype(float)
    # 1 − erf^n without cancellation for large n: −expm1(n·log(erf)).
    with np.errstate(divide="ignore"):
        tail = -np.expm1(n * np.log(erf))
    tail[0] = 1.0
    return math.sqrt(float(np.trapezoid(2 * x * tail, x)))


def max_over_sigma_for(distribution: str, n: int) -> float:
    if distribution == "uniform":
        return math.sqrt(3)
    if distribution == "gaussian":
        return gaussian_max_over_sigma(n)
    raise ValueError(f"unknown distribution {distribution!r}")


@attrs.frozen
class SqnrExperiment:
    """The outcome of one seeded quantisation experiment."""

    bits: int
    weights: int
    group_size: int
    outlier: float | None
    measured_db: float          # 10·log10(Σw²/Σ(w′ − w)²)
    max_over_sigma: float       # sqrt(mean over groups of max²) / RMS(w), of this sample
    predicted_db: float         # the exact formula at this sample's max/σ
    approximate_db: float       # 6.02·b + 4.77 − 20·log10(max/σ)
    zero_fraction: float        # share of weights that rounded to zero


def quantise(w: np.ndarray, bits: int, group_size: int) -> np.ndarray:
    """Symmetric absmax round-to-nearest with one scale per group of ``group_size``."""
    q = levels(bits)
    groups = w.reshape(-1, group_size)
    scale = np.abs(groups).max(axis=1, keepdims=True) / q
    scale = np.where(scale == 0, 1.0, scale)
    codes = np.clip(np.round(groups / scale), -q, q)
    return (codes * scale).reshape(w.shape)


def sqnr_experiment(bits: int, n: int, seed: int = 0, outlier: float | None = None,
                    group_size: int | None = None) -> SqnrExperiment:
    """Quantise ``n`` seeded N(0, 1) weights and compare measured with predicted SQNR.

    ``group_size`` weights share one scale (default: all ``n``, one scale). With
    ``outlier`` the largest-magnitude weight is multiplied by that factor first (one
    outlier stretches the scale of everything that shares it).

    >>> round(sqnr_experiment(8, 4096, seed=1).measured_db, 1)  # doctest: +SKIP
    41.3
    """
    if not 2 <= bits <= 32:
        raise ValueError("bits must be from 2 to 32")
    group = n if group_size is None else group_size
    if n < 1 or group < 1 or n % group:
        raise ValueError(f"group size {group} must divide the number of weights {n}")
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(n)
    if outlier is not None:
        i = int(np.argmax(np.abs(w)))
        w[i] *= outlier
    w_hat = quantise(w, bits, group)
    error = w_hat - w
    sigma2 = float(np.mean(w * w))
    measured = 10 * math.log10(float(np.sum(w * w)) / float(np.sum(error * error)))
    max2 = float(np.mean(np.abs(w.reshape(-1, group)).max(axis=1) ** 2))
    ratio = math.sqrt(max2 / sigma2)
    return SqnrExperiment(bits=bits, weights=n, group_size=group, outlier=outlier,
                          measured_db=measured, max_over_sigma=ratio,
                          predicted_db=predicted_sqnr(bits, ratio),
                          approximate_db=approximate_sqnr(bits, ratio),
                          zero_fraction=float(np.mean(w_hat == 0)))


def measured_sqnr(bits: int, n: int, seed: int = 0, outlier: float | None = None,
                  group_size: int | None = None) -> float:
    """Measured SQNR in dB of ``n`` seeded Gaussian weights quantised to ``bits``."""
    return sqnr_experiment(bits, n, seed, outlier, group_size).measured_db


__all__ = [
    "DB_PER_BIT",
    "OFFSET_DB",
    "SqnrExperiment",
    "approximate_sqnr",
    "gaussian_max_over_sigma",
    "levels",
    "max_over_sigma_for",
    "measured_sqnr",
    "predicted_sqnr",
    "quantise",
    "sqnr_correction",
    "sqnr_experiment",
]
