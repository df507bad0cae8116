"""Inverted lists over a partition's dense codes: approximate dense search that reads a few
lists of codes instead of every code.

A large partition's first dense stage scans a product-quantised code of every memory
(:mod:`memory_bank.dense_codes`), which is linear in the partition: 0.6-1.2 ms at 100,000
memories, 7-12 ms at a million. From ``memory_bank.index.LIST_SEARCH_LIMIT`` memories the
codes are also grouped into *lists*: a coarse quantizer (:func:`list_count` centroids, learnt
once by spherical k-means on an evenly spaced sample of the vectors) puts every memory in the
list of its nearest centroid, and a query scans only the codes of the :func:`probe_count`
lists whose centroids are nearest to it. This is FAISS's ``IndexIVFPQFastScan`` without
residuals (``by_residual=False``): a list holds the very codes the flat scan reads, scored with
one lookup table per query, so the lists are filled from the stored codes and each memory's
list number, with nothing encoded or assigned again (:meth:`DenseLists._fill`). The centroids
and the list numbers are saved with the codes in the lexical snapshot
(:mod:`memory_bank.lexical_snapshot`), so a restart neither learns nor assigns and searches
exactly as before it.

New memories join the list of their nearest centroid (one quantizer search per batch). The
centroids do not move as a partition grows, so lists grow longer and a query scans more codes;
once the partition has :data:`REGROW` times the memories the centroids were learnt from
(:meth:`DenseLists.stale`), they are learnt again from all of them and every memory is assigned
again, once, in the add or the load that finds it so (measured on one thread: 65k memories
about 4 s, a million about 18 s, most of it assigning: a million vectors against 1,024
centroids). Partitions of any size above the limit get :data:`MAX_LISTS` lists (fewer only in
partitions too small to learn them from). Recall and time against the flat scan are measured
by ``scripts/bench_recall.py`` (``--ivf``, ``--nprobe``; ``docs/perf/scale.md``, round 7).
"""

from __future__ import annotations

import math

import faiss
import numpy as np

#: The most lists a partition gets (:func:`list_count`). On the bench's vectors (real MiniLM
#: queries) 1,024 lists, 64 probed, find the flat scan's final top 5 at 83k and at 1M memories;
#: 256 or 512 lists needed half of them probed for that, which scans about as much as no lists.
#: (List numbers are sorted as 16-bit integers: at most 32,768.)
MAX_LISTS = 1024
#: The fewest lists.
MIN_LISTS = 16
#: A query scans this share of the lists, ``1 / PROBE_SHARE`` (see :func:`probe_count`): at 1M
#: memories 32 of 1,024 lists lost 0.4 points of recall@5, 64 lost none, 128 gained nothing.
PROBE_SHARE = 16
#: The fewest lists a query scans.
MIN_PROBE = 8
#: Sample vectors per centroid the k-means learns from, and its iterations.
TRAIN_PER_LIST = 32
TRAIN_ITERATIONS = 10
#: Lists are learnt again when the partition has grown this many times past their size.
REGROW = 4
#: FAISS's fast-scan block: codes are packed 32 at a time.
_BLOCK = 32
_CHUNK = 65_536  # vectors assigned at a time (FAISS's own add assigns in slices of this size)


def list_count(n: int) -> int:
    """Lists for a partition of ``n`` memories: :data:`MAX_LISTS`, or fewer where there are not
    :data:`TRAIN_PER_LIST` memories a list to learn them from (a power of two, at least
    :data:`MIN_LISTS`)."""
    most = 1 << max(0, int(math.log2(max(1, n // TRAIN_PER_LIST))))
    return max(MIN_LISTS, min(MAX_LISTS, most))


def probe_count(nlist: int) -> int:
    """Lists a query scans in a partition of ``nlist`` lists."""
    return min(nlist, max(MIN_PROBE, nlist // PROBE_SHARE))


def train_centroids(vectors: np.ndarray, nlist: int) -> np.ndarray:
    """``nlist`` unit centroids learnt from an evenly spaced sample of ``vectors`` (spherical
    k-means, a fixed seed: the same vectors give the same centroids). FAISS runs it on as many
    threads as OpenMP allows; callers limit them (see ``memory_bank.index._one_thread``)."""
    n, dim = vectors.shape
    pick = np.linspace(0, n - 1, min(n, nlist * TRAIN_PER_LIST)).astype(np.int64)
    km = faiss.Kmeans(
        dim,
        nlist,
        niter=TRAIN_ITERATIONS,
        spherical=True,
        seed=1234,
        max_points_per_centroid=TRAIN_PER_LIST,
        min_points_per_centroid=TRAIN_PER_LIST // 2,  # FAISS warns on stderr below this
    )
    km.train(np.ascontiguousarray(vectors[pick], dtype=np.float32))
    return np.ascontiguousarray(km.centroids, dtype=np.float32)


class DenseLists:
    """The inverted lists of positions ``[0, len)`` of a partition over their dense codes.

    ``dim`` is the codes' (padded) dimension, ``codebook`` their product quantizer's centroids,
    ``centroids`` the lists' (``nlist x dim``), ``codes`` each position's code, ``lists`` each
    position's list number and ``trained_at`` the partition's size when the centroids were
    learnt. Positions are FAISS's ids, so a search returns positions.
    """

    def __init__(
        self,
        dim: int,
        codebook: np.ndarray,
        centroids: np.ndarray,
        codes: np.ndarray,
        lists: np.ndarray,
        trained_at: int,
    ) -> None:
        centroids = np.ascontiguousarray(centroids, dtype=np.float32)
        lists = np.array(lists, dtype=np.int32)  # a copy, with room for appends later
        if centroids.ndim != 2 or centroids.shape[1] != dim or not len(centroids):
            raise ValueError(f"list centroids do not fit {dim} dimensions")
        if lists.shape != (len(codes),) or (
            len(lists) and not 0 <= lists.min() <= lists.max() < len(centroids)
        ):
            raise ValueError("list numbers do not fit the codes and centroids")
        nlist = len(centroids)
        self.trained_at = int(trained_at)
        self._quantizer = faiss.IndexFlatIP(dim)
        self._quantizer.add(centroids)
        m = codes.shape[1] * 2  # 4-bit sub-quantizers
        self._index = faiss.IndexIVFPQFastScan(
            self._quantizer, dim, nlist, m, 4, faiss.METRIC_INNER_PRODUCT, _BLOCK
        )
        self._index.by_residual = False  # a list holds the plain codes: no residual, one table a query
        faiss.copy_array_to_vector(_flat(codebook), self._index.pq.centroids)
        self._index.is_trained = True
        self._lists = lists  # rows [0, _n) in use, with room for appends
        self._n = 0
        self._fill(codes)

    def _fill(self, codes: np.ndarray) -> None:
        """Put every position's code in its list without encoding or assigning again: the codes
        in list order, each list padded to whole blocks, are packed by FAISS's fast-scan packer
        (an ``IndexPQFastScan`` over them) and each list's blocks handed to it as they are."""
        self._index.reset()
        n, nlist = len(codes), self._index.nlist
        self._n = n
        if not n:
            return
        lists = self._lists[:n]
        # A stable radix sort (list numbers fit 16 bits: MAX_LISTS): positions stay ascending in a list.
        order = np.argsort(lists.astype(np.int16), kind="stable").astype(np.int64)
        sizes = np.bincount(lists, minlength=nlist)
        starts = np.zeros(nlist + 1, dtype=np.int64)
        np.cumsum(sizes, out=starts[1:])
        blocks = np.zeros(nlist + 1, dtype=np.int64)  # each list's first block in the packing
        np.cumsum(-(-sizes // _BLOCK), out=blocks[1:])
        slot = np.empty(n, dtype=np.int64)  # each position's row in the laid-out codes
        slot[order] = np.arange(n, dtype=np.int64) + np.repeat(blocks[:-1] * _BLOCK - starts[:-1], sizes)
        row = np.dtype((np.void, codes.shape[1]))  # a code as one item: row copies, not byte loops
        laid = np.zeros((int(blocks[-1]) * _BLOCK, codes.shape[1]), dtype=np.uint8)
        laid.view(row).reshape(-1)[slot] = np.ascontiguousarray(codes).view(row).reshape(-1)
        pq = faiss.IndexPQ(self._index.d, self._index.pq.M, 4, faiss.METRIC_INNER_PRODUCT)
        faiss.copy_array_to_vector(faiss.vector_to_array(self._index.pq.centroids), pq.pq.centroids)
        pq.is_trained = True
        faiss.copy_array_to_vector(laid.reshape(-1), pq.codes)
        pq.ntotal = len(laid)
        fast = faiss.IndexPQFastScan(pq)  # type: ignore[arg-type]  # held while its codes are read
        packed = faiss.vector_to_array(fast.codes)
        del laid, pq, fast
        block_bytes = self._index.M2 * _BLOCK // 2
        invlists = self._index.invlists
        assert invlists is not None  # an IVF index made with its own lists
        for li in np.flatnonzero(sizes).tolist():
            ids = order[starts[li] : starts[li + 1]]
            part = packed[blocks[li] * block_bytes : blocks[li + 1] * block_bytes]
            invlists.add_entries(li, int(sizes[li]), faiss.swig_ptr(ids), faiss.swig_ptr(part))
        self._index.ntotal = n

    @classmethod
    def train(cls, vectors: np.ndarray, codebook: np.ndarray, codes: np.ndarray) -> DenseLists:
        """Learn :func:`list_count` centroids from ``vectors`` (padded to the codes' dimension,
        one per code) and put each memory in the list of its nearest."""
        centroids = train_centroids(vectors, list_count(len(vectors)))
        return cls(vectors.shape[1], codebook, centroids, codes, assign(centroids, vectors), len(vectors))

    @property
    def centroids(self) -> np.ndarray:
        return self._quantizer.reconstruct_n(0, self._quantizer.ntotal)

    @property
    def lists(self) -> np.ndarray:
        """Every position's list number (a view)."""
        return self._lists[: self._n]

    @property
    def nlist(self) -> int:
        return int(self._index.nlist)

    def __len__(self) -> int:
        return self._n

    def stale(self) -> bool:
        """Whether the partition has grown :data:`REGROW` times past the size the centroids
        were learnt at (then they are learnt again: see the module's docstring)."""
        return self._n >= REGROW * max(1, self.trained_at)

    def add(self, vectors: np.ndarray, codes: np.ndarray) -> None:
        """Append ``vectors`` (padded) at the next positions, each in its nearest centroid's
        list; ``codes`` are the codes of every position, these included. A few are added by
        FAISS, which encodes them again (to the same codes); many are put in their lists with
        the rest, from the codes."""
        if not len(vectors):
            return
        new = _assign(self._quantizer, vectors)
        need = self._n + len(new)
        if need > len(self._lists):
            grown = np.empty(max(need, 2 * len(self._lists), 16), dtype=np.int32)
            grown[: self._n] = self._lists[: self._n]
            self._lists = grown
        self._lists[self._n : need] = new
        if len(new) > need // 8:
            self._fill(codes[:need])
            return
        for s in range(0, len(vectors), _CHUNK):  # slices as FAISS's add takes them
            part = np.ascontiguousarray(vectors[s : s + _CHUNK], dtype=np.float32)
            self._index.add_with_ids(part, np.arange(self._n + s, self._n + s + len(part), dtype=np.int64))
        self._n = need

    def search(self, query: np.ndarray, r: int) -> np.ndarray:
        """The ``r`` positions of the probed lists whose codes score best against ``query``
        (padded, one row; best first)."""
        self._index.nprobe = probe_count(self.nlist)
        _, ids = self._index.search(query, min(r, self._n))
        found = ids[0]
        return found[found >= 0].astype(np.int64)


def _flat(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32).reshape(-1)


def assign(centroids: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """The number of the centroid nearest to each of ``vectors`` (``int32``)."""
    quantizer = faiss.IndexFlatIP(centroids.shape[1])
    quantizer.add(np.ascontiguousarray(centroids, dtype=np.float32))
    return _assign(quantizer, vectors)


def _assign(quantizer: faiss.IndexFlatIP, vectors: np.ndarray) -> np.ndarray:
    out = np.empty(len(vectors), dtype=np.int32)
    for s in range(0, len(vectors), _CHUNK):
        _, nearest = quantizer.search(np.ascontiguousarray(vectors[s : s + _CHUNK], dtype=np.float32), 1)
        out[s : s + _CHUNK] = nearest[:, 0]
    return out
