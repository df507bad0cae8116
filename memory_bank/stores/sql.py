"""What the SQL backends share, written once: the schema, the row <-> record mapping, and every
query and write transaction whose only differences between SQLite and PostgreSQL are dialect.

A backend subclasses :class:`SQLStorage` and supplies its dialect: how to run one read
(:meth:`~SQLStorage._rows`) and one write transaction (:meth:`~SQLStorage._write`), how to bind
a list (:meth:`~SQLStorage._in_list`: SQLite ``json_each``, PostgreSQL ``= ANY(array)``), how
to insert a row and learn its id, the statement that locks a user, and a few names (the
schema's types, the larger-of function). Where one statement does the work of many on its
database (PostgreSQL's ``unnest`` bulk inserts), the backend overrides the small hook that
does it; everything else runs as written here.

Queries are written with ``?`` placeholders; a backend with another style translates them.
"""

from __future__ import annotations

import abc
import collections
import dataclasses
import datetime as dt
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, ClassVar, Protocol, TypeVar

import numpy as np

from memory_bank import prefault, vector_blocks
from memory_bank.errors import InvalidInputError, MemoryDeletedError, StoreError, UserNotFoundError
from memory_bank.records import MAX_STRENGTH, Memory, MemoryKind, index_text
from memory_bank.stores.base import (
    EPOCH_BASE,
    REPLAY_KEYS,
    REPLAY_OF,
    RETIRED_USER_DAYS,
    SCHEMA_VERSION,
    TURN_BASE,
    TURN_FLOOR,
    USER_ID_BASE,
    Storage,
    UserRecord,
    VectorBatch,
    retired_digest,
)
from memory_bank.text import user_key

T = TypeVar("T")

#: The tables, with the types each dialect fills in (see ``SQLStorage.TYPES``).
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS users (
    id {serial} PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    extra TEXT NOT NULL DEFAULT '{{}}',
    last_forget_date TEXT,
    version {bigint} NOT NULL DEFAULT 0,
    epoch {bigint} NOT NULL DEFAULT 0,
    tiers {bigint} NOT NULL DEFAULT 0,
    created_at {created_at}
);
CREATE TABLE IF NOT EXISTS memories (
    id {serial} PRIMARY KEY,
    user_id {bigint} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    memory_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    date {day} NOT NULL,
    turn INTEGER,
    query TEXT,
    response TEXT,
    text TEXT NOT NULL,
    timestamp TEXT,
    strength INTEGER NOT NULL DEFAULT 1,
    last_recall_date {day},
    archived {flag},
    stale {flag},
    hidden {flag},
    extra TEXT NOT NULL DEFAULT '{{}}',
    context TEXT,
    weight {real} NOT NULL DEFAULT 1,{more_columns}
    UNIQUE (user_id, memory_id)
);
CREATE INDEX IF NOT EXISTS memories_by_user ON memories (user_id, kind, date, turn);
CREATE INDEX IF NOT EXISTS {rowid_index} ON memories (user_id, id);{more_indexes}
{lexical_table}
CREATE TABLE IF NOT EXISTS embeddings (
    memory_rowid {bigint} PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE,
    encoder TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vector {blob} NOT NULL
);
{vector_blocks_table}
{deleted_ids_table}
"""

#: Version 4: each user's persisted lexical index (memory_bank.lexical_snapshot), a cache.
LEXICAL_TABLE = """CREATE TABLE IF NOT EXISTS lexical_snapshots (
    user_id {bigint} PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    encoder TEXT NOT NULL,
    tokenizer TEXT NOT NULL,
    data {blob} NOT NULL
);"""

#: Version 7: the memory ids deletes retired (one-way digests of user and id,
#: memory_bank.stores.base.retired_digest): a retried add of a deleted turn stores nothing.
#: ``user_id`` is the live user's (NULL once the user is deleted, when ``expires_on`` is set).
DELETED_IDS_TABLE = """CREATE TABLE IF NOT EXISTS deleted_ids (
    digest TEXT PRIMARY KEY,
    user_id {bigint},
    deleted_on {day} NOT NULL,
    expires_on {day}
);
CREATE INDEX IF NOT EXISTS deleted_ids_by_user ON deleted_ids (user_id);"""

#: Version 6: each user's vectors in blocks (memory_bank.vector_blocks), a cache.
VECTOR_BLOCKS_TABLE = """CREATE TABLE IF NOT EXISTS vector_blocks (
    user_id {bigint} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    encoder TEXT NOT NULL,
    first_rowid {bigint} NOT NULL,
    last_rowid {bigint} NOT NULL,
    dim INTEGER NOT NULL,
    rowids {blob} NOT NULL,
    vectors {blob} NOT NULL,
    labels TEXT NOT NULL,
    kind_at {blob} NOT NULL,
    day_at {blob} NOT NULL,
    turns {blob} NOT NULL,
    PRIMARY KEY (user_id, encoder, first_rowid)
);{blocks_storage}"""

BLOCK_COLUMNS = "first_rowid, last_rowid, dim, rowids, vectors, labels, kind_at, day_at, turns"
#: Each block's range and the size of its rowids (8 bytes each): what a load needs to
#: size its matrix before it reads the blocks (``length`` of a blob reads no content).
BLOCK_SIZES = "first_rowid, last_rowid, length(rowids)"

#: Version 6: the forgotten and hidden memories of a user, found without reading the others
#: (what a partition loaded from blocks leaves out), and the encoders of the stored vectors,
#: counted without reading the vectors (an older store's encoder is found from them at the
#: first search). Created after the migrations.
SCHEMA_6_INDEXES = """
CREATE INDEX IF NOT EXISTS memories_archived ON memories (user_id, id) WHERE archived;
CREATE INDEX IF NOT EXISTS memories_hidden ON memories (user_id, id) WHERE hidden;
CREATE INDEX IF NOT EXISTS embeddings_by_encoder ON embeddings (encoder, dim);
"""

#: The 5 -> 6 migration both backends share: the blocks, the tier counter, the tier indexes.
MIGRATION_6 = (
    """ALTER TABLE users ADD COLUMN tiers {bigint} NOT NULL DEFAULT 0;
"""
    + VECTOR_BLOCKS_TABLE
    + SCHEMA_6_INDEXES
)

#: A memory row's columns after ``id``, in the order of :func:`memory_row`.
FIELDS = (
    "user_id, memory_id, kind, date, turn, query, response, text, timestamp, strength, "
    "last_recall_date, archived, stale, extra, context, weight, hidden"
)
#: What a read selects of a memory, in the order :func:`to_memory` reads.
COLUMNS = "id, " + FIELDS.removeprefix("user_id, ")


#: The day a retired id (its digest) was deleted, while its record has not expired (on a day).
_RETIRED = "SELECT deleted_on FROM deleted_ids WHERE digest = ? AND (expires_on IS NULL OR expires_on >= ?)"


def _retired_keys(memory_id: str, extra: dict[str, Any]) -> list[str]:
    """What deleting the turn ``memory_id`` retires: its id, and ``<base>#<value>`` of each of its
    :data:`REPLAY_KEYS` (``<base>#*`` without any), ``<base>`` being its :data:`REPLAY_OF`."""
    base = str(extra.get(REPLAY_OF) or memory_id)
    replay = [f"{base}#{extra[k]}" for k in REPLAY_KEYS if k in extra]
    return [memory_id, *(replay or [f"{base}#*"])]


def _unretire(c: Cursor, memory: Memory) -> None:
    """A turn stored again (an undo, a put after a delete): what its deletion retired is live again."""
    c.executemany(
        "DELETE FROM deleted_ids WHERE digest = ?",
        [(retired_digest(memory.user, key),) for key in _retired_keys(memory.memory_id, memory.extra)],
    )


def _today() -> dt.date:
    """The day a retired id is recorded and expires by (UTC, the machine's clock)."""
    return dt.datetime.now(dt.timezone.utc).date()


_M_COLUMNS = ", ".join(f"m.{c.strip()}" for c in COLUMNS.split(","))
_USER_COLUMNS = "id, name, extra, last_forget_date, version, epoch, tiers"
INSERT = f"INSERT INTO memories({FIELDS}) VALUES ({','.join('?' * len(FIELDS.split(',')))})"
_ORDER = " ORDER BY m.date, CASE m.kind WHEN 'turn' THEN 0 ELSE 1 END, m.turn NULLS FIRST, m.id"
_SELECT = f"SELECT u.name, {_M_COLUMNS} FROM memories m JOIN users u ON u.id = m.user_id WHERE "
_TURN_SLOT = "{turn}"


def statements(script: str) -> list[str]:
    """The statements of a ``;``-separated script, to run one by one inside a transaction."""
    return [s.strip() for s in script.split(";") if s.strip()]


def memory_row(m: Memory, user_id: int) -> tuple[Any, ...]:
    """The values of :data:`FIELDS` for memory ``m`` of user ``user_id``."""
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
        bool(m.hidden),
    )


def to_memory(user: str, row: Sequence[Any]) -> Memory:
    """A :class:`Memory` of user ``user`` from a row of :data:`COLUMNS`; a row that cannot be
    one (damaged on disk) is a one-line :class:`StoreError` naming it and the way out."""
    try:
        return _to_memory(user, row)
    except (ValueError, TypeError) as e:
        raise StoreError(
            f"memory row {row[0]} of the store is damaged ({e}); run 'memorybank check' and "
            "restore from a backup"
        ) from e


def _to_memory(user: str, row: Sequence[Any]) -> Memory:
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
        strength=row[9],
        last_recall_date=row[10],
        archived=bool(row[11]),
        stale=bool(row[12]),
        extra=json.loads(row[13]),
        context=row[14],
        weight=float(row[15]),
        hidden=bool(row[16]),
    )


def to_user(row: Sequence[Any]) -> UserRecord:
    return UserRecord(int(row[0]), row[1], json.loads(row[2]), row[3], int(row[4]), int(row[5]), int(row[6]))


def same_content(m: Memory, row: Sequence[Any]) -> bool:
    """Whether a stored row (kind, date, turn, text, query, response) is the memory ``m``: a
    retried add carries the same content; a different memory under the same id is a conflict."""
    return (row[0], row[1], row[2], row[3], row[4], row[5]) == (
        m.kind.value,
        m.date,
        m.turn,
        m.text,
        m.query,
        m.response,
    )


def blocks_query(
    columns: str, user_id: int, encoder: str, after: int, upto: int | None
) -> tuple[str, tuple[Any, ...]]:
    """The read of ``columns`` of the user's vector blocks of ``encoder`` that overlap the
    rowid range ``(after, upto]``, in rowid order, and its arguments."""
    bound = "" if upto is None else " AND first_rowid <= ?"
    return (
        f"SELECT {columns} FROM vector_blocks WHERE user_id = ? AND encoder = ? AND last_rowid > ?{bound} "
        "ORDER BY first_rowid",
        (user_id, encoder, int(after), *(() if upto is None else (int(upto),))),
    )


def _ids(rows: Sequence[tuple[Any, ...]]) -> np.ndarray:
    return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))


def _member(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """Whether each of ``values`` is in ``sorted_set`` (ascending)."""
    if not len(sorted_set):
        return np.zeros(len(values), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    return sorted_set[at] == values


class BatchFill:
    """Batches of disjoint, ascending rowid ranges joined into one as they come: each batch's
    vectors are copied once into their place in one matrix made for all of them (see
    :func:`matrix_with_room`), so a load holds no batch longer than its copy takes. The matrix
    grows (one more copy) only if more arrive than ``capacity`` said."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.out = np.zeros((0, 0), dtype=np.float32)  # made at the first vectors, of their dimension
        self.parts: list[VectorBatch] = []
        self.filled = 0
        self.from_rows = 0

    def put(self, part: VectorBatch) -> None:
        n = len(part.rowids)
        self.from_rows += part.from_rows
        if not n:
            return
        dim = part.vectors.shape[1]
        if not self.parts:
            self.out = matrix_with_room(max(self.capacity, n), dim)
        elif dim != self.out.shape[1]:
            raise ValueError(f"vectors of dimension {dim} among vectors of dimension {self.out.shape[1]}")
        if self.filled + n > len(self.out):
            grown = matrix_with_room(self.filled + n, dim)
            grown[: self.filled] = self.out[: self.filled]
            self.out = grown
        at = self.filled
        self.out[at : at + n] = part.vectors
        self.filled += n
        # not the part's own vectors: a view of a block's bytes would keep every block's bytes
        self.parts.append(dataclasses.replace(part, vectors=self.out[at : at + n]))

    def batch(self) -> VectorBatch:
        """Everything put, as one batch whose vectors lead the matrix."""
        if not self.parts:
            return VectorBatch(
                np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32), [], [], [], []
            )
        return joined(self.parts, self.out[: self.filled], self.from_rows)


def matrix_with_room(n: int, dim: int) -> np.ndarray:
    """An empty matrix for ``n`` vectors and the memories a chat adds next: a load fills its
    first ``n`` rows, and the partition keeps it as it is (see ``VectorBatch.spare``). The
    memory of those rows is faulted in on another thread while the load fills them
    (:mod:`memory_bank.prefault`)."""
    out = np.empty((n + max(1024, n // 16), dim), dtype=np.float32)
    prefault.populate(out, n * dim * out.itemsize)
    return out


def joined(parts: Sequence[VectorBatch], vectors: np.ndarray, from_rows: int) -> VectorBatch:
    """Batches of disjoint, ascending rowid ranges as one, their vectors already in
    ``vectors``, the leading rows of a :func:`matrix_with_room`."""
    return VectorBatch(
        np.concatenate([p.rowids for p in parts]),
        vectors,
        [],
        [k for p in parts for k in p.kinds],
        [d for p in parts for d in p.dates],
        [t for p in parts for t in p.turns],
        from_rows=from_rows,
        spare=True,
    )


class Cursor(Protocol):
    """What a write transaction hands to its body: ``execute`` returns something with
    ``fetchone``, ``fetchall`` and ``rowcount``."""

    def execute(self, sql: Any, parameters: Any = ..., /) -> Any: ...
    def executemany(self, sql: Any, parameters: Any, /) -> Any: ...


class SQLStorage(Storage):
    """:class:`Storage` over an SQL database with the tables of :data:`SCHEMA`."""

    # -- the dialect ---------------------------------------------------------------------------
    #: How messages name this store (set by the backend).
    where: str
    #: The types :data:`SCHEMA` leaves open.
    TYPES: ClassVar[dict[str, str]]
    #: The function returning the larger of two values.
    #: Prefix of ``user_id`` where a lookup by rowid must not use a per-user index (SQLite's
    #: planner would otherwise scan the user's rows).
    BY_ROWID: ClassVar[str] = ""
    #: Takes the user's row lock for the rest of the transaction, returns a row if they exist.
    LOCK_USER: ClassVar[str] = "SELECT 1 FROM users WHERE id = ?"
    #: A hint after ``FROM memories m`` for reads in rowid order of one user.
    ROWID_ORDER_HINT: ClassVar[str] = ""
    #: Appended to ``FROM memories m`` in a read filtered by kind: the (user, kind, date) index,
    #: where a planner without statistics would scan all of the user's rows in date order.
    BY_KIND_HINT: ClassVar[str] = ""
    #: Migrations from version N to N+1, applied in order inside one transaction.
    MIGRATIONS: ClassVar[dict[int, str]]
    #: Takes a lock on a user name for the rest of the transaction (``None``: every write
    #: transaction already excludes the others, as in SQLite).
    LOCK_NAME: ClassVar[str | None] = None

    @classmethod
    def schema_sql(cls) -> str:
        """The current schema in this dialect."""
        return SCHEMA.format(
            **cls.TYPES,
            lexical_table=LEXICAL_TABLE.format(**cls.TYPES),
            vector_blocks_table=VECTOR_BLOCKS_TABLE.format(**cls.TYPES),
            deleted_ids_table=DELETED_IDS_TABLE.format(**cls.TYPES),
        )

    @abc.abstractmethod
    def _rows(self, sql: str, args: Sequence[Any] = (), *, binary: bool = False) -> list[tuple[Any, ...]]:
        """Run one read; ``binary`` when the rows carry vectors."""

    @abc.abstractmethod
    def _write(self, fn: Callable[[Cursor], T]) -> T:
        """Run ``fn`` in one write transaction and return what it returns."""

    @abc.abstractmethod
    def _in_list(self, column: str, values: Iterable[Any], sql_type: str = "text") -> tuple[str, list[Any]]:
        """A condition ``column`` is one of ``values`` (any number of them), and its arguments."""

    @abc.abstractmethod
    def _insert(self, c: Cursor, row: Sequence[Any]) -> int:
        """Insert a :func:`memory_row` and return its rowid."""

    @abc.abstractmethod
    def _insert_new(self, c: Cursor, user_id: int, memories: Sequence[Memory]) -> dict[str, int]:
        """Insert the memories whose id the user does not have yet: ``memory_id -> rowid`` of those."""

    # -- migrations ----------------------------------------------------------------------------
    def _upgrade(self, c: Cursor) -> None:
        """Bring the recorded schema version up to :data:`SCHEMA_VERSION` (in the caller's
        transaction); refuse a store made by a newer version of this package."""
        row = c.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        version = int(row[0]) if row else SCHEMA_VERSION
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"the store {self.where} has schema version {version}, newer than this package "
                f"supports ({SCHEMA_VERSION}); upgrade memorybank-siliconfriend"
            )
        if row is not None and version == SCHEMA_VERSION:
            return
        while version < SCHEMA_VERSION:
            if version not in self.MIGRATIONS:
                raise StoreError(
                    f"no {type(self).__name__} migration from schema version {version}; this is a bug"
                )
            for statement in statements(self.MIGRATIONS[version]):
                c.execute(statement)
            version += 1
        c.execute(
            "INSERT INTO meta(key, value) VALUES ('schema_version', ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (str(version),),
        )

    # -- the store's settings ------------------------------------------------------------------
    def meta(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in self._rows("SELECT key, value FROM meta")}

    def set_meta(self, values: dict[str, str], *, replace: bool = False) -> None:
        if not values:
            return
        action = "UPDATE SET value = excluded.value" if replace else "NOTHING"
        self._write(
            lambda c: c.executemany(
                f"INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT (key) DO {action}",
                [(k, v) for k, v in values.items()],
            )
        )

    def vector_encoders(self) -> dict[tuple[str, int], int]:
        rows = self._rows("SELECT encoder, dim, COUNT(*) FROM embeddings GROUP BY encoder, dim")
        return {(str(r[0]), int(r[1])): int(r[2]) for r in rows}

    # -- users ---------------------------------------------------------------------------------
    def get_user(self, name: str) -> UserRecord | None:
        rows = self._rows(f"SELECT {_USER_COLUMNS} FROM users WHERE name = ?", (name,))
        return to_user(rows[0]) if rows else None

    def ensure_user(self, name: str, extra: dict[str, Any] | None = None) -> UserRecord:
        user = self.get_user(name)
        if user is not None:
            return user

        def run(c: Cursor) -> None:
            self._lock_name(c, name)
            self._insert_user(c, name, self._new_user_extra(c, extra or {}), "ON CONFLICT (name) DO NOTHING")

        self._write(run)
        user = self.get_user(name)
        if user is None:  # deleted by another writer in between
            raise UserNotFoundError(f"user {name!r} was deleted while being created; try again")
        return user

    def list_users(self) -> list[UserRecord]:
        return [to_user(r) for r in self._rows(f"SELECT {_USER_COLUMNS} FROM users ORDER BY id")]

    def user_state(self, user_id: int) -> tuple[int, int]:
        rows = self._rows("SELECT version, epoch FROM users WHERE id = ?", (user_id,))
        if not rows:
            raise UserNotFoundError(f"user id {user_id} no longer exists (deleted?)")
        return int(rows[0][0]), int(rows[0][1])

    def user_counters(self, user_id: int) -> tuple[int, int, int]:
        rows = self._rows("SELECT version, epoch, tiers FROM users WHERE id = ?", (user_id,))
        if not rows:
            raise UserNotFoundError(f"user id {user_id} no longer exists (deleted?)")
        return int(rows[0][0]), int(rows[0][1]), int(rows[0][2])

    def set_user_extra(self, user_id: int, extra: dict[str, Any]) -> None:
        self._write(
            lambda c: c.execute(
                "UPDATE users SET extra = ? WHERE id = ?", (json.dumps(extra, ensure_ascii=False), user_id)
            )
        )

    def set_forget_date(self, user_id: int, date: str) -> None:
        self._write(
            lambda c: c.execute("UPDATE users SET last_forget_date = ? WHERE id = ?", (date, user_id))
        )

    def delete_user(self, user_id: int) -> int:
        def run(c: Cursor) -> int:
            if not self._lock_user(c, user_id, missing_ok=True):
                return 0
            n = int(c.execute("SELECT COUNT(*) FROM memories WHERE user_id = ?", (user_id,)).fetchone()[0])
            # The user's retired ids, and their other ids a caller chose, are kept a few days as
            # digests without the user: a retried run that was in flight does not bring them back.
            expires = (_today() + dt.timedelta(days=RETIRED_USER_DAYS)).isoformat()
            c.execute(
                "UPDATE deleted_ids SET user_id = NULL, expires_on = ? WHERE user_id = ?", (expires, user_id)
            )
            self._retire(c, user_id, "user_id = ?", (user_id,), expires=expires)
            c.execute("DELETE FROM deleted_ids WHERE expires_on < ?", (_today().isoformat(),))
            self._raise_store_base(c, self._turn_above(c, user_id))
            self._raise_epoch_base(c, user_id)
            c.execute(
                "DELETE FROM embeddings WHERE memory_rowid IN (SELECT id FROM memories WHERE user_id = ?)",
                (user_id,),
            )
            c.execute("DELETE FROM vector_blocks WHERE user_id = ?", (user_id,))
            c.execute("DELETE FROM memories WHERE user_id = ?", (user_id,))
            c.execute("DELETE FROM users WHERE id = ?", (user_id,))
            return n

        return self._write(run)

    def replace_user(
        self,
        name: str,
        extra: dict[str, Any],
        memories: Sequence[Memory],
        embedded: Sequence[int],
        vectors: np.ndarray | None,
        encoder: str,
        *,
        replace: bool = True,
    ) -> UserRecord:
        def run(c: Cursor) -> None:
            self._lock_name(c, name)  # two imports of one user run one after the other
            old = c.execute("SELECT id FROM users WHERE name = ?", (name,)).fetchone()
            if old is not None and not replace:
                raise InvalidInputError(
                    f"user {name!r} already has memories in this store (written while this import "
                    "ran); pass --replace to overwrite them, or import into another store"
                )
            new_extra = dict(extra)
            if old is not None and self._lock_user(c, int(old[0]), missing_ok=True):
                # The replaced turns' ids are retired (those the file gives again exist again).
                self._retire(c, int(old[0]), "user_id = ?", (int(old[0]),))
                self._delete(c, "user_id = ?", (int(old[0]),), user_id=int(old[0]))
                # The new user keeps the old one's floors: no later turn takes a replaced id.
                kept = self._extra(c, int(old[0]))
                floors = dict(kept.get(TURN_FLOOR, {}))
                for day, n in dict(new_extra.get(TURN_FLOOR, {})).items():
                    floors[day] = max(int(n), int(floors.get(day, 0)))
                new_extra[TURN_FLOOR] = floors
                new_extra[TURN_BASE] = max(int(kept.get(TURN_BASE, 0)), int(new_extra.get(TURN_BASE, 0)))
                self._raise_epoch_base(c, int(old[0]))
                c.execute("DELETE FROM users WHERE id = ?", (int(old[0]),))
            else:
                new_extra = self._new_user_extra(c, new_extra)
            row = self._insert_user(c, name, new_extra, "RETURNING id").fetchone()
            user_id = int(row[0])
            if old is not None:
                c.execute("UPDATE deleted_ids SET user_id = ? WHERE user_id = ?", (user_id, int(old[0])))
            ids = self._insert_new(c, user_id, memories) if memories else {}
            if len(ids) != len(memories):  # a fresh user: only a repeated id inserts nothing
                counts = collections.Counter(m.memory_id for m in memories)
                twice = next(mid for mid, n in counts.items() if n > 1)
                raise InvalidInputError(
                    f"memory id {twice!r} occurs twice for user {name!r}; give each memory its own id"
                )
            for m in memories:
                m.rowid = ids[m.memory_id]
            if vectors is not None and len(embedded):
                self._put_vectors(c, [memories[i].rowid or 0 for i in embedded], vectors, encoder)
            self._bump(c, user_id, epoch=False)

        self._write(run)
        user = self.get_user(name)
        if user is None:  # deleted by another writer right after the commit
            raise UserNotFoundError(f"user {name!r} was deleted while being imported; import again")
        return user

    def _lock_name(self, c: Cursor, name: str) -> None:
        """Serialise the transactions that create a user ``name`` (see :attr:`LOCK_NAME`)."""
        if self.LOCK_NAME:
            c.execute(self.LOCK_NAME, (name,))

    @staticmethod
    def _extra(c: Cursor, user_id: int) -> dict[str, Any]:
        row = c.execute("SELECT extra FROM users WHERE id = ?", (user_id,)).fetchone()
        return dict(json.loads(row[0])) if row else {}

    @staticmethod
    def _new_user_extra(c: Cursor, extra: dict[str, Any]) -> dict[str, Any]:
        """``extra`` of a user created now: they start at the store's turn base (above every
        turn of a deleted user), so they never get a deleted user's memory ids."""
        row = c.execute("SELECT value FROM meta WHERE key = ?", (TURN_BASE,)).fetchone()
        base = int(row[0]) if row else 0
        return {**extra, TURN_BASE: max(base, int(extra.get(TURN_BASE, 0)))} if base else dict(extra)

    def _turn_above(self, c: Cursor, user_id: int) -> int:
        """A turn number above every turn the user has or had (their floors and base)."""
        row = c.execute(
            "SELECT MAX(turn) FROM memories WHERE user_id = ? AND kind = 'turn'", (user_id,)
        ).fetchone()
        extra = self._extra(c, user_id)
        floors = [int(n) for n in dict(extra.get(TURN_FLOOR, {})).values()]
        top = -1 if row is None or row[0] is None else int(row[0])
        return max([top + 1, int(extra.get(TURN_BASE, 0)), *floors])

    @classmethod
    def _raise_store_base(cls, c: Cursor, base: int) -> None:
        cls._raise_meta(c, TURN_BASE, base)

    @classmethod
    def _raise_epoch_base(cls, c: Cursor, user_id: int) -> None:
        """Before ``user_id`` is deleted: users created later start above its epoch (see
        :data:`EPOCH_BASE`), so no cache of it is taken for theirs, and above its id (see
        :data:`USER_ID_BASE`), so no write meant for it is taken for theirs."""
        row = c.execute("SELECT epoch FROM users WHERE id = ?", (user_id,)).fetchone()
        if row is not None:
            cls._raise_meta(c, EPOCH_BASE, int(row[0]) + 1)
            cls._raise_meta(c, USER_ID_BASE, user_id)

    #: Whether :meth:`_insert_user` gives a new user's id (a store whose ids could come back,
    #: see :data:`USER_ID_BASE`) or the table's own sequence does.
    USER_IDS_GIVEN: ClassVar[bool] = True

    def _insert_user(self, c: Cursor, name: str, extra: dict[str, Any], tail: str) -> Any:
        """``INSERT`` the user ``name`` (SQL ``tail`` after it), above every deleted user's epoch
        and, where this gives the id, above every user's id there is or was."""
        columns = ["name", "extra", "epoch"]
        values: list[Any] = [name, json.dumps(extra, ensure_ascii=False), self._meta_int(c, EPOCH_BASE)]
        if self.USER_IDS_GIVEN:
            top = c.execute("SELECT MAX(id) FROM users").fetchone()
            columns.insert(0, "id")
            values.insert(0, max(int(top[0] or 0) if top else 0, self._meta_int(c, USER_ID_BASE)) + 1)
        marks = ", ".join("?" * len(values))
        return c.execute(f"INSERT INTO users({', '.join(columns)}) VALUES ({marks}) {tail}", values)

    @staticmethod
    def _meta_int(c: Cursor, key: str) -> int:
        row = c.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return int(row[0]) if row else 0

    @classmethod
    def _raise_meta(cls, c: Cursor, key: str, value: int) -> None:
        """Raise the store's counter ``key`` in ``meta`` to at least ``value``."""
        if value <= 0 or cls._meta_int(c, key) >= value:
            return
        c.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, str(value)),
        )

    def _lock_user(self, c: Cursor, user_id: int, *, missing_ok: bool = False) -> bool:
        """Take the user's lock: this user's writers run one at a time, in commit order."""
        if c.execute(self.LOCK_USER, (user_id,)).fetchone():
            return True
        if missing_ok:
            return False
        raise UserNotFoundError(f"user id {user_id} no longer exists (deleted?)")

    @staticmethod
    def _bump(c: Cursor, user_id: int, *, epoch: bool, texts_kept: bool = False, tiers: bool = False) -> None:
        """Count a change of the user's memories; ``epoch``: not a pure append; ``tiers``: only
        memories moved between the live and the forgotten tier (no text, vector or visibility
        changed). Unless the change kept every memory's text and vector (``texts_kept``:
        archiving, hiding), the user's lexical snapshot goes in the same transaction: it may hold
        deleted words, or the dense codes of replaced vectors."""
        more = (", epoch = epoch + 1" if epoch else "") + (", tiers = tiers + 1" if tiers else "")
        c.execute(f"UPDATE users SET version = version + 1{more} WHERE id = ?", (user_id,))
        if epoch and not texts_kept:
            c.execute("DELETE FROM lexical_snapshots WHERE user_id = ?", (user_id,))

    # -- writing memories ----------------------------------------------------------------------
    def add_turn(
        self,
        user_id: int,
        memory: Memory,
        vector: np.ndarray | None,
        encoder: str,
        *,
        stale: Iterable[MemoryKind] = (),
        recalled: Sequence[tuple[int, str]] = (),
        revived: Sequence[tuple[int, str]] = (),
        revive_deleted: bool = False,
    ) -> Memory:
        stale = list(stale)

        def run(c: Cursor) -> Memory:
            self._lock_user(c, user_id)
            templated = memory.memory_id.endswith(_TURN_SLOT)
            if not templated:
                found = c.execute(
                    f"SELECT {COLUMNS} FROM memories WHERE user_id = ? AND memory_id = ?",
                    (user_id, memory.memory_id),
                ).fetchone()
                if found is not None:
                    return to_memory(memory.user, found)
                digest = retired_digest(memory.user, memory.memory_id)
                if not revive_deleted:
                    self._refuse_retired(c, memory.user, memory.memory_id, digest)
                _unretire(c, memory)
            # A statement of its own, after the lock: it sees the turns the lock's previous
            # holder committed.
            row = c.execute(
                "SELECT MAX(turn) FROM memories WHERE user_id = ? AND kind = 'turn' AND date = ?",
                (user_id, memory.date),
            ).fetchone()
            turn = 0 if row is None or row[0] is None else int(row[0]) + 1
            extra = self._extra(c, user_id)
            floor = max(
                int(dict(extra.get(TURN_FLOOR, {})).get(memory.date, 0)), int(extra.get(TURN_BASE, 0))
            )
            turn = max(turn, floor, memory.turn or 0)  # never below a deleted turn: ids are not reused
            # Only the trailing placeholder is filled: user names may contain braces.
            memory_id = memory.memory_id[: -len(_TURN_SLOT)] + str(turn) if templated else memory.memory_id
            # An imported file may number its ids apart from the turns' places (the original
            # code leaves gaps where it deleted turns): the next free number, never a taken id.
            while (
                templated
                and c.execute(
                    "SELECT 1 FROM memories WHERE user_id = ? AND memory_id = ?", (user_id, memory_id)
                ).fetchone()
            ):
                turn += 1
                memory_id = memory.memory_id[: -len(_TURN_SLOT)] + str(turn)
            new = dataclasses.replace(memory, turn=turn, memory_id=memory_id)
            self._reinforce(c, user_id, recalled, memory.date)
            self._revive(c, user_id, revived)
            new.rowid = self._insert_turn(c, user_id, new, vector, encoder)
            if stale:
                self._mark_stale(c, user_id, stale, [memory.date])
            return new

        return self._write(run)

    def _insert_turn(
        self, c: Cursor, user_id: int, memory: Memory, vector: np.ndarray | None, encoder: str
    ) -> int:
        """Store a new turn, its vector and the version bump; returns its rowid."""
        rowid = self._insert(c, memory_row(memory, user_id))
        if vector is not None:
            self._put_vectors(c, [rowid], vector.reshape(1, -1), encoder)
        self._bump(c, user_id, epoch=False)
        return rowid

    def add_memories(
        self, user_id: int, memories: Sequence[Memory], vectors: np.ndarray | None, encoder: str
    ) -> list[int]:
        if not memories:
            return []

        def run(c: Cursor) -> list[int]:
            self._lock_user(c, user_id)
            new = self._insert_new(c, user_id, memories)
            rowids = [new.pop(m.memory_id, 0) for m in memories]
            fresh = [i for i, rowid in enumerate(rowids) if rowid]  # positions inserted now
            retried = [m.memory_id for m, rowid in zip(memories, rowids, strict=True) if not rowid]
            if retried:
                cond, args = self._in_list("memory_id", retried)
                stored = {
                    r[0]: r[1:]
                    for r in c.execute(
                        "SELECT memory_id, id, kind, date, turn, text, query, response FROM memories "
                        f"WHERE user_id = ? AND {cond}",
                        (user_id, *args),
                    ).fetchall()
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
        for m, rowid in zip(memories, rowids, strict=True):
            m.rowid = rowid
        return rowids

    def upsert_memory(
        self,
        user_id: int,
        memory: Memory,
        vector: np.ndarray | None,
        encoder: str,
        *,
        scrub_dates: Iterable[str] | None = None,
        only_existing: bool = False,
    ) -> Memory:
        days = None if scrub_dates is None else list(scrub_dates)

        def run(c: Cursor) -> tuple[int, int, str | None]:
            self._lock_user(c, user_id)
            row = c.execute(
                "SELECT id, strength, last_recall_date FROM memories WHERE user_id = ? AND memory_id = ?",
                (user_id, memory.memory_id),
            ).fetchone()
            values = memory_row(memory, user_id)
            if row is None and only_existing:  # deleted meanwhile (another process): stays deleted
                return 0, memory.strength, memory.last_recall_date
            if row is None:
                _unretire(c, memory)  # stored again (an undo): its id and replay keys are live again
                rowid, strength, recalled = self._insert(c, values), memory.strength, memory.last_recall_date
            else:
                rowid, strength, recalled = int(row[0]), int(row[1]), row[2]
                c.execute(
                    "UPDATE memories SET kind=?, date=?, turn=?, query=?, response=?, text=?, timestamp=?, "
                    "archived=?, stale=?, extra=?, context=?, weight=?, hidden=? WHERE id = ?",
                    (*values[2:9], *values[11:], rowid),
                )
                c.execute("DELETE FROM embeddings WHERE memory_rowid = ?", (rowid,))
                self._drop_blocks(c, user_id, [rowid])
            if days is not None:
                self._scrub_layers(c, user_id, days)
            self._bump(c, user_id, epoch=row is not None or days is not None)
            if vector is not None:
                self._put_vectors(c, [rowid], vector.reshape(1, -1), encoder)
            return rowid, strength, recalled

        memory.rowid, memory.strength, memory.last_recall_date = self._write(run)
        return memory

    def _put_vectors(self, c: Cursor, rowids: Sequence[int], vectors: np.ndarray, encoder: str) -> None:
        vecs = np.ascontiguousarray(vectors, dtype=np.float32)
        c.executemany(
            "INSERT INTO embeddings(memory_rowid, encoder, dim, vector) VALUES (?,?,?,?) "
            "ON CONFLICT (memory_rowid) DO UPDATE SET encoder = excluded.encoder, dim = excluded.dim, "
            "vector = excluded.vector",
            [(int(r), encoder, int(vecs.shape[1]), vecs[i].tobytes()) for i, r in enumerate(rowids)],
        )

    def put_vectors(self, rowids: Sequence[int], vectors: np.ndarray, encoder: str) -> None:
        if not len(rowids):
            return
        cond, args = self._in_list("id", [int(r) for r in rowids], "bigint")

        def run(c: Cursor) -> None:
            users = [
                int(r[0])
                for r in c.execute(
                    f"SELECT DISTINCT user_id FROM memories WHERE {cond} ORDER BY user_id", args
                ).fetchall()
            ]
            for u in users:  # in id order, so two re-embedding writers cannot deadlock
                self._lock_user(c, u, missing_ok=True)
                self._drop_blocks(c, u, rowids)
            self._put_vectors(c, rowids, vectors, encoder)
            for u in users:  # the snapshot goes too: it holds the old vectors' dense codes
                self._bump(c, u, epoch=True)

        self._write(run)

    def reinforce(
        self,
        user_id: int,
        recalled: Sequence[tuple[int, str]],
        date: str,
        *,
        revived: Sequence[tuple[int, str]] = (),
    ) -> None:
        """Recall memories: strength + 1 and recall date ``date``, at most once a day; the
        ``revived`` ones back to the live tier (see :meth:`Storage.reinforce`).

        The paper's strength counts the days a memory was recalled: a recall on a day already
        counted (another server, a replay, a memory listed twice) or on an earlier day than the
        last recall changes nothing, so the forgetting clock never turns back. Each row changes
        in place, in id order, so concurrent recalls cannot deadlock (a revival takes the user's
        lock first, as every tier move does)."""

        def run(c: Cursor) -> None:
            if revived:
                self._lock_user(c, user_id)
            self._reinforce(c, user_id, recalled, date)
            self._revive(c, user_id, revived)

        if len(recalled) or len(revived):
            self._write(run)

    @staticmethod
    def _reinforce(c: Cursor, user_id: int, recalled: Sequence[tuple[int, str]], date: str) -> None:
        """The recall of :meth:`reinforce` inside the transaction of ``c``: each (rowid, memory
        id) changes only while the row holds that memory id. A recall dated before the memory
        was learned (a search "as of" an earlier day) changes nothing: its clock never moves back."""
        keys = sorted({(int(r), str(memory_id)) for r, memory_id in recalled})
        if keys:
            c.executemany(
                # (at most MAX_STRENGTH, what the file format and PostgreSQL's integer hold)
                "UPDATE memories SET strength = CASE WHEN strength < ? THEN strength + 1 ELSE strength END, "
                "last_recall_date = ? WHERE id = ? AND user_id = ? AND memory_id = ? "
                "AND (last_recall_date IS NULL OR last_recall_date < ?) AND substr(date, 1, 10) <= ?",
                [(MAX_STRENGTH, date, r, user_id, memory_id, date, date) for r, memory_id in keys],
            )

    def _revive(self, c: Cursor, user_id: int, revived: Sequence[tuple[int, str]]) -> None:
        """The revival of :meth:`reinforce` inside the transaction of ``c``, which holds the
        user's lock: each (rowid, memory id) is live again while the row holds that memory id
        and the user has not hidden it; a tier move (the tier counter, not the epoch)."""
        keys = sorted({(int(r), str(memory_id)) for r, memory_id in revived})
        if keys:
            c.executemany(
                "UPDATE memories SET archived = ? WHERE id = ? AND user_id = ? AND memory_id = ? AND NOT hidden",
                [(False, r, user_id, memory_id) for r, memory_id in keys],
            )
            self._bump(c, user_id, epoch=False, tiers=True)

    def set_archived(
        self,
        user_id: int,
        rowids: Sequence[int],
        archived: bool,
        *,
        hidden: bool = False,
        anchored_before: str | None = None,
        scrub_dates: Iterable[str] | None = None,
    ) -> None:
        if not len(rowids):
            return
        cond, args = self._anchored(*self._by_rowids(rowids), anchored_before)
        hide = bool(archived and hidden)
        days = None if scrub_dates is None else list(scrub_dates)

        def run(c: Cursor) -> None:
            self._lock_user(c, user_id)
            # Hiding or unhiding changes what a partition holds (an epoch); moving memories
            # between the live and the forgotten tier only changes which of them are live.
            visibility = hide or bool(
                c.execute(
                    f"SELECT 1 FROM memories WHERE {cond} AND hidden LIMIT 1", (user_id, *args)
                ).fetchone()
            )
            # Archived: hidden if asked or hidden already (forgetting a memory the user hid, or
            # a pass racing the user's hide, never un-hides it); brought back: unhidden.
            c.execute(
                f"UPDATE memories SET archived = ?, hidden = (? AND (hidden OR ?)) WHERE {cond}",
                (bool(archived), bool(archived), hide, user_id, *args),
            )
            # (a layer hidden here keeps its words: hiding is undone by a restore)
            scrubbed = days is not None and self._scrub_layers(c, user_id, days, keep_hidden=True) > 0
            self._bump(
                c,
                user_id,
                epoch=visibility or scrubbed,
                texts_kept=not scrubbed,
                tiers=not (visibility or scrubbed),
            )

        self._write(run)

    def delete_memories(
        self,
        user_id: int,
        rowids: Sequence[int],
        scrub_dates: Iterable[str] | None = None,
        *,
        anchored_before: str | None = None,
        retire: bool = True,
    ) -> int:
        if not len(rowids):
            return 0
        cond, args = self._anchored(*self._by_rowids(rowids), anchored_before)
        days = None if scrub_dates is None else list(scrub_dates)

        def run(c: Cursor) -> int:
            if not self._lock_user(c, user_id, missing_ok=True):
                return 0
            if retire:
                self._retire(c, user_id, cond, (user_id, *args))
            n = self._delete(c, cond, (user_id, *args), user_id=user_id)
            if days is not None and n:  # (none: each was recalled or deleted meanwhile)
                self._scrub_layers(c, user_id, days)
            self._bump(c, user_id, epoch=True)
            return n

        return self._write(run)

    def _scrub_layers(
        self, c: Cursor, user_id: int, dates: Sequence[str], *, keep_hidden: bool = False
    ) -> int:
        """Blank, in the transaction of ``c``, the summaries that may quote turns of ``dates``
        that are deleted or rewritten: the user's daily layers of those dates and global layers
        lose their text, vectors and vector blocks and are marked stale (to be regenerated).
        The caller bumps the user's epoch (the lexical snapshot holds their words) when this returns
        more than 0: how many of them had words."""
        days, day_args = self._in_list("date", dates)
        scrub = (
            "FROM memories WHERE user_id = ? AND (kind IN ('global_summary', 'global_portrait') OR "
            f"(kind IN ('daily_summary', 'daily_personality') AND {days}))"
            + (" AND NOT hidden" if keep_hidden else "")
        )
        scrubbed = c.execute(f"SELECT id, text {scrub}", (user_id, *day_args)).fetchall()
        self._drop_blocks(c, user_id, [int(r[0]) for r in scrubbed])
        c.execute(f"DELETE FROM embeddings WHERE memory_rowid IN (SELECT id {scrub})", (user_id, *day_args))
        c.execute(
            f"UPDATE memories SET text = '', stale = ? WHERE id IN (SELECT id {scrub})",
            (True, user_id, *day_args),
        )
        return sum(1 for r in scrubbed if r[1])  # the layers that had words

    def delete_archived(self, user_id: int) -> int:
        def run(c: Cursor) -> int:
            if not self._lock_user(c, user_id, missing_ok=True):
                return 0
            days = [
                str(r[0])
                for r in c.execute(
                    "SELECT DISTINCT date FROM memories WHERE user_id = ? AND archived = ? AND kind IN "
                    "('turn', 'daily_summary', 'daily_personality')",
                    (user_id, True),
                ).fetchall()
            ]
            self._retire(c, user_id, "user_id = ? AND archived = ?", (user_id, True))
            n = self._delete(c, "user_id = ? AND archived = ?", (user_id, True), user_id=user_id)
            if days:  # no summary keeps quoting what is deleted
                self._scrub_layers(c, user_id, days)
            if n:
                self._bump(c, user_id, epoch=True)
            return n

        return self._write(run)

    def _delete(self, c: Cursor, where: str, args: Sequence[Any], *, user_id: int) -> int:
        """Delete the memories of ``user_id`` matching ``where``, their vectors first, after
        raising the user's turn floors above the deleted turns in the same transaction: a later
        turn of those days never takes a deleted turn's number and memory id, whatever deleted
        it (a delete, forgetting with ``action: delete``, a purge, an import's replace)."""
        rows = c.execute(
            f"SELECT date, MAX(turn) FROM memories WHERE {where} AND kind = 'turn' AND turn IS NOT NULL "
            "GROUP BY date",
            args,
        ).fetchall()
        if rows:
            extra = self._extra(c, user_id)
            floors = dict(extra.get(TURN_FLOOR, {}))
            raised = {str(d): int(t) + 1 for d, t in rows if int(t) + 1 > int(floors.get(str(d), 0))}
            if raised:
                extra[TURN_FLOOR] = {**floors, **raised}
                c.execute(
                    "UPDATE users SET extra = ? WHERE id = ?",
                    (json.dumps(extra, ensure_ascii=False), user_id),
                )
        gone = c.execute(f"SELECT id FROM memories WHERE {where}", args).fetchall()
        self._drop_blocks(c, user_id, [int(r[0]) for r in gone])
        c.execute(
            f"DELETE FROM embeddings WHERE memory_rowid IN (SELECT id FROM memories WHERE {where})", args
        )
        return int(c.execute(f"DELETE FROM memories WHERE {where}", args).rowcount)

    @staticmethod
    def _retire(
        c: Cursor, user_id: int, where: str, args: Sequence[Any], *, expires: str | None = None
    ) -> None:
        """Before the user's turns matching ``where`` are deleted, in the same transaction:
        retire the ids a caller chose (:func:`retired_digest`); the bank's own
        ``<user>_<day>_<n>`` ids are never given again anyway (the turn floors). Each is retired
        under the stored name and the name the user-name rule makes of it (a user stored before
        the rule is asked for by the latter once deleted), and with each of its
        :data:`REPLAY_KEYS` as ``<id>#<value>`` (an adapter tells a replay from a new message
        that reuses the id)."""
        row = c.execute("SELECT name FROM users WHERE id = ?", (user_id,)).fetchone()
        if row is None:
            return
        name = str(row[0])
        names = {name, user_key(name) or name}
        keys: list[str] = []
        for mid, date, turn, extra in c.execute(
            f"SELECT memory_id, date, turn, extra FROM memories WHERE {where} AND kind = 'turn'", args
        ).fetchall():
            if str(mid) == f"{name}_{date}_{turn}":
                continue
            keys += _retired_keys(str(mid), json.loads(extra) if extra else {})
        if keys:
            c.executemany(
                "INSERT INTO deleted_ids(digest, user_id, deleted_on, expires_on) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (digest) DO UPDATE SET user_id = excluded.user_id, "
                "deleted_on = excluded.deleted_on, expires_on = excluded.expires_on",
                sorted(
                    {
                        (retired_digest(n, key), None if expires else user_id, _today().isoformat(), expires)
                        for n in names
                        for key in keys
                    }
                ),
            )

    @staticmethod
    def _refuse_retired(c: Cursor, user: str, memory_id: str, digest: str) -> None:
        row = c.execute(_RETIRED, (digest, _today().isoformat())).fetchone()
        if row is not None:
            raise MemoryDeletedError(
                f"memory {memory_id!r} of user {user!r} was deleted on {row[0]}; a retried or replayed "
                "add does not bring it back (store it under a new id to keep it again)",
                memory_id=memory_id,
                deleted_on=str(row[0]),
            )

    def retired_ids(self) -> list[tuple[str, str | None, str, str | None]]:
        rows = self._rows(
            "SELECT d.digest, u.name, d.deleted_on, d.expires_on FROM deleted_ids d "
            "LEFT JOIN users u ON u.id = d.user_id ORDER BY d.digest"
        )
        return [
            (str(r[0]), None if r[1] is None else str(r[1]), str(r[2]), None if r[3] is None else str(r[3]))
            for r in rows
        ]

    def put_retired_ids(self, rows: Sequence[tuple[str, str | None, str, str | None]]) -> None:
        if not rows:
            return

        def run(c: Cursor) -> None:
            ids = {str(r[0]): int(r[1]) for r in c.execute("SELECT name, id FROM users").fetchall()}
            kept = [
                (digest, ids.get(name) if name is not None else None, deleted_on, expires_on)
                for digest, name, deleted_on, expires_on in rows
            ]
            # A live user's record whose user is not in this store expires as a deleted user's does.
            fallback = (_today() + dt.timedelta(days=RETIRED_USER_DAYS)).isoformat()
            c.executemany(
                "INSERT INTO deleted_ids(digest, user_id, deleted_on, expires_on) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (digest) DO NOTHING",
                [
                    (d, u, on, exp if (u is not None or exp is not None) else fallback)
                    for d, u, on, exp in kept
                ],
            )

        self._write(run)

    def archived_turn_days(self, user_id: int) -> list[str]:
        return self._turn_days(user_id, archived=True)

    def retired_on(self, user: str, memory_id: str) -> str | None:
        rows = self._rows(_RETIRED, (retired_digest(user, memory_id), _today().isoformat()))
        return str(rows[0][0]) if rows else None

    @staticmethod
    def _drop_blocks(c: Cursor, user_id: int, rowids: Sequence[int]) -> None:
        """Delete the user's vector blocks whose range holds one of ``rowids`` (memories whose
        vector is deleted or rewritten), in the caller's transaction: no block keeps a
        deleted memory or a stale vector (see :mod:`memory_bank.vector_blocks`)."""
        if not len(rowids):
            return
        ids = np.unique(np.asarray(rowids, dtype=np.int64))
        rows = c.execute(
            "SELECT encoder, first_rowid, last_rowid FROM vector_blocks "
            "WHERE user_id = ? AND first_rowid <= ? AND last_rowid >= ?",
            (user_id, int(ids[-1]), int(ids[0])),
        ).fetchall()
        for encoder, first, last in rows:
            at = int(np.searchsorted(ids, int(first)))
            if at < len(ids) and ids[at] <= int(last):
                c.execute(
                    "DELETE FROM vector_blocks WHERE user_id = ? AND encoder = ? AND first_rowid = ?",
                    (user_id, encoder, int(first)),
                )

    def blank_layers(self, user_id: int, dates: Iterable[str]) -> int:
        days = list(dates)

        def run(c: Cursor) -> int:
            if not self._lock_user(c, user_id, missing_ok=True):
                return 0
            blanked = self._scrub_layers(c, user_id, days, keep_hidden=True)
            self._bump(c, user_id, epoch=True, texts_kept=not blanked)
            return blanked

        return self._write(run)

    def mark_stale(self, user_id: int, kinds: Iterable[MemoryKind], dates: Iterable[str] | None) -> int:
        kinds, dates = list(kinds), None if dates is None else list(dates)
        if dates is not None and not dates:
            return 0
        return self._write(lambda c: self._mark_stale(c, user_id, kinds, dates))

    def _mark_stale(
        self, c: Cursor, user_id: int, kinds: Sequence[MemoryKind], dates: Sequence[str] | None
    ) -> int:
        """:meth:`mark_stale` inside the transaction of ``c`` (``dates`` not empty)."""
        cond, args = self._in_list("kind", [k.value for k in kinds])
        sql = f"UPDATE memories SET stale = ? WHERE user_id = ? AND {cond}"
        args = [True, user_id, *args]
        if dates is not None:
            day_cond, day_args = self._in_list("date", dates)
            sql += f" AND {day_cond}"
            args += day_args
        return int(c.execute(sql, args).rowcount)

    # -- reading memories ----------------------------------------------------------------------
    @staticmethod
    def _anchored(cond: str, args: list[Any], before: str | None) -> tuple[str, list[Any]]:
        """``cond`` limited to memories whose forgetting clock starts before the day ``before``
        (see :meth:`Storage.set_archived`), when given."""
        if before is None:
            return cond, args
        return f"{cond} AND substr(COALESCE(last_recall_date, date), 1, 10) < ?", [*args, before]

    def _by_rowids(self, rowids: Sequence[int], prefix: str = "") -> tuple[str, list[Any]]:
        """``user_id = ? AND id IN rowids`` (of table alias ``prefix``), its arguments after the user's."""
        cond, args = self._in_list(f"{prefix}id", [int(r) for r in rowids], "bigint")
        return f"{self.BY_ROWID}{prefix}user_id = ? AND {cond}", args

    def _memories(
        self, user_id: int, kinds: list[str] | None, archived: bool, rowids: list[int] | None, day: str | None
    ) -> list[Memory]:
        if rowids is not None:
            sql, args = self._by_rowids(rowids, "m.")
            args = [user_id, *args]
        else:
            sql, args = "m.user_id = ?", [user_id]
        select = _SELECT
        if kinds is not None:
            cond, more = self._in_list("m.kind", kinds)
            sql += f" AND {cond}"
            args += more
            if rowids is None:
                select = _SELECT.replace("FROM memories m", f"FROM memories m{self.BY_KIND_HINT}", 1)
        if not archived:
            sql += " AND m.archived = ?"
            args.append(False)
        if day is not None:
            sql += " AND m.date = ?"
            args.append(day)
        return [to_memory(r[0], r[1:]) for r in self._rows(select + sql + _ORDER, args)]

    def memories_by_ids(self, user_id: int, memory_ids: Iterable[str]) -> list[Memory]:
        ids = list(dict.fromkeys(memory_ids))
        if not ids:
            return []
        cond, args = self._in_list("m.memory_id", ids)
        return [
            to_memory(r[0], r[1:])
            for r in self._rows(f"{_SELECT}m.user_id = ? AND {cond}{_ORDER}", (user_id, *args))
        ]

    def has_memories(self, user_id: int, *, include_archived: bool = False) -> bool:
        cond = "" if include_archived else " AND archived = ?"
        args: tuple[Any, ...] = (user_id,) if include_archived else (user_id, False)
        return bool(self._rows(f"SELECT 1 FROM memories WHERE user_id = ?{cond} LIMIT 1", args))

    def last_turn_day(self, user_id: int) -> str | None:
        rows = self._rows("SELECT MAX(date) FROM memories WHERE user_id = ? AND kind = 'turn'", (user_id,))
        return str(rows[0][0]) if rows and rows[0][0] is not None else None

    def turn_days(self, user_id: int) -> list[str]:
        rows = self._rows(
            "SELECT DISTINCT date FROM memories WHERE user_id = ? AND kind = 'turn' AND NOT hidden ORDER BY date",
            (user_id,),
        )
        return [str(r[0]) for r in rows]

    def _turn_days(self, user_id: int, *, archived: bool) -> list[str]:
        rows = self._rows(
            "SELECT DISTINCT date FROM memories WHERE user_id = ? AND kind = 'turn' AND archived = ? ORDER BY date",
            (user_id, archived),
        )
        return [str(r[0]) for r in rows]

    def last_turn(self, user_id: int, date: str) -> Memory | None:
        rows = self._rows(
            f"{_SELECT}m.user_id = ? AND m.kind = 'turn' AND m.date = ? ORDER BY m.turn DESC NULLS LAST LIMIT 1",
            (user_id, date),
        )
        return to_memory(rows[0][0], rows[0][1:]) if rows else None

    def memory_keys(self, user_id: int, rowids: Sequence[int]) -> dict[int, tuple[str, MemoryKind, str]]:
        if not len(rowids):
            return {}
        cond, args = self._by_rowids(rowids)
        rows = self._rows(f"SELECT id, memory_id, kind, date FROM memories WHERE {cond}", (user_id, *args))
        return {int(r[0]): (r[1], MemoryKind(r[2]), r[3]) for r in rows}

    def counts(self) -> dict[str, Any]:
        users = self._rows("SELECT COUNT(*) FROM users")[0][0]
        kinds = {k.value: 0 for k in MemoryKind}
        archived = 0
        for kind, n, a in self._rows(
            "SELECT kind, COUNT(*), SUM(CASE WHEN archived THEN 1 ELSE 0 END) FROM memories GROUP BY kind"
        ):
            kinds[kind] = int(n)
            archived += int(a or 0)
        return {"users": int(users), "memories": kinds, "archived": archived}

    # -- vectors -------------------------------------------------------------------------------
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
        kinds = list(kinds)
        if texts:  # the words are in the rows: read them there
            return self._row_vectors(user_id, encoder, kinds, after_rowid, upto_rowid, archived, texts)
        with self.snapshot():
            sizes = self._rows(*blocks_query(BLOCK_SIZES, user_id, encoder, after_rowid, upto_rowid))
            if not sizes:
                return self._row_vectors(user_id, encoder, kinds, after_rowid, upto_rowid, archived, False)
            ranges = [(int(r[0]), int(r[1])) for r in sizes]
            holes = [
                (lo, self._row_vectors(user_id, encoder, kinds, lo, hi, archived, False))
                for lo, hi in vector_blocks.gaps(ranges, after_rowid, upto_rowid)
            ]
            fill = BatchFill(sum(int(r[2]) // 8 for r in sizes) + sum(len(h.rowids) for _, h in holes))
            flags = self._tier_flags(user_id, archived)
            pending = iter(holes)
            hole = next(pending, None)
            # One block at a time straight into the matrix: a million memories' 1.5 GB of
            # blocks are never held at once (holding them, then joining them, faulted in twice
            # that much fresh memory: 9 s of a 13 s restart).
            for row in self._stream(*blocks_query(BLOCK_COLUMNS, user_id, encoder, after_rowid, upto_rowid)):
                first, last = int(row[0]), int(row[1])
                while hole is not None and hole[0] < first:
                    fill.put(hole[1])
                    hole = next(pending, None)
                try:
                    block = vector_blocks.VectorBlock.from_columns(*row)
                except ValueError:  # a damaged block: its memories are read from their rows
                    hi = last if upto_rowid is None else min(last, upto_rowid)
                    fill.put(
                        self._row_vectors(
                            user_id, encoder, kinds, max(after_rowid, first - 1), hi, archived, False
                        )
                    )
                    continue
                fill.put(self._from_block(block, kinds, flags, archived, after_rowid, upto_rowid))
                del row, block  # the next block's bytes reuse this one's memory
            while hole is not None:
                fill.put(hole[1])
                hole = next(pending, None)
        return fill.batch()

    def _stream(self, sql: str, args: Sequence[Any] = ()) -> Iterator[tuple[Any, ...]]:
        """The rows of a read, one at a time where the backend can (SQLite's cursor), so that
        a read of large values holds one of them at a time; here, all at once."""
        return iter(self._rows(sql, args, binary=True))

    def _tier_flags(self, user_id: int, archived: bool | None) -> tuple[np.ndarray, np.ndarray]:
        """The rowids (ascending) of the user's forgotten memories (none when ``archived`` is
        ``None``: both tiers are wanted) and of their hidden ones, through the partial indexes."""
        gone = (
            np.zeros(0, dtype=np.int64)
            if archived is None
            else _ids(
                self._rows("SELECT id FROM memories WHERE user_id = ? AND archived ORDER BY id", (user_id,))
            )
        )
        hidden = _ids(
            self._rows("SELECT id FROM memories WHERE user_id = ? AND hidden ORDER BY id", (user_id,))
        )
        return gone, hidden

    @staticmethod
    def _from_block(
        b: vector_blocks.VectorBlock,
        kinds: Sequence[MemoryKind],
        flags: tuple[np.ndarray, np.ndarray],
        archived: bool | None,
        after: int,
        upto: int | None,
    ) -> VectorBatch:
        """The memories of block ``b`` that :meth:`vectors` asked for."""
        forgotten, hidden = flags
        keep = np.isin(b.kinds, [k.value for k in kinds]) & (b.rowids > after)
        if upto is not None:
            keep &= b.rowids <= upto
        keep &= ~_member(b.rowids, hidden)
        if archived is not None:
            gone = _member(b.rowids, forgotten)
            keep &= gone if archived else ~gone
        if keep.all():
            sel: Any = slice(None)
        else:
            sel = np.flatnonzero(keep)
        turns = b.turns[sel]
        return VectorBatch(
            b.rowids[sel],
            b.vectors[sel],
            [],
            b.kinds[sel].tolist(),
            b.dates[sel].tolist(),
            [None if t == vector_blocks.NO_TURN else t for t in turns.tolist()],
        )

    def _row_vectors(
        self,
        user_id: int,
        encoder: str,
        kinds: Sequence[MemoryKind],
        after_rowid: int,
        upto_rowid: int | None,
        archived: bool | None,
        texts: bool,
    ) -> VectorBatch:
        """:meth:`vectors` read from the memories' rows, one each."""
        cond, args = self._in_list("m.kind", [k.value for k in kinds])
        upto = "" if upto_rowid is None else " AND m.id <= ?"
        bound = () if upto_rowid is None else (int(upto_rowid),)
        tier = "" if archived is None else " AND m.archived = ?"
        tier_arg = () if archived is None else (bool(archived),)
        words = (
            "m.text, m.kind, m.date, m.turn, m.context, m.query, m.response"
            if texts
            else ("NULL, m.kind, m.date, m.turn, NULL, NULL, NULL")
        )
        rows = self._rows(
            # In rowid order through the (user_id, id) index: a catch-up after one new turn reads
            # one row, not all of the user's.
            f"SELECT m.id, e.vector, {words} "
            f"FROM memories m{self.ROWID_ORDER_HINT} "
            "JOIN embeddings e ON e.memory_rowid = m.id "
            f"WHERE m.user_id = ?{tier} AND m.hidden = ? AND m.id > ?{upto} AND e.encoder = ? AND {cond} "
            "ORDER BY m.id",
            (user_id, *tier_arg, False, int(after_rowid), *bound, encoder, *args),
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
            [index_text(r[2], r[6]) for r in rows] if texts else [],
            [r[3] for r in rows],
            [r[4] for r in rows],
            [r[5] for r in rows],
            [r[7] for r in rows] if texts else None,
            [r[8] for r in rows] if texts else None,
            from_rows=len(rows),
        )

    def seal_vector_blocks(self, user_id: int, encoder: str, epoch: int) -> int:
        def run(c: Cursor) -> int:
            row = c.execute(self.LOCK_USER.replace("SELECT 1", "SELECT epoch"), (user_id,)).fetchone()
            if row is None or int(row[0]) != epoch:
                return 0
            ranges = [
                (int(r[0]), int(r[1]))
                for r in c.execute(
                    "SELECT first_rowid, last_rowid FROM vector_blocks WHERE user_id = ? AND encoder = ? "
                    "ORDER BY first_rowid",
                    (user_id, encoder),
                ).fetchall()
            ]
            sealed = 0
            for lo, hi in vector_blocks.gaps(ranges, 0, None):
                sealed += self._seal_gap(c, user_id, encoder, lo, hi)
            return sealed

        return self._write(run)

    def _seal_gap(self, c: Cursor, user_id: int, encoder: str, lo: int, hi: int | None) -> int:
        """Write the blocks of the uncovered rowid range ``(lo, hi]`` (every memory with a
        vector of ``encoder``, whatever its tier or kind), one block's rows read at a time;
        returns how many memories they hold. An open range (the newest memories) gets full
        blocks only; a bounded gap is sealed to its end."""
        upto = "" if hi is None else " AND m.id <= ?"
        n = 0
        while True:
            rows = c.execute(
                f"SELECT m.id, e.vector, m.kind, m.date, m.turn FROM memories m{self.ROWID_ORDER_HINT} "
                "JOIN embeddings e ON e.memory_rowid = m.id "
                f"WHERE m.user_id = ? AND m.id > ?{upto} AND e.encoder = ? ORDER BY m.id LIMIT ?",
                (user_id, int(lo), *(() if hi is None else (int(hi),)), encoder, vector_blocks.BLOCK),
            ).fetchall()
            full = len(rows) == vector_blocks.BLOCK
            if not rows or (hi is None and not full) or len({len(r[1]) for r in rows}) != 1:
                return n  # nothing, the newest part of a block, or a damaged store: left to rows
            last = int(rows[-1][0]) if full else int(hi or 0)
            block = vector_blocks.VectorBlock.of(
                lo + 1,
                last,
                [r[0] for r in rows],
                np.frombuffer(b"".join(bytes(r[1]) for r in rows), dtype=np.float32).reshape(len(rows), -1),
                [r[2] for r in rows],
                [r[3] for r in rows],
                [r[4] for r in rows],
            )
            c.execute(
                f"INSERT INTO vector_blocks(user_id, encoder, {BLOCK_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (user_id, encoder, lo + 1, last, *block.columns()),
            )
            n += len(block)
            if not full:
                return n
            lo = last

    def lexical_snapshot(self, user_id: int, encoder: str, tokenizer: str) -> bytes | None:
        rows = self._rows(
            "SELECT data FROM lexical_snapshots WHERE user_id = ? AND encoder = ? AND tokenizer = ?",
            (user_id, encoder, tokenizer),
            binary=True,
        )
        return bytes(rows[0][0]) if rows else None

    def has_lexical_snapshot(self, user_id: int, encoder: str, tokenizer: str) -> bool:
        return bool(
            self._rows(
                "SELECT 1 FROM lexical_snapshots WHERE user_id = ? AND encoder = ? AND tokenizer = ?",
                (user_id, encoder, tokenizer),
            )
        )

    def put_lexical_snapshot(
        self, user_id: int, encoder: str, tokenizer: str, epoch: int, data: bytes
    ) -> bool:
        def run(c: Cursor) -> bool:
            # The user's row is locked (on PostgreSQL) until this commits: a delete or an edit
            # that commits in between would otherwise not see this row to delete it, and a
            # snapshot of words that no longer exist would stay stored (SQLite's writers are
            # serialised by BEGIN IMMEDIATE anyway). As seal_vector_blocks does.
            row = c.execute(self.LOCK_USER.replace("SELECT 1", "SELECT epoch"), (user_id,)).fetchone()
            if row is None or int(row[0]) != epoch:
                return False
            c.execute(
                "INSERT INTO lexical_snapshots(user_id, encoder, tokenizer, data) VALUES (?,?,?,?) "
                "ON CONFLICT (user_id) DO UPDATE SET encoder = excluded.encoder, "
                "tokenizer = excluded.tokenizer, data = excluded.data",
                (user_id, encoder, tokenizer, data),
            )
            return True

        return self._write(run)

    def missing_vectors(self, encoder: str, kinds: Iterable[MemoryKind]) -> list[tuple[int, str]]:
        cond, args = self._in_list("m.kind", [k.value for k in kinds])
        return [
            (int(r[0]), index_text(r[1], r[2]))
            for r in self._rows(
                "SELECT m.id, m.text, m.context FROM memories m LEFT JOIN embeddings e ON e.memory_rowid = m.id "
                f"WHERE (e.encoder IS NULL OR e.encoder != ?) AND {cond} ORDER BY m.id",
                (encoder, *args),
            )
        ]

    def embeddings(self, user_id: int) -> dict[int, tuple[str, np.ndarray]]:
        rows = self._rows(
            "SELECT e.memory_rowid, e.encoder, e.vector FROM embeddings e JOIN memories m ON m.id = e.memory_rowid "
            "WHERE m.user_id = ? ORDER BY e.memory_rowid",
            (user_id,),
            binary=True,
        )
        return {int(r[0]): (r[1], np.frombuffer(r[2], dtype=np.float32)) for r in rows}
