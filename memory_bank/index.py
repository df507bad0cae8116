"""Per-user search partitions: vectors searched with FAISS and a CJK-aware BM25 index.

Each user has their own :class:`Partition`, built from the store's saved vectors (never by
re-embedding, never from a pickle) and extended in place as memories are added, so a search can
only ever see that user's memories. :class:`PartitionCache` keeps the most recently used
partitions in memory (LRU, bounded) and brings a partition up to date with the store when
another thread or process has written to it (see the counters in :mod:`memory_bank.stores.base`).

The vectors are one numpy buffer with room for appends, which FAISS reads in place (exact
search with ``faiss.knn``, re-scoring with ``fvec_inner_products_by_idx``): a restart keeps the
buffer the store's load filled instead of copying it into an index. Dense search is exact up to
:data:`EXACT_SEARCH_LIMIT` memories in a partition. Above it, an exact scan reads every vector
for every query (154 MB at 100,000 memories of 384 dimensions: 10-20 ms), so the partition also
keeps a product-quantised code of every memory (:mod:`memory_bank.dense_codes`, 48 bytes at 384
dimensions), finds the :func:`rescore_size` memories whose codes score best and re-scores those
exactly. The codebook is trained once, when a partition first needs codes, and is saved with the
codes in the lexical snapshot, so a restart neither trains nor encodes. From
:data:`LIST_SEARCH_LIMIT` memories the codes are also grouped in inverted lists and a query
scans only the lists nearest to it (:mod:`memory_bank.dense_lists`), so the first stage stops
growing with the partition. The recall against exact search is measured by ``memorybank bench``
and ``scripts/bench_recall.py`` (real queries; see :data:`RESCORE_SQRT`).

FAISS is used directly rather than through LangChain's ``FAISS`` vector store: that class keeps a
second copy of every text in an in-memory docstore, persists through pickle, and has no notion of
per-user partitions; here the SQLite store is the docstore and the index is a rebuildable cache.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import logging
import math
import sys
import threading
from collections.abc import Callable, Iterable, Sequence

import faiss
import numpy as np

from memory_bank import background, native
from memory_bank.bm25 import Bm25Query
from memory_bank.day_positions import DayPositions
from memory_bank.dense_codes import MIN_TRAIN, DenseCodes
from memory_bank.dense_lists import DenseLists
from memory_bank.lexical_snapshot import LexicalSnapshot
from memory_bank.stores import VectorBatch
from memory_bank.text import is_question, mend, tokenize
from memory_bank.topk import stable_top, top_positive
from memory_bank.turn_keys import TurnKeys
from memory_bank.vector_blocks import SEAL_MIN

logger = logging.getLogger(__name__)

# BM25 parameters (Robertson & Zaragoza's usual values).
_K1, _B = 1.2, 0.75

#: BM25's posting scan in C where it is built; the NumPy path gives the same bits.
_compiled_scan = native.scan_runs

#: Partitions with more memories than this (and at least ``dense_codes.MIN_TRAIN``) search
#: their dense codes, then re-score exactly.
EXACT_SEARCH_LIMIT = 8_192
#: Memories re-scored exactly per query in approximate mode: at least this many, ...
RESCORE = 512
#: ... and ``RESCORE_SQRT * sqrt(n)`` in a partition of n memories: the codes tell close
#: vectors apart less well as n grows. On real (MiniLM) queries over the bench's vectors the
#: final top 5 against exact search has recall 99.8% at 83k memories (1,295 re-scored), 100%
#: at 283k (2,392) and at 1M (4,459; 2,973 gave 99.8%, 1,982 98.8%), and the dense top 64
#: 99.7% at 10k with 512 (``scripts/bench_recall.py``, ``docs/perf/recall-pq-round6.json``).
RESCORE_SQRT = 4.5
#: Approximate partitions with at least this many memories also group their dense codes in
#: inverted lists and scan only the lists nearest to the query (:mod:`memory_bank.dense_lists`).
#: Below it the lists do not pay: at 33k and 53k memories they measured no faster than the flat
#: scan (and at 12k lost recall), while learning them costs a few seconds once
#: (``scripts/bench_recall.py --list-limit``, ``docs/perf/scale.md``, round 7).
LIST_SEARCH_LIMIT = 65_536


def rescore_size(n: int) -> int:
    """Memories re-scored exactly per query in a partition of ``n`` (see :data:`RESCORE`)."""
    return max(RESCORE, int(RESCORE_SQRT * math.sqrt(n)))


class _one_thread:  # a context manager used like a function: ``with _one_thread():``
    """Run a FAISS call on the calling thread only. One query is too little work to share:
    waking OpenMP threads costs more than it saves, and 4-10x more when the cores are busy.
    (``omp_set_num_threads`` sets a per-thread value, so other threads are not affected.)
    A class rather than a generator: a search enters it three times."""

    __slots__ = ("previous",)

    def __enter__(self) -> None:
        self.previous = faiss.omp_get_max_threads()
        if self.previous != 1:
            faiss.omp_set_num_threads(1)

    def __exit__(self, *exc: object) -> None:
        if self.previous != 1:
            faiss.omp_set_num_threads(self.previous)


#: A snapshot's inverted lists: centroids, each memory's list number, the size trained at.
_StoredLists = tuple[np.ndarray, np.ndarray, int]


def _stored_lists(codes: DenseCodes) -> _StoredLists | None:
    lists = codes.lists
    return None if lists is None else (lists.centroids, lists.lists.copy(), lists.trained_at)


def _with_rows(buf: np.ndarray, n: int, rows: np.ndarray, spare: bool = False) -> np.ndarray:
    """``buf`` (rows ``[0, n)`` in use) with ``rows`` written at ``n``, growing as :func:`_grow`.

    With ``spare`` (``rows`` are the leading rows of a buffer made for them, with room after
    them: see :attr:`memory_bank.stores.VectorBatch.spare`), the first rows of an empty buffer
    are kept in that buffer, which saves a copy of every vector at a restart (1.5 GB at a
    million memories); anything else is copied, so no caller's array is ever written to."""
    base = rows.base
    if (
        spare
        and n == 0
        and isinstance(base, np.ndarray)
        and base.ndim == 2
        and base.dtype == np.float32
        and base.shape[1] == rows.shape[1]
        and base.flags.c_contiguous
        and base.flags.writeable
        and rows.flags.c_contiguous
        and base.ctypes.data == rows.ctypes.data
    ):
        return base
    buf = _grow(buf, n + len(rows))
    buf[n : n + len(rows)] = rows
    return buf


def _grow(buf: np.ndarray, need: int) -> np.ndarray:
    """``buf`` with room for ``need`` rows (capacity doubles, so appends are amortised O(1))."""
    if need <= len(buf):
        return buf
    out = np.empty((max(need, 2 * len(buf), 16), *buf.shape[1:]), dtype=buf.dtype)
    out[: len(buf)] = buf
    return out


def echo_share(
    starts: np.ndarray, ids: np.ndarray, positions: np.ndarray, query_ids: np.ndarray
) -> np.ndarray:
    """For each of ``positions``, the share of the query's token ids (``query_ids``, distinct;
    negative: unknown to the index) among its user words (``ids[starts[p]:starts[p + 1]]``):
    ``|U & Q| / max(|U|, |Q|)``, 0 without user words (float64). The compiled loop where it
    is built, else :func:`numpy_echo_share`: the same numbers."""
    if native.echo_share is None or not len(query_ids):
        return numpy_echo_share(starts, ids, positions, query_ids)
    out = np.empty(len(positions), dtype=np.float64)
    native.echo_share(
        starts,
        ids,
        np.ascontiguousarray(positions, dtype=np.int64),
        np.ascontiguousarray(query_ids, dtype=np.int32),
        out,
    )
    return out


def numpy_echo_share(
    starts: np.ndarray, ids: np.ndarray, positions: np.ndarray, query_ids: np.ndarray
) -> np.ndarray:
    """:func:`echo_share` in NumPy."""
    out = np.zeros(len(positions), dtype=np.float64)
    q = query_ids
    if not len(q) or not len(positions):
        return out
    first, ends = starts[positions], starts[positions + 1]
    sizes = ends - first
    has = sizes > 0
    if not has.any():
        return out
    first, counts = first[has], sizes[has]
    offsets = np.cumsum(counts) - counts  # where each memory's ids start in the gathered run
    flat = ids[np.repeat(first - offsets, counts) + np.arange(int(counts.sum()))]
    wanted = np.zeros(max(int(q.max()), int(flat.max())) + 1, dtype=np.int64)
    wanted[q[q >= 0]] = 1  # unknown query tokens (negative ids) match nothing
    common = np.add.reduceat(wanted[flat], offsets)
    out[has] = common / np.maximum(counts, len(q))
    return out


class _TailRun:
    """One token's postings appended since the last merge (positions ascending), in arrays with
    room to grow. A search reads them as views: converting Python lists on every query cost
    0.2 ms at a million memories (the tail then holds up to an eighth of the postings), and
    the lists held four to five times the memory."""

    __slots__ = ("n", "pos", "tf")

    def __init__(self) -> None:
        self.pos = np.empty(4, dtype=np.int32)
        self.tf = np.empty(4, dtype=np.float32)
        self.n = 0

    def append(self, pos: int, tf: int) -> None:
        n = self.n
        if n == len(self.pos):
            self.pos = _grow(self.pos, n + 1)
            self.tf = _grow(self.tf, n + 1)
        self.pos[n] = pos
        self.tf[n] = tf
        self.n = n + 1


class LexicalIndex:
    """An incremental BM25 index over the positions of one partition.

    Postings live in a compressed sparse layout (for each token id, a run of positions and one
    of term frequencies) plus a small tail of Python lists for documents added since the last
    merge; the tail is merged in when it passes an eighth of the main part, so appending a
    document costs amortised O(its tokens) and a search never converts long lists to arrays.
    Token strings are interned, so partitions of many users share them.
    """

    #: Batches of at least this many documents (and an eighth of those indexed already) go
    #: straight into the sparse arrays; smaller ones join the tail, which is merged once it
    #: passes an eighth of the postings (a merge rewrites them all: 0.4 s at a million).
    BULK = 256

    def __init__(self) -> None:
        self._vocab: dict[str, int] = {}
        self._starts = np.zeros(1, dtype=np.int64)  # CSR row pointers, one row per token id
        # Positions as int32 and frequencies as uint16 (float32 once a count passes 65,535):
        # 6 bytes a posting instead of 12, and a snapshot's arrays are used as stored (no
        # conversion at a restart: 0.4 s and 200 MB at a million memories); the scan converts
        # each as it reads it.
        self._pos = np.zeros(0, dtype=np.int32)
        self._tf: np.ndarray = np.zeros(0, dtype=np.uint16)
        self._tail: dict[int, _TailRun] = {}
        self._tail_size = 0
        self._lengths = np.zeros(0, dtype=np.float32)
        self._length_sum = 0  # of every document's token count, exact (the lengths are integers)
        self._norms: np.ndarray | None = None
        self._n = 0
        #: Whether scans use the compiled loop (where it is built); the same scores either way.
        self.compiled = _compiled_scan is not None

    def __len__(self) -> int:
        return self._n

    @property
    def lengths(self) -> np.ndarray:
        """Token count of every document, by position."""
        return self._lengths[: self._n]

    def _tid(self, tok: str) -> int:
        tid = self._vocab.get(tok)
        if tid is None:
            tid = self._vocab[sys.intern(tok)] = len(self._vocab)
        return tid

    def token_ids(self, tokens: Iterable[str], *, add: bool = False) -> np.ndarray:
        """The distinct ids of ``tokens`` (``int32``); unknown ones are added (``add``) or -1."""
        if add:
            return np.asarray(sorted({self._tid(t) for t in tokens}), dtype=np.int32)
        return np.asarray(
            sorted({self._vocab.get(t, -1 - i) for i, t in enumerate(set(tokens))}), dtype=np.int32
        )

    def add(self, texts: Sequence[str]) -> None:
        start = self._n
        self._lengths = _grow(self._lengths, start + len(texts))
        lengths = self._lengths
        tid_of = self._tid
        if len(texts) >= max(self.BULK, start // 8):
            tids: list[int] = []
            pos: list[int] = []
            tfs: list[int] = []
            for i, text in enumerate(texts):
                toks = tokenize(text)
                lengths[start + i] = len(toks)
                counts = collections.Counter(toks)
                tids += [tid_of(t) for t in counts]
                pos += [start + i] * len(counts)
                tfs += counts.values()
            self._length_sum += int(lengths[start : start + len(texts)].astype(np.int64).sum())
            self._n = start + len(texts)
            self._merge(tids, pos, tfs)
            return
        tail = self._tail
        for i, text in enumerate(texts):
            toks = tokenize(text)
            lengths[start + i] = len(toks)
            for tok, tf in collections.Counter(toks).items():
                run = tail.get(tid := tid_of(tok))
                if run is None:
                    run = tail[tid] = _TailRun()
                run.append(start + i, tf)
            self._tail_size += len(toks)
        self._length_sum += int(lengths[start : start + len(texts)].astype(np.int64).sum())
        self._n = start + len(texts)
        if self._tail_size > max(4096, len(self._pos) // 8):
            self._merge([], [], [])

    def load(self, snap: LexicalSnapshot) -> None:
        """Become the index ``snap`` describes (an empty index only: a partition's first batch)."""
        assert self._n == 0, "a snapshot loads into an empty index"
        self._vocab = {sys.intern(tok): i for i, tok in enumerate(snap.vocab)}
        self._starts = np.asarray(snap.starts, dtype=np.int64)
        self._pos = np.asarray(snap.pos, dtype=np.int32)
        self._tf = snap.tf if snap.tf.dtype in (np.uint16, np.float32) else snap.tf.astype(np.float32)
        self._lengths = np.asarray(snap.lengths, dtype=np.float32)
        self._length_sum = int(np.asarray(snap.lengths, dtype=np.int64).sum())
        self._n = len(snap.lengths)

    def arrays(self) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Vocabulary, CSR postings (starts, positions, frequencies) and lengths, the tail
        merged in first: what a :class:`LexicalSnapshot` holds of this index."""
        if self._tail:
            self._merge([], [], [])
        vocab = list(self._vocab)  # in id order: ids are given in insertion order
        starts = self._starts
        if len(starts) < len(vocab) + 1:  # tokens seen only in queries' user words so far
            starts = np.concatenate([starts, np.full(len(vocab) + 1 - len(starts), starts[-1])])
        return vocab, starts, self._pos, self._tf, self.lengths

    def _merge(self, tids: list[int], pos: list[int], tfs: list[int]) -> None:
        """Fold the tail and the postings ``(tids, pos, tfs)`` of newer documents into the
        sparse arrays. Every position folded in is after every position already there (a
        partition only appends), so each token's run becomes its old run followed by its new
        postings, oldest first: the new postings are sorted by token (a stable sort of those
        alone), and the old runs are copied across in blocks, one between each two tokens
        that gained postings. Sorting every posting again cost 2.3 s at a million memories
        (a restart with a few hundred memories newer than the stored snapshot)."""
        runs = list(self._tail.items())
        tail_t = np.repeat(
            np.fromiter((tid for tid, _ in runs), dtype=np.int64, count=len(runs)),
            np.fromiter((run.n for _, run in runs), dtype=np.int64, count=len(runs)),
        )
        new_t = np.concatenate([tail_t, np.asarray(tids, dtype=np.int64)])
        order = np.argsort(new_t, kind="stable")
        new_p = np.concatenate([*(run.pos[: run.n] for _, run in runs), np.asarray(pos, dtype=np.int32)])[
            order
        ]
        new_f = np.concatenate([*(run.tf[: run.n] for _, run in runs), np.asarray(tfs, dtype=np.float32)])[
            order
        ]
        vocab = len(self._vocab)
        old_starts = self._starts.tolist()
        old_starts += [old_starts[-1]] * (vocab + 1 - len(old_starts))  # tokens new since the last merge
        gained = np.bincount(new_t, minlength=vocab)
        starts = np.zeros(vocab + 1, dtype=np.int64)
        np.cumsum(np.diff(np.asarray(old_starts, dtype=np.int64)) + gained, out=starts[1:])
        # Counts as uint16 where every one fits (half the memory; the scan reads either).
        small = (not len(new_f) or float(new_f.max()) < 65536) and (
            self._tf.dtype == np.uint16 or not len(self._tf) or float(self._tf.max()) < 65536
        )
        out_pos = np.empty(int(starts[-1]), dtype=np.int32)
        out_tf = np.empty(int(starts[-1]), dtype=np.uint16 if small else np.float32)
        at = starts.tolist()
        first = 0  # the first token whose old run is not copied yet
        taken = 0  # new postings placed
        for t in np.flatnonzero(gained).tolist():
            lo, hi, to = old_starts[first], old_starts[t + 1], at[first]
            out_pos[to : to + hi - lo] = self._pos[lo:hi]
            out_tf[to : to + hi - lo] = self._tf[lo:hi]
            k = int(gained[t])
            out_pos[at[t + 1] - k : at[t + 1]] = new_p[taken : taken + k]
            out_tf[at[t + 1] - k : at[t + 1]] = new_f[taken : taken + k]
            taken += k
            first = t + 1
        lo, to = old_starts[first], at[first]
        out_pos[to:] = self._pos[lo:]
        out_tf[to:] = self._tf[lo:]
        self._pos, self._tf, self._starts = out_pos, out_tf, starts
        self._tail = {}
        self._tail_size = 0

    def _posting_parts(self, token: str) -> list[tuple[np.ndarray, np.ndarray]]:
        """``token``'s postings as (positions, frequencies) runs, ascending and disjoint: the
        sparse arrays' and the tail's (views both), so a search never copies a long run to join
        it with the postings appended since the last merge, nor converts those."""
        tid = self._vocab.get(token)
        if tid is None:
            return []
        parts: list[tuple[np.ndarray, np.ndarray]] = []
        if tid + 1 < len(self._starts):
            a, b = self._starts[tid], self._starts[tid + 1]
            if b > a:
                parts.append((self._pos[a:b], self._tf[a:b]))
        run = self._tail.get(tid)
        if run is not None:
            parts.append((run.pos[: run.n], run.tf[: run.n]))
        return parts

    def _norm_terms(self) -> tuple[float, float]:
        """``(c0, c1)`` such that a document's length norm ``K1 * (1 - B + B * length / avgdl)``
        is ``length * c1 + c0``, each a float32 (the scan computes it so, in float32, as it
        reads each posting: nothing is recomputed for every document after an add). The
        average length is kept as an exact running sum, so no pass over the lengths finds it."""
        avgdl = self._length_sum / self._n if self._n else 0.0
        return float(np.float32(_K1 * (1 - _B))), float(np.float32(_K1 * _B / (avgdl or 1.0)))

    def _length_norms(self) -> np.ndarray:
        """Every document's length norm, ``length * c1 + c0`` in float32 (see :meth:`_norm_terms`),
        for the NumPy scan; cached until the next add."""
        if self._norms is None or len(self._norms) != self._n:
            c0, c1 = self._norm_terms()
            norms = np.multiply(self.lengths, np.float32(c1))
            np.add(norms, np.float32(c0), out=norms)
            self._norms = norms
        return self._norms

    def _weighted(self, query_tokens: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray, float]]:
        """The postings runs of ``query_tokens`` with their weights ``qtf * idf``, token by token."""
        n = self._n
        weighted: list[tuple[np.ndarray, np.ndarray, float]] = []
        for tok, qtf in collections.Counter(query_tokens).items():
            runs = self._posting_parts(tok)
            df = sum(len(pos) for pos, _ in runs)
            if df:
                idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
                weighted += [(pos, tf, qtf * idf) for pos, tf in runs]
        return weighted

    def score_array(self, query_tokens: Sequence[str]) -> np.ndarray:
        """The BM25 score of every position (0 where no query token occurs).

        Each score is ``sum of idf * tf * (K1 + 1) / (length norm + tf)`` over the query tokens,
        computed in float32 in exactly this order of operations (see :meth:`_norm_terms`).
        """
        return self.score_top(query_tokens, 0)[0]

    def score_top(self, query_tokens: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`score_array`, with its ``k`` best positive positions and their scores as
        :func:`memory_bank.topk.top_positive` gives them. The compiled scan finds them as it
        goes, a span of positions at a time (no second pass over the scores)."""
        n = self._n
        k = max(0, min(k, n))  # a search may ask for any number of memories
        weighted = self._weighted(query_tokens)
        if self.compiled and _compiled_scan is not None:
            acc = np.empty(n, dtype=np.float32)  # the scan sets every score
            positions = np.empty(k, dtype=np.int64)
            best = np.empty(k, dtype=np.float32)
            c0, c1 = self._norm_terms()
            count = _compiled_scan(acc, self.lengths, c0, c1, weighted, _K1 + 1, positions, best)
            return acc, positions[:count], best[:count]
        acc = np.zeros(n, dtype=np.float32)
        norms = self._length_norms()
        for pos, tf, w in weighted:  # element by element, so the same numbers whatever the runs
            tf = tf.astype(np.float32, copy=False)
            part = tf * w
            part *= _K1 + 1
            denom = norms.take(pos)
            denom += tf
            part /= denom
            # Positions are distinct within a token, so this is one add each, as acc[pos] +=
            # part would be; np.add.at is the faster of the two (NumPy 2.4, sorted positions:
            # 94 against 192 us for 43k of 100k, 1.3-1.7 against 2.6-3.5 ms for 430k of 1M).
            np.add.at(acc, pos, part)
        return (acc, *top_positive(acc, k))

    def scores(self, query_tokens: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Positions with a non-zero BM25 score and their scores."""
        acc = self.score_array(query_tokens)
        hit = np.flatnonzero(acc)
        return hit, acc[hit]

    def query(self, query_tokens: Sequence[str]) -> Bm25Query:
        """BM25 of ``query_tokens`` over this index as it is now: the best positions, the best
        score and the scores of any positions (see :mod:`memory_bank.bm25`). A query word the
        index does not hold is read as the known word(s) it was probably meant as, where there
        are any (:func:`memory_bank.text.mend`: a typo, two words run together)."""
        vocab = self._vocab
        tokens = [m for t in query_tokens for m in ([t] if t in vocab else (mend(t, vocab) or [t]))]
        return Bm25Query(self, tokens)


class Partition:
    """One user's searchable memories: vectors in FAISS, tokens in BM25, plus their dates/turns."""

    def __init__(self, dim: int, epoch: int = 0) -> None:
        self.dim = dim
        # The vectors, rows [0, n) of a buffer with room for appends (see _with_rows): FAISS
        # reads them in place, so a restart holds one copy of them, not two.
        self._vecs = np.zeros((0, dim), dtype=np.float32)
        self._rowids = np.zeros(0, dtype=np.int64)
        self.kinds: list[str] = []
        self.dates: list[str] = []
        self.turns: list[int | None] = []
        self.lexical = LexicalIndex()
        self.epoch = epoch
        self.version = -1
        #: The user's tier counter when this partition was last brought up to date.
        self.tiers = -1
        self.max_rowid = 0
        self.exact_limit = EXACT_SEARCH_LIMIT
        self.list_limit = LIST_SEARCH_LIMIT
        self._codes: DenseCodes | None = None
        # A stored codebook and the codes of the first positions (a snapshot's), with their
        # inverted lists (centroids, list numbers, size trained at) if any, until used.
        self._stored_codes: tuple[np.ndarray, np.ndarray, _StoredLists | None] | None = None
        self._idle_lists: DenseLists | None = None  # set aside by set_list_limit, for reuse
        #: Whether this partition trained its dense codes or their inverted lists (rather than
        #: reading stored ones): then its snapshot is worth storing again.
        self.codes_trained = False
        self._days = DayPositions()
        self._years_desc: tuple[int, ...] | None = None  # sorted years, until the next add
        # The positions holding each (day, turn), kept equal to looking the neighbours up at
        # query time (duplicates included).
        self._keys = TurnKeys(self._days.number)
        self._nbrs = np.zeros((0, 2), dtype=np.int64)  # previous, next turn position; -1: none
        self._day_ids = np.zeros(0, dtype=np.int32)  # per position: its day's number in _days
        # The distinct token ids of each memory's user words when they ask a question, as CSR rows.
        self._user_starts = np.zeros(1, dtype=np.int64)
        self._user_ids = np.zeros(0, dtype=np.int32)
        self._unanswered = np.zeros(0, dtype=bool)  # per position: a question answered by a question
        self._n = 0
        self.lock = threading.RLock()
        #: An add into it failed midway (see :meth:`PartitionCache.get`): it is not used again.
        self.broken = False

    def __len__(self) -> int:
        return self._n

    @property
    def rowids(self) -> np.ndarray:
        """The store rowid of every position (a view: appending a memory copies nothing)."""
        return self._rowids[: self._n]

    @property
    def approximate(self) -> bool:
        """Whether dense search goes through the dense codes (more than ``exact_limit``
        memories, and enough to train codes on)."""
        return self._codes is not None

    def _wants_codes(self) -> bool:
        return len(self) > max(self.exact_limit, MIN_TRAIN - 1)

    def set_exact_limit(self, limit: int) -> None:
        """Search exactly up to ``limit`` memories (e.g. to measure the approximation's recall)."""
        with self.lock:
            self.exact_limit = limit
            if not self._wants_codes():
                if self._codes is not None:  # kept, so that raising the limit back trains nothing
                    self._stored_codes = (self._codes.codebook, self._codes.codes, _stored_lists(self._codes))
                self._codes = None
            elif self._codes is None:
                self._build_codes()

    def set_list_limit(self, limit: int) -> None:
        """Search inverted lists from ``limit`` memories (e.g. to measure what they cost in recall)."""
        with self.lock:
            self.list_limit = limit
            codes = self._codes
            if codes is None:
                return
            if len(self) < limit:
                if codes.lists is not None:  # kept, so that lowering the limit back trains nothing
                    self._idle_lists = codes.lists
                    codes.use_lists(None)
                return
            idle, self._idle_lists = self._idle_lists, None
            if codes.lists is None and idle is not None and len(idle) == len(codes):
                codes.use_lists(idle)
            self._update_lists()

    def add(self, batch: VectorBatch, snapshot: LexicalSnapshot | None = None) -> None:
        """Append ``batch`` (rowids above every rowid held). With ``snapshot`` (the lexical
        side of exactly these memories, see :mod:`memory_bank.lexical_snapshot`) nothing is
        tokenised and ``batch`` needs no texts; only the first batch of a partition can."""
        if not len(batch.rowids):
            return
        if snapshot is not None and (len(self) or not np.array_equal(snapshot.rowids, batch.rowids)):
            raise ValueError("a lexical snapshot must describe exactly a new partition's first batch")
        if batch.vectors.shape[1] != self.dim:
            raise ValueError(
                f"vector dimension {batch.vectors.shape[1]} does not match the index ({self.dim})"
            )
        start = len(self)
        vectors = np.ascontiguousarray(batch.vectors, dtype=np.float32)
        self._vecs = _with_rows(self._vecs, start, vectors, batch.spare and vectors is batch.vectors)
        self._n = start + len(vectors)
        self._rowids = _grow(self._rowids, start + len(batch.rowids))
        self._rowids[start : start + len(batch.rowids)] = batch.rowids
        self.kinds += batch.kinds
        self.dates += batch.dates
        self.turns += batch.turns
        if snapshot is None:
            self.lexical.add(batch.texts)
            self._add_user_tokens(batch)
        else:
            self.lexical.load(snapshot)
            self._user_starts = np.asarray(snapshot.user_starts, dtype=np.int64)
            self._user_ids = np.asarray(snapshot.user_ids, dtype=np.int32)
            self._unanswered = np.asarray(snapshot.unanswered, dtype=bool)
            if snapshot.dense_codebook is not None and snapshot.dense_codes is not None:
                lists = None
                if snapshot.dense_centroids is not None and snapshot.dense_lists is not None:
                    lists = (snapshot.dense_centroids, snapshot.dense_lists, snapshot.dense_lists_at)
                self._stored_codes = (snapshot.dense_codebook, snapshot.dense_codes, lists)
        self._nbrs = _grow(self._nbrs, start + len(batch.rowids))
        self._day_ids = _grow(self._day_ids, start + len(batch.rowids))
        if start == 0:
            self._index_days_bulk(batch)
        else:
            self._index_days(batch, start)
        self._years_desc = None
        self.max_rowid = max(self.max_rowid, int(batch.rowids.max()))
        if self._codes is not None:
            with _one_thread():
                self._codes.add(vectors)
            self._update_lists()
        elif self._wants_codes():
            self._build_codes()

    def _index_days(self, batch: VectorBatch, start: int) -> None:
        """Days, turn numbers and neighbours of the memories appended at ``start``, one by one."""
        days = self._days
        keys = self._keys
        nbrs = self._nbrs
        day_ids = self._day_ids
        for i, (kind, day, turn) in enumerate(zip(batch.kinds, batch.dates, batch.turns, strict=True)):
            pos = start + i
            day_ids[pos] = days.append(day, pos)
            nbrs[pos] = -1
            if kind == "turn" and turn is not None:
                t = int(turn)
                key = (day, t)
                nbrs[pos] = keys.last((day, t - 1)), keys.last((day, t + 1))
                for q in keys.holding((day, t + 1)):
                    nbrs[q, 0] = pos
                for q in keys.holding((day, t - 1)):
                    nbrs[q, 1] = pos
                keys.add(key, pos)

    def _index_days_bulk(self, batch: VectorBatch) -> None:
        """:meth:`_index_days` for a partition's first batch, the same result in array
        operations: a position's neighbour is the last position holding the turn before (after)
        it on its day, which is what the one-by-one updates leave behind. Sorted by (day, turn,
        position), the (day, turn) just before a turn's group is its day's previous turn, if
        any turn of that day has that number."""
        self._days, ids = DayPositions.bulk(batch.dates)
        day_number = self._days.number
        n = len(ids)
        self._day_ids[:n] = ids
        self._nbrs[:n] = -1
        self._keys = TurnKeys(day_number)
        turns_all = np.asarray(batch.turns, dtype=object)
        at = np.flatnonzero((np.asarray(batch.kinds, dtype=object) == "turn") & (turns_all != None))  # noqa: E711
        if not len(at):
            return
        t = turns_all[at].astype(np.int64)
        d = ids[at].astype(np.int64)
        by = np.lexsort((at, t, d))  # by day, turn, then position
        sd, st, sp = d[by], t[by], at[by]
        starts = np.flatnonzero(np.r_[True, (sd[1:] != sd[:-1]) | (st[1:] != st[:-1])])
        ends = np.r_[starts[1:], len(by)] - 1
        gd, gt, last = sd[starts], st[starts], sp[ends]
        has_prev = np.r_[False, (gd[1:] == gd[:-1]) & (gt[1:] - 1 == gt[:-1])]
        prev = np.where(has_prev, np.r_[-1, last[:-1]], -1)
        nxt = np.where(np.r_[has_prev[1:], False], np.r_[last[1:], -1], -1)
        group = np.repeat(np.arange(len(starts)), ends - starts + 1)  # of each sorted element
        self._nbrs[sp, 0] = prev[group]
        self._nbrs[sp, 1] = nxt[group]
        many = np.flatnonzero(ends > starts).tolist()
        names = list(day_number) if many else []
        repeated = {(names[int(gd[g])], int(gt[g])): sp[starts[g] : ends[g] + 1].tolist() for g in many}
        self._keys = TurnKeys(day_number, gd, gt, last, repeated)

    def _add_user_tokens(self, batch: VectorBatch) -> None:
        queries = batch.queries or [None] * len(batch.rowids)
        rows = [
            self.lexical.token_ids(tokenize(q or ""), add=True)
            if kind == "turn" and is_question(q)
            else np.zeros(0, np.int32)
            for q, kind in zip(queries, batch.kinds, strict=True)
        ]
        first = len(self) - len(rows)  # position of the batch's first memory
        replies = batch.responses or [None] * len(rows)
        self._unanswered = _grow(self._unanswered, len(self))
        self._unanswered[first : len(self)] = [
            kind == "turn" and is_question(q) and is_question(r)
            for q, r, kind in zip(queries, replies, batch.kinds, strict=True)
        ]
        used = int(self._user_starts[first])
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        self._user_starts = _grow(self._user_starts, len(self) + 1)
        self._user_starts[first + 1 : len(self) + 1] = used + np.cumsum(lengths)
        total = used + int(lengths.sum())
        self._user_ids = _grow(self._user_ids, total)
        if total > used:
            self._user_ids[used:total] = np.concatenate(rows)

    def lexical_snapshot(self) -> LexicalSnapshot:
        """The lexical side of this partition, to persist (see :mod:`memory_bank.lexical_snapshot`)."""
        vocab, starts, pos, tf, lengths = self.lexical.arrays()
        n = len(self)
        lists = None if self._codes is None else self._codes.lists
        return LexicalSnapshot(
            rowids=self.rowids.copy(),
            vocab=vocab,
            starts=starts,
            pos=pos,
            tf=tf,
            lengths=lengths,
            user_starts=self._user_starts[: n + 1],
            user_ids=self._user_ids[: int(self._user_starts[n])],
            unanswered=self._unanswered[:n],
            dense_codebook=None if self._codes is None else self._codes.codebook,
            dense_codes=None if self._codes is None else self._codes.codes,
            dense_centroids=None if lists is None else lists.centroids,
            dense_lists=None if lists is None else lists.lists,
            dense_lists_at=0 if lists is None else lists.trained_at,
        )

    def echo(self, positions: np.ndarray, query_tokens: Sequence[str]) -> np.ndarray:
        """How far each memory's question repeats the query: ``|U & Q| / max(|U|, |Q|)`` over the
        distinct tokens of the user's words U of a turn that asked a question (1 for an earlier
        asking of the same question; 0 for statements and summaries, which are what is sought)."""
        n = len(self)
        starts = self._user_starts[: n + 1]
        return echo_share(
            starts, self._user_ids[: int(starts[-1])], positions, self.lexical.token_ids(query_tokens)
        )

    def unanswered(self, positions: np.ndarray) -> np.ndarray:
        """Whether each memory is a turn whose question got only a question back (no fact)."""
        return self._unanswered[positions]

    # -- dates --------------------------------------------------------------------------------
    def years(self) -> tuple[int, ...]:
        """The years this partition's memories fall in, latest first."""
        if self._years_desc is None:
            self._years_desc = tuple(sorted(self._days.years, reverse=True))
        return self._years_desc

    def positions_on(self, days: Iterable[str]) -> np.ndarray:
        """Positions (ascending) of the memories dated on any of ``days`` (``YYYY-MM-DD``)."""
        return self._days.on(days)

    def day_ids(self, positions: np.ndarray) -> np.ndarray:
        """A number per position, equal for memories of the same day (``int32``)."""
        return self._day_ids[positions]

    def positions_in_months(self, months: Iterable[str]) -> np.ndarray:
        """Positions (ascending) of the memories dated in any of ``months`` (``YYYY-MM``)."""
        return self._days.in_months(months)

    # -- dense search -------------------------------------------------------------------------
    def _xb(self) -> np.ndarray:
        n = len(self)
        return self._vecs[:n]

    def _build_codes(self) -> None:
        """Dense codes of every position: from the stored codebook and codes where there are
        some (encoding only the positions after them), else trained on the vectors; then their
        inverted lists, where the partition is large enough for them."""
        xb = self._xb()
        stored, self._stored_codes = self._stored_codes, None
        lists = None
        listed = len(xb) >= self.list_limit  # the flat scan's index would go unused
        with _one_thread():
            if stored is not None:
                codebook, codes, lists = stored
                try:
                    dense = DenseCodes(self.dim, codebook, codes[: len(xb)], scan=not listed)
                except ValueError:  # made for another dimension: train anew
                    lists = None
                else:
                    dense.add(xb[len(dense) :])
                    self._codes = dense
            if self._codes is None:
                self._codes = DenseCodes.train(xb, scan=not listed)
                self.codes_trained = True
        self._update_lists(lists)

    def _update_lists(self, stored: _StoredLists | None = None) -> None:
        """Give the dense codes inverted lists once the partition reaches ``list_limit``: the
        ``stored`` ones (a snapshot's, for its first positions) where they fit, else learnt from
        the vectors; learnt again when the partition has grown past them (see
        :meth:`memory_bank.dense_lists.DenseLists.stale`)."""
        codes = self._codes
        if codes is None or len(self) < self.list_limit:
            return
        lists = codes.lists
        with _one_thread():
            if lists is None and stored is not None:
                centroids, numbers, trained_at = stored
                try:
                    lists = codes.stored_lists(centroids, numbers, trained_at, self._xb()[len(numbers) :])
                except ValueError:  # they do not fit these codes: learn new ones
                    lists = None
            if lists is None or lists.stale():
                lists = codes.train_lists(self._xb())
                self.codes_trained = True
            if lists is not codes.lists:
                codes.use_lists(lists)

    @property
    def dense_codes(self) -> DenseCodes | None:
        """The dense codes approximate search reads (``None``: dense search is exact)."""
        return self._codes

    def vectors_at(self, positions: np.ndarray) -> np.ndarray:
        """The stored (normalised) vectors at ``positions`` (a copy of those rows only)."""
        return self._xb()[positions]

    def dot(self, positions: np.ndarray, query: np.ndarray) -> np.ndarray:
        """Inner products of the vectors at ``positions`` with ``query`` (float32).

        FAISS reads each vector where it lies (no gathered copy, on the calling thread only), and
        each product is one ``fvec_inner_product``: the same number whichever other positions
        are asked with it, so the dense search and the dense term agree bit for bit."""
        ids = np.ascontiguousarray(positions, dtype=np.int64)
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(-1)
        out = np.empty(len(ids), dtype=np.float32)
        if len(ids):
            with _one_thread():
                faiss.fvec_inner_products_by_idx(  # type: ignore[attr-defined]
                    faiss.swig_ptr(out),
                    faiss.swig_ptr(q),
                    faiss.swig_ptr(self._vecs),
                    faiss.swig_ptr(ids),
                    self.dim,
                    1,
                    len(ids),
                )
        return out

    def dense_top(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        k = min(k, len(self))
        if k == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        q = np.asarray(query, dtype=np.float32).reshape(1, -1)
        if self._codes is not None:
            r = min(len(self), max(rescore_size(len(self)), 8 * k))
            with _one_thread():
                cand = self._codes.search(q, r)
                exact = self.dot(cand, q)
            # Fewer than k found: the codes told no memory apart (a zero query vector scores
            # every code alike and FAISS returns none); exact search ranks them as it always has.
            if len(cand) >= k:
                top = stable_top(exact, k)
                return cand[top], exact[top]
        with _one_thread():
            scores, pos = faiss.knn(q, self._xb(), k, metric=faiss.METRIC_INNER_PRODUCT)
        keep = pos[0] >= 0
        return pos[0][keep].astype(np.int64), scores[0][keep]

    def neighbours(self, pos: int) -> tuple[int | None, int | None]:
        """Positions of the turns just before and after the turn at ``pos`` on the same day."""
        prev, nxt = self._nbrs[pos].tolist()
        return (prev if prev >= 0 else None), (nxt if nxt >= 0 else None)

    def neighbour_positions(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`neighbours` of many positions at once, as arrays with -1 for "none"."""
        pairs = self._nbrs[positions]
        return pairs[:, 0], pairs[:, 1]

    def neighbour_pairs(self, positions: np.ndarray) -> np.ndarray:
        """:meth:`neighbour_positions` as one ``(len(positions), 2)`` array (previous, next)."""
        return self._nbrs[positions]


@dataclasses.dataclass(frozen=True)
class SnapshotStore:
    """Where a :class:`PartitionCache` keeps lexical snapshots: ``load(user_id)`` returns the
    stored one (``None`` if missing or made by another tokenizer or encoder) and
    ``save(user_id, epoch, snapshot)`` stores one unless the user's epoch has moved on;
    ``seal(user_id, epoch)`` stores the user's vectors in blocks (see
    :mod:`memory_bank.vector_blocks`), called when a load read many of them one row each;
    ``exists(user_id)`` says whether ``load`` may find one without reading it (``None``: it
    is read, then the vectors)."""

    load: Callable[[int], LexicalSnapshot | None]
    save: Callable[[int, int, LexicalSnapshot], None]
    seal: Callable[[int, int], None] | None = None
    exists: Callable[[int], bool] | None = None


#: A partition load that tokenised at least this many memories, and a tenth of the partition
#: or :data:`SNAPSHOT_GAP` of them, whichever is fewer, persists a new lexical snapshot.
SNAPSHOT_MIN = 1000
#: The most memories a restart tokenises before it stores a new snapshot. A tenth of the
#: partition alone let the gap grow with the user: at a million memories a restart tokenised up
#: to 100,000 (about 11 s, at 110 us each) before storing one.
SNAPSHOT_GAP = 4096
#: From this many memories a new snapshot is written to the store on the cache's writer thread,
#: after the search that built the partition has its answer: serialising and storing it took 2.6
#: s at a million memories (293 MB) and 0.25 s at 100,000. The snapshot itself is taken before
#: (under the partition's lock); the store refuses it if the user's memories were rewritten or
#: deleted meanwhile (a new epoch), as it does any stale one.
SAVE_BESIDE_FROM = 65_536
#: Snapshots waiting for the writer at most; beyond, a build stores its own in line. Each holds
#: its partition's arrays (about 300 MB at a million memories), evicted or not.
MAX_PENDING_SAVES = 2
#: Threads that read beside a partition build's vector load: the lexical snapshot and the
#: bank's forgetting columns each get one, so the snapshot (on the build's path) never waits
#: behind the columns (at a million memories: 2.2 s of columns, then 2.6 s of snapshot).
READER_THREADS = 2


def _save(snapshots: SnapshotStore, user_id: int, epoch: int, snap: LexicalSnapshot) -> None:
    """Store a snapshot on the writer thread, where nobody waits for the outcome: a failure is
    logged (the next restart tokenises what it lacks, as it would without a snapshot)."""
    try:
        snapshots.save(user_id, epoch, snap)
    except Exception:
        logger.warning("could not store the lexical index of user id %d", user_id, exc_info=True)


class PartitionCache:
    """Bounded LRU of partitions, kept in step with the store.

    ``loader(user_id, after_rowid, upto_rowid, texts)`` returns the stored vectors of rowids in
    ``(after_rowid, upto_rowid]`` (no upper bound when ``None``; without texts when ``texts``
    is false); ``state(user_id)`` returns the user's current ``(version, epoch, tiers)``
    (see :meth:`memory_bank.stores.base.Storage.user_counters`); ``tiers_kept()`` says whether
    a partition holds both tiers, live and forgotten: then a tier move keeps it (the caller
    tells the tiers apart), otherwise the partition is rebuilt as on a new epoch. With
    ``snapshots``, a partition built from scratch reads its lexical index from there and
    tokenises only the memories added since (see :mod:`memory_bank.lexical_snapshot`).
    """

    def __init__(
        self,
        loader: Callable[[int, int, int | None, bool], VectorBatch],
        state: Callable[[int], tuple[int, int, int]],
        dim: Callable[[], int],
        max_users: int = 256,
        snapshots: SnapshotStore | None = None,
        tiers_kept: Callable[[], bool] = lambda: False,
    ) -> None:
        self._loader = loader
        self._state = state
        self._tiers_kept = tiers_kept
        self._dim = dim
        self.max_users = max_users
        self.snapshots = snapshots
        self._parts: collections.OrderedDict[int, Partition] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._snapshot_reader: concurrent.futures.ThreadPoolExecutor | None = None
        self._snapshot_writer: concurrent.futures.ThreadPoolExecutor | None = None
        self._pending_saves: dict[int, concurrent.futures.Future[None]] = {}  # by user, newest
        self._closed = False

    def get(self, user_id: int, state: tuple[int, int, int] | None = None) -> Partition:
        """The user's partition, loaded lazily and refreshed if the store changed.

        ``state``: the user's counters (version, epoch, tiers) as the caller has just read them
        (with the user's record). A cached partition that stands at exactly those is returned
        without reading them again (one read fewer per search: the search sees the store as it
        was a moment earlier, when its record was read); anything to load or refresh reads the
        store's counters now, so a partition never holds memories newer than its counters say."""
        if state is not None:
            with self._lock:
                part = self._parts.get(user_id)
                if part is not None and (part.version, part.epoch, part.tiers) == state:
                    self._parts.move_to_end(user_id)
                    return part
        version, epoch, tiers = self._state(user_id)
        with self._lock:
            part = self._parts.get(user_id)
            if part is not None:
                self._parts.move_to_end(user_id)
            moved = part is not None and part.tiers != tiers and not self._tiers_kept()
            if part is None or part.epoch != epoch or moved:
                part = Partition(self._dim(), epoch)
                self._parts[user_id] = part
                while len(self._parts) > self.max_users:
                    self._parts.popitem(last=False)
        with part.lock:
            if part.broken:  # a load into it failed while this thread waited: start again
                return self.get(user_id)
            if part.version != version:
                try:
                    if len(part) == 0 and self.snapshots is not None:
                        self._build(user_id, part, self.snapshots)
                    else:
                        part.add(self._loader(user_id, part.max_rowid, None, True))
                except BaseException:
                    # An add stopped midway (a failed read, a Ctrl-C in the terminal chat) can
                    # leave the partition's arrays out of step: never search or extend it again.
                    part.broken = True
                    with self._lock:
                        if self._parts.get(user_id) is part:
                            del self._parts[user_id]
                    raise
                part.version = version
            part.tiers = tiers
        return part

    def _build(self, user_id: int, part: Partition, snapshots: SnapshotStore) -> None:
        """Fill an empty partition: the memories a stored snapshot covers without their texts
        (and with their dense codes, when it has them), the rest tokenised; a new snapshot is
        stored when much was tokenised or the dense codes were trained.

        The snapshot and the vectors are read at once, on two connections (the snapshot on the
        cache's reader thread: both reads wait on the database, and a server detoasts them in two
        processes);
        the vectors read are then cut at the snapshot's last memory, and those after it are read
        again with their texts (none or a few: a snapshot is stored again once many are)."""
        stored_one = None if snapshots.exists is None else snapshots.exists(user_id)  # None: unknown
        pending = background.submit(self.reader, snapshots.load, user_id) if stored_one else None
        if pending is not None:
            try:
                stored: VectorBatch | None = self._loader(user_id, 0, None, False)
            except BaseException:
                concurrent.futures.wait([pending])  # the store is not read behind the caller's back
                raise
            snap = pending.result()
        else:  # no stored snapshot, or no thread to read it on (the interpreter is shutting down)
            snap = snapshots.load(user_id) if stored_one is not False else None
            stored = None
        if snap is not None and len(snap):
            if stored is None:
                stored = self._loader(user_id, 0, snap.max_rowid, False)
            head = stored.head(int(np.searchsorted(stored.rowids, snap.max_rowid, side="right")))
            fitted = snap.restricted(head.rowids)
            if fitted is not None and len(head.rowids):
                part.add(head, snapshot=fitted)
            read = head.from_rows
        else:
            read = 0
        rest = self._loader(user_id, part.max_rowid, None, True)
        part.add(rest)
        if part.codes_trained or len(rest.rowids) >= max(SNAPSHOT_MIN, min(len(part) // 10, SNAPSHOT_GAP)):
            snap = part.lexical_snapshot()
            if len(part) < SAVE_BESIDE_FROM or not self._save_beside(user_id, part.epoch, snap, snapshots):
                snapshots.save(user_id, part.epoch, snap)
        if snapshots.seal is not None and read + rest.from_rows >= SEAL_MIN:
            snapshots.seal(user_id, part.epoch)

    def drop(self, user_id: int) -> None:
        with self._lock:
            self._parts.pop(user_id, None)

    def reader(self) -> concurrent.futures.ThreadPoolExecutor:
        """The thread that reads beside a build's vector load (the snapshot; the bank's
        forgetting columns): one for the cache's life, so a store that keeps a connection per
        thread opens one more, not one per build."""
        with self._lock:
            if self._snapshot_reader is None:
                self._snapshot_reader = concurrent.futures.ThreadPoolExecutor(
                    READER_THREADS, thread_name_prefix="memorybank-snapshot"
                )
            return self._snapshot_reader

    def _save_beside(self, user_id: int, epoch: int, snap: LexicalSnapshot, snapshots: SnapshotStore) -> bool:
        """Queue ``snap`` for the writer thread; ``False`` when the caller must store it itself
        (:data:`MAX_PENDING_SAVES` are waiting, the cache is closed, the interpreter is shutting
        down). A snapshot of the same user still waiting is dropped: this one is newer (a build
        after an eviction reads the store before the first is written, and takes another)."""
        with self._lock:
            older = self._pending_saves.pop(user_id, None)
            if older is not None:
                older.cancel()  # started already: it runs to its end, and this one after it
            for uid in [u for u, f in self._pending_saves.items() if f.done()]:
                del self._pending_saves[uid]
            if len(self._pending_saves) >= MAX_PENDING_SAVES:
                return False
        job = background.submit(self.writer, _save, snapshots, user_id, epoch, snap)
        if job is None:
            return False
        with self._lock:
            self._pending_saves[user_id] = job
        return True

    def writer(self) -> concurrent.futures.ThreadPoolExecutor:
        """The thread that stores large partitions' new snapshots (see :data:`SAVE_BESIDE_FROM`):
        one, so snapshots are stored in the order they were taken. None once the cache is
        closed (``RuntimeError``): a build racing the close stores its snapshot itself, so no
        write lands after ``close()`` returned."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the partition cache is closed")
            if self._snapshot_writer is None:
                self._snapshot_writer = concurrent.futures.ThreadPoolExecutor(
                    1, thread_name_prefix="memorybank-snapshot-writer"
                )
            return self._snapshot_writer

    def clear(self) -> None:
        with self._lock:
            self._parts.clear()

    def close(self) -> None:
        """Drop every partition, stop the snapshot reader and wait for the snapshots being
        stored. The cache still answers afterwards (a later build reads on a new reader thread),
        but stores its snapshots itself: none is written after this returns."""
        with self._lock:
            self._parts.clear()
            reader, self._snapshot_reader = self._snapshot_reader, None
            writer, self._snapshot_writer = self._snapshot_writer, None
            self._pending_saves.clear()
            self._closed = True
        for pool in (reader, writer):
            if pool is not None:
                pool.shutdown(wait=True)

    def __len__(self) -> int:
        return len(self._parts)

    def __contains__(self, user_id: object) -> bool:
        return user_id in self._parts
