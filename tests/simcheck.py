"""Checks shared by the simulator's tests."""

from __future__ import annotations

import numpy as np


def assert_same_run(actual, expected) -> None:
    """Two run records agree exactly: the fast engine's against the reference's (counts,
    times, per-request stamps and the pooled inter-token gaps).
    """
    assert actual.iterations == expected.iterations
    assert actual.preemptions == expected.preemptions
    assert actual.recomputed_tokens == expected.recomputed_tokens
    assert (actual.busy_slot_steps, actual.decode_steps) == (expected.busy_slot_steps, expected.decode_steps)
    assert actual.end_time == expected.end_time
    assert np.array_equal(actual.first_token, expected.first_token)
    assert np.array_equal(actual.last_token, expected.last_token)
    assert np.array_equal(actual.max_gap, expected.max_gap)
    assert np.array_equal(actual.admitted, expected.admitted, equal_nan=True)
    pooled = np.repeat(actual.gap_values, actual.gap_weights)
    assert np.array_equal(np.sort(pooled), np.sort(expected.gap_values))
