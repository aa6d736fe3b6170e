"""Python's ``round(x, digits)`` for many floats at once, with identical results.

``round`` rounds the exact binary value to ``digits`` decimals (ties to even) and returns the double
nearest that decimal. Scaling by 10**digits in floating point is off by at most half an ulp of the
product, so ``rint`` of it finds the same integer unless the product lies within that error of a half;
the quotient of that integer by 10**digits (both exact doubles) is then correctly rounded, i.e. the
same double ``round`` returns. Values that close to a tie are handed to ``round`` itself.
"""

from __future__ import annotations

import numpy as np

_NEAR_TIE = 1e-6  # far above the scaling error for |x| * 10**digits < 2**40 (error <= 2**-13)
_LIMIT = float(2**40)


def round_all(values: np.ndarray, digits: int) -> list[float]:
    """``[round(float(v), digits) for v in values]`` for finite values."""
    values = np.asarray(values, dtype=np.float64)
    scale = float(10**digits)
    scaled = values * scale
    k = np.rint(scaled)
    out = (k / scale).tolist()
    frac = np.abs(scaled - np.floor(scaled) - 0.5)
    for i in np.flatnonzero((frac < _NEAR_TIE) | ~(np.abs(scaled) < _LIMIT)).tolist():
        out[i] = round(float(values[i]), digits)
    return out
