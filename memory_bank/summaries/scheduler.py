"""Summaries on a schedule: when a user's day is over, summarise it in the background.

The chat calls :meth:`RolloverScheduler.on_turn` after storing each turn. When the turn lands on
a later day than the user's previous one (or is the first this process sees of the user, who
may have chatted on earlier days), the summarisation of the finished days is queued on one
background thread. Chat never waits and never sees an error from here.

>>> scheduler = RolloverScheduler(summarizer)                     # doctest: +SKIP
>>> bank.add_turn("Emily", "Good morning!", "Morning!", at="2023-05-05T09:00")  # doctest: +SKIP
>>> scheduler.on_turn("Emily", "2023-05-05")                      # doctest: +SKIP
>>> scheduler.close()                                             # doctest: +SKIP
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING

from memory_bank.summaries.state import to_date
from memory_bank.summaries.summarizer import SummaryReport

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from memory_bank.bank import MemoryBank
    from memory_bank.summaries.config import SummaryConfig
    from memory_bank.summaries.summarizer import Summarizer

logger = logging.getLogger(__name__)


class RolloverScheduler:
    """Queues :meth:`Summarizer.summarize_user` when a user's day rolls over.

    One worker thread; at most one queued (not yet started) job per user, so a burst of turns
    queues one job. Use :meth:`wait` in tests and :meth:`close` at shutdown (or ``with``).
    """

    def __init__(self, summarizer: Summarizer) -> None:
        self.summarizer = summarizer
        self._executor: ThreadPoolExecutor | None = None
        self._last_day: dict[str, dt.date] = {}
        self._queued: dict[str, Future[SummaryReport | None]] = {}
        self._futures: set[Future[SummaryReport | None]] = set()
        self._lock = threading.Lock()
        self._closed = False
        #: the last report per user (for status displays and tests)
        self.reports: dict[str, SummaryReport] = {}

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

    def submit(self, user: str, today: dt.date | dt.datetime | str | None = None) -> bool:
        """Queue a summarisation of ``user``'s finished days (e.g. after a deletion). Returns
        False if one is already queued or the scheduler is closed. Never raises."""
        try:
            day = to_date(today, self.summarizer.bank.clock)
            key = user.strip()
            with self._lock:
                if self._closed:
                    logger.debug("scheduler closed; not summarising %r", user)
                    return False
                queued = self._queued.get(key)
                if queued is not None and not queued.running() and not queued.done():
                    return False
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(
                        max_workers=1, thread_name_prefix="memorybank-summaries"
                    )
                future = self._executor.submit(self._run, key, user, day)
                self._queued[key] = future
                self._futures.add(future)
                future.add_done_callback(self._futures.discard)
            return True
        except Exception:
            logger.exception("could not schedule summaries for %r", user)
            return False

    def _run(self, key: str, user: str, day: dt.date) -> SummaryReport | None:
        with self._lock:
            self._queued.pop(key, None)  # a turn arriving from now on may queue another run
        try:
            if not self.summarizer.bank.has_user(user):
                return None
            report = self.summarizer.summarize_user(user, now=day)
            self.reports[report.user] = report
            return report
        except Exception:  # logged; the next rollover tries again
            logger.exception("background summarisation of %r failed", user)
            return None

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
        """Stop accepting work; with ``wait``, finish what is queued, else drop it."""
        with self._lock:
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=wait, cancel_futures=not wait)

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
