"""A user deleted (or replaced by an import) and another created in their place: SQLite gives
the new user the old one's id, and every cache of another process is keyed by that id and
trusted while the user's epoch is the same (a partition, the cold tier's live set, the agent
middleware's memory block). The new user starts above every deleted user's epoch, so no such
cache of the old user is taken for theirs. Run on both backends (PostgreSQL never reuses ids:
the promise holds there trivially, the test guards it)."""

from __future__ import annotations

from memory_bank import MemoryKind
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
