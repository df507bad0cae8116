"""A partition's lexical index as bytes, so that a restart reads it instead of re-tokenising.

Tokenising every memory is most of what building a partition costs (6.5 s of the first search
of a 100,000-memory user after a restart). The store keeps, per user, the BM25 postings and the
per-memory arrays the ranking reads (token counts, the tokens of each question a user asked,
whether its reply answered it), under the encoder whose vectors chose the memories and
:data:`memory_bank.text.TOKENIZER_VERSION`. A snapshot from another tokenizer is not used, and
is replaced by the next one written.

A snapshot is a cache: :meth:`LexicalSnapshot.restricted` keeps the memories that are still
searchable (forgotten ones drop out, cheaply, without re-tokenising the rest); the store deletes
the snapshot in the same transaction as any change that rewrites or deletes a memory's text, so
it never holds words the user deleted and never serves stale tokens. The bytes are a NumPy
``.npz`` archive, read as views of the stored bytes (never unpickled: object arrays are refused).

A partition large enough for approximate dense search also saves its dense codes here (the
codebook and each memory's code, see :mod:`memory_bank.dense_codes`): they are per memory like
the rest, are restricted with it, and go with it whenever a memory's text *or vector* changes.
A snapshot without them (an older one, or a small partition's) is still read: the codes are
then trained again. A partition large enough for inverted lists over its codes
(:mod:`memory_bank.dense_lists`) saves them too: the lists' centroids, each memory's list
number and the partition's size when the centroids were learnt. They need the codes, are
restricted with them, and a snapshot without them has them learnt once and stored again.
"""

from __future__ import annotations

import dataclasses
import io
import math
import struct
import zipfile
import zlib

import numpy as np
from numpy.lib import format as npy_format

from memory_bank import native

_ARRAYS = ("rowids", "starts", "pos", "tf", "lengths", "user_starts", "user_ids", "unanswered")
_DENSE = ("dense_codebook", "dense_codes")
_LISTS = ("dense_centroids", "dense_lists", "dense_lists_at")
#: A ZIP member's local header: signature, versions, flags, method, times, CRC, sizes, then the
#: lengths of its name and extra field (the name and the field follow, then the data).
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")
_LOCAL_SIGNATURE = b"PK\x03\x04"
#: The most bytes a member's ``.npy`` header may take (NumPy's own limit for ``np.load``).
_MAX_NPY_HEADER = 10_000


@dataclasses.dataclass
class LexicalSnapshot:
    """The lexical side of a partition, by position (positions in rowid order).

    ``vocab[t]`` is token id ``t``; ``starts``/``pos``/``tf`` are the postings in compressed
    sparse rows (row ``t`` lists the ascending positions holding token ``t`` and its frequency
    there); ``lengths`` is each memory's token count; ``user_starts``/``user_ids`` the distinct
    token ids of each question the user asked (empty rows for the rest); ``unanswered`` marks
    question turns whose reply was a question; ``dense_codebook`` and ``dense_codes`` (both or
    neither) are the partition's dense codes, one row per memory; ``dense_centroids`` and
    ``dense_lists`` (both or neither, only with the codes) their inverted lists' centroids and
    each memory's list number, learnt when the partition had ``dense_lists_at`` memories.
    """

    rowids: np.ndarray
    vocab: list[str]
    starts: np.ndarray
    pos: np.ndarray
    tf: np.ndarray
    lengths: np.ndarray
    user_starts: np.ndarray
    user_ids: np.ndarray
    unanswered: np.ndarray
    dense_codebook: np.ndarray | None = None
    dense_codes: np.ndarray | None = None
    dense_centroids: np.ndarray | None = None
    dense_lists: np.ndarray | None = None
    dense_lists_at: int = 0

    def __len__(self) -> int:
        return len(self.rowids)

    @property
    def max_rowid(self) -> int:
        return int(self.rowids[-1]) if len(self.rowids) else 0

    def to_bytes(self) -> bytes:
        """The snapshot as an uncompressed ``.npz`` archive (loading it is a few copies)."""
        buf = io.BytesIO()
        tf = self.tf.astype(np.uint16) if len(self.tf) and self.tf.max() < 65536 else self.tf
        arrays = {
            "rowids": self.rowids.astype(np.int64),
            "starts": self.starts.astype(np.int64),
            "pos": self.pos.astype(np.int32),
            "tf": tf,
            "lengths": self.lengths.astype(np.int32),
            "user_starts": self.user_starts.astype(np.int64),
            "user_ids": self.user_ids.astype(np.int32),
            "unanswered": self.unanswered.astype(np.bool_),
            "vocab": np.frombuffer("\0".join(self.vocab).encode("utf-8"), dtype=np.uint8),
        }
        if self.dense_codebook is not None and self.dense_codes is not None:
            arrays["dense_codebook"] = self.dense_codebook.astype(np.float32)
            arrays["dense_codes"] = self.dense_codes.astype(np.uint8)
            if self.dense_centroids is not None and self.dense_lists is not None:
                arrays["dense_centroids"] = self.dense_centroids.astype(np.float32)
                arrays["dense_lists"] = self.dense_lists.astype(np.int32)
                arrays["dense_lists_at"] = np.array([self.dense_lists_at], dtype=np.int64)
        np.savez(buf, **arrays)  # type: ignore[arg-type]
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> LexicalSnapshot:
        """Read :meth:`to_bytes`' output (raises ``ValueError`` on anything else)."""
        try:
            z = _npz_views(data)
            arrays = {k: z[k] for k in _ARRAYS}
            raw = z["vocab"].tobytes().decode("utf-8")
            dense = {k: z[k] for k in _DENSE if k in z}
            lists = {k: z[k] for k in _LISTS if k in z}
        except (OSError, KeyError, EOFError, UnicodeDecodeError, ValueError, zipfile.BadZipFile) as e:
            raise ValueError(f"not a lexical snapshot: {e}") from e
        vocab = raw.split("\0") if raw or len(arrays["starts"]) > 1 else []
        why = _misfit(arrays, len(vocab))
        if why is not None:
            raise ValueError(f"not a lexical snapshot: {why}")
        if dense and (
            len(dense) != len(_DENSE)
            or dense["dense_codes"].ndim != 2
            or len(dense["dense_codes"]) != len(arrays["rowids"])
            or dense["dense_codes"].dtype != np.uint8
            or dense["dense_codebook"].dtype != np.float32
        ):
            raise ValueError("not a lexical snapshot: its dense codes do not fit its memories")
        at = _lists_fit(lists, len(arrays["rowids"])) if lists else 0
        if lists and not dense:
            raise ValueError("not a lexical snapshot: it has inverted lists but no dense codes")
        return cls(
            vocab=vocab,
            **arrays,
            **dense,
            dense_centroids=lists.get("dense_centroids"),
            dense_lists=lists.get("dense_lists"),
            dense_lists_at=at,
        )

    def restricted(self, rowids: np.ndarray) -> LexicalSnapshot | None:
        """This snapshot for the memories ``rowids`` (ascending) only, or ``None`` when one of
        them is not in it (then it cannot stand for them). Memories left out (forgotten since)
        leave the postings and per-memory arrays; the vocabulary stays (an unused token scores
        nothing). All array operations: no token is read again."""
        rowids = np.asarray(rowids, dtype=np.int64)
        if len(rowids) == len(self.rowids) and np.array_equal(rowids, self.rowids):
            return self
        at = np.searchsorted(self.rowids, rowids)
        if len(rowids) and (
            at[-1] >= len(self.rowids)
            or not np.array_equal(self.rowids[np.minimum(at, len(self.rowids) - 1)], rowids)
        ):
            return None
        keep = np.zeros(len(self.rowids), dtype=bool)
        keep[at] = True
        new_pos = np.cumsum(keep) - 1
        tids = np.repeat(np.arange(len(self.starts) - 1, dtype=np.int64), np.diff(self.starts))
        hold = keep[self.pos]
        starts = np.zeros(len(self.starts), dtype=np.int64)
        np.cumsum(np.bincount(tids[hold], minlength=len(self.starts) - 1), out=starts[1:])
        sizes = np.diff(self.user_starts)
        user_starts = np.zeros(len(rowids) + 1, dtype=np.int64)
        np.cumsum(sizes[keep], out=user_starts[1:])
        return LexicalSnapshot(
            rowids=rowids,
            vocab=self.vocab,
            starts=starts,
            pos=new_pos[self.pos[hold]],
            tf=self.tf[hold],
            lengths=self.lengths[keep],
            user_starts=user_starts,
            user_ids=self.user_ids[np.repeat(keep, sizes)],
            unanswered=self.unanswered[keep],
            dense_codebook=self.dense_codebook,
            dense_codes=None if self.dense_codes is None else self.dense_codes[keep],
            dense_centroids=self.dense_centroids,
            dense_lists=None if self.dense_lists is None else self.dense_lists[keep],
            dense_lists_at=self.dense_lists_at,
        )


def _npz_views(data: bytes) -> dict[str, np.ndarray]:
    """The arrays of an uncompressed ``.npz`` archive (what :meth:`LexicalSnapshot.to_bytes`
    writes), as read-only views of ``data``: no copy of the hundreds of megabytes a large
    partition's snapshot holds, and no Python loop over them (``np.load`` reads an archive's
    member 256 KB at a time through ``zipfile``; at a million memories that was 0.5 s of a
    restart, holding the interpreter lock against the vector load beside it).

    Each member's CRC is checked (``zlib.crc32``, which runs without the lock), so a damaged
    snapshot is refused as ``np.load`` refused it; anything but plain numbers (object arrays,
    that is pickles, and records), compressed members and members whose bytes are not where
    the archive says are refused too (``ValueError``)."""
    views: dict[str, np.ndarray] = {}
    whole = memoryview(data)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for info in archive.infolist():
            if info.compress_type != zipfile.ZIP_STORED or not info.filename.endswith(".npy"):
                raise ValueError(f"member {info.filename!r} is not a stored array")
            local = whole[info.header_offset : info.header_offset + _LOCAL_HEADER.size]
            if len(local) < _LOCAL_HEADER.size:
                raise ValueError(f"member {info.filename!r} lies past the archive's end")
            fields = _LOCAL_HEADER.unpack(local)
            if fields[0] != _LOCAL_SIGNATURE:
                raise ValueError(f"member {info.filename!r} has no local header")
            start = info.header_offset + _LOCAL_HEADER.size + fields[-2] + fields[-1]
            member = whole[start : start + info.file_size]
            if len(member) != info.file_size or zlib.crc32(member) != info.CRC:
                raise ValueError(f"member {info.filename!r} is damaged (its CRC does not match)")
            head = io.BytesIO(member[: min(len(member), _MAX_NPY_HEADER)])
            version = npy_format.read_magic(head)
            if version == (1, 0):
                shape, fortran, dtype = npy_format.read_array_header_1_0(head)
            elif version == (2, 0):
                shape, fortran, dtype = npy_format.read_array_header_2_0(head)
            else:
                raise ValueError(f"member {info.filename!r} is a .npy of version {version}")
            if dtype.kind not in "biuf" or fortran:
                raise ValueError(f"member {info.filename!r} holds {dtype} values or a Fortran-ordered array")
            count = math.prod(shape)
            if head.tell() + count * dtype.itemsize != len(member):
                raise ValueError(f"member {info.filename!r} does not hold its {shape} array")
            views[info.filename[: -len(".npy")]] = np.frombuffer(
                data, dtype=dtype, count=count, offset=start + head.tell()
            ).reshape(shape)
    return views


def _csr_misfit(starts: np.ndarray, values: np.ndarray, name: str) -> str | None:
    """Why ``starts`` are not the row pointers of ``values`` (``None``: they are)."""
    if starts.ndim != 1 or not len(starts) or starts[0] != 0 or starts[-1] != len(values):
        return f"the row pointers of its {name} do not span them"
    if len(starts) > 1 and bool((np.diff(starts) < 0).any()):
        return f"the row pointers of its {name} go backwards"
    return None


def _misfit(arrays: dict[str, np.ndarray], vocab: int) -> str | None:
    """Why the arrays of a stored snapshot cannot stand for a partition (``None``: they can).

    A snapshot that parses but whose arrays disagree (a bug of the writer, a row edited by
    hand) would make every search of the user fail on an index out of range, or rank with
    postings of the wrong memories, until the snapshot is replaced, which a failing build
    never does: it is refused here and the index rebuilt from the texts. Every check is one
    pass over an array, a few milliseconds at a million memories."""
    rowids, starts, pos, tf = arrays["rowids"], arrays["starts"], arrays["pos"], arrays["tf"]
    n = len(rowids)
    if rowids.ndim != 1 or (n > 1 and bool((np.diff(rowids) <= 0).any())):
        return "its memories are not in ascending rowid order"
    if len(starts) != vocab + 1:
        return "its postings do not fit its vocabulary"
    why = _csr_misfit(starts, pos, "postings") or _csr_misfit(
        arrays["user_starts"], arrays["user_ids"], "question tokens"
    )
    if why is not None:
        return why
    if len(tf) != len(pos) or len(arrays["lengths"]) != n or len(arrays["unanswered"]) != n:
        return "its per-memory arrays do not fit its memories"
    if len(arrays["user_starts"]) != n + 1:
        return "its questions do not fit its memories"
    why = _postings_misfit(starts, pos, tf, n)
    if why is not None:
        return why
    ids = arrays["user_ids"]
    if len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= vocab):
        return "a question names a token it does not hold"
    if len(arrays["lengths"]) and int(np.min(arrays["lengths"])) < 0:
        return "a count is not positive"
    return None


def _postings_misfit(starts: np.ndarray, pos: np.ndarray, tf: np.ndarray, n: int) -> str | None:
    """Why the postings are unsound: a position outside the memories, a token's positions not
    strictly ascending (a memory counted twice for it), a frequency not positive. One pass in C
    where it is built (36 ms at 36M postings, against 0.4 s for the NumPy passes)."""
    check = native.postings_misfit
    if (
        check is not None
        and starts.dtype == np.int64
        and pos.dtype in (np.int32, np.int64)
        and tf.dtype in (np.float32, np.uint16)
    ):
        return check(np.ascontiguousarray(starts), np.ascontiguousarray(pos), np.ascontiguousarray(tf), n)
    if len(pos) and (int(pos.min()) < 0 or int(pos.max()) >= n):
        return "a posting names a memory it does not hold"
    if len(pos) > 1:  # ascending within each token's run: no memory counted twice for a token
        down = np.diff(pos) <= 0  # allowed only where a token's run starts
        down[starts[1:-1][(starts[1:-1] > 0) & (starts[1:-1] < len(pos))] - 1] = False
        if bool(down.any()):
            return "a token's postings are not in ascending order"
    if len(tf) and float(np.min(tf)) <= 0:
        return "a count is not positive"
    return None


def _lists_fit(lists: dict[str, np.ndarray], n: int) -> int:
    """The size the inverted lists ``lists`` were learnt at, if they are whole and fit ``n``
    memories (raises ``ValueError`` otherwise: a list number out of range would search the
    wrong list)."""
    if len(lists) != len(_LISTS):
        raise ValueError("not a lexical snapshot: its inverted lists are incomplete")
    centroids, numbers, at = (lists[k] for k in _LISTS)
    if (
        centroids.dtype != np.float32
        or centroids.ndim != 2
        or not len(centroids)
        or numbers.dtype != np.int32
        or numbers.shape != (n,)
        or at.dtype != np.int64
        or at.shape != (1,)
        or int(at[0]) < 1
        or (n and not 0 <= int(numbers.min()) <= int(numbers.max()) < len(centroids))
    ):
        raise ValueError("not a lexical snapshot: its inverted lists do not fit its memories")
    return int(at[0])
