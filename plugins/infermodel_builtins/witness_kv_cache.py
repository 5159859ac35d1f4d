"""Witness ``kv_cache``: a tiny attention decoder, with and without a KV cache.

One attention layer of width d (one head), a vocabulary of V tokens and seeded
Gaussian weights generate N tokens greedily, twice: once keeping every key and value
in a cache, once recomputing them from all earlier positions at every step. The
witness checks that both runs emit the same tokens and the same logits (the cache
changes the cost, not the result), and counts the multiply-adds of every matrix
product from the shapes of the arrays actually multiplied. The counts must equal the
closed forms exactly (Inference lab, "Memory that grows with every token"):

* step t (from 0) with the cache: 4d² + 2d(t+1) + dV; without: 2d² + 2d²(t+1) + 2d(t+1) + dV;
* over N steps with the cache: N(4d² + dV) + dN(N+1); without: N(2d² + dV) + (d² + d)N(N+1).

Softmax, the 1/√d scaling, the position embedding and the residual addition are not
multiply-adds of a matrix product and are not counted, as in the source.

Sizes: ``d``, ``vocab`` and ``steps`` options (defaults 16, 32, 12). With ``scale = s``
and no ``d``/``vocab`` given, the decoder takes the scenario's own width and vocabulary
divided by s (``d_model // s``, ``vocab // s``): the Module 10 case model (d 4,096,
vocab 152,064) at ``scale = 256`` is a decoder of width 16 over 594 tokens. The closed
forms at the scenario's full d_model, vocab and output_tokens are reported beside them,
for scale (one layer, one full-width head: not the scenario's FLOPs).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from infermodel.plugin import InfermodelError, Option, Problem, hookimpl

if TYPE_CHECKING:  # annotations only: the witness records load when a witness runs
    from infermodel.plugin import Witness

from . import LAB

REFERENCE = f"{LAB}, 'Memory that grows with every token'"
DEFAULT_D = 16
DEFAULT_VOCAB = 32
MAX_D = 1024
MAX_VOCAB = 65536
MAX_STEPS = 512
#: Largest |logit difference| between the runs, relative to the largest |logit|.
LOGIT_TOLERANCE = 1e-9


# ---------------------------------------------------------------------------------
# Closed forms
# ---------------------------------------------------------------------------------


def step_cached(d: int, vocab: int, t: int) -> int:
    """Multiply-adds of step t with the cache: 4d² + 2d(t+1) + dV.

    >>> step_cached(16, 32, 0)
    1568
    """
    return 4 * d * d + 2 * d * (t + 1) + d * vocab


def step_uncached(d: int, vocab: int, t: int) -> int:
    """Multiply-adds of step t without the cache: 2d² + 2d²(t+1) + 2d(t+1) + dV."""
    return 2 * d * d + 2 * d * d * (t + 1) + 2 * d * (t + 1) + d * vocab


def total_cached(d: int, vocab: int, steps: int) -> int:
    """Over N steps with the cache: N(4d² + dV) + dN(N+1).

    >>> total_cached(16, 32, 12) == sum(step_cached(16, 32, t) for t in range(12))
    True
    """
    n = steps
    return n * (4 * d * d + d * vocab) + d * n * (n + 1)


def total_uncached(d: int, vocab: int, steps: int) -> int:
    """Over N steps without the cache: N(2d² + dV) + (d² + d)N(N+1)."""
    n = steps
    return n * (2 * d * d + d * vocab) + (d * d + d) * n * (n + 1)


# ---------------------------------------------------------------------------------
# The decoder
# ---------------------------------------------------------------------------------


class MacCounter:
    """Matrix products that count their multiply-adds from the operands' shapes."""

    def __init__(self) -> None:
        self.total = 0

    def matmul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        rows = a.shape[0] if a.ndim == 2 else 1
        inner = a.shape[-1]
        if b.shape[0] != inner:
            raise ValueError(f"shapes {a.shape} and {b.shape} do not multiply")
        columns = b.shape[1] if b.ndim == 2 else 1
        self.total += rows * inner * columns
        return a @ b


def decoder_weights(d: int, vocab: int, steps: int, seed: int) -> dict[str, np.ndarray]:
    """Seeded Gaussian weights of a one-layer, one-head decoder.

    Matrices have variance 1/d; the position embedding (×4) and the attention output
    (×2) are made larger than the token embedding so that the next token depends on
    the position and on the history, not only on the last token (a decoder driven by
    its last token alone falls into a short cycle and would test little).
    """
    rng = np.random.default_rng(seed)

    def gaussian(*shape):
        return rng.standard_normal(shape) / math.sqrt(d)

    return {"embed": rng.standard_normal((vocab, d)), "position": 4 * gaussian(steps, d),
            "query": gaussian(d, d), "key": gaussian(d, d), "value": gaussian(d, d),
            "output": 2 * gaussian(d, d), "unembed": gaussian(d, vocab)}


def _attend(q: np.ndarray, keys: np.ndarray, values: np.ndarray, mac: MacCounter) -> np.ndarray:
    scores = mac.matmul(keys, q) / math.sqrt(q.shape[0])      # (t+1)·d
    weights = np.exp(scores - scores.max())
    weights /= weights.sum()
    return mac.matmul(weights, values)                        # (t+1)·d


def generate(weights: dict[str, np.ndarray], steps: int, *, cached: bool, start: int = 0):
    """Greedy generation of ``steps`` tokens; returns (tokens, logits per step,
    multiply-adds per step).
    """
    w = weights
    mac = MacCounter()
    token = start
    inputs: list[np.ndarray] = []       # x of every position so far (the uncached run's state)
    keys: list[np.ndarray] = []         # the cache
    values: list[np.ndarray] = []
    tokens, logits, counts = [], [], []
    for t in range(steps):
        before = mac.total
        x = w["embed"][token] + w["position"][t]
        inputs.append(x)
        q = mac.matmul(x, w["query"])                                    # d²
        if cached:
            keys.append(mac.matmul(x, w["key"]))                         # d²
            values.append(mac.matmul(x, w["value"]))                     # d²
            k_all, v_all = np.stack(keys), np.stack(values)
        else:
            xs = np.stack(inputs)
            k_all = mac.matmul(xs, w["key"])                             # (t+1)·d²
            v_all = mac.matmul(xs, w["value"])                           # (t+1)·d²
        h = x + mac.matmul(_attend(q, k_all, v_all, mac), w["output"])   # d²
        out = mac.matmul(h, w["unembed"])                                # d·V
        token = int(np.argmax(out))
        tokens.append(token)
        logits.append(out)
        counts.append(mac.total - before)
    return tokens, np.stack(logits), counts


# ---------------------------------------------------------------------------------
# The witness
# ---------------------------------------------------------------------------------


OPTIONS = {
    "d": Option(None, f"width of the decoder (default {DEFAULT_D}, or d_model // scale)",
                kind=int, minimum=1, maximum=MAX_D),
    "vocab": Option(None, f"vocabulary size (default {DEFAULT_VOCAB}, or vocab // scale)",
                    kind=int, minimum=2, maximum=MAX_VOCAB),
    "steps": Option(12, "tokens generated, N", minimum=1, maximum=MAX_STEPS),
    "scale": Option(None, "take d and vocab from the scenario's model divided by this",
                    kind=int, minimum=1),
    "seed": Option(0, "seed of the weights", minimum=0),
}


def _scenario_value(scenario, path):
    if scenario is None:
        return None
    try:
        return scenario.value(path)
    except (AttributeError, KeyError):
        return None


def _sizes(scenario, options) -> tuple[int, int]:
    d, vocab, scale = options["d"], options["vocab"], options["scale"]
    if scale is not None and (d is None or vocab is None):
        d_model, scenario_vocab = (_scenario_value(scenario, "model.d_model"),
                                   _scenario_value(scenario, "model.vocab"))
        if d_model is None or scenario_vocab is None:
            raise InfermodelError(Problem("scale needs a scenario with model.d_model and "
                                          "model.vocab", key="--option scale",
                                          suggestion="give d and vocab instead"))
        d = d if d is not None else max(1, int(d_model) // scale)
        vocab = vocab if vocab is not None else max(2, int(scenario_vocab) // scale)
        if d > MAX_D or vocab > MAX_VOCAB:
            raise InfermodelError(Problem(
                f"scale = {scale} gives d = {d} and vocab = {vocab}, larger than this witness "
                "runs", key="--option scale",
                expected=f"d <= {MAX_D} and vocab <= {MAX_VOCAB}", suggestion="use a larger scale"))
    return (d if d is not None else DEFAULT_D), (vocab if vocab is not None else DEFAULT_VOCAB)


def kv_cache_witness(scenario, options) -> Witness:
    """Run the decoder both ways and compare the counts with the closed forms.

    >>> kv_cache_witness(None, {**{k: o.default for k, o in OPTIONS.items()}}).passed
    True
    """
    from infermodel.plugin import Row, Witness  # the analyses, loaded when a witness runs

    d, vocab = _sizes(scenario, options)
    steps, seed = options["steps"], options["seed"]
    weights = decoder_weights(d, vocab, steps, seed)
    tokens_c, logits_c, counts_c = generate(weights, steps, cached=True)
    tokens_u, logits_u, counts_u = generate(weights, steps, cached=False)
    scale = float(np.max(np.abs(logits_u))) or 1.0
    logit_gap = float(np.max(np.abs(logits_c - logits_u))) / scale
    same = sum(a == b for a, b in zip(tokens_c, tokens_u))
    step_c = [step_cached(d, vocab, t) for t in range(steps)]
    step_u = [step_uncached(d, vocab, t) for t in range(steps)]
    last = steps - 1
    rows = [
        Row("tokens identical with and without the cache", same, steps, "token", tolerance=0),
        Row("largest logit difference (relative)", logit_gap, 0.0, tolerance=LOGIT_TOLERANCE),
        Row(f"multiply-adds with the cache, {steps} steps", sum(counts_c),
            total_cached(d, vocab, steps), tolerance=0, note="N(4d² + dV) + dN(N+1)"),
        Row(f"multiply-adds without the cache, {steps} steps", sum(counts_u),
            total_uncached(d, vocab, steps), tolerance=0,
            note="N(2d² + dV) + (d² + d)N(N+1)"),
        Row("steps matching 4d² + 2d(t+1) + dV (cache)",
            sum(a == b for a, b in zip(counts_c, step_c)), steps, tolerance=0),
        Row("steps matching 2d² + 2d²(t+1) + 2d(t+1) + dV (no cache)",
            sum(a == b for a, b in zip(counts_u, step_u)), steps, tolerance=0),
        Row(f"multiply-adds of the last step (t = {last}), cache", counts_c[-1], step_c[-1],
            tolerance=0),
        Row(f"multiply-adds of the last step (t = {last}), no cache", counts_u[-1], step_u[-1],
            tolerance=0),
        Row("work without the cache over work with it", sum(counts_u) / sum(counts_c),
            total_uncached(d, vocab, steps) / total_cached(d, vocab, steps)),
    ]
    notes = []
    d_model, scenario_vocab, output_tokens = (
        _scenario_value(scenario, path)
        for path in ("model.d_model", "model.vocab", "workload.output_tokens"))
    if None not in (d_model, scenario_vocab, output_tokens):
        big_d, big_v, big_n = int(d_model), int(scenario_vocab), int(output_tokens)
        with_cache, without = (total_cached(big_d, big_v, big_n),
                               total_uncached(big_d, big_v, big_n))
        rows += [
            Row(f"closed form with the cache at d = {big_d:,}, V = {big_v:,}, N = {big_n:,}",
                None, with_cache),
            Row("closed form without the cache, same sizes", None, without),
            Row("work without the cache over work with it, same sizes", None,
                without / with_cache),
        ]
        notes.append("The last three rows apply the formulas to the scenario's d_model, vocab "
                     "and output_tokens for scale: one layer with one full-width head, not the "
                     "scenario's FLOPs.")
    notes.append("Softmax, the 1/√d scaling, the position embedding and the residual addition "
                 "are not counted, as in the source.")
    return Witness(rows=rows, parameters={"d": d, "vocab": vocab, "steps": steps, "seed": seed,
                                          "tokens": " ".join(map(str, tokens_c))}, notes=notes)


@hookimpl
def infermodel_register_witnesses(register):
    register("kv_cache", kv_cache_witness,
             description="a tiny seeded attention decoder with and without a KV cache: same "
                         "tokens, and multiply-adds counted against the closed forms",
             reference=REFERENCE, options=OPTIONS)
