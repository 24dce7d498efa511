"""The shape words of the growth bench (issue 23, bench/b9_scale_growth.py): each row
of the table is judged by how it grows from the smallest size to the largest."""

from __future__ import annotations

import pytest

from bench.b9_scale_growth import shape


@pytest.mark.parametrize(
    ("values", "word"),
    [
        ([3.0, 3.1, 4.4], "flat"),
        ([4.0, 40.0, 400.0], "linear (~N^1.0)"),
        ([4.0, 9.0, 20.0], "sublinear (~N^0.3)"),
        ([1.0, 100.0, 10_000.0], "superlinear (~N^2.0)"),
        ([0.0, 1.0, 2.0], "grows"),
    ],
)
def test_shape_names_the_growth_between_the_ends(values: list[float], word: str) -> None:
    """Issue 23: at most 1.5× is flat; otherwise the exponent through the two ends."""
    assert shape([1_000, 10_000, 100_000], values) == word
