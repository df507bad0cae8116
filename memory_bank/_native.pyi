from typing import Any

def scan_runs(
    acc: Any,
    lengths: Any,
    c0: float,
    c1: float,
    runs: Any,
    k1p1: float,
    out_positions: Any,
    out_scores: Any,
    /,
) -> int:
    """``acc`` set to 0, then for each ``(pos, tf, w)`` of ``runs``, in order: ``acc[pos] += tf * w *
    k1p1 / (lengths[pos] * c1 + c0 + tf)`` in float32, one posting at a time; the best positive
    scores written into the outputs as ``top_positive`` writes them. Returns how many."""

def postings_misfit(starts: Any, pos: Any, tf: Any, n: int, /) -> str | None:
    """Why the CSR postings are unsound (a row not strictly ascending within ``[0, n)``, a
    frequency not positive), or ``None``."""

def top_positive(scores: Any, out_positions: Any, out_scores: Any, /) -> int:
    """The best positive float32 ``scores`` (as many as ``out_positions`` holds), best first,
    ties to the earlier index, written into ``out_positions`` (int64) and ``out_scores``
    (float32); returns how many were written."""

def echo_share(user_starts: Any, user_ids: Any, positions: Any, query_ids: Any, out: Any, /) -> None:
    """Per position, ``|U & Q| / max(|U|, |Q|)`` of its user word ids U and the query's ids Q, as
    float64 into ``out`` (0 without user words)."""

def day_evidence(days: Any, scores: Any, top: int, out: Any, /) -> None:
    """Per entry, the mean of the ``top`` best ``scores`` of its day (summed best first), into ``out``."""

def neighbour_lift(
    scored: Any, ranked_at: Any, prev: Any, next: Any, scores: Any, w_prev: float, w_next: float, out: Any, /
) -> None:
    """``scores`` into ``out``, each ranked one lifted ``w * max(0, neighbour - own)`` towards the
    scores of the turns before and after it."""
