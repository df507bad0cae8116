"""The web app's front door (ASGI middleware): which names, pages and logins may use the server.

* **Host** (DNS rebinding): a web page the user visits can point a DNS name of its own at
  127.0.0.1 and then talk to the app as a "same-origin" page. Every request must therefore name
  the server by an allowed host: the loopback names when bound to loopback, the bound address
  otherwise, plus the ``--allowed-host`` list. IP literals are allowed on a non-loopback bind
  (a rebinding attack needs a DNS name).
* **Origin** (cross-site requests): a request that changes state (any method but GET, HEAD and
  OPTIONS, and websockets) sent by a browser must come from a page of this very server: its
  ``Origin`` must name the same host and port as its ``Host``. Requests without ``Origin`` come
  from non-browser clients, which no web page can drive.
* **Session hashes**: Gradio keys a browser session's state and its event stream by a
  ``session_hash`` the client chooses. With login on, a hash belongs to the login that first used
  it; another login presenting it is refused, so a hash copied from a URL or a log gives nothing.
* **Headers**: a strict Content-Security-Policy (no image, script, style, font, frame or
  connection from anywhere but this server, so text from the model or a user can never make the
  browser fetch a remote resource), no framing, no referrer, no MIME sniffing, no caching of
  API answers.
"""

from __future__ import annotations

import collections
import dataclasses
import ipaddress
import json
import logging
import threading
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

from starlette.requests import cookie_parser

from memory_bank.cli_support import repeated_header

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: Largest JSON body read to find its session hash (Gradio's event payloads are small).
MAX_INSPECTED_BODY = 8 * 1024 * 1024

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self' 'unsafe-inline' 'unsafe-eval'",  # Gradio's page bootstraps inline
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data: blob:",
        "media-src 'self' data: blob:",
        "font-src 'self' data:",
        "connect-src 'self'",
        "frame-src 'none'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
SECURITY_HEADERS = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
)


def host_name(value: str) -> str:
    """The host part of a ``Host`` header or netloc, lower-cased: ``[::1]:7860`` -> ``::1``."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    if value.count(":") == 1:
        return value.split(":", 1)[0]
    return value


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


@dataclasses.dataclass(frozen=True)
class HostPolicy:
    """Which ``Host`` names the server answers to."""

    names: frozenset[str]
    any_ip: bool = False
    suffixes: tuple[str, ...] = ()

    def allows(self, host: str) -> bool:
        name = host_name(host)
        if not name:
            return False
        return (
            name in self.names
            or (self.any_ip and _is_ip(name))
            or any(name.endswith(s) for s in self.suffixes)
        )


def host_policy(bind: str, allowed: Iterable[str] = (), *, share: bool = False) -> HostPolicy:
    """The policy of a server bound to ``bind``: loopback names, the bound address (any IP
    literal when bound to every interface), the ``allowed`` names, and Gradio's share domain
    when ``share`` is on."""
    names = set(LOOPBACK_NAMES) | {host_name(a) for a in allowed if a.strip()}
    bound = host_name(bind)
    wildcard = bound in ("0.0.0.0", "::", "")
    if not wildcard:
        names.add(bound)
    return HostPolicy(frozenset(names), any_ip=wildcard, suffixes=(".gradio.live",) if share else ())


#: Headers a request may carry once only: the checks here and the server behind them must read
#: the same value (a browser never repeats them).
SINGLE_HEADERS = frozenset({"host", "cookie", "origin", "content-type", "sec-fetch-site"})


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers by lower-case name; a repeated one keeps its first value, as
    Starlette's ``headers.get`` (and so Gradio) reads it."""
    out: dict[str, str] = {}
    for key, value in scope.get("headers") or ():
        out.setdefault(key.decode("latin-1").lower(), value.decode("latin-1"))
    return out


def login_of(scope: Scope, headers: dict[str, str]) -> str | None:
    """The user signed in to Gradio on this request (its session cookie), or ``None``. The
    cookie is read exactly as Gradio reads it (Starlette's lenient parser): a stricter reading
    that found no login where Gradio finds one would let a request past the session check."""
    app = scope.get("app")
    tokens = getattr(app, "tokens", None)
    cookie_id = getattr(app, "cookie_id", None)
    if not isinstance(tokens, dict) or not cookie_id or "cookie" not in headers:
        return None
    jar = cookie_parser(headers["cookie"])
    token = jar.get(f"access-token-{cookie_id}") or jar.get(f"access-token-unsecure-{cookie_id}")
    user = tokens.get(token) if token else None
    return None if user is None else str(user)


def session_hashes(scope: Scope, body: bytes) -> set[str]:
    """Every Gradio session hash a request names: in its query, its path or its JSON body."""
    found = set(parse_qs(scope.get("query_string", b"").decode("latin-1")).get("session_hash", []))
    parts = str(scope.get("path", "")).split("/")
    if "heartbeat" in parts and parts.index("heartbeat") + 1 < len(parts):
        found.add(parts[parts.index("heartbeat") + 1])
    if body:
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("session_hash"), str):
            found.add(data["session_hash"])
    return {h for h in found if h}


class SessionOwners:
    """Which login first used each session hash (bounded: the oldest are forgotten first)."""

    def __init__(self, capacity: int = 100_000) -> None:
        self.capacity = capacity
        self._owners: collections.OrderedDict[str, str] = collections.OrderedDict()
        self._lock = threading.Lock()

    def claim(self, session_hash: str, login: str) -> bool:
        """True if ``login`` may use ``session_hash`` (it does from now on, if no one did)."""
        with self._lock:
            owner = self._owners.get(session_hash)
            if owner is None:
                self._owners[session_hash] = login
                if len(self._owners) > self.capacity:
                    self._owners.popitem(last=False)
                return True
            self._owners.move_to_end(session_hash)
            return owner == login


class RequestGuard:
    """ASGI middleware applying the module's checks; refuses with 403 and one line of text."""

    def __init__(self, app: ASGIApp, policy: HostPolicy, owners: SessionOwners | None = None) -> None:
        self.app = app
        self.policy = policy
        self.owners = owners or SessionOwners()
        self._reported: set[str] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        problem = self._check(scope, headers)
        if problem is None and scope["type"] == "http" and self._owned(scope, headers):
            read, more = await _read_body(receive, headers)
            if read is None:  # too large to look inside: it could name any session
                problem = f"the request body is over {MAX_INSPECTED_BODY // 2**20} MB"
            else:
                problem = self._check_session(scope, headers, read)
            receive = _replay(receive, more)
        if problem is not None:
            await self._refuse(scope, receive, send, problem)
            return
        if scope["type"] == "websocket":
            await self.app(scope, receive, send)
            return
        api = str(scope.get("path", "")).startswith(("/gradio_api", "/sf-export"))

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                extra = list(SECURITY_HEADERS)
                if api:
                    extra.append((b"cache-control", b"no-store"))
                message["headers"] = [
                    (k, v) for k, v in message.get("headers", []) if k.lower() not in dict(extra)
                ] + extra
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _check(self, scope: Scope, headers: dict[str, str]) -> str | None:
        repeated = repeated_header(scope.get("headers") or (), SINGLE_HEADERS)
        if repeated is not None:
            return f"the request sends its {repeated} header more than once"
        host = headers.get("host", "")
        if not self.policy.allows(host):
            return f"Host {host_name(host)!r} is not allowed; start the server with --allowed-host NAME to allow a name"
        method = str(scope.get("method", "GET")).upper()
        if scope["type"] == "websocket" or method not in SAFE_METHODS:
            origin = headers.get("origin")
            if origin is not None:
                netloc = urlsplit(origin).netloc.lower() if origin != "null" else ""
                if netloc != host.strip().lower():
                    return f"cross-origin request from {origin[:80]!r} refused"
            if headers.get("sec-fetch-site") == "cross-site":
                return "cross-site request refused"
        return None

    def _owned(self, scope: Scope, headers: dict[str, str]) -> bool:
        app = scope.get("app")
        return getattr(app, "auth", None) is not None and str(scope.get("path", "")).startswith("/gradio_api")

    def _check_session(self, scope: Scope, headers: dict[str, str], body: bytes) -> str | None:
        hashes = session_hashes(scope, body)
        if not hashes:
            return None
        login = login_of(scope, headers)
        if login is None:  # with login on, naming a session takes a login (fail closed)
            return "sign in first; this request names a session but carries no login"
        for h in hashes:
            if not self.owners.claim(h, login):
                return "this session belongs to another signed-in user; reload the page"
        return None

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, problem: str) -> None:
        key = problem.split(";")[0]
        if key not in self._reported:
            self._reported.add(key)
            logger.warning("refused a request: %s", problem)
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        text = f"SiliconFriend refused this request: {problem}\n".encode()
        await send(
            {
                "type": "http.response.start",
                "status": 403,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(text)).encode()),
                    *SECURITY_HEADERS,
                ],
            }
        )
        await send({"type": "http.response.body", "body": text})


async def _read_body(receive: Receive, headers: dict[str, str]) -> tuple[bytes | None, list[Message]]:
    """The body the server may read as JSON (up to :data:`MAX_INSPECTED_BODY`; ``None`` past it)
    and the messages read to get it. Every body but a multipart upload is read: FastAPI reads a
    body without a content type as JSON too, and content types case-insensitively."""
    if headers.get("content-type", "").strip().lower().startswith("multipart/"):
        return b"", []
    chunks: list[bytes] = []
    messages: list[Message] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body") or size > MAX_INSPECTED_BODY:
            break
    return b"".join(chunks) if size <= MAX_INSPECTED_BODY else None, messages


def _replay(receive: Receive, messages: list[Message]) -> Receive:
    """A ``receive`` that hands out the messages already read, then the rest of the stream."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
