"""Calibrated quantisation as Module 10 states it: SmoothQuant, GPTQ and AWQ.

**SmoothQuant** (Module 10: Inference and serving, "Move range before rounding:
SmoothQuant"). In row-vector notation Y = X·W, with activation channels along the
columns of X and the matching input rows of W, any positive channel scales s give the
exact identity

    X·W = (X·diag(s)⁻¹)·(diag(s)·W).

It moves range from the activations to the weights without changing the product (the
rounded product does change). From calibration maxima A_j = max|X_j| and
C_j = max|W_j| at migration strength α,

    s_j = A_j^α / C_j^(1−α),   so   A_j/s_j = (A_j·C_j)^(1−α)   and   C_j·s_j = (A_j·C_j)^α;

at α = ½ both become √(A_j·C_j); a larger α moves more of the range into the weights.

**GPTQ** (Module 10, "Choose compensating weight errors: GPTQ"). In column-vector
notation a layer's calibration objective is ‖W·X − Ŵ·X‖²_F; each output row is treated
alone with H = 2·X·Xᵀ. Rounding coordinate q moves it by −e_q, e_q = w_q − Q(w_q); the
unrounded active coordinates F compensate by the δ that minimises ½·δᵀ·H_F·δ subject to
δ_q = −e_q. A Lagrange multiplier gives

    δ = −e_q · H_F⁻¹[:, q] / [H_F⁻¹]_qq,      and the objective rises by ½·e_q² / [H_F⁻¹]_qq.

With H = 2·X·Xᵀ that rise is exactly the increase of the row's squared output error
‖δᵀ·X‖². The coordinate is then frozen and removed from F, whose inverse follows by one
step of Gaussian elimination. Damping (a small multiple of the mean diagonal added to
H) keeps an ill-conditioned covariance invertible.

**AWQ** (Module 10, "Protect salient channels: AWQ"). Scaling a weight channel by s > 1
before rounding and dividing its input activation by s leaves the product unchanged;
if the group's quantisation step stays Δ, the channel's effective rounding error falls
from at most Δ/2 to at most Δ/(2s) (root mean square Δ/√12 to Δ/(s·√12) under the
uniform-noise model). Once s·|w| exceeds the group's other weights it sets the group's
maximum, and Δ grows with it.

References: Xiao et al., "SmoothQuant" (ICML 2023); Frantar et al., "GPTQ" (ICLR 2023);
Lin et al., "AWQ" (MLSys 2024) — as Module 10 lists them.
"""

from __future__ import annotations

import math

import numpy as np

from . import M10
from .quantisers import levels, symmetric_grid

SMOOTHQUANT = f"{M10}, 'Move range before rounding: SmoothQuant'"
GPTQ = f"{M10}, 'Choose compensating weight errors: GPTQ'"
AWQ = f"{M10}, 'Protect salient channels: AWQ'"


# ---------------------------------------------------------------------------------
# SmoothQuant
# ---------------------------------------------------------------------------------


def smoothing_factors(activation_max: np.ndarray, weight_max: np.ndarray,
                      alpha: float) -> np.ndarray:
    """s_j = A_j^α / C_j^(1−α) from per-channel maxima at migration strength α.

    >>> smoothing_factors(np.array([16.0]), np.array([1.0]), 0.5).tolist()
    [4.0]
    """
    if not 0 <= alpha <= 1:
        raise ValueError("the migration strength α is from 0 to 1")
    return np.asarray(activation_max, dtype=float) ** alpha / \
        np.asarray(weight_max, dtype=float) ** (1 - alpha)


def smooth(x: np.ndarray, w: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(X·diag(s)⁻¹, diag(s)·W): the same product X·W with range moved into W."""
    return x / s, s[:, None] * w


def smoothed_maxima(activation_max: np.ndarray, weight_max: np.ndarray,
                    alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """((A·C)^(1−α), (A·C)^α): the channel maxima of X/s and s·W after smoothing.

    A = 8, C = 2 at α = ¾: s = 8^¾/2^¼ = 4, so 8/4 = 2 = 16^¼ and 2·4 = 8 = 16^¾.

    >>> [m.tolist() for m in smoothed_maxima(np.array([8.0]), np.array([2.0]), 0.75)]
    [[2.0], [8.0]]
    """
    product = np.asarray(activation_max, dtype=float) * np.asarray(weight_max, dtype=float)
    return product ** (1 - alpha), product ** alpha


# ---------------------------------------------------------------------------------
# GPTQ
# ---------------------------------------------------------------------------------


def gptq_update(h_inverse: np.ndarray, q: int, error: float | np.ndarray) -> np.ndarray:
    """δ = −e_q · H_F⁻¹[:, q] / [H_F⁻¹]_qq (one row's error, or a column of rows' errors).

    With H = [[2, 1], [1, 2]], H⁻¹ = [[2, −1], [−1, 2]]/3 and e_0 = −0.2 the update is
    (0.2, −0.1): the rounded coordinate moves by −e_0 and its neighbour compensates.

    >>> gptq_update(np.linalg.inv([[2.0, 1], [1, 2]]), 0, -0.2).round(12).tolist()
    [0.2, -0.1]
    """
    column = h_inverse[:, q] / h_inverse[q, q]
    return -np.multiply.outer(np.asarray(error, dtype=float), column)


def gptq_loss_increase(h_inverse: np.ndarray, q: int, error: float) -> float:
    """½·e_q² / [H_F⁻¹]_qq: the minimum of ½·δᵀ·H·δ once coordinate q is rounded."""
    return 0.5 * error * error / float(h_inverse[q, q])


def eliminate(h_inverse: np.ndarray, q: int) -> np.ndarray:
    """The inverse Hessian of the active set without q (its row and column become zero)."""
    return h_inverse - np.outer(h_inverse[:, q], h_inverse[q, :]) / h_inverse[q, q]


def hessian(inputs: np.ndarray, damping: float = 0.0) -> np.ndarray:
    """H = 2·X·Xᵀ for inputs X (features × samples), plus damping × its mean diagonal."""
    h = 2.0 * inputs @ inputs.T
    return h + damping * float(np.mean(np.diag(h))) * np.eye(h.shape[0])


def gptq_quantise(weights: np.ndarray, inputs: np.ndarray, bits: int,
                  damping: float = 0.01) -> np.ndarray:
    """Quantise W (outputs × inputs) column by column with GPTQ's compensating update.

    Each row keeps the symmetric absmax scale of its unrounded weights; the columns are
    rounded in order, every remaining column of the row absorbing the error.
    """
    w = np.array(weights, dtype=float)
    _, scale = symmetric_grid(w, bits)
    q_max = levels(bits)
    h_inverse = np.linalg.inv(hessian(inputs, damping))
    for q in range(w.shape[1]):
        rounded = np.clip(np.round(w[:, q] / scale[:, 0]), -q_max, q_max) * scale[:, 0]
        error = w[:, q] - rounded
        w[:, q:] += gptq_update(h_inverse, q, error)[:, q:]
        w[:, q] = rounded                       # exact: the update moved it by −error
        h_inverse = eliminate(h_inverse, q)
    return w


def rtn_quantise(weights: np.ndarray, bits: int) -> np.ndarray:
    """Round to nearest with one symmetric scale per row (GPTQ's baseline)."""
    codes, scale = symmetric_grid(np.asarray(weights, dtype=float), bits)
    return codes * scale


# ---------------------------------------------------------------------------------
# AWQ
# ---------------------------------------------------------------------------------


def awq_rounding_error(step: float, s: float) -> tuple[float, float]:
    """(largest, root-mean-square) effective rounding error of a channel scaled by s
    before rounding with step Δ held: (Δ/(2s), Δ/(s·√12)).

    >>> awq_rounding_error(0.4, 2.0)[0]
    0.1
    """
    if s <= 0:
        raise ValueError("the channel scale s must be positive")
    return step / (2 * s), step / (s * math.sqrt(12))


def awq_effective_weights(groups: np.ndarray, s: float, bits: int,
                          channel: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Quantise each row (a group sharing one scale) with column ``channel`` scaled by s
    first; return the effective weights (that channel divided by s again) and each
    group's step Δ.
    """
    scaled = np.array(groups, dtype=float)
    scaled[:, channel] *= s
    codes, scale = symmetric_grid(scaled, bits)
    effective = codes * scale
    effective[:, channel] /= s
    return effective, scale[:, 0]


__all__ = [
    "AWQ",
    "GPTQ",
    "SMOOTHQUANT",
    "awq_effective_weights",
    "awq_rounding_error",
    "eliminate",
    "gptq_loss_increase",
    "gptq_quantise",
    "gptq_update",
    "hessian",
    "rtn_quantise",
    "smooth",
    "smoothed_maxima",
    "smoothing_factors",
]
