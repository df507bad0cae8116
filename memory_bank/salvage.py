"""What still reads of a damaged SQLite store, copied into a fresh one (``memorybank export --salvage``).

A store that SQLite finds damaged is refused, and the advice is to restore the latest backup.
The memories written since that backup are often still in the file: damage usually touches a
few pages. :func:`salvage` opens the damaged file read-only (it is never written), makes a
fresh store of the same schema in a new folder, and copies every table row by row where it can:
a range of rows that cannot be read is split in halves until the unreadable rows are found, and
only those are left out. The copy is then an ordinary store (its own quick check passes), from
which ``memorybank export`` writes a memory file to import into the restored store.

    counts = salvage("damaged/memorybank.sqlite3", "rescued/")
    counts["memories"]  # (copied, left out)
"""

from __future__ import annotations

import contextlib
import re
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

from memory_bank import integrity
from memory_bank.errors import InvalidInputError, StoreError
from memory_bank.stores.base import SCHEMA_VERSION
from memory_bank.stores.sqlite import DB_FILENAME, SQLiteStorage

#: Rows copied in one statement before a failing range is split.
CHUNK = 4096


def _columns(conn: sqlite3.Connection, schema: str, table: str) -> list[str]:
    return [str(r[1]) for r in conn.execute(f"PRAGMA {schema}.table_info({table})")]


def _copy_table(conn: sqlite3.Connection, table: str, reattach: Callable[[], None]) -> tuple[int, int]:
    """Copy ``old.table`` into ``main.table`` (their common columns), skipping unreadable rows:
    (rows copied, rows left out; -1 when no row of it can be found). Rows are found by rowid ranges, so a damaged index or a
    damaged page of rows costs only the rows it holds."""
    cols = [c for c in _columns(conn, "main", table) if c in set(_columns(conn, "old", table))]
    if not cols:
        return 0, 0
    names = ", ".join(f'"{c}"' for c in cols)
    try:
        low, high = conn.execute(f"SELECT min(rowid), max(rowid) FROM old.{table}").fetchone()
    except sqlite3.DatabaseError:  # the table's first or last page: its rows cannot be found
        reattach()
        return 0, -1
    if low is None:
        return 0, 0
    copied = lost = 0
    stack: list[tuple[int, int]] = []
    start = int(low)
    while start <= int(high):
        stack.append((start, min(int(high), start + CHUNK - 1)))
        start += CHUNK
    stack.reverse()
    while stack:
        a, b = stack.pop()
        try:
            cur = conn.execute(
                f"INSERT OR IGNORE INTO main.{table} ({names}) SELECT {names} FROM old.{table} "
                "WHERE rowid BETWEEN ? AND ?",
                (a, b),
            )
            copied += max(cur.rowcount, 0)
        except sqlite3.DatabaseError:
            reattach()  # SQLite keeps the damaged file's error for the connection's later reads
            if a == b:
                lost += 1
                continue
            mid = (a + b) // 2
            stack += [(mid + 1, b), (a, mid)]
    return copied, lost


#: Tables copied, parents first. Vectors are left: the copy is for an export, and an import
#: embeds again.
_TABLES = ("meta", "users", "memories", "deleted_ids")
#: Keys of the damaged store's meta that are its own, not its memories'.
_OWN_META = ("store_id", "commits", "schema_version")


def salvage(source: str | Path, into: str | Path) -> dict[str, tuple[int, int]]:
    """Copy what still reads of the store file ``source`` (a directory or its database file)
    into a new store in the folder ``into`` (which must not hold one). Returns, per table,
    ``(rows copied, rows left out)`` (-1 left out: the table's rows could not be found at
    all). ``source`` is opened read-only and never written."""
    src = Path(source).expanduser()
    db = src / DB_FILENAME if src.is_dir() else src
    if not db.is_file():
        raise InvalidInputError(f"no store file at {str(db)!r}; give the damaged store's directory")
    target = Path(into).expanduser()
    if (target / DB_FILENAME).exists():
        raise InvalidInputError(
            f"{str(target)!r} already holds a memory store; give a new folder for the salvaged copy"
        )
    SQLiteStorage(target).close()  # a fresh store of this version's schema
    # The damaged file and its -wal (the newest memories, after a crash) are read from a private
    # copy: SQLite applies a -wal only through a -shm index it must write, and the original
    # folder and files are never written.
    source_copy = target / "source"
    source_copy.mkdir(mode=0o700)
    shutil.copyfile(db, source_copy / DB_FILENAME)
    if integrity.wal_path(db).is_file():
        shutil.copyfile(integrity.wal_path(db), source_copy / (DB_FILENAME + "-wal"))
    # Each copy commits on its own (a fresh folder: an interrupted salvage leaves only a copy).
    conn = sqlite3.connect(target / DB_FILENAME, isolation_level=None)
    uri = f"{(source_copy / DB_FILENAME).resolve().as_uri()}?mode=ro"

    def reattach() -> None:
        conn.execute("DETACH DATABASE old")
        conn.execute("ATTACH DATABASE ? AS old", (uri,))

    try:
        conn.execute("PRAGMA foreign_keys = OFF")  # parents that did not survive leave their rows out below
        try:
            conn.execute("ATTACH DATABASE ? AS old", (uri,))
            row = conn.execute("SELECT value FROM old.meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.DatabaseError:
            row = None  # unreadable: this version's layout is the best guess
            with contextlib.suppress(sqlite3.DatabaseError):
                reattach()
        # Every migration so far only adds (columns with defaults, tables, caches): the columns
        # an older store has are copied, the rest take their defaults, as a migration gives them.
        if row is not None and str(row[0]).isdigit() and int(row[0]) > SCHEMA_VERSION:
            raise InvalidInputError(
                f"{str(db)!r} has schema version {row[0]}, newer than this package salvages "
                f"({SCHEMA_VERSION}); upgrade memorybank-siliconfriend"
            )
        counts: dict[str, tuple[int, int]] = {}
        conn.execute("DELETE FROM main.meta")  # the damaged store's own settings, if they read
        for table in _TABLES:
            try:
                present = conn.execute(
                    "SELECT 1 FROM old.sqlite_schema WHERE type = 'table' AND name = ?", (table,)
                ).fetchone()
            except sqlite3.DatabaseError:
                reattach()
                present = True  # the schema page itself: try the table anyway
            if present and _columns(conn, "main", table):
                counts[table] = _copy_table(conn, table, reattach)
        # Memories whose user row was lost keep a user: the name their ids carry
        # (``{user}_{date}_{n}``), else one that says what happened.
        counts["recovered users"] = _recover_users(conn)
        conn.execute(f"DELETE FROM main.meta WHERE key IN ({', '.join('?' * len(_OWN_META))})", _OWN_META)
        conn.execute(
            "INSERT INTO main.meta(key, value) VALUES ('schema_version', ?), ('store_id', ?), ('commits', '0')",
            (str(SCHEMA_VERSION), integrity.new_store_id()),
        )
    except sqlite3.DatabaseError as e:
        raise StoreError(f"cannot read {str(db)!r} at all ({e}); restore the latest backup") from e
    finally:
        conn.close()
        shutil.rmtree(source_copy, ignore_errors=True)
    SQLiteStorage(target).close()  # opens the copy as a store: checks it, records its new id
    return counts


_ID_USER = re.compile(r"^(.+)_\d{4}-\d{2}-\d{2}_(?:\d+|summary|personality)$")


def _recover_users(conn: sqlite3.Connection) -> tuple[int, int]:
    """Give the memories whose user row did not survive a user: the name their memory ids
    carry where they all agree, else ``salvaged user <id>``. ``(users made, 0)``."""
    made = 0
    for (user_id,) in conn.execute(
        "SELECT DISTINCT user_id FROM main.memories WHERE user_id NOT IN (SELECT id FROM main.users)"
    ).fetchall():
        ids = [
            r[0] for r in conn.execute("SELECT memory_id FROM main.memories WHERE user_id = ?", (user_id,))
        ]
        names = {m.group(1) for m in map(_ID_USER.match, ids) if m}
        name = names.pop() if len(names) == 1 else f"salvaged user {user_id}"
        taken = conn.execute("SELECT 1 FROM main.users WHERE name = ?", (name,)).fetchone()
        conn.execute(
            "INSERT INTO main.users (id, name) VALUES (?, ?)",
            (user_id, f"salvaged user {user_id}" if taken else name),
        )
        made += 1
    return made, 0
