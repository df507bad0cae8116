from typing import Any

def scan(acc: Any, norms: Any, pos: Any, tf: Any, w: float, k1p1: float, /) -> None:
    """``acc[pos] += tf * w * k1p1 / (norms[pos] + tf)`` in float32, one posting at a time."""

def top_positive(scores: Any, out_positions: Any, out_scores: Any, /) -> int:
    """The best positive float32 ``scores`` (as many as ``out_positions`` holds), best first,
    ties to the earlier index, written into ``out_positions`` (int64) and ``out_scores``
    (float32); returns how many were written."""
