"""Module 10's labs on a real decoder: the experiments of Labs 2, 5 and 6, run on the
random decoder of a scenario's shape (:mod:`.decoder`); nothing is downloaded.

* **Lab 2** ("Correct positions and allocation strategy"): decode positions frozen at
  the prompt's length, and a reused prefix whose suffix restarts at position 0, each
  caught by the logits at or before the first token it changes; left-padded rows of
  different lengths, positions read from the mask, giving each row's tokens alone (and
  positions read from the column, a bug, caught); the cache's bytes after a
  generation; cached against recomputed generation timed at growing lengths; a reused
  prefix cold against warm.
* **Lab 5** (speculative decoding): the draft's cost ``c`` and the verification cost
  ``v_γ`` measured on two decoders of different sizes (the draft is the target's first
  blocks, a layer-skipping draft that shares its weights, so that it agrees with the
  target often enough to exercise the rollback); greedy speculative decoding with both
  caches cropped back to the committed boundary after every verification, its output
  equal to the target's own greedy output; an n-gram (prompt-lookup) draft in the same
  loop.
* **Lab 6** (batching): left-padded batches of 1 to 16 prompts of the lab's lengths:
  TTFT, the median decode step, per-sequence and aggregate tokens/s beside the
  scenario's roofline on this machine, and a prompt alone against the same prompt in a
  padded batch of eight.

Correctness is judged (each :class:`~.decoder.Check` passes or fails); every time is
reported in a :class:`LabTable`, never judged: a shared machine's timings vary by
several times.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from .decoder import LOGIT_TOLERANCE, Check, cache_bytes, generate, load_torch

M10 = "Module 10: Inference and serving"
LAB2 = f"{M10}, 'Correct positions and allocation strategy' (Lab 2)"
LAB2_PREFIX = f"{M10}, 'Reuse a stable prefix' (Lab 2, a real model's prefix)"
LAB5 = f"{M10}, 'Verify a chain, then roll back the uncommitted states' (Lab 5)"
LAB5_NGRAM = f"{M10}, 'Other proposals and smaller models' (prompt lookup; Lab 5, try next)"
LAB6 = f"{M10}, Lab 6 'Left-pad prompts and supply the correct positions'"
#: The tokenised lengths of Lab 6's sixteen prompts, in order (the lab prints them).
LAB6_LENGTHS = (12, 19, 14, 13, 12, 16, 12, 19, 9, 14, 9, 11, 9, 9, 15, 16)
#: Draft lengths Lab 5 measures.
GAMMAS = (2, 4, 6)


@attrs.frozen
class LabTable:
    """One table of a lab's measurements: ``columns`` and ``rows`` as the lab prints
    them, with what they are (``title``), where the lab is (``reference``) and notes.
    """

    title: str
    reference: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    notes: tuple[str, ...] = ()

    def text(self) -> str:
        cells = [[_cell(v) for v in row] for row in self.rows]
        widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(self.columns)]
        lines = [f"{self.title} ({self.reference}):",
                 "  " + "  ".join(c.rjust(w) for c, w in zip(self.columns, widths))]
        lines += ["  " + "  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in cells]
        lines += [f"  {note}" for note in self.notes]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"title": self.title, "reference": self.reference, "columns": list(self.columns),
                "rows": [list(r) for r in self.rows], "notes": list(self.notes)}


def _cell(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return {True: "yes", False: "no", None: "-"}[value]
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    return str(value)


def _median_time(call: Callable[[], Any], repeats: int) -> float:
    call()  # the first call of a shape selects and caches kernels
    times = []
    for _ in range(repeats):
        begin = time.perf_counter()
        call()
        times.append(time.perf_counter() - begin)
    return statistics.median(times)


def _random_tokens(vocab: int, shape: tuple[int, ...], seed: int):
    torch = load_torch()
    return torch.randint(vocab, shape, generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------------------------
# Generation with a chosen decode position, and with recomputation
# ---------------------------------------------------------------------------------


def generate_at(model, prompt, steps: int, position: Callable[[int, int], int]):
    """Greedy generation with the cache, the decode step ``i`` of a prompt of
    ``length`` tokens placed at ``position(length, i)`` (``length + i`` is right);
    returns tokens [B, steps] and per-step logits [B, steps, V].
    """
    torch = load_torch()
    batch, length = prompt.shape
    logits, cache = model(prompt, torch.arange(length).expand(batch, length))
    tokens, kept = [], []
    for step in range(steps):
        last = logits[:, -1]
        kept.append(last)
        tokens.append(last.argmax(-1, keepdim=True))
        if step + 1 < steps:
            where = torch.full((batch, 1), position(length, step))
            logits, cache = model(tokens[-1], where, cache)
    return torch.cat(tokens, 1), torch.stack(kept, 1)


def recompute(model, prompt, steps: int):
    """Greedy generation without a cache: every step runs the whole sequence again."""
    torch = load_torch()
    ids = prompt
    for _ in range(steps):
        logits, _ = model(ids, torch.arange(ids.shape[1]).expand(ids.shape[0], ids.shape[1]))
        ids = torch.cat([ids, logits[:, -1].argmax(-1, keepdim=True)], 1)
    return ids[:, prompt.shape[1]:]


def _caught(bad_logits, good_logits, bad_tokens, good_tokens) -> tuple[int | None, int | None]:
    """(first step whose logits differ beyond the tolerance, first step whose token does)."""
    per_step = (bad_logits - good_logits).abs().amax(dim=(0, 2)).tolist()
    first_logit = next((i for i, d in enumerate(per_step) if d > LOGIT_TOLERANCE), None)
    unequal = (bad_tokens != good_tokens).any(0).nonzero()
    first_token = int(unequal[0]) if len(unequal) else None
    return first_logit, first_token


# ---------------------------------------------------------------------------------
# Lab 2
# ---------------------------------------------------------------------------------


def lab2_frozen_position(model, *, prompt: int = 16, steps: int = 32) -> Check:
    """Decode positions frozen at the prompt's length: caught by the logits at or
    before the first token it changes (Lab 2's frozen position changed a token at
    output position 9).
    """
    tokens = _random_tokens(model.shape.vocab, (1, prompt), 11)
    good_tokens, good = generate_at(model, tokens, steps, lambda n, i: n + i)
    bad_tokens, bad = generate_at(model, tokens, steps, lambda n, i: n)
    first_logit, first_token = _caught(bad, good, bad_tokens, good_tokens)
    caught = first_logit is not None and (first_token is None or first_logit <= first_token)
    changed = ("the tokens never changed" if first_token is None
               else f"the first token changed at output {first_token}")
    return Check("frozen position caught by logits", caught,
                 f"every decode step at position {prompt}: logits differ from step "
                 f"{first_logit}; {changed}", LAB2,
                 {"first_logit_step": first_logit, "first_token_step": first_token})


def lab2_prefix(model, *, prefix: int = 96, suffixes: Sequence[int] = (10, 8, 11),
                repeats: int = 3) -> tuple[Check, LabTable]:
    """A prefix's cache reused: the suffix at positions after the prefix gives the
    cold logits (to float32 rounding); the suffix restarted at position 0 (an offset
    bug after reuse) is caught by the logits. Cold and warm times are reported. (This
    decoder's cache is never changed in place — a step returns a new one — so each
    branch reads the prefix's as it is; a mutable cache must be copied first.)
    """
    torch = load_torch()
    shared = _random_tokens(model.shape.vocab, (1, prefix), 12)
    _, prefix_cache = model(shared, torch.arange(prefix)[None])
    rows, worst, offset_seen = [], 0.0, []
    for k, length in enumerate(suffixes):
        suffix = _random_tokens(model.shape.vocab, (1, length), 20 + k)
        full = torch.cat([shared, suffix], 1)
        cold_logits, _ = model(full, torch.arange(full.shape[1])[None])
        warm_logits, _ = model(suffix, torch.arange(prefix, prefix + length)[None],
                               list(prefix_cache))
        offset_logits, _ = model(suffix, torch.arange(length)[None], list(prefix_cache))
        error = float((cold_logits[:, -1] - warm_logits[:, -1]).abs().max())
        worst = max(worst, error)
        offset_seen.append(float((cold_logits[:, -1] - offset_logits[:, -1]).abs().max()))
        def cold_forward(f: Any = full) -> Any:
            return model(f, torch.arange(f.shape[1])[None])

        def warm_forward(s: Any = suffix, n: int = length) -> Any:
            return model(s, torch.arange(prefix, prefix + n)[None], list(prefix_cache))

        cold = _median_time(cold_forward, repeats)
        warm = _median_time(warm_forward, repeats)
        rows.append((length, cold * 1e3, warm * 1e3, cold / warm, error))
    passed = worst < LOGIT_TOLERANCE and min(offset_seen) > LOGIT_TOLERANCE
    check = Check("reused prefix: warm equals cold, an offset is caught", passed,
                  f"{prefix}-token prefix, {len(suffixes)} suffixes: warm last-position logits "
                  f"within {worst:.3g} of cold (tolerance {LOGIT_TOLERANCE:g}); the suffix "
                  f"restarted at position 0 differs by at least {min(offset_seen):.3g}",
                  LAB2_PREFIX, {"max_logit_error": worst, "offset_min_difference": min(offset_seen)})
    table = LabTable("Lab 2: a reused prefix, cold and warm", LAB2_PREFIX,
                     ("suffix", "cold ms", "warm ms", "cold/warm", "max logit error"), tuple(rows),
                     (f"prefix of {prefix} tokens computed once; each warm forward reads a copy "
                      "of its cache (times reported, not judged; one thread)",))
    return check, table


def _left_pad(lengths: Sequence[int], vocab: int, seed: int):
    """Rows of random tokens of ``lengths``, left-padded with token 0: (ids, valid)."""
    torch = load_torch()
    width = max(lengths)
    ids = torch.zeros((len(lengths), width), dtype=torch.long)
    valid = torch.zeros((len(lengths), width), dtype=torch.bool)
    for row, length in enumerate(lengths):
        ids[row, width - length:] = _random_tokens(vocab, (length,), seed + row)
        valid[row, width - length:] = True
    return ids, valid


def padded_generate(model, ids, valid, steps: int, *, mask_positions: bool = True):
    """Greedy generation of left-padded rows: positions from the mask (each row's real
    tokens at 0, 1, …), or from the column (``mask_positions=False``, the bug). Returns
    tokens [B, steps], per-step logits, the prefill time and each decode step's time.
    """
    torch = load_torch()
    positions = ((valid.cumsum(-1) - 1).clamp_min(0) if mask_positions
                 else torch.arange(ids.shape[1]).expand_as(ids))
    begin = time.perf_counter()
    logits, cache = model(ids, positions, valid=valid)
    prefill = time.perf_counter() - begin
    step_times, tokens, kept = [], [], []
    following = positions[:, -1:] + 1
    for step in range(steps):
        last = logits[:, -1]
        kept.append(last)
        tokens.append(last.argmax(-1, keepdim=True))
        if step + 1 == steps:
            break
        valid = torch.cat([valid, torch.ones_like(valid[:, :1])], 1)
        begin = time.perf_counter()
        logits, cache = model(tokens[-1], following, cache, valid=valid)
        step_times.append(time.perf_counter() - begin)
        following = following + 1
    return torch.cat(tokens, 1), torch.stack(kept, 1), prefill, step_times


def lab2_left_padding(model, *, lengths: Sequence[int] = LAB6_LENGTHS[:4], steps: int = 24) -> Check:
    """Left-padded rows, positions from the mask, give each row's own tokens and logits;
    a batch run without the mask (rows attending to their padding) is caught by the
    padded rows' logits. Positions read from the column instead of the mask shift
    all of a row's positions alike, which rotary attention does not see (it depends on
    the distance between positions only): their logits are reported, not judged.
    """
    torch = load_torch()
    ids, valid = _left_pad(lengths, model.shape.vocab, 30)
    tokens, logits, _, _ = padded_generate(model, ids, valid, steps)
    unmasked = torch.ones_like(valid)
    _, bad_logits, _, _ = padded_generate(model, ids, unmasked, steps, mask_positions=False)
    _, column_logits, _, _ = padded_generate(model, ids, valid, steps, mask_positions=False)
    worst, same, seen, column = 0.0, True, [], 0.0
    for row, length in enumerate(lengths):
        alone = ids[row:row + 1, ids.shape[1] - length:]
        solo_tokens, solo = generate_at(model, alone, steps, lambda n, i: n + i)
        worst = max(worst, float((solo[0] - logits[row]).abs().max()))
        column = max(column, float((solo[0] - column_logits[row]).abs().max()))
        same = same and bool(torch.equal(solo_tokens[0], tokens[row]))
        if length < ids.shape[1]:
            seen.append(float((solo[0] - bad_logits[row]).abs().max()))
    passed = same and worst < LOGIT_TOLERANCE and all(d > LOGIT_TOLERANCE for d in seen)
    return Check("left padding: masked, positions from the mask", passed,
                 f"{len(lengths)} rows of {', '.join(map(str, lengths))} tokens padded to "
                 f"{ids.shape[1]}: tokens {'equal' if same else 'DIFFER from'} each row alone, "
                 f"max logit difference {worst:.3g}; without the mask the padded rows' logits "
                 f"move by at least {min(seen, default=0.0):.3g}; positions from the column "
                 f"instead of the mask: {column:.3g} (rotary attention sees distances only)",
                 LAB2, {"tokens_equal": same, "max_logit_difference": worst,
                        "unmasked_min_difference": min(seen, default=0.0),
                        "column_positions_difference": column})


def lab2_cache_bytes(model, per_token: float, *, prompt: int, steps: int) -> Check:
    """The cache after ``prompt`` tokens and ``steps`` generated ones holds
    ``prompt + steps − 1`` positions (the last token is not yet forwarded).
    """
    tokens = _random_tokens(model.shape.vocab, (1, prompt), 13)
    _, _, cache = generate(model, tokens, steps)
    positions = prompt + steps - 1
    measured = cache_bytes(cache)
    return Check("cache bytes after a generation", measured == positions * per_token,
                 f"{prompt} prompt tokens and {steps} generated: {positions} cached positions, "
                 f"{measured:,} bytes measured, {positions * per_token:,.0f} by "
                 "kv_bytes_per_token", LAB2,
                 {"positions": positions, "measured": measured, "predicted": positions * per_token})


def lab2_timing(model, lengths: Sequence[int], *, prompt: int = 16) -> LabTable:
    """Cached against recomputed generation of ``n`` tokens, timed once each."""
    tokens = _random_tokens(model.shape.vocab, (1, prompt), 14)
    recompute(model, tokens, 2)
    rows = []
    for n in lengths:
        begin = time.perf_counter()
        recompute(model, tokens, n)
        uncached = time.perf_counter() - begin
        begin = time.perf_counter()
        generate(model, tokens, n)
        cached = time.perf_counter() - begin
        rows.append((n, uncached, cached, uncached / cached))
    return LabTable("Lab 2: cached against recomputed generation", LAB2,
                    ("n", "uncached s", "cached s", "ratio"), tuple(rows),
                    (f"{prompt}-token prompt; recomputation's work grows as n², the cache's as n "
                     "(times reported, not judged; one thread)",))


# ---------------------------------------------------------------------------------
# Lab 5
# ---------------------------------------------------------------------------------


def lab5_costs(model, draft_depth: int, *, prompt: int = 16, repeats: int = 9,
               gammas: Sequence[int] = GAMMAS) -> dict[str, Any]:
    """Median times of a target step, a draft step and a verification of γ + 1
    positions after a prompt's cache: ``c`` and ``v_γ`` in target steps.
    """
    torch = load_torch()
    tokens = _random_tokens(model.shape.vocab, (1, prompt), 15)
    _, target_cache = model(tokens, torch.arange(prompt)[None])
    _, draft_cache = model(tokens, torch.arange(prompt)[None], depth=draft_depth)

    def step(width: int, cache, depth=None) -> float:
        ids = torch.full((1, width), 7)
        where = torch.arange(prompt, prompt + width)[None]
        return _median_time(lambda: model(ids, where, cache, all_logits=True,
                                          depth=depth), repeats)

    target = step(1, target_cache)
    draft = step(1, draft_cache, draft_depth)
    return {"target_step": target, "draft_step": draft, "c": draft / target,
            "v": {g: step(g + 1, target_cache) / target for g in gammas}}


def _crop(cache, length: int):
    return [(k[:, :, :length], v[:, :, :length]) for k, v in cache]


def speculative_greedy(model, prompt, steps: int, propose: Callable[[Any, int], list[int]],
                       gamma: int) -> dict[str, Any]:
    """Greedy speculative decoding of ``steps`` tokens: ``propose(ids, gamma)`` gives up to
    ``gamma`` proposals, one target pass scores the last committed token and them, the
    longest agreeing prefix is accepted with the target's next pick, and the target
    cache is cropped back to the committed boundary (every committed token but the
    last). Returns the output tokens, accepted and rejected proposals and iterations.
    """
    torch = load_torch()
    ids = prompt
    start = prompt.shape[1]
    _, cache = model(prompt[:, :-1], torch.arange(start - 1)[None])
    accepted = rejected = iterations = proposed = 0
    while ids.shape[1] < start + steps:
        base = ids.shape[1]
        proposals = propose(ids, gamma)
        fed = torch.cat([ids[:, -1:], torch.tensor([proposals], dtype=torch.long)], 1)
        logits, cache = model(fed, torch.arange(base - 1, base - 1 + fed.shape[1])[None], cache,
                              all_logits=True)
        picks = logits[0].argmax(-1).tolist()
        k = 0
        while k < len(proposals) and proposals[k] == picks[k]:
            k += 1
        accepted += k
        proposed += len(proposals)
        rejected += int(k < len(proposals))
        iterations += 1
        emitted = [*proposals[:k], picks[k]][:start + steps - base]
        ids = torch.cat([ids, torch.tensor([emitted], dtype=torch.long)], 1)
        cache = _crop(cache, ids.shape[1] - 1)  # the rollback: only committed states stay
    return {"tokens": ids[:, start:], "accepted": accepted, "rejected": rejected,
            "proposed": proposed, "iterations": iterations}


def layer_skip_draft(model, depth: int) -> Callable[[Any, int], list[int]]:
    """A draft that runs the target's first ``depth`` blocks, keeping its own cache and
    feeding it every committed token it lacks before proposing (Lab 5's catch-up).
    """
    torch = load_torch()
    state: dict[str, Any] = {"cache": None, "length": 0}

    def propose(ids, gamma: int) -> list[int]:
        cache, length = state["cache"], state["length"]
        committed = ids.shape[1]
        if cache is not None and length > committed - 1:
            cache, length = _crop(cache, committed - 1), committed - 1
        out: list[int] = []
        fed = ids[:, length:]
        for _ in range(gamma):
            logits, cache = model(fed, torch.arange(length, length + fed.shape[1])[None], cache,
                                  depth=depth)
            length += fed.shape[1]
            out.append(int(logits[0, -1].argmax()))
            fed = torch.tensor([[out[-1]]], dtype=torch.long)
        # the last proposal is not forwarded: the draft's cache ends before it
        state["cache"], state["length"] = _crop(cache, min(length, committed + gamma - 1)), \
            min(length, committed + gamma - 1)
        return out

    return propose


def ngram_draft(size: int = 3) -> Callable[[Any, int], list[int]]:
    """Prompt lookup: the ``gamma`` tokens that followed the latest earlier occurrence
    of the context's last ``size`` tokens (then ``size − 1``, …), or no proposal.
    """
    def propose(ids, gamma: int) -> list[int]:
        row = ids[0].tolist()
        for n in range(size, 0, -1):
            tail = row[-n:]
            for start in range(len(row) - n - 1, -1, -1):
                if row[start:start + n] == tail:
                    return row[start + n:start + n + gamma]
        return []

    return propose


def _expected_tokens(alpha: float, gamma: int) -> float:
    """Σ α^k for k = 0 … γ: committed tokens per iteration under independent acceptance."""
    return sum(alpha ** k for k in range(gamma + 1))


def lab5(model, *, steps: int = 32, prompts: int = 3, prompt: int = 12,
         gammas: Sequence[int] = GAMMAS, repeats: int = 9) -> tuple[list[Check], list[LabTable]]:
    """Lab 5 on the decoder: costs, speculative decoding with a layer-skipping draft and
    with an n-gram draft, each run against the target's own greedy output.
    """
    depth = max(1, model.shape.layers // 2)
    costs = lab5_costs(model, depth, repeats=repeats, gammas=gammas)
    inputs = [_random_tokens(model.shape.vocab, (1, prompt), 40 + i) for i in range(prompts)]
    begin = time.perf_counter()
    baseline = [generate(model, x, steps)[0] for x in inputs]
    baseline_s = time.perf_counter() - begin
    checks, rows = [], []
    for name, make in (("layer-skip draft", lambda: layer_skip_draft(model, depth)),
                       ("n-gram draft", ngram_draft)):
        equal_all = True
        for gamma in gammas:
            begin = time.perf_counter()
            runs = [speculative_greedy(model, x, steps, make(), gamma) for x in inputs]
            elapsed = time.perf_counter() - begin
            equal = [bool((r["tokens"] == b).all()) for r, b in zip(runs, baseline)]
            equal_all = equal_all and all(equal)
            accepted = sum(r["accepted"] for r in runs)
            proposed = sum(r["proposed"] for r in runs)
            iterations = sum(r["iterations"] for r in runs)
            alpha = accepted / (accepted + sum(r["rejected"] for r in runs) or 1)
            per_iteration = prompts * steps / iterations
            predicted: float | None = None
            speedup: float | None = None
            if name == "layer-skip draft":
                predicted = _expected_tokens(alpha, gamma)
                speedup = predicted / (gamma * costs["c"] + costs["v"][gamma])
            rows.append((name, gamma, alpha, proposed, per_iteration, predicted,
                         baseline_s / elapsed, speedup, sum(equal)))
        checks.append(Check(f"speculative decoding, {name}: output equals the target's", equal_all,
                            f"{prompts} prompts × {steps} tokens at γ = "
                            f"{', '.join(map(str, gammas))}: "
                            f"{'every output equal' if equal_all else 'an output DIFFERS'} to the "
                            "target's greedy output, with both caches rolled back to the "
                            "committed boundary", LAB5 if name != "n-gram draft" else LAB5_NGRAM,
                            {"equal": equal_all}))
    cost_table = LabTable(
        "Lab 5: draft and verification costs", LAB5, ("", "ms", "target steps"),
        (("target step", costs["target_step"] * 1e3, 1.0),
         (f"draft step ({depth} of {model.shape.layers} blocks)", costs["draft_step"] * 1e3,
          costs["c"]),
         *((f"verify γ = {g} ({g + 1} positions)", costs["target_step"] * costs["v"][g] * 1e3,
            costs["v"][g]) for g in gammas)),
        ("c = draft step / target step, v_γ = verification / target step; medians "
         "(reported, not judged; one thread)",))
    run_table = LabTable(
        "Lab 5: greedy speculative decoding", LAB5,
        ("draft", "γ", "α", "proposed", "tokens/iter", "predicted", "speed-up",
         "predicted speed-up", "equal"), tuple(rows),
        (f"baseline: the target's greedy output, {prompts} prompts × {steps} tokens in "
         f"{baseline_s:.3g} s; predicted tokens/iter = Σ α^k (k = 0 … γ), predicted speed-up = "
         "that / (γ·c + v_γ); 'equal' counts outputs equal to the baseline",))
    return checks, [cost_table, run_table]


# ---------------------------------------------------------------------------------
# Lab 6
# ---------------------------------------------------------------------------------


def lab6_batches(model, predict: Callable[[str, int, int], float], *,
                 batches: Sequence[int] = (1, 2, 4, 8, 16), steps: int = 64) -> LabTable:
    """Left-padded batches of Lab 6's prompt lengths: TTFT, the median decode step,
    per-sequence and aggregate tokens/s, and the roofline's step at the batch and the
    mid-generation context (padded length + steps / 2, as the lab's 32 of 64).
    """
    rows = []
    for b in batches:
        lengths = LAB6_LENGTHS[:b] if b <= len(LAB6_LENGTHS) else \
            [LAB6_LENGTHS[i % len(LAB6_LENGTHS)] for i in range(b)]
        ids, valid = _left_pad(lengths, model.shape.vocab, 60)
        padded_generate(model, ids, valid, 4)  # warm-up of this shape
        _, _, ttft, times = padded_generate(model, ids, valid, steps)
        step = statistics.median(times)
        predicted = predict("decode", b, ids.shape[1] + steps // 2)
        rows.append((b, ttft * 1e3, step * 1e3, 1 / step, b / step, predicted * 1e3,
                     step / predicted))
    return LabTable("Lab 6: batches of left-padded prompts", LAB6,
                    ("B", "TTFT ms", "step ms", "per sequence", "aggregate", "predicted ms",
                     "measured/predicted"), tuple(rows),
                    (f"prompts of {', '.join(map(str, LAB6_LENGTHS))} tokens (the lab's), the "
                     f"first B of them; {steps} new tokens; tokens/s from the median decode step; "
                     "predicted: the scenario's roofline on this machine (times reported, not "
                     "judged; one thread)",))


def lab6_padded_invariance(model, *, steps: int = 32, batch: int = 8) -> Check:
    """Lab 6's first prompt alone and in a left-padded batch of ``batch``: the same
    tokens, or a difference explained by a top-two gap within the logit noise.
    """
    torch = load_torch()
    ids, valid = _left_pad(LAB6_LENGTHS[:batch], model.shape.vocab, 70)
    tokens, logits, _, _ = padded_generate(model, ids, valid, steps)
    solo_ids = ids[:1, ids.shape[1] - LAB6_LENGTHS[0]:]
    solo_tokens, solo = generate_at(model, solo_ids, steps, lambda n, i: n + i)
    same = bool(torch.equal(solo_tokens[0], tokens[0]))
    diff = float((solo[0] - logits[0]).abs().max())
    top = solo[0].topk(2, dim=-1).values
    gaps = top[:, 0] - top[:, 1]
    smallest, at = float(gaps.min()), int(gaps.argmin())
    return Check("batch invariance with left padding", same or smallest <= diff,
                 f"prompt 0 ({LAB6_LENGTHS[0]} tokens, {ids.shape[1] - LAB6_LENGTHS[0]} padding "
                 f"columns in the batch of {batch}): {steps} tokens "
                 f"{'equal' if same else 'differ'}; max logit difference {diff:.3g}; smallest "
                 f"solo top-two gap {smallest:.3g} at step {at}", LAB6,
                 {"tokens_equal": same, "max_logit_difference": diff, "smallest_top_two_gap": smallest,
                  "padding_columns": ids.shape[1] - LAB6_LENGTHS[0]})


def plot_lab6(table: LabTable):
    """Per-sequence and aggregate tokens/s against the batch, measured and the
    roofline's, on log axes (Lab 6's figure); returns a matplotlib figure.
    """
    from ..analyses.figures import new_figure

    figure, (ax,) = new_figure()
    batches = [row[0] for row in table.rows]
    for column, label in ((3, "per sequence"), (4, "aggregate")):
        measured = ax.plot(batches, [row[column] for row in table.rows], "o-", label=label)
        predicted = [1e3 / row[5] * (row[0] if column == 4 else 1) for row in table.rows]
        ax.plot(batches, predicted, "--", color=measured[0].get_color(),
                label=f"{label}, roofline")
    from matplotlib.ticker import NullLocator

    ax.set(xscale="log", yscale="log", xlabel="batch size", ylabel="output tokens/s",
           title="Lab 6: batching on this machine")
    ax.set_xticks(batches, [str(b) for b in batches])  # the batches measured, as numbers
    ax.xaxis.set_minor_locator(NullLocator())
    ax.legend()
    return figure


# ---------------------------------------------------------------------------------
# Running them
# ---------------------------------------------------------------------------------

#: The labs :func:`run_labs` knows.
LABS = (2, 5, 6)


def run_labs(model, labs: Sequence[int], predict: Callable[[str, int, int], float], *,
             scenario, quick: bool, kv_bytes_per_token: float) -> tuple[list[Check], list[LabTable]]:
    """The experiments of ``labs`` on ``model`` (a float32 decoder), with the lengths
    of ``scenario``'s workload where the lab takes them from it (Lab 2's prompt and
    generation: its cache check counts ``prompt + output − 1`` positions at
    ``kv_bytes_per_token``, the float32 cache's bytes). ``quick`` runs fewer and
    shorter generations.
    """
    torch = load_torch()
    threads = torch.get_num_threads()
    # One thread: these decoders' products are small, and a pool of threads spinning on
    # a shared machine costs more than it gains (a test run took 20× longer with two).
    torch.set_num_threads(1)
    try:
        with torch.inference_mode():
            return _run_labs(model, labs, predict, scenario, quick, kv_bytes_per_token)
    finally:
        torch.set_num_threads(threads)


def _run_labs(model, labs, predict, scenario, quick, kv_bytes_per_token):
    checks: list[Check] = []
    tables: list[LabTable] = []
    prompt = min(64, max(2, round(scenario.value("workload.prompt_tokens"))))
    output = min(32 if quick else 256, max(2, round(scenario.value("workload.output_tokens"))))
    if 2 in labs:
        checks.append(lab2_cache_bytes(model, kv_bytes_per_token, prompt=prompt, steps=output))
        checks.append(lab2_frozen_position(model, prompt=prompt, steps=min(output, 32)))
        checks.append(lab2_left_padding(model, steps=12 if quick else 24))
        check, table = lab2_prefix(model, prefix=32 if quick else 96, repeats=1 if quick else 3)
        checks.append(check)
        tables += [table, lab2_timing(model, (16, 32) if quick else (64, 128, 256, 512),
                                      prompt=prompt)]
    if 5 in labs:
        found, lab_tables = lab5(model, steps=16 if quick else 64, prompts=2 if quick else 5,
                                 gammas=(2, 4) if quick else GAMMAS, repeats=3 if quick else 9)
        checks += found
        tables += lab_tables
    if 6 in labs:
        tables.append(lab6_batches(model, predict, batches=(1, 2, 4) if quick else (1, 2, 4, 8, 16),
                                   steps=8 if quick else 64))
        checks.append(lab6_padded_invariance(model, steps=12 if quick else 64))
    return checks, tables
