"""Storing, numbering, searching, persisting and deleting memories."""

from __future__ import annotations

import sqlite3
import stat

import pytest

from memory_bank import InvalidInputError, MemoryKind, MemoryNotFoundError, StoreError, UserNotFoundError
from memory_bank.errors import EncoderMismatchError
from memory_bank.stores import SCHEMA_VERSION
from memory_bank.stores.sqlite import DB_FILENAME, SQLiteStorage
from tests.conftest import UNDO_SCHEMA_6


def test_turns_keep_their_time_and_are_numbered_per_day(bank) -> None:  # type: ignore[no-untyped-def]
    a = bank.add_turn("Ann", "Morning!", "Hi Ann", at="2023-04-27T08:00:00")
    b = bank.add_turn("Ann", "Lunch was great.", "Glad to hear.", at="2023-04-27T13:00:00")
    c = bank.add_turn("Ann", "New day.", "Welcome back.", at="2023-04-28T09:30:00")
    assert (a.date, a.turn, b.turn, c.turn) == ("2023-04-27", 0, 1, 0)
    assert a.memory_id == "Ann_2023-04-27_0" and c.memory_id == "Ann_2023-04-28_0"
    assert b.timestamp == "2023-04-27T13:00:00"
    assert [m.turn for m in bank.history("Ann", date="2023-04-27")] == [0, 1]


def test_new_turn_is_searchable_immediately(bank) -> None:  # type: ignore[no-untyped-def]
    bank.add_turn("Ann", "My dog is called Biscuit.", "Cute name!")
    bank.add_turn("Ann", "I work as a nurse.", "That is demanding work.")
    hits = bank.search("Ann", "What is my dog called?", k=1)
    assert "Biscuit" in hits[0].memory.text
    assert hits[0].memory.kind is MemoryKind.TURN and hits[0].retention == 1.0


def test_results_are_ranked_and_default_top_k_is_two(bank) -> None:  # type: ignore[no-untyped-def]
    for i, food in enumerate(["pizza", "sushi", "tacos", "ramen"]):
        bank.add_turn("Ann", f"I ate {food} today.", "Yum.", at=f"2023-05-0{i + 1}T12:00")
    hits = bank.search("Ann", "Did I eat sushi?")
    assert len(hits) == 2
    assert "sushi" in hits[0].memory.text
    assert hits[0].score >= hits[1].score


def test_date_named_in_query_prefers_that_day(bank) -> None:  # type: ignore[no-untyped-def]
    bank.add_turn("Ann", "I went to the museum.", "Which one?", at="2023-05-02T10:00")
    bank.add_turn("Ann", "I went to the museum again.", "You love it.", at="2023-05-04T10:00")
    assert bank.search("Ann", "What did I do on May 4th?", k=1)[0].memory.date == "2023-05-04"
    assert bank.search("Ann", "我5月2日做了什么？", k=1)[0].memory.date == "2023-05-02"


def test_restart_rebuilds_the_index_without_re_embedding(make_bank, tmp_path, encoder) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    for i in range(20):
        bank.add_turn("Ann", f"fact number {i} about violins", "ok", at=f"2023-05-01T10:{i:02d}")
    bank.close()
    embedded_before = encoder.texts
    bank2 = make_bank()
    hits = bank2.search("Ann", "fact number 7 violins", k=3)
    assert any("fact number 7" in h.memory.text for h in hits)
    assert encoder.texts == embedded_before + 1  # only the query was embedded


def test_reinforcement_persists_across_restart(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    bank.add_turn("Ann", "I love hiking in the Alps.", "Wonderful.", at="2023-05-01T10:00")
    bank.search("Ann", "hiking", k=1, now="2023-05-03", reinforce=True)
    bank.search("Ann", "hiking", k=1, now="2023-05-04", reinforce=True)
    bank.close()
    m, _ = make_bank().memories("Ann")[0]
    assert m.strength == 3 and m.last_recall_date == "2023-05-04"


def test_writes_from_another_bank_instance_are_seen(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    a = make_bank()
    b = make_bank()  # e.g. another process on the same store
    a.add_turn("Ann", "first memory about gardens", "ok")
    assert b.search("Ann", "gardens", k=1)
    a.add_turn("Ann", "second memory about kayaks", "ok")
    assert "kayaks" in b.search("Ann", "kayaks", k=1)[0].memory.text
    a.delete_memory("Ann", b.search("Ann", "kayaks", k=1)[0].memory.memory_id)
    assert all("kayaks" not in h.memory.text for h in b.search("Ann", "kayaks", k=5))


def test_delete_memory_scrubs_every_summary_that_could_quote_it(bank) -> None:  # type: ignore[no-untyped-def]
    m = bank.add_turn("Ann", "My PIN is 4321.", "Please keep that private!", at="2023-05-01T10:00")
    bank.add_turn("Ann", "I like tea.", "Me too.", at="2023-05-02T10:00")
    bank.set_layer("Ann", MemoryKind.DAILY_SUMMARY, "Ann shared her PIN 4321.", date="2023-05-01")
    bank.set_layer("Ann", MemoryKind.DAILY_PERSONALITY, "Trusting; told her PIN 4321.", date="2023-05-01")
    bank.set_layer("Ann", MemoryKind.DAILY_SUMMARY, "Ann likes tea.", date="2023-05-02")
    bank.set_layer("Ann", MemoryKind.GLOBAL_SUMMARY, "Ann shared a PIN (4321) and likes tea.")
    bank.set_layer("Ann", MemoryKind.GLOBAL_PORTRAIT, "Trusting; PIN 4321.")
    bank.delete_memory("Ann", m.memory_id)
    assert all("4321" not in h.memory.text for h in bank.search("Ann", "PIN 4321", k=10))
    assert all("4321" not in mem.text for mem, _ in bank.memories("Ann"))
    assert "4321" not in str(bank.profile("Ann"))
    for kind, date in [(MemoryKind.DAILY_SUMMARY, "2023-05-01"), (MemoryKind.GLOBAL_SUMMARY, None)]:
        layer = bank.layer("Ann", kind, date)
        assert layer.stale and layer.text == ""  # to be regenerated from what is left
    assert bank.layer("Ann", MemoryKind.DAILY_SUMMARY, "2023-05-02").text == "Ann likes tea."  # other days kept
    with pytest.raises(MemoryNotFoundError):
        bank.delete_memory("Ann", m.memory_id)


def test_delete_user_removes_everything(bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    bank.add_turn("Ann", "secret about Ann", "ok")
    bank.set_layer("Ann", MemoryKind.GLOBAL_PORTRAIT, "Ann is kind.")
    bank.add_turn("Bob", "Bob's note", "ok")
    assert bank.delete_user("Ann") == 2
    assert bank.users() == ["Bob"]
    with pytest.raises(UserNotFoundError):
        bank.search("Ann", "secret")
    db = sqlite3.connect(tmp_path / "store" / DB_FILENAME)
    assert db.execute("SELECT COUNT(*) FROM memories WHERE text LIKE '%Ann%'").fetchone()[0] == 0
    assert db.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0] == 1


def test_layers_and_profile(bank) -> None:  # type: ignore[no-untyped-def]
    assert bank.profile("nobody") == {"global_summary": "", "global_portrait": ""}
    bank.set_layer("Ann", MemoryKind.GLOBAL_PORTRAIT, "Warm, curious; likes gentle humour.")
    bank.set_layer("Ann", MemoryKind.GLOBAL_PORTRAIT, "Warm and curious.")  # replaces
    bank.set_layer("Ann", MemoryKind.DAILY_SUMMARY, "Ann talked about her violin lessons.", date="2023-05-01")
    assert bank.profile("Ann")["global_portrait"] == "Warm and curious."
    hit = bank.search("Ann", "violin lessons", k=1)[0]
    assert hit.memory.kind is MemoryKind.DAILY_SUMMARY and hit.memory.memory_id == "Ann_2023-05-01_summary"
    with pytest.raises(InvalidInputError, match="needs the date"):
        bank.set_layer("Ann", MemoryKind.DAILY_SUMMARY, "x")


@pytest.mark.parametrize(
    "user, query, match",
    [
        ("", "q", "empty"),
        ("   ", "q", "empty"),
        ("a\x00b", "q", "control"),
        ("a\nb", "q", "control"),
        ("x" * 201, "q", "limit"),
        ("Ann", "", "empty"),
        ("Ann", "a\x00", "NUL"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(bank, user, query, match) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidInputError, match=match):
        bank.add_turn(user, query, "r")
    assert bank.stats()["memories"]["turn"] == 0


def test_bad_time_and_k(bank) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidInputError, match="ISO 8601"):
        bank.add_turn("Ann", "q", "r", at="2023-13-45")
    bank.add_turn("Ann", "q", "r")
    with pytest.raises(InvalidInputError, match="at least 1"):
        bank.search("Ann", "q", k=0)
    with pytest.raises(InvalidInputError, match="not a valid date"):
        bank.search("Ann", "q", now="yesterday-ish")


def test_unknown_user_and_missing_store(bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UserNotFoundError, match="no memories for user 'Zed'"):
        bank.search("Zed", "anything")
    with pytest.raises(StoreError, match="no memory store"):
        SQLiteStorage(tmp_path / "nowhere", create=False)
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / DB_FILENAME).write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match=r"not a usable memory store|cannot open|not an SQLite database"):
        SQLiteStorage(junk)
    assert (junk / DB_FILENAME).read_bytes() == b"this is not sqlite" * 100


def test_user_names_with_stray_spaces_resolve(bank) -> None:  # type: ignore[no-untyped-def]
    bank.add_turn(" Jason ", "I play chess.", "Nice.")
    assert bank.search("Jason", "chess", k=1)
    assert bank.search(" Jason ", "chess", k=1)


def test_a_name_with_bytes_that_are_not_utf8_is_refused_in_one_line(bank) -> None:  # type: ignore[no-untyped-def]
    """``--user $'Ann\\xff'`` reaches the bank as a lone surrogate: every call on it raised
    SQLite's UnicodeEncodeError (a traceback from the CLI) instead of the user-name rule's error."""
    bank.add_turn("Ann", "I play chess.", "Nice.")
    for call in (
        lambda: bank.add_turn("Ann\udcff", "q", "r"),
        lambda: bank.search("Ann\udcff", "chess", k=1),
        lambda: bank.has_user("Ann\udcff"),
        lambda: bank.delete_user("Ann\udcff"),
    ):
        with pytest.raises(InvalidInputError, match="U\\+DCFF"):
            call()
    assert bank.users() == ["Ann"] and len(bank.history("Ann")) == 1


def test_a_turn_said_now_is_never_dated_before_the_latest(make_bank, clock) -> None:  # type: ignore[no-untyped-def]
    """``add_turn`` without ``at`` (the agent middleware, the chat memory) after the clock went
    back a day: dated the latest turn's day, not before it; an explicit earlier ``at`` is kept."""
    bank = make_bank()
    bank.add_turn("Kai", "first", "ok")
    clock.advance(hours=-30)
    late = bank.add_turn("Kai", "second, said later", "ok")
    assert late.date == "2023-05-01" and late.turn == 1
    assert [m.query for m in bank.history("Kai")] == ["first", "second, said later"]
    assert bank.add_turn("Kai", "replayed", "ok", at="2023-04-20T09:00").date == "2023-04-20"
    bank.add_turn("Kai", "a note imported with a wrong year", "", at="2099-01-01T09:00")
    assert bank.add_turn("Kai", "said today", "ok").date == "2023-04-30"  # not followed years ahead


def test_store_file_is_private(bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    bank.add_turn("Ann", "q", "r")
    mode = (tmp_path / "store" / DB_FILENAME).stat().st_mode
    assert not mode & (stat.S_IRWXG | stat.S_IRWXO)


def test_newer_schema_is_refused(bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    db = sqlite3.connect(tmp_path / "store" / DB_FILENAME)
    db.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="newer than this package supports"):
        SQLiteStorage(tmp_path / "store")


def test_a_version_1_store_is_migrated_and_forgets_as_before(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank(forgetting={"mode": "off"})  # the 30 turns stay live: the pass reads them all
    for i in range(30):
        bank.add_turn("Ann", f"turn {i} about gardens", "ok", at=f"2023-05-{1 + i % 20:02d}T10:00")
    bank.search("Ann", "gardens", k=3, now="2023-06-01", reinforce=True)
    bank.close()
    db = sqlite3.connect(tmp_path / "store" / DB_FILENAME)  # turn it into the version 1 layout
    db.executescript(
        UNDO_SCHEMA_6 + "DROP INDEX memories_forget_key; ALTER TABLE memories DROP COLUMN forget_key; "
        "DROP INDEX memories_weighted; ALTER TABLE memories DROP COLUMN weight; ALTER TABLE memories DROP COLUMN hidden; "
        "CREATE INDEX memories_forget ON memories (user_id, archived, date, "
        "(CASE kind WHEN 'turn' THEN 0 ELSE 1 END), turn, id, kind, strength, last_recall_date); "
        "UPDATE meta SET value = '1' WHERE key = 'schema_version';"
    )
    db.close()

    storage = SQLiteStorage(tmp_path / "store")
    db = sqlite3.connect(tmp_path / "store" / DB_FILENAME)
    assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    indexes = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert "memories_forget_key" in indexes and "memories_forget" not in indexes
    assert db.execute("SELECT count(*) FROM memories WHERE forget_key IS NULL").fetchone()[0] == 0
    db.close()
    from memory_bank.records import RETRIEVABLE_KINDS
    from memory_bank.stores import Storage

    user = storage.get_user("Ann")
    fast = storage.forget_columns(user.id, RETRIEVABLE_KINDS)
    slow = Storage.forget_columns(storage, user.id, RETRIEVABLE_KINDS)
    assert len(fast.rowids) == 30 and sorted(fast.strengths.tolist())[-3:] == [2.0, 2.0, 2.0]
    for field in ("rowids", "anchors", "strengths"):
        assert getattr(fast, field).tolist() == getattr(slow, field).tolist(), field
    storage.close()


def test_a_version_2_store_gains_content_weights_and_keeps_its_memories(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    bank.add_turn("Ann", "Thanks, bye!", "Bye!", at="2023-05-01T10:00")
    bank.add_turn("Ann", "My brother Tom moved to Oslo for a job at a bakery.", "Oh!", at="2023-05-01T10:05")
    bank.close()
    db = sqlite3.connect(tmp_path / "store" / DB_FILENAME)  # the version 2 layout: no weight column
    db.executescript(
        UNDO_SCHEMA_6 + "DROP INDEX memories_weighted; ALTER TABLE memories DROP COLUMN weight; "
        "ALTER TABLE memories DROP COLUMN hidden; UPDATE meta SET value = '2' WHERE key = 'schema_version';"
    )
    db.close()

    bank = make_bank(forgetting={"mode": "paper", "tau": 10, "policy": "threshold", "content_weights": True})
    db = sqlite3.connect(tmp_path / "store" / DB_FILENAME)
    assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    db.close()
    # The turns stored before weigh 1 (neutral) and nothing was lost; new turns are weighed.
    assert [m.weight for m in bank.history("Ann")] == [1.0, 1.0]
    bank.add_turn("Ann", "Thanks!", "You're welcome.", at="2023-05-02T10:00")
    assert [m.weight for m in bank.history("Ann")] == [1.0, 1.0, 0.25]
    from memory_bank.records import RETRIEVABLE_KINDS
    from memory_bank.stores import Storage

    user = bank.storage.get_user("Ann")
    fast = bank.storage.forget_columns(user.id, RETRIEVABLE_KINDS, weights=True)
    slow = Storage.forget_columns(bank.storage, user.id, RETRIEVABLE_KINDS, weights=True)
    assert fast.weights is not None and slow.weights is not None
    assert fast.weights.tolist() == slow.weights.tolist() == [1.0, 1.0, 0.25]
    # tau 10 * weight 0.25: the new small talk is archived after 2.5 * ln 20 = 7.5 days, the
    # older turns (weight 1) after 30.
    gone = bank.forget("Ann", now="2023-05-12")["Ann"].forgotten
    assert gone == ["Ann_2023-05-02_0"]


def test_changing_encoder_reembeds_only_what_lacks_a_vector(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from memory_bank.embeddings import HashingEncoder

    bank = make_bank()
    bank.add_turn("Ann", "I love jazz.", "Me too.")
    bank.close()
    from memory_bank import MemoryBank

    other = MemoryBank.open(tmp_path / "store", encoder_instance=HashingEncoder(64))
    with pytest.raises(EncoderMismatchError, match="reembed"):  # not a silent []
        other.search("Ann", "jazz", k=1)
    assert other.reembed() == 1  # switches the store to this encoder
    assert other.search("Ann", "jazz", k=1)
    assert other.reembed() == 0
    other.close()
    with pytest.raises(EncoderMismatchError, match="'hashing-64'"):
        make_bank().search("Ann", "jazz", k=1)  # the old encoder is now the wrong one


def test_a_retried_turn_with_a_message_id_is_stored_once(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    first = bank.add_turn("Ann", "I adopted a cat named Miso.", "Lovely!", at="2023-05-01T10:00", memory_id="m-1")
    again = bank.add_turn("Ann", "I adopted a cat named Miso.", "Lovely!", at="2023-05-01T10:00", memory_id="m-1")
    assert (again.rowid, again.memory_id, again.turn) == (first.rowid, "m-1", 0)
    nxt = bank.add_turn("Ann", "Miso sleeps all day.", "Cats do.", at="2023-05-01T10:05")
    assert nxt.turn == 1
    assert [m.memory_id for m, _ in bank.memories("Ann")] == ["m-1", nxt.memory_id]
    assert len(bank.search("Ann", "What is my cat called?", k=5)) == 2  # indexed once
    for bad in ["", "  ", "x_{turn}"]:
        with pytest.raises(InvalidInputError, match="memory_id"):
            bank.add_turn("Ann", "hi", memory_id=bad)
