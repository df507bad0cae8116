"""PostgreSQL as the shared store, so many app servers serve one user base.

:class:`PostgresStorage` implements the same :class:`~memory_bank.storage.Storage` interface as
the embedded SQLite store, with the same tables, schema version and migrations; vectors are
stored as ``bytea`` (float32, like SQLite's BLOB), so no extension (pgvector) is needed: each
server builds its per-user FAISS partitions from them, never re-embedding.

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
* Reinforcement is a single ``UPDATE ... SET strength = strength + n`` (no read-modify-write in
  Python, so no lost updates), and the recall date only moves forward (``GREATEST``).
* ``UNIQUE (user_id, memory_id)`` makes a retried add idempotent: a retried ``add_memories``
  batch, or an ``add_turn`` that carries a concrete memory id (no ``{turn}`` placeholder), finds
  the row it already wrote and returns it instead of adding a second copy.
* Deadlocks and serialisation failures are retried; a pooled connection the server dropped is
  replaced.

Usage::

    from memory_bank import MemoryBank
    from memory_bank.storage_postgres import PostgresStorage

    bank = MemoryBank(config, storage=PostgresStorage("postgresql://app@db.internal/memorybank"))

Requires ``pip install 'memorybank-siliconfriend[postgres]'`` (psycopg 3).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from memory_bank.errors import InvalidInputError, StoreError, UserNotFoundError
from memory_bank.postgres_db import PostgresDatabase
from memory_bank.records import Memory, MemoryKind, index_text
from memory_bank.storage import SCHEMA_VERSION, Storage, UserRecord, VectorBatch, same_content

if TYPE_CHECKING:
    import psycopg

logger = logging.getLogger(__name__)

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS users (
    id BIGSERIAL PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    extra TEXT NOT NULL DEFAULT '{}',
    last_forget_date TEXT,
    version BIGINT NOT NULL DEFAULT 0,
    epoch BIGINT NOT NULL DEFAULT 0,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS memories (
    id BIGSERIAL PRIMARY KEY,
    user_id BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    memory_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    date TEXT COLLATE "C" NOT NULL,
    turn INTEGER,
    query TEXT,
    response TEXT,
    text TEXT NOT NULL,
    timestamp TEXT,
    strength INTEGER NOT NULL DEFAULT 1,
    last_recall_date TEXT COLLATE "C",
    archived BOOLEAN NOT NULL DEFAULT FALSE,
    stale BOOLEAN NOT NULL DEFAULT FALSE,
    extra TEXT NOT NULL DEFAULT '{}',
    context TEXT,
    weight DOUBLE PRECISION NOT NULL DEFAULT 1,
    UNIQUE (user_id, memory_id)
);
CREATE INDEX IF NOT EXISTS memories_by_user ON memories (user_id, kind, date, turn);
CREATE INDEX IF NOT EXISTS memories_by_user_rowid ON memories (user_id, id);
CREATE UNIQUE INDEX IF NOT EXISTS memories_turn_position ON memories (user_id, date, turn) WHERE kind = 'turn';
CREATE TABLE IF NOT EXISTS embeddings (
    memory_rowid BIGINT PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE,
    encoder TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vector BYTEA NOT NULL
)
"""

# Migrations from version N to N+1: the PostgreSQL dialect of storage._MIGRATIONS, which must have
# the same keys (a test checks), and _SCHEMA above is always the current version, as in SQLite.
# Applied in order in one transaction under an advisory lock, so servers starting together
# migrate once.
_MIGRATIONS: dict[int, str] = {
    1: "",  # 1 -> 2 added SQLite's forgetting key (an index the PostgreSQL store does not use)
    2: "ALTER TABLE memories ADD COLUMN IF NOT EXISTS weight DOUBLE PRECISION NOT NULL DEFAULT 1",
}

_SCHEMA_LOCK = 0x4D42_5343  # pg_advisory_xact_lock key: "MBSC"

_COLUMNS = (
    "id, memory_id, kind, date, turn, query, response, text, timestamp, strength, "
    "last_recall_date, archived, stale, extra, context, weight"
)
_M_COLUMNS = ", ".join(f"m.{c.strip()}" for c in _COLUMNS.split(","))
_USER_COLS = "id, name, extra, last_forget_date, version, epoch"
_ORDER = " ORDER BY m.date, CASE m.kind WHEN 'turn' THEN 0 ELSE 1 END, m.turn NULLS FIRST, m.id"
_SCRUB = (
    "FROM memories WHERE user_id = %s AND (kind IN ('global_summary', 'global_portrait') OR "
    "(kind IN ('daily_summary', 'daily_personality') AND date = ANY(%s::text[])))"
)
_TURN_SLOT = "{turn}"


def _statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]


def _memory(user: str, row: Sequence[Any]) -> Memory:
    return Memory(
        rowid=int(row[0]),
        memory_id=row[1],
        user=user,
        kind=MemoryKind(row[2]),
        date=row[3],
        turn=row[4],
        query=row[5],
        response=row[6],
        text=row[7],
        timestamp=row[8],
        strength=int(row[9]),
        last_recall_date=row[10],
        archived=bool(row[11]),
        stale=bool(row[12]),
        extra=json.loads(row[13]),
        context=row[14],
        weight=float(row[15]),
    )


class PostgresStorage(Storage):
    """The shared store: one PostgreSQL database (optionally one ``schema`` in it).

    Connections come from a small pool (:class:`~memory_bank.postgres_db.PostgresDatabase`):
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

    def __init__(
        self, url: str, *, schema: str | None = None, create: bool = True, pool_size: int = 8
    ) -> None:
        self._db = PostgresDatabase(url, schema=schema, pool_size=pool_size)
        self.url, self.schema, self.where = self._db.url, self._db.schema, self._db.where
        self._pg: Any = self._db._pg
        self._migrate(create)

    def __repr__(self) -> str:
        return f"PostgresStorage({self.where!r})"

    # -- connections and transactions (see memory_bank.postgres_db) ----------------------------
    def _rows(self, sql: str, args: Sequence[Any] = (), *, binary: bool = False) -> list[tuple[Any, ...]]:
        return self._db.rows(sql, args, binary=binary)

    def _write(self, fn: Callable[[psycopg.Cursor[Any]], T]) -> T:
        return self._db.write(fn)

    def snapshot(self) -> contextlib.AbstractContextManager[None]:
        """Reads made by this thread inside the block see one consistent state of the database
        (a ``REPEATABLE READ READ ONLY`` transaction on a connection held for the block), while
        other servers keep writing."""
        return self._db.snapshot()

    def _migrate(self, create: bool) -> None:
        sql = self._pg.sql

        def run(cur: psycopg.Cursor[Any]) -> None:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            # DDL only when something is missing: a server's role needs no CREATE privilege
            # once the store exists.
            if (
                self.schema
                and not cur.execute(
                    "SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,)
                ).fetchone()
            ):
                if not create:
                    raise StoreError(f"no memory store in {self.where}: the schema does not exist")
                cur.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(self.schema)))
            found = cur.execute(
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
                for statement in _statements(_SCHEMA):
                    cur.execute(statement)
            row = cur.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            version = int(row[0]) if row else SCHEMA_VERSION
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"the store {self.where} has schema version {version}, newer than this package "
                    f"supports ({SCHEMA_VERSION}); upgrade memorybank-siliconfriend"
                )
            if row is None or version < SCHEMA_VERSION:
                while version < SCHEMA_VERSION:
                    if version not in _MIGRATIONS:
                        raise StoreError(
                            f"no PostgreSQL migration from schema version {version}; this is a bug"
                        )
                    for statement in _statements(_MIGRATIONS[version]):
                        cur.execute(statement)
                    version += 1
                cur.execute(
                    "INSERT INTO meta(key, value) VALUES ('schema_version', %s) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (str(version),),
                )
            cache = cur.execute(
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

    # -- users --------------------------------------------------------------------------------
    @staticmethod
    def _user(row: Sequence[Any]) -> UserRecord:
        return UserRecord(int(row[0]), row[1], json.loads(row[2]), row[3], int(row[4]), int(row[5]))

    def get_user(self, name: str) -> UserRecord | None:
        rows = self._rows(f"SELECT {_USER_COLS} FROM users WHERE name = %s", (name,))
        return self._user(rows[0]) if rows else None

    def ensure_user(self, name: str, extra: dict[str, Any] | None = None) -> UserRecord:
        user = self.get_user(name)
        if user is not None:
            return user
        self._write(
            lambda c: c.execute(
                "INSERT INTO users(name, extra) VALUES (%s, %s) ON CONFLICT (name) DO NOTHING",
                (name, json.dumps(extra or {}, ensure_ascii=False)),
            )
        )
        user = self.get_user(name)
        if user is None:  # deleted by another server in between
            raise UserNotFoundError(f"user {name!r} was deleted while being created; try again")
        return user

    def list_users(self) -> list[UserRecord]:
        return [self._user(r) for r in self._rows(f"SELECT {_USER_COLS} FROM users ORDER BY id")]

    def user_state(self, user_id: int) -> tuple[int, int]:
        rows = self._rows("SELECT version, epoch FROM users WHERE id = %s", (user_id,))
        if not rows:
            raise UserNotFoundError(f"user id {user_id} no longer exists (deleted?)")
        return int(rows[0][0]), int(rows[0][1])

    def set_user_extra(self, user_id: int, extra: dict[str, Any]) -> None:
        self._write(
            lambda c: c.execute(
                "UPDATE users SET extra = %s WHERE id = %s", (json.dumps(extra, ensure_ascii=False), user_id)
            )
        )

    def set_forget_date(self, user_id: int, date: str) -> None:
        self._write(
            lambda c: c.execute("UPDATE users SET last_forget_date = %s WHERE id = %s", (date, user_id))
        )

    def delete_user(self, user_id: int) -> int:
        def run(c: psycopg.Cursor[Any]) -> int:
            if not self._lock_user(c, user_id, missing_ok=True):
                return 0
            row = c.execute("SELECT COUNT(*) FROM memories WHERE user_id = %s", (user_id,)).fetchone()
            c.execute("DELETE FROM users WHERE id = %s", (user_id,))  # cascades to memories, embeddings
            return int(row[0]) if row else 0

        return self._write(run)

    @staticmethod
    def _lock_user(c: psycopg.Cursor[Any], user_id: int, *, missing_ok: bool = False) -> bool:
        """Take the user's row lock: this user's writers run one at a time, in commit order."""
        if c.execute("SELECT 1 FROM users WHERE id = %s FOR NO KEY UPDATE", (user_id,)).fetchone():
            return True
        if missing_ok:
            return False
        raise UserNotFoundError(f"user id {user_id} no longer exists (deleted?)")

    @staticmethod
    def _bump(c: psycopg.Cursor[Any], user_id: int, *, epoch: bool) -> None:
        c.execute(
            f"UPDATE users SET version = version + 1{', epoch = epoch + 1' if epoch else ''} WHERE id = %s",
            (user_id,),
        )

    # -- memories -----------------------------------------------------------------------------
    @staticmethod
    def _row(m: Memory, user_id: int) -> tuple[Any, ...]:
        return (
            user_id,
            m.memory_id,
            m.kind.value,
            m.date,
            m.turn,
            m.query,
            m.response,
            m.text,
            m.timestamp,
            m.strength,
            m.last_recall_date,
            bool(m.archived),
            bool(m.stale),
            json.dumps(m.extra, ensure_ascii=False),
            m.context,
            float(m.weight),
        )

    _INSERT = (
        "INSERT INTO memories(user_id, memory_id, kind, date, turn, query, response, text, timestamp, "
        "strength, last_recall_date, archived, stale, extra, context, weight) "
        "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING id"
    )

    @staticmethod
    def _put_vectors(
        c: psycopg.Cursor[Any], rowids: Sequence[int], vectors: np.ndarray, encoder: str
    ) -> None:
        vecs = np.ascontiguousarray(vectors, dtype=np.float32)
        if not len(rowids):
            return
        c.execute(
            "INSERT INTO embeddings(memory_rowid, encoder, dim, vector) "
            "SELECT r, %s, %s, v FROM unnest(%s::bigint[], %s::bytea[]) AS t(r, v) "
            "ON CONFLICT (memory_rowid) DO UPDATE SET encoder = excluded.encoder, dim = excluded.dim, "
            "vector = excluded.vector",
            (
                encoder,
                int(vecs.shape[1]),
                [int(r) for r in rowids],
                [vecs[i].tobytes() for i in range(len(rowids))],
            ),
        )

    def add_turn(self, user_id: int, memory: Memory, vector: np.ndarray | None, encoder: str) -> Memory:
        """Append a turn, numbered after the day's turns under the user's row lock.

        ``memory.memory_id`` ending in ``{turn}`` is a template filled with the turn number. Any
        other id is an idempotency key: if the user already has a memory with that id (a retried
        add), it is returned unchanged and nothing is written.
        """

        def run(c: psycopg.Cursor[Any]) -> Memory:
            self._lock_user(c, user_id)
            templated = memory.memory_id.endswith(_TURN_SLOT)
            if not templated:
                row = c.execute(
                    f"SELECT {_COLUMNS} FROM memories WHERE user_id = %s AND memory_id = %s",
                    (user_id, memory.memory_id),
                ).fetchone()
                if row is not None:
                    return _memory(memory.user, row)
            # A statement of its own, after the lock: under READ COMMITTED it sees the turns the
            # previous holder of the lock committed.
            row = c.execute(
                "SELECT MAX(turn) FROM memories WHERE user_id = %s AND kind = 'turn' AND date = %s",
                (user_id, memory.date),
            ).fetchone()
            turn = 0 if row is None or row[0] is None else int(row[0]) + 1
            memory_id = memory.memory_id[: -len(_TURN_SLOT)] + str(turn) if templated else memory.memory_id
            new = dataclasses.replace(memory, turn=turn, memory_id=memory_id)
            # The row, its vector and the version bump in one round trip.
            sql = f"WITH m AS ({self._INSERT}), b AS (UPDATE users SET version = version + 1 WHERE id = %s)"
            args: list[Any] = [*self._row(new, user_id), user_id]
            if vector is not None:
                vec = np.ascontiguousarray(vector, dtype=np.float32).reshape(-1)
                sql += (
                    ", e AS (INSERT INTO embeddings(memory_rowid, encoder, dim, vector) "
                    "SELECT id, %s, %s, %s FROM m)"
                )
                args += [encoder, len(vec), vec.tobytes()]
            inserted = c.execute(sql + " SELECT id FROM m", args).fetchone()
            new.rowid = int(inserted[0]) if inserted else 0
            return new

        return self._write(run)

    def add_memories(
        self, user_id: int, memories: Sequence[Memory], vectors: np.ndarray | None, encoder: str
    ) -> list[int]:
        """Insert memories in one transaction and one statement. A memory whose id the user already
        has with the same content (a retried batch) is not inserted again: its stored rowid is
        returned. The same id with different content is an :class:`InvalidInputError`."""
        if not memories:
            return []

        def run(c: psycopg.Cursor[Any]) -> list[int]:
            self._lock_user(c, user_id)
            cols = list(zip(*(self._row(m, user_id)[1:] for m in memories), strict=True))
            rows = c.execute(
                "INSERT INTO memories(user_id, memory_id, kind, date, turn, query, response, text, timestamp, "
                "strength, last_recall_date, archived, stale, extra, context, weight) "
                "SELECT %s, * FROM unnest(%s::text[], %s::text[], %s::text[], %s::int[], %s::text[], %s::text[], "
                "%s::text[], %s::text[], %s::int[], %s::text[], %s::bool[], %s::bool[], %s::text[], %s::text[], "
                "%s::float8[]) "
                "ON CONFLICT (user_id, memory_id) DO NOTHING RETURNING id, memory_id",
                (user_id, *(list(col) for col in cols)),
            ).fetchall()
            new = {mid: int(rid) for rid, mid in rows}
            rowids: list[int] = []
            fresh: list[int] = []  # positions of the memories inserted now
            retried: list[Memory] = []
            for i, m in enumerate(memories):
                rid = new.pop(m.memory_id, None)
                if rid is None:
                    retried.append(m)
                    rowids.append(0)
                else:
                    fresh.append(i)
                    rowids.append(rid)
            if retried:
                stored = {
                    r[0]: r[1:]
                    for r in c.execute(
                        "SELECT memory_id, id, kind, date, turn, text, query, response FROM memories "
                        "WHERE user_id = %s AND memory_id = ANY(%s::text[])",
                        (user_id, [m.memory_id for m in retried]),
                    )
                }
                for i, m in enumerate(memories):
                    if rowids[i]:
                        continue
                    row = stored[m.memory_id]
                    if not same_content(m, row[1:]):
                        raise InvalidInputError(
                            f"memory id {m.memory_id!r} already exists for this user with different "
                            "content; give the new memory another id"
                        )
                    rowids[i] = int(row[0])
            if vectors is not None and fresh:
                self._put_vectors(c, [rowids[i] for i in fresh], np.asarray(vectors)[fresh], encoder)
            if fresh:
                self._bump(c, user_id, epoch=False)
            return rowids

        rowids = self._write(run)
        for m, rid in zip(memories, rowids, strict=True):
            m.rowid = rid
        return rowids

    def upsert_memory(self, user_id: int, memory: Memory, vector: np.ndarray | None, encoder: str) -> Memory:
        """Insert or replace (by memory id) a memory, e.g. a regenerated summary; keeps its strength."""

        def run(c: psycopg.Cursor[Any]) -> tuple[int, int, str | None]:
            self._lock_user(c, user_id)
            row = c.execute(
                "SELECT id, strength, last_recall_date FROM memories WHERE user_id = %s AND memory_id = %s",
                (user_id, memory.memory_id),
            ).fetchone()
            if row is None:
                inserted = c.execute(self._INSERT, self._row(memory, user_id)).fetchone()
                rowid, strength, recalled = (
                    (int(inserted[0]) if inserted else 0),
                    memory.strength,
                    memory.last_recall_date,
                )
                self._bump(c, user_id, epoch=False)
            else:
                rowid, strength, recalled = int(row[0]), int(row[1]), row[2]
                c.execute(
                    "UPDATE memories SET kind=%s, date=%s, turn=%s, query=%s, response=%s, text=%s, "
                    "timestamp=%s, archived=%s, stale=%s, extra=%s, context=%s, weight=%s WHERE id = %s",
                    (
                        memory.kind.value,
                        memory.date,
                        memory.turn,
                        memory.query,
                        memory.response,
                        memory.text,
                        memory.timestamp,
                        bool(memory.archived),
                        bool(memory.stale),
                        json.dumps(memory.extra, ensure_ascii=False),
                        memory.context,
                        float(memory.weight),
                        rowid,
                    ),
                )
                c.execute("DELETE FROM embeddings WHERE memory_rowid = %s", (rowid,))
                self._bump(c, user_id, epoch=True)
            if vector is not None:
                self._put_vectors(c, [rowid], vector.reshape(1, -1), encoder)
            return rowid, strength, recalled

        memory.rowid, memory.strength, memory.last_recall_date = self._write(run)
        return memory

    def memories(
        self,
        user_id: int,
        kinds: Iterable[MemoryKind] | None = None,
        include_archived: bool = True,
        rowids: Sequence[int] | None = None,
    ) -> list[Memory]:
        sql = f"SELECT u.name, {_M_COLUMNS} FROM memories m JOIN users u ON u.id = m.user_id WHERE m.user_id = %s"
        args: list[Any] = [user_id]
        if kinds is not None:
            sql += " AND m.kind = ANY(%s::text[])"
            args.append([k.value for k in kinds])
        if not include_archived:
            sql += " AND NOT m.archived"
        if rowids is not None:
            ids = [int(r) for r in rowids]
            if not ids:
                return []
            sql += " AND m.id = ANY(%s::bigint[])"
            args.append(ids)
        return [_memory(r[0], r[1:]) for r in self._rows(sql + _ORDER, args)]

    def last_turn(self, user_id: int, date: str) -> Memory | None:
        rows = self._rows(
            f"SELECT u.name, {_M_COLUMNS} FROM memories m JOIN users u ON u.id = m.user_id "
            "WHERE m.user_id = %s AND m.kind = 'turn' AND m.date = %s ORDER BY m.turn DESC NULLS LAST LIMIT 1",
            (user_id, date),
        )
        return _memory(rows[0][0], rows[0][1:]) if rows else None

    def vectors(
        self,
        user_id: int,
        encoder: str,
        kinds: Iterable[MemoryKind],
        after_rowid: int = 0,
        *,
        archived: bool = False,
    ) -> VectorBatch:
        rows = self._rows(
            "SELECT m.id, e.vector, m.text, m.kind, m.date, m.turn, m.context FROM memories m "
            "JOIN embeddings e ON e.memory_rowid = m.id "
            "WHERE m.user_id = %s AND m.archived = %s AND m.id > %s AND e.encoder = %s "
            "AND m.kind = ANY(%s::text[]) ORDER BY m.id",
            (user_id, bool(archived), int(after_rowid), encoder, [k.value for k in kinds]),
            binary=True,
        )
        if not rows:
            return VectorBatch(
                np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32), [], [], [], []
            )
        vecs = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
        return VectorBatch(
            np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)),
            vecs,
            [index_text(r[2], r[6]) for r in rows],
            [r[3] for r in rows],
            [r[4] for r in rows],
            [r[5] for r in rows],
        )

    def embeddings(self, user_id: int) -> dict[int, tuple[str, np.ndarray]]:
        """Every stored vector of the user's memories, archived ones included: ``rowid ->
        (encoder, vector)``. Used by :func:`memory_bank.stores.migrate`."""
        rows = self._rows(
            "SELECT e.memory_rowid, e.encoder, e.vector FROM embeddings e JOIN memories m ON m.id = e.memory_rowid "
            "WHERE m.user_id = %s ORDER BY e.memory_rowid",
            (user_id,),
            binary=True,
        )
        return {int(r[0]): (r[1], np.frombuffer(r[2], dtype=np.float32)) for r in rows}

    def missing_vectors(self, encoder: str, kinds: Iterable[MemoryKind]) -> list[tuple[int, str]]:
        return [
            (int(r[0]), index_text(r[1], r[2]))
            for r in self._rows(
                "SELECT m.id, m.text, m.context FROM memories m LEFT JOIN embeddings e ON e.memory_rowid = m.id "
                "WHERE (e.encoder IS NULL OR e.encoder != %s) AND m.kind = ANY(%s::text[]) ORDER BY m.id",
                (encoder, [k.value for k in kinds]),
            )
        ]

    def put_vectors(self, rowids: Sequence[int], vectors: np.ndarray, encoder: str) -> None:
        if not len(rowids):
            return
        ids = [int(r) for r in rowids]

        def run(c: psycopg.Cursor[Any]) -> None:
            users = [
                int(r[0])
                for r in c.execute(
                    "SELECT DISTINCT user_id FROM memories WHERE id = ANY(%s::bigint[]) ORDER BY user_id",
                    (ids,),
                ).fetchall()
            ]
            for u in users:  # in id order, so two re-embedding servers cannot deadlock
                self._lock_user(c, u, missing_ok=True)
            self._put_vectors(c, ids, vectors, encoder)
            for u in users:
                self._bump(c, u, epoch=True)

        self._write(run)

    def reinforce(self, user_id: int, rowids: Sequence[int], date: str) -> None:
        """Recall memories: strength + (times listed), recall date moved forward to ``date``.

        One atomic ``UPDATE`` per call, so reinforcements from many servers all count."""
        if not len(rowids):
            return
        times = collections.Counter(int(r) for r in rowids)
        ids = sorted(times)
        self._write(
            lambda c: c.execute(
                "UPDATE memories m SET strength = m.strength + t.n, "
                "last_recall_date = GREATEST(m.last_recall_date, %s) "
                "FROM unnest(%s::bigint[], %s::int[]) AS t(id, n) WHERE m.id = t.id AND m.user_id = %s",
                (date, ids, [times[i] for i in ids], user_id),
            )
        )

    def set_archived(self, user_id: int, rowids: Sequence[int], archived: bool) -> None:
        if not len(rowids):
            return

        def run(c: psycopg.Cursor[Any]) -> None:
            self._lock_user(c, user_id)
            c.execute(
                "UPDATE memories SET archived = %s WHERE user_id = %s AND id = ANY(%s::bigint[])",
                (bool(archived), user_id, [int(r) for r in rowids]),
            )
            self._bump(c, user_id, epoch=True)

        self._write(run)

    def delete_memories(
        self, user_id: int, rowids: Sequence[int], scrub_dates: Iterable[str] | None = None
    ) -> int:
        if not len(rowids):
            return 0
        days = None if scrub_dates is None else list(scrub_dates)

        def run(c: psycopg.Cursor[Any]) -> int:
            if not self._lock_user(c, user_id, missing_ok=True):
                return 0
            c.execute(
                "DELETE FROM memories WHERE user_id = %s AND id = ANY(%s::bigint[])",
                (user_id, [int(r) for r in rowids]),
            )
            n = c.rowcount
            if days is not None:
                c.execute(
                    f"DELETE FROM embeddings WHERE memory_rowid IN (SELECT id {_SCRUB})", (user_id, days)
                )
                c.execute(
                    f"UPDATE memories SET text = '', stale = TRUE WHERE id IN (SELECT id {_SCRUB})",
                    (user_id, days),
                )
            self._bump(c, user_id, epoch=True)
            return int(n)

        return self._write(run)

    def mark_stale(self, user_id: int, kinds: Iterable[MemoryKind], dates: Iterable[str] | None) -> int:
        sql = "UPDATE memories SET stale = TRUE WHERE user_id = %s AND kind = ANY(%s::text[])"
        args: list[Any] = [user_id, [k.value for k in kinds]]
        if dates is not None:
            ds = list(dates)
            if not ds:
                return 0
            sql += " AND date = ANY(%s::text[])"
            args.append(ds)

        def run(c: psycopg.Cursor[Any]) -> int:
            c.execute(sql, args)
            return int(c.rowcount)

        return self._write(run)

    def counts(self) -> dict[str, Any]:
        users = self._rows("SELECT COUNT(*) FROM users")[0][0]
        kinds = {k.value: 0 for k in MemoryKind}
        archived = 0
        for kind, n, a in self._rows(
            "SELECT kind, COUNT(*), COUNT(*) FILTER (WHERE archived) FROM memories GROUP BY kind"
        ):
            kinds[kind] = int(n)
            archived += int(a or 0)
        return {"users": int(users), "memories": kinds, "archived": archived}
