"""``memorybank check``, ``memorybank backup`` and ``memorybank restore-backup``.

Registered as a CLI extension (see :mod:`memory_bank.cli_support`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from memory_bank.cli_support import command, dump_json, register_extension
from memory_bank.errors import StoreDamagedError, StoreError


def _add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help="check a store's integrity in full (SQLite integrity_check, every row and vector)",
    )
    p.add_argument("--store", required=True, help="a directory, sqlite:///DIR or postgresql://...")
    p.add_argument("-v", "--verbose", action="store_true")
    p = sub.add_parser(
        "backup",
        help="write a consistent backup of a store to one file (safe while the app runs)",
        description=(
            "Write a consistent backup of the store to a new file: SQLite's online backup API "
            "(a copy of one moment while the app keeps writing), or for PostgreSQL a verified "
            "export into the same one-file format. Copying memorybank.sqlite3 by hand misses "
            "its -wal file; use this instead."
        ),
    )
    p.add_argument("--store", required=True, help="a directory, sqlite:///DIR or postgresql://...")
    p.add_argument("--out", required=True, help="the backup file to create (must not exist)")
    p.add_argument("--json", action="store_true", help="print the backup's counts as JSON")
    p.add_argument("-v", "--verbose", action="store_true")
    p = sub.add_parser(
        "restore-backup",
        help="restore a backup file into a new store (an empty directory or PostgreSQL database)",
    )
    p.add_argument("file", help="a file written by 'memorybank backup'")
    p.add_argument("--store", required=True, help="where to restore: a new directory or postgresql://...")
    p.add_argument("--json", action="store_true", help="print the restored counts as JSON")
    p.add_argument("-v", "--verbose", action="store_true")


register_extension(_add_parsers)


def _list_damage(store: str) -> int:
    """List what SQLite's integrity check finds in a store refused as damaged (read-only), and
    say how to recover."""
    import sqlite3

    from memory_bank import integrity
    from memory_bank.stores.sqlite import DB_FILENAME
    from memory_bank.stores.sqlite import directory as sqlite_directory

    db = sqlite_directory(store) / DB_FILENAME
    try:
        conn = integrity.read_only_connection(db)
        try:
            problems = [str(r[0]) for r in conn.execute("PRAGMA integrity_check(20)")]
        finally:
            conn.close()
    except sqlite3.DatabaseError as e:
        problems = [str(e)]
    for line in problems:
        sys.stdout.write(" ".join(line.replace("*** in database main ***", "").split()) + "\n")
    raise StoreError(
        f"the store is damaged ({len(problems)} problem(s) listed above{', the first 20' if len(problems) >= 20 else ''}): "
        "restore the latest backup ('memorybank restore-backup'), and save what is newer with "
        f"'memorybank export --salvage --store {store} --out saved.json'"
    )


@command("check")
def _check(args: argparse.Namespace) -> int:
    from memory_bank.backup import check_store
    from memory_bank.stores import open_storage

    try:
        storage = open_storage(args.store, create=False)
    except StoreDamagedError:
        return _list_damage(args.store)  # what is wrong, not only that something is
    try:
        problems = check_store(storage)
    finally:
        storage.close()
    for line in problems:
        sys.stdout.write(line + "\n")
    if problems:
        raise StoreError(
            f"the store has {len(problems)} problem(s), listed above; restore it from a backup "
            "('memorybank restore-backup')"
        )
    sys.stdout.write("ok\n")
    return 0


def _report(args: argparse.Namespace, counts: dict[str, Any], verb: str, where: str) -> int:
    """Print ``counts`` (``--json``) and one line: what was done (``verb``), to how much, ``where``."""
    if args.json:
        dump_json(counts)
    n = sum(counts["memories"].values())
    print(f"{verb} {counts['users']} users and {n} memories {where}", file=sys.stderr)
    return 0


@command("backup")
def _backup(args: argparse.Namespace) -> int:
    from memory_bank.backup import backup

    return _report(args, backup(args.store, args.out), "backed up", f"to {args.out}")


@command("restore-backup")
def _restore_backup(args: argparse.Namespace) -> int:
    from memory_bank.backup import restore_backup
    from memory_bank.stores import describe_store

    where = f"into {describe_store(args.store)}"
    return _report(args, restore_backup(args.file, args.store), "restored", where)
