"""Browser sessions of the web app, kept on the server and keyed by login *and* session hash.

Gradio identifies a browser tab by a ``session_hash`` the client sends with every event (it
travels in URLs and logs). State looked up by that hash alone would let anyone who learns it act
on the tab: with login on, signed in as bob with alice's hash, bob could delete alice's memory.
Here the key is ``(signed-in user, session hash)``, so another login with the same hash gets a
session of its own, empty; :class:`~silicon_friend.web.guard.RequestGuard` refuses such requests
even before they get here.

Each :class:`WebSession` also orders the messages of its tab: a message sent while a reply is
still streaming (or being stored) waits its turn, visibly, and is answered after it; none is
dropped. A reply is made on a thread of its own (:meth:`WebSession.reply`), not on the
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
from memory_bank.text import same_user
from silicon_friend.engine import Session
from silicon_friend.errors import SessionEndedError

logger = logging.getLogger(__name__)

#: A message sent again from the same tab within this many seconds is a double click, one message
#: (a double click is under half a second; at 1.5 s a quick "ok" sent again was dropped).
REPEAT_SECONDS = 0.6
#: Messages one tab may have waiting for a reply; one more is refused (each waits on a thread).
MAX_WAITING = 16
#: Replies being made or waiting, all tabs together (each holds a thread; a client can open any
#: number of tabs): one more is refused until some are done.
MAX_PENDING = 64


class LineFullError(Exception):
    """A tab already has :data:`MAX_WAITING` messages waiting, or the app :data:`MAX_PENDING`."""


class ReplyPool:
    """What bounds the replies of every tab: ``concurrency`` made at once (the model's work),
    ``pending`` made or waiting (threads)."""

    def __init__(self, concurrency: int, pending: int = MAX_PENDING) -> None:
        self.slots = threading.BoundedSemaphore(max(1, concurrency))
        self.pending = pending
        self._count = 0
        self._lock = threading.Lock()

    def enter(self) -> None:
        """Count one more reply; raises :class:`LineFullError` when ``pending`` are."""
        with self._lock:
            if self._count >= self.pending:
                raise LineFullError(f"{self.pending} replies are already being made or waiting")
            self._count += 1

    def leave(self) -> None:
        with self._lock:
            self._count -= 1


@dataclasses.dataclass
class ReplyJob:
    """One reply being made on its own thread: ``done`` once it is finished (and stored, unless
    refused). ``ended``: "Forget me" came first; ``refused``: the store or the prompt refused the
    message before anything was stored (the reason)."""

    done: threading.Event = dataclasses.field(default_factory=threading.Event)
    ended: bool = False
    refused: str | None = None
    #: This reply's Stop: set from when its turn comes (preparing, waiting for the model) to
    #: its end, never cleared (see :meth:`WebSession.stop_current`).
    cancel: threading.Event = dataclasses.field(default_factory=threading.Event)
    #: Its place in the tab's line (the order its message was sent in).
    ticket: int = 0


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
    #: The conversation whose deletion ("Forget me" in another tab) this tab's page has drawn.
    ended_drawn: Session | None = None
    #: A deleted conversation this tab has already replaced with a fresh one (a message waiting
    #: in its line was refused) before its page drew the deletion.
    ended_replaced: Session | None = None
    #: Another tab changed this tab's conversation (a turn edited or deleted): its page redraws.
    chat_stale: bool = False
    #: The last message sent from this tab and when (``time.monotonic``), see :meth:`repeated`.
    _last_sent: tuple[str, float] | None = None
    #: Messages refused since the last one went into the line (see :meth:`hand_back`).
    _handed_back: list[tuple[int, str]] = dataclasses.field(default_factory=list)
    _next: int = 0
    _serving: int = 0
    _changes: int = 0  # bumped whenever a reply of this tab moves on (see changes)
    #: :meth:`changes` when the page last drew the whole chat (its load, or the end of
    #: following its replies): what it shows.
    loaded_at: int | None = None
    #: The message whose reply is being prepared, its conversation, and that conversation's
    #: length until the reply's turn joins it (see :meth:`preparing`).
    _preparing: tuple[str, Session, int] | None = None
    _current: ReplyJob | None = None  # the reply whose turn it is
    _cond: threading.Condition = dataclasses.field(default_factory=threading.Condition, repr=False)

    def repeated(self, message: str, within: float | None = None) -> bool:
        """Whether ``message`` is the one this tab sent just before, again, ``within`` seconds
        after it: a double click on Send that got the text twice (before the page emptied the
        box, or from a client posting twice) is one message, not two turns stored and answered."""
        now = time.monotonic()
        within = REPEAT_SECONDS if within is None else within
        with self._cond:
            last = self._last_sent
            if last is not None and last[0] == message and now - last[1] < within:
                return True  # the window is the sent one's: a third click later is a message again
            self._last_sent = (message, now)
            return False

    def refused(self, message: str) -> None:
        """``message`` was not sent after all (the line was full): sending it again at once is
        not a double click."""
        with self._cond:
            if self._last_sent is not None and self._last_sent[0] == message:
                self._last_sent = None

    def hand_back(self, message: str, ticket: int = 0) -> str:
        """What goes back into the box for a refused ``message`` (sent ``ticket``-th): it, with the
        messages refused just before it, in the order they were sent (two waiting messages
        refused at once each set the box: the first was lost)."""
        with self._cond:
            self._handed_back.append((ticket, message))
            return "\n\n".join(text for _, text in sorted(self._handed_back))

    def enqueue(self, message: str, *, shown: bool = True) -> int:
        """Put ``message`` in line (shown as queued unless ``shown`` is False); returns its
        ticket for :meth:`turn`. Raises :class:`LineFullError` when :data:`MAX_WAITING`
        messages already wait."""
        with self._cond:
            if self._next - self._serving >= MAX_WAITING:
                raise LineFullError(f"{MAX_WAITING} messages are already waiting for a reply")
            ticket = self._next
            self._next += 1
            self._handed_back.clear()
            if shown:
                self.waiting.append((ticket, message))
            return ticket

    def reply(
        self,
        message: str,
        start: Callable[[threading.Event], Iterable[Any]],
        pool: ReplyPool,
        *,
        shown: bool = True,
        conversation: tuple[Session, int] | None = None,
        done: Callable[[], None] | None = None,
    ) -> ReplyJob:
        """Put ``message`` in line (shown as queued unless ``shown`` is False) and make its reply
        on a thread of its own once every message before it is answered: ``start(cancel)``
        gives the reply's pieces, each of which moves :meth:`changes` on (``cancel``: its
        Stop). ``pool`` bounds the replies of all tabs; ``done`` runs after the reply (even a
        refused one), on its thread.
        ``conversation``: the session the reply joins and how many turns it loses first (1 for
        a regenerate): until the reply's turn is in it, :meth:`preparing` gives the message.
        Whatever happens to the request that asked for it, the reply is finished and stored.
        Raises :class:`LineFullError` when the tab's line or the pool is full."""
        pool.enter()
        try:
            ticket = self.enqueue(message, shown=shown)
        except LineFullError:
            pool.leave()
            raise
        job = ReplyJob(ticket=ticket)
        preparing = (message, *conversation) if conversation is not None else None

        def work() -> None:
            try:
                with self.turn(ticket, preparing, job), pool.slots:
                    try:
                        for _ in start(job.cancel):
                            self.changed()
                    except SessionEndedError:  # "Forget me" came first: nothing is stored
                        job.ended = True
                    except MemoryBankError as e:  # refused before anything was stored
                        job.refused = str(e)
                    except Exception:  # a bug: the chat goes on, the log has the trace
                        logger.exception("a reply failed")
                if done is not None:
                    done()
            finally:
                pool.leave()
                job.done.set()
                self.changed()

        threading.Thread(target=work, name="silicon-friend-reply", daemon=True).start()
        return job

    def changed(self) -> None:
        """A reply of this tab moved on (:meth:`changes`)."""
        with self._cond:
            self._changes += 1

    def changes(self) -> int:
        """A counter that moves whenever a reply of this tab moves on (a page following the
        replies redraws when it changed)."""
        with self._cond:
            return self._changes

    @contextmanager
    def turn(
        self, ticket: int, shown: tuple[str, Session, int] | None = None, job: ReplyJob | None = None
    ) -> Iterator[None]:
        """Wait until every message sent before ``ticket`` is answered; the block answers it
        (``shown``: see :meth:`reply`; ``job``: the reply :meth:`stop_current` stops meanwhile)."""
        with self._cond:
            self._cond.wait_for(lambda: self._serving == ticket)
            self.waiting = [(t, m) for t, m in self.waiting if t != ticket]
            if shown is not None:
                message, session, lost = shown
                self._preparing = (message, session, len(session.turns) - lost)
            self._current = job
        try:
            yield
        finally:
            with self._cond:
                self._serving += 1
                self._preparing = None
                self._current = None
                self._cond.notify_all()

    def stop_current(self) -> None:
        """Stop the reply whose turn it is, whether it is being prepared, waiting for the model
        or streaming (the messages after it are answered)."""
        with self._cond:
            if self._current is not None:
                self._current.cancel.set()

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
        #: Closed tabs (the newest), kept as they were: Gradio ends a page whose heartbeat
        #: dropped (a network blip, a laptop asleep) while the page stays open and goes on
        #: sending events, and a closed page's load can come after its unload (two quick
        #: reloads). Those events get the tab back: its conversation, its temporary-chat switch
        #: (a fresh tab would store a temporary chat's messages) and what its page shows. A tab
        #: closed while replying is also the user's next page's to take over (:meth:`adopt`).
        self._closed: collections.OrderedDict[tuple[str | None, str | None], WebSession] = (
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
            closed = self._closed.get(key)
            if closed is not None:
                self._closed.move_to_end(key)
                return closed
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
            if item is not None and item.busy():  # the user's next page may take it over; this
                self._orphans.append((key[0], item))  # page may also come back (its heartbeat dropped)
            self._closed[key] = item or self._closed.get(key) or WebSession()
            self._closed.move_to_end(key)
            while len(self._closed) > self.capacity:
                self._closed.popitem(last=False)

    def is_closed(self, request: Any) -> bool:
        """Whether the page of ``request`` was closed (its load may come after its unload)."""
        with self._lock:
            return self.key(request) in self._closed

    def adopt(self, request: Any, user: str) -> WebSession | None:
        """The closed tab of ``user`` (and the same login) whose replies are still being made,
        now the tab of ``request`` (a reload): its conversation and its line, in the new page's
        language. ``None`` when there is none. A temporary chat is not taken over: the new page
        starts as a normal chat, and the old tab's messages must stay unstored."""
        key = self.key(request)
        with self._lock:
            self._orphans = [(login, w) for login, w in self._orphans if w.busy()]
            page = self._items.get(key)
            if key in self._closed or (page is not None and page.temporary):  # a closed page, or
                return None  # one that chats without memory
            for i, (login, item) in enumerate(self._orphans):
                session = item.session
                if item.temporary or login != key[0] or session is None:
                    continue
                if same_user(session.user, user):
                    del self._orphans[i]
                    item.language = page.language if page is not None else None
                    item.summary_seen = None
                    self._items[key] = item
                    self._items.move_to_end(key)
                    return item
        return None

    def closed_with_unsaved(self, request: Any, user: str) -> list[Session]:
        """The conversations of ``user``'s closed pages (same login, no reply being made) that
        hold turns the store could not take: a reload of the page takes them over."""
        key = self.key(request)
        with self._lock:
            tabs = [w for k, w in self._closed.items() if k[0] == key[0] and k != key]
        return [
            w.session
            for w in tabs
            if w.session is not None
            and not w.busy()
            and same_user(w.session.user, user)
            and any(t.unsaved for t in w.session.turns)
        ]

    def busy(self) -> list[WebSession]:
        """Every tab with a reply being made or waiting, closed ones included."""
        return [w for w in self.every() if w.busy()]

    def every(self) -> list[WebSession]:
        """Every tab, closed ones included (each once: a tab closed mid-reply is both an orphan
        and a closed page)."""
        with self._lock:
            items = [*self._items.values(), *(w for _, w in self._orphans), *self._closed.values()]
        return list({id(w): w for w in items}.values())

    def of_user(self, user: str) -> list[WebSession]:
        """Every tab whose conversation is ``user``'s, closed ones included (an edit, a deletion
        or "Forget me" must reach their replies, and the pages that may come back, too)."""
        return [w for w in self.every() if w.session is not None and same_user(w.session.user, user)]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
