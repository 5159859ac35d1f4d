"""Witnesses ``sqnr`` and ``fewer_bits``: measured against predicted SQNR, and the
Inference lab's quantised network, trained.

``sqnr`` (Inference lab, "Fewer bits per weight"; Module 10: Inference and serving,
"Symmetric round-to-nearest"): ``weights`` N(0, 1) weights quantised with symmetric
absmax round-to-nearest, one scale per group of ``group_size``; the measured SQNR
against the prediction 10·log10(12·q²·σ²/max²) at the sample's own max/σ and at the
Gaussian law's sqrt(E[max²])/σ for the group (the one the quantisation lever's
``sqnr_db`` uses). ``bits`` and ``group_size`` default to the scenario's quantisation
lever when its block linears use a symmetric integer grid with groups; otherwise 4 bits
in groups of 128.

``fewer_bits`` is the exhibit itself (Inference lab, "Fewer bits per weight"): a seeded
2–16–2 ReLU network trained on two spirals (:mod:`.spirals`), its weights rounded to
``bits`` bits, and the exhibit's table — accuracy, loss, weight bytes, SQNR measured and
predicted — for the full and the quantised network, with the decision boundary of each
as a figure (``--plot``). With ``outlier = 20`` one hidden unit carries the exhibit's
exact outlier: the same function (checked), two first-layer weights twenty times the
rest, and most small weights rounded to zero.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from infermodel.plugin import InfermodelError, Option, Problem, hookimpl

if TYPE_CHECKING:  # annotations only: the witness records load when a witness runs
    from infermodel.plugin import DecisionMap, Witness

from . import LAB, M10, spirals
from .sqnr import gaussian_max_over_sigma, predicted_sqnr, sqnr_experiment

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
#: Measured minus predicted SQNR of the trained network accepted, in dB, on top of the
#: exact-max bias (the largest weight under each scale rounds exactly). With only 64
#: weights the uniform-noise model holds on average: over seeds 0–99 at 3–8 bits the
#: difference less that bias ranged over −1.5 to +2.1 dB (standard deviation 0.6–0.8).
NETWORK_TOLERANCE_DB = 2.5
#: Lowest training accuracy accepted on the spirals (seeds 0–99 ranged from 0.88 to 1).
TRAINED_ACCURACY = 0.85


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


OPTIONS = {
    "bits": Option(None, "bits of the symmetric grid (default: the scenario's block linears, "
                         "else 4)", kind=int, minimum=3, maximum=16),
    "group_size": Option(None, "weights sharing one scale (default: the scenario's group size, "
                               "else 128)", kind=int, minimum=8, maximum=65536),
    "weights": Option(65536, f"Gaussian weights quantised (at least {MIN_GROUPS} groups)",
                      minimum=1024, maximum=4_194_304),
    "seed": Option(0, "seed of the weights", minimum=0),
}


def sqnr_witness(scenario, options) -> Witness:
    """Quantise seeded Gaussian weights; compare the SQNR with the predictions.

    >>> w = sqnr_witness(None, {"bits": 4, "group_size": 128, "weights": 65536, "seed": 0})
    >>> w.passed
    True
    """
    from infermodel.plugin import Row, Witness  # the analyses, loaded when a witness runs

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

    return Witness(rows=rows, parameters={"bits": bits, "group_size": group, "weights": n,
                                          "seed": seed},
                   notes=["The Inference lab's network, trained and quantised, is the "
                          "fewer_bits witness."])


# ---------------------------------------------------------------------------------
# fewer_bits: the exhibit's network, trained
# ---------------------------------------------------------------------------------


OPTIONS_FEWER_BITS = {
    "bits": Option(None, "bits of the symmetric grid (default: the scenario's block linears "
                         "when an integer grid, else 4)", kind=int, minimum=2, maximum=16),
    "granularity": Option("tensor", "one scale per weight matrix ('tensor') or per output "
                                    "unit ('channel')"),
    "outlier": Option(1.0, "factor of the exact outlier unit (1: none; the exhibit uses 20)",
                      minimum=1.0, maximum=1e4),
    "points": Option(200, "training points per spiral", minimum=20, maximum=5000),
    "steps": Option(2000, "full-batch Adam steps", minimum=10, maximum=20000),
    "grid": Option(81, "decision-map points per side", minimum=11, maximum=401),
    "seed": Option(0, "seed of the data and the initial weights", minimum=0),
}


def _network_bits(scenario) -> int | None:
    lever = scenario.lever("quantization") if scenario is not None else None
    fmt = getattr(lever, "linear", None)
    if fmt is None or getattr(fmt, "kind", None) != "int" or not getattr(fmt, "symmetric", False):
        return None
    bits = float(fmt.bits)
    return int(bits) if bits.is_integer() and 2 <= bits <= 16 else None


def _decision_map(title: str, net, options, x, y) -> DecisionMap:
    from infermodel.plugin import DecisionMap  # the analyses, loaded when a witness runs

    axis, classes = spirals.decision_grid(net, size=options["grid"])
    return DecisionMap(title, axis, axis, classes, [(a, b, c) for (a, b), c in zip(x, y)])


def fewer_bits_witness(scenario, options) -> Witness:
    """Train the exhibit's network, round its weights, and fill in the exhibit's table.

    >>> w = fewer_bits_witness(None, {"bits": 4, "granularity": "tensor", "outlier": 1.0,
    ...                               "points": 200, "steps": 2000, "grid": 21, "seed": 0})
    >>> w.passed, len(w.figures)
    (True, 2)
    """
    from infermodel.plugin import Row, Witness  # the analyses, loaded when a witness runs

    granularity = options["granularity"]
    if granularity not in spirals.GRANULARITIES:
        raise InfermodelError(Problem(f"granularity {granularity!r} is not one of "
                                      + ", ".join(map(repr, spirals.GRANULARITIES)),
                                      key="--option granularity", expected="'tensor' or 'channel'"))
    bits = options["bits"] or _network_bits(scenario) or 4
    seed, factor = options["seed"], options["outlier"]
    x, y = spirals.two_spirals(options["points"], seed)
    fresh_x, fresh_y = spirals.two_spirals(options["points"], seed, stream=1)
    trained = spirals.train(x, y, seed, steps=options["steps"])
    rows = []
    full = trained
    if factor != 1.0:
        # The unit with the largest incoming weight carries the outlier.
        unit = int(np.argmax(np.abs(trained["w1"]).max(axis=0)))
        full = spirals.with_outlier(trained, unit, factor)
        reference = spirals.forward(trained, x)
        change = float(np.max(np.abs(spirals.forward(full, x) - reference)) /
                       np.max(np.abs(reference)))
        rows.append(Row(f"network output change after ×{factor:g} / ÷{factor:g} of unit {unit}",
                        change, 0.0, tolerance=FUNCTION_TOLERANCE,
                        note="relu(a·z) = a·relu(z): the same function"))
    quantised = spirals.quantise_network(full, bits, granularity)
    label = f"int{bits} per {granularity}"
    n = quantised.weights
    exact = 10 * math.log10(n / (n - quantised.scales))
    tolerance = NETWORK_TOLERANCE_DB + exact
    full_bytes = len(np.concatenate([full["w1"].ravel(), full["w2"].ravel()])
                     .astype(np.float32).tobytes())
    rows += [
        Row("accuracy, full", spirals.accuracy(full, x, y), 1.0,
            tolerance=1 - TRAINED_ACCURACY, note="training points; the fit the exhibit trains"),
        Row(f"accuracy, quantised ({label})", spirals.accuracy(quantised.net, x, y), None),
        Row("loss, full", spirals.loss(full, x, y), None, "nat"),
        Row(f"loss, quantised ({label})", spirals.loss(quantised.net, x, y), None, "nat"),
        Row("weight bytes, full", full_bytes, spirals.weight_bytes(spirals.FULL_BITS, n, 0), "B",
            tolerance=0, note="float32, counted; ⌈32·n/8⌉ with no scales"),
        Row(f"weight bytes, quantised ({label})", quantised.packed_bytes,
            spirals.weight_bytes(bits, n, quantised.scales), "B", tolerance=0,
            note=f"codes packed at {bits} bits and {quantised.scales} fp16 scales, counted; "
                 "⌈b·n/8⌉ + 2·n_scales"),
        Row(f"SQNR measured vs predicted ({label})", quantised.measured_db,
            quantised.predicted_db, "dB",
            tolerance=tolerance if bits >= 3 and factor == 1.0 else None,
            note="predicted 10·log10(Σw² / Σ n_t·s_t²/12): the exhibit's formula per scale; "
                 f"tolerance {NETWORK_TOLERANCE_DB} dB plus {exact:.2f} dB for the exactly "
                 "rounded largest weight under each scale; judged from 3 bits without an "
                 "outlier (at 2 bits one level a side, and with the outlier most weights "
                 "rounding to zero, break the uniform-noise model)"),
        Row(f"weights rounded to zero ({label})", quantised.zero_fraction, None),
        Row("accuracy on fresh points, full", spirals.accuracy(full, fresh_x, fresh_y), None),
        Row(f"accuracy on fresh points, quantised ({label})",
            spirals.accuracy(quantised.net, fresh_x, fresh_y), None),
    ]
    before = _decision_map("full (32-bit weights)", full, options, x, y)
    after = _decision_map(f"quantised ({label}, biases full)", quantised.net, options, x, y)
    agree = float(np.mean(np.array(before.classes) == np.array(after.classes)))
    rows.append(Row("decision map points where both networks agree", agree, None))
    return Witness(
        rows=rows, figures=[before, after],
        parameters={"bits": bits, "granularity": granularity, "outlier": factor,
                    "points": options["points"], "steps": options["steps"], "seed": seed,
                    "hidden": spirals.HIDDEN, "weights": n, "scales": quantised.scales},
        notes=["The exhibit's table, full and quantised: accuracy, loss, weight bytes, SQNR "
               "measured and predicted. SQNR is an average over the signal: with the outlier "
               "the two large weights carry most of the power while the small ones round to "
               "zero, so watch the accuracy, not only the decibels."])


@hookimpl
def infermodel_register_witnesses(register):
    register("sqnr", sqnr_witness,
             description="seeded Gaussian weights quantised with symmetric round-to-nearest: "
                         "measured against predicted SQNR",
             reference=REFERENCE, options=OPTIONS)
    register("fewer_bits", fewer_bits_witness,
             description="the Inference lab's 2–16–2 ReLU network trained on two spirals, full "
                         "and quantised: accuracy, loss, weight bytes, SQNR measured and "
                         "predicted, decision boundaries",
             reference=spirals.REFERENCE, options=OPTIONS_FEWER_BITS)
