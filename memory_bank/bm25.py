"""What a search asks of BM25, answered exactly: the best memories, the best score, any scores.

A search needs three things from the lexical index: the ``k`` best-scoring memories (the
lexical candidates), the best score (the lexical term's normaliser) and the scores of the few
hundred memories it ranks. :class:`Bm25Query` answers the three for one query, bit for bit
what :meth:`memory_bank.index.LexicalIndex.score_array` gives (its maximum, ``stable_top`` of
it without the zeros, its values), so the callers never hold a score per memory themselves
and the way the answers are found can change behind them.

The best memories are selected without sorting or partitioning all ``n`` scores
(:func:`top_positive`): ``np.partition`` over an array that is mostly zeros (a query whose
tokens are rare) degrades to about 6 ms at 100,000 memories, against 0.1 ms for the selection
here, which also halves the cost when most memories score.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from memory_bank.index import LexicalIndex

#: Every how many scores :func:`top_positive` samples to find a threshold.
SAMPLE_STEP = 8


def top_positive(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The indices of the ``k`` largest positive ``scores`` (best first, ties in index order)
    and their scores: ``stable_top(scores, k)`` without the non-positive ones.

    A sample of the scores gives a threshold no higher than the k-th largest (the k-th largest
    of a subset never exceeds that of the whole), so only the scores at or above it (about
    ``SAMPLE_STEP * k`` of them) are sorted; with fewer than ``k`` positive scores in the
    sample, the positive scores are.
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
    vals = scores[sel]
    best = np.argsort(-vals, kind="stable")[:k]
    return sel[best].astype(np.int64), vals[best]


class Bm25Query:
    """BM25 of one query over one :class:`~memory_bank.index.LexicalIndex`, as it is now.

    ``best()``, ``top(k)`` and ``at(positions)`` equal, bit for bit, what the full scan
    ``score_array(tokens)`` gives: its maximum, ``stable_top`` of it without the zeros, and its
    values at ``positions``. Make a new one after the index changes.

        q = index.query(tokenize("Do you remember the museum?"))
        positions, scores = q.top(64)
        q.best() == scores[0]
    """

    def __init__(self, index: LexicalIndex, query_tokens: Sequence[str]) -> None:
        self.index = index
        self.tokens = list(query_tokens)
        self._full: np.ndarray | None = None
        self._top: tuple[int, np.ndarray, np.ndarray] | None = None

    def full(self) -> np.ndarray:
        """The BM25 score of every position (the full scan, computed once)."""
        if self._full is None:
            self._full = self.index.score_array(self.tokens)
        return self._full

    def top(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best positions with a positive score (best first, ties by position) and
        their scores (``float32``)."""
        if self._top is None or self._top[0] < k:
            self._top = (k, *top_positive(self.full(), k))
        return self._top[1][:k], self._top[2][:k]

    def best(self) -> float:
        """The best score (0 when no memory holds a query token)."""
        scores = self._top[2] if self._top is not None else self.top(1)[1]
        return float(scores[0]) if len(scores) else 0.0

    def at(self, positions: np.ndarray) -> np.ndarray:
        """The score of each of ``positions`` (``float32``)."""
        return self.full()[positions]
