"""The embedded store: one SQLite file, ``DIR/memorybank.sqlite3``, in WAL mode.

Every write is one transaction that takes SQLite's write lock up front (``BEGIN IMMEDIATE``) and
waits for it rather than failing with "database is locked", so threads and processes can share
a store; ``synchronous=NORMAL`` in WAL mode keeps every committed write across a crash of the
process. The folder and files are private to their owner (0700/0600). The queries are the
shared ones of :mod:`memory_bank.stores.sql`; what is SQLite's own here is the connection per
thread, the schema's forgetting key and the forgetting pass that reads it from an index.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import stat
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import numpy as np

from memory_bank import integrity
from memory_bank.errors import ConfigError, StoreError
from memory_bank.records import Memory, MemoryKind
from memory_bank.stores.base import SCHEMA_VERSION, Backend, ForgetColumns, UserRecord
from memory_bank.stores.sql import (
    DELETED_IDS_TABLE,
    INSERT,
    LEXICAL_TABLE,
    MIGRATION_6,
    SCHEMA_6_INDEXES,
    Cursor,
    SQLStorage,
    memory_row,
    statements,
)

T = TypeVar("T")
logger = logging.getLogger(__name__)

DB_FILENAME = "memorybank.sqlite3"
#: The page size of a new store file (SQLite's default is 4096). A vector block (6 MB) spans
#: 1,500 overflow pages of 4 KB, which SQLite reads one at a time, following each page's link to
#: the next: a million memories' blocks are 375,000 pages, 1.5 s to read at a restart; in 16 KB
#: pages 1.1 s, in 64 KB pages 0.86 s. But every write logs whole pages: a chat turn adds 53 KB
#: to the write-ahead log in 4 KB pages, 170 KB in 16 KB pages, 682 KB in 64 KB pages (the add
#: itself takes as long), and the log grows to 1,000 pages before a checkpoint. 16 KB takes most
#: of the gain at a quarter of the largest size's writes. A store keeps the page size it was
#: created with (docs/perf/scale.md, round 6: what a store created before gets).
PAGE_SIZE = 16384

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

# Created after the migrations (the column it indexes appears in version 2). Its order is the
# order of ``memories()``, so a forgetting pass draws its random numbers in the same order.
_INDEXES = (
    """
CREATE INDEX IF NOT EXISTS memories_forget_key ON memories (
    user_id, archived, date, (CASE kind WHEN 'turn' THEN 0 ELSE 1 END), turn, id, kind, forget_key
);
CREATE INDEX IF NOT EXISTS memories_weighted ON memories (user_id, archived, kind, id, weight) WHERE weight <> 1;
"""
    + SCHEMA_6_INDEXES
)

# Migrations from version N to N+1, applied in order inside one transaction.
_MIGRATIONS: dict[int, str] = {
    # 1 -> 2: the forgetting key (a virtual column: computed by SQLite, kept in its index).
    1: f"ALTER TABLE memories ADD COLUMN forget_key INTEGER GENERATED ALWAYS AS ({_FORGET_KEY}) VIRTUAL;\n"
    "DROP INDEX IF EXISTS memories_forget;",
    # 2 -> 3: each memory's content weight, set when it is written (memory_bank.salience); the
    # memories stored before keep the neutral weight 1.
    2: "ALTER TABLE memories ADD COLUMN weight REAL NOT NULL DEFAULT 1;",
    # 3 -> 4: each user's persisted lexical index (a cache; created empty, filled by the next
    # partition build of each user).
    3: LEXICAL_TABLE.format(bigint="INTEGER", blob="BLOB"),
    # 4 -> 5: hidden by the user (never retrieved) apart from forgotten by the curve (archived,
    # still consulted by the cold tier); what was archived before stays forgotten, not hidden.
    4: "ALTER TABLE memories ADD COLUMN hidden INTEGER NOT NULL DEFAULT 0;",
    # 5 -> 6: each user's vectors in blocks (memory_bank.vector_blocks; a cache, filled by the
    # next partition load of each user), the tier counter, the indexes of forgotten and hidden
    # memories.
    5: MIGRATION_6.format(bigint="INTEGER", blob="BLOB", blocks_storage=""),
    # 6 -> 7: the memory ids deletes retired (a retried add of a deleted turn stores nothing).
    6: DELETED_IDS_TABLE.format(bigint="INTEGER", day="TEXT"),
}


def _busy(e: sqlite3.OperationalError) -> bool:
    """Whether SQLite gave up waiting for a lock another connection holds."""
    code = getattr(e, "sqlite_errorcode", None)  # Python 3.11+
    return (code & 0xFF) == sqlite3.SQLITE_BUSY if code is not None else "database is locked" in str(e)


class _Handle:
    """One thread's connection, and whether that thread is inside a query on it. Another thread
    closing the store must not close a connection under a running query (the process crashes);
    it marks the handle ``doomed`` instead, and the query's end closes it."""

    __slots__ = ("conn", "depth", "doomed", "lock", "thread")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.thread = threading.current_thread()
        self.lock = threading.Lock()  # held by the owner while it uses the connection
        self.depth = 0  # nested uses by the owner (a query inside a snapshot), changed by it alone
        self.doomed = False

    def enter(self) -> None:
        if self.depth == 0:
            self.lock.acquire()
        self.depth += 1

    def exit(self) -> None:
        self.depth -= 1
        if self.depth == 0:
            self.lock.release()
            if self.doomed:  # closed while in use: ours to close now (read after the release)
                self.close_if_idle()

    def close_if_idle(self) -> None:
        """Close the connection unless a query is using it (its end will, once ``doomed``)."""
        if self.lock.acquire(blocking=False):
            try:
                with contextlib.suppress(sqlite3.Error):
                    self.conn.close()
            finally:
                self.lock.release()


class SQLiteStorage(SQLStorage):
    """The embedded store in ``directory`` (created if missing, unless ``create=False``).

    One connection per thread; writers wait up to ``busy_timeout_s`` for the write lock.
    """

    TYPES: ClassVar[dict[str, str]] = {
        "serial": "INTEGER",
        "bigint": "INTEGER",
        "created_at": "TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
        "day": "TEXT",
        "flag": "INTEGER NOT NULL DEFAULT 0",
        "blob": "BLOB",
        "real": "REAL",
        "more_columns": f"\n    forget_key INTEGER GENERATED ALWAYS AS ({_FORGET_KEY}) VIRTUAL,",
        "rowid_index": "memories_by_user_id",
        "more_indexes": "",
        "blocks_storage": "",
    }
    GREATEST = "max"
    BY_ROWID = "+"  # look rows up by primary key, not by scanning the user's index entries
    ROWID_ORDER_HINT = " INDEXED BY memories_by_user_id"
    BY_KIND_HINT = " INDEXED BY memories_by_user"
    MIGRATIONS = _MIGRATIONS

    def __init__(
        self,
        directory: str | Path,
        *,
        create: bool = True,
        busy_timeout_s: float = 60.0,
        quick_check: bool = True,
    ) -> None:
        self.directory = Path(directory).expanduser()
        self.path = self.directory / DB_FILENAME
        self.where = repr(str(self.path))
        if not self.path.exists():
            if not create:
                raise StoreError(
                    f"no memory store at {str(self.directory)!r}; check the path given (memorybank --store, silicon-friend --data-dir), or create one with "
                    "'memorybank import' or 'memorybank add'"
                )
            if self.directory.exists() and not self.directory.is_dir():
                raise StoreError(f"store path {str(self.directory)!r} is a file; give a directory")
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            with contextlib.suppress(OSError):
                os.chmod(self.directory, 0o700)  # also when the folder already existed
            integrity.check_files(self.path)  # a -wal without its database is not a new store
            # Private (0600) from the start, built aside and linked into place: never 0 bytes.
            integrity.create_store_file(
                self.path,
                [
                    *statements(self.schema_sql()),
                    *statements(_INDEXES),
                    f"INSERT INTO meta(key, value) VALUES ('schema_version', '{SCHEMA_VERSION}')",
                ],
                page_size=PAGE_SIZE,
            )
        # Is it ours, whole, with its own -wal? Checked read-only: a refused file stays untouched.
        meta = integrity.inspect(self.path, quick_check=quick_check)
        self.read_only = not (os.access(self.path, os.W_OK) and os.access(self.directory, os.W_OK))
        self._busy_ms = int(busy_timeout_s * 1000)
        self._local = threading.local()
        #: Every open connection, with the thread it belongs to (see :meth:`_handle`).
        self._all_conns: list[_Handle] = []
        self._conns_lock = threading.Lock()
        #: A deletion's flush (see :meth:`_flush_deleted`) was held up by a reader.
        self._flush_pending = False
        version = int(meta["schema_version"])
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"the store {self.where} has schema version {version}, newer than this package "
                f"supports ({SCHEMA_VERSION}); upgrade memorybank-siliconfriend"
            )
        # Write only when something is missing, so a store the user may only read still opens.
        if version < SCHEMA_VERSION or "store_id" not in meta:
            self._migrate()
        self.store_id: str = (
            meta.get("store_id") or self._rows("SELECT value FROM meta WHERE key = 'store_id'")[0][0]
        )
        if not self.read_only:
            integrity.record_id(self.path, self.store_id)
        for path in (
            self.path,
            self.path.with_name(DB_FILENAME + "-wal"),
            self.path.with_name(DB_FILENAME + "-shm"),
        ):
            with contextlib.suppress(OSError):  # private; never writable where the owner made it read-only
                os.chmod(path, stat.S_IMODE(os.stat(path).st_mode) & 0o600)

    # -- connections and transactions -------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        return self._handle().conn

    def _handle(self) -> _Handle:
        handle: _Handle | None = getattr(self._local, "handle", None)
        if handle is None:
            try:
                target = integrity.read_only_uri(self.path) if self.read_only else str(self.path)
                conn = sqlite3.connect(
                    target,
                    uri=self.read_only,
                    isolation_level=None,
                    check_same_thread=False,
                    timeout=self._busy_ms / 1000,
                )
                conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
                if not self.read_only:
                    conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.execute("PRAGMA foreign_keys = ON")
                # Deleted content is overwritten with zeros, not left in free pages of the file.
                conn.execute("PRAGMA secure_delete = ON")
            except sqlite3.DatabaseError as e:
                raise StoreError(f"cannot open the memory store {str(self.path)!r}: {e}") from e
            handle = self._local.handle = _Handle(conn)
            with self._conns_lock:
                self._all_conns = [*self._closed_dead(), handle]
        return handle

    @contextlib.contextmanager
    def _using(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection, marked in use for the block (see :meth:`close`). One that
        a ``close()`` got to between the lookup and the mark is let go for a new one."""
        while True:
            handle = self._handle()
            handle.enter()
            if not handle.doomed:
                break
            handle.exit()  # closes it, unless an outer block of this thread still uses it
        try:
            yield handle.conn
        finally:
            handle.exit()

    def _closed_dead(self) -> list[_Handle]:
        """The open connections of threads still running, those of ended threads closed (under
        ``_conns_lock``). Each thread has a connection of its own: without this, every short-lived
        thread that read the store (a partition build reads its lexical snapshot on one) left one
        open, with its file handles, until the store was closed (two handles a thread: a server
        building partitions ran out of file descriptors)."""
        alive = []
        main = threading.main_thread()
        for handle in self._all_conns:
            # The main thread counts as ended once it has finished, yet it still runs the
            # ``atexit`` handlers, which may use the store: its connection stays open.
            if handle.thread.is_alive() or handle.thread is main:
                alive.append(handle)
            else:  # nothing can use it now: its thread's local storage is gone
                handle.close_if_idle()
        return alive

    def _rows(self, sql: str, args: Sequence[Any] = (), *, binary: bool = False) -> list[tuple[Any, ...]]:
        with self._using() as conn:
            return conn.execute(sql, args).fetchall()

    def _stream(self, sql: str, args: Sequence[Any] = ()) -> Iterator[tuple[Any, ...]]:
        with self._using() as conn:
            yield from conn.execute(sql, args)

    def _write(self, fn: Callable[[Cursor], T]) -> T:
        with self._using() as conn:
            return self._transaction(conn, fn)

    #: How long one try for the write lock waits in the main thread before Python runs again.
    LOCK_TRY_MS = 100

    def _begin(self, conn: sqlite3.Connection) -> None:
        """``BEGIN IMMEDIATE``, waiting up to ``busy_timeout_s`` for the write lock. In the main
        thread the wait is a series of short tries: SQLite's own wait runs no Python, so a
        Ctrl-C (a signal handler) would go unseen until another process let the lock go, up to
        a minute. Between tries the handlers run, and an interrupt leaves no transaction open."""
        if self._busy_ms <= self.LOCK_TRY_MS or threading.current_thread() is not threading.main_thread():
            conn.execute("BEGIN IMMEDIATE")
            return
        deadline = time.monotonic() + self._busy_ms / 1000
        try:
            conn.execute(f"PRAGMA busy_timeout = {self.LOCK_TRY_MS}")
            while True:
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    break
                except sqlite3.OperationalError as e:
                    if not _busy(e) or time.monotonic() >= deadline:
                        raise
            conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            with contextlib.suppress(sqlite3.Error):
                conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            raise

    def _transaction(self, conn: sqlite3.Connection, fn: Callable[[Cursor], T]) -> T:
        try:
            self._begin(conn)
            try:
                result = fn(conn)
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            # Every commit carries the meta page with the store id (see memory_bank.integrity).
            integrity.stamp_commit(conn)
            conn.execute("COMMIT")
        except sqlite3.OperationalError as e:
            raise integrity.write_error(self.path, e, waited_s=self._busy_ms / 1000) from e
        if self._flush_pending:  # a deletion's flush that a reader held up: try again
            self._flush_deleted(wait_ms=0)
        return result

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads made by this thread inside the block see one consistent state of the store,
        even while other threads and processes write (an export is a consistent backup)."""
        with self._using() as conn:
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
        def run(c: Cursor) -> None:
            # executescript() would commit the open transaction; run statements one by one.
            for statement in statements(self.schema_sql()):
                c.execute(statement)
            self._upgrade(c)
            for statement in statements(_INDEXES):
                c.execute(statement)
            c.execute(
                "INSERT OR IGNORE INTO meta(key, value) VALUES ('store_id', ?)", (integrity.new_store_id(),)
            )
            c.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('commits', '0')")

        try:
            self._write(run)
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{str(self.path)!r} is not a usable memory store: {e}") from e

    def delete_user(self, user_id: int) -> int:
        n = super().delete_user(user_id)
        self._flush_deleted()
        return n

    def delete_memories(
        self,
        user_id: int,
        rowids: Sequence[int],
        scrub_dates: Iterable[str] | None = None,
        *,
        anchored_before: str | None = None,
        retire: bool = True,
    ) -> int:
        n = super().delete_memories(
            user_id, rowids, scrub_dates, anchored_before=anchored_before, retire=retire
        )
        self._flush_deleted()
        return n

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
        user = super().replace_user(name, extra, memories, embedded, vectors, encoder, replace=replace)
        self._flush_deleted()  # the replaced memories
        return user

    def delete_archived(self, user_id: int) -> int:
        n = super().delete_archived(user_id)
        if n:
            self._flush_deleted()
        return n

    def scrub(self) -> None:
        self._flush_deleted()

    def _flush_deleted(self, wait_ms: int = 1000) -> None:
        """After a deletion: the WAL still holds the pages as they were before (the deleted
        rows, and the lexical snapshot and vector blocks that held their words and vectors):
        copy them into the database (where secure_delete zeroed the rows) and empty it, so no
        copy of what was deleted is left in a file. Waiting at most ``wait_ms``: a reader in
        another process (a running web app) keeps the pages it may read, and with them the
        database file keeps the deleted text; then the flush is tried again after each later
        write and at close (without waiting), and the user is told."""
        with self._using() as conn:
            busy = True
            try:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute(f"PRAGMA busy_timeout = {wait_ms}")
                    busy = bool(conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0])
            finally:
                conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
        if busy and not self._flush_pending:
            logger.warning(
                "%s: another connection is reading the store, so the deleted text stays in the "
                "database file until it lets go; it is removed at the next write or close after "
                "that (stop the other processes using the store to remove it now)",
                self.path,
            )
        self._flush_pending = busy

    def close(self) -> None:
        """Close every connection. One that a thread is using at this moment (a web server's
        warm-up thread reading the store while the server shuts down) is closed by that thread
        when its query ends: closing a connection under a running query crashes the process."""
        if self._flush_pending and not self.read_only:
            self._flush_deleted(wait_ms=0)
        with self._conns_lock:
            handles, self._all_conns = self._all_conns, []
            self._local = threading.local()  # a later use opens a new connection
        for handle in handles:
            handle.doomed = True  # set before the attempt: the owner reads it after releasing
            handle.close_if_idle()

    # -- the dialect -------------------------------------------------------------------------
    def _in_list(self, column: str, values: Iterable[Any], sql_type: str = "text") -> tuple[str, list[Any]]:
        # One bound JSON array for any number of values (no limit on bound variables).
        return f"{column} IN (SELECT value FROM json_each(?))", [json.dumps(list(values))]

    def _insert(self, c: Cursor, row: Sequence[Any]) -> int:
        return int(c.execute(INSERT, row).lastrowid or 0)

    def _insert_new(self, c: Cursor, user_id: int, memories: Sequence[Memory]) -> dict[str, int]:
        new: dict[str, int] = {}
        for m in memories:
            cur = c.execute(INSERT + " ON CONFLICT (user_id, memory_id) DO NOTHING", memory_row(m, user_id))
            if cur.rowcount == 1:
                new[m.memory_id] = int(cur.lastrowid or 0)
        return new

    # -- SQLite's fast path ------------------------------------------------------------------
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
        with self._using() as conn:
            return self._forget_columns(conn, user_id, ks, kinds, weights)

    def _forget_columns(
        self,
        conn: sqlite3.Connection,
        user_id: int,
        ks: list[str],
        kinds: Iterable[MemoryKind],
        weights: bool,
    ) -> ForgetColumns:
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
                # Each row's place among the rowids: the few weighted ids sorted and looked up,
                # O(n log m), not an argsort of every rowid (70 ms at a million memories).
                ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
                weight = np.fromiter((r[1] for r in rows), dtype=np.float64, count=len(rows))
                order = np.argsort(ids)
                ids, weight = ids[order], weight[order]
                at = np.minimum(np.searchsorted(ids, rowids), len(ids) - 1)
                hit = ids[at] == rowids
                out.weights[hit] = weight[at[hit]]
        return out


def directory(spec: str) -> Path:
    """The store directory a plain path or a ``sqlite:///`` URL names (as in SQLAlchemy:
    ``sqlite:///relative/dir``, ``sqlite:////absolute/dir``); a path to the database file
    itself names its directory."""
    if spec[: len("sqlite://")].lower() == "sqlite://":
        if not spec.startswith("sqlite:///") or len(spec) == len("sqlite:///"):
            raise ConfigError(
                f"store URL {spec!r} has no path; write sqlite:///relative/dir or sqlite:////absolute/dir"
            )
        spec = spec[len("sqlite:///") :]
    path = Path(spec).expanduser()
    return path.parent if path.name == DB_FILENAME else path


BACKEND = Backend(
    open=lambda spec, create: SQLiteStorage(directory(spec), create=create),
    describe=lambda spec: str(directory(spec).resolve()),
)
