"""A user deleted (or replaced by an import) and another created in their place: SQLite gave
the new user the old one's id, and every cache of another process is keyed by that id and
trusted while the user's epoch is the same (a partition, the cold tier's live set, the agent
middleware's memory block). The new user starts above every deleted user's epoch, so no such
cache of the old user is taken for theirs; and ids are no longer given twice, so no write
meant for the old user lands in the new one's memories. Run on both backends (PostgreSQL never
reuses ids: the promises hold there trivially, the tests guard them)."""

from __future__ import annotations

import pytest

from memory_bank import MemoryKind, UserNotFoundError
from memory_bank.records import Memory


def _texts(bank, user: str, query: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [r.memory.text for r in bank.search(user, query, k=3) if r.score > 0]


def test_another_process_never_searches_a_deleted_users_index_for_the_next_user(make_bank) -> None:  # type: ignore[no-untyped-def]
    a, b = make_bank(), make_bank()  # two app servers on one store
    a.add_turn("Ann", "my bank password is swordfish", "noted", at="2023-05-01T10:00")
    assert _texts(a, "Ann", "password swordfish")  # a's partition of Ann is cached
    b.delete_user("Ann")
    b.add_turn("Bob", "I play tennis on sundays", "nice", at="2023-05-01T10:00")
    # Ann's words rank nothing of Bob's, and Bob's own words find his memory, in both servers.
    for bank in (a, b):
        assert _texts(bank, "Bob", "password swordfish") == []
        assert _texts(bank, "Bob", "tennis sundays") == ["I play tennis on sundays\nnice"]


def test_another_process_drops_the_old_index_of_a_user_replaced_by_an_import(make_bank) -> None:  # type: ignore[no-untyped-def]
    a, b = make_bank(), make_bank()
    for i, text in enumerate(["I told my sister about the divorce", "the lawyer is called Moreau"]):
        a.add_turn("Ann", text, "ok", at=f"2023-05-01T1{i}:00")
    assert _texts(a, "Ann", "lawyer Moreau")
    kept = Memory(
        memory_id="Ann_2023-05-02_0", user="Ann", kind=MemoryKind.TURN, date="2023-05-02", turn=0,
        text="we planted tomatoes", query="we planted tomatoes", response="",
    )  # fmt: skip
    b.import_user("Ann", [kept], {})  # what the user wants kept: the rest is gone
    for bank in (a, b):
        assert _texts(bank, "Ann", "lawyer Moreau divorce sister") == []
        assert _texts(bank, "Ann", "tomatoes") == ["we planted tomatoes"]


def test_a_write_for_a_deleted_user_is_refused_not_stored_under_the_next_one(make_bank) -> None:  # type: ignore[no-untyped-def]
    """Ann's turn was being stored (her record read, her words embedded) while another process
    deleted her and a new user Bob wrote: SQLite gave Bob Ann's id, and her turn ("my PIN is
    ...") was stored as Bob's, found by Bob's searches. An id now names one user for good."""
    a, b = make_bank(), make_bank()
    a.add_turn("Ann", "hello", "hi", at="2023-05-01T10:00")
    ann = a.user("Ann")
    b.delete_user("Ann")
    b.add_turn("Bob", "Hello, I am Bob.", "Hi Bob!", at="2023-05-01T11:00")
    b.import_user("Cleo", [], {})
    b.import_user("Cleo", [], {})  # replaced by an import: a new record, a new id
    ids = [ann.id, b.user("Bob").id]
    assert len(set(ids)) == 2 and b.user("Cleo").id not in ids
    stored = Memory(
        memory_id="Ann_2023-05-01_1", user="Ann", kind=MemoryKind.TURN, date="2023-05-01", turn=1,
        text="my PIN is 4321", query="my PIN is 4321", response="",
    )  # fmt: skip
    with pytest.raises(UserNotFoundError):
        a.storage.add_turn(ann.id, stored, None, a.encoder_name)  # what add_turn does after its lookup
    with pytest.raises(UserNotFoundError):
        a.storage.upsert_memory(ann.id, stored, None, a.encoder_name)  # what set_layer does
    assert [m.text for m in b.history("Bob")] == ["Hello, I am Bob.\nHi Bob!"]
    assert b.users() == ["Bob", "Cleo"]
