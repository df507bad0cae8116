"""The cold tier: forgotten memories that retrieval still consults when the live ones match poorly.

A forgetting pass archives a memory: it leaves the live index, so the index stays small and
searches stay fast and sharp. With ``forgetting.cold_tier`` on, a search whose best live score is
below ``forgetting.cold_below`` also ranks the archived memories (the same ranking, over their
own index) and merges the two lists by score: forgetting then costs latency on the searches that
find nothing good, not knowledge (the human "it comes back to me"). A cold memory that is
recalled is restored to the live tier by :meth:`memory_bank.MemoryBank.search`.

The cold index is built from stored vectors (no re-embedding) and rebuilt when the user's
archive changes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import numpy as np

from memory_bank.config import RetrievalConfig
from memory_bank.index import PartitionCache
from memory_bank.records import RETRIEVABLE_KINDS
from memory_bank.retrieval import rank
from memory_bank.stores import Storage, VectorBatch


class ColdTier:
    """Per-user indexes of archived memories, loaded lazily; counts how often it was consulted."""

    def __init__(
        self, storage: Storage, encoder_name: Callable[[], str], dim: Callable[[], int], max_users: int
    ) -> None:
        self._storage = storage
        self._encoder_name = encoder_name
        self._cache = PartitionCache(
            loader=self._load, state=storage.user_state, dim=dim, max_users=max_users
        )
        #: Searches that consulted the cold tier, and those that found something there.
        self.consulted = 0
        self.found = 0

    def _load(self, user_id: int, after_rowid: int, upto_rowid: int | None, texts: bool) -> VectorBatch:
        return self._storage.vectors(
            user_id, self._encoder_name(), RETRIEVABLE_KINDS, after_rowid, archived=True
        )

    def search(
        self,
        user_id: int,
        query: str,
        query_vector: np.ndarray,
        k: int,
        cfg: RetrievalConfig,
        *,
        now: dt.date,
        allowed_kinds: frozenset[str] | None = None,
    ) -> list[tuple[int, float]]:
        """The ``k`` best archived memories as ``(rowid, score)``, best first."""
        self.consulted += 1
        part = self._cache.get(user_id)
        if len(part) == 0:
            return []
        with part.lock:
            ranked = rank(part, query, query_vector, k, cfg, now=now, allowed_kinds=allowed_kinds)
            rowids = part.rowids[ranked.positions].tolist()
        if rowids:
            self.found += 1
        return list(zip(rowids, ranked.scores.tolist(), strict=True))

    def drop(self, user_id: int) -> None:
        self._cache.drop(user_id)
