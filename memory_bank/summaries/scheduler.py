"""Summaries on a schedule: when a user's day is over, summarise it in the background.

The chat calls :meth:`RolloverScheduler.on_turn` after storing each turn. When the turn lands on
a later day than the user's previous one (or is the first this process sees of the user, who
may have chatted on earlier days), the summarisation of the finished days is queued on one
background thread. Chat never waits and never sees an error from here: the worker's LLM calls
run inside :func:`memory_bank.model_lock.background_calls`, so on a shared local model a chat
reply goes first (a summary call gives way at its next token and is redone). A front end calls
:meth:`RolloverScheduler.submit` when a user with unsummarised days signs in (right after an
import), and reads :meth:`RolloverScheduler.status` to show what is being made.

>>> scheduler = RolloverScheduler(summarizer)                     # doctest: +SKIP
>>> bank.add_turn("Emily", "Good morning!", "Morning!", at="2023-05-05T09:00")  # doctest: +SKIP
>>> scheduler.on_turn("Emily", "2023-05-05")                      # doctest: +SKIP
>>> scheduler.close()                                             # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING

from memory_bank.model_lock import background_calls
from memory_bank.summaries.errors import SummaryStoppedError
from memory_bank.summaries.state import to_date
from memory_bank.summaries.summarizer import SummaryReport, combine_reports

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from memory_bank.bank import MemoryBank
    from memory_bank.summaries.config import SummaryConfig
    from memory_bank.summaries.summarizer import Summarizer

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class SummaryStatus:
    """What the background summariser is doing, or last did, for one user (a status line).

    ``state``: ``idle`` (nothing asked this run of the app), ``queued``, ``running`` (``done``
    of ``total`` steps: one per day, then the global layers), ``done`` (``report`` says what was
    written and what failed) or ``error`` (the run itself broke: ``error``). ``version`` grows
    with every change, so a UI redraws only when something changed.
    """

    state: str = "idle"
    done: int = 0
    total: int = 0
    report: SummaryReport | None = None
    error: str | None = None
    version: int = 0

    @property
    def active(self) -> bool:
        return self.state in ("queued", "running")


@dataclasses.dataclass
class _Job:
    """A queued run: up to which day, whether it also summarises that day, and whether it has
    started (then a new request queues a run of its own)."""

    day: dt.date
    today: bool = False
    started: bool = False


class RolloverScheduler:
    """Queues :meth:`Summarizer.summarize_user` when a user's day rolls over.

    One worker thread; at most one queued (not yet started) job per user, so a burst of turns
    queues one job. Use :meth:`wait` in tests and :meth:`close` at shutdown (or ``with``).
    """

    def __init__(self, summarizer: Summarizer) -> None:
        self.summarizer = summarizer
        self._executor: ThreadPoolExecutor | None = None
        self._last_day: dict[str, dt.date] = {}
        self._queued: dict[str, _Job] = {}  # per user, the job not yet started
        self._futures: set[Future[SummaryReport | None]] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._status: dict[str, SummaryStatus] = {}
        self._version = 0
        #: the last report per user (for status displays and tests)
        self.reports: dict[str, SummaryReport] = {}

    def status(self, user: str) -> SummaryStatus:
        """The user's :class:`SummaryStatus` (``idle`` if nothing was asked of this scheduler)."""
        with self._lock:
            return self._status.get(user.strip(), SummaryStatus())

    def _set(self, key: str, **changes: object) -> None:
        with self._lock:
            self._put(key, **changes)

    def _put(self, key: str, **changes: object) -> None:  # with self._lock held
        self._version += 1
        old = self._status.get(key, SummaryStatus())
        self._status[key] = dataclasses.replace(old, **changes, version=self._version)  # type: ignore[arg-type]

    def on_turn(self, user: str, turn_date: dt.date | dt.datetime | str | None = None) -> bool:
        """Note a turn of ``user`` on ``turn_date`` (default: the bank's today); returns True if
        a summarisation was queued. Never raises."""
        try:
            day = to_date(turn_date, self.summarizer.bank.clock)
            key = user.strip()
            with self._lock:
                previous = self._last_day.get(key)
                if previous is not None and day <= previous:
                    return False
                self._last_day[key] = day
            return self.submit(user, day)
        except Exception:  # summaries must never break the chat
            logger.exception("could not schedule summaries for %r", user)
            return False

    def submit(
        self,
        user: str,
        today: dt.date | dt.datetime | str | None = None,
        *,
        include_today: bool = False,
    ) -> bool:
        """Queue a summarisation of ``user``'s finished days (e.g. after a deletion, or when a
        user with imported history signs in); with ``include_today``, today's turns too (a
        "summarise now" button). Returns False if one is already queued (it then includes
        today if asked) or the scheduler is closed. Never raises."""
        try:
            day = to_date(today, self.summarizer.bank.clock)
            key = user.strip()
            with self._lock:
                if self._closed:
                    logger.debug("scheduler closed; not summarising %r", user)
                    return False
                queued = self._queued.get(key)
                if queued is not None and not queued.started:  # it runs for the latest day asked
                    queued.today = queued.today or include_today
                    queued.day = max(queued.day, day)
                    return False
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(
                        max_workers=1, thread_name_prefix="memorybank-summaries"
                    )
                self._put(key, state="queued", done=0, total=0, error=None)
                job = _Job(day=day, today=include_today)
                future = self._executor.submit(self._run, key, user, job)
                self._queued[key] = job
                self._futures.add(future)
                future.add_done_callback(self._futures.discard)
            return True
        except Exception:
            logger.exception("could not schedule summaries for %r", user)
            return False

    def _run(self, key: str, user: str, job: _Job) -> SummaryReport | None:
        with self._lock:
            job.started = True  # a turn arriving from now on queues another run
            if self._queued.get(key) is job:
                del self._queued[key]
            day, include_today = job.day, job.today
        try:
            with background_calls():  # a chat reply on the same local model goes first
                return self._summarize(key, user, day, include_today)
        except SummaryStoppedError:  # shutting down: the layers written are kept, the rest stay due
            logger.info("background summarisation of %r stopped; the rest is made at the next run", user)
            self._set(key, state="idle")
            return None
        except Exception as e:  # logged; the next rollover tries again
            logger.exception("background summarisation of %r failed", user)
            self._set(key, state="error", error=f"{type(e).__name__}: {e}")
            return None

    def _summarize(self, key: str, user: str, day: dt.date, include_today: bool) -> SummaryReport | None:
        summarizer = self.summarizer
        if not summarizer.bank.has_user(user):
            self._set(key, state="idle")
            return None
        today = day.isoformat()
        with_today = include_today and bool(summarizer.bank.history(user, date=today))
        total = len(summarizer.due_days(user, day)) + 1 + (2 if with_today else 0)
        self._set(key, state="running", done=0, total=total)
        done = [0]

        def step(n: int = 1) -> None:
            done[0] = min(total, done[0] + n)
            self._set(key, done=done[0])

        reports = [summarizer.summarize_user(user, now=day, progress=step)]
        if with_today:
            reports.append(summarizer.summarize_day(user, today, force=False))
            step()
            reports.append(summarizer.summarize_globals(user))
            step()
        report = combine_reports(reports)
        self.reports[report.user] = report
        self._set(key, state="done", done=total, report=report)
        return report

    def pending(self) -> int:
        """Jobs queued or running."""
        with self._lock:
            return len(self._futures)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every job submitted so far is done; False if ``timeout`` ran out first."""
        with self._lock:
            futures = set(self._futures)
        _, not_done = wait(futures, timeout=timeout)
        return not not_done

    def close(self, wait: bool = True) -> None:
        """Stop accepting work; with ``wait``, finish what is queued; without, drop the queue
        and stop the run under way at its next token (what it wrote is kept, the rest stays
        due), then return once it has stopped: what an app does at shutdown."""
        with self._lock:
            self._closed = True
            executor, self._executor = self._executor, None
        if not wait:
            self.summarizer.stop()
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=not wait)

    def __enter__(self) -> RolloverScheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def background_summaries(
    bank: MemoryBank,
    chat_model: BaseChatModel,
    language: str | None = None,
    *,
    config: SummaryConfig | None = None,
) -> RolloverScheduler:
    """A :class:`RolloverScheduler` over a :class:`Summarizer` with ``chat_model``: what the
    LangChain adapters take as ``summarizer=`` so that each finished day, and then the global
    portrait and event summary, are written in the background as SiliconFriend does.

    ``chat_model`` is any LangChain ``BaseChatModel``; ``language`` and ``config`` are the
    :class:`Summarizer`'s. Close the scheduler at shutdown (or use it in a ``with`` block).
    """
    from memory_bank.summaries.summarizer import Summarizer

    return RolloverScheduler(Summarizer(bank, chat_model, language, config=config))
