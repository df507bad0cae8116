"""What a search asks of BM25, answered exactly: the best memories, the best score, any scores.

A search needs three things from the lexical index: the ``k`` best-scoring memories (the
lexical candidates), the best score (the lexical term's normaliser) and the scores of the few
hundred memories it ranks. :class:`Bm25Query` answers the three for one query, bit for bit
what :meth:`memory_bank.index.LexicalIndex.score_array` gives (its maximum, ``stable_top`` of
it without the zeros, its values), so the callers never hold a score per memory themselves
and the way the answers are found can change behind them.

The best memories are selected by :func:`memory_bank.topk.top_positive`, which never
partitions all ``n`` scores: over scores that are mostly zero (a query of rare words) that
degrades to milliseconds. An index that can find them while it scores (the compiled scan,
:meth:`memory_bank.index.LexicalIndex.score_top`) is asked for both at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from memory_bank.topk import top_positive


class FullScan(Protocol):
    """What a query reads of its index (:class:`~memory_bank.index.LexicalIndex` is one)."""

    def score_array(self, query_tokens: Sequence[str]) -> np.ndarray: ...

    def score_top(self, query_tokens: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``score_array``, with ``top_positive`` of it for ``k``."""
        ...


class Bm25Query:
    """BM25 of one query over one :class:`~memory_bank.index.LexicalIndex`, as it is now.

    ``best()``, ``top(k)`` and ``at(positions)`` equal, bit for bit, what the full scan
    ``score_array(tokens)`` gives: its maximum, ``stable_top`` of it without the zeros, and its
    values at ``positions``. Make a new one after the index changes.

        q = index.query(tokenize("Do you remember the museum?"))
        positions, scores = q.top(64)
        q.best() == scores[0]
    """

    def __init__(self, index: FullScan, query_tokens: Sequence[str]) -> None:
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
            if self._full is None:
                self._full, positions, scores = self.index.score_top(self.tokens, k)
                self._top = (k, positions, scores)
            else:
                self._top = (k, *top_positive(self._full, k))
        return self._top[1][:k], self._top[2][:k]

    def best(self) -> float:
        """The best score (0 when no memory holds a query token)."""
        scores = self._top[2] if self._top is not None and self._top[0] >= 1 else self.top(1)[1]
        return float(scores[0]) if len(scores) else 0.0

    def at(self, positions: np.ndarray) -> np.ndarray:
        """The score of each of ``positions`` (``float32``)."""
        return self.full()[positions]
