"""Layer patterns: the kinds of successive layers, written ``"5*sliding,full"``.

A pattern lists one period of layer kinds, repeated from the first layer on. Items are
separated by commas; ``N*kind`` (or ``kind*N``) repeats a kind.
"""

from __future__ import annotations

import re

#: Layer kinds a pattern may name; "full", "sliding" and "chunked" keep a KV cache.
KINDS = ("full", "sliding", "chunked", "linear")
ATTENTION_KINDS = ("full", "sliding", "chunked")
_TOKEN = re.compile(r"^(?:(\d+)\s*\*\s*)?([a-z]+)(?:\s*\*\s*(\d+))?$")
#: Longest pattern accepted (a layer count is a few hundred at most).
MAX_PATTERN = 4096


class PatternError(ValueError):
    """A layer pattern that cannot be read; the message says what was expected."""


def parse_layer_pattern(text: str) -> tuple[str, ...]:
    """The kinds of one period of layers, from a pattern such as ``"5*sliding,full"``.

    >>> parse_layer_pattern("5*sliding,full")
    ('sliding', 'sliding', 'sliding', 'sliding', 'sliding', 'full')
    >>> parse_layer_pattern("linear*3, full")
    ('linear', 'linear', 'linear', 'full')
    """
    if not isinstance(text, str) or not text.strip():
        raise PatternError("the pattern is empty")
    out: list[str] = []
    for item in text.split(","):
        match = _TOKEN.match(item.strip().lower())
        if match is None:
            raise PatternError(f"cannot read {item.strip()!r}")
        before, kind, after = match.groups()
        if kind not in KINDS:
            raise PatternError(f"unknown layer kind {kind!r}")
        if before and after:
            raise PatternError(f"{item.strip()!r} repeats twice")
        repeat = int(before or after or 1)
        if repeat < 1 or len(out) + repeat > MAX_PATTERN:
            raise PatternError(f"{item.strip()!r}: a repeat must be 1 to {MAX_PATTERN}")
        out.extend([kind] * repeat)
    return tuple(out)


def layer_kind_counts(pattern: tuple[str, ...], layers: int) -> dict[str, int]:
    """How many of ``layers`` layers have each kind when ``pattern`` repeats from layer 0.

    Gemma-3-27B: 62 layers, every 6th global → 52 sliding and 10 full.

    >>> layer_kind_counts(("sliding",) * 5 + ("full",), 62)
    {'full': 10, 'sliding': 52, 'chunked': 0, 'linear': 0}
    """
    period = len(pattern)
    counts = dict.fromkeys(KINDS, 0)
    for position, kind in enumerate(pattern):
        if position < layers:
            counts[kind] += (layers - 1 - position) // period + 1
    return counts


__all__ = ["ATTENTION_KINDS", "KINDS", "MAX_PATTERN", "PatternError", "layer_kind_counts",
           "parse_layer_pattern"]
