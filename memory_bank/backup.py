"""Backups of a store, restoring them, and a full check of a store's integrity.

A backup is one self-contained SQLite store file (no ``-wal`` beside it, so it cannot be copied
half). From SQLite it is made with SQLite's online backup API: a consistent copy of one moment,
while the app keeps writing. From PostgreSQL it is a verified export into that same format
(:func:`memory_bank.stores.migrate.migrate` inside one snapshot of the database, so the backup is
one moment of every user, every field and stored vector, verified). :func:`restore_backup` writes a backup into an empty store, SQLite or
PostgreSQL, and never over an existing one.

>>> backup("./memories", "memories-2026-12-01.mbk")          # doctest: +SKIP
>>> restore_backup("memories-2026-12-01.mbk", "./restored")   # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memory_bank import integrity
from memory_bank.errors import InvalidInputError, StoreError
from memory_bank.integrity import private_prefix as _private
from memory_bank.integrity import sweep_leftovers as _sweep
from memory_bank.records import MemoryKind
from memory_bank.stores import Storage
from memory_bank.stores.sqlite import DB_FILENAME, SQLiteStorage
from memory_bank.stores.sqlite import directory as sqlite_directory

logger = logging.getLogger(__name__)


#: The name's start of a backup being written (``.memorybank-partial.<pid>-<random>.<name>``).
_PARTIAL = ".memorybank-partial."


def _raw_rows(storage: Storage, sql: str) -> list[tuple[Any, ...]]:
    if isinstance(storage, SQLiteStorage):
        with storage._using() as conn:
            return [tuple(r) for r in conn.execute(sql).fetchall()]
    rows: list[tuple[Any, ...]] = storage._rows(sql)  # type: ignore[attr-defined]
    return rows


def check_store(storage: Storage) -> list[str]:
    """Every problem found in the store, one line each; ``[]`` if it is whole. SQLite: a full
    ``PRAGMA integrity_check`` and ``foreign_key_check``; both stores: every row readable (kind,
    JSON fields, day, strength) and every vector of its stated dimension."""
    problems: list[str] = []
    if isinstance(storage, SQLiteStorage):
        with storage._using() as conn:
            problems += [f"SQLite: {r[0]}" for r in conn.execute("PRAGMA integrity_check") if r[0] != "ok"]
            problems += [
                f"SQLite: dangling reference in {r[0]} row {r[1]}"
                for r in conn.execute("PRAGMA foreign_key_check")
            ]
    kinds = {k.value for k in MemoryKind}
    from memory_bank.text import parse_day

    for rowid, kind, extra, date, strength in _raw_rows(
        storage, "SELECT id, kind, extra, date, strength FROM memories ORDER BY id"
    ):
        where = f"memory row {rowid}"
        if kind not in kinds:
            problems.append(f"{where}: kind {kind!r} is not one of {', '.join(sorted(kinds))}")
        try:
            json.loads(extra)
        except (TypeError, ValueError):
            problems.append(f"{where}: its extra field is not JSON")
        try:
            parse_day(date)
        except (InvalidInputError, TypeError):
            problems.append(f"{where}: date {date!r} is not a day")
        if not isinstance(strength, int):
            problems.append(f"{where}: strength {strength!r} is not a whole number")
    for uid, extra in _raw_rows(storage, "SELECT id, extra FROM users ORDER BY id"):
        try:
            json.loads(extra)
        except (TypeError, ValueError):
            problems.append(f"user row {uid}: its extra field is not JSON")
    for rowid, dim, size in _raw_rows(
        storage, "SELECT memory_rowid, dim, length(vector) FROM embeddings ORDER BY memory_rowid"
    ):
        if int(size) != 4 * int(dim):
            problems.append(f"vector of memory row {rowid}: {size} bytes, not {dim} float32 values")
    return problems


def _sqlite_copy(source: SQLiteStorage, target: Path) -> None:
    """An online backup of ``source`` into a new file ``target``, made self-contained."""
    dst = sqlite3.connect(target, isolation_level=None)
    try:
        with source._using() as src:
            src.backup(dst, pages=4096)  # steps of 16 MiB; writers go on between steps
        dst.execute("PRAGMA journal_mode = DELETE")  # one file: no -wal to lose on a copy
        bad = [r[0] for r in dst.execute("PRAGMA integrity_check")]
        if bad != ["ok"]:
            raise StoreError(f"the backup copy failed its integrity check ({bad[0]}); nothing was written")
    finally:
        dst.close()


@contextlib.contextmanager
def _new_file(out: Path) -> Iterator[Path]:
    """A temporary path beside ``out``, renamed to ``out`` (made private, synced) on success."""
    if out.exists():
        raise InvalidInputError(f"{str(out)!r} already exists; give a new file name for the backup")
    out.parent.mkdir(parents=True, exist_ok=True)
    # Private (0600) from the start and kept so: the copy holds every memory in plain text, and
    # a backup killed midway leaves it behind. One prefix for every backup's copy, so the next
    # backup into this folder removes it whatever the names (dated ones differ every day);
    # copies named after their backup (before) are removed by the next backup of that name.
    # SQLite writes an empty file as a new database.
    _sweep(out.parent, _PARTIAL)
    _sweep(out.parent, f".{out.name}.")
    fd, name = tempfile.mkstemp(prefix=_private(_PARTIAL), suffix=f".{out.name}", dir=out.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, 0o600)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.link(tmp, out)  # never over a file that appeared meanwhile
    finally:
        for leftover in (tmp, integrity.wal_path(tmp), tmp.with_name(tmp.name + "-journal")):
            with contextlib.suppress(OSError):
                leftover.unlink()


def backup(store: str | Path, out: str | Path) -> dict[str, Any]:
    """Write a consistent backup of ``store`` (directory or URL) to the new file ``out``.

    Returns the backup's counts (users, memories per kind, archived)."""
    from memory_bank.stores import open_storage
    from memory_bank.stores.migrate import migrate

    out = Path(out).expanduser()
    source = open_storage(store, create=False)
    try:
        with _new_file(out) as tmp:
            if isinstance(source, SQLiteStorage):
                _sqlite_copy(source, tmp)
            else:
                _sweep(out.parent, ".mb-backup-")
                with tempfile.TemporaryDirectory(dir=out.parent, prefix=_private(".mb-backup-")) as work:
                    with source.snapshot():  # one moment of all users, not one per user
                        migrate(source, work, progress=False)
                    shutil.copyfile(Path(work) / DB_FILENAME, tmp)
                    conn = sqlite3.connect(tmp, isolation_level=None)
                    conn.execute("PRAGMA journal_mode = DELETE")
                    conn.close()
            counts = _counts_of_file(tmp)
    finally:
        source.close()
    logger.info("backup of %s written to %s", store, out)
    return counts


@contextlib.contextmanager
def _opened_backup(path: Path) -> Iterator[SQLiteStorage]:
    """The backup file opened read-only as a store (from a private copy: it is never modified)."""
    if not path.is_file():
        what = "is not a file" if path.exists() else "does not exist"
        raise InvalidInputError(f"backup file {str(path)!r} {what}; give the file 'memorybank backup' wrote")
    with open(path, "rb") as f:
        header = f.read(20)
    # A backup is one self-contained file (rollback journal). A file in write-ahead-log mode is a
    # store's own database: its newest writes are in the log beside it, which a copy of the file
    # alone loses, silently.
    if header.startswith(b"SQLite format 3\x00") and len(header) == 20 and header[18] == 2:
        raise InvalidInputError(
            f"{str(path)!r} is a memory store's own database file, not a backup (its newest writes "
            "are in the log beside it); make a backup of that store with 'memorybank backup' and "
            "restore that"
        )
    if path.stat().st_size == 0:
        raise StoreError(
            f"{str(path)!r} is not a usable backup: it is empty (0 bytes); give a file 'memorybank backup' wrote"
        )
    _sweep(Path(tempfile.gettempdir()), "mb-restore-")
    with tempfile.TemporaryDirectory(prefix=_private("mb-restore-")) as work:
        shutil.copyfile(path, Path(work) / DB_FILENAME)
        try:
            storage = SQLiteStorage(work, create=False)
        except StoreError as e:  # said of the user's file, without the store's advice
            copy = repr(str(Path(work) / DB_FILENAME))
            why = str(e).replace(copy, "it").split(";")[0]
            hint = (
                "a memory file (JSON) is read with 'memorybank import'"
                if header.lstrip()[:1] in (b"{", b"[")
                else "give a file 'memorybank backup' wrote"
            )
            raise StoreError(f"{str(path)!r} is not a usable backup: {why}; {hint}") from e
        try:
            problems = check_store(storage)
            if problems:
                raise StoreError(f"the backup {str(path)!r} is damaged: {problems[0]}; use another backup")
            yield storage
        finally:
            storage.close()


def _counts_of_file(path: Path) -> dict[str, Any]:
    with _opened_backup(path) as storage:
        return storage.counts()


def restore_backup(backup_file: str | Path, store: str | Path) -> dict[str, Any]:
    """Restore ``backup_file`` into ``store``, which must hold no memory store yet (a SQLite
    directory without a store file, or a PostgreSQL database/schema without one). Returns the
    restored counts."""
    from memory_bank.stores import _SCHEME, describe_store, open_storage
    from memory_bank.stores.migrate import migrate

    path = Path(backup_file).expanduser()
    if _SCHEME.match(str(store)) and not str(store).startswith("sqlite:"):
        with _opened_backup(path) as source:
            with contextlib.suppress(StoreError):
                existing = open_storage(store, create=False)
                existing.close()
                raise InvalidInputError(
                    f"{describe_store(store)} already holds a memory store; restore into an empty database or schema"
                )
            return migrate(source, store, progress=False)
    directory = sqlite_directory(str(store))
    db = directory / DB_FILENAME
    if directory.exists() and not directory.is_dir():
        raise InvalidInputError(
            f"{str(directory)!r} is a file, not a directory; give a new directory for the restored store"
        )
    if any(p.exists() for p in (db, integrity.wal_path(db))):
        raise InvalidInputError(
            f"{str(directory)!r} already holds a memory store; restore into a new directory (move "
            "the old store away first if you mean to replace it)"
        )
    with _opened_backup(path) as source:
        counts = source.counts()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    for stale in (integrity.id_path(db), db.with_name(DB_FILENAME + "-shm")):
        with contextlib.suppress(OSError):
            stale.unlink()  # an old -shm or id beside the restored file would not be its own
    stamp = dt.datetime.now().strftime("%Y%m%dT%H%M%S")
    _sweep(directory, f".{DB_FILENAME}.restore-")
    tmp = directory / (_private(f".{DB_FILENAME}.restore-") + stamp)
    try:
        with (
            open(tmp, "xb", opener=lambda p, flags: os.open(p, flags, 0o600)) as out,
            open(path, "rb") as src,
        ):
            shutil.copyfileobj(src, out, 1 << 20)  # private from its first byte
            out.flush()
            os.fsync(out.fileno())
        os.link(tmp, db)
    except OSError as e:  # a full disk: say where, and leave no partial copy of every memory
        raise StoreError(
            f"could not restore into {str(directory)!r}: {e.strerror or e}; nothing was restored"
        ) from e
    finally:
        tmp.unlink(missing_ok=True)
    SQLiteStorage(directory).close()  # opens it as a store: checks it and records its id
    return counts
