"""Top-k selection in O(n) with ties in index order, the way every ranking step breaks them."""

from __future__ import annotations

import numpy as np

from memory_bank import native

#: Every how many scores :func:`numpy_top_positive` samples to find its threshold.
SAMPLE_STEP = 16


def stable_top(scores: np.ndarray, k: int) -> np.ndarray:
    """``np.argsort(-scores, kind="stable")[:k]`` in O(n): the indices of the ``k`` largest
    scores, best first, ties in index order."""
    scores = np.asarray(scores)
    n = len(scores)
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    if k >= n:
        return np.argsort(-scores, kind="stable")
    kth = np.partition(scores, n - k)[n - k]  # the k-th largest
    sel = np.flatnonzero(scores >= kth)
    return sel[np.argsort(-scores[sel], kind="stable")[:k]]


def top_positive(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The indices of the ``k`` largest positive ``scores`` (best first, ties in index order)
    and their scores: ``stable_top(scores, k)`` without the non-positive ones.

    Float32 scores (BM25's) go to the compiled kernel where it is built: one pass that keeps
    the best ``k`` in a heap, about 0.1 ms at 100,000 scores; anything else, or an install
    without it, to :func:`numpy_top_positive`, which gives the same result.
    """
    scores = np.asarray(scores)
    if (
        native.top_positive is None
        or scores.dtype != np.float32
        or scores.ndim != 1
        or not scores.flags.c_contiguous
        or k <= 0
    ):
        return numpy_top_positive(scores, k)
    k = min(k, len(scores))
    positions = np.empty(k, dtype=np.int64)
    best = np.empty(k, dtype=np.float32)
    count = native.top_positive(scores, positions, best)
    return positions[:count], best[:count]


def numpy_top_positive(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`top_positive` in NumPy.

    ``np.partition`` over scores that are mostly zero (BM25 of a query of rare words) degrades
    to about 2 ms at 100,000 scores and 35 ms at a million, so no partition runs over all of
    them: the k-th largest of a sample (every :data:`SAMPLE_STEP`-th score) is no higher than
    the k-th largest of all, and only the scores at or above it (about ``SAMPLE_STEP * k``)
    are selected from; when the sample holds fewer than ``k`` positive scores, the positive
    scores are (there are few).
    """
    scores = np.asarray(scores)
    if k <= 0 or not len(scores):
        return np.zeros(0, dtype=np.int64), scores[:0]
    sample = scores[::SAMPLE_STEP]
    sample = sample[sample > 0]
    if len(sample) >= k:
        floor = np.partition(sample, len(sample) - k)[len(sample) - k]
        sel = np.flatnonzero(scores >= floor)
    else:
        sel = np.flatnonzero(scores > 0)
    best = sel[stable_top(scores[sel], k)]
    return best.astype(np.int64), scores[best]
