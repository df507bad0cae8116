"""The MemoryBank end to end on each backend: add, search, reinforce, forget, delete, export."""

from __future__ import annotations

import copy
import json

import pytest

from memory_bank import MemoryKind, UserNotFoundError
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
    bank = make_bank(forgetting={"mode": "paper", "policy": "threshold", "threshold": 0.5, "action": action})
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
    assert other.search("Ann", "jazz", k=1) == []  # no vectors from this encoder yet
    assert other.reembed() == 1
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
