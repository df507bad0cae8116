"""Memory exports served to their owner only, from memory, for a few minutes.

An export is never written to disk (no temporary file, nothing in Gradio's file cache): its bytes
are kept here under a random token until it expires, is replaced, or its user is forgotten.
``GET /sf-export/<token>`` (an ASGI middleware in front of Gradio) returns it as an attachment
only while it lives and, with login on, only to the login that made it; anything else is 404.
"""

from __future__ import annotations

import dataclasses
import secrets
import threading
import time
from collections.abc import Callable
from urllib.parse import quote

from memory_bank.text import same_user
from silicon_friend.web.guard import ASGIApp, Receive, Scope, Send, _headers, login_of

PREFIX = "/sf-export/"
#: How long an export link works (seconds).
EXPORT_TTL_S = 600.0


@dataclasses.dataclass(frozen=True)
class Download:
    user: str
    login: str | None
    filename: str
    data: bytes
    expires: float


class DownloadStore:
    """Exports waiting to be downloaded, by token."""

    def __init__(self, ttl_s: float = EXPORT_TTL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.clock = clock
        self._items: dict[str, Download] = {}
        self._lock = threading.Lock()

    def add(self, user: str, login: str | None, filename: str, data: bytes) -> str:
        """Keep an export of ``user`` (made by ``login``); returns its link, relative to the app."""
        token = secrets.token_urlsafe(32)
        with self._lock:
            self._purge()
            # One live export per user and login: a new one replaces the old.
            for t in [t for t, d in self._items.items() if d.user == user and d.login == login]:
                del self._items[t]
            self._items[token] = Download(user, login, filename, data, self.clock() + self.ttl_s)
        return PREFIX.lstrip("/") + token

    def get(self, token: str, login: str | None) -> Download | None:
        """The live export behind ``token`` if ``login`` may have it."""
        with self._lock:
            self._purge()
            item = self._items.get(token)
        if item is None or (item.login is not None and item.login != login):
            return None
        return item

    def drop_user(self, user: str) -> int:
        """Forget every export of ``user`` (their memories were deleted)."""
        with self._lock:
            gone = [t for t, d in self._items.items() if same_user(d.user, user)]
            for t in gone:
                del self._items[t]
        return len(gone)

    def __len__(self) -> int:
        with self._lock:
            self._purge()
            return len(self._items)

    def _purge(self) -> None:
        now = self.clock()
        for t in [t for t, d in self._items.items() if d.expires <= now]:
            del self._items[t]


class DownloadRoute:
    """ASGI middleware answering ``GET /sf-export/<token>`` from a :class:`DownloadStore`."""

    def __init__(self, app: ASGIApp, store: DownloadStore) -> None:
        self.app = app
        self.store = store

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] != "http" or not path.startswith(PREFIX):
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        item = None
        if str(scope.get("method", "")).upper() in ("GET", "HEAD"):
            item = self.store.get(path[len(PREFIX) :], login_of(scope, headers))
        if item is None:
            body = b"This export does not exist, has expired, or is not yours. Export again.\n"
            status, extra = 404, [(b"content-type", b"text/plain; charset=utf-8")]
        else:
            body, status = item.data, 200
            disposition = f"attachment; filename*=UTF-8''{quote(item.filename)}"
            extra = [
                (b"content-type", b"application/json; charset=utf-8"),
                (b"content-disposition", disposition.encode("latin-1")),
            ]
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    *extra,
                    (b"content-length", str(len(body)).encode()),
                    (b"cache-control", b"no-store"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body if scope.get("method") != "HEAD" else b""})
