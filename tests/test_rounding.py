"""sim.core.rounding.round_all against Python's round, value by value."""

import numpy as np
import pytest

from sim.core.rounding import round_all


@pytest.mark.parametrize("digits", [4, 6])
def test_round_all_equals_round_including_ties_and_large_values(digits):
    rng = np.random.default_rng(7)
    values = np.concatenate(
        [
            rng.random(20000),
            rng.normal(1.5, 0.4, 20000),
            rng.random(5000) * 100,
            np.arange(-4001, 4002) / (2 * 10**digits) * 3,  # exact and near halves of the last digit
            np.array([0.0078125, 1 / 3, 2 / 3, 0.0, -0.0, 1e-9, -1e-9, 2.0**45, -(2.0**45) - 0.5, 1e300]),
        ]
    )
    got = round_all(values, digits)
    expected = [round(float(v), digits) for v in values]
    assert [repr(g) for g in got] == [repr(e) for e in expected]  # repr: -0.0 and 0.0 differ
