"""The cache and attention terms the base physics routes through the layer model.

At context L, one sequence caches

    Σ over attention layers of min(L, window_l)   positions

(window ∞ for full layers; a chunked layer holds at most one chunk, counted at its
largest, min(L, chunk)), and each fixed-state layer keeps its state, whose size does
not depend on L. ``kv_positions_at_context`` is that sum divided by the number of
attention layers, so ``kv_bytes_per_token · kv_positions_at_context`` is the cache of
one sequence wherever the base physics uses the cache (decode bytes, attention FLOPs,
capacity, the longest context). For a model without architecture fields every term is
the base physics' original expression, so its derivations and numbers are unchanged.

References: Gemma 2 (arXiv:2408.00118) and Gemma 3 (arXiv:2503.19786) for local/global
layers; Llama 4's config.json for chunked attention; Gated Delta Networks
(arXiv:2412.06464) and Mamba-2 (arXiv:2405.21060) for fixed-state layers.
"""

from __future__ import annotations

import attrs
from sympy import Min, Piecewise, floor, oo

from infermodel.plugin import S

from ..unevaluated import Max
from .formulas import attention_decode_flops, attention_prefill_flops
from .structure import Structure, structure


def kv_positions(st: Structure, length):
    """Layer-averaged cached positions at ``length`` tokens (``length`` itself for full attention)."""
    if not st.windows or st.counts is None:
        return length
    terms = S.layers_full_attention * length
    if st.counts["sliding"]:
        terms += S.layers_sliding_window * Min(length, S.sliding_window)
    if st.counts["chunked"]:
        terms += S.layers_chunked_local * Min(length, S.attention_chunk)
    return terms / S.kv_layers


def causal_pairs(n, window=None):
    """Query-key pairs of causal attention over n tokens (n²/2 convention), windowed."""
    if window is None:
        return n**2 / 2
    return (n**2 - Max(0, n - window) ** 2) / 2


def chunked_pairs(n, chunk):
    whole = floor(n / chunk)
    return (whole * chunk**2 + (n - whole * chunk) ** 2) / 2


# ---------------------------------------------------------------------------------
# The terms the base physics routes through
# ---------------------------------------------------------------------------------


@attrs.frozen
class Terms:
    """Expressions the base physics uses for the cache and attention of one scenario.

    For a model without architecture fields every method returns the base physics'
    original expression, so its derivations and numbers are unchanged.
    """

    st: Structure

    @property
    def plain(self) -> bool:
        return not self.st.attention

    def block_norms(self):
        """Norm weights of the blocks: one before each mixer and feed-forward block, and a
        final one, (2·L + 1)·d (``sublayers`` + 1 when some layers lack one or the other).
        """
        if self.st.missing_sublayers:
            return (S.sublayers + 1) * S.d_model
        return (2 * S.layers + 1) * S.d_model

    def cache_read(self, context):
        """Bytes of cache (and fixed state) one sequence reads in a decode step at ``context``."""
        if not self.st.windows and not self.st.linear:
            return context * S.kv_bytes_per_token
        if context == S.context:
            return S.kv_bytes_read_per_sequence
        return S.kv_bytes_per_token * kv_positions(self.st, context) + 2 * self._state()

    def cache_held(self, length):
        """Bytes one sequence holds at ``length`` tokens (cache and fixed state)."""
        if not self.st.windows and not self.st.linear:
            return S.kv_bytes_per_token * length
        return S.kv_bytes_per_token * kv_positions(self.st, length) + self._state()

    def _state(self):
        return S.linear_state_bytes_per_sequence if self.st.linear else 0

    def attention_decode(self, context):
        """Attention FLOPs of one sequence's decode step at ``context``."""
        if self.plain:
            return attention_decode_flops(S.layers, S.query_width, context)
        if context == S.context:
            return S.attention_flops_decode
        return self.decode_attention(context)

    def decode_attention(self, context):
        """Attention (and recurrence) FLOPs of one decode step at ``context``, per layer kind."""
        flops = S.attention_flops_per_position * S.kv_layers * kv_positions(self.st, context)
        if self.st.linear:
            flops += S.fixed_state_flops_per_token
        return flops

    def attention_prefill(self, n):
        """Attention FLOPs to prefill ``n`` tokens of one sequence (causal)."""
        if self.plain:
            return attention_prefill_flops(S.layers, S.query_width, n)
        if n == S.prompt_tokens:
            return S.attention_flops_prefill
        return self.prefill_attention(n)

    def attention_chunk(self, cached, chunk):
        """Attention FLOPs of ``chunk`` new prompt tokens after ``cached`` ones (causal).

        Query i (1-based) attends to min(i, window) keys; the chunk's queries are
        ``cached + 1`` to ``cached + chunk``, so a layer of window w does
        P(cached + chunk, w) − P(cached, w) pairs with P(n, w) = Σ_{i ≤ n} min(i, w) =
        (n(n + 1) − m(m + 1))/2, m = max(0, n − w). Without a window that is
        chunk·cached + chunk(chunk + 1)/2.
        """
        full = chunk * cached + chunk * (chunk + 1) / 2
        if self.plain:
            return attention_decode_flops(S.layers, S.query_width, full)
        per_pair = S.attention_flops_per_pair_prefill
        if self.st.counts is None:
            return per_pair * S.layers * full

        def window_pairs(window):
            def upto(n):
                m = Max(0, n - window)
                return (n * (n + 1) - m * (m + 1)) / 2
            return upto(cached + chunk) - upto(cached)

        pairs = S.layers_full_attention * full
        if self.st.counts["sliding"]:
            pairs += S.layers_sliding_window * window_pairs(S.sliding_window)
        if self.st.counts["chunked"]:
            # At most a whole chunk of keys per query: an upper bound for chunked layers.
            pairs += S.layers_chunked_local * window_pairs(S.attention_chunk)
        flops = per_pair * pairs
        if self.st.linear:
            flops += S.fixed_state_flops_per_token * chunk
        return flops

    def prefill_attention(self, n):
        """Attention (and recurrence) FLOPs to prefill ``n`` tokens, per layer kind."""
        per_pair = S.attention_flops_per_pair_prefill
        if self.st.counts is None:
            return per_pair * S.layers * causal_pairs(n)
        pairs = S.layers_full_attention * causal_pairs(n)
        if self.st.counts["sliding"]:
            pairs += S.layers_sliding_window * causal_pairs(n, S.sliding_window)
        if self.st.counts["chunked"]:
            pairs += S.layers_chunked_local * chunked_pairs(n, S.attention_chunk)
        flops = per_pair * pairs
        if self.st.linear:
            flops += S.fixed_state_flops_per_token * n
        return flops

    def max_context(self, budget, batch):
        """Longest context each of ``batch`` sequences reaches within ``budget`` bytes.

        The cache is concave and piecewise linear in the context (each window saturates),
        so its inverse is the largest of its segments' affine inverses.
        """
        if not self.st.windows and not self.st.linear:
            return Max(0, floor(budget / (S.kv_bytes_per_token * batch)))
        positions = (budget / batch - self._state()) * S.kv_layers / S.kv_bytes_per_token
        if not self.st.windows:
            return Max(0, floor(positions / S.kv_layers))
        counts = self.st.counts
        assert counts is not None  # windows are counted layers
        windows = []
        if counts["sliding"]:
            windows.append((S.sliding_window, S.layers_sliding_window, counts["sliding"]))
        if counts["chunked"]:
            windows.append((S.attention_chunk, S.layers_chunked_local, counts["chunked"]))
        # Any choice of "saturated" windows gives an affine upper bound of the cache
        # (min(L, w) ≤ L and ≤ w), hence a lower bound of its inverse; the right choice
        # is exact, so the inverse is the largest of them.
        pieces = []
        for mask in range(1 << len(windows)):
            held = sum(symbol * count for i, (symbol, count, _) in enumerate(windows) if mask >> i & 1)
            open_layers = S.layers_full_attention + sum(
                count for i, (_, count, _) in enumerate(windows) if not mask >> i & 1)
            open_count = counts["full"] + sum(
                n for i, (_, _, n) in enumerate(windows) if not mask >> i & 1)
            if open_count:
                pieces.append((positions - held) / open_layers)
            else:
                pieces.append(Piecewise((oo, positions >= held), (0, True)))
        return Max(0, floor(Max(*pieces)))


def terms(scenario) -> Terms:
    return Terms(structure(scenario))


def chunked_overcount(counts: dict, length: float, chunk: int, window: int | None) -> tuple[float, float]:
    """(largest, typical) share by which the cache at ``length`` tokens is overstated when
    each chunked-local layer is counted at min(length, chunk) positions.

    A chunked layer holds only the tokens of the current chunk: 1 to ``chunk`` of them
    once a sequence is past its first chunk. At its worst (a sequence that has just
    started a new chunk) the count is min(L, c) − 1 positions per such layer too large;
    for sequences spread evenly across a chunk, about c/2. Both are 0 within the
    first chunk, where min(L, c) = L is exact.

    Llama 4 Scout at 32,768 tokens (12 full, 36 chunked layers of 8,192):
    >>> worst, typical = chunked_overcount({"full": 12, "sliding": 0, "chunked": 36}, 32768, 8192, None)
    >>> round(100 * worst, 1), round(100 * typical, 1)
    (42.9, 21.4)
    """
    if length <= chunk:
        return 0.0, 0.0
    counted = counts["full"] * length + counts["chunked"] * chunk
    if counts["sliding"]:
        counted += counts["sliding"] * min(length, window or length)
    return counts["chunked"] * (chunk - 1) / counted, counts["chunked"] * (chunk / 2) / counted


__all__ = ["Terms", "causal_pairs", "chunked_overcount", "chunked_pairs", "kv_positions", "terms"]
