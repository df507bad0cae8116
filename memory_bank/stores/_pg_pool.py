"""Connections to PostgreSQL for the memory store: a small pool, one transaction per write with
retries, consistent snapshots, and messages that name the server but never the password.

Kept apart from :mod:`memory_bank.stores.postgres` (what is stored and how) because none of it
is specific to memories. Requires psycopg 3 (the ``postgres`` extra).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import random
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from memory_bank.errors import InvalidInputError, StoreError, require

if TYPE_CHECKING:
    import psycopg

logger = logging.getLogger(__name__)


@functools.lru_cache(maxsize=1024)
def pyformat(sql: str) -> str:
    """The shared queries' ``?`` placeholders in psycopg's style."""
    return sql.replace("%", "%%").replace("?", "%s")


T = TypeVar("T")

#: Tries of a write that hit a deadlock or a serialisation failure.
ATTEMPTS = 5


def split_schema(url: str) -> tuple[str, str | None]:
    """Take a ``schema=NAME`` query parameter (ours, not libpq's) out of a PostgreSQL URL."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres") or not parts.query:
        return url, None
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    schemas = [v for k, v in query if k == "schema"]
    if not schemas:
        return url, None
    # Re-encode spaces as %20: libpq does not read '+' as a space.
    rest = urllib.parse.urlencode([(k, v) for k, v in query if k != "schema"], quote_via=urllib.parse.quote)
    return urllib.parse.urlunsplit(parts._replace(query=rest)), schemas[-1] or None


def describe_url(url: str) -> str:
    """``user@host:port/dbname`` of a PostgreSQL URL, without the password (for messages)."""
    pg: Any = cast(Any, require("psycopg", "postgres"))
    try:
        info = pg.conninfo.conninfo_to_dict(url)
    except pg.ProgrammingError as e:
        raise InvalidInputError(
            f"not a valid PostgreSQL URL ({e}); use postgresql://user@host:port/db"
        ) from e
    return (
        f"{info.get('user', '')}{'@' if info.get('user') else ''}{info.get('host', 'localhost')}"
        f":{info.get('port', 5432)}/{info.get('dbname', '')}"
    )


class PostgresDatabase:
    """A pool of connections to one database (and schema) and the ways the store uses them.

    Each read or write borrows a connection (opened lazily, autocommit for single reads, one
    explicit transaction per write) and gives it back, so a process holds as many connections as
    it has operations in flight and at most ``pool_size`` idle ones; connections of finished
    threads are not left open. A pooled connection the server dropped (restart, idle timeout)
    is replaced.
    """

    def __init__(self, url: str, *, schema: str | None = None, pool_size: int = 8) -> None:
        self._pg: Any = cast(Any, require("psycopg", "postgres"))
        self.url, url_schema = split_schema(url)
        self.schema = schema or url_schema
        self.where = describe_url(self.url) + (f" (schema {self.schema})" if self.schema else "")
        info = self._pg.conninfo.conninfo_to_dict(self.url)
        self._connect_kwargs: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in info:
            self._connect_kwargs["connect_timeout"] = 10
        if "application_name" not in info:
            self._connect_kwargs["application_name"] = "memorybank"
        errors = self._pg.errors
        self._retryable: tuple[type[BaseException], ...] = (
            errors.DeadlockDetected,
            errors.SerializationFailure,
        )
        self.pool_size = pool_size
        self._idle: list[psycopg.Connection[Any]] = []  # LIFO: the warmest first
        self._busy: set[psycopg.Connection[Any]] = set()
        self._pool_lock = threading.Lock()
        self._local = threading.local()

    def _open(self) -> psycopg.Connection[Any]:
        try:
            conn = self._pg.connect(self.url, **self._connect_kwargs)
            if self.schema:
                sql = self._pg.sql
                conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
        except self._pg.Error as e:
            raise StoreError.of("pg_connect", store=self.where, detail=e) from e
        return cast("psycopg.Connection[Any]", conn)

    def _take(self, *, fresh: bool = False) -> psycopg.Connection[Any]:
        conn = None
        if not fresh:
            with self._pool_lock:
                if self._idle:
                    conn = self._idle.pop()
        if conn is None:
            conn = self._open()
        with self._pool_lock:
            self._busy.add(conn)
        return conn

    def _give(self, conn: psycopg.Connection[Any]) -> None:
        """Return a connection to the idle pool; close it if broken, busy in a transaction,
        in use when the store was closed, or beyond ``pool_size``."""
        usable = not conn.closed and not conn.broken and self._is_idle(conn)
        with self._pool_lock:
            keep = conn in self._busy and usable and len(self._idle) < self.pool_size
            self._busy.discard(conn)
            if keep:
                self._idle.append(conn)
                return
        with contextlib.suppress(Exception):
            conn.close()

    def drop_idle(self) -> None:
        """After one dropped connection the idle ones (same server) are most likely dead too."""
        with self._pool_lock:
            conns, self._idle = self._idle, []
        for conn in conns:
            with contextlib.suppress(Exception):
                conn.close()

    @contextlib.contextmanager
    def connection(self, *, fresh: bool = False) -> Iterator[psycopg.Connection[Any]]:
        """This thread's connection inside :meth:`snapshot`, else a pooled one."""
        pinned = getattr(self._local, "pinned", None)
        if pinned is not None:
            yield pinned
            return
        conn = self._take(fresh=fresh)
        try:
            yield conn
        finally:
            self._give(conn)

    def _is_idle(self, conn: psycopg.Connection[Any]) -> bool:
        return bool(conn.info.transaction_status == self._pg.pq.TransactionStatus.IDLE)

    def rows(self, sql: str, args: Sequence[Any] = (), *, binary: bool = False) -> list[tuple[Any, ...]]:
        """Run one read; retried once on a new connection if the pooled one had been dropped."""
        for attempt in (1, 2):
            with self.connection(fresh=attempt > 1) as conn:
                pinned = conn is getattr(self._local, "pinned", None)
                try:
                    return conn.execute(sql, args, binary=binary).fetchall()
                except self._pg.OperationalError as e:
                    if attempt == 2 or pinned or not conn.broken:
                        raise StoreError.of("pg_read", store=self.where, detail=e) from e
                    self.drop_idle()
                except self._pg.Error as e:
                    raise StoreError.of("pg_read", store=self.where, detail=e) from e
        raise AssertionError("unreachable")

    def copy_out(
        self, sql: str, args: Sequence[Any] = (), *, conn: psycopg.Connection[Any] | None = None
    ) -> Iterator[memoryview]:
        """Run ``COPY (sql) TO STDOUT (FORMAT binary)`` and hand over its messages one at a time
        as they arrive (a server sends one row per message, the header with the first): a
        result of a few large rows (vector blocks of 6 MB) is never held whole, and a row's
        bytes are not copied into Python objects. Each message is valid until the next is
        asked for. Consume it to the end before the next read on that connection: ``conn``
        (one of :meth:`twin`), else this thread's, which inside :meth:`snapshot` is the
        pinned one. Not retried (rows may have been used). ``sql`` takes psycopg's ``%s``
        placeholders, bound on the client (COPY takes none)."""
        with contextlib.nullcontext(conn) if conn is not None else self.connection() as c:
            try:
                with c.cursor() as cur, cur.copy(f"COPY ({sql}) TO STDOUT (FORMAT binary)", args) as copy:
                    while data := copy.read():
                        yield memoryview(data)
            except self._pg.Error as e:
                raise StoreError.of("pg_read", store=self.where, detail=e) from e

    @contextlib.contextmanager
    def twin(self) -> Iterator[psycopg.Connection[Any] | None]:
        """Inside :meth:`snapshot`: a second connection whose read-only transaction sees the
        same snapshot (exported with ``pg_export_snapshot``, as ``pg_dump -j`` shares one), so
        one consistent read can run on two server processes at once; ``None`` outside a
        snapshot or where the server refuses (the caller reads on one connection)."""
        pinned = getattr(self._local, "pinned", None)
        conn = None
        try:
            # A failed export would end the pinned transaction: a standby is not asked.
            row = None
            if pinned is not None:
                row = pinned.execute(
                    "SELECT CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_export_snapshot() END"
                ).fetchone()
            if row is not None and row[0] is not None:
                conn = self._take()
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                conn.execute(
                    self._pg.sql.SQL("SET TRANSACTION SNAPSHOT {}").format(self._pg.sql.Literal(row[0]))
                )
        except (self._pg.Error, StoreError) as e:
            logger.info("reading on one connection: no second one on the same snapshot (%s)", e)
            if conn is not None:
                self._end(conn)
                conn = None
        if conn is None:
            yield None
            return
        try:
            yield conn
        finally:
            self._end(conn)

    def _end(self, conn: psycopg.Connection[Any]) -> None:
        """End a :meth:`twin`'s transaction (read only: nothing to commit) and give it back."""
        with contextlib.suppress(self._pg.Error):
            conn.execute("ROLLBACK")
        self._give(conn)

    def write(self, fn: Callable[[psycopg.Cursor[Any]], T]) -> T:
        """Run ``fn`` in one transaction; retried whole on a deadlock or serialisation failure,
        and on a new connection if the pooled one had been dropped before anything was sent."""
        attempt = 0
        fresh = False
        while True:
            attempt += 1
            with self.connection(fresh=fresh) as conn:
                pinned = conn is getattr(self._local, "pinned", None)
                started = False
                try:
                    with conn.transaction():
                        started = True
                        with conn.cursor() as cur:
                            return fn(cur)
                except self._retryable as e:
                    if attempt >= ATTEMPTS or pinned:
                        raise StoreError.of("pg_conflict", store=self.where, detail=e) from e
                    logger.info("retrying a write to %s after: %s", self.where, e)
                    time.sleep(random.uniform(0.0, 0.02 * attempt))
                except self._pg.DataError as e:
                    raise InvalidInputError(f"PostgreSQL refused a value: {e}") from e
                except self._pg.OperationalError as e:
                    if started or fresh or pinned or not conn.broken:
                        raise StoreError.of("pg_lost", store=self.where, detail=e) from e
                    logger.info("reconnecting to %s: %s", self.where, e)
                    self.drop_idle()
                    fresh = True
                except self._pg.Error as e:
                    raise StoreError.of("pg_write", store=self.where, detail=e) from e

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads made by this thread inside the block see one consistent state of the database
        (a ``REPEATABLE READ READ ONLY`` transaction on a connection held for the block), while
        other servers keep writing."""
        if getattr(self._local, "pinned", None) is not None:
            yield
            return
        conn = self._take()
        try:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        except self._pg.Error as e:
            self._give(conn)
            raise StoreError(f"cannot start a snapshot of {self.where}: {e}") from e
        self._local.pinned = conn
        try:
            yield
        finally:
            self._local.pinned = None
            with contextlib.suppress(self._pg.Error):
                conn.execute("ROLLBACK")  # read only: nothing to commit
            self._give(conn)

    def close(self) -> None:
        """Close the idle connections; ones in use close when given back. New operations open
        new connections (like the SQLite store, a closed store can be used again)."""
        with self._pool_lock:
            self._busy.clear()  # so they are closed, not pooled, when given back
        self.drop_idle()
