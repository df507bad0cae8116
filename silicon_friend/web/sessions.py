"""Browser sessions of the web app, kept on the server and keyed by login *and* session hash.

Gradio identifies a browser tab by a ``session_hash`` the client sends with every event (it
travels in URLs and logs). State looked up by that hash alone would let anyone who learns it act
on the tab: with login on, signed in as bob with alice's hash, bob could delete alice's memory.
Here the key is ``(signed-in user, session hash)``, so another login with the same hash gets a
session of its own, empty; :class:`~silicon_friend.web.guard.RequestGuard` refuses such requests
even before they get here.

Each :class:`WebSession` also orders the messages of its tab: a message sent while a reply is
still streaming (or being stored) waits its turn, visibly, and is answered after it; none is
dropped. A reply is made on a thread of its own (:meth:`WebSession.start_reply`), not on the
request that asked for it: a reload or a closed tab ends the request, never the reply, so a
started reply is finished and stored and a message waiting in line is still answered. A tab
closed with work in its line stays known (an *orphan*) until the work is done; the same user's
next page (a reload) takes it over (:meth:`SessionRegistry.adopt`) and shows the reply going on.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from memory_bank.errors import MemoryBankError
from silicon_friend.engine import Session
from silicon_friend.errors import SessionEndedError

logger = logging.getLogger(__name__)

#: A message sent again from the same tab within this many seconds is a double click, one message.
REPEAT_SECONDS = 1.5
#: Messages one tab may have waiting for a reply; one more is refused (each waits on a thread).
MAX_WAITING = 16


class LineFullError(Exception):
    """A tab already has :data:`MAX_WAITING` messages waiting for a reply."""


@dataclasses.dataclass
class ReplyJob:
    """One reply being made on its own thread: ``done`` once it is finished (and stored, unless
    refused). ``ended``: "Forget me" came first; ``refused``: the store or the prompt refused the
    message before anything was stored (the reason)."""

    done: threading.Event = dataclasses.field(default_factory=threading.Event)
    ended: bool = False
    refused: str | None = None


@dataclasses.dataclass
class WebSession:
    """One browser tab: its conversation (``session``, ``None`` until a name is given), the
    messages waiting for a reply, in order, and the tab's language and temporary-chat switch."""

    session: Session | None = None
    waiting: list[tuple[int, str]] = dataclasses.field(default_factory=list)
    language: str | None = None  # the tab's UI language (None: the app's)
    temporary: bool = False  # temporary chat switched on in this tab
    #: (user, state version, language) of the background-summary state this tab shows
    summary_seen: tuple[str, int, str] | None = None
    #: The last message sent from this tab and when (``time.monotonic``), see :meth:`repeated`.
    _last_sent: tuple[str, float] | None = None
    _next: int = 0
    _serving: int = 0
    _changes: int = 0  # bumped whenever a reply of this tab moves on (see wait_change)
    #: The message whose reply is being prepared, its conversation, and that conversation's
    #: length until the reply's turn joins it (see :meth:`preparing`).
    _preparing: tuple[str, Session, int] | None = None
    _cond: threading.Condition = dataclasses.field(default_factory=threading.Condition, repr=False)

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
        ticket for :meth:`turn`. Raises :class:`LineFullError` when :data:`MAX_WAITING`
        messages already wait."""
        with self._cond:
            if self._next - self._serving >= MAX_WAITING:
                raise LineFullError(f"{MAX_WAITING} messages are already waiting for a reply")
            ticket = self._next
            self._next += 1
            if shown:
                self.waiting.append((ticket, message))
            return ticket

    def start_reply(
        self,
        ticket: int,
        start: Callable[[], Iterable[Any]],
        slots: threading.Semaphore | None = None,
        done: Callable[[], None] | None = None,
        shown: tuple[str, Session, int] | None = None,
    ) -> ReplyJob:
        """Make the reply of ``ticket`` on a thread of its own, once every message before it is
        answered: ``start()`` gives the reply's pieces, each of which wakes :meth:`wait_change`.
        ``slots`` bounds the replies made at once across tabs; ``done`` runs after the reply
        (even a refused one), on its thread. ``shown``: the message, its conversation and how
        many turns that conversation loses first (1 for a regenerate): until the reply's turn
        joins the conversation, :meth:`preparing` gives the message. Whatever happens to the
        request that asked for it, the reply is finished and stored."""
        job = ReplyJob()

        def work() -> None:
            try:
                with self.turn(ticket, shown):
                    if slots is not None:
                        slots.acquire()
                    try:
                        for _ in start():
                            self.changed()
                    except SessionEndedError:  # "Forget me" came first: nothing is stored
                        job.ended = True
                    except MemoryBankError as e:  # refused before anything was stored
                        job.refused = str(e)
                    except Exception:  # a bug: the chat goes on, the log has the trace
                        logger.exception("a reply failed")
                    finally:
                        if slots is not None:
                            slots.release()
                if done is not None:
                    done()
            finally:
                job.done.set()
                self.changed()

        threading.Thread(target=work, name="silicon-friend-reply", daemon=True).start()
        return job

    def changed(self) -> None:
        """Wake everyone following this tab's replies (:meth:`wait_change`)."""
        with self._cond:
            self._changes += 1
            self._cond.notify_all()

    def wait_change(self, seen: int, timeout: float) -> int:
        """Wait until a reply of this tab moved on since ``seen`` (a value this returned before;
        -1 the first time), at most ``timeout`` seconds; returns the new value."""
        with self._cond:
            self._cond.wait_for(lambda: self._changes != seen, timeout)
            return self._changes

    @contextmanager
    def turn(self, ticket: int, shown: tuple[str, Session, int] | None = None) -> Iterator[None]:
        """Wait until every message sent before ``ticket`` is answered; the block answers it
        (``shown``: see :meth:`start_reply`)."""
        with self._cond:
            self._cond.wait_for(lambda: self._serving == ticket)
            self.waiting = [(t, m) for t, m in self.waiting if t != ticket]
            if shown is not None:
                message, session, lost = shown
                self._preparing = (message, session, len(session.turns) - lost)
        try:
            yield
        finally:
            with self._cond:
                self._serving += 1
                self._preparing = None
                self._cond.notify_all()

    def preparing(self, session: Session | None) -> str | None:
        """The message whose reply is being prepared in ``session`` (its memories searched, the
        model asked) while its turn is not yet in the conversation: shown meanwhile, so that a
        message never leaves the screen between "queued" and its reply."""
        with self._cond:
            if self._preparing is None or self._preparing[1] is not session:
                return None
            message, _, length = self._preparing
            return message if len(session.turns) == length else None

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
        #: Closed tabs whose replies are still being made, with their login.
        self._orphans: list[tuple[str | None, WebSession]] = []
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
        """The tab was closed. Its replies go on; while they do, the same user's next page may
        take the tab over (:meth:`adopt`)."""
        key = self.key(request)
        with self._lock:
            item = self._items.pop(key, None)
            self._orphans = [(login, w) for login, w in self._orphans if w.busy()]
            if item is not None and item.busy():
                self._orphans.append((key[0], item))

    def adopt(self, request: Any, user: str) -> WebSession | None:
        """The closed tab of ``user`` (and the same login) whose replies are still being made,
        now the tab of ``request`` (a reload): its conversation and its line, in the new page's
        language. ``None`` when there is none. A temporary chat is not taken over: the new page
        starts as a normal chat, and the old tab's messages must stay unstored."""
        key = self.key(request)
        with self._lock:
            self._orphans = [(login, w) for login, w in self._orphans if w.busy()]
            page = self._items.get(key)
            if page is not None and page.temporary:  # the new page chats without memory
                return None
            for i, (login, item) in enumerate(self._orphans):
                session = item.session
                if item.temporary or login != key[0] or session is None:
                    continue
                if session.user.strip() == user.strip():
                    del self._orphans[i]
                    item.language = page.language if page is not None else None
                    item.summary_seen = None
                    self._items[key] = item
                    self._items.move_to_end(key)
                    return item
        return None

    def of_user(self, user: str) -> list[WebSession]:
        """Every tab whose conversation is ``user``'s, closed ones still replying included (an
        edit, a deletion or "Forget me" must reach their replies too)."""
        with self._lock:
            items = list(self._items.values()) + [w for _, w in self._orphans if w.busy()]
        return [w for w in items if w.session is not None and w.session.user.strip() == user.strip()]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
