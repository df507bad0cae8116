"""Candidate generation: which memories a search scores at all.

The candidates are the union of what each source names, of the kinds the query allows: the
``size`` nearest vectors (dense), the ``size`` best BM25 scores (lexical) and the memories on
days the query names; with ``neighbours`` on, the turns just before and after each of those
join them (the neighbour lift can carry a follow-up turn into the top k). The terms then score
the candidates *and* their neighbouring turns (:attr:`Candidates.scored`), since the lift and
the day evidence read the neighbours' scores; only :attr:`Candidates.ranked` are returned.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import threading
from collections.abc import Callable, Sequence

import numpy as np

from memory_bank import background
from memory_bank.retrieval.query import Context, once

#: A candidate source: positions of the partition for a context, given the pool size.
Source = Callable[[Context, int], np.ndarray]

#: Partitions of at least this many memories ask their sources concurrently: the first (the
#: dense search) on the calling thread, the others (BM25's scan) on a helper thread. Both spend
#: their time in C without the GIL (FAISS, the compiled scan): at a million memories they take
#: about 1.8 and 1.7 ms, 3.8 ms one after the other and 2.2 ms side by side; the whole search
#: at 100,000 memories went from 1.57 to 1.28 ms (medians of eight alternating passes). At
#: 10,000 it went from 0.88 to 0.91 ms: there the two take 0.2 and 0.15 ms, and handing work
#: to a thread and back costs more than the overlap saves.
CONCURRENT_FROM = 32_768

_helper: concurrent.futures.ThreadPoolExecutor | None = None
_helper_lock = threading.Lock()


def _helper_pool() -> concurrent.futures.ThreadPoolExecutor:
    global _helper
    with _helper_lock:
        if _helper is None:
            _helper = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="memorybank-candidates")
        return _helper


def _forget_helper() -> None:  # a forked child has no helper thread, only the parent's record of it
    global _helper, _helper_lock
    _helper, _helper_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_helper)


def ask_sources(sources: Sequence[Source], ctx: Context, pool: int) -> list[np.ndarray]:
    """Each source's positions for ``ctx``, in the order of ``sources``.

    In a partition of :data:`CONCURRENT_FROM` memories or more, every source but the first is
    asked on the helper thread while this thread asks the first. When the helper is still busy
    with another search's sources by then, this thread takes the work back and does it itself,
    so a search never waits in a queue: under load it is as fast as asking one after the other.
    The helper's work never outlives the call (the caller holds the partition's lock only until
    it returns): should the first source fail, the helper's is cancelled or waited for.
    """
    if len(sources) < 2 or len(ctx.part) < CONCURRENT_FROM:
        return [source(ctx, pool) for source in sources]
    rest = sources[1:]
    job = background.submit(_helper_pool, lambda: [source(ctx, pool) for source in rest])
    if job is None:  # the interpreter is shutting down
        return [source(ctx, pool) for source in sources]
    try:
        first = sources[0](ctx, pool)
    except BaseException:
        if not job.cancel():
            concurrent.futures.wait([job])
        raise
    if job.cancel():  # not started: the helper is busy elsewhere
        return [first, *(source(ctx, pool) for source in rest)]
    return [first, *job.result()]


def sorted_unique(positions: np.ndarray) -> np.ndarray:
    """``np.unique(positions)`` for the few hundred positions of a search, a third of the cost
    (``np.unique`` goes through a hash table and ``np.union1d`` through two uniques)."""
    out = np.sort(positions)
    if len(out) < 2:
        return out
    keep = np.empty(len(out), dtype=bool)
    keep[0] = True
    np.not_equal(out[1:], out[:-1], out=keep[1:])
    return out[keep]


def dense_top(ctx: Context, size: int) -> np.ndarray:
    """The ``size`` memories nearest to the query vector."""
    return ctx.part.dense_top(ctx.query.vector, size)[0]


def lexical_top(ctx: Context, size: int) -> np.ndarray:
    """Up to ``size`` memories with the best (non-zero) BM25 scores."""
    return ctx.bm25.top(size)[0]


def named_days(ctx: Context, size: int) -> np.ndarray:
    """Every memory on a day the query names (``size`` does not apply)."""
    return ctx.on_named_days


@dataclasses.dataclass(frozen=True, eq=False)
class Candidates:
    """The memories one search ranks and those it scores.

    ``ranked`` (ascending positions) are the candidates; ``scored`` (ascending) holds them and
    their neighbouring turns; ``prev`` and ``next`` give, per ranked position, the position of
    the turn before and after it on the same day (-1: none, or neighbours off).
    """

    ranked: np.ndarray
    scored: np.ndarray
    prev: np.ndarray
    next: np.ndarray

    @once
    def ranked_at(self) -> np.ndarray:
        """Where each ranked position sits in ``scored``."""
        return np.searchsorted(self.scored, self.ranked)

    def at(self, positions: np.ndarray) -> np.ndarray:
        """Where each of ``positions`` (all in ``scored``) sits in ``scored``."""
        return np.searchsorted(self.scored, positions)


@dataclasses.dataclass(frozen=True)
class CandidateStep:
    """Candidate generation from ``sources``, each asked for ``max(size, k)`` positions."""

    sources: Sequence[Source]
    size: int = 64
    neighbours: bool = True

    def __call__(self, ctx: Context, k: int) -> Candidates | None:
        """The candidates of a search for ``k`` memories, ``None`` when there are none."""
        pool = max(self.size, k)
        found = ask_sources(self.sources, ctx, pool)
        ranked = ctx.of_allowed_kinds(sorted_unique(np.concatenate(found)))
        if not len(ranked):
            return None
        part = ctx.part
        if self.neighbours:
            pairs = part.neighbour_pairs(ranked).ravel()
            around = ctx.of_allowed_kinds(pairs[pairs >= 0])
            ranked = sorted_unique(np.concatenate([ranked, around]))
            pairs = part.neighbour_pairs(ranked)
            prev, nxt = pairs[:, 0], pairs[:, 1]
            flat = pairs.ravel()
            scored = sorted_unique(np.concatenate([ranked, flat[flat >= 0]]))
        else:
            prev = nxt = np.full(len(ranked), -1, dtype=np.int64)
            scored = ranked
        return Candidates(ranked, scored, prev, nxt)
