"""Deleting memories in bulk keeps the promise one deletion keeps: no copy of their words is
left. A purge of forgotten or hidden memories and forgetting with ``action: delete`` blank the
summaries that may quote them and re-index the turn that was indexed with a deleted reply; a
hidden memory is not found through a summary either; a recall never destroys what it recalls.
On SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from memory_bank import MemoryBank, MemoryFileError, MemoryKind
from memory_bank.original_format import import_data

SECRET = "Zanzibarquokka"


def _with_layers(bank: MemoryBank) -> None:
    bank.add_turn("Ann", "Tell me something", f"The code is {SECRET}.", at="2023-05-01T10:00")
    bank.add_turn("Ann", "I visited the aquarium", "How nice!", at="2023-05-01T10:05")
    bank.add_turn("Ann", "I like tea", "Green or black?", at="2023-05-02T10:00")
    bank.set_layer("Ann", MemoryKind.DAILY_SUMMARY, f"Ann heard the code {SECRET}.", date="2023-05-01")
    bank.set_layer("Ann", MemoryKind.DAILY_PERSONALITY, f"Curious about {SECRET}.", date="2023-05-01")
    bank.set_layer("Ann", MemoryKind.DAILY_SUMMARY, "Ann likes tea.", date="2023-05-02")
    bank.set_layer("Ann", MemoryKind.GLOBAL_SUMMARY, f"Ann's code is {SECRET}.")
    bank.set_layer("Ann", MemoryKind.GLOBAL_PORTRAIT, f"Knows {SECRET}.")


def _words_left(bank: MemoryBank) -> list[str]:
    """Every memory of Ann that still holds the secret in its text or indexed context, and
    what a search for it finds."""
    held = [
        m.memory_id for m, _ in bank.memories("Ann") if SECRET in m.text or SECRET in (m.context or "")
    ]
    found = [h.memory.memory_id for h in bank.search("Ann", SECRET, k=5, now="2023-05-03") if h.score > 0.01]
    return held + [f"found:{mid}" for mid in found]


@pytest.mark.parametrize("how", ["purge forgotten", "purge hidden", "forget with action delete"])
def test_a_bulk_delete_leaves_no_copy_of_the_words(make_bank, how: str) -> None:  # type: ignore[no-untyped-def]
    forgetting = {"mode": "paper", "tau": 1.0, "content_weights": False, "daily_pass": False}
    bank = make_bank(forgetting={**forgetting, "action": "delete" if "action" in how else "archive"})
    _with_layers(bank)
    first = "Ann_2023-05-01_0"
    if how == "purge hidden":
        bank.archive("Ann", [first], hidden=True)
        assert bank.purge_archived("Ann") == 1
    else:
        recalled = ["Ann_2023-05-01_1", "Ann_2023-05-02_0", "Ann_2023-05-01_summary", "Ann_2023-05-02_summary"]
        for day in ("2023-05-08", "2023-05-09", "2023-05-10"):
            bank.reinforce("Ann", recalled, now=day)  # kept: recalled
        forgotten = bank.forget("Ann", now="2023-05-10")["Ann"].forgotten
        assert first in forgotten and "Ann_2023-05-01_1" not in forgotten
        if how == "purge forgotten":
            bank.purge_archived("Ann")
    assert first not in {m.memory_id for m, _ in bank.memories("Ann")}
    assert _words_left(bank) == []
    follower = bank.storage.get_memory(bank.user("Ann").id, "Ann_2023-05-01_1")
    assert follower is not None and follower.context is None  # re-indexed without the deleted reply
    day = bank.layer("Ann", MemoryKind.DAILY_SUMMARY, "2023-05-01")
    assert day is not None and (day.text, day.stale) == ("", True)  # to be made again without it
    other = bank.layer("Ann", MemoryKind.DAILY_SUMMARY, "2023-05-02")
    assert other is not None and (other.text, other.stale) == ("Ann likes tea.", False)  # untouched


def test_a_hidden_memory_is_not_found_through_a_summary_and_comes_back_with_a_new_one(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    _with_layers(bank)
    bank.archive("Ann", ["Ann_2023-05-01_0"], hidden=True)
    found = [h.memory.memory_id for h in bank.search("Ann", f"the code {SECRET}", k=5, now="2023-05-03")]
    assert "Ann_2023-05-01_summary" not in found and "Ann_2023-05-01_0" not in found
    assert all(SECRET not in v for v in bank.profile("Ann").values())
    summary = bank.layer("Ann", MemoryKind.DAILY_SUMMARY, "2023-05-01")
    assert summary is not None and (summary.text, summary.stale) == ("", True)
    bank.set_layer("Ann", MemoryKind.DAILY_SUMMARY, "Ann visited the aquarium.", date="2023-05-01")  # made again
    bank.restore("Ann", ["Ann_2023-05-01_0"], now="2023-05-03")
    again = bank.layer("Ann", MemoryKind.DAILY_SUMMARY, "2023-05-01")
    portrait = bank.layer("Ann", MemoryKind.GLOBAL_PORTRAIT)
    assert again is not None and again.stale and portrait is not None and portrait.stale  # made again with it


def test_recalling_a_faded_memory_never_deletes_it(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank(forgetting={"mode": "paper", "tau": 1.0, "content_weights": False, "action": "delete"})
    bank.add_turn("Ann", "My daughter's name is Lucia.", "A beautiful name.", at="2023-05-01T10:00")
    hits = bank.search("Ann", "What is my daughter's name?", k=1, now="2023-05-05", reinforce=True)
    assert [h.memory.memory_id for h in hits] == ["Ann_2023-05-01_0"]
    [kept] = bank.history("Ann")
    assert (kept.strength, kept.last_recall_date) == (2, "2023-05-05")
    again = bank.add_turn("Ann", "Lucia starts school.", "Exciting!", at="2023-06-20T10:00", recalled=[kept])
    assert {m.memory_id for m in bank.history("Ann")} == {kept.memory_id, again.memory_id}


def test_a_recall_dated_before_a_memory_never_moves_its_clock_back(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    bank.add_turn("Ann", "I moved to Lisbon.", "Exciting!", at="2023-05-10T10:00")
    bank.reinforce("Ann", ["Ann_2023-05-10_0"], now="2023-05-01")
    [m] = bank.history("Ann")
    assert (m.strength, m.last_recall_date) == (1, None)
    bank.search("Ann", "Lisbon", k=1, now="2023-05-02", reinforce=True)
    [m] = bank.history("Ann")
    assert (m.strength, m.last_recall_date) == (1, None)


def test_an_imported_turn_is_never_overwritten_by_a_summary(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    for mid in ("Ann_2023-05-01_summary", "Ann_overall_history", "Ann_2023-05-02_personality"):
        data = {"Ann": {"history": {"2023-05-01": [{"query": "My passport is X1", "response": "ok", "memory_id": mid}]}}}
        with pytest.raises(MemoryFileError, match="summary layer it is not"):
            import_data(bank, data)
    assert not bank.has_user("Ann")
    moved = {"Ann": {"summary": {"2023-05-01": {"content": "a day", "memory_id": "Ann_2023-05-02_summary"}}}}
    with pytest.raises(MemoryFileError, match="daily summary of 2023-05-01"):
        import_data(bank, moved)
    kept = {"Ann": {"summary": {"2023-05-01": {"content": "a day", "memory_id": "Ann_2023-05-01_summary"}}}}
    import_data(bank, kept)  # a layer's own id is kept
    bank.add_turn("Bob", "hi", "hello", memory_id="note-1")
    bank.storage.upsert_memory(  # a turn under a layer's id, as a store written before the check may have
        bank.user("Bob").id,
        dataclasses_replace(bank.history("Bob")[0], memory_id="Bob_2023-05-01_summary", turn=99),
        None,
        bank.encoder_name,
    )
    with pytest.raises(Exception, match="rename that memory first"):
        bank.set_layer("Bob", MemoryKind.DAILY_SUMMARY, "summary", date="2023-05-01")
    assert "Bob_2023-05-01_summary" in {m.memory_id for m in bank.history("Bob")}


def dataclasses_replace(m, **kw):  # type: ignore[no-untyped-def]
    import dataclasses

    return dataclasses.replace(m, rowid=None, **kw)


@pytest.mark.parametrize("how", ["hide", "purge hidden", "forget with action delete"])
def test_a_daily_summary_gone_in_bulk_leaves_nothing_in_the_global_layers(make_bank, how: str) -> None:  # type: ignore[no-untyped-def]
    forgetting = {"mode": "paper", "tau": 1.0, "content_weights": False, "daily_pass": False}
    bank = make_bank(forgetting={**forgetting, "action": "delete" if "action" in how else "archive"})
    _with_layers(bank)
    if how == "forget with action delete":
        keep = ["Ann_2023-05-01_0", "Ann_2023-05-01_1", "Ann_2023-05-02_0", "Ann_2023-05-02_summary"]
        for day in ("2023-05-08", "2023-05-09", "2023-05-10"):
            bank.reinforce("Ann", keep, now=day)
        assert "Ann_2023-05-01_summary" in bank.forget("Ann", now="2023-05-10")["Ann"].forgotten
    else:
        bank.archive("Ann", ["Ann_2023-05-01_summary"], hidden=True)
        if how == "purge hidden":
            bank.purge_archived("Ann")
    assert all(SECRET not in v for v in bank.profile("Ann").values())
    if how == "hide":  # the hidden summary keeps its words for a restore, and is found by nothing
        assert SECRET in bank.storage.get_memory(bank.user("Ann").id, "Ann_2023-05-01_summary").text  # type: ignore[union-attr]
        assert "Ann_2023-05-01_summary" not in {h.memory.memory_id for h in bank.search("Ann", SECRET, k=5)}


def test_hiding_a_turn_reindexes_the_next_one_and_a_restore_links_it_again(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    _with_layers(bank)
    bank.archive("Ann", ["Ann_2023-05-01_0"], hidden=True)
    found = {h.memory.memory_id: h.score for h in bank.search("Ann", SECRET, k=5, now="2023-05-03")}
    assert found.get("Ann_2023-05-01_1", 0.0) < 0.01  # its words no longer find the turn after it
    follower = bank.storage.get_memory(bank.user("Ann").id, "Ann_2023-05-01_1")
    assert follower is not None and follower.context is None
    bank.restore("Ann", ["Ann_2023-05-01_0"], now="2023-05-03")
    follower = bank.storage.get_memory(bank.user("Ann").id, "Ann_2023-05-01_1")
    assert follower is not None and follower.context == f"The code is {SECRET}."
    bank.archive("Ann", ["Ann_2023-05-01_0"], hidden=True)
    bank.add_turn("Ann", "And another thing", "Yes?", at="2023-05-01T11:00")
    bank.archive("Ann", ["Ann_2023-05-01_1", "Ann_2023-05-01_2"], hidden=False)  # forgotten, not hidden
    assert bank.storage.get_memory(bank.user("Ann").id, "Ann_2023-05-01_0").hidden  # type: ignore[union-attr]


def test_a_forgetting_pass_that_deletes_nothing_blanks_nothing(make_bank) -> None:  # type: ignore[no-untyped-def]
    """A recall in another process between the pass's read and its delete kept the turn, but
    the summaries of its day and the global layers were blanked all the same."""
    bank = make_bank(forgetting={"mode": "paper", "tau": 1.0, "content_weights": False, "action": "delete"})
    _with_layers(bank)
    rowid = bank.storage.get_memory(bank.user("Ann").id, "Ann_2023-05-01_0").rowid  # type: ignore[union-attr]
    bank.storage.delete_memories(bank.user("Ann").id, [rowid or 0], ["2023-05-01"], anchored_before="2023-04-01")
    assert bank.layer("Ann", MemoryKind.DAILY_SUMMARY, "2023-05-01").text  # type: ignore[union-attr]
    assert bank.profile("Ann")["global_summary"]
