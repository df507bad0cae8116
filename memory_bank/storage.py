"""Durable storage of users, memories and their embeddings.

:class:`Storage` is the small interface the rest of the package uses, so a server database can
sit behind it later; :class:`SQLiteStorage` is the embedded default: one SQLite file in WAL
mode, every write one transaction, a schema version with migrations, no pickle anywhere.

Each memory's embedding is stored beside it with the encoder's name, so a restart rebuilds the
search index from stored vectors and never re-embeds. Every user carries two counters that let
processes sharing one store keep their in-memory indexes current: ``version`` grows with every
change, ``epoch`` only with changes that are not pure appends (deletes, archives, rewrites).
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import json
import logging
import os
import sqlite3
import threading
import warnings
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memory_bank.errors import InvalidInputError, StoreError, UserNotFoundError
from memory_bank.records import Memory, MemoryKind, index_text

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 3
DB_FILENAME = "memorybank.sqlite3"


@dataclasses.dataclass
class UserRecord:
    id: int
    name: str
    extra: dict[str, Any]
    last_forget_date: str | None
    version: int
    epoch: int


@dataclasses.dataclass
class VectorBatch:
    """Stored vectors of one user's retrievable memories, in rowid order."""

    rowids: np.ndarray
    vectors: np.ndarray
    texts: list[str]
    kinds: list[str]
    dates: list[str]
    turns: list[int | None]


@dataclasses.dataclass
class ForgetColumns:
    """What a forgetting pass needs of each memory, as arrays in the order of
    :meth:`Storage.memories`: rowids, the day number (days since 1970-01-01) forgetting counts
    from (last recall, else the memory's date) and the strength."""

    rowids: np.ndarray
    anchors: np.ndarray
    strengths: np.ndarray
    #: Each memory's content weight (see :mod:`memory_bank.salience`), when asked for.
    weights: np.ndarray | None = None


class Storage(abc.ABC):
    """What the memory bank needs from a database. All methods are thread-safe."""

    @abc.abstractmethod
    def close(self) -> None: ...

    @abc.abstractmethod
    def snapshot(self) -> contextlib.AbstractContextManager[None]:
        """A block in which this thread's reads see one consistent state."""

    # users
    @abc.abstractmethod
    def get_user(self, name: str) -> UserRecord | None: ...
    @abc.abstractmethod
    def ensure_user(self, name: str, extra: dict[str, Any] | None = None) -> UserRecord: ...
    @abc.abstractmethod
    def list_users(self) -> list[UserRecord]: ...
    @abc.abstractmethod
    def user_state(self, user_id: int) -> tuple[int, int]:
        """The user's ``(version, epoch)`` counters; raises UserNotFoundError if deleted."""

    @abc.abstractmethod
    def set_user_extra(self, user_id: int, extra: dict[str, Any]) -> None: ...
    @abc.abstractmethod
    def set_forget_date(self, user_id: int, date: str) -> None: ...
    @abc.abstractmethod
    def delete_user(self, user_id: int) -> int: ...

    # memories
    @abc.abstractmethod
    def add_turn(self, user_id: int, memory: Memory, vector: np.ndarray | None, encoder: str) -> Memory: ...
    @abc.abstractmethod
    def add_memories(
        self, user_id: int, memories: Sequence[Memory], vectors: np.ndarray | None, encoder: str
    ) -> list[int]: ...
    @abc.abstractmethod
    def upsert_memory(
        self, user_id: int, memory: Memory, vector: np.ndarray | None, encoder: str
    ) -> Memory: ...
    @abc.abstractmethod
    def memories(
        self,
        user_id: int,
        kinds: Iterable[MemoryKind] | None = None,
        include_archived: bool = True,
        rowids: Sequence[int] | None = None,
    ) -> list[Memory]: ...
    @abc.abstractmethod
    def last_turn(self, user_id: int, date: str) -> Memory | None:
        """The latest turn of ``user_id`` on ``date`` (for a new turn's context)."""

    @abc.abstractmethod
    def vectors(
        self,
        user_id: int,
        encoder: str,
        kinds: Iterable[MemoryKind],
        after_rowid: int = 0,
        *,
        archived: bool = False,
    ) -> VectorBatch:
        """Stored vectors of the user's live memories (``archived=True``: of the forgotten
        ones, the cold tier), in rowid order, after ``after_rowid``."""

    @abc.abstractmethod
    def missing_vectors(self, encoder: str, kinds: Iterable[MemoryKind]) -> list[tuple[int, str]]: ...
    @abc.abstractmethod
    def put_vectors(self, rowids: Sequence[int], vectors: np.ndarray, encoder: str) -> None: ...
    @abc.abstractmethod
    def reinforce(self, user_id: int, rowids: Sequence[int], date: str) -> None: ...
    @abc.abstractmethod
    def set_archived(self, user_id: int, rowids: Sequence[int], archived: bool) -> None: ...
    @abc.abstractmethod
    def delete_memories(
        self, user_id: int, rowids: Sequence[int], scrub_dates: Iterable[str] | None = None
    ) -> int:
        """Delete memories; with ``scrub_dates``, in the same transaction blank the daily layers of
        those dates and the global layers (marked stale, to be regenerated without them)."""

    @abc.abstractmethod
    def mark_stale(self, user_id: int, kinds: Iterable[MemoryKind], dates: Iterable[str] | None) -> int: ...
    @abc.abstractmethod
    def counts(self) -> dict[str, Any]: ...

    def memory_keys(self, user_id: int, rowids: Sequence[int]) -> dict[int, tuple[str, MemoryKind, str]]:
        """``rowid -> (memory_id, kind, date)`` of these memories of the user (the ones that exist).
        A store may override this with a lighter query than :meth:`memories`."""
        out: dict[int, tuple[str, MemoryKind, str]] = {}
        for start in range(0, len(rowids), 10_000):
            for m in self.memories(user_id, rowids=rowids[start : start + 10_000]):
                out[m.rowid or 0] = (m.memory_id, m.kind, m.date)
        return out

    def forget_columns(
        self, user_id: int, kinds: Iterable[MemoryKind], *, weights: bool = False
    ) -> ForgetColumns:
        """Rowids, recall anchors and strengths (and with ``weights``, content weights) of the
        user's unarchived memories of ``kinds``, in the order of :meth:`memories`. A store may
        override this with a faster query."""
        from memory_bank.forgetting import day_number

        mems = self.memories(user_id, kinds=kinds, include_archived=False)
        return ForgetColumns(
            np.fromiter((m.rowid or 0 for m in mems), dtype=np.int64, count=len(mems)),
            np.fromiter((day_number(m.recall_anchor) for m in mems), dtype=np.int64, count=len(mems)),
            np.fromiter((m.strength for m in mems), dtype=np.float64, count=len(mems)),
            np.fromiter((m.weight for m in mems), dtype=np.float64, count=len(mems)) if weights else None,
        )


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS users (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    extra TEXT NOT NULL DEFAULT '{}',
    last_forget_date TEXT,
    version INTEGER NOT NULL DEFAULT 0,
    epoch INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE TABLE IF NOT EXISTS memories (
    id INTEGER PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    memory_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    date TEXT NOT NULL,
    turn INTEGER,
    query TEXT,
    response TEXT,
    text TEXT NOT NULL,
    timestamp TEXT,
    strength INTEGER NOT NULL DEFAULT 1,
    last_recall_date TEXT,
    archived INTEGER NOT NULL DEFAULT 0,
    stale INTEGER NOT NULL DEFAULT 0,
    extra TEXT NOT NULL DEFAULT '{}',
    context TEXT,
    forget_key INTEGER GENERATED ALWAYS AS (__FORGET_KEY__) VIRTUAL,
    weight REAL NOT NULL DEFAULT 1,
    UNIQUE (user_id, memory_id)
);
CREATE INDEX IF NOT EXISTS memories_by_user ON memories (user_id, kind, date, turn);
CREATE INDEX IF NOT EXISTS memories_by_user_id ON memories (user_id, id);
CREATE TABLE IF NOT EXISTS embeddings (
    memory_rowid INTEGER PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE,
    encoder TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vector BLOB NOT NULL
);
"""

# What a forgetting pass reads of a memory, in one integer kept in the index below:
# ``anchor_day * 8192 + strength``, anchor_day counting days since 1970-01-01 from the last recall
# (else the day the memory was learned). NULL when that does not fit (a strength outside 0-8191
# or not an integer, a date before 1970 or not a valid day): the pass then reads the rows.
_FORGET_KEY = (
    "CASE WHEN typeof(strength) = 'integer' AND strength BETWEEN 0 AND 8191 "
    "AND date(substr(COALESCE(last_recall_date, date), 1, 10)) = substr(COALESCE(last_recall_date, date), 1, 10) "
    "AND julianday(substr(COALESCE(last_recall_date, date), 1, 10)) BETWEEN 2440587.5 AND 2702730.5 "
    "THEN CAST(julianday(substr(COALESCE(last_recall_date, date), 1, 10)) - 2440587.5 AS INTEGER) * 8192 "
    "+ strength END"
)
_SCHEMA = _SCHEMA.replace("__FORGET_KEY__", _FORGET_KEY)

# Created after the migrations (the column it indexes appears in version 2). Its order is the
# order of ``memories()``, so a forgetting pass draws its random numbers in the same order.
_INDEXES = """
CREATE INDEX IF NOT EXISTS memories_forget_key ON memories (
    user_id, archived, date, (CASE kind WHEN 'turn' THEN 0 ELSE 1 END), turn, id, kind, forget_key
);
CREATE INDEX IF NOT EXISTS memories_weighted ON memories (user_id, archived, kind, id, weight) WHERE weight <> 1;
"""

# Migrations from version N to N+1, applied in order inside one transaction.
_MIGRATIONS: dict[int, str] = {
    # 1 -> 2: the forgetting key (a virtual column: computed by SQLite, kept in its index).
    1: f"ALTER TABLE memories ADD COLUMN forget_key INTEGER GENERATED ALWAYS AS ({_FORGET_KEY}) VIRTUAL;\n"
    "DROP INDEX IF EXISTS memories_forget;",
    # 2 -> 3: each memory's content weight, set when it is written (memory_bank.salience); the
    # memories stored before keep the neutral weight 1.
    2: "ALTER TABLE memories ADD COLUMN weight REAL NOT NULL DEFAULT 1;",
}


def _statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]


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


_COLUMNS = (
    "id, memory_id, kind, date, turn, query, response, text, timestamp, strength, "
    "last_recall_date, archived, stale, extra, context, weight"
)


class SQLiteStorage(Storage):
    """The embedded store: ``DIR/memorybank.sqlite3``.

    One connection per thread; writers take SQLite's write lock up front (``BEGIN IMMEDIATE``)
    and wait for it (busy timeout) rather than failing with "database is locked", so threads and
    processes can share a store. ``synchronous=NORMAL`` in WAL mode keeps every committed write
    across a crash of the process.
    """

    def __init__(self, directory: str | Path, *, create: bool = True, busy_timeout_s: float = 60.0) -> None:
        self.directory = Path(directory).expanduser()
        self.path = self.directory / DB_FILENAME
        if not self.path.exists():
            if not create:
                raise StoreError(
                    f"no memory store at {str(self.directory)!r}; check --store, or create one with "
                    "'memorybank import' or 'memorybank add'"
                )
            if self.directory.exists() and not self.directory.is_dir():
                raise StoreError(f"store path {str(self.directory)!r} is a file; give a directory")
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            with contextlib.suppress(OSError):
                os.chmod(self.directory, 0o700)  # also when the folder already existed
            # Create the file private before SQLite opens it: its -wal and -shm files take its mode.
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        self._busy_ms = int(busy_timeout_s * 1000)
        self._local = threading.local()
        self._all_conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._migrate()
        for path in (
            self.path,
            self.path.with_name(DB_FILENAME + "-wal"),
            self.path.with_name(DB_FILENAME + "-shm"),
        ):
            with contextlib.suppress(OSError):
                os.chmod(path, 0o600)

    # -- connections and transactions -------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = sqlite3.connect(
                    self.path, isolation_level=None, check_same_thread=False, timeout=self._busy_ms / 1000
                )
                conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.execute("PRAGMA foreign_keys = ON")
            except sqlite3.DatabaseError as e:
                raise StoreError(f"cannot open the memory store {str(self.path)!r}: {e}") from e
            self._local.conn = conn
            with self._conns_lock:
                self._all_conns.append(conn)
        return conn

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        else:
            conn.execute("COMMIT")

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads made by this thread inside the block see one consistent state of the store,
        even while other threads and processes write (an export is a consistent backup)."""
        conn = self._conn()
        if conn.in_transaction:
            yield
            return
        conn.execute("BEGIN")
        try:
            conn.execute("SELECT 1 FROM meta LIMIT 1").fetchone()  # the snapshot starts at the first read
            yield
        finally:
            conn.execute("COMMIT")

    def _migrate(self) -> None:
        try:
            with self._write() as c:
                # executescript() would commit the open transaction; run statements one by one.
                for statement in _statements(_SCHEMA):
                    c.execute(statement)
                row = c.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
                version = int(row[0]) if row else SCHEMA_VERSION
                if version > SCHEMA_VERSION:
                    raise StoreError(
                        f"the store {str(self.path)!r} has schema version {version}, newer than this "
                        f"package supports ({SCHEMA_VERSION}); upgrade memorybank-siliconfriend"
                    )
                while version < SCHEMA_VERSION:
                    for statement in _statements(_MIGRATIONS[version]):
                        c.execute(statement)
                    version += 1
                for statement in _statements(_INDEXES):
                    c.execute(statement)
                c.execute(
                    "INSERT INTO meta(key, value) VALUES ('schema_version', ?) "
                    "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    (str(version),),
                )
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{str(self.path)!r} is not a usable memory store: {e}") from e

    def close(self) -> None:
        with self._conns_lock:
            for conn in self._all_conns:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            self._all_conns.clear()
        self._local = threading.local()

    # -- users --------------------------------------------------------------------------------
    @staticmethod
    def _user(row: Sequence[Any]) -> UserRecord:
        return UserRecord(row[0], row[1], json.loads(row[2]), row[3], row[4], row[5])

    _USER_COLS = "id, name, extra, last_forget_date, version, epoch"

    def get_user(self, name: str) -> UserRecord | None:
        row = self._conn().execute(f"SELECT {self._USER_COLS} FROM users WHERE name = ?", (name,)).fetchone()
        return self._user(row) if row else None

    def ensure_user(self, name: str, extra: dict[str, Any] | None = None) -> UserRecord:
        user = self.get_user(name)
        if user is not None:
            return user
        with self._write() as c:
            c.execute(
                "INSERT OR IGNORE INTO users(name, extra) VALUES (?, ?)", (name, json.dumps(extra or {}))
            )
        user = self.get_user(name)
        assert user is not None
        return user

    def list_users(self) -> list[UserRecord]:
        rows = self._conn().execute(f"SELECT {self._USER_COLS} FROM users ORDER BY id").fetchall()
        return [self._user(r) for r in rows]

    def user_state(self, user_id: int) -> tuple[int, int]:
        row = self._conn().execute("SELECT version, epoch FROM users WHERE id = ?", (user_id,)).fetchone()
        if row is None:
            raise UserNotFoundError(f"user id {user_id} no longer exists (deleted?)")
        return int(row[0]), int(row[1])

    def set_user_extra(self, user_id: int, extra: dict[str, Any]) -> None:
        with self._write() as c:
            c.execute(
                "UPDATE users SET extra = ? WHERE id = ?", (json.dumps(extra, ensure_ascii=False), user_id)
            )

    def set_forget_date(self, user_id: int, date: str) -> None:
        with self._write() as c:
            c.execute("UPDATE users SET last_forget_date = ? WHERE id = ?", (date, user_id))

    def delete_user(self, user_id: int) -> int:
        with self._write() as c:
            n = c.execute("SELECT COUNT(*) FROM memories WHERE user_id = ?", (user_id,)).fetchone()[0]
            c.execute(
                "DELETE FROM embeddings WHERE memory_rowid IN (SELECT id FROM memories WHERE user_id = ?)",
                (user_id,),
            )
            c.execute("DELETE FROM memories WHERE user_id = ?", (user_id,))
            c.execute("DELETE FROM users WHERE id = ?", (user_id,))
        return int(n)

    @staticmethod
    def _bump(c: sqlite3.Connection, user_id: int, *, epoch: bool) -> None:
        c.execute(
            f"UPDATE users SET version = version + 1{', epoch = epoch + 1' if epoch else ''} WHERE id = ?",
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
            int(m.archived),
            int(m.stale),
            json.dumps(m.extra, ensure_ascii=False),
            m.context,
            float(m.weight),
        )

    _INSERT = (
        "INSERT INTO memories(user_id, memory_id, kind, date, turn, query, response, text, timestamp, strength, "
        "last_recall_date, archived, stale, extra, context, weight) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
    )

    @staticmethod
    def _put_vectors(c: sqlite3.Connection, rowids: Sequence[int], vectors: np.ndarray, encoder: str) -> None:
        vecs = np.ascontiguousarray(vectors, dtype=np.float32)
        c.executemany(
            "INSERT OR REPLACE INTO embeddings(memory_rowid, encoder, dim, vector) VALUES (?,?,?,?)",
            [(int(r), encoder, int(vecs.shape[1]), vecs[i].tobytes()) for i, r in enumerate(rowids)],
        )

    def add_turn(self, user_id: int, memory: Memory, vector: np.ndarray | None, encoder: str) -> Memory:
        """Append a turn, numbering it after the day's existing turns inside the write lock.

        ``memory.memory_id`` ending in ``{turn}`` is a template filled with the turn number. Any
        other id is an idempotency key: if the user already has a memory with that id (a retried
        add), it is returned unchanged and nothing is written.
        """
        with self._write() as c:
            if not memory.memory_id.endswith("{turn}"):
                found = c.execute(
                    f"SELECT {_COLUMNS} FROM memories WHERE user_id = ? AND memory_id = ?",
                    (user_id, memory.memory_id),
                ).fetchone()
                if found is not None:
                    return self._memory(memory.user, found)
            row = c.execute(
                "SELECT MAX(turn) FROM memories WHERE user_id = ? AND kind = 'turn' AND date = ?",
                (user_id, memory.date),
            ).fetchone()
            turn = 0 if row[0] is None else int(row[0]) + 1
            # Only the trailing placeholder is filled: user names may contain braces.
            memory_id = memory.memory_id
            if memory_id.endswith("{turn}"):
                memory_id = memory_id[: -len("{turn}")] + str(turn)
            memory = dataclasses.replace(memory, turn=turn, memory_id=memory_id)
            cur = c.execute(self._INSERT, self._row(memory, user_id))
            memory.rowid = int(cur.lastrowid or 0)
            if vector is not None:
                self._put_vectors(c, [memory.rowid], vector.reshape(1, -1), encoder)
            self._bump(c, user_id, epoch=False)
        return memory

    def add_memories(
        self, user_id: int, memories: Sequence[Memory], vectors: np.ndarray | None, encoder: str
    ) -> list[int]:
        """Insert memories in one transaction. A memory whose id the user already has with the
        same content (a retried batch) is not inserted again: its stored rowid is returned. The
        same id with different content is an :class:`InvalidInputError`."""
        rowids: list[int] = []
        fresh: list[int] = []  # positions of the memories inserted now
        with self._write() as c:
            for i, m in enumerate(memories):
                cur = c.execute(
                    self._INSERT + " ON CONFLICT (user_id, memory_id) DO NOTHING", self._row(m, user_id)
                )
                if cur.rowcount == 1:
                    m.rowid = int(cur.lastrowid or 0)
                    fresh.append(i)
                else:
                    row = c.execute(
                        "SELECT id, kind, date, turn, text, query, response FROM memories "
                        "WHERE user_id = ? AND memory_id = ?",
                        (user_id, m.memory_id),
                    ).fetchone()
                    if not same_content(m, row[1:]):
                        raise InvalidInputError(
                            f"memory id {m.memory_id!r} already exists for this user with different "
                            "content; give the new memory another id"
                        )
                    m.rowid = int(row[0])
                rowids.append(m.rowid)
            if vectors is not None and fresh:
                self._put_vectors(c, [rowids[i] for i in fresh], np.asarray(vectors)[fresh], encoder)
            if fresh:
                self._bump(c, user_id, epoch=False)
        return rowids

    def upsert_memory(self, user_id: int, memory: Memory, vector: np.ndarray | None, encoder: str) -> Memory:
        """Insert or replace (by memory id) a memory, e.g. a regenerated summary; keeps its strength."""
        with self._write() as c:
            row = c.execute(
                "SELECT id, strength, last_recall_date FROM memories WHERE user_id = ? AND memory_id = ?",
                (user_id, memory.memory_id),
            ).fetchone()
            if row is None:
                cur = c.execute(self._INSERT, self._row(memory, user_id))
                memory.rowid = int(cur.lastrowid or 0)
                self._bump(c, user_id, epoch=False)
            else:
                memory.rowid = int(row[0])
                c.execute(
                    "UPDATE memories SET kind=?, date=?, turn=?, query=?, response=?, text=?, timestamp=?, "
                    "archived=?, stale=?, extra=?, context=?, weight=? WHERE id = ?",
                    (
                        memory.kind.value,
                        memory.date,
                        memory.turn,
                        memory.query,
                        memory.response,
                        memory.text,
                        memory.timestamp,
                        int(memory.archived),
                        int(memory.stale),
                        json.dumps(memory.extra, ensure_ascii=False),
                        memory.context,
                        float(memory.weight),
                        memory.rowid,
                    ),
                )
                memory.strength, memory.last_recall_date = int(row[1]), row[2]
                c.execute("DELETE FROM embeddings WHERE memory_rowid = ?", (memory.rowid,))
                self._bump(c, user_id, epoch=True)
            if vector is not None:
                self._put_vectors(c, [memory.rowid], vector.reshape(1, -1), encoder)
        return memory

    @staticmethod
    def _memory(user: str, row: Sequence[Any]) -> Memory:
        return Memory(
            rowid=row[0],
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
        )

    def memories(
        self,
        user_id: int,
        kinds: Iterable[MemoryKind] | None = None,
        include_archived: bool = True,
        rowids: Sequence[int] | None = None,
    ) -> list[Memory]:
        conn = self._conn()
        name_row = conn.execute("SELECT name FROM users WHERE id = ?", (user_id,)).fetchone()
        if name_row is None:
            return []
        sql = f"SELECT {_COLUMNS} FROM memories WHERE user_id = ?"
        args: list[Any] = [user_id]
        if kinds is not None:
            ks = [k.value for k in kinds]
            sql += f" AND kind IN ({','.join('?' * len(ks))})"
            args += ks
        if not include_archived:
            sql += " AND archived = 0"
        if rowids is not None:
            ids = [int(r) for r in rowids]
            if not ids:
                return []
            # Look the rows up by primary key: '+user_id' keeps SQLite from scanning all of the
            # user's rows through an index instead (it does for more than a few ids).
            sql = sql.replace("WHERE user_id = ?", "WHERE +user_id = ?")
            sql += f" AND id IN ({','.join('?' * len(ids))})"
            args += ids
        sql += " ORDER BY date, CASE kind WHEN 'turn' THEN 0 ELSE 1 END, turn, id"
        return [self._memory(name_row[0], r) for r in conn.execute(sql, args)]

    def last_turn(self, user_id: int, date: str) -> Memory | None:
        conn = self._conn()
        row = conn.execute(
            f"SELECT {_COLUMNS} FROM memories WHERE user_id = ? AND kind = 'turn' AND date = ? "
            "ORDER BY turn DESC LIMIT 1",
            (user_id, date),
        ).fetchone()
        name = conn.execute("SELECT name FROM users WHERE id = ?", (user_id,)).fetchone()
        return self._memory(name[0], row) if row and name else None

    def vectors(
        self,
        user_id: int,
        encoder: str,
        kinds: Iterable[MemoryKind],
        after_rowid: int = 0,
        *,
        archived: bool = False,
    ) -> VectorBatch:
        ks = [k.value for k in kinds]
        rows = (
            self._conn()
            .execute(
                # The (user_id, id) index gives the rows after after_rowid in order: a catch-up
                # after one new turn reads one row, not all of the user's.
                "SELECT m.id, e.vector, m.text, m.kind, m.date, m.turn, m.context "
                "FROM memories m INDEXED BY memories_by_user_id "
                "JOIN embeddings e ON e.memory_rowid = m.id "
                f"WHERE m.user_id = ? AND m.archived = ? AND m.id > ? AND e.encoder = ? AND m.kind IN ({','.join('?' * len(ks))}) "
                "ORDER BY m.id",
                (user_id, int(archived), after_rowid, encoder, *ks),
            )
            .fetchall()
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

    def missing_vectors(self, encoder: str, kinds: Iterable[MemoryKind]) -> list[tuple[int, str]]:
        ks = [k.value for k in kinds]
        return [
            (int(r[0]), index_text(r[1], r[2]))
            for r in self._conn().execute(
                "SELECT m.id, m.text, m.context FROM memories m LEFT JOIN embeddings e ON e.memory_rowid = m.id "
                f"WHERE (e.encoder IS NULL OR e.encoder != ?) AND m.kind IN ({','.join('?' * len(ks))}) ORDER BY m.id",
                (encoder, *ks),
            )
        ]

    def put_vectors(self, rowids: Sequence[int], vectors: np.ndarray, encoder: str) -> None:
        with self._write() as c:
            self._put_vectors(c, rowids, vectors, encoder)
            users = {
                r[0]
                for r in c.execute(
                    f"SELECT DISTINCT user_id FROM memories WHERE id IN ({','.join('?' * len(rowids))})",
                    [int(r) for r in rowids],
                )
            }
            for u in users:
                self._bump(c, u, epoch=True)

    def reinforce(self, user_id: int, rowids: Sequence[int], date: str) -> None:
        if not rowids:
            return
        with self._write() as c:
            # The recall date only moves forward: a recall of yesterday committing after one of
            # today (another server, a replay) must not turn the forgetting clock back.
            c.executemany(
                "UPDATE memories SET strength = strength + 1, "
                "last_recall_date = max(COALESCE(last_recall_date, ''), ?) WHERE id = ? AND user_id = ?",
                [(date, int(r), user_id) for r in rowids],
            )

    def set_archived(self, user_id: int, rowids: Sequence[int], archived: bool) -> None:
        if not len(rowids):
            return
        with self._write() as c:
            # One statement for any number of rows (json_each: no limit on bound variables).
            c.execute(
                "UPDATE memories SET archived = ? WHERE user_id = ? AND id IN (SELECT value FROM json_each(?))",
                (int(archived), user_id, json.dumps([int(r) for r in rowids])),
            )
            self._bump(c, user_id, epoch=True)

    def delete_memories(
        self, user_id: int, rowids: Sequence[int], scrub_dates: Iterable[str] | None = None
    ) -> int:
        if not len(rowids):
            return 0
        with self._write() as c:
            ids = [(int(r), user_id) for r in rowids]
            c.executemany(
                "DELETE FROM embeddings WHERE memory_rowid = (SELECT id FROM memories WHERE id = ? AND user_id = ?)",
                ids,
            )
            n = c.executemany("DELETE FROM memories WHERE id = ? AND user_id = ?", ids).rowcount
            if scrub_dates is not None:
                days = list(scrub_dates)
                scrub = (
                    "FROM memories WHERE user_id = ? AND (kind IN ('global_summary', 'global_portrait') OR "
                    f"(kind IN ('daily_summary', 'daily_personality') AND date IN ({','.join('?' * len(days))})))"
                )
                c.execute(
                    f"DELETE FROM embeddings WHERE memory_rowid IN (SELECT id {scrub})", (user_id, *days)
                )
                c.execute(
                    f"UPDATE memories SET text = '', stale = 1 WHERE id IN (SELECT id {scrub})",
                    (user_id, *days),
                )
            self._bump(c, user_id, epoch=True)
        return int(n)

    def mark_stale(self, user_id: int, kinds: Iterable[MemoryKind], dates: Iterable[str] | None) -> int:
        ks = [k.value for k in kinds]
        sql = f"UPDATE memories SET stale = 1 WHERE user_id = ? AND kind IN ({','.join('?' * len(ks))})"
        args: list[Any] = [user_id, *ks]
        if dates is not None:
            ds = list(dates)
            if not ds:
                return 0
            sql += f" AND date IN ({','.join('?' * len(ds))})"
            args += ds
        with self._write() as c:
            return int(c.execute(sql, args).rowcount)

    def memory_keys(self, user_id: int, rowids: Sequence[int]) -> dict[int, tuple[str, MemoryKind, str]]:
        rows = self._conn().execute(
            "SELECT id, memory_id, kind, date FROM memories "
            "WHERE +user_id = ? AND id IN (SELECT value FROM json_each(?))",
            (user_id, json.dumps([int(r) for r in rowids])),
        )
        return {int(r[0]): (r[1], MemoryKind(r[2]), r[3]) for r in rows}

    def forget_columns(
        self, user_id: int, kinds: Iterable[MemoryKind], *, weights: bool = False
    ) -> ForgetColumns:
        """One scan of the ``memories_forget_key`` index, whose order is the order of
        :meth:`memories` (so nothing is sorted): each row's rowid and forgetting key (anchor day
        and strength, see ``_FORGET_KEY``, kept in the index) travel as one integer, concatenated
        inside SQLite; a million memories take about 0.25 s, 20x faster than building a
        :class:`Memory` per row. If any row has no key (an unusual strength or date), the generic
        path runs instead, so the result is always exactly the generic path's."""
        ks = [k.value for k in kinds]
        conn = self._conn()
        n, packed_text = conn.execute(
            "SELECT count(*), group_concat((id << 31) + forget_key) "
            "FROM memories INDEXED BY memories_forget_key "
            f"WHERE user_id = ? AND archived = 0 AND kind IN ({','.join('?' * len(ks))})",
            (user_id, *ks),
        ).fetchone()
        if n == 0:
            empty = np.zeros(0, dtype=np.int64)
            return ForgetColumns(empty, empty.copy(), np.zeros(0, dtype=np.float64))
        biggest = conn.execute("SELECT max(id) FROM memories").fetchone()[0]
        if packed_text is None or int(biggest) >= 1 << 32:  # rowids must fit in 32 bits
            return super().forget_columns(user_id, kinds, weights=weights)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            packed = np.fromstring(packed_text, dtype=np.int64, sep=",")
        if len(packed) != n:  # group_concat skips the rows whose key is NULL
            return super().forget_columns(user_id, kinds, weights=weights)
        keys = packed & ((1 << 31) - 1)
        rowids = packed >> 31
        out = ForgetColumns(rowids, keys >> 13, (keys & 8191).astype(np.float64))
        if weights:  # most memories weigh 1; the others are few and kept in a partial index
            out.weights = np.ones(len(rowids))
            rows = conn.execute(
                "SELECT id, weight FROM memories INDEXED BY memories_weighted "
                f"WHERE user_id = ? AND archived = 0 AND kind IN ({','.join('?' * len(ks))}) AND weight <> 1",
                (user_id, *ks),
            ).fetchall()
            if rows:
                ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
                order = np.argsort(rowids)
                at = order[np.searchsorted(rowids, ids, sorter=order)]
                out.weights[at] = np.fromiter((r[1] for r in rows), dtype=np.float64, count=len(rows))
        return out

    def counts(self) -> dict[str, Any]:
        conn = self._conn()
        users = conn.execute("SELECT COUNT(*) FROM users").fetchone()[0]
        kinds = {k.value: 0 for k in MemoryKind}
        archived = 0
        for kind, n, a in conn.execute("SELECT kind, COUNT(*), SUM(archived) FROM memories GROUP BY kind"):
            kinds[kind] = int(n)
            archived += int(a or 0)
        return {"users": int(users), "memories": kinds, "archived": archived}
