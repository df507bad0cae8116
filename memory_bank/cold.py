"""The cold tier: forgotten memories that retrieval still consults when the live ones match poorly.

A forgetting pass archives a memory: it leaves the live index, so the index stays small and
searches stay fast and sharp. With ``forgetting.cold_tier`` on, a search whose best live score is
below ``forgetting.cold_below`` also ranks the archived memories: forgetting then costs latency
on the searches that find nothing good, not knowledge (the human "it comes back to me"). A cold
memory that is recalled is restored to the live tier by :meth:`memory_bank.MemoryBank.search`.

Two ways to rank them (``forgetting.cold_rank``):

* ``joint`` (default): one candidate set of live *and* forgotten memories, ranked by the bank's
  pipeline with one more term, :class:`~memory_bank.retrieval.terms.ColdPenalty`
  (``cold_penalty`` off a forgotten memory's score). Every other term sees both tiers, as with
  forgetting off: BM25 is normalised over both, a day's evidence and a turn's neighbours are
  found across them.
* ``separate``: the archived memories are ranked on their own index and the two lists merged by
  score (each tier normalised on its own, neighbours and day evidence within a tier only).

Both are one ranking (:meth:`ColdTier.search`), the penalty its option. Which memories are
forgotten is decided at the search's ``now`` from the clock (``MemoryBank._live_now``), not
read from what a pass persisted, so a search writes nothing. Memories the user hid
(``MemoryBank.archive``) are in neither index: the cold tier never brings them back.

The indexes are built from stored vectors (no re-embedding) and refreshed when the user's
memories change.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Sequence

import numpy as np

from memory_bank.config import RetrievalConfig
from memory_bank.index import Partition, PartitionCache
from memory_bank.records import RETRIEVABLE_KINDS
from memory_bank.retrieval import ColdPenalty, Query, bank_pipeline
from memory_bank.retrieval.query import member
from memory_bank.stores import Storage, VectorBatch


class ColdTier:
    """Per-user indexes of archived memories (``separate``) or of all memories (``joint``),
    loaded lazily; counts how often the tier was consulted."""

    def __init__(
        self, storage: Storage, encoder_name: Callable[[], str], dim: Callable[[], int], max_users: int
    ) -> None:
        self._storage = storage
        self._encoder_name = encoder_name
        self._cache = PartitionCache(
            loader=self._load, state=storage.user_counters, dim=dim, max_users=max_users
        )
        self._all = PartitionCache(
            loader=self._load_all,
            state=storage.user_counters,
            dim=dim,
            max_users=max_users,
            tiers_kept=lambda: True,
        )
        #: user -> ((version, epoch, tiers), day, max rowid examined, live rowids, the buffer
        #: they are a leading view of, with room for rowids added later)
        self._live: dict[int, tuple[tuple[int, int, int], str, int, np.ndarray, np.ndarray]] = {}
        #: Held while an entry of ``_live`` is replaced, or its buffer written past a view's end
        #: (searches of one user on several threads grow one buffer).
        self._live_lock = threading.Lock()
        self._max_users = max_users
        #: Searches that consulted the cold tier, and those that found something there.
        self.consulted = 0
        self.found = 0

    # Loaders of the two caches; neither has a lexical snapshot, so they always read texts.
    def _load(
        self, user_id: int, after_rowid: int, upto_rowid: int | None = None, texts: bool = True
    ) -> VectorBatch:
        return self._storage.vectors(
            user_id,
            self._encoder_name(),
            RETRIEVABLE_KINDS,
            after_rowid,
            archived=True,
            upto_rowid=upto_rowid,
        )

    def _load_all(
        self, user_id: int, after_rowid: int, upto_rowid: int | None = None, texts: bool = True
    ) -> VectorBatch:
        return self._storage.vectors(
            user_id,
            self._encoder_name(),
            RETRIEVABLE_KINDS,
            after_rowid,
            archived=None,
            upto_rowid=upto_rowid,
        )

    def live_rowids(
        self,
        user_id: int,
        state: tuple[int, int, int],
        day: str,
        compute: Callable[[], tuple[np.ndarray, int]],
        added: Callable[[int], tuple[np.ndarray, int]] | None = None,
    ) -> np.ndarray:
        """The rowids (ascending) of the user's memories live on ``day`` at store ``state``
        (version, epoch, tiers): what a joint ranking needs to tell the tiers apart.
        ``compute()`` finds them all and the highest rowid it examined; when only memories were
        added since (same epoch, tiers and day), ``added(after_rowid)`` finds the live ones among
        those after ``after_rowid``, so a search after each new turn costs the new turns, not
        the history. A tier move (revive, forget) recomputes this set only: the partition
        holding both tiers stays as it is."""
        version, epoch, tiers = state
        hit = self._live.get(user_id)
        if hit is not None and hit[0][1:] == (epoch, tiers) and hit[1] == day:
            if hit[0][0] == version:
                return hit[3]
            if added is not None:
                new, top = added(hit[2])
                with self._live_lock:
                    if self._live.get(user_id) is not hit:
                        # Another search grew or replaced the set meanwhile and may have written
                        # past this one's end in the shared buffer: join without writing into it.
                        return np.union1d(hit[3], new) if len(new) else hit[3]
                    rowids, spare = _appended(hit[3], hit[4], new)
                    self._live[user_id] = (state, day, max(top, hit[2]), rowids, spare)
                return rowids
        rowids, top = compute()
        with self._live_lock:
            if user_id not in self._live and len(self._live) >= self._max_users:
                self._live.pop(next(iter(self._live)))
            self._live[user_id] = (state, day, top, rowids, rowids)
        return rowids

    def live_cached(self, user_id: int, state: tuple[int, int, int], day: str) -> bool:
        """Whether :meth:`live_rowids` at ``state`` on ``day`` would answer without ``compute``."""
        hit = self._live.get(user_id)
        return hit is not None and hit[0][1:] == state[1:] and hit[1] == day

    def revived(self, user_id: int, before: tuple[int, int, int], day: str, rowids: Sequence[int]) -> None:
        """Bring the cached live set along with a chat reply's write that brought ``rowids``
        back from the cold tier on ``day`` (recalled, so live again: retention 1 that day),
        when the cache was current at ``before``, the user's counters just before that write.

        Such a write moves the tier counter by one, which would otherwise recompute the set from
        every memory (1.8 s at a million memories), on each reply that used a forgotten memory.
        The entry keeps ``before``'s version, so the next search still examines the new turn
        (see :meth:`live_rowids`); any other writer's tier move makes the counters disagree and
        the set is recomputed as before."""
        with self._live_lock:
            hit = self._live.get(user_id)
            if hit is None or hit[0] != before or hit[1] != day or not len(rowids):
                return
            live = hit[3]
            new = np.unique(np.asarray(rowids, dtype=np.int64))
            new = new[~member(new, live)] if len(live) else new
            if len(new):
                live = np.insert(live, np.searchsorted(live, new), new)
            version, epoch, tiers = before
            self._live[user_id] = ((version, epoch, tiers + 1), day, hit[2], live, live)

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
        live_rowids: np.ndarray | None = None,
        penalty: float = 0.0,
        part: Partition | None = None,
    ) -> list[tuple[int, float]]:
        """The ``k`` best memories as ``(rowid, score)``, best first, by the bank's pipeline.

        With ``live_rowids`` (ascending; ``joint``): all the user's memories, live and
        forgotten, as one candidate set, a memory whose rowid is not among them scoring
        ``penalty`` less; ``part`` is that set when the caller holds it (the bank's own
        partition, which holds both tiers when the cold tier is ranked on every search).
        Without (``separate``): the forgotten memories only."""
        self.consulted += 1
        if part is None:
            part = (self._all if live_rowids is not None else self._cache).get(user_id)
        if len(part) == 0:
            return []
        pipeline = bank_pipeline(cfg)
        if live_rowids is not None and penalty > 0:
            pipeline = pipeline.with_term(ColdPenalty(penalty, live_rowids))
        with part.lock:
            parsed = Query.parse(part, query, query_vector, now=now, allowed_kinds=allowed_kinds)
            ranked = pipeline.rank(part, parsed, k)
            rowids = part.rowids[ranked.positions]
        if len(rowids) and (live_rowids is None or not bool(np.all(member(rowids, live_rowids)))):
            self.found += 1
        return list(zip(rowids.tolist(), ranked.scores.tolist(), strict=True))

    def clear(self) -> None:
        """Forget every index and live set (the store's encoder changed)."""
        self._cache.clear()
        self._all.clear()
        with self._live_lock:
            self._live.clear()

    def drop(self, user_id: int) -> None:
        self._cache.drop(user_id)
        self._all.drop(user_id)
        with self._live_lock:
            self._live.pop(user_id, None)


def _appended(live: np.ndarray, spare: np.ndarray, new: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ascending rowids ``live`` (a leading view of the buffer ``spare``) with ``new``, the
    rowids of memories added since, joined: ``(joined, its buffer)``.

    New memories have rowids above every one examined before, so they go at the end, written
    into the buffer's spare room: a search after each chat turn costs the new turns, not a sort
    of the whole history (``np.union1d`` of a million rowids took 2.5 s). What an earlier view
    shows is never written over, so views handed out before stay valid."""
    if not len(new):
        return live, spare
    new = np.unique(new)
    n = len(live)
    if n and new[0] <= live[-1]:  # not above: a plain union (not the append path)
        joined = np.union1d(live, new)
        return joined, joined
    if len(spare) < n + len(new) or not np.may_share_memory(live, spare):  # bounds only: O(1)
        grown = np.empty(max(2 * (n + len(new)), 1024), dtype=np.int64)
        grown[:n] = live
        spare = grown
    spare[n : n + len(new)] = new
    return spare[: n + len(new)], spare
