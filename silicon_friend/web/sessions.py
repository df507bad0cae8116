"""Browser sessions of the web app, kept on the server and keyed by login *and* session hash.

Gradio identifies a browser tab by a ``session_hash`` the client sends with every event (it
travels in URLs and logs). State looked up by that hash alone would let anyone who learns it act
on the tab: with login on, signed in as bob with alice's hash, bob could delete alice's memory.
Here the key is ``(signed-in user, session hash)``, so another login with the same hash gets a
session of its own, empty; :class:`~silicon_friend.web.guard.RequestGuard` refuses such requests
even before they get here.

Each :class:`WebSession` also orders the messages of its tab: a message sent while a reply is
still streaming (or being stored) waits its turn, visibly, and is answered after it; none is
dropped.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from silicon_friend.engine import Session

#: A message sent again from the same tab within this many seconds is a double click, one message.
REPEAT_SECONDS = 1.5


@dataclasses.dataclass
class WebSession:
    """One browser tab: its conversation (``session``, ``None`` until a name is given), the
    messages waiting for a reply, in order, and the tab's language and temporary-chat switch."""

    session: Session | None = None
    waiting: list[tuple[int, str]] = dataclasses.field(default_factory=list)
    language: str | None = None  # the tab's UI language (None: the app's)
    temporary: bool = False  # temporary chat switched on in this tab
    closed: bool = False  # the tab was closed: messages still waiting are dropped, unanswered
    #: (user, state version, language) of the background-summary state this tab shows
    summary_seen: tuple[str, int, str] | None = None
    #: The last message sent from this tab and when (``time.monotonic``), see :meth:`repeated`.
    _last_sent: tuple[str, float] | None = None
    _next: int = 0
    _serving: int = 0
    _skipped: set[int] = dataclasses.field(default_factory=set)
    _cond: threading.Condition = dataclasses.field(default_factory=threading.Condition, repr=False)

    def _advance(self) -> None:
        while self._serving in self._skipped:
            self._skipped.discard(self._serving)
            self._serving += 1
        self._cond.notify_all()

    def repeated(self, message: str, within: float | None = None) -> bool:
        """Whether ``message`` is the one this tab sent just before, again, ``within`` seconds
        after it: a double click on Send (the box still holds the text until the first click's
        answer clears it) is one message, not two turns stored and answered."""
        now = time.monotonic()
        within = REPEAT_SECONDS if within is None else within
        with self._cond:
            last, self._last_sent = self._last_sent, (message, now)
            return last is not None and last[0] == message and now - last[1] < within

    def enqueue(self, message: str, *, shown: bool = True) -> int:
        """Put ``message`` in line (shown as queued unless ``shown`` is False); returns its
        ticket for :meth:`turn`."""
        with self._cond:
            ticket = self._next
            self._next += 1
            if shown:
                self.waiting.append((ticket, message))
            return ticket

    def leave(self, ticket: int) -> None:
        """Take a message out of the line without answering it (its reply never started)."""
        with self._cond:
            self.waiting = [(t, m) for t, m in self.waiting if t != ticket]
            if self._serving == ticket:
                return
            # Skipped tickets are answered as "done" when their turn comes.
            self._skipped.add(ticket)
            self._advance()

    @contextmanager
    def turn(self, ticket: int) -> Iterator[None]:
        """Wait until every message sent before ``ticket`` is answered; the block answers it."""
        with self._cond:
            self._cond.wait_for(lambda: self._serving == ticket)
            self.waiting = [(t, m) for t, m in self.waiting if t != ticket]
        try:
            yield
        finally:
            with self._cond:
                self._serving += 1
                self._advance()

    def busy(self) -> bool:
        """Whether a reply is being made or waited for."""
        with self._cond:
            return self._serving < self._next

    def queued(self) -> list[str]:
        with self._cond:
            return [m for _, m in self.waiting]


class SessionRegistry:
    """Every open tab's :class:`WebSession`, by ``(login, session hash)``; bounded (the oldest
    idle tabs are dropped first)."""

    def __init__(self, capacity: int = 5000) -> None:
        self.capacity = capacity
        self._items: collections.OrderedDict[tuple[str | None, str | None], WebSession] = (
            collections.OrderedDict()
        )
        self._lock = threading.Lock()

    @staticmethod
    def key(request: Any) -> tuple[str | None, str | None]:
        username = getattr(request, "username", None)
        session_hash = getattr(request, "session_hash", None)
        return (str(username) if username else None, str(session_hash) if session_hash else None)

    def get(self, request: Any) -> WebSession:
        key = self.key(request)
        with self._lock:
            item = self._items.get(key)
            if item is None:
                item = self._items[key] = WebSession()
                while len(self._items) > self.capacity:
                    oldest = next(iter(self._items))
                    if self._items[oldest].busy():
                        break
                    del self._items[oldest]
            self._items.move_to_end(key)
            return item

    def drop(self, request: Any) -> None:
        """The tab was closed: its messages still waiting will not be answered (``closed``)."""
        with self._lock:
            item = self._items.pop(self.key(request), None)
        if item is not None:
            item.closed = True

    def of_user(self, user: str) -> list[WebSession]:
        """Every tab whose conversation is ``user``'s."""
        with self._lock:
            items = list(self._items.values())
        return [w for w in items if w.session is not None and w.session.user.strip() == user.strip()]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
