"""Layer patterns: the mixer (and feed-forward block) of successive layers.

A pattern lists one period of layers, repeated from the first layer on. Items are
separated by commas; ``N*item`` (or ``item*N``) repeats an item. An item is a mixer,
optionally followed by ``+`` and the layer's feed-forward block::

    "5*sliding,full"                       Gemma 3: every 6th layer global
    "3*linear,full"                        Qwen3-Next: gated delta-net, 3 of 4
    "mamba+dense,mamba+moe,mamba+dense,mamba+moe,full+dense,mamba+moe,mamba+dense,mamba+moe"
                                           Jamba: attention 1 in 8, MoE every other layer
    "mamba2+none,none+dense,full+none"     Nemotron-H: one mixer or one MLP per block
    "full+dense:28672,none+dense:5632"     DeciLM: a feed-forward width per block

Mixers: ``full``, ``sliding``, ``chunked`` (attention over the whole context, a window,
the current chunk), ``linear`` (gated delta-net), ``lightning`` (MiniMax's linear
attention), ``mamba`` (Mamba-1), ``mamba2`` (Mamba-2), ``projection`` (one d×d linear
in place of attention) and ``none``. Feed-forward blocks: ``dense`` (of width d_ff, or
``dense:W``), ``moe``, ``projection`` (one d×d linear) and ``none``. Without ``+`` a
layer's feed-forward block follows the model's dense/MoE rule (``dense_layers``,
``moe_layer_period``).
"""

from __future__ import annotations

import re

import attrs

#: The layer kinds every count names (the original four); other mixers appear when used.
BASE_KINDS = ("full", "sliding", "chunked", "linear")
#: Every mixer a pattern may name.
KINDS = (*BASE_KINDS, "lightning", "mamba", "mamba2", "projection", "none")
#: Mixers that keep a growing key/value cache.
ATTENTION_KINDS = ("full", "sliding", "chunked")
#: Mixers that keep a fixed-size recurrent state instead of a cache.
STATE_KINDS = ("linear", "lightning", "mamba", "mamba2")
#: Feed-forward blocks a pattern may name after ``+``.
FFN_KINDS = ("dense", "moe", "projection", "none")
_TOKEN = re.compile(r"^(?:(\d+)\s*\*\s*)?([a-z0-9+:]+)(?:\s*\*\s*(\d+))?$")
_LAYER = re.compile(r"^([a-z0-9]+)(?:\+([a-z]+)(?::(\d+))?)?$")
#: Longest pattern accepted (a layer count is a few hundred at most).
MAX_PATTERN = 4096
#: Widest feed-forward block a pattern may give (the widest published is about 10⁵).
MAX_WIDTH = 10**7


class PatternError(ValueError):
    """A layer pattern that cannot be read; the message says what was expected."""


@attrs.frozen
class LayerSpec:
    """One layer of a pattern: its mixer, and its feed-forward block when the item says."""

    mixer: str
    ffn: str | None = None
    width: int | None = None


def _layer(text: str, item: str) -> LayerSpec:
    match = _LAYER.match(text)
    if match is None:
        raise PatternError(f"cannot read {item!r}")
    mixer, ffn, width = match.groups()
    if mixer not in KINDS:
        raise PatternError(f"unknown layer kind {mixer!r}")
    if ffn is not None and ffn not in FFN_KINDS:
        raise PatternError(f"unknown feed-forward kind {ffn!r} in {item!r}")
    if width is not None and (ffn != "dense" or not 1 <= int(width) <= MAX_WIDTH):
        raise PatternError(f"{item!r}: a width follows dense only, 1 to {MAX_WIDTH:,}")
    return LayerSpec(mixer, ffn, int(width) if width is not None else None)


def parse_layers(text: str) -> tuple[LayerSpec, ...]:
    """The layers of one period, from a pattern such as ``"3*mamba2+none,full+dense"``.

    >>> parse_layers("2*mamba+moe,full")[1:]
    (LayerSpec(mixer='mamba', ffn='moe', width=None), LayerSpec(mixer='full', ffn=None, width=None))
    >>> parse_layers("none+dense:5632")
    (LayerSpec(mixer='none', ffn='dense', width=5632),)
    """
    if not isinstance(text, str) or not text.strip():
        raise PatternError("the pattern is empty")
    out: list[LayerSpec] = []
    for item in text.split(","):
        item = item.strip()
        match = _TOKEN.match(item.lower())
        if match is None:
            raise PatternError(f"cannot read {item!r}")
        before, layer, after = match.groups()
        spec = _layer(layer, item)
        if before and after:
            raise PatternError(f"{item!r} repeats twice")
        repeat = int(before or after or 1)
        if repeat < 1 or len(out) + repeat > MAX_PATTERN:
            raise PatternError(f"{item!r}: a repeat must be 1 to {MAX_PATTERN}")
        out.extend([spec] * repeat)
    return tuple(out)


def parse_layer_pattern(text: str) -> tuple[str, ...]:
    """The mixers of one period of layers, from a pattern such as ``"5*sliding,full"``.

    >>> parse_layer_pattern("5*sliding,full")
    ('sliding', 'sliding', 'sliding', 'sliding', 'sliding', 'full')
    >>> parse_layer_pattern("linear*3, full")
    ('linear', 'linear', 'linear', 'full')
    """
    return tuple(spec.mixer for spec in parse_layers(text))


def layer_kind_counts(pattern: tuple[str, ...], layers: int) -> dict[str, int]:
    """How many of ``layers`` layers have each mixer when ``pattern`` repeats from layer 0.

    The four original kinds are always counted; another mixer only when it occurs.
    Gemma-3-27B: 62 layers, every 6th global → 52 sliding and 10 full.

    >>> layer_kind_counts(("sliding",) * 5 + ("full",), 62)
    {'full': 10, 'sliding': 52, 'chunked': 0, 'linear': 0}
    """
    period = len(pattern)
    counts = dict.fromkeys(BASE_KINDS, 0)
    for position, kind in enumerate(pattern):
        if position < layers:
            counts[kind] = counts.get(kind, 0) + (layers - 1 - position) // period + 1
    return counts


def compact_pattern(items: list[str]) -> str:
    """The shortest repeating period of a per-layer list of items, written as a pattern.

    >>> compact_pattern(["sliding", "full"] * 18)
    'sliding,full'
    >>> compact_pattern(["linear", "linear", "linear", "full"] * 12)
    '3*linear,full'
    """
    n = len(items)
    period = next(p for p in range(1, n + 1) if all(items[i] == items[i % p] for i in range(n)))
    out: list[str] = []
    start = 0
    for end in range(1, period + 1):
        if end == period or items[end] != items[start]:
            run = end - start
            out.append(items[start] if run == 1 else f"{run}*{items[start]}")
            start = end
    return ",".join(out)


__all__ = ["ATTENTION_KINDS", "BASE_KINDS", "FFN_KINDS", "KINDS", "MAX_PATTERN", "MAX_WIDTH",
           "STATE_KINDS", "LayerSpec", "PatternError", "compact_pattern", "layer_kind_counts",
           "parse_layer_pattern", "parse_layers"]
