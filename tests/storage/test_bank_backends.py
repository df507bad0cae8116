"""The MemoryBank end to end on each backend: add, search, reinforce, forget, delete, export."""

from __future__ import annotations

import copy
import json

import pytest

from memory_bank import MemoryKind, UserNotFoundError
from memory_bank.config import CALENDAR_ONLY
from memory_bank.errors import EncoderMismatchError
from memory_bank.original_format import export_data, import_data, load_memory_file
from tests.conftest import paper_file
from tests.core.conftest import CountingEncoder
from tests.core.test_original_format import LEGACY


def test_add_search_reinforce_persist(make_bank) -> None:  # type: ignore[no-untyped-def]
    enc = CountingEncoder(64)
    bank = make_bank(encoder=enc)
    a = bank.add_turn("Ann", "Morning!", "Hi Ann", at="2023-04-27T08:00:00")
    b = bank.add_turn("Ann", "My dog is called Biscuit.", "Cute name!", at="2023-04-27T13:00:00")
    bank.add_turn("Ann", "I work as a nurse.", "Demanding work.", at="2023-04-28T09:30:00")
    assert (a.turn, b.turn, b.context) == (0, 1, "Hi Ann")
    hit = bank.search("Ann", "What is my dog called?", k=1, now="2023-05-01", reinforce=True)[0]
    assert "Biscuit" in hit.memory.text and hit.memory.strength == 2
    assert bank.search("Ann", "What did I do on April 28th?", k=1)[0].memory.date == "2023-04-28"
    bank.close()
    embedded = enc.texts
    again = make_bank(encoder=enc)  # a restart: the index is rebuilt from stored vectors
    assert "Biscuit" in again.search("Ann", "dog Biscuit", k=1)[0].memory.text
    assert enc.texts == embedded + 1  # only the query was embedded
    m = next(m for m, _ in again.memories("Ann") if "Biscuit" in m.text)
    assert (m.strength, m.last_recall_date) == (2, "2023-05-01")


@pytest.mark.parametrize("action", ["archive", "delete"])
def test_forgetting_pass(make_bank, clock, action) -> None:  # type: ignore[no-untyped-def]
    # The calendar alone, tau 1 day, no cold tier: a forgotten memory is out of retrieval.
    bank = make_bank(forgetting={"mode": "paper", "tau": 1.0, "policy": "threshold", "threshold": 0.5,
                                 "action": action, **CALENDAR_ONLY})
    old = bank.add_turn("Ann", "An old memory about violins.", "ok", at="2023-04-01T10:00")
    bank.add_turn("Ann", "A fresh memory about violas.", "ok", at="2023-05-01T10:00")
    bank.set_layer("Ann", MemoryKind.DAILY_SUMMARY, "Ann talked about violins.", date="2023-04-01")
    report = bank.forget("Ann", now="2023-05-01")["Ann"]
    assert old.memory_id in report.forgotten and report.action == action
    assert all("old memory" not in h.memory.text for h in bank.search("Ann", "violins", k=5, now="2023-05-01"))
    if action == "archive":
        bank.restore("Ann", [old.memory_id])
        assert any("old memory" in h.memory.text for h in bank.search("Ann", "violins", k=5, now="2023-05-01"))
    else:
        assert old.memory_id not in {m.memory_id for m, _ in bank.memories("Ann")}


def test_delete_memory_and_user(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    m = bank.add_turn("Ann", "My PIN is 4321.", "Keep it private!", at="2023-05-01T10:00")
    bank.set_layer("Ann", MemoryKind.DAILY_SUMMARY, "Ann shared her PIN 4321.", date="2023-05-01")
    bank.set_layer("Ann", MemoryKind.GLOBAL_PORTRAIT, "Trusting; PIN 4321.")
    bank.add_turn("Bob", "Bob's note", "ok")
    bank.delete_memory("Ann", m.memory_id)
    assert "4321" not in str([mem.text for mem, _ in bank.memories("Ann")]) + str(bank.profile("Ann"))
    assert bank.layer("Ann", MemoryKind.GLOBAL_PORTRAIT).stale
    bank.add_turn("Ann", "Another note", "ok")
    assert bank.delete_user("Ann") == 3  # two scrubbed layers and the new turn
    assert bank.users() == ["Bob"]
    with pytest.raises(UserNotFoundError):
        bank.search("Ann", "note")
    assert bank.stats()["memories"]["turn"] == 1


def test_import_export_round_trip(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    import_data(bank, copy.deepcopy(LEGACY))
    assert export_data(bank) == LEGACY
    bank.search("Jason", "I like chess", k=1, now="2023-05-03", reinforce=True)
    turn = export_data(bank)[" Jason "]["history"]["2023-04-27"][1]
    assert turn["memory_strength"] == 2 and turn["last_recall_date"] == "2023-05-03"


def test_paper_data_round_trips(make_bank) -> None:  # type: ignore[no-untyped-def]
    data = load_memory_file(paper_file("en", "memory"))
    bank = make_bank()
    import_data(bank, copy.deepcopy(data))
    assert json.dumps(export_data(bank), sort_keys=True) == json.dumps(data, sort_keys=True)


def test_reembed_with_another_encoder(make_bank) -> None:  # type: ignore[no-untyped-def]
    from memory_bank.embeddings import HashingEncoder

    make_bank().add_turn("Ann", "I love jazz.", "Me too.")
    other = make_bank(encoder=HashingEncoder(32))
    with pytest.raises(EncoderMismatchError, match="hashing-64"):  # not a silent []
        other.search("Ann", "jazz", k=1)
    assert other.reembed() == 1  # switches the store to this encoder
    assert other.search("Ann", "jazz", k=1)
    assert other.reembed() == 0


def test_export_is_a_consistent_snapshot_while_writes_continue(make_bank) -> None:  # type: ignore[no-untyped-def]
    import threading

    bank, writer_bank = make_bank(), make_bank()  # the writer is another server
    for u in ("a", "b"):
        bank.add_turn(u, "start", "ok", at="2023-05-01T09:00")
    stop = threading.Event()

    def writer() -> None:  # a and b grow in lockstep
        i = 0
        while not stop.is_set():
            writer_bank.add_turn("a", f"a {i}", "ok", at="2023-05-01T10:00")
            writer_bank.add_turn("b", f"b {i}", "ok", at="2023-05-01T10:00")
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    try:
        for _ in range(10):
            snap = export_data(bank)
            na = len(snap["a"]["history"]["2023-05-01"])
            nb = len(snap["b"]["history"]["2023-05-01"])
            assert nb in (na, na - 1)  # never ahead of a, never two behind
    finally:
        stop.set()
        t.join()


class CountingStore:
    """Delegates to a store and records each read of memory rows: the method, its arguments
    and how many rows it handed back."""

    READS = ("memories", "memories_by_ids", "get_memory", "last_turn")

    def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
        self.inner = inner
        self.reads: list[tuple[str, dict, int]] = []

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        attr = getattr(self.inner, name)
        if name not in self.READS:
            return attr

        def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
            out = attr(*args, **kwargs)
            n = len(out) if isinstance(out, list) else int(out is not None)
            self.reads.append((name, kwargs, n))
            return out

        return counted

    def rows_read(self) -> int:
        n = sum(r[2] for r in self.reads)
        self.reads.clear()
        return n


def test_single_memory_operations_never_read_the_whole_history(make_bank) -> None:  # type: ignore[no-untyped-def]
    """Reinforcing, deleting, restoring or reading one memory (or one day) reads that memory or
    that day's rows, not the user's whole history: a user with 400 turns over 40 days."""
    from memory_bank import Memory

    bank = make_bank(forgetting={"mode": "off"})  # no pass takes the days read below out of the history
    turns = [
        Memory(memory_id=f"Ann_2023-01-{d + 1:02d}_{t}", user="Ann", kind=MemoryKind.TURN,
               date=f"2023-01-{d + 1:02d}", turn=t, text=f"day {d} turn {t} about topic {d * 10 + t}",
               query=f"day {d} turn {t} about topic {d * 10 + t}", response="")
        for d in range(20) for t in range(10)
    ] + [
        Memory(memory_id=f"Ann_2023-02-{d + 1:02d}_{t}", user="Ann", kind=MemoryKind.TURN,
               date=f"2023-02-{d + 1:02d}", turn=t, text=f"february {d} turn {t}", query=f"february {d} turn {t}",
               response="")
        for d in range(20) for t in range(10)
    ]
    bank.add_memories("Ann", turns)
    bank.set_layer("Ann", MemoryKind.DAILY_SUMMARY, "a summary of the 5th", date="2023-01-05")
    bank.set_layer("Ann", MemoryKind.GLOBAL_PORTRAIT, "Ann likes topics.")
    spy = CountingStore(bank.storage)
    bank.storage = spy
    day = 10  # a day's turns, the most a single-memory operation may read

    bank.reinforce("Ann", ["Ann_2023-01-03_4", "Ann_2023-02-07_1"], now="2023-03-01")
    assert spy.rows_read() == 2
    bank.archive("Ann", ["Ann_2023-01-03_5", "Ann_2023-01-03_6"])  # hidden: the day is re-indexed
    assert spy.rows_read() <= 2 + day
    bank.restore("Ann", ["Ann_2023-01-03_5"])
    assert spy.rows_read() <= 1 + day
    deleted = bank.delete_memory("Ann", "Ann_2023-01-04_3")  # a turn inside a day: its neighbours are relinked
    assert deleted.turn == 3 and spy.rows_read() <= 1 + day
    assert len(bank.history("Ann", date="2023-01-04")) == 9 and spy.rows_read() == 9
    assert bank.layer("Ann", MemoryKind.DAILY_SUMMARY, "2023-01-05") is not None and spy.rows_read() == 1
    portrait = bank.layer("Ann", MemoryKind.GLOBAL_PORTRAIT)
    assert portrait is not None and spy.rows_read() == 1
    assert (portrait.text, portrait.stale) == ("", True)  # blanked by the deletion, to be regenerated
    assert bank.purge_archived("Ann") == 1 and spy.rows_read() <= day  # the purged turn's day: relinked
    hits = bank.search("Ann", "topic 123", k=3, now="2023-03-01", reinforce=True)
    assert len(hits) == 3 and spy.rows_read() <= 3
    # No read above listed the history: every memories() call named rowids or a date.
    bank.reinforce("Ann", ["Ann_2023-02-09_9"], now="2023-03-02")
    bank.delete_memory("Ann", "Ann_2023-02-09_0")
    assert all(
        name != "memories" or kwargs.get("rowids") is not None or kwargs.get("date") is not None
        for name, kwargs, _ in spy.reads
    ), spy.reads
    # ...and the results are right: strengths, archive flags, the relinked neighbour's context.
    mems = {m.memory_id: m for m, _ in bank.memories("Ann")}
    assert mems["Ann_2023-01-03_4"].strength == 2 and mems["Ann_2023-01-03_4"].last_recall_date == "2023-03-01"
    assert not mems["Ann_2023-01-03_5"].archived and "Ann_2023-01-03_6" not in mems  # purged
    assert "Ann_2023-01-04_3" not in mems and "Ann_2023-02-09_0" not in mems


def test_the_store_remembers_its_encoder(make_bank) -> None:  # type: ignore[no-untyped-def]
    """Issue 15, item 6, on every backend: the first vectors record the store's encoder; another
    encoder asked for by name is refused with the store's name and the fix; none asked for (only
    a language) uses the store's encoder; nothing is written by a refused add."""
    from memory_bank.embeddings import HashingEncoder
    from memory_bank.encoder_identity import NAME_KEY

    bank = make_bank()
    bank.add_turn("Ann", "I love jazz.", "Me too.")
    assert bank.storage.meta()[NAME_KEY] == "hashing-64"
    other = make_bank(encoder=HashingEncoder(32))
    with pytest.raises(EncoderMismatchError, match=r"'hashing-64' \(64-d\).*--encoder hashing-64"):
        other.search("Ann", "jazz", k=1)
    with pytest.raises(EncoderMismatchError):
        other.add_turn("Bob", "hello")
    assert not bank.has_user("Bob")
    from memory_bank import MemoryBank
    from memory_bank.config import load_config

    plain = MemoryBank(load_config(None, store=bank.config.store, language="zh"), storage=bank.storage)
    assert plain.encoder.name == "hashing-64" and plain.search("Ann", "jazz", k=1)
