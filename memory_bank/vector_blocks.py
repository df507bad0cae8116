"""A user's stored vectors in blocks, so that a restart reads them in a few rows, not one each.

Reading 100,000 vectors one row each was most of the first search of a 100,000-memory user
after a restart (0.8 s of 2.1 s). The store keeps, per user and encoder, blocks of up to
:data:`BLOCK` consecutive memories: their rowids, vectors, kinds, days and turn numbers as
arrays of raw bytes (schema 6, table ``vector_blocks``).

A block covers a rowid range ``[first, last]`` and lists *every* memory of the user in that
range that has a vector of its encoder (forgotten and hidden ones too: which of them a
partition takes is read from the memories' flags at load time, so a tier move never touches a
block). A block is a cache: the store deletes every block whose range holds a memory whose
vector is deleted or rewritten, in the same transaction (a delete, a re-embedding, a rewrite,
a user's deletion), so no block ever holds a deleted memory or a stale vector, and memories
outside every block are read from their rows. Blocks are written by
:meth:`memory_bank.stores.base.Storage.seal_vector_blocks`, after a partition load read many
rows. Nothing in a block is unpickled: arrays are raw little-endian bytes, names JSON.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

import numpy as np

#: Memories per block (6 MB of 384-dimensional vectors).
BLOCK = 4096
#: A partition load that read at least this many vectors from rows seals them into blocks.
SEAL_MIN = BLOCK
#: ``turns`` value of a memory without a turn number.
NO_TURN = np.iinfo(np.int64).min


@dataclasses.dataclass
class VectorBlock:
    """The vectors of memories ``rowids`` (ascending, within ``[first, last]``), with each
    memory's kind, day and turn (``NO_TURN``: none)."""

    first: int
    last: int
    rowids: np.ndarray
    vectors: np.ndarray
    kinds: np.ndarray  # object array of str
    dates: np.ndarray  # object array of str
    turns: np.ndarray  # int64, NO_TURN for None

    def __len__(self) -> int:
        return len(self.rowids)

    @classmethod
    def of(
        cls,
        first: int,
        last: int,
        rowids: Sequence[int] | np.ndarray,
        vectors: np.ndarray,
        kinds: Sequence[str],
        dates: Sequence[str],
        turns: Sequence[int | None],
    ) -> VectorBlock:
        return cls(
            first,
            last,
            np.asarray(rowids, dtype=np.int64),
            np.ascontiguousarray(vectors, dtype=np.float32),
            np.asarray(list(kinds), dtype=object),
            np.asarray(list(dates), dtype=object),
            np.fromiter((NO_TURN if t is None else int(t) for t in turns), dtype=np.int64, count=len(turns)),
        )

    def columns(self) -> tuple[int, bytes, bytes, str, bytes, bytes, bytes]:
        """The block as the values of its table's columns after the range: the dimension; the
        rowids and the vectors as raw bytes (a load uses them in place); the distinct kinds and
        days as JSON, each memory's index into them and its turn as raw bytes. No archive to
        unpack and no pickle: a load is a few ``frombuffer`` calls."""
        kinds, kind_at = np.unique(self.kinds.astype(str), return_inverse=True)
        days, day_at = np.unique(self.dates.astype(str), return_inverse=True)
        return (
            int(self.vectors.shape[1]),
            self.rowids.astype("<i8").tobytes(),
            np.ascontiguousarray(self.vectors, dtype="<f4").tobytes(),
            json.dumps({"kinds": kinds.tolist(), "days": days.tolist()}, ensure_ascii=False),
            kind_at.astype("<i4").tobytes(),
            day_at.astype("<i4").tobytes(),
            self.turns.astype("<i8").tobytes(),
        )

    @classmethod
    def from_columns(
        cls, first: int, last: int, dim: int, rowids: bytes, vectors: bytes | memoryview, labels: str,
        kind_at: bytes, day_at: bytes, turns: bytes,
    ) -> VectorBlock:  # fmt: skip
        """Read :meth:`columns`' output (raises ``ValueError`` on anything that does not fit);
        the vectors are a read-only view of ``vectors``."""
        try:
            names = json.loads(labels)
            ids = np.frombuffer(rowids, dtype="<i8")
            n = len(ids)
            kinds = np.asarray(names["kinds"], dtype=object)
            days = np.asarray(names["days"], dtype=object)
            ki, di = np.frombuffer(kind_at, dtype="<i4"), np.frombuffer(day_at, dtype="<i4")
            ts = np.frombuffer(turns, dtype="<i8")
            if not (len(ki) == len(di) == len(ts) == n) or len(vectors) != 4 * n * int(dim):
                raise ValueError("its columns do not fit together")
            # A load joins blocks and rows by rowid: a rowid out of order, repeated or outside
            # the block's range would give one memory two positions (every search of the user
            # then fails) or hide another's row.
            if n and (ids[0] < int(first) or ids[-1] > int(last) or bool((np.diff(ids) <= 0).any())):
                raise ValueError("its rowids are not ascending within its range")
            return cls(
                int(first),
                int(last),
                ids.astype(np.int64, copy=False),
                np.frombuffer(vectors, dtype="<f4").reshape(n, int(dim)),
                kinds[ki] if n else np.zeros(0, dtype=object),
                days[di] if n else np.zeros(0, dtype=object),
                ts.astype(np.int64, copy=False),
            )
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise ValueError(f"not a vector block: {e}") from e


def gaps(ranges: Sequence[tuple[int, int]], after: int, upto: int | None) -> list[tuple[int, int | None]]:
    """The rowid ranges ``(lo, hi]`` within ``(after, upto]`` that no block range ``[first,
    last]`` (ascending, disjoint) covers; ``hi`` is ``None`` for "no upper bound"."""
    out: list[tuple[int, int | None]] = []
    lo = after
    for first, last in ranges:
        if upto is not None and first > upto:
            break
        if last <= lo:
            continue
        if first - 1 > lo:
            out.append((lo, first - 1))
        lo = max(lo, last)
    if upto is None or lo < upto:
        out.append((lo, upto))
    return out
