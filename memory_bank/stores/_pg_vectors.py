"""A partition load from vector blocks on PostgreSQL: binary COPY streams into one matrix.

On PostgreSQL a 6 MB block is stored out of line in about 3,000 TOAST chunks, and reading
them back is most of a 100k-memory user's cold start on the server; on the client, a plain
``SELECT`` of the blocks holds the whole 150 MB result, copies it into Python bytes, and the
shared code then joins the blocks into one matrix. Here the blocks come as a binary ``COPY``
(one message per block, see :mod:`memory_bank.stores._pg_copy`), each block's kept vectors are
copied once into their place in one preallocated matrix, and a load of many blocks reads them
on two connections at once, the second on the first's exported snapshot, so two server
processes detoast in parallel. The batch is the one the shared path builds
(:meth:`memory_bank.stores.sql.SQLStorage.vectors`), bit for bit; where a block does not fit
(sizes, dimension, labels) :func:`read` returns ``None`` and the shared path does the load.
"""

from __future__ import annotations

import dataclasses
import logging
import struct
import threading
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from memory_bank import vector_blocks
from memory_bank.records import MemoryKind
from memory_bank.stores import _pg_copy
from memory_bank.stores._pg_pool import PostgresDatabase, pyformat
from memory_bank.stores.base import VectorBatch
from memory_bank.stores.sql import SQLStorage, blocks_query, joined, matrix_with_room

logger = logging.getLogger(__name__)

#: A load of at least this many blocks reads them on two connections.
PARALLEL_MIN = 4

# Each block's range and dimension, and the sizes of its arrays: ``octet_length`` of a value
# stored out of line reads its TOAST pointer, not the value.
_SIZES = (
    "first_rowid, last_rowid, dim, octet_length(rowids), octet_length(vectors), octet_length(kind_at), "
    "octet_length(day_at), octet_length(turns)"
)
# The blocks as the COPY reads them: every field non-NULL, the labels as UTF-8 bytes whatever
# the connection's encoding.
_COLUMNS = "first_rowid, last_rowid, dim, rowids, vectors, convert_to(labels, 'UTF8'), kind_at, day_at, turns"


def block_of(fields: list[memoryview]) -> vector_blocks.VectorBlock:
    """A vector block from its binary COPY fields (``_COLUMNS``); its vectors are a view of the
    message, every other array a copy (small), so nothing else keeps the message."""
    first, last = _pg_copy.INT8.unpack(fields[0])[0], _pg_copy.INT8.unpack(fields[1])[0]
    (dim,) = _pg_copy.INT4.unpack(fields[2])
    return vector_blocks.VectorBlock.from_columns(
        first, last, dim, bytes(fields[3]), fields[4], bytes(fields[5]).decode("utf-8"),
        bytes(fields[6]), bytes(fields[7]), bytes(fields[8]),
    )  # fmt: skip


@dataclasses.dataclass
class _Run:
    """Consecutive blocks and the rows before and between them, filled into ``out[start:]``."""

    ranges: list[tuple[int, int]]
    holes: list[tuple[int, VectorBatch]]  # (rowid the hole starts after, its rows)
    start: int
    parts: list[VectorBatch] = dataclasses.field(default_factory=list)
    filled: int = 0

    def put(self, out: np.ndarray, part: VectorBatch) -> None:
        n = len(part.rowids)
        if n:
            at = self.start + self.filled
            out[at : at + n] = part.vectors
            self.filled += n
            # not the block's own vectors: they are a view of its COPY message, which is freed
            # (and its memory reused for the next one) only once nothing holds it
            self.parts.append(dataclasses.replace(part, vectors=out[at : at + n]))


class _Load:
    """One call of :func:`read`: what every run needs to turn blocks into batches."""

    def __init__(
        self,
        store: SQLStorage,
        db: PostgresDatabase,
        user_id: int,
        encoder: str,
        kinds: Sequence[MemoryKind],
        bounds: tuple[int, int | None],
        archived: bool | None,
    ) -> None:
        self.store, self.db, self.user_id, self.encoder, self.kinds = store, db, user_id, encoder, kinds
        self.after, self.upto = bounds
        self.archived = archived
        self.flags = store._tier_flags(user_id, archived)

    def fill(self, run: _Run, out: np.ndarray, conn: Any = None) -> None:
        """Stream the run's blocks into ``out`` (raises ``ValueError`` on one that does not
        fit, after reading the COPY to its end: the connection stays usable)."""
        first, last = run.ranges[0][0], run.ranges[-1][1]
        upto = last if self.upto is None else min(last, self.upto)
        sql, args = blocks_query(_COLUMNS, self.user_id, self.encoder, max(self.after, first - 1), upto)
        messages = self.db.copy_out(pyformat(sql), args, conn=conn)
        pending = iter(run.holes)
        hole = next(pending, None)
        seen = 0
        try:
            for i, fields in enumerate(_pg_copy.tuples(messages, 9)):
                block = block_of(fields)
                if i >= len(run.ranges) or (block.first, block.last) != run.ranges[i]:
                    raise ValueError("the blocks changed within one snapshot")
                while hole is not None and hole[0] < block.first:
                    run.put(out, hole[1])
                    hole = next(pending, None)
                run.put(
                    out,
                    self.store._from_block(
                        block, self.kinds, self.flags, self.archived, self.after, self.upto
                    ),
                )
                seen = i + 1
        except (ValueError, struct.error) as e:
            for _ in messages:
                pass  # to the end of the COPY
            raise ValueError(str(e)) from e
        if seen != len(run.ranges):
            raise ValueError(f"{seen} blocks read of {len(run.ranges)}")
        while hole is not None:
            run.put(out, hole[1])
            hole = next(pending, None)


def _sizes(rows: Iterable[Sequence[Any]]) -> tuple[int, list[int]] | None:
    """The blocks' dimension and memory counts, or ``None`` where their sizes do not fit."""
    dim, counts = 0, []
    for _first, _last, d, n_ids, n_vecs, n_kinds, n_days, n_turns in rows:
        n = int(n_ids) // 8
        dim = dim or int(d)
        if int(d) != dim or dim <= 0 or int(n_ids) != 8 * n or int(n_vecs) != 4 * n * dim:
            return None
        if not int(n_kinds) == int(n_days) == 4 * n or int(n_turns) != 8 * n:
            return None
        counts.append(n)
    return dim, counts


def read(
    store: SQLStorage,
    db: PostgresDatabase,
    user_id: int,
    encoder: str,
    kinds: Sequence[MemoryKind],
    after: int,
    upto: int | None,
    archived: bool | None,
) -> VectorBatch | None:
    """``store.vectors(..., texts=False)`` from the blocks and the rows between them (``db``:
    the store's connections); call it inside ``store.snapshot()``. ``None`` where there are no blocks or one does not fit."""
    rows = store._rows(*blocks_query(_SIZES, user_id, encoder, after, upto))
    sized = _sizes(rows) if rows else None
    if sized is None:
        return None
    dim, counts = sized
    ranges = [(int(r[0]), int(r[1])) for r in rows]
    holes = [
        (lo, store._row_vectors(user_id, encoder, kinds, lo, hi, archived, False))
        for lo, hi in vector_blocks.gaps(ranges, after, upto)
    ]
    if any(len(h.rowids) and h.vectors.shape[1] != dim for _, h in holes):
        return None
    load = _Load(store, db, user_id, encoder, kinds, (after, upto), archived)
    # Two runs of about half the blocks each; the holes before a run's first block are its.
    split = len(ranges) // 2 if len(ranges) >= PARALLEL_MIN else len(ranges)
    cut = ranges[split][0] if split < len(ranges) else None
    head = [h for h in holes if cut is None or h[0] < cut]
    tail = holes[len(head) :]
    size = sum(counts[:split]) + sum(len(h.rowids) for _, h in head)
    runs = [_Run(ranges[:split], head, 0)]
    if split < len(ranges):
        runs.append(_Run(ranges[split:], tail, size))
    out = matrix_with_room(size + sum(counts[split:]) + sum(len(h.rowids) for _, h in tail), dim)
    try:
        _fill_all(db, load, runs, out)
    except ValueError as e:
        logger.info("reading the vector blocks of user id %d the shared way: %s", user_id, e)
        return None
    parts = [p for run in runs for p in run.parts]
    if not parts:
        return VectorBatch(np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32), [], [], [], [])
    n = runs[0].filled
    if len(runs) > 1:
        if n < runs[1].start:  # the first run kept fewer than its room: close the gap
            out[n : n + runs[1].filled] = out[runs[1].start : runs[1].start + runs[1].filled]
        n += runs[1].filled
    return joined(parts, out[:n], sum(h.from_rows for _, h in holes))


def _fill_all(db: PostgresDatabase, load: _Load, runs: list[_Run], out: np.ndarray) -> None:
    """Fill every run: the second on a twin connection in a thread where there is one."""
    if len(runs) == 1:
        load.fill(runs[0], out)
        return
    with db.twin() as conn:
        if conn is None:
            for run in runs:
                load.fill(run, out)
            return
        failed: list[BaseException] = []

        def second() -> None:
            try:
                load.fill(runs[1], out, conn)
            except BaseException as e:  # re-raised on the calling thread
                failed.append(e)

        thread = threading.Thread(target=second, name="memorybank-pg-blocks", daemon=True)
        thread.start()
        try:
            load.fill(runs[0], out)
        finally:
            thread.join()
        if failed:
            raise failed[0]
