"""Product-quantised codes of a partition's vectors: the first stage of approximate dense search.

Above :data:`memory_bank.index.EXACT_SEARCH_LIMIT` memories a partition does not read every
vector for every query. It keeps a short code per memory, finds the memories whose codes score
best against the query and re-scores those exactly from the vectors. The codes are FAISS's
4-bit product quantiser with fast scan (``IndexPQFastScan``): each group of :data:`SUB_DIM`
dimensions is replaced by the nearest of 16 centroids learnt from the partition's own vectors,
so a 384-dimension vector is 48 bytes, the same as a 1-bit sign code, but its score against the
query is a close estimate of the inner product rather than a Hamming distance. On real
(MiniLM) queries over the bench's vectors the estimate needs a third as many exact re-scores for
the same recall as sign codes (``scripts/bench_recall.py``, ``docs/perf/scale.md``, round 6).

The centroids (the *codebook*, 24 KB at 384 dimensions) are trained once, on an evenly spaced
sample of the vectors, when a partition first needs codes; codes of later memories use the same
codebook. Training and encoding a million memories takes seconds, so the codebook and every
memory's code are saved with the partition's lexical snapshot (:mod:`memory_bank.lexical_snapshot`)
and a restart reads them back instead: the codes after a restart are the codes before it, and so
are the search results.
"""

from __future__ import annotations

import faiss
import numpy as np

from memory_bank.dense_lists import DenseLists

#: Dimensions per sub-quantizer (16 centroids each, 4 bits a code).
SUB_DIM = 4
_KSUB = 16
#: Vectors the codebook is trained on (evenly spaced over the partition; FAISS's k-means takes
#: at most 256 per centroid of these, i.e. 4,096).
TRAIN_SAMPLE = 8192
#: k-means iterations per sub-quantizer: 10 gives the recall of FAISS's default 25 within
#: 0.2 points at 83k memories, in a third of the time (0.3 s).
TRAIN_ITERATIONS = 10
#: The fewest vectors codes are trained on (FAISS's k-means wants 39 points per centroid).
MIN_TRAIN = 1024
_CHUNK = 65_536  # rows encoded at a time, to bound the padded copies


def padded_dim(dim: int) -> int:
    """``dim`` rounded up to whole sub-quantizers (zero dimensions add nothing to a product)."""
    return dim + (-dim) % SUB_DIM


def code_size(dim: int) -> int:
    """Bytes of one memory's code at ``dim`` dimensions."""
    return -(-(padded_dim(dim) // SUB_DIM) * 4 // 8)


def codebook_size(dim: int) -> int:
    """Floats of a codebook at ``dim`` dimensions."""
    return _KSUB * padded_dim(dim)


class DenseCodes:
    """The codes of positions ``[0, len)`` of a partition, searchable by a query vector."""

    def __init__(self, dim: int, codebook: np.ndarray, codes: np.ndarray, scan: bool = True) -> None:
        """Codes ``codes`` (``len x code_size(dim)`` bytes) made with ``codebook``; without
        ``scan`` the flat scan's index is made only when a search needs it (inverted lists are
        about to hold the codes: see :meth:`use_lists`)."""
        codebook = np.ascontiguousarray(codebook, dtype=np.float32).reshape(-1)
        codes = np.ascontiguousarray(codes, dtype=np.uint8)
        if codebook.size != codebook_size(dim) or codes.ndim != 2 or codes.shape[1] != code_size(dim):
            raise ValueError(f"dense codes do not fit {dim} dimensions")
        self.dim = dim
        self._pq = faiss.IndexPQ(padded_dim(dim), padded_dim(dim) // SUB_DIM, 4, faiss.METRIC_INNER_PRODUCT)
        faiss.copy_array_to_vector(codebook, self._pq.pq.centroids)
        self._pq.is_trained = True
        self._raw = codes  # rows [0, _n) in use, with room for appends
        self._n = len(codes)
        self._lists: DenseLists | None = None
        self._index: faiss.IndexPQFastScan | None = self._fast_scan() if scan else None

    def _fast_scan(self) -> faiss.IndexPQFastScan:
        """The fast-scan index of the codes held: FAISS packs them from an ``IndexPQ`` holding them."""
        flat = self._pq
        flat.reset()
        if self._n:
            faiss.copy_array_to_vector(self._raw[: self._n].reshape(-1), flat.codes)
            flat.ntotal = self._n
        index = faiss.IndexPQFastScan(flat)  # type: ignore[arg-type]  # the stubs know one constructor
        flat.reset()  # the fast-scan index holds its own packed copy
        return index

    @classmethod
    def train(cls, vectors: np.ndarray, scan: bool = True) -> DenseCodes:
        """Learn a codebook from ``vectors`` (an evenly spaced sample of them) and encode them all
        (``scan``: as in the constructor).

        FAISS runs the k-means on as many threads as OpenMP allows; a caller on a busy machine
        limits them (one thread: 0.5 s at 384 dimensions; two contended ones measured 3-15 s)."""
        dim = vectors.shape[1]
        if len(vectors) < MIN_TRAIN:
            raise ValueError(f"dense codes need at least {MIN_TRAIN} vectors to train on, not {len(vectors)}")
        pick = np.linspace(0, len(vectors) - 1, min(len(vectors), TRAIN_SAMPLE)).astype(np.int64)
        pq = faiss.ProductQuantizer(padded_dim(dim), padded_dim(dim) // SUB_DIM, 4)
        pq.cp.niter = TRAIN_ITERATIONS
        pq.train(_padded(vectors[pick]))
        codebook = faiss.vector_to_array(pq.centroids)
        return cls(dim, codebook, _encode(pq, vectors), scan)

    @property
    def codebook(self) -> np.ndarray:
        return faiss.vector_to_array(self._pq.pq.centroids)

    @property
    def codes(self) -> np.ndarray:
        """Every position's code (a view)."""
        return self._raw[: self._n]

    def __len__(self) -> int:
        return self._n

    @property
    def lists(self) -> DenseLists | None:
        """The inverted lists searches read (``None``: they scan every code)."""
        return self._lists

    def use_lists(self, lists: DenseLists | None) -> None:
        """Search through ``lists`` (of these codes), or scan every code again (``None``). The
        flat scan's packed copy of the codes is dropped while lists hold them."""
        if lists is not None and len(lists) != self._n:
            raise ValueError(f"inverted lists of {len(lists)} codes do not fit {self._n}")
        self._lists = lists
        self._index = None if lists is not None else self._fast_scan()

    def train_lists(self, vectors: np.ndarray) -> DenseLists:
        """Learn inverted lists for these codes from their ``vectors`` (see :mod:`memory_bank.dense_lists`)."""
        return DenseLists.train(_padded(vectors), self.codebook, self.codes)

    def stored_lists(
        self, centroids: np.ndarray, lists: np.ndarray, trained_at: int, vectors: np.ndarray
    ) -> DenseLists:
        """Inverted lists from stored ``centroids`` and the list numbers of the first positions;
        the positions after them (``vectors``, the last of these codes) join their nearest list."""
        head = len(lists)
        if head + len(vectors) != self._n:
            raise ValueError(f"stored lists of {head} codes and {len(vectors)} more do not fit {self._n}")
        made = DenseLists(
            padded_dim(self.dim), self.codebook, centroids, self.codes[:head], lists, trained_at
        )
        made.add(_padded(vectors), self.codes)
        return made

    def add(self, vectors: np.ndarray) -> None:
        """Encode ``vectors`` and append them at the next positions."""
        if not len(vectors):
            return
        codes = _encode(self._pq.pq, vectors)
        need = self._n + len(codes)
        if need > len(self._raw):
            grown = np.empty((max(need, 2 * len(self._raw), 16), self._raw.shape[1]), dtype=np.uint8)
            grown[: self._n] = self._raw[: self._n]
            self._raw = grown
        self._raw[self._n : need] = codes
        self._n = need
        if self._lists is not None:
            self._lists.add(_padded(vectors), self.codes)
        elif self._index is None or len(codes) > need // 8:  # many at once: repack, not encode again
            self._index = None
        else:
            self._index.add(_padded(vectors))

    def search(self, query: np.ndarray, r: int) -> np.ndarray:
        """The ``r`` positions whose codes score best against ``query`` (best first): of the
        lists nearest to it where there are lists, else of every code."""
        if self._lists is not None:
            return self._lists.search(_padded(query.reshape(1, -1)), r)
        if self._index is None:
            self._index = self._fast_scan()
        _, ids = self._index.search(_padded(query.reshape(1, -1)), min(r, self._n))
        found = ids[0]
        return found[found >= 0].astype(np.int64)


def _padded(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    pad = (-x.shape[1]) % SUB_DIM
    return np.pad(x, ((0, 0), (0, pad))) if pad else x


def _encode(pq: faiss.ProductQuantizer, vectors: np.ndarray) -> np.ndarray:
    out = np.empty((len(vectors), pq.code_size), dtype=np.uint8)
    for s in range(0, len(vectors), _CHUNK):
        out[s : s + _CHUNK] = pq.compute_codes(_padded(vectors[s : s + _CHUNK]))
    return out
