"""The set of live memories a search tells the tiers apart with: after each new turn it grows by
the new turns alone (no sort of the whole history), and it stays the set a fresh computation
gives, with views handed out earlier unchanged."""

from __future__ import annotations

import datetime as dt
import threading
import types

import numpy as np

from memory_bank.cold import ColdTier, _appended
from memory_bank.config import SELECTIVE_FORGETTING


def test_appending_keeps_earlier_views_and_falls_back_to_a_union_below_the_top() -> None:
    first = np.array([2, 5, 9], dtype=np.int64)
    joined, spare = _appended(first, first, np.array([12, 11], dtype=np.int64))
    assert joined.tolist() == [2, 5, 9, 11, 12]
    again, spare2 = _appended(joined, spare, np.array([20], dtype=np.int64))
    assert again.tolist() == [2, 5, 9, 11, 12, 20]
    assert spare2 is spare  # written into the room left, not copied
    assert joined.tolist() == [2, 5, 9, 11, 12] and first.tolist() == [2, 5, 9]
    assert _appended(again, spare2, np.zeros(0, dtype=np.int64))[0] is again
    below, _ = _appended(again, spare2, np.array([7, 30], dtype=np.int64))
    assert below.tolist() == [2, 5, 7, 9, 11, 12, 20, 30]
    assert again.tolist() == [2, 5, 9, 11, 12, 20]


def test_the_live_set_after_each_turn_equals_a_fresh_computation(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank(forgetting=SELECTIVE_FORGETTING)
    for i in range(6):  # old turns: faded by the search day
        bank.add_turn(
            "Ann", f"Back in May I tried pottery class number {i}.", "Nice.", at=f"2023-05-0{i + 1}T09:00"
        )
    now = "2023-09-01"
    for i in range(5):
        bank.add_turn("Ann", f"Today I painted picture {i} of the sea.", "Lovely.", at=f"{now}T1{i}:00")
        bank.search("Ann", "what did I paint", k=2, now=now)  # grows the cached set
        rec = bank.user("Ann")
        part = bank._cache.get(rec.id)
        cached = bank._live_now(rec, dt.date.fromisoformat(now), part)
        bank.cold._live.clear()
        fresh = bank._live_now(rec, dt.date.fromisoformat(now), part)
        assert cached.tolist() == fresh.tolist()
        assert len(fresh) == i + 1  # today's turns are live, May's have faded


def test_a_reply_that_revives_a_forgotten_memory_updates_the_set_without_recomputing(
    make_bank, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank(forgetting=SELECTIVE_FORGETTING)
    bank.add_turn("Ann", "My cat Miso loves tuna.", "Sweet.", at="2023-05-01T09:00")
    for i in range(3):
        bank.add_turn("Ann", f"Back in May I tried pottery class {i}.", "Nice.", at=f"2023-05-0{i + 2}T09:00")
    now = "2023-09-01"
    day = dt.date.fromisoformat(now)
    bank.add_turn("Ann", "Today I painted the sea.", "Lovely.", at=f"{now}T09:00")
    hits = bank.search("Ann", "what does my cat Miso love", k=1, now=now)
    assert hits and hits[0].memory.archived  # found in the cold tier: faded since May
    computed = []
    real = bank._forget_columns
    monkeypatch.setattr(bank, "_forget_columns", lambda *a, **kw: computed.append(1) or real(*a, **kw))
    bank.add_turn(
        "Ann", "Miso also likes salmon.", "Noted!", at=f"{now}T10:00", recalled=[h.memory for h in hits]
    )
    bank.search("Ann", "what does Miso like", k=2, now=now)
    assert computed == []  # the revive was applied to the cached set
    rec = bank.user("Ann")
    part = bank._cache.get(rec.id)
    cached = bank._live_now(rec, day, part)
    bank.cold._live.clear()
    fresh = bank._live_now(rec, day, part)
    assert cached.tolist() == fresh.tolist()
    assert len(fresh) == 3  # today's painting, Miso (recalled today), today's salmon turn


def _faded_and_fresh(bank) -> str:  # type: ignore[no-untyped-def]
    for i in range(6):  # faded by the search day
        bank.add_turn(
            "Ann", f"Back in May I tried pottery class number {i}.", "Nice.", at=f"2023-05-0{i + 1}T09:00"
        )
    now = "2023-09-01"
    bank.add_turn("Ann", "Today I painted the sea.", "Lovely.", at=f"{now}T09:00")
    return now


def test_a_restart_reads_the_live_set_beside_the_partition_build_and_gets_the_same(
    make_bank, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    now = _faded_and_fresh(make_bank(forgetting=SELECTIVE_FORGETTING))
    serial = make_bank(forgetting=SELECTIVE_FORGETTING)
    monkeypatch.setattr(serial, "_read_forget_columns_early", lambda *a: None)
    expected = [
        (h.memory.memory_id, h.memory.archived, h.score)
        for h in serial.search("Ann", "pottery", k=4, now=now)
    ]
    restarted = make_bank(forgetting=SELECTIVE_FORGETTING)
    threads = []
    real = restarted._forget_columns
    monkeypatch.setattr(
        restarted, "_forget_columns", lambda *a: threads.append(threading.current_thread().name) or real(*a)
    )
    got = [
        (h.memory.memory_id, h.memory.archived, h.score)
        for h in restarted.search("Ann", "pottery", k=4, now=now)
    ]
    assert got == expected and any(archived for _, archived, _ in got)  # faded ones found in the cold tier
    assert len(threads) == 1 and threads[0].startswith("memorybank-snapshot")  # read beside the build


def test_a_write_between_the_early_read_and_the_build_is_not_missed(make_bank, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    now = _faded_and_fresh(make_bank(forgetting=SELECTIVE_FORGETTING))
    restarted = make_bank(forgetting=SELECTIVE_FORGETTING)
    other = make_bank(forgetting=SELECTIVE_FORGETTING)  # another server on the same store
    early = restarted._read_forget_columns_early

    def then_a_write(*a):  # type: ignore[no-untyped-def]
        started = early(*a)
        if started is not None:
            started.columns.result()  # the columns are read before the new turn is written
        other.add_turn("Ann", "Just now I adopted a parrot named Kiwi.", "Wow!", at=f"{now}T11:00")
        return started

    monkeypatch.setattr(restarted, "_read_forget_columns_early", then_a_write)
    hits = restarted.search("Ann", "my parrot Kiwi", k=1, now=now)
    assert hits and "Kiwi" in hits[0].memory.text
    assert not hits[0].memory.archived  # live: a set computed from the early read would have missed it


def test_two_searches_growing_the_set_at_once_keep_each_others_views() -> None:
    """Two threads (two chat tabs of one user) grow one cached set at once: the later one used
    to write its new rowids into the buffer the other had just handed out (a view of it showed
    [1, 2, 3, 4, 10, 10]) and store a set without memory 9, which then counted as forgotten on
    every later search that day."""
    cold = ColdTier(types.SimpleNamespace(user_counters=None), lambda: "hashing", lambda: 4, max_users=4)  # type: ignore[arg-type]
    live = np.array([1, 2, 3], dtype=np.int64)
    cold.live_rowids(7, (1, 0, 0), "2023-05-01", lambda: (live, 3))
    grown = cold.live_rowids(7, (2, 0, 0), "2023-05-01", lambda: (live, 3), lambda after: (np.array([4]), 4))
    assert grown.tolist() == [1, 2, 3, 4]  # now a view of a buffer with room
    slow_started, fast_done = threading.Event(), threading.Event()

    def slow_added(after: int) -> tuple[np.ndarray, int]:  # reads its new turns, then stalls
        slow_started.set()
        assert fast_done.wait(10)
        return np.array([10], dtype=np.int64), 10

    views: dict[str, np.ndarray] = {}
    slow = threading.Thread(
        target=lambda: views.update(
            slow=cold.live_rowids(7, (3, 0, 0), "2023-05-01", lambda: (live, 3), slow_added)
        )
    )
    slow.start()
    assert slow_started.wait(10)
    views["fast"] = cold.live_rowids(
        7, (4, 0, 0), "2023-05-01", lambda: (live, 3), lambda after: (np.array([9, 10], dtype=np.int64), 10)
    )
    fast_then = views["fast"].tolist()
    fast_done.set()
    slow.join(10)
    assert fast_then == [1, 2, 3, 4, 9, 10] and views["fast"].tolist() == fast_then
    assert views["slow"].tolist() in ([1, 2, 3, 4, 10], [1, 2, 3, 4, 9, 10])
    later = cold.live_rowids(
        7, (5, 0, 0), "2023-05-01", lambda: (live, 3), lambda after: (np.zeros(0, dtype=np.int64), after)
    )
    assert 9 in later.tolist() and 10 in later.tolist()


def test_a_turn_another_search_adds_while_the_set_is_computed_stays_live(make_bank, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Computing the set reads the store's columns, then used to take the partition's last rowid
    as the highest examined: a turn that another search added to the partition in between was
    never examined, so it ranked as forgotten for the rest of the day."""
    bank = make_bank(forgetting=SELECTIVE_FORGETTING)
    for i in range(4):
        bank.add_turn("Ann", f"On day one I baked loaf {i}.", "Yum.", at=f"2023-09-01T1{i}:00")
    bank.search("Ann", "what did I bake", k=2, now="2023-09-01")
    day = "2023-09-02"  # a new day: the set is computed again
    read = bank._forget_columns
    calls: list[int] = []

    def columns_then_another_search(rec):  # type: ignore[no-untyped-def]
        out = read(rec)
        calls.append(1)
        if len(calls) == 1:  # between this read and the end of the computation
            other = threading.Thread(
                target=lambda: (
                    bank.add_turn(
                        "Ann", "Just now I adopted a parrot named Kiwi.", "Wow!", at=f"{day}T11:00"
                    ),
                    bank.search("Ann", "parrot", k=1, now=day),  # brings the partition up to date
                )
            )
            other.start()
            other.join()
        return out

    monkeypatch.setattr(bank, "_forget_columns", columns_then_another_search)
    bank.search("Ann", "what did I bake", k=2, now=day)
    monkeypatch.undo()
    hits = bank.search("Ann", "my parrot Kiwi", k=1, now=day)
    assert hits and "Kiwi" in hits[0].memory.text
    assert not hits[0].memory.archived  # ranked as live, not as a forgotten memory
    rec = bank.user("Ann")
    part = bank._cache.get(rec.id)
    cached = bank._live_now(rec, dt.date.fromisoformat(day), part)
    bank.cold._live.clear()
    assert cached.tolist() == bank._live_now(rec, dt.date.fromisoformat(day), part).tolist()
