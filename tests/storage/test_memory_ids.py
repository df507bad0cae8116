"""Memory ids are never reused within a store (issue 15, item 5), whatever deleted the memory
that had one: a client's retried ``delete --memory-id`` must find nothing rather than delete a
newer memory. Each way a memory can go is tried here, on SQLite and PostgreSQL; two imports of
one user at once take turns rather than fail with a driver error."""

from __future__ import annotations

import threading

import pytest

from memory_bank import MemoryKind
from memory_bank.errors import MemoryNotFoundError
from memory_bank.records import Memory


def _retry_finds_nothing(bank, user: str, old_ids: list[str], newer: Memory) -> None:  # type: ignore[no-untyped-def]
    assert newer.memory_id not in old_ids
    for old_id in old_ids:
        if old_id in {m.memory_id for m in bank.history(user)}:
            continue  # an id the import itself gave again (the file's own ids)
        with pytest.raises(MemoryNotFoundError):
            bank.delete_memory(user, old_id)  # the client's retry
    assert newer.memory_id in {m.memory_id for m in bank.history(user)}


def test_forgetting_with_action_delete_never_hands_out_a_forgotten_id(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank(
        forgetting={"mode": "paper", "policy": "threshold", "threshold": 0.5, "action": "delete", "daily_pass": False}
    )
    old = [bank.add_turn("Ann", f"old turn {i}", "ok", at=f"2023-05-01T1{i}:00").memory_id for i in range(2)]
    report = bank.forget("Ann", now="2024-05-01")["Ann"]
    assert sorted(report.forgotten) == sorted(old) and bank.history("Ann") == []
    newer = bank.add_turn("Ann", "a turn of that day, told later", "ok", at="2023-05-01T12:00")
    _retry_finds_nothing(bank, "Ann", old, newer)


def test_a_user_deleted_and_created_again_gets_new_ids(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    old = bank.add_turn("Ann", "something I want forgotten", "ok", at="2023-05-01T10:00")
    bank.delete_user("Ann")
    newer = bank.add_turn("Ann", "a new start", "ok", at="2023-05-01T10:00")
    _retry_finds_nothing(bank, "Ann", [old.memory_id], newer)
    assert "Ann" not in str(bank.storage.meta())  # the store keeps a number, not the name


def test_import_replace_never_hands_out_a_replaced_id(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    old = [bank.add_turn("Ann", f"turn {i}", "ok", at=f"2023-05-01T1{i}:00").memory_id for i in range(3)]
    imported = Memory(
        memory_id="Ann_2023-05-01_0", user="Ann", kind=MemoryKind.TURN, date="2023-05-01", turn=0,
        text="from the file", query="from the file", response="",
    )  # fmt: skip
    bank.import_user("Ann", [imported], {})
    newer = bank.add_turn("Ann", "added after the import", "ok", at="2023-05-01T13:00")
    _retry_finds_nothing(bank, "Ann", old, newer)


def test_two_imports_of_one_user_at_once_take_turns(make_bank) -> None:  # type: ignore[no-untyped-def]
    banks = [make_bank(), make_bank()]  # two servers on one store
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def run(i: int) -> None:
        m = Memory(
            memory_id=f"Ann_2023-05-01_{i}", user="Ann", kind=MemoryKind.TURN, date="2023-05-01", turn=0,
            text=f"import {i}", query=f"import {i}", response="",
        )  # fmt: skip
        start.wait()
        try:
            for _ in range(5):
                banks[i].import_user("Ann", [m], {})
        except BaseException as e:  # reported below, with the failing import
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert [m.query for m in banks[0].history("Ann")] in (["import 0"], ["import 1"])  # one whole import


def test_a_reply_recalling_a_memory_deleted_meanwhile_reinforces_nothing(make_bank) -> None:  # type: ignore[no-untyped-def]
    """The reply used the user's latest memory, which the user deleted while it was written:
    SQLite gave the new turn that memory's rowid, and the new turn was reinforced (strength 2,
    recalled on the day it was said) in its own transaction."""
    bank = make_bank()
    bank.add_turn("Ann", "I like tea", "ok", at="2023-05-01T10:00")
    bank.add_turn("Ann", "my cat is called Miso", "cute", at="2023-05-01T11:00")
    used = [h.memory for h in bank.search("Ann", "cat Miso", k=1)]
    bank.delete_memory("Ann", used[0].memory_id)  # in another tab, during the reply
    new = bank.add_turn("Ann", "we moved to Lyon", "nice", at="2023-05-09T12:00", recalled=used)
    stored = {m.memory_id: m for m in bank.history("Ann")}
    assert (stored[new.memory_id].strength, stored[new.memory_id].last_recall_date) == (1, None)
    assert [m.strength for m in stored.values()] == [1, 1]
    # Another tab's turn took the deleted memory's rowid before this reply was stored.
    used = [h.memory for h in bank.search("Ann", "moved Lyon", k=1)]
    bank.delete_memory("Ann", used[0].memory_id)
    other = bank.add_turn("Ann", "a turn of another tab", "ok", at="2023-05-09T13:00")
    bank.add_turn("Ann", "we found a flat", "great", at="2023-05-09T14:00", recalled=used)
    assert [m.strength for m in bank.history("Ann")] == [1, 1, 1], other.memory_id
