"""The real-decoder accuracy checks: a randomly initialised decoder of a scenario's
shape, measured on this machine (``infermodel validate SCENARIO``).

A small decoder (RMSNorm, grouped-query attention with rotary positions, a gated or
plain feed-forward block, an output head) is built in PyTorch from the scenario's
shape, scaled down by default (:func:`small_shape`); nothing is downloaded. It runs in
float32 and keeps its KV cache in the scenario's cache format when PyTorch has it
(2 bytes: bfloat16, 4 bytes: float32) for the cache and timing checks; the logit checks
use a float32 cache, as Module 10's labs do. The checks:

* **Cache bytes** (exact): the cache tensors after ``B`` sequences reach ``T``
  positions hold ``B · T · kv_bytes_per_token`` bytes.
* **Cached against uncached logits** (Module 10 Lab 2): greedy generation with the
  cache gives the same tokens as full recomputation, and the logits agree to float32
  rounding; an off-by-one rotary position is caught by the logits at or before the
  first step where the tokens change (often the tokens never change).
* **Batch invariance** (Module 10 Lab 6): one prompt gives the same tokens alone and
  in a batch of eight; the largest logit difference is set beside the smallest top-two
  gap of the solo run, which explains any change.
* **Step times**: prefill and decode steps at several batches and contexts beside the
  scenario's predictions with this machine's measured hardware preset (errors are
  reported, never judged: timings on a shared machine vary by several times).

PyTorch is an optional dependency (``pip install 'infermodel[validate]'``).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any

import attrs

__all__ = ["MachineModel", "RealModelReport", "RealModelUnavailable", "TinyDecoder",
           "check_decoder", "load_torch", "read_machine", "small_shape"]

#: Logit agreement expected between two float32 paths computing the same function.
LOGIT_TOLERANCE = 1e-3
LAB2 = "Module 10: Inference and serving, 'Correct positions and allocation strategy' (Lab 2)"
LAB6 = "Module 10: Inference and serving, reproducibility of greedy decoding (Lab 6)"


class RealModelUnavailable(Exception):
    """PyTorch is not installed (or the shape cannot be built)."""


def load_torch():
    """PyTorch, or :class:`RealModelUnavailable` saying how to install it."""
    try:
        import torch
    except ImportError:
        raise RealModelUnavailable("validate SCENARIO builds a real decoder and needs PyTorch, "
                                   "which is not installed") from None
    return torch


# ---------------------------------------------------------------------------------
# Shape
# ---------------------------------------------------------------------------------


@attrs.frozen
class Shape:
    layers: int
    d_model: int
    heads: int
    kv_heads: int
    head_dim: int
    d_ff: int
    vocab: int
    gated: bool
    tied: bool


def small_shape(shape: Shape, *, max_layers: int = 4, max_width: int = 256,
                max_vocab: int = 2048) -> Shape:
    """The scenario's shape scaled down: at most ``max_layers`` blocks, ``max_width``
    query width and ``max_vocab`` tokens, keeping the head width (up to 64), the
    query-to-KV head ratio, the feed-forward ratio and the block kind.

    >>> small_shape(Shape(80, 8192, 64, 8, 128, 28672, 128256, True, False))
    Shape(layers=4, d_model=256, heads=4, kv_heads=1, head_dim=64, d_ff=896, vocab=2048, gated=True, tied=False)
    """
    head_dim = min(shape.head_dim, 64)
    group = max(1, shape.heads // shape.kv_heads)
    heads = max(1, min(shape.heads, max_width // head_dim))
    kv_heads = max(1, heads // group)
    heads = kv_heads * min(group, max(heads, 1))
    d_model = heads * head_dim
    d_ff = max(8, round(d_model * shape.d_ff / shape.d_model / 8) * 8)
    return Shape(min(shape.layers, max_layers), d_model, heads, kv_heads, head_dim, d_ff,
                 min(shape.vocab, max_vocab), shape.gated, shape.tied)


def scenario_shape(scenario) -> Shape:
    value = scenario.value
    heads = value("model.heads")
    d_model = value("model.d_model")
    return Shape(layers=value("model.layers"), d_model=d_model, heads=heads,
                 kv_heads=value("model.kv_heads") or heads,
                 head_dim=value("model.head_dim") or d_model // heads,
                 d_ff=value("model.d_ff"), vocab=value("model.vocab"),
                 gated=value("model.ffn") == "swiglu", tied=bool(value("model.tied_embeddings")))


# ---------------------------------------------------------------------------------
# The decoder
# ---------------------------------------------------------------------------------


def TinyDecoder(shape: Shape, *, cache_dtype=None, seed: int = 0):
    """A randomly initialised decoder of ``shape`` (see the module docstring)."""
    torch = load_torch()
    nn = torch.nn

    class RMSNorm(nn.Module):  # type: ignore[name-defined]  # torch is imported lazily
        def __init__(self, width):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(width))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight

    class Block(nn.Module):  # type: ignore[name-defined]  # torch is imported lazily
        def __init__(self):
            super().__init__()
            s = shape
            self.attn_norm = RMSNorm(s.d_model)
            self.q = nn.Linear(s.d_model, s.heads * s.head_dim, bias=False)
            self.k = nn.Linear(s.d_model, s.kv_heads * s.head_dim, bias=False)
            self.v = nn.Linear(s.d_model, s.kv_heads * s.head_dim, bias=False)
            self.o = nn.Linear(s.heads * s.head_dim, s.d_model, bias=False)
            self.ffn_norm = RMSNorm(s.d_model)
            self.up = nn.Linear(s.d_model, s.d_ff, bias=False)
            self.gate = nn.Linear(s.d_model, s.d_ff, bias=False) if s.gated else None
            self.down = nn.Linear(s.d_ff, s.d_model, bias=False)

    class Decoder(nn.Module):  # type: ignore[name-defined]  # torch is imported lazily
        def __init__(self):
            super().__init__()
            self.shape = shape
            self.cache_dtype = cache_dtype or torch.float32
            self.embed = nn.Embedding(shape.vocab, shape.d_model)
            self.blocks = nn.ModuleList(Block() for _ in range(shape.layers))
            self.norm = RMSNorm(shape.d_model)
            self.head = None if shape.tied else nn.Linear(shape.d_model, shape.vocab, bias=False)
            generator = torch.Generator().manual_seed(seed)
            with torch.no_grad():
                for name, p in self.named_parameters():
                    if name.endswith("norm.weight"):
                        continue
                    fan_in = p.shape[-1]
                    p.copy_(torch.randn(p.shape, generator=generator) / math.sqrt(fan_in))

        def rotate(self, x, positions):
            half = shape.head_dim // 2
            freqs = 1.0 / (10000.0 ** (torch.arange(half, dtype=torch.float32) / half))
            angles = positions[:, None, :, None].float() * freqs  # [B, 1, S, half]
            cos, sin = angles.cos(), angles.sin()
            a, b = x[..., :half], x[..., half:2 * half]
            rotated = torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)
            return torch.cat([rotated, x[..., 2 * half:]], dim=-1)

        def forward(self, tokens, positions, cache=None, *, all_logits=False, valid=None,
                    depth=None):
            """Logits for ``tokens`` at ``positions`` ([B, S] each), attending to the
            ``cache`` (a list of per-layer (keys, values) or None); returns the logits
            and the cache extended by these positions. ``valid`` ([B, cached + S],
            bool) marks the real columns of left-padded rows: no query attends to a
            padding column but its own. ``depth`` runs the first ``depth`` blocks only
            (then the final norm and head): a smaller decoder sharing this one's weights.
            """
            s = shape
            batch, length = tokens.shape
            x = self.embed(tokens)
            new_cache = []
            for i, block in enumerate(self.blocks[:depth]):
                h = block.attn_norm(x)
                q = block.q(h).view(batch, length, s.heads, s.head_dim).transpose(1, 2)
                k = block.k(h).view(batch, length, s.kv_heads, s.head_dim).transpose(1, 2)
                v = block.v(h).view(batch, length, s.kv_heads, s.head_dim).transpose(1, 2)
                q, k = self.rotate(q, positions), self.rotate(k, positions)
                # The cache's storage format rounds keys and values on both paths alike.
                k, v = k.to(self.cache_dtype), v.to(self.cache_dtype)
                if cache is not None:
                    k = torch.cat([cache[i][0], k], dim=2)
                    v = torch.cat([cache[i][1], v], dim=2)
                new_cache.append((k, v))
                group = s.heads // s.kv_heads
                keys = k.float().repeat_interleave(group, dim=1)
                values = v.float().repeat_interleave(group, dim=1)
                scores = q @ keys.transpose(-1, -2) / math.sqrt(s.head_dim)
                scores = scores.masked_fill(hidden_keys(length, keys.shape[2], valid),
                                            float("-inf"))
                attended = (scores.softmax(-1) @ values).transpose(1, 2).reshape(batch, length, -1)
                x = x + block.o(attended)
                h = block.ffn_norm(x)
                inner = (torch.nn.functional.silu(block.gate(h)) * block.up(h) if s.gated
                         else torch.nn.functional.gelu(block.up(h)))
                x = x + block.down(inner)
            x = self.norm(x if all_logits else x[:, -1:])
            logits = x @ self.embed.weight.T if self.head is None else self.head(x)
            return logits, new_cache

    decoder = Decoder()
    decoder.train(False)  # inference behaviour (no dropout or norm updates to switch off)
    return decoder


def hidden_keys(length: int, total: int, valid=None):
    """The keys each of ``length`` new queries may not see among ``total`` (the cache's
    and its own): later positions, and with ``valid`` ([B, total] bool) the padding
    columns of left-padded rows, except a padding query's own column (so that its
    softmax stays finite).
    """
    torch = load_torch()
    query_index = torch.arange(length)[:, None] + (total - length)
    key_index = torch.arange(total)[None, :]
    hidden = key_index > query_index
    if valid is not None:
        hidden = hidden | (~valid[:, None, None, :] & (key_index != query_index))
    return hidden


def cache_bytes(cache) -> int:
    """Bytes the cache tensors hold (keys and values, every layer)."""
    return sum(t.numel() * t.element_size() for layer in cache for t in layer)


def generate(model, prompt, steps: int, *, position_offset: int = 0):
    """Greedy generation with the cache; returns tokens [B, steps], per-step logits
    [B, steps, V] and the cache. ``position_offset`` shifts decode positions (a bug).
    """
    torch = load_torch()
    batch, length = prompt.shape
    positions = torch.arange(length).expand(batch, length)
    logits, cache = model(prompt, positions)
    tokens, all_logits = [], []
    for step in range(steps):
        step_logits = logits[:, -1]
        all_logits.append(step_logits)
        token = step_logits.argmax(-1, keepdim=True)
        tokens.append(token)
        if step + 1 == steps:
            break
        position = torch.full((batch, 1), length + step + position_offset)
        logits, cache = model(token, position, cache)
    return torch.cat(tokens, 1), torch.stack(all_logits, 1), cache


# ---------------------------------------------------------------------------------
# The checks
# ---------------------------------------------------------------------------------


@attrs.frozen
class Check:
    name: str
    passed: bool
    detail: str
    reference: str
    values: dict = attrs.field(factory=dict)


@attrs.frozen
class Timing:
    phase: str
    batch: int
    tokens: int
    measured: float
    predicted: float

    @property
    def error(self) -> float:
        return (self.predicted - self.measured) / self.measured


@attrs.define
class RealModelReport:
    shape: Shape
    cache_format: str
    hardware: str
    checks: list[Check] = attrs.field(factory=list)
    timings: list[Timing] = attrs.field(factory=list)
    #: What the decoder does not reproduce of the scenario, and how much it matters.
    notes: list[str] = attrs.field(factory=list)
    #: The labs' measurement tables (:class:`~.labs.LabTable`), reported, not judged.
    tables: list = attrs.field(factory=list)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def text(self) -> str:
        s = self.shape
        lines = [f"random decoder: {s.layers} layers, d_model {s.d_model}, {s.heads} heads "
                 f"({s.kv_heads} KV), head_dim {s.head_dim}, d_ff {s.d_ff} "
                 f"({'gated' if s.gated else 'plain'}), vocab {s.vocab}; float32 compute, "
                 f"{self.cache_format} cache", ""]
        lines += [f"note: {note}" for note in self.notes]
        if self.notes:
            lines.append("")
        for c in self.checks:
            lines.append(f"[{'pass' if c.passed else 'FAIL'}] {c.name}: {c.detail}")
        if self.timings:
            lines += ["", f"step times against the predictions with {self.hardware} "
                          "(reported, not judged):",
                      f"{'phase':<8} {'batch':>5} {'tokens':>7} {'measured':>11} "
                      f"{'predicted':>11} {'error':>8}"]
            for t in self.timings:
                lines.append(f"{t.phase:<8} {t.batch:>5} {t.tokens:>7} {t.measured * 1e3:>8.3f} ms "
                             f"{t.predicted * 1e3:>8.3f} ms {t.error:>+8.0%}")
            errors = sorted(abs(t.error) for t in self.timings)
            lines.append(f"median |error| {statistics.median(errors):.0%}")
        for table in self.tables:
            lines += ["", table.text()]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"shape": attrs.asdict(self.shape), "cache_format": self.cache_format,
                "hardware": self.hardware, "passed": self.passed, "notes": list(self.notes),
                "checks": [attrs.asdict(c) for c in self.checks],
                "timings": [{**attrs.asdict(t), "error": t.error} for t in self.timings],
                "tables": [t.to_dict() for t in self.tables]}


def _max_diff(a, b) -> float:
    return float((a - b).abs().max())


def _first_difference(a, b) -> int | None:
    """The first step (column) where two token tensors differ, or None."""
    unequal = (a != b).any(0).nonzero()
    return int(unequal[0]) if len(unequal) else None


def check_cache_bytes(model, predicted_per_token: float, *, batch=2, prompt=24, steps=8) -> Check:
    torch = load_torch()
    generator = torch.Generator().manual_seed(1)
    tokens = torch.randint(model.shape.vocab, (batch, prompt), generator=generator)
    with torch.inference_mode():
        _, _, cache = generate(model, tokens, steps)
    positions = prompt + steps - 1  # the last generated token is not yet in the cache
    measured = cache_bytes(cache)
    expected = batch * positions * predicted_per_token
    return Check("cache bytes", measured == expected,
                 f"{measured:,} bytes for {batch} sequences × {positions} positions; "
                 f"kv_bytes_per_token predicts {expected:,.0f}",
                 "Module 10: Inference and serving, §3 'Derive capacity from a configuration'",
                 {"measured": measured, "predicted": expected})


def check_cached_logits(model, *, prompt=16, steps=24) -> list[Check]:
    torch = load_torch()
    generator = torch.Generator().manual_seed(2)
    tokens = torch.randint(model.shape.vocab, (1, prompt), generator=generator)
    with torch.inference_mode():
        cached_tokens, cached_logits, _ = generate(model, tokens, steps)
        full = torch.cat([tokens, cached_tokens[:, :-1]], 1)
        positions = torch.arange(full.shape[1])[None]
        uncached, _ = model(full, positions, all_logits=True)
        uncached_logits = uncached[:, prompt - 1:]
        uncached_tokens = uncached_logits.argmax(-1)
        shifted_tokens, shifted_logits, _ = generate(model, tokens, steps, position_offset=1)
    diff = _max_diff(cached_logits, uncached_logits)
    same = bool((cached_tokens == uncached_tokens).all())
    agree = Check("cached vs uncached logits", same and diff < LOGIT_TOLERANCE,
                  f"{steps} greedy tokens {'equal' if same else 'DIFFER'}; max logit difference "
                  f"{diff:.3g} (tolerance {LOGIT_TOLERANCE:g})", LAB2,
                  {"tokens_equal": same, "max_logit_difference": diff})
    per_step = (shifted_logits - cached_logits).abs().amax(dim=(0, 2))
    first_logit = next((i for i, d in enumerate(per_step.tolist()) if d > LOGIT_TOLERANCE), None)
    first_token = _first_difference(shifted_tokens, cached_tokens)
    caught = first_logit is not None and (first_token is None or first_logit <= first_token)
    token_text = ("the tokens never changed" if first_token is None
                  else f"the first token changed at step {first_token}")
    off_by_one = Check(
        "off-by-one position caught by logits", caught,
        f"decode positions shifted by one: logits differ by {float(per_step.max()):.3g} from "
        f"step {first_logit}; {token_text}", LAB2,
        {"first_logit_step": first_logit, "first_token_step": first_token,
         "max_logit_difference": float(per_step.max())})
    return [agree, off_by_one]


def check_batch_invariance(model, *, prompt=16, steps=32, batch=8) -> Check:
    torch = load_torch()
    generator = torch.Generator().manual_seed(3)
    prompts = torch.randint(model.shape.vocab, (batch, prompt), generator=generator)
    with torch.inference_mode():
        solo_tokens, solo_logits, _ = generate(model, prompts[:1], steps)
        batch_tokens, batch_logits, _ = generate(model, prompts, steps)
    top = solo_logits[0].topk(2, dim=-1).values
    gaps = top[:, 0] - top[:, 1]
    smallest = float(gaps.min())
    at = int(gaps.argmin())
    same = bool((solo_tokens[0] == batch_tokens[0]).all())
    # Logits are compared while the two runs condition on the same tokens.
    diverged = _first_difference(solo_tokens, batch_tokens[:1])
    upto = steps if diverged is None else diverged + 1
    diff = _max_diff(solo_logits[0, :upto], batch_logits[0, :upto])
    explained = same or smallest <= diff
    detail = (f"prompt alone and in a batch of {batch}: {steps} tokens "
              f"{'equal' if same else f'differ from step {diverged}'}; max logit difference "
              f"{diff:.3g}; smallest solo top-two gap {smallest:.3g} at step {at}")
    return Check("batch invariance", explained, detail, LAB6,
                 {"tokens_equal": same, "max_logit_difference": diff,
                  "smallest_top_two_gap": smallest, "gap_step": at})


def _median_time(call, repeats: int) -> float:
    call()
    call()  # PyTorch selects and caches kernels over the first calls of a shape
    times = []
    for _ in range(repeats):
        begin = time.perf_counter()
        call()
        times.append(time.perf_counter() - begin)
    return statistics.median(times)


def measure_times(model, predict, *, quick: bool) -> list[Timing]:
    """Prefill and decode step times beside ``predict(phase, batch, tokens)``."""
    torch = load_torch()
    repeats = 3 if quick else 5
    prefill_points = [(1, 64), (4, 64)] if quick else [(1, 64), (1, 256), (4, 64), (4, 256)]
    decode_points = [(1, 64), (8, 256)] if quick else [(1, 64), (1, 512), (8, 64), (8, 512),
                                                      (32, 512)]
    s = model.shape
    timings = []
    generator = torch.Generator().manual_seed(4)
    with torch.inference_mode():
        for batch, length in prefill_points:
            tokens = torch.randint(s.vocab, (batch, length), generator=generator)
            positions = torch.arange(length).expand(batch, length)
            seconds = _median_time(lambda t=tokens, p=positions: model(t, p), repeats)
            timings.append(Timing("prefill", batch, length, seconds,
                                  predict("prefill", batch, length)))
        for batch, context in decode_points:
            cache = [(torch.randn(batch, s.kv_heads, context, s.head_dim, generator=generator)
                      .to(model.cache_dtype),
                      torch.randn(batch, s.kv_heads, context, s.head_dim, generator=generator)
                      .to(model.cache_dtype)) for _ in range(s.layers)]
            token = torch.randint(s.vocab, (batch, 1), generator=generator)
            position = torch.full((batch, 1), context)
            seconds = _median_time(lambda c=cache, t=token, p=position: model(t, p, c), repeats)
            timings.append(Timing("decode", batch, context, seconds,
                                  predict("decode", batch, context)))
    return timings


# ---------------------------------------------------------------------------------
# The command's entry point
# ---------------------------------------------------------------------------------


@attrs.frozen
class MachineModel:
    """The hardware the time predictions use: ``[hardware]`` overrides, the measured
    per-call ``t0`` (seconds) and a name for reports.
    """

    overrides: dict
    t0: float
    name: str


def check_decoder(scenario, machine: MachineModel, *, calibrated: bool = False,
                  quick: bool = False, full_size: bool = False,
                  experiments: Callable[..., tuple[list, list]] | None = None) -> RealModelReport:
    """Build the decoder of ``scenario``'s shape and run every check and timing, and
    ``experiments(model, predict, scenario, kv_bytes_per_token)`` — Module 10's labs
    (:func:`.labs.run_labs` with the labs asked for) — whose checks and tables join the
    report.

    Time predictions use ``machine`` (:func:`read_machine` reads a preset file from
    ``infermodel calibrate``; the command measures one when none is given); with
    ``calibrated`` its measured per-call ``t0`` is the efficiency ``t0``.
    """
    torch = load_torch()
    from ..engine.evaluation import evaluate_afresh

    shape = scenario_shape(scenario)
    if not full_size:
        shape = small_shape(shape)
    else:
        _check_size(scenario, shape)
    # The small model's own scenario: same levers, the small shape, float32 weights.
    overrides: dict[str, Any] = {
        "model.layers": shape.layers, "model.d_model": shape.d_model, "model.heads": shape.heads,
        "model.kv_heads": shape.kv_heads, "model.head_dim": shape.head_dim,
        "model.d_ff": shape.d_ff, "model.vocab": shape.vocab,
        "model.experts": 1, "model.active_experts": 1, "model.shared_experts": 0,
    }
    small = scenario.with_overrides(overrides)
    result = evaluate_afresh(small)
    kv_value_bytes = float(result["kv_value_bytes"])
    formats = {2.0: (torch.bfloat16, "bfloat16"), 4.0: (torch.float32, "float32")}
    if kv_value_bytes not in formats:
        raise RealModelUnavailable(
            f"the scenario's KV cache holds {kv_value_bytes:g} bytes per value; the real "
            "decoder stores 2 (bfloat16) or 4 (float32)")
    cache_dtype, cache_name = formats[kv_value_bytes]
    model = TinyDecoder(shape, cache_dtype=cache_dtype)
    hardware, t0 = machine.overrides, machine.t0
    report = RealModelReport(shape, cache_name, machine.name)
    full = scenario_shape(scenario)
    if not full_size and full != shape:
        report.notes.append(
            f"the decoder is the scenario's shape scaled down ({full.layers} → {shape.layers} "
            f"blocks, query width {full.heads * full.head_dim} → {shape.heads * shape.head_dim}, "
            f"vocabulary {full.vocab:,} → {shape.vocab:,}); every prediction it is compared "
            "with is for the scaled-down shape")
    experts = scenario.value("model.experts")
    if experts > 1:
        report.notes.append(
            f"the scenario's {experts} experts ({scenario.value('model.active_experts')} active) "
            "are not built: the decoder's feed-forward block is dense, so expert routing and "
            "the weight traffic it saves are not measured")
    report.checks.append(check_cache_bytes(model, float(result["kv_bytes_per_token"])))
    # The logit checks run entirely in float32, as Module 10's Labs 2 and 6 do: a 16-bit
    # cache rounds keys computed in differently shaped products to different neighbours
    # now and then, which is storage noise, not a cache bug. (The same weights: a
    # shallow copy shares the modules, so a full-size decoder is held once.)
    import copy

    exact = copy.copy(model)
    exact.cache_dtype = torch.float32
    report.checks.extend(check_cached_logits(exact))
    report.checks.append(check_batch_invariance(exact))

    timing_overrides = {**hardware, "hardware.count": 1,
                        "efficiency.prefill_mfu": 1.0, "efficiency.decode_mfu": 1.0,
                        "efficiency.mbu": 1.0,
                        "efficiency.t0": f"{t0 * 1e6 if calibrated else 0:g} us",
                        **_float32_weights(small, cache_name)}
    timed = small.with_overrides(timing_overrides)

    def predict(phase: str, batch: int, tokens: int) -> float:
        if phase == "prefill":
            r = evaluate_afresh(timed, {"workload.batch": batch, "workload.prompt_tokens": tokens})
            return float(r["prefill_time"])
        r = evaluate_afresh(timed, {"workload.batch": batch, "workload.context": float(tokens),
                             "workload.prompt_tokens": tokens,
                             "workload.sequence_length": tokens + 1})
        return float(r["decode_step_time"])

    report.timings.extend(measure_times(model, predict, quick=quick))
    if experiments is not None:
        checks, tables = experiments(exact, predict, small,
                                     float(result["kv_bytes_per_token"]) * 4 / kv_value_bytes)
        report.checks.extend(checks)
        report.tables.extend(tables)
    return report


#: The largest full-size decoder built (float32 weights, bytes): a random decoder's
#: checks and timings need no more, and a 70B shape would need 280 GB.
MAX_FULL_SIZE_BYTES = 2_500_000_000


def _check_size(scenario, shape: Shape) -> None:
    """Refuse, before allocating, a full-size decoder over :data:`MAX_FULL_SIZE_BYTES`."""
    from ..errors import InfermodelError, Problem

    s = shape
    block = (s.d_model * (s.heads + 2 * s.kv_heads) * s.head_dim + s.heads * s.head_dim * s.d_model
             + (3 if s.gated else 2) * s.d_model * s.d_ff + 2 * s.d_model)
    params = s.layers * block + s.vocab * s.d_model * (1 if s.tied else 2) + s.d_model
    if 4 * params > MAX_FULL_SIZE_BYTES:
        raise InfermodelError(Problem(
            f"the full-size decoder of {scenario.name} has {params:,} parameters, "
            f"{4 * params / 1e9:.3g} GB in float32, over the {MAX_FULL_SIZE_BYTES / 1e9:g} GB "
            "a random decoder is built with", file=str(scenario.path) if scenario.path else None,
            expected=f"a model of at most {MAX_FULL_SIZE_BYTES // 4 / 1e6:,.0f} M parameters "
                     "with --full-size",
            suggestion="leave out --full-size: the decoder is then the shape scaled down"))


def _float32_weights(scenario, cache_name: str) -> dict[str, Any]:
    """Overrides that store the weights as the decoder does (float32) and the cache in
    its format, through whichever format lever the scenario already uses.
    """
    if scenario.lever("quantization") is not None:
        return {"levers.quantization.linear": "fp32", "levers.quantization.embedding": "fp32",
                "levers.quantization.norm": "fp32",
                "levers.quantization.kv_cache": "bf16" if cache_name == "bfloat16" else "fp32"}
    return {"levers.number_formats.weight_bits_linear": 32,
            "levers.number_formats.weight_bits_embedding": 32,
            "levers.number_formats.weight_bits_norm": 32,
            "levers.number_formats.kv_bits": 16 if cache_name == "bfloat16" else 32}


def read_machine(preset_path: str) -> MachineModel:
    """The machine model in a hardware preset file (as ``infermodel calibrate -o`` writes)."""
    from pathlib import Path

    from ..errors import InfermodelError, Problem
    from ..scenario import read_toml
    from ..units import parse_quantity

    data, _ = read_toml(Path(preset_path))
    table = data.get("hardware")
    if not isinstance(table, dict) or not {"memory", "bandwidth", "flops"} <= set(table):
        raise InfermodelError(Problem("not a hardware preset", file=str(preset_path),
                                      expected="a [hardware] table with memory, bandwidth and "
                                               "flops (as `infermodel calibrate -o` writes)"))
    t0_text = data.get("preset", {}).get("t0", "0 s")
    try:
        t0 = float(parse_quantity(t0_text, "s"))
    except Exception:
        raise InfermodelError(Problem(f"[preset] t0 = {t0_text!r}", file=str(preset_path),
                                      expected="a time such as \"12 us\"")) from None
    return MachineModel({f"hardware.{k}": table[k] for k in ("memory", "bandwidth", "flops")},
                        t0, str(preset_path))
