"""What every ``memorybank`` command is made of: the command registry and the shared helpers.

A command lives in the module that owns its concept (the core commands in
:mod:`memory_bank.cli`, ``summarize`` in :mod:`memory_bank.summaries.cli`, ``eval`` in
:mod:`memory_bank.evaluation.cli`, ``bench`` in :mod:`memory_bank.bench.cli`, ``migrate`` in
:mod:`memory_bank.migrate_cli`). Such a module adds its subparsers with
:func:`register_extension` and its handler with :func:`command`, and uses the helpers here:
:func:`open_bank` (a bank from the common ``--store/--config/--language/--encoder`` options),
:func:`dump_json` (one JSON line on stdout) and :func:`progress` (a bar on stderr).

Example::

    from memory_bank.cli_support import command, dump_json, open_bank, register_extension

    def _add_parsers(sub):
        p = sub.add_parser("count", help="count a user's memories")
        p.add_argument("--store", required=True)
        p.add_argument("--user", required=True)

    register_extension(_add_parsers)

    @command("count")
    def _count(args):
        with open_bank(args) as bank:
            dump_json({"memories": len(bank.memories(args.user))})
        return 0
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tqdm import tqdm

    from memory_bank.bank import MemoryBank

#: A command's handler: parsed arguments in, exit code out.
Handler = Callable[[argparse.Namespace], int]
#: Adds a module's subparsers to the ``memorybank`` command.
AddParsers = Callable[[Any], None]

_COMMANDS: dict[str, Handler] = {}
_EXTENSIONS: list[AddParsers] = []


def command(name: str) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler of subcommand ``name``."""

    def register(fn: Handler) -> Handler:
        _COMMANDS[name] = fn
        return fn

    return register


def register_extension(add_parsers: AddParsers) -> None:
    """Register a function that adds subparsers (called with the subparsers action)."""
    if add_parsers not in _EXTENSIONS:
        _EXTENSIONS.append(add_parsers)


def handler(name: str) -> Handler:
    """The handler registered for subcommand ``name``."""
    return _COMMANDS[name]


def extensions() -> list[AddParsers]:
    """The registered subparser builders, in registration order."""
    return list(_EXTENSIONS)


def tcp_port(value: str) -> int:
    """A TCP port, 1-65535 (argparse turns the ValueError into a one-line usage error)."""
    port = int(value)
    if not 1 <= port <= 65535:
        raise ValueError(value)
    return port


def repeated_header(headers: Iterable[tuple[bytes, bytes]], once: AbstractSet[str]) -> str | None:
    """The first header of ``once`` (lower-case names) that ASGI ``headers`` send more than
    once, or ``None``. The servers (``memorybank mcp``, the web app) refuse such a request: a
    check that reads one copy and a framework that reads the other would disagree."""
    seen: set[str] = set()
    for key, _value in headers:
        name = key.decode("latin-1").lower()
        if name in once:
            if name in seen:
                return name
            seen.add(name)
    return None


def open_bank(args: argparse.Namespace, *, create: bool = False) -> MemoryBank:
    """The bank the common options name: ``--store`` (a directory or URL), ``--config`` (YAML;
    flags override it), ``--language``, ``--encoder`` and the forgetting flags ``--mode``,
    ``--policy`` and ``--tau`` where a command has them (``--forgetting off`` turns it off).
    ``create`` makes a missing store."""
    from memory_bank.bank import MemoryBank
    from memory_bank.config import load_config
    from memory_bank.forgetting import MODES
    from memory_bank.stores import open_storage

    overrides: dict[str, Any] = {
        "store": args.store,
        "language": getattr(args, "language", None),
        "encoder": getattr(args, "encoder", None),
    }
    forget: dict[str, Any] = {}
    if getattr(args, "forgetting", None) in MODES:
        forget["mode"] = args.forgetting
    if getattr(args, "mode", None) and getattr(args, "command", None) != "memories":
        forget["mode"] = args.mode
    if getattr(args, "policy", None):
        forget["policy"] = args.policy
    if getattr(args, "tau", None) is not None:
        forget["tau"] = args.tau
    if forget:
        overrides["forgetting"] = forget
    cfg = load_config(getattr(args, "config", None), **overrides)
    clock = _clock(getattr(args, "now", None))  # (a bad date is refused before a store is made)
    return MemoryBank(cfg, storage=open_storage(cfg.store, create=create), clock=clock)


def _clock(now: str | None) -> Callable[[], dt.datetime] | None:
    """The bank's clock for ``--now DAY``: that day at the time it is now, so every command
    takes it as today (a turn added without ``--at`` is dated that day, the day's forgetting
    pass is that day's); ``None`` without it."""
    if not now:
        return None
    from memory_bank.text import parse_day

    day = dt.date.fromisoformat(parse_day(now, "--now"))
    return lambda: dt.datetime.combine(day, dt.datetime.now().time())


def dump_json(obj: Any) -> None:
    """Write ``obj`` as one JSON line on stdout (non-ASCII text kept as it is)."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")


def progress(total: int, desc: str, unit: str = "memory") -> tqdm[Any]:
    """A progress bar on stderr (hidden when stderr is not a terminal)."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, disable=None, file=sys.stderr)
