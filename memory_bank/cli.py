"""The ``memorybank`` command line.

Every command takes ``--store DIR`` (the memory store) and optionally ``--config FILE.yaml``;
flags override the file. Errors print one line on stderr and exit with code 2; input files are
never modified.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import json
import logging
import os
import re
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memory_bank.cli_support import command, dump_json, extensions, handler, open_bank, progress
from memory_bank.errors import InvalidInputError, MemoryBankError
from memory_bank.forgetting import MODES, POLICIES
from memory_bank.languages import LANGUAGES

logger = logging.getLogger("memory_bank.cli")


@command("import")
def _import(args: argparse.Namespace) -> int:
    from memory_bank.original_format import import_data, load_memory_file, user_memories
    from memory_bank.stores import describe_store

    data = load_memory_file(args.file)
    total = sum(len(user_memories(k, v)[0]) for k, v in data.items())
    with open_bank(args, create=True) as bank, progress(total, "importing") as bar:
        counts = import_data(bank, data, replace=args.replace, progress=bar.update)
    print(
        f"imported {sum(counts.values())} memories of {len(counts)} users into {describe_store(args.store)}",
        file=sys.stderr,
    )
    return 0


@command("export")
def _export(args: argparse.Namespace) -> int:
    from memory_bank.original_format import export_data, json_target, write_json_atomic

    if args.out not in (None, "-"):  # checked before the export's work, not after it
        json_target(args.out)
        if not args.force and os.path.lexists(args.out):  # the file imported a moment ago, say
            raise InvalidInputError(
                f"{args.out!r} already exists; give a new file name, or add --force to overwrite it"
            )
    if args.salvage:
        data = _salvaged(args)
    else:
        with open_bank(args) as bank:
            data = export_data(bank, [args.user] if args.user is not None else None)
    if args.out in (None, "-"):
        dump_json(data)
    else:
        write_json_atomic(args.out, data)
        print(f"exported {len(data)} users to {args.out}", file=sys.stderr)
    return 0


def _salvaged(args: argparse.Namespace) -> dict[str, Any]:
    """The memory-file data of what still reads of a damaged SQLite store (``export --salvage``):
    copied into a private temporary store (see :mod:`memory_bank.salvage`), exported from there."""
    import tempfile

    from memory_bank import integrity
    from memory_bank.original_format import export_data
    from memory_bank.salvage import salvage
    from memory_bank.stores import _SCHEME

    if _SCHEME.match(str(args.store)) and not str(args.store).startswith("sqlite:"):
        raise InvalidInputError(
            "--salvage reads a SQLite store's file; a PostgreSQL database has its own tools"
        )
    from memory_bank.stores.sqlite import directory as sqlite_directory

    scratch = Path(tempfile.gettempdir())
    integrity.sweep_leftovers(scratch, "mb-salvage-")
    with tempfile.TemporaryDirectory(prefix=integrity.private_prefix("mb-salvage-")) as work:
        counts = salvage(sqlite_directory(str(args.store)), Path(work) / "store")
        made = counts.pop("recovered users", (0, 0))[0]
        if made:
            print(
                f"salvage: {made} users' own records could not be read; their memories are exported "
                "under the name their memory ids carry, else as 'salvaged user N'",
                file=sys.stderr,
            )
        for table, (copied, lost) in counts.items():
            if lost:
                what = "none could be found" if lost < 0 else f"{lost} could not be read and are left out"
                print(f"salvage: {table}: {copied} rows copied, {what}", file=sys.stderr)
        args.store = str(Path(work) / "store")
        with open_bank(args) as bank:
            return export_data(bank, [args.user] if args.user is not None else None)


@command("add")
def _add(args: argparse.Namespace) -> int:
    with open_bank(args, create=True) as bank:
        m = bank.add_turn(args.user, args.query, args.response, at=args.at)
    dump_json({"memory_id": m.memory_id, "user": m.user, "date": m.date, "turn": m.turn})
    return 0


def _read_queries(path: str) -> list[dict[str, str]]:
    out = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidInputError(f"cannot read queries file {path!r}: {e}") from e
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as e:
            raise InvalidInputError(f"{path}:{i}: not valid JSON ({e.msg})") from e
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("user"), str)
            or not isinstance(item.get("query"), str)
        ):
            raise InvalidInputError(f'{path}:{i}: expected {{"user": str, "query": str}}')
        out.append(item)
    return out


@command("search")
def _search(args: argparse.Namespace) -> int:
    with open_bank(args) as bank:
        if args.queries:
            for item in _read_queries(args.queries):
                hits = bank.search(
                    item["user"], item["query"], args.k, now=args.now, reinforce=args.reinforce
                )
                dump_json(
                    {"user": item["user"], "query": item["query"], "results": [h.to_dict() for h in hits]}
                )
            return 0
        if not args.user or args.query is None:
            raise InvalidInputError("search needs --user and a QUERY (or --queries FILE.jsonl)")
        hits = bank.search(args.user, args.query, args.k, now=args.now, reinforce=args.reinforce)
    if args.json:
        dump_json([h.to_dict() for h in hits])
    else:
        for h in hits:
            m = h.memory
            where = f"{m.date}#{m.turn}" if m.turn is not None else m.date
            print(f"[{h.score:.3f}] {where} {m.kind.value} (S={m.strength}, R={h.retention:.2f}) {m.text!r}")
    return 0


@command("memories")
def _memories(args: argparse.Namespace) -> int:
    with open_bank(args) as bank:
        rows = bank.memories(args.user, now=args.now, mode=args.mode)
    items: list[dict[str, Any]] = [
        {
            "memory_id": m.memory_id,
            "user": m.user,
            "kind": m.kind.value,
            "date": m.date,
            "turn": m.turn,
            "text": m.text,
            "strength": m.strength,
            "last_recall_date": m.last_recall_date,
            "retention": round(r, 6),
            "archived": m.archived,
            "stale": m.stale,
        }
        for m, r in rows
    ]
    if args.json:
        dump_json(items)
    else:
        for it in items:
            flag = " [forgotten]" if it["archived"] else ""
            print(f"{it['memory_id']}: S={it['strength']} R={it['retention']:.3f}{flag} {it['text'][:80]!r}")
    return 0


@command("forget")
def _forget(args: argparse.Namespace) -> int:
    with open_bank(args) as bank:
        reports = bank.forget(args.user, now=args.now, mode=args.mode, seed=args.seed)
    if args.json:
        dump_json({u: r.to_dict() for u, r in reports.items()})
    else:
        for u, r in reports.items():
            print(f"{u}: forgot {len(r.forgotten)} of {r.examined} memories ({r.mode}, {r.action})")
    return 0


@command("delete")
def _delete(args: argparse.Namespace) -> int:
    with open_bank(args) as bank:
        if args.memory_id:
            m = bank.delete_memory(args.user, args.memory_id)
            print(
                f"deleted {m.memory_id}; summaries covering it are marked for regeneration", file=sys.stderr
            )
        else:
            n = bank.delete_user(args.user)
            print(f"deleted user {args.user!r} and all {n} of their memories", file=sys.stderr)
    return 0


@command("restore")
def _restore(args: argparse.Namespace) -> int:
    with open_bank(args) as bank:
        bank.restore(args.user, args.memory_id, now=args.now)
    return 0


@command("purge")
def _purge(args: argparse.Namespace) -> int:
    with open_bank(args) as bank:
        n = bank.purge_archived(args.user)
    print(f"purged {n} forgotten memories", file=sys.stderr)
    return 0


@command("stats")
def _stats(args: argparse.Namespace) -> int:
    with open_bank(args) as bank:
        stats = bank.stats()
    if args.json:
        dump_json(stats)
    else:
        print(f"users: {stats['users']}")
        for kind, n in stats["memories"].items():
            print(f"{kind}: {n}")
        print(f"forgotten (archived): {stats['archived']}")
    return 0


@command("reembed")
def _reembed(args: argparse.Namespace) -> int:
    with open_bank(args) as bank:
        n = bank.reembed(progress=True)
    print(f"embedded {n} memories with {args.encoder or 'the configured encoder'}", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--store",
        help="memory store: a directory, sqlite:///DIR or postgresql://user@host/db (default: the --config file's store:)",
    )
    common.add_argument("--config", help="YAML config file; flags override it")
    common.set_defaults(store_from_config=True)  # no --store: the --config file's store:
    common.add_argument("--language", choices=LANGUAGES, help="language (picks the default encoder)")
    common.add_argument(
        "--encoder",
        help="encoder: minilm, use-multilingual, multilingual-e5-small, hashing, or a sentence-transformers path",
    )
    common.add_argument("--now", help="today's date for forgetting and relative dates (YYYY-MM-DD)")
    common.add_argument(
        "--forgetting",
        choices=MODES,
        help="forgetting curve (default: the config's, the selective setting on the paper's curve); off turns it off",
    )
    common.add_argument("--json", action="store_true", help="machine-readable output")
    common.add_argument("-v", "--verbose", action="store_true")

    parser = argparse.ArgumentParser(prog="memorybank", description="MemoryBank long-term memory store.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("import", parents=[common], help="import a memory file (original MemoryBank JSON)")
    p.add_argument("file")
    p.add_argument("--replace", action="store_true", help="replace users that already exist in the store")
    p = sub.add_parser("export", parents=[common], help="export to a memory file (original format)")
    p.add_argument("--out", help="output file (default: stdout); an existing file is kept unless --force")
    p.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    p.add_argument(
        "--salvage",
        action="store_true",
        help="export what still reads of a store refused as damaged (SQLite; the store is not written)",
    )
    p.add_argument("--user")
    p = sub.add_parser("add", parents=[common], help="store one dialog turn")
    p.add_argument("--user", required=True)
    p.add_argument("--query", required=True)
    p.add_argument("--response", default="")
    p.add_argument("--at", help="when it happened (ISO time; default now)")
    p = sub.add_parser("search", parents=[common], help="retrieve a user's memories related to a query")
    p.add_argument("query", nargs="?")
    p.add_argument("--user")
    p.add_argument("--k", type=int, default=None, help="memories to return (default: config top_k, 2)")
    p.add_argument("--reinforce", action="store_true", help="count the results as recalled (strength +1)")
    p.add_argument("--queries", help='JSONL file of {"user", "query"} lines; one JSON result line each')
    p = sub.add_parser(
        "memories", parents=[common], help="list a user's memories with strength and retention"
    )
    p.add_argument("--user", required=True)
    p.add_argument("--mode", choices=MODES, help="forgetting curve for 'retention'")
    p = sub.add_parser("forget", parents=[common], help="run a forgetting pass")
    p.add_argument("--user")
    p.add_argument("--mode", choices=MODES)
    p.add_argument("--policy", choices=POLICIES)
    p.add_argument("--tau", type=float, help="time scale in days (R = exp(-t/(tau*S)))")
    p.add_argument("--seed", type=int)
    p = sub.add_parser("delete", parents=[common], help="delete a user (everything) or one memory")
    p.add_argument("--user", required=True)
    p.add_argument("--memory-id")
    p = sub.add_parser("restore", parents=[common], help="bring forgotten memories back")
    p.add_argument("--user", required=True)
    p.add_argument("memory_id", nargs="+")
    p = sub.add_parser("purge", parents=[common], help="delete forgotten (archived) memories for good")
    p.add_argument("--user")
    sub.add_parser("stats", parents=[common], help="counts of users and memories")
    sub.add_parser(
        "reembed", parents=[common], help="embed memories that lack a vector from the configured encoder"
    )
    for extend in extensions():
        extend(sub)
    return parser


#: The modules that own the other commands; each registers its subparsers and handler on import
#: (see :mod:`memory_bank.cli_support`).
COMMAND_MODULES = (
    "memory_bank.summaries.cli",
    "memory_bank.evaluation.cli",
    "memory_bank.bench.cli",
    "memory_bank.migrate_cli",
    "memory_bank.mcp_cli",
    "memory_bank.store_cli",
)


def load_commands() -> None:
    """Import :data:`COMMAND_MODULES` (one whose optional dependency is missing is left out)."""
    for module in COMMAND_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name is None or not module.startswith(e.name):
                raise


def _one_line(message: str) -> str:
    """An error as one line: a driver's or a parser's message can span several."""
    return re.sub(r"\s*\n\s*", " ", message.strip())


def _configured_store(args: argparse.Namespace, parser: argparse.ArgumentParser) -> str:
    """The ``store:`` of the ``--config`` file, for a command given no ``--store``."""
    from memory_bank.config import load_config

    if getattr(args, "config", None):
        try:
            config = load_config(args.config)
        except MemoryBankError as e:
            parser.error(_one_line(str(e)))
        if "store" in config.model_fields_set:
            return config.store
    parser.error("the following arguments are required: --store (or a store: in the --config file)")


def main(argv: Sequence[str] | None = None) -> int:
    load_commands()
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "store_from_config", False) and args.store is None:  # the common options
        args.store = _configured_store(args, parser)
    logging.basicConfig(
        level=logging.INFO if getattr(args, "verbose", False) else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        return handler(args.command)(args)
    except MemoryBankError as e:
        print(f"memorybank: error: {_one_line(str(e))}", file=sys.stderr)
        return 2
    except OSError as e:  # the machine's: a full disk, a path through a file, no permission
        where = f" ({e.filename})" if e.filename else ""
        hint = "; free some space and run it again" if e.errno == errno.ENOSPC else ""
        print(f"memorybank: error: {e.strerror or e}{where}{hint}", file=sys.stderr)
        return 2
    except sqlite3.OperationalError as e:
        if "full" not in str(e):
            raise
        print(f"memorybank: error: {e}; free some space and run it again", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("memorybank: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
