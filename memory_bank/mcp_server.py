"""MemoryBank as an MCP server, for desktop and IDE agents (the official ``mcp`` Python SDK).

``memorybank mcp --store DIR --user U`` speaks MCP over stdio; ``--transport http --port N``
serves streamable HTTP on 127.0.0.1 only, with a bearer token per user and the SDK's Host/Origin
checks against DNS rebinding. The tools act on one user: the one fixed by the server (stdio) or
the one the client's token belongs to (HTTP); no tool takes a user argument, so the model can
never choose whose memories it reads.

Tools: ``search_memories``, ``save_memory`` (a dialog turn or a note), ``list_memories``,
``delete_memory`` and ``get_profile`` (the global portrait and event summary).

Importing this module imports no ``mcp``; :func:`build_server` does.
"""

# No "from __future__ import annotations": the SDK reads the tools' annotations (ctx: Context)
# at registration, so they must be real objects, not strings naming a local import.

import collections
import functools
import hashlib
import hmac
import json
import logging
import re
import secrets
from collections.abc import Callable, Mapping, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_bank.bank import MemoryBank
from memory_bank.cli_support import repeated_header
from memory_bank.errors import InvalidInputError, MemoryBankError
from memory_bank.records import RETRIEVABLE_KINDS, Memory
from memory_bank.text import parse_day, validate_user

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from memory_bank.summaries.scheduler import RolloverScheduler

logger = logging.getLogger(__name__)

#: Loopback only: an MCP server over someone's memories is never reachable from the network.
HOST = "127.0.0.1"
#: Sessions whose opening token is remembered (the oldest forgotten first).
MAX_SESSIONS = 65_536
#: Of those, sessions one token may hold: its own oldest are forgotten first, so a client that
#: opens sessions in a loop cannot push another client's out.
MAX_SESSIONS_PER_TOKEN = 1_024
#: Headers a request may send once only: the checks here and the SDK behind them must read the
#: same value (the SDK reads the first, a dict of them the last).
SINGLE_HEADERS = frozenset({"authorization", "mcp-session-id", "host", "origin", "content-type"})


def _require_mcp() -> None:
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError as e:
        raise InvalidInputError(
            f"the MCP server needs the mcp package: pip install 'memorybank-siliconfriend[mcp]' ({e})"
        ) from e


def _memory_dict(m: Memory) -> dict[str, Any]:
    return {"memory_id": m.memory_id, "date": m.date, "kind": m.kind.value, "text": m.text}


def load_tokens(path: str | Path) -> dict[str, str]:
    """``{token: user}`` from a JSON file (one token per client; tokens of 16+ characters)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InvalidInputError(f"cannot read the token file {path}: {e}") from e
    if not isinstance(data, dict) or not data:
        raise InvalidInputError(f'the token file {path} must hold a JSON object {{"<token>": "<user>"}}')
    for token in data:
        if not isinstance(token, str) or len(token) < 16:
            raise InvalidInputError(f"token file {path}: every token needs 16+ characters")
        check_token(token, f"token file {path}")
    return {token: validate_user(user) for token, user in data.items()}


def check_token(token: str, where: str) -> None:
    """Refuse a token an ``Authorization`` header cannot carry as given: one that is not printable
    ASCII, or begins or ends with a space (the header's value is trimmed), would never match."""
    if not (token.isascii() and token.isprintable()) or token != token.strip():
        raise InvalidInputError(
            f"{where}: a token must be printable ASCII, without spaces at its ends (it could never match)"
        )


class Users:
    """Who a call is for: the server's fixed user, or the owner of the request's bearer token."""

    def __init__(self, user: str | None = None, tokens: Mapping[str, str] | None = None) -> None:
        if (user is None) == (not tokens):
            raise InvalidInputError("give the MCP server either one user (stdio) or tokens (HTTP)")
        self.user = validate_user(user) if user is not None else None
        self.tokens = dict(tokens or {})

    def for_token(self, header: str | None) -> str | None:
        """The user of an ``Authorization: Bearer <token>`` header, ``None`` if it names none."""
        scheme, _, credentials = (header or "").partition(" ")
        if scheme.lower() != "bearer":  # the scheme is case-insensitive (RFC 9110, 11.1)
            return None
        given = credentials.strip().encode()
        found = None
        for token, user in self.tokens.items():  # compare with every token, in constant time
            if hmac.compare_digest(given, token.encode()):
                found = user
        return found

    @staticmethod
    def token_key(header: str | None) -> bytes:
        """A digest of the token an ``Authorization`` header presents (to tie a session to it)."""
        return hashlib.sha256((header or "").partition(" ")[2].strip().encode("latin-1")).digest()

    def resolve(self, headers: Mapping[str, str] | None) -> str:
        if self.user is not None:
            return self.user
        user = self.for_token((headers or {}).get("authorization"))
        if user is None:
            raise InvalidInputError("this request carries no valid bearer token")
        return user


def build_server(
    bank: MemoryBank, users: Users, summarizer: "RolloverScheduler | None" = None
) -> "MCPServer":
    """An MCP server with the memory tools of ``users``' user(s) in ``bank``; with a
    ``summarizer`` (:func:`~memory_bank.summaries.background_summaries`), saves and deletions
    keep the day summaries, the portrait and the event summary up to date in the background."""
    _require_mcp()
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    def tool(fn: Callable[..., Any]) -> Callable[..., Any]:
        """Register ``fn``; the bank's errors reach the client as their one-line message."""

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except MemoryBankError as e:
                raise ToolError(str(e)) from e

        return server.tool()(run)

    server = MCPServer(
        name="memorybank",
        instructions=(
            "Long-term memory of the user: search it before answering questions about their life, "
            "save what is worth remembering, delete what they ask you to forget."
        ),
    )

    def user_of(ctx: Context) -> str:
        try:
            headers = ctx.headers
        except ValueError:  # no request (stdio has no headers either)
            headers = None
        return users.resolve(headers)

    @tool
    def search_memories(query: str, ctx: Context, k: int = 5) -> list[dict[str, Any]]:
        """Search the user's memories (earlier conversations, notes, day summaries) for what is
        related to the query; best first, each with its date, id and relevance score."""
        user = user_of(ctx)
        if not bank.has_user(user):
            return []
        hits = bank.search(user, query, k=max(1, min(int(k), 50)), reinforce=True)
        return [{**_memory_dict(h.memory), "score": round(float(h.score), 4)} for h in hits]

    @tool
    def save_memory(text: str, ctx: Context, reply: str = "") -> dict[str, Any]:
        """Save a memory of the user: a note (``text`` only) or a dialog turn (the user's
        message as ``text`` and the assistant's ``reply``). It is dated today."""
        user = user_of(ctx)
        try:
            memory = bank.add_turn(user, text, reply, standalone=not reply)  # a note answers nothing
        except InvalidInputError as e:  # the bank's words are its own (query, response): the tool's
            said = re.sub(r"\b(the )?query\b", "text", str(e), count=1)
            raise InvalidInputError(re.sub(r"\b(the )?response\b", "reply", said, count=1)) from e
        if summarizer is not None:
            summarizer.on_turn(user, memory.date)  # queues the finished days; never raises
        return _memory_dict(memory)

    @tool
    def list_memories(ctx: Context, date: str | None = None, limit: int = 20) -> list[dict[str, Any]]:
        """The user's most recent memories (of one day, YYYY-MM-DD, if given), newest first."""
        user = user_of(ctx)
        if date is not None:
            date = parse_day(date, "date")  # "not a date" is an error, not an empty list
        if not bank.has_user(user):
            return []
        found = [
            m
            for m, _ in bank.memories(user, kinds=RETRIEVABLE_KINDS, include_archived=False)
            if date is None or m.date == date
        ]
        found.sort(key=lambda m: (m.date, m.rowid or 0), reverse=True)
        return [_memory_dict(m) for m in found[: max(1, min(int(limit), 200))]]

    @tool
    def delete_memory(memory_id: str, ctx: Context) -> str:
        """Delete one of the user's memories for good (and the summaries that may quote it)."""
        user = user_of(ctx)
        bank.delete_memory(user, memory_id)
        if summarizer is not None:
            summarizer.submit(user)  # that day's summaries may quote what was deleted
        return f"deleted {memory_id}"

    @tool
    def get_profile(ctx: Context) -> dict[str, str]:
        """What is known about the user as a whole: their portrait (personality, how to respond)
        and the summary of past events."""
        profile = bank.profile(user_of(ctx))
        return {"portrait": profile["global_portrait"], "event_summary": profile["global_summary"]}

    return server


def http_app(server: "MCPServer", users: Users, port: int) -> Any:
    """The streamable-HTTP ASGI app: Host/Origin checks (the SDK's), then a bearer token per
    request (401 without one)."""
    from mcp.server.transport_security import TransportSecuritySettings

    security = TransportSecuritySettings(
        allowed_hosts=[f"{HOST}:{port}", f"localhost:{port}"],
        allowed_origins=[f"http://{HOST}:{port}", f"http://localhost:{port}"],
    )
    inner = server.streamable_http_app(transport_security=security, host=HOST)
    # Each session belongs to the token that opened it: another client's token (another user's,
    # or the same user's other client) cannot end it, read its stream or speak in it.
    owners: collections.OrderedDict[str, bytes] = collections.OrderedDict()
    by_token: dict[bytes, collections.OrderedDict[str, None]] = {}  # each token's, oldest first

    async def refuse(send: Any, status: int, body: bytes, extra: list[tuple[bytes, bytes]]) -> None:
        headers = [(b"content-type", b"application/json"), *extra]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await inner(scope, receive, send)
            return
        repeated = repeated_header(scope.get("headers", []), SINGLE_HEADERS)
        if repeated is not None:
            await refuse(
                send, 400, json.dumps({"error": f"the {repeated} header is sent twice"}).encode(), []
            )
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        authorization = headers.get("authorization")
        if users.for_token(authorization) is None:
            await refuse(
                send, 401, b'{"error": "missing or invalid bearer token"}', [(b"www-authenticate", b"Bearer")]
            )
            return
        key = users.token_key(authorization)
        session = headers.get("mcp-session-id")
        if session is not None:
            owner = owners.get(session)
            # A session this token did not open, or whose opener is no longer known: as an
            # unknown one (nothing told; its own client starts a new session).
            if owner is None or not hmac.compare_digest(owner, key):
                await refuse(send, 404, b'{"error": "no such session"}', [])
                return
            owners.move_to_end(session)  # in use: the last to be forgotten
            by_token.get(key, collections.OrderedDict()).move_to_end(session)
        closing = scope.get("method") == "DELETE" and session is not None

        async def tagged(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                for name, value in message.get("headers", []):
                    if name.lower() == b"mcp-session-id" and session is None:  # opened by this token
                        opened = value.decode("latin-1")
                        owners[opened] = key
                        mine = by_token.setdefault(key, collections.OrderedDict())
                        mine[opened] = None
                        while len(mine) > MAX_SESSIONS_PER_TOKEN:
                            owners.pop(mine.popitem(last=False)[0], None)
                        while len(owners) > MAX_SESSIONS:
                            old, opener = owners.popitem(last=False)
                            by_token.get(opener, collections.OrderedDict()).pop(old, None)
                if closing and 200 <= int(message.get("status", 0)) < 300:
                    owners.pop(session or "", None)  # ended by its owner
                    by_token.get(key, collections.OrderedDict()).pop(session or "", None)
            await send(message)

        await inner(scope, receive, tagged)

    return app


def serve(
    bank: MemoryBank,
    *,
    user: str | None = None,
    transport: str = "stdio",
    port: int = 8765,
    tokens: Mapping[str, str] | None = None,
    summarizer: "RolloverScheduler | None" = None,
) -> None:
    """Run the server until stopped. HTTP with ``user`` and no ``tokens`` makes one token,
    logged once (or taken from the ``MEMORYBANK_MCP_TOKEN`` environment variable). See
    :func:`build_server` for ``summarizer``."""
    import os

    if transport == "stdio":
        if user is None:
            raise InvalidInputError("memorybank mcp over stdio needs --user: the one user it serves")
        build_server(bank, Users(user), summarizer).run("stdio")
        return
    if transport != "http":
        raise InvalidInputError(f"unknown transport {transport!r}; use stdio or http")
    if not tokens:
        if user is None:
            raise InvalidInputError("memorybank mcp over http needs --user or --tokens FILE")
        token = os.environ.get("MEMORYBANK_MCP_TOKEN") or secrets.token_urlsafe(24)
        if len(token) < 16:
            raise InvalidInputError("MEMORYBANK_MCP_TOKEN must have 16+ characters")
        check_token(token, "MEMORYBANK_MCP_TOKEN")
        if "MEMORYBANK_MCP_TOKEN" not in os.environ:
            logger.warning("MCP bearer token for %r: %s", user, token)
        tokens = {token: user}
    users = Users(None, tokens)
    import uvicorn

    logger.info("MCP server on http://%s:%d/mcp for %d client token(s)", HOST, port, len(users.tokens))
    uvicorn.run(
        http_app(build_server(bank, users, summarizer), users, port),
        host=HOST,
        port=port,
        log_level="warning",
    )
