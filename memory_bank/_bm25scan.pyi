from typing import Any

def scan(acc: Any, norms: Any, pos: Any, tf: Any, w: float, k1p1: float, /) -> None:
    """``acc[pos] += tf * w * k1p1 / (norms[pos] + tf)`` in float32, one posting at a time."""
