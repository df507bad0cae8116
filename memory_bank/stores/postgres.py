"""PostgreSQL as the shared store, so many app servers serve one user base.

:class:`PostgresStorage` runs the shared queries of :mod:`memory_bank.stores.sql` on the same
tables, schema version and migrations as the embedded SQLite store; vectors are stored as
``bytea`` (float32, like SQLite's BLOB), so no extension (pgvector) is needed: each server
builds its per-user FAISS partitions from them, never re-embedding.

How several servers share it safely:

* Every write is one transaction. Writers that change a user's memories first lock that user's
  row (``SELECT ... FOR NO KEY UPDATE``), so the writes of one user are serialised: turn numbers
  per day stay unique (also enforced by a unique index), and memory rows get ids in the order
  their transactions commit.
* That ordering is what keeps other servers' caches correct. PostgreSQL sequence values are not
  commit-ordered in general: a row with id 10 may commit after a row with id 11, and a cache that
  loads "rows with id > the largest id I have" would skip row 10 for good. Here the id is drawn
  inside the user lock, so for any one user a later id always belongs to a later commit (the
  sequence must hand out increasing values, i.e. ``CACHE 1``, which is checked at start-up);
  the per-user ``version``/``epoch`` counters, bumped in the same transaction, tell a server when
  to catch up (append) or reload (anything else).
* Reinforcement changes each row in place (``strength = strength + 1``: no read-modify-write in
  Python, so no lost updates), at most once a day, and the recall date only moves forward.
* ``UNIQUE (user_id, memory_id)`` makes a retried add idempotent: a retried ``add_memories``
  batch, or an ``add_turn`` that carries a concrete memory id (no ``{turn}`` placeholder), finds
  the row it already wrote and returns it instead of adding a second copy.
* Deadlocks and serialisation failures are retried; a pooled connection the server dropped is
  replaced (:mod:`memory_bank.stores._pg_pool`).

Usage::

    from memory_bank import MemoryBank
    from memory_bank.stores import open_storage

    bank = MemoryBank(config, storage=open_storage("postgresql://app@db.internal/memorybank"))

Requires ``pip install 'memorybank-siliconfriend[postgres]'`` (psycopg 3).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import struct
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np

from memory_bank import vector_blocks
from memory_bank.errors import StoreError
from memory_bank.records import Memory, MemoryKind
from memory_bank.stores import _pg_copy
from memory_bank.stores._pg_pool import PostgresDatabase, describe_url, split_schema
from memory_bank.stores.base import Backend, VectorBatch
from memory_bank.stores.sql import (
    FIELDS,
    INSERT,
    LEXICAL_TABLE,
    MIGRATION_6,
    SCHEMA_6_INDEXES,
    Cursor,
    SQLStorage,
    blocks_query,
    memory_row,
    statements,
)

if TYPE_CHECKING:
    import psycopg

T = TypeVar("T")
logger = logging.getLogger(__name__)

# Blocks of vectors do not compress: stored out of line as they are, never tried.
_BLOCKS_STORAGE = "\nALTER TABLE vector_blocks ALTER COLUMN vectors SET STORAGE EXTERNAL;"

# Migrations from version N to N+1: the PostgreSQL dialect of the SQLite store's, which must have
# the same keys (a test checks). Applied in order in one transaction under an advisory lock, so
# servers starting together migrate once.
_MIGRATIONS: dict[int, str] = {
    1: "",  # 1 -> 2 added SQLite's forgetting key (an index the PostgreSQL store does not use)
    2: "ALTER TABLE memories ADD COLUMN IF NOT EXISTS weight DOUBLE PRECISION NOT NULL DEFAULT 1",
    3: LEXICAL_TABLE.format(bigint="BIGINT", blob="BYTEA"),  # 3 -> 4: the persisted lexical index
    4: "ALTER TABLE memories ADD COLUMN IF NOT EXISTS hidden BOOLEAN NOT NULL DEFAULT FALSE",  # 4 -> 5
    # 5 -> 6: vector blocks (memory_bank.vector_blocks), the tier counter, the tier indexes
    5: MIGRATION_6.format(bigint="BIGINT", blob="BYTEA", blocks_storage=_BLOCKS_STORAGE),
}

_SCHEMA_LOCK = 0x4D42_5343  # pg_advisory_xact_lock key: "MBSC"

# Each block's range and dimension, and the sizes of its arrays: ``octet_length`` of a value
# stored out of line reads its TOAST pointer, not the value.
_BLOCK_SIZES = (
    "first_rowid, last_rowid, dim, octet_length(rowids), octet_length(vectors), octet_length(kind_at), "
    "octet_length(day_at), octet_length(turns)"
)
# The blocks as a binary COPY reads them: every field non-NULL, the labels as UTF-8 bytes
# whatever the connection's encoding.
_COPY_COLUMNS = (
    "first_rowid, last_rowid, dim, rowids, vectors, convert_to(labels, 'UTF8'), kind_at, day_at, turns"
)


def _store_snapshots_uncompressed(c: Cursor) -> None:
    """Lexical snapshots are stored out of line as they are, like the vector blocks: with the
    default (pglz) a 100k-memory user's 24 MB snapshot took the server about 0.07 s longer to
    read back (0.23 vs 0.16 s) and a save longer to compress, for 7 MB less on disk. Only
    where it is not so yet and the role owns the table (a role without DDL rights keeps the
    default); a stored snapshot takes it when next saved."""
    row = c.execute(
        "SELECT a.attstorage, pg_has_role(r.relowner, 'MEMBER') FROM pg_attribute a "
        "JOIN pg_class r ON r.oid = a.attrelid WHERE a.attrelid = 'lexical_snapshots'::regclass AND a.attname = 'data'"
    ).fetchone()
    if row is not None and row[0] != "e" and row[1]:
        c.execute("ALTER TABLE lexical_snapshots ALTER COLUMN data SET STORAGE EXTERNAL")


def _block_of(fields: list[memoryview]) -> vector_blocks.VectorBlock:
    """A vector block from its binary COPY fields (``_COPY_COLUMNS``); its vectors are a view
    of the message, every other array a copy (small), so nothing else keeps the message."""
    first, last = _pg_copy.INT8.unpack(fields[0])[0], _pg_copy.INT8.unpack(fields[1])[0]
    (dim,) = _pg_copy.INT4.unpack(fields[2])
    return vector_blocks.VectorBlock.from_columns(
        first, last, dim, bytes(fields[3]), fields[4], bytes(fields[5]).decode("utf-8"),
        bytes(fields[6]), bytes(fields[7]), bytes(fields[8]),
    )  # fmt: skip


@functools.lru_cache(maxsize=1024)
def _pyformat(sql: str) -> str:
    """The shared queries' ``?`` placeholders in psycopg's style."""
    return sql.replace("%", "%%").replace("?", "%s")


class _Cursor:
    """A psycopg cursor taking the shared queries' placeholders (composed SQL passes as is)."""

    def __init__(self, cur: psycopg.Cursor[Any]) -> None:
        self.raw = cur

    def execute(self, sql: Any, parameters: Any = (), /) -> Any:
        return self.raw.execute(_pyformat(sql) if isinstance(sql, str) else sql, parameters)

    def executemany(self, sql: Any, parameters: Any, /) -> Any:
        return self.raw.executemany(_pyformat(sql), parameters)


class PostgresStorage(SQLStorage):
    """The shared store: one PostgreSQL database (optionally one ``schema`` in it).

    Connections come from a small pool (:class:`~memory_bank.stores._pg_pool.PostgresDatabase`):
    a server holds as many as it has operations in flight and at most ``pool_size`` idle ones.
    ``create=False`` refuses a database that holds no memory store instead of creating the
    tables.

    Args:
        url: a libpq URL or key/value string, e.g. ``postgresql://app:secret@db:5432/memorybank``;
            a URL may name the schema too: ``postgresql://app@db/shared?schema=memorybank``.
        schema: a schema to keep the tables in (created if missing); default: the URL's
            ``schema`` parameter, else the connection's search path (usually ``public``).
        create: create the tables if the database has none.
        pool_size: idle connections kept for reuse.
    """

    TYPES: ClassVar[dict[str, str]] = {
        "serial": "BIGSERIAL",
        "bigint": "BIGINT",
        "created_at": "TIMESTAMPTZ NOT NULL DEFAULT now()",
        "day": 'TEXT COLLATE "C"',
        "flag": "BOOLEAN NOT NULL DEFAULT FALSE",
        "blob": "BYTEA",
        "real": "DOUBLE PRECISION",
        "more_columns": "",
        "rowid_index": "memories_by_user_rowid",
        "more_indexes": "\nCREATE UNIQUE INDEX IF NOT EXISTS memories_turn_position "
        "ON memories (user_id, date, turn) WHERE kind = 'turn';",
        # after the embeddings table, which one of them indexes
        "blocks_storage": _BLOCKS_STORAGE + SCHEMA_6_INDEXES,
    }
    LOCK_USER = "SELECT 1 FROM users WHERE id = ? FOR NO KEY UPDATE"
    # Two transactions creating one user name (two imports, an import and an add) would both
    # insert it; the second would fail on the unique name. This lock makes them take turns.
    LOCK_NAME = "SELECT pg_advisory_xact_lock(hashtextextended(?, 0))"
    MIGRATIONS = _MIGRATIONS

    def __init__(
        self, url: str, *, schema: str | None = None, create: bool = True, pool_size: int = 8
    ) -> None:
        self._db = PostgresDatabase(url, schema=schema, pool_size=pool_size)
        self.url, self.schema, self.where = self._db.url, self._db.schema, self._db.where
        self._pg: Any = self._db._pg
        self._migrate(create)

    def __repr__(self) -> str:
        return f"PostgresStorage({self.where!r})"

    # -- connections and transactions (see memory_bank.stores._pg_pool) ------------------------
    def _rows(self, sql: str, args: Sequence[Any] = (), *, binary: bool = False) -> list[tuple[Any, ...]]:
        return self._db.rows(_pyformat(sql), args, binary=binary)

    def _write(self, fn: Callable[[Cursor], T]) -> T:
        return self._db.write(lambda cur: fn(_Cursor(cur)))

    def snapshot(self) -> contextlib.AbstractContextManager[None]:
        """Reads made by this thread inside the block see one consistent state of the database
        (a ``REPEATABLE READ READ ONLY`` transaction on a connection held for the block), while
        other servers keep writing."""
        return self._db.snapshot()

    def _migrate(self, create: bool) -> None:
        sql = self._pg.sql

        def run(c: Cursor) -> None:
            c.execute("SELECT pg_advisory_xact_lock(?)", (_SCHEMA_LOCK,))
            # DDL only when something is missing: a server's role needs no CREATE privilege
            # once the store exists.
            schema = self.schema
            if schema and not c.execute("SELECT 1 FROM pg_namespace WHERE nspname = ?", (schema,)).fetchone():
                if not create:
                    raise StoreError(f"no memory store in {self.where}: the schema does not exist")
                c.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
            found = c.execute(
                "SELECT to_regclass('meta') IS NOT NULL, to_regclass('users') IS NOT NULL "
                "OR to_regclass('memories') IS NOT NULL OR to_regclass('embeddings') IS NOT NULL"
            ).fetchone()
            has_meta, has_others = bool(found and found[0]), bool(found and found[1])
            if not has_meta and has_others:
                raise StoreError(
                    f"{self.where} already has tables named users/memories/embeddings that are not a "
                    "memory store's; use a dedicated database or a schema (postgresql://...?schema=memorybank)"
                )
            if not has_meta:
                if not create:
                    raise StoreError(
                        f"no memory store in the PostgreSQL database {self.where}; check the URL, or create "
                        "one with 'memorybank import', 'memorybank add' or 'memorybank migrate'"
                    )
                for statement in statements(self.schema_sql()):
                    c.execute(statement)
            self._upgrade(c)
            _store_snapshots_uncompressed(c)
            cache = c.execute(
                "SELECT seqcache FROM pg_sequence WHERE seqrelid = pg_get_serial_sequence('memories', 'id')::regclass"
            ).fetchone()
            if cache and int(cache[0]) != 1:
                raise StoreError(
                    f"the memory id sequence of {self.where} has CACHE {cache[0]}; servers' search caches "
                    "need ids in commit order per user: run ALTER SEQUENCE memories_id_seq CACHE 1"
                )

        self._write(run)

    def close(self) -> None:
        self._db.close()

    # -- the dialect ---------------------------------------------------------------------------
    def _in_list(self, column: str, values: Iterable[Any], sql_type: str = "text") -> tuple[str, list[Any]]:
        return f"{column} = ANY(?::{sql_type}[])", [list(values)]

    def _insert(self, c: Cursor, row: Sequence[Any]) -> int:
        inserted = c.execute(INSERT + " RETURNING id", row).fetchone()
        return int(inserted[0]) if inserted else 0

    # -- vectors: blocks streamed into one matrix -------------------------------------------
    def vectors(
        self,
        user_id: int,
        encoder: str,
        kinds: Iterable[MemoryKind],
        after_rowid: int = 0,
        *,
        archived: bool | None = False,
        upto_rowid: int | None = None,
        texts: bool = True,
    ) -> VectorBatch:
        """The shared :meth:`SQLStorage.vectors`, but a partition load from blocks streams them
        into one matrix: the blocks' rows come one at a time (never a 150 MB result held
        whole, then copied to Python, then joined), each block's kept vectors are copied once
        into their place. The same batch, bit for bit; a block this path cannot place (sizes
        that do not fit, another dimension) leaves the load to the shared path."""
        kinds = list(kinds)
        if not texts:
            with self.snapshot():
                batch = self._streamed_vectors(user_id, encoder, kinds, after_rowid, upto_rowid, archived)
                if batch is not None:
                    return batch
        return super().vectors(
            user_id, encoder, kinds, after_rowid, archived=archived, upto_rowid=upto_rowid, texts=texts
        )

    def _streamed_vectors(
        self,
        user_id: int,
        encoder: str,
        kinds: Sequence[MemoryKind],
        after: int,
        upto: int | None,
        archived: bool | None,
    ) -> VectorBatch | None:
        """:meth:`vectors` without texts from the blocks (streamed) and the rows between them,
        in one snapshot; ``None`` where there are no blocks or one does not fit."""
        sizes = self._rows(*blocks_query(_BLOCK_SIZES, user_id, encoder, after, upto))
        if not sizes:
            return None
        dim = int(sizes[0][2])
        counts = []
        for _first, _last, d, n_ids, n_vecs, n_kinds, n_days, n_turns in sizes:
            n = int(n_ids) // 8
            if int(d) != dim or dim <= 0 or int(n_ids) != 8 * n or int(n_vecs) != 4 * n * dim:
                return None
            if not int(n_kinds) == int(n_days) == 4 * n or int(n_turns) != 8 * n:
                return None
            counts.append(n)
        ranges = [(int(r[0]), int(r[1])) for r in sizes]
        holes = [
            (lo, self._row_vectors(user_id, encoder, kinds, lo, hi, archived, False))
            for lo, hi in vector_blocks.gaps(ranges, after, upto)
        ]
        if any(len(h.rowids) and h.vectors.shape[1] != dim for _, h in holes):
            return None
        flags = self._tier_flags(user_id, archived)
        out = np.empty((sum(counts) + sum(len(h.rowids) for _, h in holes), dim), dtype=np.float32)
        parts: list[VectorBatch] = []
        at = 0

        def put(part: VectorBatch) -> None:
            nonlocal at
            if len(part.rowids):
                out[at : at + len(part.rowids)] = part.vectors
                at += len(part.rowids)
                parts.append(part)

        pending = iter(holes)
        hole = next(pending, None)
        i = -1
        sql, args = blocks_query(_COPY_COLUMNS, user_id, encoder, after, upto)
        messages = self._db.copy_out(_pyformat(sql), args)
        try:
            for i, fields in enumerate(_pg_copy.tuples(messages, 9)):
                block = _block_of(fields)
                if i >= len(ranges) or (block.first, block.last) != ranges[i]:
                    raise ValueError("the blocks changed within one snapshot")
                while hole is not None and hole[0] < block.first:
                    put(hole[1])
                    hole = next(pending, None)
                put(self._from_block(block, kinds, flags, archived, after, upto))
        except (ValueError, struct.error) as e:
            logger.info("reading the vector blocks of user id %d from rows: %s", user_id, e)
            for _ in messages:
                pass  # to the end of the COPY: the shared path reads on this connection
            return None
        if i + 1 != len(ranges):
            return None
        while hole is not None:
            put(hole[1])
            hole = next(pending, None)
        if not parts:
            return VectorBatch(
                np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32), [], [], [], []
            )
        return VectorBatch(
            np.concatenate([p.rowids for p in parts]),
            out[:at],
            [],
            [k for p in parts for k in p.kinds],
            [d for p in parts for d in p.dates],
            [t for p in parts for t in p.turns],
            from_rows=sum(h.from_rows for _, h in holes),
        )

    # -- one statement where the shared code would send many -----------------------------------
    def _insert_new(self, c: Cursor, user_id: int, memories: Sequence[Memory]) -> dict[str, int]:
        cols = list(zip(*(memory_row(m, user_id)[1:] for m in memories), strict=True))
        rows = c.execute(
            f"INSERT INTO memories({FIELDS}) SELECT ?, * FROM unnest(?::text[], ?::text[], ?::text[], ?::int[], ?::text[], ?::text[], "
            "?::text[], ?::text[], ?::int[], ?::text[], ?::bool[], ?::bool[], ?::text[], ?::text[], ?::float8[], ?::bool[]) "
            "ON CONFLICT (user_id, memory_id) DO NOTHING RETURNING id, memory_id",
            (user_id, *(list(col) for col in cols)),
        ).fetchall()
        return {mid: int(rid) for rid, mid in rows}

    def _insert_turn(
        self, c: Cursor, user_id: int, memory: Memory, vector: np.ndarray | None, encoder: str
    ) -> int:
        # The row, its vector and the version bump in one round trip.
        sql = f"WITH m AS ({INSERT} RETURNING id), b AS (UPDATE users SET version = version + 1 WHERE id = ?)"
        args: list[Any] = [*memory_row(memory, user_id), user_id]
        if vector is not None:
            vec = np.ascontiguousarray(vector, dtype=np.float32).reshape(-1)
            sql += ", e AS (INSERT INTO embeddings(memory_rowid, encoder, dim, vector) SELECT id, ?, ?, ? FROM m)"
            args += [encoder, len(vec), vec.tobytes()]
        inserted = c.execute(sql + " SELECT id FROM m", args).fetchone()
        return int(inserted[0]) if inserted else 0

    def _put_vectors(self, c: Cursor, rowids: Sequence[int], vectors: np.ndarray, encoder: str) -> None:
        if not len(rowids):
            return
        vecs = np.ascontiguousarray(vectors, dtype=np.float32)
        c.execute(
            "INSERT INTO embeddings(memory_rowid, encoder, dim, vector) "
            "SELECT r, ?, ?, v FROM unnest(?::bigint[], ?::bytea[]) AS t(r, v) "
            "ON CONFLICT (memory_rowid) DO UPDATE SET encoder = excluded.encoder, dim = excluded.dim, "
            "vector = excluded.vector",
            (
                encoder,
                int(vecs.shape[1]),
                [int(r) for r in rowids],
                [vecs[i].tobytes() for i in range(len(rowids))],
            ),
        )


def _describe(spec: str) -> str:
    url, schema = split_schema(spec)
    return f"postgresql://{describe_url(url)}" + (f"?schema={schema}" if schema else "")


BACKEND = Backend(open=lambda spec, create: PostgresStorage(spec, create=create), describe=_describe)
