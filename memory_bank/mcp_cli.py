"""``memorybank mcp``: serve one store's memories to MCP clients (see :mod:`memory_bank.mcp_server`).

Registered as a CLI extension (see :func:`memory_bank.cli_support.register_extension`).
"""

from __future__ import annotations

import argparse
from typing import Any

from memory_bank.cli_support import command, open_bank, register_extension, tcp_port


def _add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "mcp",
        help="serve a user's memories to MCP clients (stdio, or streamable HTTP on 127.0.0.1)",
        description=(
            "Speak MCP over stdio for one --user, or with --transport http serve streamable HTTP on "
            "127.0.0.1:PORT/mcp, where each client sends 'Authorization: Bearer <token>' and the "
            'token decides the user (--tokens FILE holds {"<token>": "<user>"}; with --user alone '
            "one token is made and logged, or read from MEMORYBANK_MCP_TOKEN)."
        ),
    )
    p.add_argument("--store", required=True, help="memory store directory or database URL")
    p.add_argument("--config", help="YAML/JSON config file")
    p.add_argument("--user", help="the one user served (required for stdio)")
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    p.add_argument("--port", type=tcp_port, default=8765, help="HTTP port on 127.0.0.1 (default 8765)")
    p.add_argument("--tokens", metavar="FILE", help="HTTP: JSON file mapping bearer tokens to users")
    p.add_argument("--language", choices=["en", "zh"], default=None)
    p.add_argument("--encoder", default=None, help="encoder name (default: the config's)")
    p.add_argument(
        "--llm",
        metavar="SPEC",
        help=(
            "write the day summaries, the portrait and the event summary in the background with this "
            "LLM (e.g. llamacpp:/m.gguf, openai:gpt-4o-mini; default: the config's summaries.llm if "
            "set, else no summaries)"
        ),
    )
    p.add_argument("-v", "--verbose", action="store_true")


register_extension(_add_parsers)


@command("mcp")
def _mcp(args: argparse.Namespace) -> int:
    from memory_bank.mcp_server import load_tokens, serve

    tokens = load_tokens(args.tokens) if args.tokens else None
    with open_bank(args, create=True) as bank:
        scheduler = _scheduler(bank, args.llm)
        try:
            serve(
                bank,
                user=args.user,
                transport=args.transport,
                port=args.port,
                tokens=tokens,
                summarizer=scheduler,
            )
        finally:
            if scheduler is not None:
                scheduler.close(wait=False)
    return 0


def _scheduler(bank: Any, llm: str | None) -> Any:
    """The background summaries for ``--llm`` (or the config's ``summaries.llm``), else ``None``."""
    from memory_bank.summaries.config import load_summary_config

    if llm is None and bank.config.summaries.llm is None:
        return None
    from memory_bank.summaries.scheduler import RolloverScheduler
    from memory_bank.summaries.summarizer import summarizer_from_config

    config = load_summary_config(None, base=bank.config.summaries, llm=llm)
    return RolloverScheduler(summarizer_from_config(bank, config))
