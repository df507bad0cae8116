"""No lost or duplicated turns under SIGKILL, threads and several processes on one store."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from memory_bank import MemoryBank
from memory_bank.embeddings import HashingEncoder
from tests.conftest import REPO


def test_sigkilled_writer_loses_nothing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "stress_crash.py"),
            "--kills",
            "6",
            "--seed",
            "7",
            "--store",
            str(tmp_path / "store"),
            "--max-delay",
            "0.3",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    result = json.loads(out.stdout)
    assert out.returncode == 0, result
    assert result["kills"] == 6 and result["lost_writes"] == 0 and result["problems"] == []
    assert result["stored"] >= result["acknowledged"] > 0


def test_sigkilled_imports_leave_every_user_whole_and_a_rerun_finishes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "stress_crash.py"),
            "--kills",
            "0",
            "--imports",
            "3",
            "--seed",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=400,
        cwd=REPO,
    )
    result = json.loads(out.stdout)
    assert out.returncode == 0, result
    assert result["import_problems"] == [] and result["reruns_to_finish"] == 3
    assert result["replace_kills"] + result["fresh_kills"] >= 1  # at least one import really was killed


def test_threads_add_and_search_concurrently(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # Forgetting off, as in the process test below: with it on, the day's pass run by a thread's
    # first write may forget a 2023 turn another thread has just stored, and the history (which
    # leaves forgotten turns out) would count 59 of 60 although nothing was lost.
    bank = MemoryBank.open(
        tmp_path / "store", encoder_instance=HashingEncoder(64), forgetting={"mode": "off"}
    )
    errors: list[BaseException] = []

    def session(worker: int) -> None:
        user = f"user{worker % 3}"
        try:
            for i in range(30):
                bank.add_turn(
                    user, f"worker {worker} note {i} about kites", "ok", at=f"2023-05-0{1 + i % 5}T10:00"
                )
                hits = bank.search(user, f"worker {worker} note {i}", k=3)
                assert all(h.memory.user == user for h in hits)
                assert any(f"worker {worker} note {i} " in h.memory.text for h in hits)
        except BaseException as e:  # collected and re-raised in the main thread
            errors.append(e)

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(session, range(6)))
    assert not errors, errors[0]
    assert bank.stats()["memories"]["turn"] == 180
    for u in ("user0", "user1", "user2"):
        turns = bank.history(u)
        assert len(turns) == 60
        assert len({(m.date, m.turn) for m in turns}) == 60  # numbering stayed unique under contention
    bank.close()


_PROC = """
import sys
from memory_bank import MemoryBank
from memory_bank.embeddings import HashingEncoder
bank = MemoryBank.open(sys.argv[1], encoder_instance=HashingEncoder(64), forgetting={"mode": "off"})
for i in range(40):
    bank.add_turn("shared", f"process {sys.argv[2]} line {i}", "ok", at="2023-05-01T10:00")
    assert bank.search("shared", f"process {sys.argv[2]} line {i}", k=1)
print("done")
"""


def test_processes_share_one_store(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # forgetting off: a writer's first turn of the day runs the day's pass, which would forget the
    # 2023 turns another process had already stored (history leaves forgotten turns out)
    store = str(tmp_path / "store")
    MemoryBank.open(store, encoder_instance=HashingEncoder(64)).close()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _PROC, store, str(p)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for p in range(3)
    ]
    reader = MemoryBank.open(store, encoder_instance=HashingEncoder(64), forgetting={"mode": "off"})
    stop = threading.Event()

    def watch() -> None:  # searches while the writers run: the index must follow the store
        while not stop.is_set():
            if reader.has_user("shared"):
                reader.search("shared", "process line", k=5)

    t = threading.Thread(target=watch)
    t.start()
    outs = [p.communicate(timeout=240) for p in procs]
    stop.set()
    t.join()
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert "locked" not in err
    turns = reader.history("shared")
    assert len(turns) == 120
    assert sorted(m.turn for m in turns) == list(range(120))
    assert len(reader.search("shared", "process line", k=500)) == 120
    reader.close()


def test_export_is_a_consistent_snapshot_while_writes_continue(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from memory_bank.original_format import export_data

    bank = MemoryBank.open(tmp_path / "store", encoder_instance=HashingEncoder(64))
    for u in ("a", "b"):
        bank.add_turn(u, "start", "ok", at="2023-05-01T09:00")
    stop = threading.Event()

    def writer() -> None:  # always adds to both users in one step each: a and b grow in lockstep
        i = 0
        while not stop.is_set():
            bank.add_turn("a", f"a {i}", "ok", at="2023-05-01T10:00")
            bank.add_turn("b", f"b {i}", "ok", at="2023-05-01T10:00")
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    try:
        for _ in range(10):
            snap = export_data(bank)
            na = len(snap["a"]["history"]["2023-05-01"])
            nb = len(snap["b"]["history"]["2023-05-01"])
            assert nb in (na, na - 1)  # b is written right after a; never ahead, never two behind
    finally:
        stop.set()
        t.join()
    bank.close()


def test_a_partition_load_interrupted_midway_is_rebuilt_not_reused(make_bank, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Ctrl-C in the terminal chat (or a failed read) during a search's partition refresh left
    the cached partition half-extended (its vectors and words added, its neighbours and rowid
    bound not), and every later search of that user ran on it: duplicated memories, IndexErrors."""
    from memory_bank.index import Partition

    bank = make_bank()
    for i in range(6):
        bank.add_turn(
            "Ann", f"On trip {i} I visited the museum in town {i}.", "Nice.", at=f"2023-05-0{i + 1}T09:00"
        )
    bank.search("Ann", "museum", k=3)
    bank.add_turn("Ann", "Yesterday I adopted a parrot named Kiwi.", "Wow!", at="2023-05-08T09:00")
    index_days = Partition._index_days

    def interrupted(self, *a):  # type: ignore[no-untyped-def]
        monkeypatch.setattr(Partition, "_index_days", index_days)
        raise KeyboardInterrupt

    monkeypatch.setattr(Partition, "_index_days", interrupted)
    with pytest.raises(KeyboardInterrupt):
        bank.search("Ann", "parrot", k=3)
    fresh = make_bank()  # the same store, opened anew
    for query in ("parrot Kiwi", "museum in town 3", "trip"):
        got = [(h.memory.memory_id, round(h.score, 6)) for h in bank.search("Ann", query, k=7)]
        assert got == [(h.memory.memory_id, round(h.score, 6)) for h in fresh.search("Ann", query, k=7)]
        assert len({m for m, _ in got}) == len(got)  # no memory twice
