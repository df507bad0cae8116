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
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np

from memory_bank.errors import StoreError
from memory_bank.records import Memory, MemoryKind
from memory_bank.stores import _pg_vectors
from memory_bank.stores._pg_pool import PostgresDatabase, describe_url, pyformat, split_schema
from memory_bank.stores.base import Backend, VectorBatch
from memory_bank.stores.sql import (
    DELETED_IDS_TABLE,
    FIELDS,
    INSERT,
    LEXICAL_TABLE,
    MIGRATION_6,
    SCHEMA_6_INDEXES,
    Cursor,
    SQLStorage,
    memory_row,
    statements,
)

if TYPE_CHECKING:
    import psycopg

T = TypeVar("T")

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
    6: DELETED_IDS_TABLE.format(bigint="BIGINT", day='TEXT COLLATE "C"'),  # 6 -> 7: retired ids
}

_SCHEMA_LOCK = 0x4D42_5343  # pg_advisory_xact_lock key: "MBSC"


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


class _Cursor:
    """A psycopg cursor taking the shared queries' placeholders (composed SQL passes as is)."""

    def __init__(self, cur: psycopg.Cursor[Any]) -> None:
        self.raw = cur

    def execute(self, sql: Any, parameters: Any = (), /) -> Any:
        return self.raw.execute(pyformat(sql) if isinstance(sql, str) else sql, parameters)

    def executemany(self, sql: Any, parameters: Any, /) -> Any:
        return self.raw.executemany(pyformat(sql), parameters)


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
    USER_IDS_GIVEN = False  # a sequence never gives an id twice
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
        return self._db.rows(pyformat(sql), args, binary=binary)

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
        """The shared :meth:`SQLStorage.vectors`, but a partition load from blocks reads them
        with binary COPYs streamed into one matrix, on two connections for many blocks (see
        :mod:`memory_bank.stores._pg_vectors`): the same batch, bit for bit; a block that path
        cannot read leaves the load to the shared one."""
        kinds = list(kinds)
        if not texts:
            with self.snapshot():
                batch = _pg_vectors.read(
                    self, self._db, user_id, encoder, kinds, after_rowid, upto_rowid, archived
                )
                if batch is not None:
                    return batch
        return super().vectors(
            user_id, encoder, kinds, after_rowid, archived=archived, upto_rowid=upto_rowid, texts=texts
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
