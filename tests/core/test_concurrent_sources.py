"""A large partition asks its candidate sources side by side (the dense search here, BM25's scan
on a helper thread): the same results as one after the other, errors reach the caller, and a
search never waits behind another search's work on the helper."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from typing import Any

import numpy as np
import pytest

from memory_bank import Memory, MemoryKind
from memory_bank.retrieval import candidates


def _fill(bank: Any, n: int = 400) -> None:
    rec = bank.user("Ann", create=True)
    topics = ["hiking in the Alps", "my sister's birthday", "the pottery class", "去博物馆看画展", "a jazz concert"]
    mems = [
        Memory(memory_id=f"Ann_{i}", user="Ann", kind=MemoryKind.TURN, date=f"2024-03-{1 + i // 20:02d}",
               turn=i % 20, text=f"We talked about {topics[i % 5]} ({i})", query=f"q{i}", response="ok")
        for i in range(n)
    ]  # fmt: skip
    bank.storage.add_memories(rec.id, mems, bank.encoder.encode([m.text for m in mems]), bank.encoder_name)


QUERIES = ["hiking", "sister birthday on March 3rd", "博物馆", "jazz concert pottery", "nothing like it"]


def _ranked(bank: Any) -> list[list[tuple[str, float]]]:
    return [[(r.memory.memory_id, r.score) for r in bank.search("Ann", q, k=8)] for q in QUERIES]


def test_sources_asked_side_by_side_rank_exactly_as_one_after_the_other(make_bank, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    _fill(bank)
    monkeypatch.setattr(candidates, "CONCURRENT_FROM", 10**9)
    alone = _ranked(bank)
    asked = []
    real = candidates.ask_sources

    def spy(sources, ctx, pool):  # type: ignore[no-untyped-def]
        asked.append(len(ctx.part) >= candidates.CONCURRENT_FROM and len(sources) > 1)
        return real(sources, ctx, pool)

    monkeypatch.setattr(candidates, "ask_sources", spy)
    monkeypatch.setattr(candidates, "CONCURRENT_FROM", 1)
    assert _ranked(bank) == alone
    assert asked and all(asked)  # every search took the concurrent path


def _ctx(n: int) -> Any:
    class Part:
        def __len__(self) -> int:
            return n

    class Ctx:
        part = Part()

    return Ctx()


def test_a_source_on_the_helper_is_taken_back_when_the_helper_is_busy() -> None:
    release = threading.Event()
    busy = candidates._helper_pool().submit(release.wait, 30)  # another search's work, stuck
    threads: list[str] = []

    def source(ctx: Any, pool: int) -> np.ndarray:
        threads.append(threading.current_thread().name)
        return np.arange(pool)

    try:
        found = candidates.ask_sources([source, source, source], _ctx(candidates.CONCURRENT_FROM), 3)
        assert [f.tolist() for f in found] == [[0, 1, 2]] * 3
        assert threads == [threading.current_thread().name] * 3  # none waited for the helper
        assert not busy.done()
    finally:
        release.set()
        busy.result()


def test_a_source_that_fails_on_the_helper_fails_the_search() -> None:
    def dense(ctx: Any, pool: int) -> np.ndarray:
        return np.arange(pool)

    def broken(ctx: Any, pool: int) -> np.ndarray:
        raise RuntimeError("the index is unreadable")

    with pytest.raises(RuntimeError, match="unreadable"):
        candidates.ask_sources([dense, broken], _ctx(candidates.CONCURRENT_FROM), 4)
    # Small partitions ask one after the other, on this thread.
    names: list[str] = []
    candidates.ask_sources(
        [dense, lambda c, p: names.append(threading.current_thread().name) or np.arange(1)],
        _ctx(candidates.CONCURRENT_FROM - 1),
        2,
    )
    assert names == [threading.current_thread().name]


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin", reason="needs fork()")
def test_a_forked_child_gets_a_helper_of_its_own() -> None:
    candidates._helper_pool().submit(lambda: None).result()  # the parent's helper thread exists
    pid = os.fork()
    if pid == 0:  # the child: the parent's thread is not here; a new helper must run the source
        code = 1
        try:
            seen: list[str] = []

            def source(ctx: Any, pool: int) -> np.ndarray:
                seen.append(threading.current_thread().name)
                return np.arange(pool)

            found = candidates.ask_sources([source, source], _ctx(candidates.CONCURRENT_FROM), 2)
            ran = candidates._helper_pool().submit(lambda: 42).result(timeout=10)  # the helper works
            code = 0 if [f.tolist() for f in found] == [[0, 1]] * 2 and len(seen) == 2 and ran == 42 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_the_helpers_work_ends_before_a_failed_search_returns() -> None:
    """The caller holds the partition's lock only until it returns: the helper's source must
    not still be reading the partition after the search has failed and let go of it."""
    finished: list[float] = []

    def dense(ctx: Any, pool: int) -> np.ndarray:
        time.sleep(0.05)
        raise KeyboardInterrupt

    def slow_lexical(ctx: Any, pool: int) -> np.ndarray:
        time.sleep(0.3)
        finished.append(time.monotonic())
        return np.arange(pool)

    candidates._helper_pool().submit(lambda: None).result()  # the helper is up and idle
    with pytest.raises(KeyboardInterrupt):
        candidates.ask_sources([dense, slow_lexical], _ctx(candidates.CONCURRENT_FROM), 2)
    assert finished and finished[0] <= time.monotonic()


SHUTDOWN = """
import sys, threading, time, atexit
from memory_bank import MemoryBank
from memory_bank.embeddings import HashingEncoder
from memory_bank.retrieval import candidates
candidates.CONCURRENT_FROM = 1  # stands for a user of 32,768 memories or more
bank = MemoryBank.open(sys.argv[1], encoder_instance=HashingEncoder(64))
for i in range(20):
    bank.add_turn("ann", f"I went hiking in the Alps {i}", "nice", at="2024-03-01T10:00")
print("main", len(bank.search("ann", "hiking", k=3)), flush=True)
atexit.register(lambda: print("atexit", len(bank.search("ann", "Alps hiking", k=2)), flush=True))
def serve():
    time.sleep(0.5)  # the main thread has finished: concurrent.futures takes no more work
    print("worker", len(bank.search("ann", "hiking in the Alps", k=4)), flush=True)
threading.Thread(target=serve).start()
"""


def test_searches_still_answer_while_the_interpreter_shuts_down(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A server thread still answering after the main thread has finished, and an ``atexit``
    handler, search a large partition: no thread takes work then, so the search does it."""
    out = subprocess.run(
        [sys.executable, "-c", SHUTDOWN, str(tmp_path / "store")],
        capture_output=True, text=True, timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:3] == ["main 3", "worker 4", "atexit 2"], out.stdout + out.stderr


def test_a_search_may_ask_for_more_memories_than_there_are(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    for i in range(5):
        bank.add_turn("Ann", f"I went hiking in the Alps ({i})", "Nice!", at=f"2024-03-0{i + 1}T10:00")
    assert len(bank.search("Ann", "hiking Alps", k=10**12)) == 5  # nothing sized by k is allocated
