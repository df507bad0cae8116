"""One in-process model, two kinds of callers: a chat reply never waits for a background summary.

A local model (llama.cpp, a Hugging Face model) runs one call at a time, so its calls take a
lock. Background work (the day summaries of :mod:`memory_bank.summaries.scheduler`) runs inside
:func:`background_calls`: such a call waits while a foreground call (a chat reply) holds or waits
for the model, and while it streams it checks :meth:`ModelLock.should_yield` at every token and
gives way with :class:`PreemptedError` as soon as a foreground call is waiting. The summariser
redoes a preempted call once the model is free; it is not a failed attempt.

>>> lock = ModelLock()
>>> with lock:                       # a foreground call
...     lock.should_yield()
False
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator

from memory_bank.errors import MemoryBankError

_BACKGROUND: contextvars.ContextVar[bool] = contextvars.ContextVar("memorybank_background_llm", default=False)


class PreemptedError(MemoryBankError):
    """A background LLM call stopped to let a foreground one (a chat reply) run; redo it later."""


@contextlib.contextmanager
def background_calls() -> Iterator[None]:
    """LLM calls made inside this block (this thread or task) give way to foreground ones."""
    token = _BACKGROUND.set(True)
    try:
        yield
    finally:
        _BACKGROUND.reset(token)


def in_background() -> bool:
    """Whether the calling code runs inside :func:`background_calls`."""
    return _BACKGROUND.get()


class ModelLock:
    """A lock for one model's calls where foreground callers go first (see the module doc).

    ``with lock:`` takes it; a background caller waits while the model is busy *or* a foreground
    caller waits, a foreground caller only while it is busy.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._held = False
        self._waiting = 0  # foreground callers waiting for the model

    def acquire(self) -> None:
        background = in_background()
        with self._cond:
            if not background:
                self._waiting += 1
            try:
                while self._held or (background and self._waiting):
                    self._cond.wait()
            finally:
                if not background:
                    self._waiting -= 1
            self._held = True

    def try_acquire(self) -> bool:
        """Take the lock if the model is idle and nobody waits for it; never waits."""
        with self._cond:
            if self._held or self._waiting:
                return False
            self._held = True
            return True

    def release(self) -> None:
        with self._cond:
            self._held = False
            self._cond.notify_all()

    def __enter__(self) -> ModelLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    @property
    def foreground_waiting(self) -> int:
        """Foreground callers waiting for the model now."""
        return self._waiting

    def should_yield(self) -> bool:
        """True for a background caller while a foreground one waits: stop and let it run."""
        return self._waiting > 0 and in_background()

    def check(self) -> None:
        """Raise :class:`PreemptedError` if :meth:`should_yield` (call it between tokens)."""
        if self.should_yield():
            raise PreemptedError("a chat reply needs the model; this background call is redone later")
