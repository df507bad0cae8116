"""Two ways out of the live tier, kept apart: forgotten by the curve (archived: the cold tier
still finds it, restorable) and hidden by the user (``bank.archive``: never retrieved, not even
by the cold tier, until restored). Both survive the original memory-file format and a store
made before the distinction existed."""

from __future__ import annotations

import copy
import sqlite3

from memory_bank.config import SELECTIVE_FORGETTING
from memory_bank.original_format import export_data, import_data
from memory_bank.stores.base import SCHEMA_VERSION
from memory_bank.stores.sqlite import DB_FILENAME
from tests.conftest import UNDO_SCHEMA_6

MISO, REX = "Ann_2023-05-01_0", "Ann_2023-05-01_1"
NOW = "2023-06-30"  # 60 days on: both personal turns (time scale 14 days) are forgotten by the curve


def _fill(bank) -> None:  # type: ignore[no-untyped-def]
    bank.add_turn("Ann", "My cat Miso likes tuna and hates rain.", "Sweet.", at="2023-05-01T09:00")
    bank.add_turn("Ann", "My dog Rex likes tuna bones and long walks.", "Fun.", at="2023-05-01T09:05")


def _ids(bank, query: str, **kw) -> list[str]:  # type: ignore[no-untyped-def]
    return [h.memory.memory_id for h in bank.search("Ann", query, k=2, now=NOW, **kw)]


def test_a_hidden_memory_is_never_retrieved_a_forgotten_one_still_is(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank(forgetting=SELECTIVE_FORGETTING)
    _fill(bank)
    assert set(_ids(bank, "who likes tuna")) == {MISO, REX}  # both forgotten, both found (cold tier)
    bank.archive("Ann", [MISO])  # the user hides Miso
    assert _ids(bank, "who likes tuna") == [REX]
    assert _ids(bank, "Miso the cat") == [REX]  # not even a query naming it finds it
    assert bank.forget("Ann", now=NOW)["Ann"].forgotten == [REX]  # the pass forgets Rex, keeps Miso hidden
    assert _ids(bank, "Miso the cat", reinforce=True) == [REX]  # a recall brings back Rex only
    miso, rex = bank.explain("Ann", MISO, now=NOW), bank.explain("Ann", REX, now=NOW)
    assert (miso.status, miso.hidden, miso.archived) == ("hidden", True, True)
    assert (rex.status, rex.hidden, rex.archived) == ("strong", False, False)
    assert miso.reason("en").startswith("hidden: hidden on purpose") and miso.reason("zh").startswith("已隐藏")
    bank.restore("Ann", [MISO], now=NOW)
    assert set(_ids(bank, "Miso the cat")) == {MISO, REX}
    assert bank.explain("Ann", MISO, now=NOW).status == "strong"


def test_hidden_stays_hidden_with_forgetting_off(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank(forgetting={"mode": "off"})
    _fill(bank)
    bank.archive("Ann", [MISO])
    assert _ids(bank, "Miso the cat") == [REX]
    assert bank.explain("Ann", MISO, now=NOW).status == "hidden"


def test_the_memory_file_round_trip_keeps_forgotten_and_hidden(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank(tmp_path / "a", forgetting=SELECTIVE_FORGETTING)
    _fill(bank)
    bank.add_turn("Ann", "I started pottery classes on Tuesdays.", "Nice!", at="2023-06-29T10:00")
    bank.forget("Ann", now=NOW)  # Miso and Rex forgotten by the curve
    bank.archive("Ann", [MISO])  # Miso hidden as well
    data = export_data(bank)
    turns = data["Ann"]["history"]["2023-05-01"]
    assert (turns[0].get("archived"), turns[0].get("hidden")) == (True, True)
    assert (turns[1].get("archived"), turns[1].get("hidden")) == (True, None)
    assert "archived" not in data["Ann"]["history"]["2023-06-29"][0]
    other = make_bank(tmp_path / "b", forgetting=SELECTIVE_FORGETTING)
    import_data(other, copy.deepcopy(data))
    assert export_data(other) == data  # lossless both ways
    states = {e.memory_id: e.status for e in other.explanations("Ann", now=NOW)}
    assert (states[MISO], states[REX]) == ("hidden", "forgotten")
    found = _ids(other, "Miso the cat")
    assert REX in found and MISO not in found


def test_a_version_4_store_keeps_its_archived_memories_forgotten_not_hidden(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank(forgetting=SELECTIVE_FORGETTING)
    _fill(bank)
    bank.forget("Ann", now=NOW)
    bank.close()
    db = sqlite3.connect(tmp_path / "store" / DB_FILENAME)  # the version 4 layout: no hidden column
    db.executescript(
        UNDO_SCHEMA_6 + "ALTER TABLE memories DROP COLUMN hidden; UPDATE meta SET value = '4' WHERE key = 'schema_version';"
    )
    db.close()
    bank = make_bank(forgetting=SELECTIVE_FORGETTING)
    db = sqlite3.connect(tmp_path / "store" / DB_FILENAME)
    assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    db.close()
    assert [(m.archived, m.hidden) for m in bank.storage.memories(bank.user("Ann").id)] == [(True, False)] * 2
    assert set(_ids(bank, "who likes tuna")) == {MISO, REX}  # still found by the cold tier


def test_a_recall_after_a_reply_brings_a_forgotten_memory_back_not_a_hidden_one(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank(forgetting=SELECTIVE_FORGETTING)
    _fill(bank)
    bank.forget("Ann", now=NOW)
    bank.archive("Ann", [MISO])
    bank.reinforce("Ann", [MISO, REX], now=NOW)  # what the chat does with the memories a reply used
    states = {e.memory_id: (e.status, e.archived) for e in bank.explanations("Ann", now=NOW)}
    assert states == {MISO: ("hidden", True), REX: ("strong", False)}
    assert bank.forget("Ann", now="2023-07-01")["Ann"].forgotten == []  # recalled: its clock restarted


def test_a_chat_reply_that_used_forgotten_memories_brings_them_back_not_a_hidden_one(make_bank, clock) -> None:  # type: ignore[no-untyped-def]
    """The chat stores its turn and reinforces what the reply used in one write
    (``add_turn(recalled=...)``): a forgotten memory found by the cold tier comes back to the
    live tier there too, also one forgotten by the day's pass that this very write runs."""
    bank = make_bank(forgetting=SELECTIVE_FORGETTING)
    _fill(bank)
    bank.archive("Ann", [MISO])
    clock.now = clock.now.fromisoformat(NOW + "T12:00:00")
    used = [h.memory for h in bank.search("Ann", "who likes tuna", k=2)]  # Rex, from the cold tier
    assert [m.memory_id for m in used] == [REX] and used[0].archived
    hidden = bank.storage.memories_by_ids(bank.user("Ann").id, {MISO})
    bank.add_turn("Ann", "Does Rex still like tuna bones?", "He does.", recalled=[*used, *hidden])
    states = {e.memory_id: (e.status, e.archived) for e in bank.explanations("Ann", now=NOW)}
    assert states[REX] == ("strong", False) and states[MISO] == ("hidden", True)
    assert bank.forget("Ann", now="2023-07-01")["Ann"].forgotten == []  # recalled: its clock restarted


def test_with_forgetting_off_what_an_earlier_setting_forgot_is_found_hidden_ones_are_not(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A store forgotten under the default setting and opened with forgetting off found nothing
    it had forgotten: 'off' hid them all instead of forgetting nothing."""
    on = make_bank(tmp_path / "s")
    _fill(on)
    on.add_turn("Ann", "I bought a red bicycle yesterday.", "Cool!", at="2023-05-01T09:10")
    on.archive("Ann", ["Ann_2023-05-01_2"])  # hidden by the user
    assert sorted(on.forget("Ann", now=NOW)["Ann"].forgotten) == [MISO, REX]
    on.close()
    off = make_bank(tmp_path / "s", forgetting={"mode": "off"})
    assert _ids(off, "What does my cat like?")[0] == MISO
    assert "Ann_2023-05-01_2" not in _ids(off, "red bicycle")
    off.search("Ann", "my dog Rex", k=1, now=NOW, reinforce=True)  # a recall brings it back for good
    assert {m.memory_id: m.archived for m in off.history("Ann")}[REX] is False
