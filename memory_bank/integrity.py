"""Is this file a MemoryBank store, whole and ours? Checks made before SQLite writes anything.

Opening a store must never turn a file that is not one into one: a 0-byte file (a failed copy),
a database of another program, or a store beside a ``-wal`` file of another database (a backup
copied over the main file only, so SQLite would replay foreign pages) is refused with one line
and left untouched. Only a directory with no store file at all is initialised, and a new store
file appears whole or not at all (it is built under a temporary name and linked into place).

The checks read through a read-only connection, which never checkpoints, so a refused file and
its ``-wal`` stay byte for byte as they were. Each store records a random ``store_id`` in its
``meta`` table and, beside the database, in ``memorybank.sqlite3-id``; every write transaction
also counts itself in ``meta`` (:func:`stamp_commit`), so every WAL a store writes carries its
``meta`` page. A ``-wal`` of another store, replayed over this database, therefore shows that
store's id, which differs from the recorded one: the store is refused before anything is written.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sqlite3
import uuid
from collections.abc import Sequence
from pathlib import Path

from memory_bank.errors import StoreDamagedError, StoreError

logger = logging.getLogger(__name__)

#: ``PRAGMA application_id`` of a MemoryBank store ("MBNK"), so tools like ``file`` can tell.
APPLICATION_ID = 0x4D424E4B
_SQLITE_MAGIC = b"SQLite format 3\x00"
_WAL_MAGIC = (0x377F0682, 0x377F0683)
_TABLES = ("meta", "users", "memories", "embeddings")


def wal_path(db: Path) -> Path:
    return db.with_name(db.name + "-wal")


def id_path(db: Path) -> Path:
    return db.with_name(db.name + "-id")


def _page_size(header: bytes) -> int:
    size = int.from_bytes(header[16:18], "big")
    return 65536 if size == 1 else size


def _refuse(db: Path, problem: str, *, damaged: bool = False) -> StoreError:
    return (StoreDamagedError if damaged else StoreError)(f"{str(db)!r} {problem}")


def check_files(db: Path) -> None:
    """Refuse, without opening it with SQLite, a store file that cannot be ours or whole."""
    wal = wal_path(db)
    if not db.exists():
        if wal.exists() and wal.stat().st_size:
            raise _refuse(
                wal,
                "exists without its database memorybank.sqlite3 (deleted or moved?); restore the "
                "database beside it, or move the -wal/-shm files away to start a new store",
            )
        return
    size = db.stat().st_size
    if size == 0:
        raise _refuse(
            db,
            "is empty (0 bytes), not a memory store: a failed copy? Restore it with 'memorybank "
            "restore-backup', or move it away to start a new store",
        )
    try:
        with open(db, "rb") as f:
            header = f.read(100)
    except OSError as e:
        raise _refuse(db, f"cannot be read ({e.strerror}); check its permissions") from e
    if not header.startswith(_SQLITE_MAGIC) or len(header) < 100:
        raise _refuse(
            db,
            "is not an SQLite database, so not a memory store; check the path given (memorybank --store, silicon-friend --data-dir)",
        )
    if wal.exists() and wal.stat().st_size:
        with open(wal, "rb") as f:
            wal_header = f.read(32)
        magic = int.from_bytes(wal_header[:4], "big")
        wal_page = int.from_bytes(wal_header[8:12], "big")
        if len(wal_header) < 32 or magic not in _WAL_MAGIC or wal_page != _page_size(header):
            raise _refuse(
                wal,
                "does not belong to the database beside it (not a WAL of its page size); it was "
                "probably copied from another store: move it away (and the -shm) or restore a backup",
            )


def stamp_commit(conn: sqlite3.Connection) -> None:
    """Count a write transaction in ``meta`` (called just before its COMMIT): the ``meta`` page,
    with the store id, is then in every WAL this store writes (see the module docstring)."""
    conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'commits'")


def read_only_uri(db: Path) -> str:
    """The URI of a connection that can read ``db`` but never writes or checkpoints its files.

    In a directory this user may not write, SQLite cannot create the ``-shm`` index a WAL
    database needs; with no ``-wal`` file there (the store was closed cleanly, and nobody who
    lacks write access can be writing), the file is read as immutable, which needs none."""
    uri = f"{db.resolve().as_uri()}?mode=ro"
    if not os.access(db.parent, os.W_OK) and not wal_path(db).exists():
        uri += "&immutable=1"
    return uri


def read_only_connection(db: Path) -> sqlite3.Connection:
    """A connection that can read but never writes or checkpoints the files."""
    return sqlite3.connect(read_only_uri(db), uri=True, isolation_level=None)


def inspect(db: Path, *, quick_check: bool = True) -> dict[str, str]:
    """The ``meta`` of the store file ``db`` after checking that it is a MemoryBank store, that a
    ``-wal`` beside it belongs to it, and (``quick_check``) that SQLite finds no damage.
    Raises :class:`StoreError` naming the problem; nothing is written."""
    check_files(db)
    try:
        conn = read_only_connection(db)
    except sqlite3.Error as e:
        raise _refuse(db, f"cannot be opened ({e}); check the file and its permissions") from e
    try:
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall()) if "meta" in tables else {}
        except sqlite3.OperationalError as e:
            shm = db.with_name(db.name + "-shm")
            if wal_path(db).exists() and not shm.exists() and not os.access(db.parent, os.W_OK):
                # Not damage: SQLite reads a -wal (an unclean stop) through a -shm index it must
                # create. A backup restored over it would lose what the -wal holds.
                raise _refuse(
                    db,
                    f"cannot be read here: its -wal (left by an unclean stop) needs an index file SQLite "
                    f"must create in {str(db.parent)!r}, which this user may not write. Nothing is "
                    "damaged: open it once with write permission on that folder",
                ) from e
            if "disk I/O" not in str(e) and "full" not in str(e):
                raise _refuse(
                    db, f"is damaged or not a memory store ({e}); run 'memorybank check'", damaged=True
                ) from e
            # A full disk fails the read-only open too (SQLite cannot map its WAL index): the
            # file is not damaged, and must not be replaced by an older backup for it.
            raise _refuse(
                db, f"cannot be read ({e}): the disk may be full or failing; free some space and try again"
            ) from e
        except sqlite3.DatabaseError as e:
            raise _refuse(
                db, f"is damaged or not a memory store ({e}); run 'memorybank check'", damaged=True
            ) from e
        missing = [t for t in _TABLES if t not in tables]
        if missing or "schema_version" not in meta:
            raise _refuse(
                db,
                "is an SQLite database but not a MemoryBank store (no "
                f"{', '.join(missing) or 'schema version'}); check the path given (memorybank --store, silicon-friend --data-dir); this file is left as it is",
            )
        version = meta["schema_version"]
        if not version.isdigit():
            raise _refuse(db, f"has a damaged schema version {version!r}; restore the store from a backup")
        recorded = _recorded_id(db)
        wal = wal_path(db)
        if (
            recorded
            and meta.get("store_id")
            and recorded != meta["store_id"]
            and wal.exists()
            and wal.stat().st_size
        ):
            raise _refuse(
                wal,
                f"does not belong to this database: the store {recorded} wrote it, the database is "
                f"store {meta['store_id']} (a backup copied over the main file only?). Move the -wal "
                "and -shm files away, or restore with 'memorybank restore-backup'",
            )
        if quick_check:
            try:
                problems = [r[0] for r in conn.execute(_quick_check_sql(db))]
            except sqlite3.DatabaseError as e:  # damage the check itself cannot read past
                problems = [str(e)]
            if problems != ["ok"]:
                first = " ".join(problems[0].replace("*** in database main ***", "").split())
                raise _refuse(
                    db,
                    f"is damaged (SQLite quick_check: {first}); nothing was written. Restore it "
                    "from a backup ('memorybank restore-backup'); 'memorybank export --salvage' "
                    "saves what still reads of it",
                    damaged=True,
                )
        return meta
    finally:
        conn.close()


#: Up to this size a store is quick_checked whole on every open (measured: ~0.03 s per MiB on a
#: loaded 2-core machine); a bigger one only after an unclean shutdown (a -wal left behind),
#: else its small tables. ``memorybank check`` always checks everything.
FULL_QUICK_CHECK_BYTES = 64 * 2**20


def _quick_check_sql(db: Path) -> str:
    wal = wal_path(db)
    dirty = wal.exists() and wal.stat().st_size > 0
    if dirty or db.stat().st_size <= FULL_QUICK_CHECK_BYTES:
        return "PRAGMA quick_check(5)"
    return "PRAGMA quick_check(users)"


def _recorded_id(db: Path) -> str | None:
    with contextlib.suppress(OSError, UnicodeDecodeError):
        return id_path(db).read_text(encoding="ascii").strip() or None
    return None


def record_id(db: Path, store_id: str) -> None:
    """Write the store id beside the database (``memorybank.sqlite3-id``), atomically."""
    target = id_path(db)
    if _recorded_id(db) == store_id:
        return
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}")
    try:
        fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(store_id + "\n")
        os.replace(tmp, target)
    except OSError as e:  # a read-only directory: the check simply has nothing to compare with
        logger.info("could not record the store id beside %s: %s", db, e)
        with contextlib.suppress(OSError):
            tmp.unlink()


def new_store_id() -> str:
    return uuid.uuid4().hex


def create_store_file(db: Path, statements: Sequence[str], *, page_size: int = 4096) -> None:
    """Create the store file ``db`` from ``statements`` (the schema) under a temporary name, then
    link it into place: a crash leaves no store file or a whole one, never a 0-byte one. Its
    pages are ``page_size`` bytes (a power of two, 512-65536), fixed for the file's life."""
    tmp = db.with_name(f".{db.name}.new-{uuid.uuid4().hex[:8]}")
    os.close(os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600))
    try:
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            conn.execute(f"PRAGMA page_size = {int(page_size)}")  # before anything is written
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("BEGIN")
            for statement in statements:
                conn.execute(statement)
            conn.execute("INSERT INTO meta(key, value) VALUES ('store_id', ?)", (new_store_id(),))
            conn.execute("INSERT INTO meta(key, value) VALUES ('commits', '0')")
            conn.execute("COMMIT")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        with contextlib.suppress(FileExistsError):  # another process created it meanwhile: use theirs
            os.link(tmp, db)
    finally:
        for leftover in (tmp, wal_path(tmp), tmp.with_name(tmp.name + "-shm")):
            with contextlib.suppress(OSError):
                leftover.unlink()


def write_error(db: Path, e: sqlite3.OperationalError, *, waited_s: float) -> StoreError:
    """The one-line error for a write SQLite refused (nothing of it was written); ``waited_s``
    is how long the write waited for the lock."""
    text, store = str(e), repr(str(db))
    if "disk is full" in text or "full" in text.split():
        return StoreError.of("full", store=store)
    if "readonly" in text or "read-only" in text:
        return StoreError.of("read_only", store=store)
    if "database is locked" in text:
        return StoreError.of("locked", store=store, seconds=f"{waited_s:g}")
    return StoreError.of("not_written", store=store, detail=text)


def private_prefix(prefix: str) -> str:
    """A prefix for this process's temporary copies (they hold every memory in plain text):
    the process id in it tells :func:`sweep_leftovers` whose they are."""
    return f"{prefix}{os.getpid()}-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def sweep_leftovers(directory: Path, prefix: str) -> None:
    """Remove what a backup or restore killed midway left in ``directory`` (files and folders
    named ``prefix`` + the dead process's id): a copy of every memory, left behind."""
    with contextlib.suppress(OSError):
        for entry in directory.iterdir():
            name = entry.name
            if not name.startswith(prefix):
                continue
            pid = name[len(prefix) :].split("-", 1)[0]
            if not pid.isdigit() or _alive(int(pid)):
                continue
            with contextlib.suppress(OSError):
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
            logger.info("removed %s, left by a copy of the memories that was stopped", entry)
