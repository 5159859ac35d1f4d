"""The Inference lab's quantised network: a 2–16–2 ReLU classifier of two spirals.

The lab's "Fewer bits per weight" exhibit trains a two-layer network (2 inputs, 16 ReLU
units, 2 outputs) on two interleaved spirals, rounds its weights to b bits with
symmetric absmax scales (the biases stay at full precision) and compares the full and
the quantised network: accuracy, loss, weight bytes, SQNR measured and predicted, and
the decision boundary. This module does the same in numpy, seeded and deterministic:

* data: ``points`` per class on two spirals of ``turns`` turns (radius growing to 2),
  the second rotated by π, with Gaussian jitter;
* training: full-batch Adam on the softmax cross-entropy, He-initialised weights, zero
  biases (a fraction of a second);
* quantisation: one scale per weight matrix (``"tensor"``) or per output unit
  (``"channel"``), s = max|w|/(2^(b−1) − 1), codes clamped to ±(2^(b−1) − 1);
* bytes: ⌈b·n_weights/8⌉ + 2·n_scales (16-bit scales); the full network at 32 bits and
  no scales;
* SQNR: measured 10·log10(Σw²/Σ(w′ − w)²) over every quantised weight; predicted
  10·log10(Σw² / Σ_t n_t·s_t²/12), which for one scale is the exhibit's
  10·log10(12·(2^(b−1) − 1)²·σ²/max²);
* the exact outlier: one hidden unit's incoming weights and bias ×a, its outgoing weights
  ÷a; relu(a·z) = a·relu(z) for a > 0, so the function is unchanged while the first
  matrix now holds two weights a times larger than the rest.
"""

from __future__ import annotations

import math

import attrs
import numpy as np

from . import LAB
from .quantisers import levels

REFERENCE = f"{LAB}, 'Fewer bits per weight'"
#: The exhibit's layer sizes.
INPUTS, HIDDEN, OUTPUTS = 2, 16, 2
#: Bits of the full-precision weights (float32) and of each stored scale (fp16).
FULL_BITS, SCALE_BITS = 32, 16
GRANULARITIES = ("tensor", "channel")

Network = dict[str, np.ndarray]


def two_spirals(points: int, seed: int, *, turns: float = 1.5, noise: float = 0.06,
                stream: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``points`` seeded samples per class (inputs, labels); ``stream`` draws a fresh set.

    >>> x, y = two_spirals(5, 0)
    >>> x.shape, y.tolist()
    ((10, 2), [0, 0, 0, 0, 0, 1, 1, 1, 1, 1])
    """
    rng = np.random.default_rng([seed, 40, stream])
    angle = np.sqrt(rng.random(points)) * turns * 2 * np.pi
    radius = 2 * angle / (turns * 2 * np.pi)
    xs = []
    for label in (0, 1):
        a = angle + np.pi * label
        xs.append(np.stack([radius * np.cos(a), radius * np.sin(a)], axis=1)
                  + noise * rng.standard_normal((points, 2)))
    return np.concatenate(xs), np.repeat([0, 1], points)


def forward(net: Network, x: np.ndarray) -> np.ndarray:
    """The logits: relu(x·W1 + b1)·W2 + b2."""
    return np.maximum(x @ net["w1"] + net["b1"], 0.0) @ net["w2"] + net["b2"]


def loss(net: Network, x: np.ndarray, y: np.ndarray) -> float:
    """Mean softmax cross-entropy in nats."""
    logits = forward(net, x)
    logits = logits - logits.max(axis=1, keepdims=True)
    log_z = np.log(np.exp(logits).sum(axis=1))
    return float(np.mean(log_z - logits[np.arange(len(y)), y]))


def accuracy(net: Network, x: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(forward(net, x).argmax(axis=1) == y))


def _gradients(net: Network, x: np.ndarray, y: np.ndarray) -> Network:
    z = x @ net["w1"] + net["b1"]
    h = np.maximum(z, 0.0)
    logits = h @ net["w2"] + net["b2"]
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(len(y)), y] -= 1.0
    g = p / len(y)
    back = (g @ net["w2"].T) * (z > 0)
    return {"w1": x.T @ back, "b1": back.sum(axis=0), "w2": h.T @ g, "b2": g.sum(axis=0)}


def train(x: np.ndarray, y: np.ndarray, seed: int, *, hidden: int = HIDDEN, steps: int = 2000,
          rate: float = 0.02) -> Network:
    """Full-batch Adam (β = 0.9, 0.999) from He-initialised weights and zero biases."""
    rng = np.random.default_rng([seed, 41])
    net = {"w1": rng.standard_normal((INPUTS, hidden)) * math.sqrt(2 / INPUTS),
           "b1": np.zeros(hidden),
           "w2": rng.standard_normal((hidden, OUTPUTS)) * math.sqrt(2 / hidden),
           "b2": np.zeros(OUTPUTS)}
    first = {k: np.zeros_like(v) for k, v in net.items()}
    second = {k: np.zeros_like(v) for k, v in net.items()}
    for step in range(1, steps + 1):
        for key, g in _gradients(net, x, y).items():
            first[key] = 0.9 * first[key] + 0.1 * g
            second[key] = 0.999 * second[key] + 0.001 * g * g
            corrected = first[key] / (1 - 0.9 ** step)
            net[key] = net[key] - rate * corrected / (np.sqrt(second[key] / (1 - 0.999 ** step))
                                                      + 1e-8)
    return net


def with_outlier(net: Network, unit: int, factor: float) -> Network:
    """The same function with hidden unit ``unit`` rescaled: incoming weights and bias
    ×factor, outgoing weights ÷factor (exact for ReLU and factor > 0).
    """
    out = {k: v.copy() for k, v in net.items()}
    out["w1"][:, unit] *= factor
    out["b1"][unit] *= factor
    out["w2"][unit, :] /= factor
    return out


def quantise_matrix(w: np.ndarray, bits: int, granularity: str) -> tuple[np.ndarray, np.ndarray]:
    """(w′, scales): symmetric absmax rounding, one scale per matrix or per output column."""
    q = levels(bits)
    top = np.abs(w).max() if granularity == "tensor" else np.abs(w).max(axis=0)
    scale = np.atleast_1d(np.where(top > 0, top / q, 1.0))
    return np.clip(np.round(w / scale), -q, q) * scale, scale


@attrs.frozen
class Quantised:
    """A network with its weight matrices rounded, and what the rounding did."""

    net: Network = attrs.field(eq=False)
    bits: int
    granularity: str
    scales: int                 # scales stored
    weights: int                # weights quantised
    packed_bytes: int           # codes packed at b bits plus 16-bit scales, counted
    measured_db: float
    predicted_db: float
    zero_fraction: float        # share of quantised weights that became zero


def weight_bytes(bits: int, weights: int, scales: int) -> int:
    """⌈b·n_weights/8⌉ + 2·n_scales (Inference lab, "Fewer bits per weight").

    >>> weight_bytes(4, 64, 2), weight_bytes(32, 64, 0)
    (36, 256)
    """
    return -(-bits * weights // 8) + SCALE_BITS // 8 * scales


def pack(codes: np.ndarray, bits: int) -> bytes:
    """Signed codes stored as b-bit two's-complement fields, packed end to end."""
    unsigned = np.asarray(codes, dtype=np.int64).ravel() % (1 << bits)
    fields = (unsigned[:, None] >> np.arange(bits - 1, -1, -1)) & 1
    return np.packbits(fields.astype(np.uint8).ravel()).tobytes()


def quantise_network(net: Network, bits: int, granularity: str = "tensor") -> Quantised:
    """Round W1 and W2 (the biases stay full precision); measure and predict the SQNR."""
    out = dict(net)
    signal = noise = predicted_noise = 0.0
    codes, scales, zeros = [], [], 0
    for key in ("w1", "w2"):
        w = net[key]
        w_hat, scale = quantise_matrix(w, bits, granularity)
        out[key] = w_hat
        codes.append(np.round(w_hat / scale))
        scales.append(scale)
        signal += float(np.sum(w * w))
        noise += float(np.sum((w_hat - w) ** 2))
        per_scale = w.size // scale.size                  # weights sharing each scale
        predicted_noise += float(np.sum(per_scale * scale ** 2)) / 12
        zeros += int(np.sum(w_hat == 0))
    n = sum(net[k].size for k in ("w1", "w2"))
    stored = pack(np.concatenate([c.ravel() for c in codes]), bits) + \
        np.concatenate(scales).astype(np.float16).tobytes()
    return Quantised(net=out, bits=bits, granularity=granularity,
                     scales=sum(s.size for s in scales), weights=n, packed_bytes=len(stored),
                     measured_db=10 * math.log10(signal / noise) if noise else math.inf,
                     predicted_db=10 * math.log10(signal / predicted_noise),
                     zero_fraction=zeros / n)


def decision_grid(net: Network, extent: float = 2.6, size: int = 81) -> tuple[np.ndarray, np.ndarray]:
    """(coordinates, predicted class on the size × size grid over [−extent, extent]²)."""
    axis = np.linspace(-extent, extent, size)
    gx, gy = np.meshgrid(axis, axis)
    grid = np.stack([gx.ravel(), gy.ravel()], axis=1)
    return axis, forward(net, grid).argmax(axis=1).reshape(size, size)


__all__ = [
    "FULL_BITS",
    "GRANULARITIES",
    "HIDDEN",
    "REFERENCE",
    "Quantised",
    "accuracy",
    "decision_grid",
    "forward",
    "loss",
    "pack",
    "quantise_matrix",
    "quantise_network",
    "train",
    "two_spirals",
    "weight_bytes",
    "with_outlier",
]
