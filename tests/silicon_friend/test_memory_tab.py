"""The "My memories" tab without a browser: filters and pages, what it knows, edit, add, delete
with undo, restore, why a memory fades, and one user never reaching another's memories."""

from __future__ import annotations

import datetime as dt

import gradio as gr
import pytest

from memory_bank import MemoryBank, MemoryKind
from memory_bank.embeddings import HashingEncoder
from memory_bank.errors import InvalidInputError
from silicon_friend.engine import SiliconFriend
from silicon_friend.memory_view import MemoryFilter, fade_reason, filtered, knowledge, page_of
from silicon_friend.models import prepare_model
from silicon_friend.web.app import WebApp
from silicon_friend.web.texts import memory_texts
from tests.silicon_friend.fakes import EchoChatModel, steps

FORM = ("", "all", "all", "", "", 1)
ANN, BOB = gr.Request(session_hash="ann-tab"), gr.Request(session_hash="bob-tab")
NOW = dt.datetime(2023, 6, 1, 12)


@pytest.fixture
def forgetting_bank(tmp_path):  # type: ignore[no-untyped-def]
    bank = MemoryBank.open(
        tmp_path / "s", encoder_instance=HashingEncoder(128), clock=lambda: NOW,
        forgetting={"mode": "paper", "tau": 30.0, "policy": "threshold", "daily_pass": False,
                    "content_weights": True},
    )  # fmt: skip
    yield bank
    bank.close()


def make_app(bank: MemoryBank, language: str = "en", **kwargs) -> WebApp:  # type: ignore[no-untyped-def]
    engine = SiliconFriend(bank, prepare_model(EchoChatModel(), context_tokens=2048), language=language)
    return WebApp(engine, **kwargs)


def click_row(app: WebApp, name: str, row: int, request) -> tuple:  # type: ignore[no-untyped-def]
    return app.memory_tab.select(name, gr.SelectData(None, {"index": [row, 2], "value": ""}), request)


def rows(out: tuple) -> list[list]:
    return out[3]["data"]


def seed(bank: MemoryBank, user: str = "Ann", n: int = 30) -> None:
    bank.add_turn(user, "I adopted a cat named Miso.", "Lovely!", at="2023-04-28T10:00")
    for i in range(n):
        bank.add_turn(user, f"note {i} about the garden", "ok", at=f"2023-05-{1 + i % 28:02d}T10:00")


def test_filters_page_and_state_the_total(forgetting_bank) -> None:  # type: ignore[no-untyped-def]
    seed(forgetting_bank)
    forgetting_bank.archive("Ann", ["Ann_2023-04-28_0"])
    everything = filtered(forgetting_bank, "Ann", MemoryFilter())
    assert len(everything) == 31
    first, last = page_of(everything, 1), page_of(everything, 99)
    assert (first.first, first.last, first.pages) == (1, 25, 2) and (last.number, last.first, last.last) == (
        2,
        26,
        31,
    )
    cat = MemoryFilter.parse("CAT miso", "turn", "2023-04-01", "2023-04-30", "forgotten")
    assert [r.memory_id for r in filtered(forgetting_bank, "Ann", cat)] == ["Ann_2023-04-28_0"]
    assert filtered(forgetting_bank, "Ann", MemoryFilter(text="cat", status="kept")) == []
    with pytest.raises(InvalidInputError, match=r"ends .* before it starts"):
        MemoryFilter.parse("", "all", "2023-05-02", "2023-05-01", "all")
    with pytest.raises(InvalidInputError, match="from"):
        MemoryFilter.parse("", "all", "2023-13-40", "", "all")
    app = make_app(forgetting_bank)
    out = app.memory_tab.memories("Ann", "", *FORM, ANN)
    assert "1–25 of 31" in out[1] and len(rows(out)) == 25  # no silent limit: paged and stated
    out = app.memory_tab.handlers()["next_page"]("Ann", "", *FORM, ANN)
    assert "26–31 of 31" in out[1] and out[2] == 2 and len(rows(out)) == 6
    with pytest.warns(UserWarning, match="before it starts"):
        app.memory_tab.memories("Ann", "", "", "all", "all", "2023-05-02", "2023-05-01", 1, ANN)


def test_what_it_knows_shows_the_layers_or_says_how_they_are_made(forgetting_bank) -> None:  # type: ignore[no-untyped-def]
    app = make_app(forgetting_bank)
    seed(forgetting_bank, n=2)
    assert "When a day of chatting is over" in app.memory_tab.memories("Ann", "", *FORM, ANN)[0]
    forgetting_bank.set_layer("Ann", MemoryKind.GLOBAL_PORTRAIT, "Ann is calm and loves gardening.")
    forgetting_bank.set_layer("Ann", MemoryKind.GLOBAL_SUMMARY, "Ann adopted a cat, Miso.")
    for day in range(1, 10):
        forgetting_bank.set_layer(
            "Ann", MemoryKind.DAILY_SUMMARY, f"Day {day}: garden work.", date=f"2023-05-{day:02d}"
        )
    forgetting_bank.set_layer("Ann", MemoryKind.DAILY_PERSONALITY, "Cheerful.", date="2023-05-09")
    k = knowledge(forgetting_bank, "Ann")
    assert k.portrait.startswith("Ann is calm") and len(k.days) == 7 and k.older_days == 2
    assert k.days[0] == ("2023-05-09", "Day 9: garden work.", "Cheerful.")
    shown = app.memory_tab.memories("Ann", "", *FORM, ANN)[0]
    assert "Ann is calm" in shown and "Ann adopted a cat" in shown and "2 earlier days" in shown
    zh = make_app(forgetting_bank, "zh").memory_tab.memories("Ann", "", *FORM, ANN)[0]
    assert "我对你的了解" in zh and "更早的 2 天" in zh


def test_edit_add_delete_undo_and_restore(forgetting_bank) -> None:  # type: ignore[no-untyped-def]
    seed(forgetting_bank, n=1)
    app = make_app(forgetting_bank)
    out = app.memory_tab.memories("Ann", "", *FORM, ANN)
    assert [r[2] for r in rows(out)] == ["note 0 about the garden ok", "I adopted a cat named Miso. Lovely!"]
    detail = click_row(app, "Ann", 1, ANN)
    assert "I adopted a cat named Miso." in detail[1] and detail[2]["value"] == "I adopted a cat named Miso."
    assert detail[3]["value"] == "Lovely!" and detail[3]["visible"]  # a turn's reply has a box of its own
    out = app.memory_tab.handlers()["save"]("Ann", "I adopted a cat named Mochi.", *FORM, ANN)
    cat = forgetting_bank.history("Ann", date="2023-04-28")[0]
    # the reply kept (one box of both saved the reply into the message and emptied the reply)
    assert (cat.query, cat.response) == ("I adopted a cat named Mochi.", "Lovely!") and "Mochi" in out[6]
    app.memory_tab.handlers()["save"]("Ann", "I adopted a cat named Mochi.", *FORM, ANN, "How lovely!")
    cat = forgetting_bank.history("Ann", date="2023-04-28")[0]
    assert (cat.query, cat.response) == ("I adopted a cat named Mochi.", "How lovely!")
    out = app.memory_tab.handlers()["add"]("Ann", "My sister Jo lives in Lisbon.", *FORM, ANN)
    assert out[-1] == "" and any(
        m.query == "My sister Jo lives in Lisbon." for m in forgetting_bank.history("Ann")
    )
    assert rows(out)[0][2] == "My sister Jo lives in Lisbon." and rows(out)[0][0] == "2023-06-01"
    for empty in ("  ", "\u200b"):  # an empty one is refused, the box keeps it (a zero-width space too)
        with pytest.warns(UserWarning, match="query"):
            assert app.memory_tab.handlers()["add"]("Ann", empty, *FORM, ANN)[-1] == gr.update()
    click_row(app, "Ann", 0, ANN)
    with pytest.warns(UserWarning, match="memory text is empty"):  # nor is an edit to nothing visible
        app.memory_tab.handlers()["save"]("Ann", "\u200b", *FORM, ANN)
    assert forgetting_bank.history("Ann")[-1].query == "My sister Jo lives in Lisbon."
    click_row(app, "Ann", 2, ANN)  # the cat
    out = app.memory_tab.handlers()["delete"]("Ann", "", *FORM, ANN)
    assert [m.date for m in forgetting_bank.history("Ann")] == ["2023-05-01", "2023-06-01"]
    assert out[10]["visible"] is True  # "Undo delete" is offered
    out = app.memory_tab.handlers()["undo"]("Ann", "", *FORM, ANN)
    back = forgetting_bank.history("Ann", date="2023-04-28")
    assert [m.query for m in back] == ["I adopted a cat named Mochi."] and back[0].memory_id == cat.memory_id
    assert out[10]["visible"] is False
    forgetting_bank.archive("Ann", [cat.memory_id])  # hidden by the user: said so, not "forgotten"
    out = app.memory_tab.memories("Ann", "", "", "all", "forgotten", "", "", 1, ANN)
    assert [r[6] for r in rows(out)] == ["hidden"]
    assert "hidden" in click_row(app, "Ann", 0, ANN)[1]
    detail = click_row(app, "Ann", 0, ANN)
    assert detail[4]["visible"] is True and "Hidden by you" in detail[1]
    app.memory_tab.handlers()["restore"]("Ann", "", "", "all", "forgotten", "", "", 1, ANN)
    assert not forgetting_bank.history("Ann", date="2023-04-28")[0].archived


def test_undo_of_a_delete_brings_back_the_summaries_and_context_it_changed(forgetting_bank) -> None:  # type: ignore[no-untyped-def]
    bank = forgetting_bank
    bank.add_turn("Ann", "I adopted a cat named Miso.", "What does Miso like?", at="2023-04-28T10:00")
    bank.add_turn("Ann", "Tuna, mostly.", "A cat of taste!", at="2023-04-28T10:05")
    bank.add_turn("Ann", "Work was long today.", "Rest well.", at="2023-04-29T10:00")
    bank.set_layer("Ann", MemoryKind.DAILY_SUMMARY, "Ann adopted Miso, who loves tuna.", date="2023-04-28")
    bank.set_layer("Ann", MemoryKind.DAILY_PERSONALITY, "Ann is tender with animals.", date="2023-04-28")
    bank.set_layer("Ann", MemoryKind.DAILY_SUMMARY, "Ann had a long day at work.", date="2023-04-29")
    bank.set_layer("Ann", MemoryKind.GLOBAL_SUMMARY, "Ann adopted Miso; work is tiring.")
    bank.set_layer("Ann", MemoryKind.GLOBAL_PORTRAIT, "Ann is caring and hard-working.")
    bank.storage.mark_stale(bank.user("Ann").id, [MemoryKind.DAILY_SUMMARY], ["2023-04-29"])

    def state() -> dict[str, tuple]:  # every memory as stored, and the searchable text of each turn
        return {
            m.memory_id: (m.kind, m.text, m.stale, m.archived, m.context, m.strength, m.turn)
            for m, _ in bank.memories("Ann")
        }

    before = state()
    app = make_app(bank)
    app.memory_tab.memories("Ann", "", *FORM, ANN)
    cat = next(i for i, r in enumerate(rows(app.memory_tab.memories("Ann", "", *FORM, ANN))) if "Miso." in r[2])
    click_row(app, "Ann", cat, ANN)
    app.memory_tab.handlers()["delete"]("Ann", "", *FORM, ANN)
    profile = bank.profile("Ann")
    assert profile["global_summary"] == "" and profile["global_portrait"] == ""  # blanked: nothing quotes it
    assert bank.layer("Ann", MemoryKind.DAILY_SUMMARY, "2023-04-28").text == ""  # type: ignore[union-attr]
    assert bank.history("Ann", date="2023-04-28")[0].context is None  # the next turn no longer cites it
    bank.set_layer("Ann", MemoryKind.GLOBAL_PORTRAIT, "Ann works hard.")  # re-summarised meanwhile
    app.memory_tab.handlers()["undo"]("Ann", "", *FORM, ANN)
    assert state() == before  # exactly what was there: texts, stale flags, context, strength
    hits = bank.search("Ann", "What food does Miso like?", k=3)
    assert any(h.memory.query == "Tuna, mostly." for h in hits)  # the next turn is indexed as before


def test_a_redraw_never_closes_a_row_opened_while_it_ran(forgetting_bank, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Switching to the tab redraws it; a row clicked while that redraw runs, or before its
    output reaches the page, stays open. Signing in under another name closes it."""
    import silicon_friend.web.memory_tab as memory_tab

    seed(forgetting_bank, n=2)
    forgetting_bank.add_turn("Bob", "Bob's diary", "", at="2023-05-02T10:00")
    app = make_app(forgetting_bank)
    tab = app.memory_tab
    assert tab.by_name["signed_in"]("Ann", "", *FORM, ANN)[5]["visible"] is False
    redraw = tab.memories("Ann", "", *FORM, ANN)  # began with nothing open ...
    detail = click_row(app, "Ann", 0, ANN)  # ... and the click's detail reached the page first
    assert detail[0]["visible"] is True
    assert redraw[5:9] == (gr.update(),) * 4  # the redraw leaves the detail as the page shows it
    again = tab.memories("Ann", "", *FORM, ANN)
    assert again[5]["visible"] is True and again[6] == detail[1]  # the open row stays open
    # A redraw that began with row 0 open, while the user opened row 1.
    real_find, clicked = memory_tab.find, []

    def find_then_click(bank, user, memory_id):  # type: ignore[no-untyped-def]
        if not clicked:
            clicked.append(None)  # the click's own lookup comes through here too
            clicked[0] = click_row(app, "Ann", 1, ANN)
        return real_find(bank, user, memory_id)

    monkeypatch.setattr(memory_tab, "find", find_then_click)
    raced = tab.memories("Ann", "", *FORM, ANN)
    assert raced[5:9] == (gr.update(),) * 4 and clicked[0][1] != detail[1]
    monkeypatch.setattr(memory_tab, "find", real_find)
    assert tab.memories("Ann", "", *FORM, ANN)[6] == clicked[0][1]  # row 1 is the one open
    # Another name signing in in this tab: the memory shown is closed, not left on the page.
    assert tab.by_name["signed_in"]("Bob", "", *FORM, ANN)[5]["visible"] is False


def test_why_it_fades_says_recalls_time_scale_and_content(forgetting_bank) -> None:  # type: ignore[no-untyped-def]
    forgetting_bank.add_turn(
        "Ann", "My sister Jo is moving to Lisbon for a design job.", "", at="2023-05-01T10:00"
    )
    forgetting_bank.add_turn("Ann", "Thanks, see you!", "Bye!", at="2023-05-01T11:00")
    forgetting_bank.reinforce("Ann", ["Ann_2023-05-01_0"], now="2023-05-20")
    t = memory_texts("en")
    personal = fade_reason(
        forgetting_bank.explain("Ann", "Ann_2023-05-01_0"), t.reasons, "chat turn", "2023-06-01"
    )
    assert "Recalled on 1 day(s), last on 2023-05-20" in personal and "about your life" in personal
    assert "60 days" in personal and "forgotten around" in personal
    small = fade_reason(
        forgetting_bank.explain("Ann", "Ann_2023-05-01_1"), t.reasons, "chat turn", "2023-06-01"
    )
    assert "Never recalled since 2023-05-01" in small and "small talk" in small and "7.5 days" in small
    assert "due since 2023-05-24" in small  # its day is past: it goes at the next pass
    zh = memory_texts("zh")
    assert "寒暄" in fade_reason(
        forgetting_bank.explain("Ann", "Ann_2023-05-01_1"), zh.reasons, "对话", "2023-06-01"
    )
    app = make_app(forgetting_bank)
    app.memory_tab.memories("Ann", "", *FORM, ANN)
    detail = click_row(app, "Ann", 1, ANN)  # rows are newest first: the sister turn is second
    assert "Why it fades" in detail[1] and "recalls 1" in detail[1] and "about your life" in detail[1]


def test_one_user_never_reaches_another_users_memories(forgetting_bank) -> None:  # type: ignore[no-untyped-def]
    seed(forgetting_bank, "Ann", n=1)
    forgetting_bank.add_turn("Bob", "Bob's secret plan", "safe", at="2023-05-02T10:00")
    app = make_app(forgetting_bank)
    app.memory_tab.memories("Ann", "", *FORM, ANN)
    click_row(app, "Ann", 0, ANN)
    out = app.memory_tab.memories("Bob", "", *FORM, BOB)
    assert [r[2] for r in rows(out)] == ["Bob's secret plan safe"]
    # Bob's tab acts on Bob's selection only; Ann's delete and undo stay hers.
    with pytest.warns(UserWarning, match="Click a memory"):
        app.memory_tab.handlers()["delete"]("Bob", "", *FORM, BOB)
    app.memory_tab.handlers()["delete"]("Ann", "", *FORM, ANN)
    with pytest.warns(UserWarning, match="no deletion to undo"):
        app.memory_tab.handlers()["undo"]("Bob", "", *FORM, BOB)
    assert [m.query for m in forgetting_bank.history("Bob")] == ["Bob's secret plan"]
    assert len(forgetting_bank.history("Ann")) == 1
    # The same tab switching to another name gets a fresh view: no selection, no undo of Ann's.
    with pytest.warns(UserWarning, match="no deletion to undo"):
        app.memory_tab.handlers()["undo"]("Bob", "", *FORM, ANN)
    assert len(forgetting_bank.history("Ann")) == 1


def test_with_login_the_tab_acts_for_the_signed_in_user(forgetting_bank) -> None:  # type: ignore[no-untyped-def]
    seed(forgetting_bank, "ann", n=1)
    forgetting_bank.add_turn("bob", "bob's diary", "", at="2023-05-02T10:00")
    app = make_app(forgetting_bank, auth=True)
    ann, bob = gr.Request(username="ann", session_hash="h"), gr.Request(username="bob", session_hash="h")
    out = app.memory_tab.memories("bob", "", *FORM, ann)  # the typed name is ignored
    assert all("diary" not in r[2] for r in rows(out))
    click_row(app, "bob", 0, ann)
    with pytest.warns(UserWarning, match="Click a memory"):  # bob's login, same hash: nothing selected
        app.memory_tab.handlers()["save"]("bob", "edited by ann", *FORM, bob)
    assert [m.query for m in forgetting_bank.history("bob")] == ["bob's diary"]
    assert "edited" not in " ".join(m.text for m in forgetting_bank.history("ann"))


@pytest.mark.parametrize("language", ["en", "zh"])
def test_with_forgetting_off_the_detail_says_so_instead_of_a_time_scale(tmp_path, language) -> None:  # type: ignore[no-untyped-def]
    t = memory_texts(language)
    with MemoryBank.open(
        tmp_path / "off", encoder_instance=HashingEncoder(64), clock=lambda: NOW, forgetting={"mode": "off"}
    ) as bank:
        memory = bank.add_turn("Emily", "I adopted a cat named Miso.", "Lovely!", at="2023-04-28T10:00")
        detail = make_app(bank, language).memory_tab._detail("Emily", memory, t)
    assert t.facts_off.split("{")[-1].split("}")[-1].strip(" ·") in detail  # "forgetting is off: it never fades"
    assert t.facts.split("{days}")[0].split("}")[-1].strip(" ·") not in detail  # no "time scale 1 day(s)"
    assert t.reasons.off in detail


def test_an_edit_or_delete_reaches_every_open_chat_of_the_user(forgetting_bank) -> None:  # type: ignore[no-untyped-def]
    """An edit left the old words in the chat (shown, sent to the model as a recent turn, and
    brought back by Regenerate); a delete reached only the tab it was made in, so another tab
    of the same user still sent the deleted turn to the model."""
    app = make_app(forgetting_bank)
    other = gr.Request(session_hash="ann-second-tab")
    list(steps(app.send("My PIN is 4711.", "Ann", 0.7, 0.9, 256, 40, ANN)))
    app.remember("Ann", other)  # the same user in a second tab: the turn resumed there
    assert [t.query for t in app.sessions.get(other).session.turns] == ["My PIN is 4711."]
    app.memory_tab.memories("Ann", "", *FORM, ANN)
    click_row(app, "Ann", 0, ANN)
    *_, chat = app.memory_tab.handlers()["save"]("Ann", "My PIN is secret.", *FORM, ANN, "Noted.")
    assert "4711" not in str(chat) and "My PIN is secret." in str(chat)  # the chat on screen redrawn
    for request in (ANN, other):
        session = app.sessions.get(request).session
        assert [(t.query, t.response) for t in session.turns] == [("My PIN is secret.", "Noted.")]
        assert "4711" not in str([m["content"] for m in app._render_tab(request)])
    list(steps(app.regenerate("Ann", 0.7, 0.9, 256, 40, ANN)))
    assert [m.query for m in forgetting_bank.history("Ann")] == ["My PIN is secret."]  # not undone
    assert app.sessions.get(other).session.turns == []  # the turn Regenerate replaced left it too
    app.remember("Ann", other)
    app.memory_tab.memories("Ann", "", *FORM, ANN)
    click_row(app, "Ann", 0, ANN)
    app.memory_tab.handlers()["delete"]("Ann", "", *FORM, ANN)
    assert app.sessions.get(other).session.turns == [] and app.sessions.get(ANN).session.turns == []


def test_any_page_number_typed_is_taken_to_the_nearest_page(forgetting_bank) -> None:  # type: ignore[no-untyped-def]
    """0 or -3 in the page box was refused by Gradio before the handler ("Value 0 is less than
    minimum value 1.", in English, and a traceback in the server log)."""
    seed(forgetting_bank)
    app = make_app(forgetting_bank)
    demo = app.build()
    (box,) = [c for c in demo.blocks.values() if getattr(c, "elem_id", None) == "sf-page"]
    for typed in (0, -3, 999):
        value = box.preprocess(typed)  # what the handler is given
        out = app.memory_tab.memories("Ann", "", "", "all", "all", "", "", value, ANN)
        assert len(rows(out)) == (25 if typed < 1 else 31 - 25)


def test_a_refused_name_is_said_once_not_again_by_the_memory_tab(engine) -> None:  # type: ignore[no-untyped-def]
    import warnings

    app = WebApp(engine)
    request = gr.Request(session_hash="once")
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        app.remember("bad\x07name", request)  # Remember Me, then the memory tab's signed_in
        app.memory_tab.by_name["signed_in"]("bad\x07name", "", "", "all", "all", "", "", 1, request)
    assert len([w for w in got if "control" in str(w.message)]) == 1


def test_the_chinese_page_says_a_refused_memory_or_filter_in_chinese(forgetting_bank) -> None:  # type: ignore[no-untyped-def]
    """The bank's and the filter's refusals were shown in English on the Chinese page."""
    seed(forgetting_bank, n=1)
    app = make_app(forgetting_bank, "zh")
    zh_form = ("", "all", "all", "2023-13-45", "", 1)
    with pytest.warns(UserWarning, match="不是有效的日期"):
        app.memory_tab.memories("Ann", "", *zh_form, ANN)
    with pytest.warns(UserWarning, match="日期范围的结束"):
        app.memory_tab.memories("Ann", "", "", "all", "all", "2023-06-01", "2023-05-01", 1, ANN)
    with pytest.warns(UserWarning, match="内容是空的"):
        app.memory_tab.handlers()["add"]("Ann", "\u200b", *FORM, ANN)
    with pytest.warns(UserWarning, match="内容有 1,000,001 个字符"):
        app.memory_tab.handlers()["add"]("Ann", "字" * 1_000_001, *FORM, ANN)


def test_a_redraw_keeps_an_unsaved_edit_and_an_action_shows_what_was_stored(forgetting_bank) -> None:  # type: ignore[no-untyped-def]
    """A search, a tab switch or a language switch with a memory open wrote its stored words over
    what the user had typed in the edit box and not saved yet."""
    seed(forgetting_bank, n=1)
    app = make_app(forgetting_bank)
    app.memory_tab.memories("Ann", "", *FORM, ANN)
    opened = click_row(app, "Ann", 1, ANN)
    assert opened[2]["value"] == "I adopted a cat named Miso."
    redrawn = app.memory_tab.memories("Ann", "", *FORM, ANN)  # the user typing meanwhile
    assert redrawn[7] == gr.update() and redrawn[8] == gr.update() and "Miso" in redrawn[6]
    saved = app.memory_tab.handlers()["save"]("Ann", "I adopted a cat named Mochi.", *FORM, ANN)
    assert saved[7]["value"] == "I adopted a cat named Mochi."  # what was stored


def test_a_note_added_by_hand_has_no_reply_box(forgetting_bank) -> None:  # type: ignore[no-untyped-def]
    app = make_app(forgetting_bank)
    app.memory_tab.handlers()["add"]("Ann", "My sister Jo lives in Lisbon.", *FORM, ANN)
    detail = click_row(app, "Ann", 0, ANN)
    assert detail[2]["value"] == "My sister Jo lives in Lisbon." and detail[3]["visible"] is False
    # a note answers nothing: it is not indexed with the reply the chat gave just before it
    bank = forgetting_bank
    bank.add_turn("Ann", "I love sailing.", "Sailing sounds wonderful!")
    app.memory_tab.handlers()["add"]("Ann", "My PIN hint is the year we met.", *FORM, ANN)
    [note] = [m for m in bank.history("Ann") if m.query == "My PIN hint is the year we met."]
    assert note.context is None
    # nor is it shown after a reload as a message of the chat left without a reply
    _, _, chat = app.on_load("Ann", gr.Request(session_hash="reloaded"))
    said = [m["content"] for m in chat if "metadata" not in m]
    assert "I love sailing." in said and "My PIN hint is the year we met." not in said
