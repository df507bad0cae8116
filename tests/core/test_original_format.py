"""Import/export of the original memory file: lossless round trip, legacy shapes, bad files."""

from __future__ import annotations

import copy
import hashlib
import json

import pytest

from memory_bank import MemoryBank, MemoryFileError, MemoryKind
from memory_bank.original_format import export_data, import_data, load_memory_file
from tests.conftest import paper_file

LEGACY = {
    " Jason ": {
        "name": "Jason",
        "history": {
            "2023-04-27": [["Hi, I'm Jason.", "Hello Jason!"], {"query": "I like chess.", "response": "Nice!"}],
            "2023-04-28": [],
            "2023-04-29": [
                {"query": "I lost a game.", "response": "Next time!", "memory_strength": 3,
                 "memory_id": "Jason_2023-04-29_0", "last_recall_date": "2023-05-01", "mood": "sad"}
            ],
        },
        "summary": {"2023-04-27": "Jason introduced himself and his chess hobby.",
                    "2023-04-29": {"content": "Jason lost a chess game.", "memory_strength": 2,
                                   "memory_id": "Jason_2023-04-29_summary", "last_recall_date": "2023-05-02"}},
        "personality": {"2023-04-27": "Friendly and competitive."},
        "overall_history": "Jason plays chess.",
        "overall_personality": "Competitive but warm.",
        "meta_information": {"name": "Jason", "hobbies": "chess"},
        "custom_field": [1, 2, 3],
    },
    "Linda": {"name": "Linda", "history": {"2023-05-01": [{"query": "Hello", "response": "Hi Linda"}]},
              "summary": {}, "personality": {}, "overall_history": ""},
}


def _roundtrip(make_bank, tmp_path, data, name="rt"):  # type: ignore[no-untyped-def]
    bank = make_bank(tmp_path / name)
    import_data(bank, copy.deepcopy(data))
    return bank, export_data(bank)


def test_legacy_shapes_round_trip_exactly(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    bank, out = _roundtrip(make_bank, tmp_path, LEGACY)
    assert out == LEGACY
    assert bank.users() == ["Jason", "Linda"]  # stray spaces stripped for lookups
    rows = {m.memory_id: m for m, _ in bank.memories("Jason")}
    assert rows["Jason_2023-04-29_0"].strength == 3
    assert rows["Jason_2023-04-29_0"].last_recall_date == "2023-05-01"
    assert rows["Jason_2023-04-29_summary"].kind is MemoryKind.DAILY_SUMMARY
    assert bank.profile("Jason") == {"global_summary": "Jason plays chess.", "global_portrait": "Competitive but warm."}


def test_every_memory_keeps_its_id_through_an_export_after_a_deletion(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Records imported without ids were exported without them: after a deletion the day's
    later turns moved up a place, and an import of that export gave them the deleted turn's
    id, so a retried delete by id removed another memory."""
    bank, _ = _roundtrip(make_bank, tmp_path, LEGACY)
    bank.delete_memory("Jason", "Jason_2023-04-27_0")
    before = {m.memory_id: m.text for m, _ in bank.memories("Jason") if m.text}  # (the deletion blanked the globals)
    again = make_bank(tmp_path / "again")
    import_data(again, export_data(bank))
    assert {m.memory_id: m.text for m, _ in again.memories("Jason") if m.text} == before
    assert export_data(again) == export_data(bank)


def test_a_recall_at_the_largest_strength_keeps_it_and_the_export_imports(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A recall of a memory at the file format's largest strength went past it (an export the
    import then refused; PostgreSQL's integer column overflows)."""
    from memory_bank.records import MAX_STRENGTH

    record = {"query": "I like tea", "response": "ok", "memory_strength": MAX_STRENGTH,
              "memory_id": "A_2023-05-01_0", "last_recall_date": "2023-05-01"}  # fmt: skip
    bank, _ = _roundtrip(make_bank, tmp_path, {"A": {"history": {"2023-05-01": [record]}}})
    bank.reinforce("A", ["A_2023-05-01_0"], now="2023-05-02")
    [(memory, _)] = bank.memories("A")
    assert memory.strength == MAX_STRENGTH and memory.last_recall_date == "2023-05-02"
    again = make_bank(tmp_path / "again")
    import_data(again, export_data(bank))
    assert again.memories("A")[0][0].strength == MAX_STRENGTH


def test_a_recall_date_before_the_memorys_own_day_is_refused(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Its forgetting clock counted from the earlier date: learned on 2023-05-01, "recalled" on
    2020-01-01, it had retention 0 the next day and was forgotten."""
    turn = {"query": "My sister moved to Lisbon", "response": "ok", "last_recall_date": "2020-01-01"}
    summary = {"content": "A day in Lisbon.", "last_recall_date": "2023-04-30"}
    for data in ({"A": {"history": {"2023-05-01": [turn]}}}, {"A": {"history": {}, "summary": {"2023-05-01": summary}}}):
        bank = make_bank(tmp_path / f"s{len(str(data))}")
        with pytest.raises(MemoryFileError, match=r"is before the memory's own day 2023-05-01.*set it to that day or later"):
            import_data(bank, copy.deepcopy(data))
        assert not bank.has_user("A")


def test_a_turns_time_is_given_back_as_the_file_spelled_it_after_a_recall(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The store keeps whole seconds; the file's spelling came back only while the turn was
    untouched, and one recall changed "…10:00:00.250000+02:00" to "…10:00:00+02:00"."""
    times = ["2023-05-01T10:00:00.250000+02:00", "2023-05-01T11:00:00Z", "2023-05-01"]
    turns = [{"query": f"q{i}", "response": "r", "timestamp": t} for i, t in enumerate(times)]
    bank, _ = _roundtrip(make_bank, tmp_path, {"A": {"history": {"2023-05-01": turns}}})
    bank.reinforce("A", ["A_2023-05-01_0", "A_2023-05-01_1", "A_2023-05-01_2"], now="2023-05-03")
    assert [t["timestamp"] for t in export_data(bank)["A"]["history"]["2023-05-01"]] == times


def test_a_recall_date_spelled_loosely_is_read_as_its_day_and_given_back_as_spelled(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """" 2023-05-03 " passed the import's check but was stored as given, and every later search,
    add and forgetting pass of the user failed on it (fromisoformat)."""
    data = copy.deepcopy(LEGACY)
    turns = data[" Jason "]["history"]["2023-04-29"]
    turns[0]["last_recall_date"] = " 2023-05-03 "
    data[" Jason "]["summary"]["2023-04-29"]["last_recall_date"] = "2023-05-02T10:00:00"
    bank, out = _roundtrip(make_bank, tmp_path, data)
    assert out == data  # the file's spellings back
    rows = {m.memory_id: m for m, _ in bank.memories("Jason")}
    assert rows["Jason_2023-04-29_0"].last_recall_date == "2023-05-03"
    assert rows["Jason_2023-04-29_summary"].last_recall_date == "2023-05-02"
    assert bank.search("Jason", "lost a game", k=1, now="2023-05-20")  # the user still works
    bank.add_turn("Jason", "Rematch tomorrow.", "Good luck!", at="2023-05-20T10:00")
    bank.forget("Jason", now="2023-05-21")
    bank.reinforce("Jason", ["Jason_2023-04-29_0"], now="2023-05-22")
    again = export_data(bank)[" Jason "]["history"]["2023-04-29"][0]
    assert again["last_recall_date"] == "2023-05-22"  # a new recall is written as a day


def test_turns_added_to_a_day_whose_imported_ids_have_gaps_are_all_stored(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The original code leaves gaps in a day's ids where it deleted turns (_0, _3): the second
    turn added that day took the number 3 again and was refused (UNIQUE constraint), lost."""
    data = {"Ann": {"name": "Ann", "history": {"2023-05-01": [
        {"query": "first", "response": "ok", "memory_id": "Ann_2023-05-01_0"},
        {"query": "fourth", "response": "ok", "memory_id": "Ann_2023-05-01_3"},
    ]}, "summary": {}, "personality": {}}}
    bank, _ = _roundtrip(make_bank, tmp_path, data)
    added = [bank.add_turn("Ann", f"later {i}", "ok", at=f"2023-05-01T2{i}:00") for i in range(3)]
    ids = [m.memory_id for m, _ in bank.memories("Ann")]
    assert len(ids) == len(set(ids)) == 5
    assert all(m.memory_id in ids for m in added)
    assert export_data(bank)["Ann"]["history"]["2023-05-01"][:2] == data["Ann"]["history"]["2023-05-01"]


def test_state_fields_given_with_their_default_values_round_trip_until_the_memory_changes(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """"archived": false was dropped, {"hidden": true, "archived": false} came back archived,
    "memory_id": null came back as an id, and a given strength added fields the record lacked."""
    data = {"Ann": {"name": "Ann", "history": {"2023-05-01": [
        {"query": "a", "response": "b", "archived": False},
        {"query": "c", "response": "d", "hidden": True, "archived": False},
        {"query": "e", "response": "f", "memory_id": None},
        {"query": "g", "response": "h", "hidden": False, "memory_strength": 2},
    ]}, "summary": {"2023-05-01": {"content": "s", "archived": False}}, "personality": {}}}
    bank, out = _roundtrip(make_bank, tmp_path, data)
    assert out == data
    rows = {m.query: m for m, _ in bank.memories("Ann") if m.kind is MemoryKind.TURN}
    assert rows["c"].hidden and rows["c"].archived  # hidden is never retrieved, whatever "archived" says
    bank.restore("Ann", [rows["c"].memory_id])  # the state changes: the record says what it is now
    bank.reinforce("Ann", [rows["a"].memory_id], now="2023-05-03")
    turns = export_data(bank)["Ann"]["history"]["2023-05-01"]
    assert "hidden" not in turns[1] and turns[1].get("archived") is not True
    assert turns[0]["memory_strength"] == 2 and turns[0]["last_recall_date"] == "2023-05-03"
    assert turns[2:] == data["Ann"]["history"]["2023-05-01"][2:]  # untouched: as given


def test_reinforcement_shows_up_in_export(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    bank, _ = _roundtrip(make_bank, tmp_path, LEGACY)
    bank.search("Jason", "I like chess", k=1, now="2023-05-03", reinforce=True)
    turn = export_data(bank)[" Jason "]["history"]["2023-04-27"][1]
    assert turn["memory_strength"] == 2 and turn["last_recall_date"] == "2023-05-03"
    assert turn["memory_id"] == "Jason_2023-04-27_1"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_paper_data_round_trips_without_loss(make_bank, tmp_path, lang) -> None:  # type: ignore[no-untyped-def]
    path = paper_file(lang, "memory")
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    data = load_memory_file(path)
    bank, out = _roundtrip(make_bank, tmp_path, data)
    assert out == data
    assert json.dumps(out, ensure_ascii=False) == json.dumps(data, ensure_ascii=False)  # same key order too
    # import -> export -> import gives identical data again
    _, again = _roundtrip(make_bank, tmp_path, out, name="rt2")
    assert again == data
    assert sum(1 for u in bank.users() for _ in bank.history(u)) == 566
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before  # the input is never touched


def test_importing_an_existing_user_needs_replace(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    bank, _ = _roundtrip(make_bank, tmp_path, LEGACY)
    assert import_data(bank, copy.deepcopy(LEGACY)) == {}  # the same records again: already imported
    changed = copy.deepcopy(LEGACY)
    changed[" Jason "]["overall_history"] = "a different history"
    with pytest.raises(ValueError, match="--replace"):
        import_data(bank, changed)
    assert export_data(bank) == LEGACY
    import_data(bank, copy.deepcopy(changed), replace=True)
    assert export_data(bank) == changed


def test_replace_with_the_file_imported_before_restores_it(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Importing the same file again with replace gave nothing back (the user was "already
    imported from this record"): what was deleted stayed deleted, what was added stayed."""
    bank, _ = _roundtrip(make_bank, tmp_path, LEGACY)
    bank.delete_memory("Jason", "Jason_2023-04-29_0")
    bank.add_turn("Jason", "Something said after the import.", "ok", at="2023-05-05T10:00")
    assert import_data(bank, copy.deepcopy(LEGACY), replace=True) == {"Jason": 8, "Linda": 1}
    assert export_data(bank) == LEGACY


@pytest.mark.parametrize(
    "content, match",
    [
        (b"{not json", "not valid JSON"),
        (b'{"a": {"history": {"2023-04-27": [' + b"{}" * 0 + b'{"query": "q"', "not valid JSON"),
        (b"[1, 2]", "expected an object mapping user names"),
        (b'{"a": 5}', "expected an object, got int"),
        (b'{"a": {"history": []}}', "expected an object keyed by date"),
        (b'{"a": {"history": {"yesterday": []}}}', "not a date"),
        (b'{"a": {"history": {"2023-02-30": []}}}', "not a date"),
        (b'{"a": {"history": {"2023-04-27": [{"query": 1, "response": "r"}]}}}', "'query' must be a string"),
        (b'{"a": {"history": {"2023-04-27": [["only one"]]}}}', r"\[query, response\]"),
        (b'{"a": {"history": {"2023-04-27": [{"query": "q", "response": "r", "memory_strength": 0}]}}}',
         "memory_strength"),
        (b'{"a": {"summary": {"2023-04-27": 42}}}', "summary 2023-04-27"),
        (b'{"a": {"history": {"2023-04-27": [{"query": "q", "response": "r", "timestamp": "noon"}]}}}', "timestamp"),
        (b'{"a": {"history": {"2023-04-27": [{"query": "q", "response": "r", "weight": 0}]}}}', "weight must be"),
        (b'{"a": {"history": {"2023-04-27": [{"query": "q", "response": "r", "weight": NaN}]}}}', "weight must be"),
        (b'{"": {}}', "empty"),
        (b'{"a\\u0000b": {}}', "control"),
        (b"\xff\xfe\x00garbage", "not UTF-8"),
        (b'{"a": {"meta_information": {"n": ' + b"9" * 5001 + b"}}}", "cannot be read"),
    ],
)
def test_malformed_files_are_refused_and_left_untouched(tmp_path, content, match) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(MemoryFileError, match=match):
        load_memory_file(path)
    assert path.read_bytes() == content


def test_export_of_new_turns_uses_the_forgetting_format(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    bank: MemoryBank = make_bank()
    bank.add_turn("Ann", "I bake bread.", "Yum!", at="2023-05-01T10:00")
    bank.set_layer("Ann", MemoryKind.DAILY_PERSONALITY, "Cheerful.", date="2023-05-01")
    out = export_data(bank)["Ann"]
    assert out["history"]["2023-05-01"] == [
        {"query": "I bake bread.", "response": "Yum!", "timestamp": "2023-05-01T10:00:00",
         "memory_strength": 1, "memory_id": "Ann_2023-05-01_0", "last_recall_date": None}
    ]
    assert out["personality"] == {"2023-05-01": "Cheerful."}
    # and it imports back
    again = make_bank(tmp_path / "again")
    import_data(again, out and {"Ann": out})
    assert export_data(again)["Ann"] == out


def test_an_export_never_overwrites_a_store_or_a_directory(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``export --out STORE/memorybank.sqlite3`` replaced the database with JSON: every memory,
    vector and state the file format cannot hold, gone."""
    from memory_bank import InvalidInputError
    from memory_bank.original_format import write_json_atomic

    bank, out = _roundtrip(make_bank, tmp_path, LEGACY)
    db = tmp_path / "rt" / "memorybank.sqlite3"
    notes = tmp_path / "notes.txt"
    notes.write_text("my own notes", encoding="utf-8")
    for target in (db, notes, tmp_path):
        before = target.read_bytes() if target.is_file() else None
        with pytest.raises(InvalidInputError, match=r"a database|not JSON|directory"):
            write_json_atomic(target, out)
        assert before is None or target.read_bytes() == before
    assert export_data(bank) == LEGACY
    settings = tmp_path / "tsconfig.json"  # JSON, but another program's
    settings.write_text('{"compilerOptions": {"strict": true}}', encoding="utf-8")
    with pytest.raises(InvalidInputError, match="JSON that is not a memory file"):
        write_json_atomic(settings, out)
    assert json.loads(settings.read_text(encoding="utf-8")) == {"compilerOptions": {"strict": True}}
    # nor does it import as a user named 'compilerOptions' (which export then called not a memory file)
    with pytest.raises(MemoryFileError, match=r"user 'compilerOptions': has none of a memory file's fields"):
        load_memory_file(settings)
    earlier = tmp_path / "earlier.json"
    earlier.write_text("{}", encoding="utf-8")
    write_json_atomic(earlier, out)  # an earlier export is replaced
    assert json.loads(earlier.read_text(encoding="utf-8")) == LEGACY
    write_json_atomic(earlier, {"Ann": {}})  # and so is a memory file
    assert json.loads(earlier.read_text(encoding="utf-8")) == {"Ann": {}}


def test_a_directory_given_as_the_memory_file_is_named_as_such(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(MemoryFileError, match="is not a regular file"):
        load_memory_file(tmp_path)
    with pytest.raises(MemoryFileError, match="does not exist"):
        load_memory_file(tmp_path / "missing.json")


def test_a_store_exported_and_imported_again_forgets_exactly_as_before(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The export dropped each turn's time and content weight: imported again, a personal
    statement (weight 2) faded like small talk and was forgotten a month early."""
    bank: MemoryBank = make_bank()
    bank.add_turn("Ann", "I adopted a cat named Miso.", "Lovely!", at="2023-05-01T18:30")
    bank.add_turn("Ann", "ok thanks", "sure", at="2023-05-01T18:31")
    data = export_data(bank)
    again = make_bank(tmp_path / "again")
    import_data(again, json.loads(json.dumps(data)))

    def state(b: MemoryBank) -> list[tuple[str, str | None, float, int]]:
        return [(m.memory_id, m.timestamp, m.weight, m.strength) for m, _ in b.memories("Ann")]

    assert state(again) == state(bank) and {w for _, _, w, _ in state(bank)} == {2.0, 0.25}
    assert export_data(again) == data
    forgotten = [set(b.forget("Ann", now="2023-05-31")["Ann"].forgotten) for b in (bank, again)]
    assert forgotten[0] == forgotten[1] == {"Ann_2023-05-01_1"}


def test_an_empty_user_record_comes_back_empty(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    bank: MemoryBank = make_bank()
    import_data(bank, {"Ann": {}, "Bo": {"name": "Bo"}})
    assert export_data(bank) == {"Ann": {}, "Bo": {"name": "Bo"}}  # not six default fields


def test_a_summary_due_to_be_made_again_stays_due_after_export_and_import(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Export dropped the stale flag: a summary blanked by a deletion, or one that no longer
    covered its day's later turns, came back finished and was never made again."""
    bank = make_bank()
    bank.add_turn("Ann", "I like tea.", "Green or black?", at="2023-05-01T10:00")
    bank.set_layer("Ann", MemoryKind.DAILY_SUMMARY, "Ann likes tea.", date="2023-05-01")
    bank.set_layer("Ann", MemoryKind.DAILY_PERSONALITY, "Calm.", date="2023-05-01")
    bank.add_turn("Ann", "I went hiking too.", "Nice!", at="2023-05-01T11:00")  # the day's layers are stale
    bank.set_layer("Ann", MemoryKind.DAILY_PERSONALITY, "", date="2023-05-01")  # as a deletion leaves it
    data = export_data(bank)
    assert data["Ann"]["summary"]["2023-05-01"]["stale"] is True
    other = make_bank(store=str(tmp_path / "other"))
    import_data(other, data)
    summary = other.layer("Ann", MemoryKind.DAILY_SUMMARY, "2023-05-01")
    personality = other.layer("Ann", MemoryKind.DAILY_PERSONALITY, "2023-05-01")
    assert summary is not None and (summary.text, summary.stale) == ("Ann likes tea.", True)
    assert personality is not None and (personality.text, personality.stale) == ("", True)
    assert export_data(other)["Ann"]["summary"] == data["Ann"]["summary"]
    original = {"Bob": {"history": {"2023-05-01": [["hi", "hello"]]}, "summary": {"2023-05-01": ""}}}
    import_data(other, copy.deepcopy(original))  # an original file's empty summary: to be made
    blank = other.layer("Bob", MemoryKind.DAILY_SUMMARY, "2023-05-01")
    assert blank is not None and blank.stale
    assert export_data(other, ["Bob"])["Bob"] == original["Bob"]  # still given back as it was
    bad = {"Cy": {"summary": {"2023-05-01": {"content": "x", "stale": "yes"}}}}
    with pytest.raises(MemoryFileError, match="stale must be true or false"):
        import_data(other, bad)


def test_imported_turns_are_weighted_as_added_ones(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Turns of an original file (which has no weights) all got weight 1: small talk imported was
    kept as long as a personal statement, unlike the same words added in a chat."""
    said = [("Hi!", "Hello!"), ("My sister moved to Lisbon last spring for her new job.", "Big change!")]
    added = make_bank()
    for q, r in said:
        added.add_turn("Ann", q, r, at="2023-05-01T10:00")
    data = {"Ann": {"history": {"2023-05-01": [[q, r] for q, r in said]}}}
    imported = make_bank(store=str(tmp_path / "imported"))
    import_data(imported, copy.deepcopy(data))
    weights = [m.weight for m in imported.history("Ann")]
    assert weights == [m.weight for m in added.history("Ann")] and weights[0] < weights[1]
    assert export_data(imported)["Ann"]["history"] == data["Ann"]["history"]  # still given back as it was


def test_an_import_that_fails_midway_says_which_users_are_in(make_bank, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A full disk after the first user said 'nothing of this change was written', though the
    first user had been imported (or replaced: their old memories gone). It names who is in
    and who is not, and the same import run again finishes it."""
    from memory_bank.errors import StoreError
    from memory_bank.original_format import import_data

    bank = make_bank()
    data = {
        u: {"name": u, "history": {"2023-05-01": [{"query": f"I am {u}", "response": "hi"}]}}
        for u in ("Ann", "Ben", "Cat")
    }
    real, calls = bank.import_user, []

    def full_after_one(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args[0])
        if len(calls) == 2:
            raise StoreError("the disk holding the store is full; nothing of this change was written")
        return real(*args, **kwargs)

    monkeypatch.setattr(bank, "import_user", full_after_one)
    with pytest.raises(StoreError, match=r"imported 'Ann', then stopped at user 'Ben': .*nothing of user 'Ben' was written.*Not imported: 'Ben', 'Cat'"):
        import_data(bank, data)
    monkeypatch.undo()
    assert import_data(bank, data) == {"Ben": 1, "Cat": 1}  # Ann's record was imported already
    assert sorted(bank.users()) == ["Ann", "Ben", "Cat"]
