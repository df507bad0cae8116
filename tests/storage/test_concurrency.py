"""Several servers on one store: no lost reinforcements, unique turn numbers, idempotent retried
adds, and search caches that follow every committed write (threads and separate processes)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from memory_bank import InvalidInputError, Memory, MemoryKind
from memory_bank.embeddings import HashingEncoder
from tests.conftest import REPO
from tests.storage.test_contract import ENC, full_memory, turn, vec

N = 60


def test_two_servers_reinforcing_one_memory_count_one_recall_a_day(stores) -> None:  # type: ignore[no-untyped-def]
    a, b = stores(), stores()
    u = a.ensure_user("Ann").id
    m = a.add_turn(u, turn("Ann", "2023-05-01", "hiking"), vec(1, 0, 0, 0), ENC)
    barrier = threading.Barrier(4)

    def recall(storage, day: str) -> None:  # type: ignore[no-untyped-def]
        barrier.wait()
        for _ in range(N):
            storage.reinforce(u, [(m.rowid, m.memory_id)], day)

    with ThreadPoolExecutor(4) as pool:  # two threads on each of two servers' connections
        list(pool.map(recall, [a, a, b, b], ["2023-05-03"] * 4))
    (got,) = b.memories(u)
    assert got.strength == 2  # 4 * N racing recalls of one day count once, never twice
    assert got.last_recall_date == "2023-05-03"
    a.reinforce(u, [(m.rowid, m.memory_id)], "2023-05-04")
    assert b.memories(u)[0].strength == 3


def test_recall_date_only_moves_forward(stores) -> None:  # type: ignore[no-untyped-def]
    """A server whose recall of yesterday commits after another's recall of today must not move
    the forgetting clock back (PostgreSQL: GREATEST in the UPDATE)."""
    s = stores()
    u = s.ensure_user("Ann").id
    m = s.add_turn(u, turn("Ann", "2023-05-01", "hiking"), None, ENC)
    s.reinforce(u, [(m.rowid or 0, m.memory_id)], "2023-05-05")
    s.reinforce(u, [(m.rowid or 0, m.memory_id)], "2023-05-03")
    (got,) = s.memories(u)
    assert (got.strength, got.last_recall_date) == (2, "2023-05-05")  # the late, older recall: no-op


def test_concurrent_adds_from_two_servers_number_turns_uniquely(stores) -> None:  # type: ignore[no-untyped-def]
    a, b = stores(), stores()
    u = a.ensure_user("Ann").id
    barrier = threading.Barrier(4)

    def add(args) -> None:  # type: ignore[no-untyped-def]
        storage, worker = args
        barrier.wait()
        for i in range(25):
            storage.add_turn(u, turn("Ann", "2023-05-01", f"w{worker} {i}"), vec(1, worker, i, 0), ENC)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(add, [(a, 0), (a, 1), (b, 2), (b, 3)]))
    turns = a.memories(u, kinds=[MemoryKind.TURN])
    assert sorted(m.turn for m in turns) == list(range(100))
    assert len({m.memory_id for m in turns}) == 100
    rowids = [m.rowid for m in sorted(turns, key=lambda m: m.turn or 0)]
    assert rowids == sorted(rowids)  # ids follow the order turns were numbered (commit order)


def test_retried_batch_add_is_idempotent(stores) -> None:  # type: ignore[no-untyped-def]
    s = stores()
    u = s.ensure_user("Ann").id
    batch = [full_memory(1), full_memory(3)]
    first = s.add_memories(u, batch, np.stack([vec(1, 0, 0, 0), vec(0, 1, 0, 0)]), ENC)
    state = s.user_state(u)
    retry = [full_memory(1), full_memory(3), full_memory(5)]  # the lost acknowledgement, plus a new one
    second = s.add_memories(u, retry, np.stack([vec(1, 0, 0, 0), vec(0, 1, 0, 0), vec(0, 0, 1, 0)]), ENC)
    assert second[:2] == first and second[2] not in first
    assert [m.memory_id for m in s.memories(u)] == [m.memory_id for m in retry]
    assert s.user_state(u) == (state[0] + 1, state[1])
    clash = full_memory(1)
    clash.text = "not the same memory"
    with pytest.raises(InvalidInputError, match="different content"):
        s.add_memories(u, [clash], None, ENC)


def test_retried_turn_with_a_client_id_is_stored_once(stores) -> None:  # type: ignore[no-untyped-def]
    a, b = stores(), stores()
    u = a.ensure_user("Ann").id
    keyed = Memory(
        memory_id="msg-7f3a",
        user="Ann",
        kind=MemoryKind.TURN,
        date="2023-05-01",
        text="hello",
        query="hello",
        response="",
    )
    barrier = threading.Barrier(4)

    def send(storage):  # type: ignore[no-untyped-def]  # the same request reaching two servers twice each
        barrier.wait()
        return storage.add_turn(u, keyed, vec(1, 0, 0, 0), ENC)

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(send, [a, b, a, b]))
    assert {r.rowid for r in results} == {results[0].rowid}
    assert {(r.memory_id, r.turn) for r in results} == {("msg-7f3a", 0)}
    assert len(a.memories(u)) == 1 and len(a.vectors(u, ENC, [MemoryKind.TURN]).rowids) == 1
    nxt = a.add_turn(u, turn("Ann", "2023-05-01", "next"), None, ENC)
    assert nxt.turn == 1


_CHILD = """
import datetime as dt
import sys
from memory_bank import MemoryBank, load_config
from memory_bank.embeddings import HashingEncoder
from memory_bank.stores import open_storage

spec, who, n, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
clock = lambda: dt.datetime(2023, 5, 1, 12)  # the tests' fixed clock: forgetting decides alike
bank = MemoryBank(load_config(None, store=spec), storage=open_storage(spec), encoder=HashingEncoder(64), clock=clock)
print("ready", flush=True)
sys.stdin.readline()  # start together
for i in range(n):
    if mode == "add":
        bank.add_turn("shared", f"process {who} line {i}", "ok", at="2023-05-01T10:00")
        assert bank.search("shared", f"process {who} line {i}", k=1)
    else:
        bank.reinforce("shared", ["shared_2023-05-01_0"], now="2023-06-01")
bank.close()
print("done", flush=True)
"""


def _run_children(spec: str, mode: str, n: int, count: int = 2) -> list[subprocess.Popen[str]]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, spec, str(p), str(n), mode],
            cwd=REPO,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for p in range(count)
    ]
    for p in procs:
        assert p.stdout is not None
        line = p.stdout.readline()
        assert line.strip() == "ready", (line, p.stderr.read() if p.stderr else "")
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    return procs


def _finish(procs: list[subprocess.Popen[str]]) -> None:
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0 and "done" in out, err


def test_two_processes_reinforcing_one_memory(stores, make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    bank.add_turn("shared", "I love the sea.", "Me too.", at="2023-05-01T09:00")
    _finish(_run_children(stores.spec, "reinforce", N))
    ((m, _),) = bank.memories("shared")
    assert m.strength == 2 and m.last_recall_date == "2023-06-01"  # one recall day, counted once


def test_two_processes_add_while_a_third_searches(stores, make_bank) -> None:  # type: ignore[no-untyped-def]
    reader = make_bank()
    reader.add_turn("shared", "opening line", "ok", at="2023-05-01T09:00")
    procs = _run_children(stores.spec, "add", 40)
    stop = threading.Event()
    errors: list[BaseException] = []

    def watch() -> None:  # its partition must follow the store through every append
        try:
            while not stop.is_set():
                reader.search("shared", "process line", k=5)
        except BaseException as e:
            errors.append(e)

    t = threading.Thread(target=watch)
    t.start()
    try:
        _finish(procs)
    finally:
        stop.set()
        t.join()
    assert not errors, errors[0]
    turns = reader.history("shared")
    assert sorted(m.turn for m in turns) == list(range(81))
    uid = reader.user("shared").id
    part = reader._cache.get(uid)  # the incrementally maintained partition == the store
    assert sorted(part.rowids.tolist()) == sorted(m.rowid for m in turns)
    assert len(reader.search("shared", "process line", k=500)) == 81


def test_a_late_commit_is_not_missed_by_another_servers_cache(stores, make_bank) -> None:  # type: ignore[no-untyped-def]
    """Server A draws a memory id and then stalls before committing; server B adds a turn for the
    same user meanwhile. B must wait for A (user-row lock), so B's id is larger and commits later,
    and a third server's cache, which loads "ids above the largest I have", misses neither."""
    if stores.backend != "postgres":
        pytest.skip("SQLite serialises all writers with one database lock")
    reader, writer_a, writer_b = make_bank(), make_bank(), make_bank()
    writer_a.add_turn("Ann", "first turn about apples", "ok", at="2023-05-01T09:00")
    uid = reader.user("Ann").id
    assert reader.search("Ann", "apples", k=1)
    part_before = reader._cache.get(uid)
    storage_a = writer_a.storage
    inserted, release = threading.Event(), threading.Event()
    write = storage_a._write  # type: ignore[attr-defined]

    def stalling_write(fn):  # type: ignore[no-untyped-def]  # commit only when released
        def body(cur):  # type: ignore[no-untyped-def]
            out = fn(cur)
            if isinstance(out, Memory):  # add_turn's transaction: the row is in, uncommitted
                inserted.set()
                assert release.wait(20)
            return out

        return write(body)

    storage_a._write = stalling_write  # type: ignore[attr-defined]
    results: dict[str, Memory] = {}
    ta = threading.Thread(
        target=lambda: results.setdefault(
            "a", writer_a.add_turn("Ann", "late commit about zebras", "ok", at="2023-05-01T10:00")
        )
    )
    ta.start()
    assert inserted.wait(20)
    tb = threading.Thread(
        target=lambda: results.setdefault(
            "b", writer_b.add_turn("Ann", "quick commit about kiwis", "ok", at="2023-05-01T10:01")
        )
    )
    tb.start()
    time.sleep(0.5)
    assert tb.is_alive()  # B waits for Ann's row lock rather than drawing an id now
    assert all("zebras" not in h.memory.text for h in reader.search("Ann", "zebras", k=5))
    release.set()
    ta.join(20)
    tb.join(20)
    a, b = results["a"], results["b"]
    assert (a.rowid or 0) < (b.rowid or 0) and (a.turn, b.turn) == (1, 2)
    assert "zebras" in reader.search("Ann", "zebras", k=1)[0].memory.text
    assert "kiwis" in reader.search("Ann", "kiwis", k=1)[0].memory.text
    part = reader._cache.get(uid)
    assert part is part_before  # caught up by appending, no reload needed
    assert sorted(part.rowids.tolist()) == sorted(m.rowid for m in reader.history("Ann"))


def test_two_servers_see_each_others_writes(make_bank) -> None:  # type: ignore[no-untyped-def]
    a, b = make_bank(), make_bank()
    a.add_turn("Ann", "I adopted a cat named Miso.", "Lovely!", at="2023-05-01T10:00")
    assert "Miso" in b.search("Ann", "cat named Miso", k=1)[0].memory.text
    b.add_turn("Ann", "My sister lives in Lisbon.", "Nice city.", at="2023-05-02T10:00")
    assert "Lisbon" in a.search("Ann", "sister Lisbon", k=1)[0].memory.text
    b.set_layer("Ann", MemoryKind.DAILY_SUMMARY, "Ann talked about her violin lessons.", date="2023-05-02")
    assert a.search("Ann", "violin lessons", k=1)[0].memory.kind is MemoryKind.DAILY_SUMMARY
    a.search("Ann", "cat Miso", k=1, now="2023-05-03", reinforce=True)
    b.search("Ann", "cat Miso", k=1, now="2023-05-04", reinforce=True)
    miso = next(m for m, _ in a.memories("Ann") if "Miso" in m.text)
    assert (miso.strength, miso.last_recall_date) == (3, "2023-05-04")
    a.archive("Ann", [miso.memory_id])
    assert all("Miso" not in h.memory.text for h in b.search("Ann", "cat Miso", k=5))
    a.restore("Ann", [miso.memory_id])
    assert "Miso" in b.search("Ann", "cat Miso", k=1)[0].memory.text
    a.delete_memory("Ann", miso.memory_id)
    assert all("Miso" not in h.memory.text for h in b.search("Ann", "cat Miso", k=5))
    b.delete_user("Ann")
    assert not a.has_user("Ann")


def test_many_threads_on_two_servers(make_bank) -> None:  # type: ignore[no-untyped-def]
    banks = [make_bank(encoder=HashingEncoder(64)), make_bank(encoder=HashingEncoder(64))]
    errors: list[BaseException] = []

    def session(worker: int) -> None:
        bank, user = banks[worker % 2], f"user{worker % 3}"
        try:
            for i in range(15):
                bank.add_turn(
                    user, f"worker {worker} note {i} about kites", "ok", at=f"2023-05-0{1 + i % 3}T10:00"
                )
                hits = bank.search(user, f"worker {worker} note {i}", k=3)
                assert any(f"worker {worker} note {i} " in h.memory.text for h in hits)
        except BaseException as e:
            errors.append(e)

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(session, range(6)))
    assert not errors, errors[0]
    for u in ("user0", "user1", "user2"):
        turns = banks[1].history(u)
        assert len(turns) == 30 and len({(m.date, m.turn) for m in turns}) == 30


def test_partition_builds_on_short_lived_threads_leave_no_connections_open(make_bank, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A partition's first build reads its lexical snapshot on a thread of its own; each such
    thread used to leave an SQLite connection (two file handles) open until the store closed, so
    a server whose LRU kept rebuilding partitions ran out of file descriptors (99 connections
    after 100 searches alternating two users with room for one)."""
    import os

    import memory_bank.index as index_module

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("counts open file descriptors through /proc/self/fd (Linux)")
    monkeypatch.setattr(index_module, "SNAPSHOT_MIN", 1)  # every build stores, then reads, one
    bank = make_bank(max_cached_users=1)
    for user in ("Ann", "Bob"):
        for i in range(3):
            bank.add_turn(user, f"{user} talks about topic {i}", "ok", at=f"2023-05-01T10:0{i}")
    for user in ("Ann", "Bob"):
        bank.search(user, "topic")  # snapshots stored, connections of this thread open
    before = len(os.listdir("/proc/self/fd"))
    for i in range(40):
        assert bank.search("Ann" if i % 2 else "Bob", "topic", k=1)  # a build from the snapshot each
    assert len(os.listdir("/proc/self/fd")) - before < 10  # before the fix: about 80 more


def test_closing_a_store_while_another_thread_queries_it_neither_crashes_nor_leaks(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A web server's warm-up thread read the store while the server shut down; close() closed
    that thread's SQLite connection under its running query and the process died (segmentation
    fault). Now the running query finishes, and the connection still closes: once the thread lets
    go of it, no file handle of the store stays open."""
    from memory_bank.stores.sqlite import SQLiteStorage

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("counts open file descriptors through /proc/self/fd (Linux)")

    def handles() -> int:
        return sum(1 for fd in os.listdir("/proc/self/fd") if str(tmp_path) in _target(fd))

    outcomes: list[str] = []
    for _ in range(40):  # the crash needed the close to land inside a query: race it often
        storage = SQLiteStorage(tmp_path)
        started = threading.Event()

        def query(storage: SQLiteStorage = storage, started: threading.Event = started) -> None:
            try:
                for _ in range(300):
                    storage._rows("SELECT count(*) FROM meta a, meta b, meta c, meta d")
                    started.set()
                outcomes.append("done")
            except Exception as e:
                outcomes.append(repr(e))
            finally:
                started.set()

        worker = threading.Thread(target=query)
        worker.start()
        started.wait()
        storage.close()
        worker.join()
        storage.close()  # the worker's later queries opened their own connection: closed now
    assert len(outcomes) == 40 and set(outcomes) <= {"done"}
    assert handles() == 0


def _target(fd: str) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""


def test_a_delete_racing_close_is_reported_exactly_as_it_happened(make_bank) -> None:  # type: ignore[no-untyped-def]
    """A deletion commits, then empties the write-ahead log; close() from another thread used to
    close the connection between the two, and the deletion, done, was reported as an error."""
    bank = make_bank()
    for i in range(40):
        bank.add_turn("Ann", f"note number {i} about apples", "ok", at=f"2023-05-01T10:{i:02d}")
    user = bank.user("Ann").id
    mismatches = []
    for r in range(120):
        target = bank.memories("Ann")[0][0].memory_id
        outcome: list[BaseException | None] = []

        def delete(target: str = target, outcome: list[BaseException | None] = outcome) -> None:
            try:
                bank.delete_memory("Ann", target)
                outcome.append(None)
            except Exception as e:
                outcome.append(e)

        worker = threading.Thread(target=delete)
        worker.start()
        time.sleep((r % 20) * 0.0003)
        bank.storage.close()
        worker.join()
        gone = bank.storage.get_memory(user, target) is None
        if outcome != [None] or not gone:
            mismatches.append((r, outcome, gone))
        bank.add_turn("Ann", f"another note {r} about apples", "ok", at=f"2023-05-02T10:{r % 60:02d}")
    assert mismatches == []


def test_a_ctrl_c_while_another_process_holds_the_write_lock_is_seen_at_once(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """SQLite's own wait for the write lock runs no Python: a Ctrl-C in a terminal chat saving a
    turn while an import held the lock went unseen for up to the busy timeout (a minute). The
    main thread now waits in short tries, so the interrupt ends the wait, and leaves no
    transaction (nor lock) behind."""
    import _thread

    from memory_bank.stores.sqlite import DB_FILENAME, SQLiteStorage

    storage = SQLiteStorage(tmp_path, busy_timeout_s=8)
    u = storage.ensure_user("Ann").id
    other = sqlite3.connect(tmp_path / DB_FILENAME, isolation_level=None, timeout=0)
    other.execute("BEGIN IMMEDIATE")  # another process writing (an import)
    # Ctrl-C as a terminal delivers it (a background run may start with SIGINT ignored)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.3, _thread.interrupt_main)
    start = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            storage.add_turn(u, turn("Ann", "2023-05-01", "hiking"), vec(1, 0, 0, 0), ENC)
        waited = time.monotonic() - start
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
        other.execute("ROLLBACK")
    assert waited < 4, f"the interrupt was seen after {waited:.1f} s, at the end of SQLite's wait"
    other.execute("BEGIN IMMEDIATE")  # the interrupted write left no lock held
    other.execute("ROLLBACK")
    other.close()
    storage.add_turn(u, turn("Ann", "2023-05-01", "hiking"), vec(1, 0, 0, 0), ENC)  # and works on
    assert [m.text for m in storage.memories(u)] == ["hiking"]
    storage.close()
