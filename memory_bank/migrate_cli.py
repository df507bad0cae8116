"""``memorybank migrate --from URL --to URL``: copy a whole store, e.g. SQLite -> PostgreSQL.

Registered as a CLI extension (see :mod:`memory_bank.cli_support`).
"""

from __future__ import annotations

import argparse
import json
import sys

from memory_bank.cli_support import command, register_extension
from memory_bank.errors import InvalidInputError


def _add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "migrate",
        help="copy every user, memory and stored embedding to another store (SQLite <-> PostgreSQL)",
        description=(
            "Copy every user, memory (all fields) and stored embedding from one store to another, "
            "then verify the copy (counts per kind, archived, embeddings, and a digest of every "
            "field). Stores are directories, sqlite:///DIR (sqlite:////ABS/DIR) or "
            "postgresql://user:password@host:port/db[?schema=NAME]. Stop writers to the source first."
        ),
    )
    p.add_argument("--from", dest="source", required=True, metavar="URL", help="store to copy from")
    p.add_argument("--to", dest="target", required=True, metavar="URL", help="store to copy into")
    p.add_argument(
        "--replace", action="store_true", help="overwrite users that already exist in the destination"
    )
    p.add_argument("--batch-size", type=int, default=1000, help="memories per write (default 1000)")
    p.add_argument("--json", action="store_true", help="print the verified counts as JSON")
    p.add_argument("-v", "--verbose", action="store_true")


register_extension(_add_parsers)


@command("migrate")
def _migrate(args: argparse.Namespace) -> int:
    from memory_bank.stores import describe_store
    from memory_bank.stores.migrate import migrate

    source, target = describe_store(args.source), describe_store(args.target)
    if source == target:
        raise InvalidInputError(f"--from and --to are the same store ({source}); give two different stores")
    counts = migrate(
        args.source, args.target, progress=True, replace=args.replace, batch_size=args.batch_size
    )
    if args.json:
        sys.stdout.write(json.dumps(counts) + "\n")
    n = sum(counts["memories"].values())
    print(
        f"migrated {counts['users']} users, {n} memories ({counts['archived']} forgotten) and "
        f"{counts['embeddings']} embeddings from {source} to {target}; verified",
        file=sys.stderr,
    )
    return 0
