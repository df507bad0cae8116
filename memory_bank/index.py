"""Per-user search partitions: a FAISS inner-product index and a CJK-aware BM25 index.

Each user has their own :class:`Partition`, built from the store's saved vectors (never by
re-embedding, never from a pickle) and extended in place as memories are added, so a search can
only ever see that user's memories. :class:`PartitionCache` keeps the most recently used
partitions in memory (LRU, bounded) and brings a partition up to date with the store when
another thread or process has written to it (see the counters in :mod:`memory_bank.storage`).

FAISS is used directly rather than through LangChain's ``FAISS`` vector store: that class keeps a
second copy of every text in an in-memory docstore, persists through pickle, and has no notion of
per-user partitions; here the SQLite store is the docstore and the index is a rebuildable cache.
"""

from __future__ import annotations

import collections
import math
import threading
from collections.abc import Callable, Sequence

import faiss
import numpy as np

from memory_bank.storage import VectorBatch
from memory_bank.text import tokenize

# BM25 parameters (Robertson & Zaragoza's usual values).
_K1, _B = 1.2, 0.75


class LexicalIndex:
    """An incremental BM25 index over the positions of one partition."""

    def __init__(self) -> None:
        self.postings: dict[str, tuple[list[int], list[int]]] = {}
        self.lengths: list[int] = []
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def add(self, texts: Sequence[str]) -> None:
        for text in texts:
            pos = len(self.lengths)
            toks = tokenize(text)
            self.lengths.append(len(toks))
            for tok, tf in collections.Counter(toks).items():
                plist = self.postings.setdefault(tok, ([], []))
                plist[0].append(pos)
                plist[1].append(tf)
                self._arrays.pop(tok, None)

    def scores(self, query_tokens: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Positions with a non-zero BM25 score and their scores."""
        n = len(self.lengths)
        if n == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        lengths = np.asarray(self.lengths, dtype=np.float32)
        avgdl = float(lengths.mean()) or 1.0
        acc = np.zeros(n, dtype=np.float32)
        for tok, qtf in collections.Counter(query_tokens).items():
            arrays = self._arrays.get(tok)
            if arrays is None:
                plist = self.postings.get(tok)
                if plist is None:
                    continue
                arrays = (np.asarray(plist[0], dtype=np.int64), np.asarray(plist[1], dtype=np.float32))
                self._arrays[tok] = arrays
            pos, tf = arrays
            idf = math.log(1.0 + (n - len(pos) + 0.5) / (len(pos) + 0.5))
            acc[pos] += qtf * idf * tf * (_K1 + 1) / (tf + _K1 * (1 - _B + _B * lengths[pos] / avgdl))
        hit = np.nonzero(acc)[0]
        return hit, acc[hit]


class Partition:
    """One user's searchable memories: vectors in FAISS, tokens in BM25, plus their dates/turns."""

    def __init__(self, dim: int, epoch: int = 0) -> None:
        self.dim = dim
        self.index = faiss.IndexFlatIP(dim)
        self.rowids = np.zeros(0, dtype=np.int64)
        self.kinds: list[str] = []
        self.dates: list[str] = []
        self.turns: list[int | None] = []
        self.lexical = LexicalIndex()
        self.epoch = epoch
        self.version = -1
        self.max_rowid = 0
        self._pos_of: dict[int, int] = {}
        self._by_day_turn: dict[tuple[str, int], int] = {}
        self.lock = threading.RLock()

    def __len__(self) -> int:
        return int(self.index.ntotal)

    def add(self, batch: VectorBatch) -> None:
        if not len(batch.rowids):
            return
        if batch.vectors.shape[1] != self.dim:
            raise ValueError(
                f"vector dimension {batch.vectors.shape[1]} does not match the index ({self.dim})"
            )
        start = len(self)
        self.index.add(np.ascontiguousarray(batch.vectors, dtype=np.float32))
        self.rowids = np.concatenate([self.rowids, batch.rowids.astype(np.int64)])
        self.kinds += batch.kinds
        self.dates += batch.dates
        self.turns += batch.turns
        self.lexical.add(batch.texts)
        for i, rowid in enumerate(batch.rowids.tolist()):
            pos = start + i
            self._pos_of[rowid] = pos
            turn = batch.turns[i]
            if batch.kinds[i] == "turn" and turn is not None:
                self._by_day_turn[(batch.dates[i], int(turn))] = pos
        self.max_rowid = max(self.max_rowid, int(batch.rowids.max()))

    def vectors_at(self, positions: np.ndarray) -> np.ndarray:
        """The stored (normalised) vectors at ``positions``, read from the FAISS index without a copy of all."""
        xb = faiss.rev_swig_ptr(self.index.get_xb(), len(self) * self.dim).reshape(len(self), self.dim)
        return xb[positions]

    def dense_top(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        k = min(k, len(self))
        if k == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        scores, pos = self.index.search(query.reshape(1, -1).astype(np.float32), k)
        keep = pos[0] >= 0
        return pos[0][keep].astype(np.int64), scores[0][keep]

    def neighbours(self, pos: int) -> tuple[int | None, int | None]:
        """Positions of the turns just before and after the turn at ``pos`` on the same day."""
        turn = self.turns[pos]
        if self.kinds[pos] != "turn" or turn is None:
            return None, None
        day = self.dates[pos]
        return self._by_day_turn.get((day, turn - 1)), self._by_day_turn.get((day, turn + 1))


class PartitionCache:
    """Bounded LRU of partitions, kept in step with the store.

    ``loader(user_id, after_rowid)`` returns the stored vectors appended since ``after_rowid``;
    ``state(user_id)`` returns the user's current ``(version, epoch)``.
    """

    def __init__(
        self,
        loader: Callable[[int, int], VectorBatch],
        state: Callable[[int], tuple[int, int]],
        dim: Callable[[], int],
        max_users: int = 256,
    ) -> None:
        self._loader = loader
        self._state = state
        self._dim = dim
        self.max_users = max_users
        self._parts: collections.OrderedDict[int, Partition] = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, user_id: int) -> Partition:
        """The user's partition, loaded lazily and refreshed if the store changed."""
        version, epoch = self._state(user_id)
        with self._lock:
            part = self._parts.get(user_id)
            if part is not None:
                self._parts.move_to_end(user_id)
            if part is None or part.epoch != epoch:
                part = Partition(self._dim(), epoch)
                self._parts[user_id] = part
                while len(self._parts) > self.max_users:
                    self._parts.popitem(last=False)
        with part.lock:
            if part.version != version:
                part.add(self._loader(user_id, part.max_rowid))
                part.version = version
        return part

    def drop(self, user_id: int) -> None:
        with self._lock:
            self._parts.pop(user_id, None)

    def clear(self) -> None:
        with self._lock:
            self._parts.clear()

    def __len__(self) -> int:
        return len(self._parts)
