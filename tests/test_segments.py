"""sim.core.segments: runs laid end to end."""

import numpy as np

from sim.core.segments import concat, offsets, owners, positions, value_ends, value_starts


def test_segment_arithmetic_with_an_empty_segment():
    sizes = [2, 0, 3]
    assert offsets(sizes).tolist() == [0, 2, 2]
    assert owners(sizes).tolist() == [0, 0, 2, 2, 2]
    assert positions(sizes).tolist() == [0, 1, 0, 1, 2]
    assert concat([]).dtype == np.int64 and concat([], bool).dtype == bool and len(concat([])) == 0


def test_value_starts_and_ends():
    v = np.array([4, 4, 7, 9, 9, 9])
    assert value_starts(v).tolist() == [True, False, True, True, False, False]
    assert value_ends(v).tolist() == [False, True, True, False, False, True]
    assert value_starts(v[:0]).tolist() == value_ends(v[:0]).tolist() == []
