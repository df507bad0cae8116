"""Deletion: one memory or a whole user deleted through the library, the CLI or SiliconFriend's
"delete memory" / "Forget me" leaves the content nowhere: search, memories listing, profile, export,
summaries and portrait (once regenerated), and the SQLite file's text columns."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import gradio as gr
import pytest

from memory_bank import MemoryBank, MemoryKind
from memory_bank.cli import main as cli_main
from memory_bank.embeddings import HashingEncoder
from memory_bank.original_format import export_data
from memory_bank.summaries import Summarizer
from memory_bank.summaries.config import SummaryConfig
from silicon_friend.engine import SiliconFriend
from silicon_friend.memories import export_user, memory_rows
from silicon_friend.models import prepare_model
from silicon_friend.web.app import WebApp
from tests.conftest import FixedClock
from tests.silicon_friend.fakes import EchoChatModel, steps
from tests.summaries.conftest import ScriptedChatModel

SECRET = "ZEBRACODE"
KEEP = "OTTERKEEP"
OTHER = "BOBSAFE"
DB = "memorybank.sqlite3"
CONFIG = SummaryConfig(max_attempts=1, backoff_s=0)


def _open(store: Path) -> MemoryBank:
    return MemoryBank.open(store, clock=FixedClock(), encoder_instance=HashingEncoder(64))


def _seed(bank: MemoryBank) -> str:
    """Ann tells a secret on 04-27 and something else on 04-28; Bob has his own memory. Summaries
    (made by a fake that quotes every all-caps word) quote the secret. Returns the secret turn's id."""
    secret = bank.add_turn("Ann", f"My diary password is {SECRET}.", f"I will keep {SECRET} safe.",
                           at="2023-04-27T10:00:00")  # fmt: skip
    bank.add_turn("Ann", f"I visited the {KEEP} zoo.", "Lovely.", at="2023-04-27T10:05:00")
    bank.add_turn("Ann", f"The {KEEP} was asleep.", "Aw.", at="2023-04-28T09:00:00")
    bank.add_turn("Bob", f"My code is {OTHER}.", "Noted.", at="2023-04-27T11:00:00")
    for user in ("Ann", "Bob"):
        Summarizer(bank, ScriptedChatModel(), config=CONFIG, sleep=lambda s: None).summarize_user(user)
    assert SECRET in bank.profile("Ann")["global_summary"]
    assert SECRET in bank.layer("Ann", MemoryKind.DAILY_SUMMARY, date="2023-04-27").text
    return secret.memory_id


def _raw_hits(
    store: Path, needle: str, columns: tuple[str, ...] = ("text", "query", "response", "extra")
) -> list[tuple]:
    con = sqlite3.connect(store / DB)
    try:
        where = " OR ".join(f"instr(coalesce({c}, ''), ?)" for c in columns)
        rows = con.execute(
            f"SELECT memory_id, kind FROM memories WHERE {where}", (needle,) * len(columns)
        ).fetchall()
        rows += con.execute(
            "SELECT name, 'user' FROM users WHERE instr(name || extra, ?)", (needle,)
        ).fetchall()
        rows += con.execute("SELECT key, 'meta' FROM meta WHERE instr(value, ?)", (needle,)).fetchall()
    finally:
        con.close()
    return rows


def _found_anywhere(bank: MemoryBank, store: Path, user: str, needle: str) -> list[str]:
    """Every place ``needle`` still shows for ``user`` (empty: gone)."""
    where = []
    if bank.has_user(user):
        for q in (needle, f"password {needle}", "diary password"):
            if any(needle in h.memory.text for h in bank.search(user, q, k=20)):
                where.append(f"search {q!r}")
        if any(needle in (m.text + str(m.query) + str(m.response)) for m, _ in bank.memories(user)):
            where.append("memories")
        if needle in json.dumps(bank.profile(user)):
            where.append("profile")
        if needle in json.dumps(export_data(bank, [user]), ensure_ascii=False):
            where.append("export")
        if any(needle in r.text for r in memory_rows(bank, user)):
            where.append("memory_rows")
    if _raw_hits(store, needle):
        where.append(f"sqlite {_raw_hits(store, needle)}")
    return where


def _resummarize(bank: MemoryBank, user: str) -> None:
    report = Summarizer(bank, ScriptedChatModel(), config=CONFIG, sleep=lambda s: None).summarize_user(user)
    assert not report.failed


def _bob_intact(bank: MemoryBank, store: Path) -> None:
    assert [h.memory.user for h in bank.search("Bob", OTHER)] and _raw_hits(store, OTHER)
    assert OTHER in bank.profile("Bob")["global_summary"]


def test_library_delete_memory_then_resummarize_leaves_nothing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "s"
    bank = _open(store)
    secret_id = _seed(bank)
    bank.delete_memory("Ann", secret_id)
    # At once: the turn is gone from every view; the layers that quoted it are marked stale.
    assert not any(SECRET in (m.query or "") for m in bank.history("Ann"))
    assert bank.layer("Ann", MemoryKind.DAILY_SUMMARY, date="2023-04-27").stale
    assert bank.layer("Ann", MemoryKind.GLOBAL_SUMMARY).stale
    assert _found_anywhere(bank, store, "Ann", SECRET) == []  # even before the summaries are remade
    _resummarize(bank, "Ann")
    assert _found_anywhere(bank, store, "Ann", SECRET) == []
    assert KEEP in bank.profile("Ann")["global_summary"]  # the rest is still remembered
    _bob_intact(bank, store)
    bank.close()


def test_deleted_turn_survives_in_no_other_turns_context(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "s"
    bank = _open(store)
    secret_id = _seed(bank)
    bank.delete_memory("Ann", secret_id)
    _resummarize(bank, "Ann")
    assert _raw_hits(store, SECRET, ("text", "query", "response", "extra", "context")) == []
    bank.close()


def test_deleting_a_days_only_turn_removes_that_days_summaries(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "s"
    bank = _open(store)
    _seed(bank)
    for m in bank.history("Ann", date="2023-04-27"):
        bank.delete_memory("Ann", m.memory_id)
    _resummarize(bank, "Ann")
    assert bank.layer("Ann", MemoryKind.DAILY_SUMMARY, date="2023-04-27") is None
    assert _found_anywhere(bank, store, "Ann", SECRET) == []
    bank.close()


def test_library_delete_user_leaves_nothing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "s"
    bank = _open(store)
    _seed(bank)
    bank.delete_user("Ann")
    assert not bank.has_user("Ann") and bank.users() == ["Bob"]
    for needle in (SECRET, KEEP, "Ann"):
        assert _found_anywhere(bank, store, "Ann", needle) == [] or needle == "Ann"
    every = ("text", "query", "response", "extra", "context")
    assert _raw_hits(store, SECRET, every) == [] and _raw_hits(store, KEEP, every) == []
    con = sqlite3.connect(store / DB)
    assert con.execute("SELECT count(*) FROM embeddings WHERE memory_rowid NOT IN (SELECT id FROM memories)"
                       ).fetchone() == (0,)  # fmt: skip
    con.close()
    _bob_intact(bank, store)
    bank.close()


def test_cli_delete_memory_and_user(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "s"
    bank = _open(store)
    secret_id = _seed(bank)
    bank.close()
    common = ["--store", str(store), "--encoder", "hashing-64"]  # the store's encoder
    assert cli_main(["delete", *common, "--user", "Ann", "--memory-id", secret_id]) == 0
    bank = _open(store)
    _resummarize(bank, "Ann")
    assert _found_anywhere(bank, store, "Ann", SECRET) == []
    bank.close()
    capsys.readouterr()
    assert cli_main(["search", *common, "--json", "--user", "Ann", SECRET, "--k", "20"]) == 0
    assert cli_main(["memories", *common, "--json", "--user", "Ann"]) == 0
    assert cli_main(["export", *common, "--user", "Ann"]) == 0
    assert SECRET not in capsys.readouterr().out
    assert cli_main(["delete", *common, "--user", "Ann"]) == 0
    capsys.readouterr()
    assert cli_main(["search", *common, "--user", "Ann", KEEP]) == 2  # unknown user now
    assert cli_main(["export", *common]) == 0
    out = capsys.readouterr().out
    assert KEEP not in out and SECRET not in out and OTHER in out
    assert _raw_hits(store, KEEP) == [] and _raw_hits(store, SECRET) == []


def test_silicon_friend_delete_memory_and_forget_me(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "s"
    bank = _open(store)
    _seed(bank)
    friend = SiliconFriend(bank, prepare_model(EchoChatModel(reply="Got it."), context_tokens=4096))
    app = WebApp(friend)
    req = gr.Request(session_hash="tab")
    app.remember("Ann", req)
    for _ in steps(app.send(f"Another secret: {SECRET} again.", "Ann", 0.7, 0.9, 64, 2, req)):
        pass
    session = app.sessions.get(req).session
    said = session.turns[-1].memory_id
    form = ("", "all", "all", "", "", 1)
    view = app.memory_tab.views.get(req, "Ann")
    view.selected = said  # what a click on its row does
    out = app.memory_tab.handlers()["delete"]("Ann", "", *form, req)
    # The chat view drops it too (the earlier turns it shows from the store stay until deleted).
    assert all("Another secret" not in json.dumps(m) for m in out[-1])
    assert all(said not in json.dumps(m) for m in out[-1])
    view.selected = next(m.memory_id for m in bank.history("Ann") if SECRET in (m.query or ""))
    app.memory_tab.handlers()["delete"]("Ann", "", *form, req)
    view.undo.clear()  # the undo list would bring them back; "Forget me" drops it too
    _resummarize(bank, "Ann")
    assert _found_anywhere(bank, store, "Ann", SECRET) == []
    out = app.memory_tab.memories("Ann", "", *form, req)
    assert SECRET not in json.dumps(out[:4], default=str)
    path = export_user(bank, "Ann", tmp_path / "exp")
    assert SECRET not in path.read_text(encoding="utf-8") and KEEP in path.read_text(encoding="utf-8")
    # Forget me: refused without the tick, then everything of Ann's goes; Bob stays.
    with pytest.warns(UserWarning):
        app.forget_me("Ann", False, req)
    assert bank.has_user("Ann")
    _status, chatbot, _knows, _info, _page, table, *_ = app.forget_me("Ann", True, req)
    assert not bank.has_user("Ann") and app.sessions.get(req).session.turns == []
    assert chatbot == [] and table["data"] == []
    assert _raw_hits(store, KEEP) == [] and _raw_hits(store, SECRET) == []
    assert app.memory_tab.memories("Ann", "", *form, req)[3]["data"] == []
    _bob_intact(bank, store)
    bank.close()


def test_forget_me_with_login_deletes_only_the_signed_in_user(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "s"
    bank = _open(store)
    _seed(bank)
    app = WebApp(SiliconFriend(bank, prepare_model(EchoChatModel(), context_tokens=4096)), auth=True)
    bob = gr.Request(username="Bob")
    app.forget_me("Ann", True, bob)  # the name box says Ann; the login is Bob
    assert bank.has_user("Ann") and not bank.has_user("Bob")
    assert SECRET in bank.profile("Ann")["global_summary"]
    bank.close()


def test_editing_a_turn_leaves_its_old_words_nowhere(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "s"
    bank = _open(store)
    secret_id = _seed(bank)
    follower = bank.history("Ann", date="2023-04-27")[1]
    assert SECRET in (follower.context or "")  # indexed with the secret turn's reply
    assert bank.search("Ann", SECRET, k=1, kinds=[MemoryKind.TURN])[0].memory.memory_id == secret_id
    bank.update_memory("Ann", secret_id, text="My diary has a lock.")
    # At once, as a delete does: the layers that quoted the old words are blank and stale, the
    # next turn of the day is indexed without the old reply.
    for kind, date in ((MemoryKind.DAILY_SUMMARY, "2023-04-27"), (MemoryKind.DAILY_PERSONALITY, "2023-04-27"),
                       (MemoryKind.GLOBAL_SUMMARY, None), (MemoryKind.GLOBAL_PORTRAIT, None)):  # fmt: skip
        layer = bank.layer("Ann", kind, date=date)
        assert layer is not None and layer.stale and layer.text == ""
    other_day = bank.layer("Ann", MemoryKind.DAILY_SUMMARY, date="2023-04-28")
    assert other_day is not None and not other_day.stale and KEEP in other_day.text
    edited, follower = bank.history("Ann", date="2023-04-27")
    assert (edited.memory_id, edited.response) == (secret_id, "") and follower.context is None
    assert _found_anywhere(bank, store, "Ann", SECRET) == []
    assert all(h.memory.text for h in bank.search("Ann", SECRET, k=20))  # no blanked layer is found
    assert bank.search("Ann", SECRET, k=1, kinds=[MemoryKind.TURN])[0].memory.memory_id != follower.memory_id
    assert _raw_hits(store, SECRET, ("text", "query", "response", "extra", "context")) == []
    _resummarize(bank, "Ann")
    assert _found_anywhere(bank, store, "Ann", SECRET) == []
    assert KEEP in bank.profile("Ann")["global_summary"]
    _bob_intact(bank, store)
    bank.close()


def test_editing_only_extra_or_a_summary_blanks_nothing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "s"
    bank = _open(store)
    secret_id = _seed(bank)
    layers = {(m.memory_id, m.text, m.stale) for m, _ in bank.memories("Ann") if m.kind is not MemoryKind.TURN}
    contexts = [m.context for m in bank.history("Ann")]
    bank.update_memory("Ann", secret_id, extra={"tag": "x"})
    assert {(m.memory_id, m.text, m.stale) for m, _ in bank.memories("Ann") if m.kind is not MemoryKind.TURN} == layers
    assert [m.context for m in bank.history("Ann")] == contexts
    summary = bank.layer("Ann", MemoryKind.DAILY_SUMMARY, date="2023-04-27")
    assert summary is not None
    bank.update_memory("Ann", summary.memory_id, text="Ann keeps a diary.")  # the user's own correction
    profile = bank.profile("Ann")
    assert SECRET in profile["global_summary"] and SECRET in profile["global_portrait"]
    assert bank.layer("Ann", MemoryKind.DAILY_PERSONALITY, date="2023-04-27").text != ""
    assert [m.context for m in bank.history("Ann")] == contexts
    bank.close()


def test_a_reader_in_another_process_delays_the_files_scrub_says_so_and_it_follows(tmp_path, caplog) -> None:  # type: ignore[no-untyped-def]
    """A deletion committed while another connection (a running web app) held a read open left
    the deleted text in the database file, silently, until that process exited."""
    import logging

    store = tmp_path / "s"
    bank = _open(store)
    gone = bank.add_turn("Ann", f"My diary password is {SECRET}.", "Safe.", at="2023-04-27T10:00:00")
    bank.add_turn("Ann", f"I visited the {KEEP} zoo.", "Lovely.", at="2023-04-27T10:05:00")
    bank.storage.scrub()  # everything so far in the database file itself
    reader = sqlite3.connect(store / DB)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM memories").fetchone()  # a read held open
    with caplog.at_level(logging.WARNING, logger="memory_bank.stores.sqlite"):
        bank.delete_memory("Ann", gone.memory_id)
    assert "deleted text stays in the database file" in caplog.text
    assert SECRET.encode() in (store / DB).read_bytes()  # as the warning says
    reader.execute("COMMIT")
    reader.close()
    bank.add_turn("Ann", "Another day.", "Yes.", at="2023-04-28T10:00:00")  # the next write scrubs it
    assert SECRET.encode() not in (store / DB).read_bytes()
    assert not _found_anywhere(bank, store, "Ann", SECRET)
    bank.close()
