"""Work handed to a background thread, and what happens when none will take it.

``concurrent.futures`` refuses new work once the interpreter has begun to shut down: its exit
hook runs when the main thread finishes, before the other threads end and before ``atexit``
handlers run. A search made then (by a thread still serving requests, or from an ``atexit``
handler) must do the work itself rather than fail, as it does when no thread is free.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def submit(
    pool: Callable[[], concurrent.futures.Executor], fn: Callable[..., T], /, *args: Any
) -> concurrent.futures.Future[T] | None:
    """``pool().submit(fn, *args)``, or ``None`` when the pool takes no more work (the
    interpreter is shutting down, or the pool is broken): the caller then calls ``fn`` itself."""
    try:
        return pool().submit(fn, *args)
    except RuntimeError:  # "cannot schedule new futures after (interpreter) shutdown", BrokenExecutor
        return None
