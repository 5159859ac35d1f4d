"""Witness ``sqnr``: measured against predicted SQNR, and the exact outlier network.

Two experiments (Inference lab, "Fewer bits per weight"; Module 10: Inference and
serving, "Symmetric round-to-nearest"), both seeded numpy, using
:mod:`infermodel_builtins.sqnr`:

1. ``weights`` N(0, 1) weights quantised with symmetric absmax round-to-nearest, one
   scale per group of ``group_size``: the measured SQNR against the prediction
   10·log10(12·q²·σ²/max²) at the sample's own max/σ and at the Gaussian law's
   sqrt(E[max²])/σ for the group (the one the quantisation lever's ``sqnr_db`` uses).
2. The exact outlier network: a two-layer ReLU network (2 inputs, 16 hidden units, 2
   outputs, as in the Lab, with seeded Gaussian weights instead of trained ones). One
   hidden unit's incoming weights and bias are multiplied by ``outlier`` (20) and its
   outgoing weights divided by it. Since relu(20z) = 20·relu(z) the network computes
   the same function (checked), yet its first weight matrix now holds two weights
   twenty times larger than the rest; quantising that matrix with one scale shows the
   SQNR drop and how many small weights round to zero. These rows are reported, not
   judged: with 32 weights, and with most of them rounding to zero, the uniform-noise
   model behind the prediction does not hold (the Lab's point).

``bits`` and ``group_size`` default to the scenario's quantisation lever when its block
linears use a symmetric integer grid with groups; otherwise 4 bits in groups of 128.
"""

from __future__ import annotations

import math

import numpy as np

from infermodel.plugin import Option, Row, Witness, hookimpl

from . import LAB, M10
from .sqnr import gaussian_max_over_sigma, predicted_sqnr, quantise, sqnr_experiment

REFERENCE = f"{LAB}, 'Fewer bits per weight'; {M10}, 'Symmetric round-to-nearest'"
#: Measured minus predicted SQNR accepted, in dB, on top of the exact-max bias below.
#: Over 200 seeds of 2^16 weights (3–8 bits, groups of 32–1,024) the spread was −0.24
#: to +0.26 dB against the Gaussian law (tests/test_quantization_sqnr.py).
TOLERANCE_DB = 0.35
#: Fewest groups quantised: the Gaussian law's max/σ is a mean over groups, and a few
#: groups' sample maxima stray from it (±1.1 dB with one group of 65,536).
MIN_GROUPS = 64


def exact_max_bias(group: int) -> float:
    """dB by which the measured SQNR can exceed the prediction because the largest
    weight of each group rounds exactly: 10·log10(g/(g − 1)) (0.58 dB for g = 8).

    >>> round(exact_max_bias(32), 2)
    0.14
    """
    return 10 * math.log10(group / (group - 1))
#: Largest relative change of the network's outputs the rescaling may cause.
FUNCTION_TOLERANCE = 1e-12


def _lever_grid(scenario) -> tuple[int | None, int | None]:
    """(bits, group size) of the scenario's block linears when they are a symmetric
    integer grid with groups, else (None, None).
    """
    lever = scenario.lever("quantization") if scenario is not None else None
    fmt = getattr(lever, "linear", None)
    if (fmt is None or getattr(fmt, "kind", None) != "int" or not getattr(fmt, "symmetric", False)
            or getattr(fmt, "granularity", None) != "group"):
        return None, None
    bits = float(fmt.bits)
    if not bits.is_integer() or not 3 <= bits <= 16:
        return None, None
    return int(bits), int(fmt.group_size)


def network(inputs: int, hidden: int, outputs: int, seed: int) -> dict[str, np.ndarray]:
    """Seeded weights of a two-layer ReLU network."""
    rng = np.random.default_rng([seed, 2])
    return {"w1": rng.standard_normal((inputs, hidden)), "b1": 0.1 * rng.standard_normal(hidden),
            "w2": rng.standard_normal((hidden, outputs)) / math.sqrt(hidden),
            "b2": 0.1 * rng.standard_normal(outputs)}


def forward(net: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    return np.maximum(x @ net["w1"] + net["b1"], 0.0) @ net["w2"] + net["b2"]


def with_outlier(net: dict[str, np.ndarray], unit: int, factor: float) -> dict[str, np.ndarray]:
    """The same function with hidden unit ``unit`` scaled: incoming weights and bias
    ×factor, outgoing weights ÷factor (exact for ReLU and factor > 0).
    """
    out = {k: v.copy() for k, v in net.items()}
    out["w1"][:, unit] *= factor
    out["b1"][unit] *= factor
    out["w2"][unit, :] /= factor
    return out


def _sqnr_of(w: np.ndarray, w_hat: np.ndarray) -> float:
    return 10 * math.log10(float(np.sum(w * w)) / float(np.sum((w_hat - w) ** 2)))


OPTIONS = {
    "bits": Option(None, "bits of the symmetric grid (default: the scenario's block linears, "
                         "else 4)", kind=int, minimum=3, maximum=16),
    "group_size": Option(None, "weights sharing one scale (default: the scenario's group size, "
                               "else 128)", kind=int, minimum=8, maximum=65536),
    "weights": Option(65536, f"Gaussian weights quantised (at least {MIN_GROUPS} groups)",
                      minimum=1024, maximum=4_194_304),
    "outlier": Option(20.0, "factor of the rescaled hidden unit", minimum=1.0, maximum=1e4),
    "hidden": Option(16, "hidden units of the network", minimum=2, maximum=4096),
    "seed": Option(0, "seed of the weights and inputs", minimum=0),
}


def sqnr_witness(scenario, options) -> Witness:
    """Quantise seeded weights and the outlier network; compare with the predictions.

    >>> w = sqnr_witness(None, {"bits": 4, "group_size": 128, "weights": 65536,
    ...                         "outlier": 20.0, "hidden": 16, "seed": 0})
    >>> w.passed
    True
    """
    lever_bits, lever_group = _lever_grid(scenario)
    bits = options["bits"] or lever_bits or 4
    group = options["group_size"] or lever_group or 128
    n, seed = options["weights"], options["seed"]
    n = max(-(-n // group), MIN_GROUPS) * group      # whole groups, at least MIN_GROUPS
    experiment = sqnr_experiment(bits, n, seed=seed, group_size=group)
    law = gaussian_max_over_sigma(group)
    tolerance = TOLERANCE_DB + exact_max_bias(group)
    rows = [
        Row(f"SQNR of {n:,} Gaussian weights, groups of {group}, at the sample max/σ",
            experiment.measured_db, experiment.predicted_db, "dB", tolerance=tolerance),
        Row("the same, predicted from the Gaussian law's max/σ", experiment.measured_db,
            predicted_sqnr(bits, law), "dB", tolerance=tolerance,
            note=f"max/σ = sqrt(E[max²]) = {law:.4f} for {group} weights: the lever's sqnr_db; "
                 f"tolerance {TOLERANCE_DB} dB plus {exact_max_bias(group):.2f} dB for the "
                 "exactly rounded maximum of each group"),
        Row("approximation 6.02·b + 4.77 − 20·log10(max/σ)", None, experiment.approximate_db, "dB",
            note="overstates by 20·log10(2^(b−1)/(2^(b−1) − 1))"),
    ]

    factor, hidden = options["outlier"], options["hidden"]
    net = network(2, hidden, 2, seed)
    rng = np.random.default_rng([seed, 3])
    x = rng.standard_normal((1000, 2))
    # The unit with the largest incoming weight becomes the outlier: its two weights
    # then set the matrix's scale.
    unit = int(np.argmax(np.abs(net["w1"]).max(axis=0)))
    scaled = with_outlier(net, unit, factor)
    reference = forward(net, x)
    change = float(np.max(np.abs(forward(scaled, x) - reference)) / np.max(np.abs(reference)))
    rows.append(Row(f"network output change after ×{factor:g} / ÷{factor:g}", change, 0.0,
                    tolerance=FUNCTION_TOLERANCE, note="relu(a·z) = a·relu(z): the same function"))
    ordinary = np.ones(hidden, dtype=bool)
    ordinary[unit] = False
    for label, model in (("plain", net), ("with the outlier", scaled)):
        w1 = model["w1"]
        w1_hat = quantise(w1.reshape(-1), bits, w1.size).reshape(w1.shape)
        ratio = float(np.abs(w1).max() / np.sqrt(np.mean(w1 * w1)))
        rows.append(Row(f"SQNR of the first layer ({w1.size} weights, one scale), {label}",
                        _sqnr_of(w1, w1_hat), predicted_sqnr(bits, ratio), "dB"))
        zero = float(np.mean(w1_hat[:, ordinary] == 0))
        rows.append(Row(f"ordinary first-layer weights rounded to zero, {label}", zero, None))
        quantised = dict(model, w1=w1_hat)
        error = forward(quantised, x) - reference
        rows.append(Row(f"network output error, RMS relative, {label}",
                        float(np.sqrt(np.mean(error ** 2)) / np.sqrt(np.mean(reference ** 2))),
                        None))
    return Witness(
        rows=rows,
        parameters={"bits": bits, "group_size": group, "weights": n, "outlier": factor,
                    "hidden": hidden, "seed": seed},
        notes=["The network rows after the first are reported, not judged: 32 weights under "
               "one scale are too few for the uniform-noise model, and once the outlier sets "
               "the scale small weights round to zero, which the model does not describe. SQNR "
               "is an average over the signal: watch the zeros and the output error, not only "
               "the decibels."])


@hookimpl
def infermodel_register_witnesses(register):
    register("sqnr", sqnr_witness,
             description="seeded weights quantised with symmetric round-to-nearest: measured "
                         "against predicted SQNR, and the exact ×20 outlier network",
             reference=REFERENCE, options=OPTIONS)
