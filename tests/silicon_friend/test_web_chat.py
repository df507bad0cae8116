"""The chat side of the web app (no browser): "memories used" and "memory updated" under each
reply, the temporary chat, the language switch, the model notice, a reload, "Forget me" with a
message still waiting, and the encoder warm-up."""

from __future__ import annotations

import threading
import time
import warnings

import gradio as gr
import pytest

from memory_bank.llm import parse_llm_spec
from silicon_friend.memories import PLOT_TEXTS
from silicon_friend.models import prepare_model
from silicon_friend.web.app import WebApp
from silicon_friend.web.i18n import Translations
from silicon_friend.web.texts import UI, UITexts
from tests.silicon_friend.fakes import EchoChatModel, steps

SLIDERS = (0.7, 0.9, 64, 2)
ANON = gr.Request(session_hash="tab1")


def notes(chatbot):  # type: ignore[no-untyped-def]
    return [m for m in chatbot if "metadata" in m]


def leave_mid_reply(app: WebApp, message: str, user: str) -> None:
    """Send ``message`` from the tab ``ANON``, and close the page once its reply has begun
    (the reply goes on without it)."""
    page = steps(app.send(message, user, *SLIDERS, ANON))
    next(page), next(page)
    page.close()
    app.on_unload(ANON)


def seed(app: WebApp) -> None:
    app.engine.bank.add_turn("Emily", "I adopted a cat named Miso.", "Lovely!", at="2023-04-28T10:00")
    app.engine.bank.add_turn("Emily", "I went hiking on Mount Tai.", "Sounds fun!", at="2023-04-29T10:00")


def test_each_reply_shows_the_memories_it_used_collapsed(make_engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(make_engine(EchoChatModel(mode="slow", delay=0.05)))
    seed(app)
    outputs = list(steps(app.send("Do you remember my cat Miso?", "Emily", 0.7, 0.9, 64, 1, ANON)))
    chatbot = outputs[-1][0]
    (note,) = notes(chatbot)
    assert chatbot.index(note) == len(chatbot) - 1  # right under the reply
    assert note["metadata"]["title"] == "🧠 Memories used (1)" and note["metadata"]["status"] == "done"
    assert "**2023-04-28** · chat turn · score" in note["content"] and "Miso" in note["content"]
    assert (
        note["metadata"]["log"] == "✓ memory updated: this turn was stored; 1 recalled memories strengthened"
    )
    # While the reply streamed, the turn was not stored yet: no "memory updated" claimed.
    streaming = [notes(o[0]) for o in outputs[1:-1] if o[0] and notes(o[0])]
    assert streaming and all("log" not in n[0]["metadata"] for n in streaming)


def test_a_reply_without_memories_still_says_it_was_stored(engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(engine)
    chatbot = list(steps(app.send("Hello there", "Emily", *SLIDERS, ANON)))[-1][0]
    (note,) = notes(chatbot)
    assert note["metadata"]["title"] == "🧠 No memories used"
    assert note["metadata"]["log"] == "✓ memory updated: this turn was stored"


def test_temporary_chat_reads_and_writes_nothing_and_is_shown(engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(engine)
    seed(app)
    banner = app.set_temporary(True, ANON)
    assert banner["visible"] is True and "Temporary chat" in banner["value"]
    chatbot = list(steps(app.send("Do you remember my cat Miso?", "Emily", *SLIDERS, ANON)))[-1][0]
    (note,) = notes(chatbot)
    assert note["metadata"]["title"] == "🕶 temporary chat: nothing read or stored"
    assert len(app.engine.bank.history("Emily")) == 2
    assert app.set_temporary(False, ANON)["visible"] is False
    list(steps(app.send("now remember this", "Emily", *SLIDERS, ANON)))
    assert len(app.engine.bank.history("Emily")) == 3


def test_the_language_switch_relabels_every_registered_component(engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(engine)
    app.build()
    zh = UI["zh"]
    list(steps(app.send("Hello there", "Emily", *SLIDERS, ANON)))
    *updates, chat, status = app.set_language("zh", ANON)
    assert len(updates) == len(app.i18n.components) >= 20
    shown = {v for u in updates for k, v in u.items() if k != "__type__" and isinstance(v, str)}
    for text in (zh.send, zh.remember, zh.name_label, zh.chat_tab, zh.memories_tab, zh.temporary_label):
        assert text in shown
    m = zh.memory  # the memory tab's labels and its filters' choices follow the switch too
    for text in (m.add_label, m.add_button, m.search_label, m.kind_label, m.apply, m.edit_label, m.undo):
        assert text in shown
    choices = [u["choices"] for u in updates if "choices" in u]
    assert [(m.kinds[k], k) for k in ("all", "turn")] == choices[0][:2]
    assert (m.statuses["forgotten"], "forgotten") in choices[1]
    assert not shown & {UI["en"].send, UI["en"].remember, UI["en"].name_label, UI["en"].memory.apply}
    tab = app.memory_tab.memories("Emily", "", "", "all", "all", "", "", 1, ANON)  # ...and its contents
    assert tab[3]["headers"] == list(m.columns) and tab[3]["data"][0][1] == m.kinds["turn"]
    assert m.page_info.split("{")[0] in tab[1]
    assert tab[4].axes[0].get_ylabel() == PLOT_TEXTS["zh"].y_label  # the plot's words
    assert chat["label"] == zh.title and notes(chat["value"])[0]["metadata"]["title"] == "🧠 没有用到记忆"
    assert "欢迎" in status
    with pytest.warns(UserWarning, match="请先输入你的名字"):  # toasts follow the tab's language
        list(steps(app.send("hi", "", *SLIDERS, gr.Request(session_hash="tab1"))))
    other = gr.Request(session_hash="tab2")  # another tab keeps its own language
    with pytest.warns(UserWarning, match="Please enter your name"):
        list(steps(app.send("hi", "", *SLIDERS, other)))


def test_every_ui_text_exists_in_both_languages() -> None:
    for field in UITexts.__dataclass_fields__:
        en, zh = getattr(UI["en"], field), getattr(UI["zh"], field)
        assert en and zh, field
        if isinstance(en, dict):
            assert en.keys() == zh.keys()
    with pytest.raises(KeyError, match="no UI text named 'sned'"):  # a typo fails when the page is built
        Translations().add(object(), value="sned")
    with pytest.raises(KeyError, match=r"no UI text named 'memory\.sned'"):
        Translations().add(object(), value="memory.sned")


def test_the_header_says_which_model_answers(bank) -> None:  # type: ignore[no-untyped-def]
    from silicon_friend.engine import SiliconFriend

    packaged = prepare_model(EchoChatModel(), spec=parse_llm_spec(None), context_tokens=2048)
    app = WebApp(SiliconFriend(bank, packaged, language="en"))
    en = app.model_notice(UI["en"])
    assert "SmolLM2-135M-Instruct" in en and "English-only demo model" in en and "--llm" not in en
    zh = app.model_notice(UI["zh"])  # Chinese: the demo cannot chat in it; the flags for a real model
    for flag in (
        "--llm openai:MODEL@http://127.0.0.1:8080/v1",
        "--llm llamacpp:",
        "--llm hf:",
        "--language zh",
    ):
        assert flag in zh
    real = WebApp(SiliconFriend(bank, prepare_model(EchoChatModel(), name="gpt-4o-mini"), language="zh"))
    assert "gpt-4o-mini" in real.model_notice(UI["zh"]) and "演示" not in real.model_notice(UI["zh"])


def test_a_reload_shows_the_recent_conversation(engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(engine)
    for i in range(9):
        list(steps(app.send(f"message {i}", "Emily", *SLIDERS, ANON)))
    reloaded = gr.Request(session_hash="after-reload")
    name, status, chatbot = app.on_load("Emily", reloaded)
    said = [m["content"] for m in chatbot if "metadata" not in m]
    window = engine.settings.history_turns
    assert name == "Emily" and "Welcome back" in status
    assert said[::2] == [f"message {i}" for i in range(9 - window, 9)]
    status, _kept = app.keep_name("Emily", reloaded)  # the next Send: still back, not "first" again
    assert "Welcome back" in status
    assert app.on_load("", gr.Request(session_hash="y")) == (gr.update(), "", gr.update())


def test_a_name_kept_before_the_first_message_is_back_after_a_reload(engine) -> None:  # type: ignore[no-untyped-def]
    """Remember Me, then a reload (or a second tab) before the first message: the name box was
    empty and the greeting gone, though the page had said it would remember the name."""
    app = WebApp(engine)
    status, kept = app.keep_name("Nadia", ANON)
    assert "Nadia" in status and kept.strip() == "Nadia"
    name, status, chatbot = app.on_load(kept, gr.Request(session_hash="after-reload"))
    assert name == "Nadia" and "first conversation" in status and chatbot == []
    assert not engine.bank.has_user("Nadia")  # a name kept is nothing stored


def test_a_message_waiting_when_forget_me_comes_is_not_stored(make_engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(make_engine(EchoChatModel(delay=0.05)))
    first = steps(app.send("one two three four five six seven", "Emily", *SLIDERS, ANON))
    next(first), next(first), next(first)  # streaming
    results: list[object] = []
    caught: list[warnings.WarningMessage] = []

    def later() -> None:
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            results.append(list(steps(app.send("my secret", "Emily", *SLIDERS, ANON))))
        caught.extend(got)

    second = threading.Thread(target=later)
    second.start()
    deadline = time.monotonic() + 5
    while "my secret" not in app.sessions.get(ANON).queued() and time.monotonic() < deadline:
        time.sleep(0.01)
    done = threading.Thread(target=lambda: list(first))
    done.start()
    app.forget_me("Emily", True, ANON)
    done.join(10)
    second.join(10)
    assert not app.engine.bank.has_user("Emily")  # the waiting message did not bring the user back
    assert any("this message was not sent" in str(w.message) for w in caught)
    assert results and results[0][-1][1] == "my secret"  # given back into the box, visibly


def test_a_tab_whose_waiting_message_forget_me_refused_still_says_the_memories_are_gone(make_engine) -> None:  # type: ignore[no-untyped-def]
    """With a message waiting behind the streaming reply, the tab replaced its deleted
    conversation before the watch drew the deletion: its page kept greeting a returning user."""
    app = WebApp(make_engine(EchoChatModel(delay=0.05)))
    app.engine.bank.add_turn("Emily", "I love jazz.", "Nice!", at="2023-04-28T10:00")
    other = gr.Request(session_hash="tab-b")
    app.remember("Emily", other)
    first = steps(app.send("one two three four five six seven", "Emily", *SLIDERS, ANON))
    next(first), next(first), next(first)  # streaming
    later = threading.Thread(target=lambda: list(steps(app.send("my secret", "Emily", *SLIDERS, ANON))))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        later.start()
        deadline = time.monotonic() + 5
        while "my secret" not in app.sessions.get(ANON).queued() and time.monotonic() < deadline:
            time.sleep(0.01)
        app.forget_me("Emily", True, other)
        list(first)
        later.join(10)
    status, chat, *_ = app.ended_tick(ANON)
    assert "were deleted" in status and chat == []
    assert app.ended_tick(ANON)[0] == gr.update()  # drawn once


def test_after_forget_me_in_one_tab_the_other_tab_can_start_again(make_engine) -> None:  # type: ignore[no-untyped-def]
    """Tab B's every message was refused after tab A's "Forget me", and entering the name again
    (as the toast said) changed nothing: only "Remember Me" got B out."""
    app = WebApp(make_engine(EchoChatModel(delay=0.0)))
    tab_b = gr.Request(session_hash="tab-b")
    list(steps(app.send("I love jazz.", "Emily", *SLIDERS, tab_b)))
    app.forget_me("Emily", True, ANON)
    with pytest.warns(UserWarning, match="this message was not sent"):
        refused = list(steps(app.send("What music do I like?", "Emily", *SLIDERS, tab_b)))
    assert refused[-1][1] == "What music do I like?" and not app.engine.bank.has_user("Emily")
    assert "jazz" not in str(refused[-1][0])  # the deleted conversation is gone from B's chat too
    list(steps(app.send("What music do I like?", "Emily", *SLIDERS, tab_b)))  # sent again: a new start
    assert [m.query for m in app.engine.bank.history("Emily")] == ["What music do I like?"]


def test_warm_up_loads_the_encoder_before_the_first_login(engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(engine)
    release, encoded = threading.Event(), []
    real = engine.bank.encoder

    class SlowToLoad:  # an encoder that takes its time on first use, as a real one after a start
        name, dim = real.name, real.dim

        def encode(self, texts):  # type: ignore[no-untyped-def]
            release.wait(10)
            encoded.append(list(texts))
            return real.encode(texts)

    engine.bank._encoder = engine.bank._checked = SlowToLoad()  # type: ignore[assignment]
    thread = app.start_warm_up()
    assert not app.ready.is_set()
    assert (
        app.on_load("", gr.Request(session_hash="t"))[1]
        == "⏳ Loading the memory encoder (only after a start)…"
    )
    release.set()
    thread.join(10)
    assert app.ready.is_set() and encoded == [["warm up"]]


def streaming_and_waiting(app: WebApp, long: str, waiting: str) -> tuple[steps, steps]:
    """A reply of ``long`` streaming in ANON's tab and ``waiting`` shown queued behind it."""
    first = steps(app.send(long, "Emily", *SLIDERS, ANON))
    next(first), next(first), next(first)  # streaming
    second = steps(app.send(waiting, "Emily", *SLIDERS, ANON))
    next(second)  # shown as queued
    return first, second


def test_a_closed_tab_still_finishes_its_reply_and_answers_its_waiting_message(make_engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(make_engine(EchoChatModel(mode="slow", delay=0.05)))
    first, second = streaming_and_waiting(app, "one two three four five six seven", "still there?")
    assert "still there?" in app.sessions.get(ANON).queued()
    first.close(), second.close()  # the page goes away (Gradio closes its handlers)
    app.on_unload(ANON)
    deadline = time.monotonic() + 10
    bank = app.engine.bank
    while not (bank.has_user("Emily") and len(bank.history("Emily")) == 2) and time.monotonic() < deadline:
        time.sleep(0.02)
    history = app.engine.bank.history("Emily")
    assert [(m.query, m.response) for m in history] == [
        ("one two three four five six seven", "Echo: one two three four five six seven"),
        ("still there?", "Echo: still there?"),
    ]
    assert not any(m.extra.get("stopped") for m in history)  # finished, not cut short


def test_a_reload_mid_reply_shows_the_reply_going_on_and_its_waiting_message(make_engine) -> None:  # type: ignore[no-untyped-def]
    model = EchoChatModel(mode="slow", delay=0.05)
    app = WebApp(make_engine(model))
    app.remember("Emily", ANON)
    first, second = streaming_and_waiting(app, "one two three four five six seven eight", "and this one")
    first.close(), second.close()
    app.on_unload(ANON)
    reloaded = gr.Request(session_hash="after-reload")
    name, _status, chatbot = app.on_load("Emily", reloaded)
    said = [m["content"] for m in chatbot if "metadata" not in m]
    assert name == "Emily" and said[0] == "one two three four five six seven eight"
    assert said[-2:] == ["and this one", "⏳ Queued: I will answer this after the current reply."]
    frames = list(steps(app.follow(reloaded)))  # the page draws the replies until the line is empty
    final = [m["content"] for m in frames[-1] if "metadata" not in m]
    assert final == [
        "one two three four five six seven eight",
        "Echo: one two three four five six seven eight",
        "and this one",
        "Echo: and this one",
    ]
    assert len(app.engine.bank.history("Emily")) == 2


def test_once_greeted_back_after_a_reload_the_next_send_does_not_say_first_again(make_engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(make_engine(EchoChatModel()))
    list(steps(app.send("hello, I am new here", "Emily", *SLIDERS, ANON)))
    session = app.sessions.get(ANON).session
    assert "Welcome back" in app._welcome(session, reloaded=True)  # a reload with stored turns
    status, _kept = app.keep_name("Emily", ANON)  # the next Send said "first conversation" again
    assert "Welcome back" in status
    # Another login or another user does not take the tab over.
    assert app.sessions.adopt(gr.Request(session_hash="x"), "Nora") is None


def test_forget_me_reaches_the_replies_of_a_closed_tab(make_engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(make_engine(EchoChatModel(mode="slow", delay=0.05)))
    first, second = streaming_and_waiting(app, "one two three four five six seven", "my secret")
    first.close(), second.close()
    app.on_unload(ANON)
    other = gr.Request(session_hash="other-tab")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        app.forget_me("Emily", True, other)
    deadline = time.monotonic() + 10
    while app.sessions._orphans and time.monotonic() < deadline:
        app.sessions.adopt(other, "nobody")  # prunes the orphans whose line is done
        time.sleep(0.02)
    assert not app.engine.bank.has_user("Emily")  # the waiting message did not bring the user back


def test_a_turn_stopped_before_any_text_says_so_after_a_reload(make_engine) -> None:  # type: ignore[no-untyped-def]
    model = EchoChatModel(mode="hang")
    app = WebApp(make_engine(model))
    app.remember("Emily", ANON)
    sending = threading.Thread(target=lambda: list(steps(app.send("Are you there?", "Emily", *SLIDERS, ANON))))
    sending.start()
    while not model.calls:  # the model is asked, and says nothing yet
        time.sleep(0.01)
    app.stop(ANON)
    model.release()
    sending.join(10)
    stopped = UI["en"].stopped

    def replies(chat):  # type: ignore[no-untyped-def]
        return [m["content"] for m in chat if m["role"] == "assistant" and "metadata" not in m]

    assert replies(app._render_tab(ANON)) == [stopped]  # live
    _, _, chatbot = app.on_load("Emily", gr.Request(session_hash="reloaded"))
    assert replies(chatbot) == [stopped]  # and after a reload, not an empty bubble
    assert app.engine.bank.history("Emily")[0].response == ""


def test_sending_keeps_the_name_so_a_reload_without_remember_me_shows_the_chat(engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(engine)
    status, kept = app.keep_name("Nora", ANON)  # runs beside the send, on the same click
    assert kept == "Nora" and "Welcome, **Nora**" in status
    list(steps(app.send("hello there", "Nora", *SLIDERS, ANON)))
    _, _, chatbot = app.on_load(kept, gr.Request(session_hash="reloaded"))
    assert next(m["content"] for m in chatbot if "metadata" not in m) == "hello there"
    # typed over without Remember Me: the status line names the user the message goes to
    status, kept = app.keep_name("Emily", ANON)
    assert kept == "Emily" and "**Emily**" in status and "Nora" not in status
    assert app.keep_name("  ", ANON) == (gr.update(), gr.update())  # no name: the send warns


def test_the_name_cannot_change_under_a_reply_being_made(make_engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(make_engine(EchoChatModel(mode="slow", delay=0.05)))
    first = steps(app.send("one two three four five six", "Emily", *SLIDERS, ANON))
    next(first), next(first)
    assert app.keep_name("Nora", ANON) == (gr.update(), gr.update())
    with pytest.warns(UserWarning, match="before changing the name"):
        outputs = list(steps(app.send("I am Nora", "Nora", *SLIDERS, ANON)))
    assert outputs == [(gr.update(), "I am Nora")]  # the message goes back into the box
    list(first)
    assert app.sessions.get(ANON).session.user == "Emily"  # type: ignore[union-attr]
    assert not app.engine.bank.has_user("Nora")
    list(steps(app.send("I am Nora", "Nora", *SLIDERS, ANON)))  # once the reply is done, it switches
    assert [m.query for m in app.engine.bank.history("Nora")] == ["I am Nora"]


def test_a_tab_with_too_many_messages_waiting_refuses_one_more_and_keeps_it(make_engine) -> None:  # type: ignore[no-untyped-def]
    from silicon_friend.web.sessions import MAX_WAITING

    model = EchoChatModel(mode="hang")
    app = WebApp(make_engine(model))
    handlers = [steps(app.send(f"message {i}", "Emily", *SLIDERS, ANON)) for i in range(MAX_WAITING)]
    for h in handlers:
        next(h)
    with pytest.warns(UserWarning, match="Too many messages are waiting"):
        outputs = list(steps(app.send("one more", "Emily", *SLIDERS, ANON)))
    assert outputs[-1][1] == "one more"  # back in the box
    model.release()
    with warnings.catch_warnings():  # the hanging model, released, says nothing: a warning each
        warnings.simplefilter("ignore")
        for h in handlers:
            list(h)
    assert len(app.engine.bank.history("Emily")) == MAX_WAITING


def test_two_quick_reloads_leave_the_reply_to_the_last_page(make_engine) -> None:  # type: ignore[no-untyped-def]
    """The middle page's unload can come before its load: it must not take the tab over."""
    app = WebApp(make_engine(EchoChatModel(mode="slow", delay=0.05)))
    leave_mid_reply(app, "one two three four five six seven", "Nora")
    middle, last = gr.Request(session_hash="middle"), gr.Request(session_hash="last")
    app.on_unload(middle)  # gone before it loaded
    assert app.on_load("Nora", middle) == (gr.update(), "", gr.update())
    name, _, chatbot = app.on_load("Nora", last)
    assert name == "Nora" and chatbot[0]["content"] == "one two three four five six seven"
    final = list(steps(app.follow(last)))[-1]
    assert [m["content"] for m in final if "metadata" not in m][-1] == "Echo: one two three four five six seven"


def test_a_message_the_store_could_not_take_survives_a_reload(engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The page says an unsaved message is saved with the next one; a reload is a new tab, and
    the closed tab's unsaved turn was never tried again (until the app stopped, if then)."""
    from tests.silicon_friend.fakes import FullDisk

    bank = engine.bank
    full = FullDisk(bank, monkeypatch, on=False)
    app = WebApp(engine)
    list(steps(app.send("Hello there", "Emily", *SLIDERS, ANON)))
    full.on = True
    list(steps(app.send("My sister Ana moved to Lisbon.", "Emily", *SLIDERS, ANON)))
    app.on_unload(ANON)
    reloaded = gr.Request(session_hash="reloaded")
    _, _, chat = app.on_load("Emily", reloaded)  # the disk still full: on screen, unsaved
    assert "My sister Ana moved to Lisbon." in [m["content"] for m in chat]
    full.on = False
    list(steps(app.send("Still there?", "Emily", *SLIDERS, reloaded)))
    assert [m.query for m in bank.history("Emily")] == ["Hello there", "My sister Ana moved to Lisbon.", "Still there?"]
    full.on = True
    list(steps(app.send("One more thing.", "Emily", *SLIDERS, reloaded)))
    app.on_unload(reloaded)
    full.on = False  # space freed before the next reload: stored by it, and shown as stored
    _, _, chat = app.on_load("Emily", gr.Request(session_hash="again"))
    assert [m.query for m in bank.history("Emily")][-1] == "One more thing."
    assert "One more thing." in [m["content"] for m in chat]
    assert app.finish(timeout=5) and [m.query for m in bank.history("Emily")].count("One more thing.") == 1


def test_a_page_gradio_ended_but_still_open_keeps_its_temporary_chat_and_its_conversation(make_engine) -> None:  # type: ignore[no-untyped-def]
    """Gradio ends a page whose heartbeat dropped (a network blip, a laptop asleep) while the
    page stays open and sends on: each of its events got a fresh tab, so a temporary chat's
    next message was stored for good and the chat on screen was wiped."""
    app = WebApp(make_engine())
    app.engine.bank.add_turn("Emily", "hello", "hi", at="2023-04-28T10:00")
    app.on_load("Emily", ANON)
    app.set_temporary(True, ANON)
    list(steps(app.send("first private thing", "Emily", *SLIDERS, ANON)))
    app.on_unload(ANON)  # the heartbeat dropped; the page is still open
    final = list(steps(app.send("second private thing", "Emily", *SLIDERS, ANON)))[-1][0]
    assert [m.query for m in app.engine.bank.history("Emily")] == ["hello"]
    shown = [m["content"] for m in final if "metadata" not in m]
    assert "first private thing" in shown and "Echo: second private thing" in shown
    app.set_temporary(False, ANON)
    app.forget_me("Emily", True, ANON)  # "Forget me" reaches the tab too
    assert not app.engine.bank.has_user("Emily")


def test_a_page_gradio_ended_mid_reply_keeps_its_conversation(make_engine) -> None:  # type: ignore[no-untyped-def]
    """The likeliest time for the heartbeat to drop is a long reply: the tab went to the orphans
    and its page got a blank one, so its next message started a new conversation on screen."""
    app = WebApp(make_engine(EchoChatModel(mode="slow", delay=0.05)))
    app.on_load("Emily", ANON)
    list(steps(app.send("My cat is called Miso.", "Emily", *SLIDERS, ANON)))
    leave_mid_reply(app, "one two three four five six seven eight", "Emily")
    deadline = time.monotonic() + 10
    while len(app.engine.bank.history("Emily")) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    final = list(steps(app.send("and now?", "Emily", *SLIDERS, ANON)))[-1][0]
    shown = [m["content"] for m in final if "metadata" not in m]
    assert "My cat is called Miso." in shown and "one two three four five six seven eight" in shown


@pytest.mark.parametrize("how", ["remember", "regenerate", "memories", "forget"])
def test_no_handler_changes_the_user_under_a_reply_being_made(make_engine, how) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(make_engine(EchoChatModel(mode="slow", delay=0.05)))
    app.engine.bank.add_turn("Nora", "hello", "hi", at="2023-05-01T10:00")
    first = steps(app.send("one two three four five six seven", "Emily", *SLIDERS, ANON))
    next(first), next(first)
    with pytest.warns(UserWarning, match="before changing the name"):
        if how == "remember":
            app.remember("Nora", ANON)
        elif how == "regenerate":
            list(steps(app.regenerate("Nora", *SLIDERS, ANON)))
        elif how == "memories":
            app.memory_tab.by_name["memories"]("Nora", "", "", "all", "all", "", "", 1, ANON)
        else:
            app.forget_me("Nora", True, ANON)
    assert app.sessions.get(ANON).session.user == "Emily"  # type: ignore[union-attr]
    chat = [m["content"] for m in list(first)[-1][0] if "metadata" not in m]
    assert chat == ["one two three four five six seven", "Echo: one two three four five six seven"]
    assert app.engine.bank.has_user("Nora")


def test_replies_waiting_across_all_tabs_are_bounded(make_engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    model = EchoChatModel(mode="hang")
    app = WebApp(make_engine(model), concurrency=1)
    app.pool.pending = 3
    tabs = [gr.Request(session_hash=f"tab{i}") for i in range(4)]
    handlers = [steps(app.send(f"message {i}", f"user{i}", *SLIDERS, tabs[i])) for i in range(3)]
    for h in handlers:
        next(h)
    with pytest.warns(UserWarning, match="Too many messages"):
        outputs = list(steps(app.send("one more", "user3", *SLIDERS, tabs[3])))
    assert outputs[-1][1] == "one more"  # back in the box
    model.release()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for h in handlers:
            list(h)
    assert app.pool._count == 0
    with warnings.catch_warnings():  # the released model says nothing: a warning
        warnings.simplefilter("ignore")
        list(steps(app.send("one more", "user3", *SLIDERS, tabs[3])))  # room again
    assert app.engine.bank.has_user("user3")


def test_a_temporary_chat_keeps_no_name_in_the_browser(engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(engine)
    app.set_temporary(True, ANON)
    status, kept = app.keep_name("Nora", ANON)
    assert "Nora" in status and kept == gr.update()


def test_stopping_the_app_stores_the_reply_being_made_and_the_messages_waiting(make_engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(make_engine(EchoChatModel(mode="slow", delay=0.1)))
    first = steps(app.send("one two three four five six seven eight nine ten", "Emily", *SLIDERS, ANON))
    next(first), next(first)
    waiting = [steps(app.send(f"waiting {i}", "Emily", *SLIDERS, ANON)) for i in range(2)]
    for w in waiting:
        next(w)
    first.close(), [w.close() for w in waiting]  # the server stops: its pages go away
    assert app.finish(timeout=20)
    history = app.engine.bank.history("Emily")
    assert [m.query for m in history] == ["one two three four five six seven eight nine ten", "waiting 0", "waiting 1"]
    assert all(m.extra.get("stopped") for m in history)  # each as far as it got, marked stopped
    assert app.finish(timeout=0.1)  # nothing left


def test_remove_last_turn_after_a_reload_can_be_undone_in_the_memory_tab(engine, capsys) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(engine)
    seed(app)  # two turns of earlier days
    reloaded = gr.Request(session_hash="reloaded")
    app.on_load("Emily", reloaded)
    chat = app.remove_last(reloaded)
    assert "Undo delete" in capsys.readouterr().out  # the toast says how to bring it back
    assert "Mount Tai" not in str(chat)
    assert [m.query for m in engine.bank.history("Emily")] == ["I adopted a cat named Miso."]
    app.memory_tab.by_name["undo"]("Emily", "", "", "all", "all", "", "", 1, reloaded)
    assert [m.query for m in engine.bank.history("Emily")] == ["I adopted a cat named Miso.", "I went hiking on Mount Tai."]


def test_remove_last_turn_waits_for_the_reply_being_made(make_engine, capsys) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(make_engine(EchoChatModel(mode="slow", delay=0.05)))
    list(steps(app.send("first", "Emily", *SLIDERS, ANON)))
    sending = steps(app.send("one two three four five six", "Emily", *SLIDERS, ANON))
    next(sending), next(sending)
    app.remove_last(ANON)
    assert "Wait until the current reply is finished" in capsys.readouterr().out
    list(sending)
    assert [m.query for m in app.engine.bank.history("Emily")] == ["first", "one two three four five six"]


def test_a_waiting_message_keeps_the_chat_mode_it_was_sent_in(make_engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(make_engine(EchoChatModel(mode="slow", delay=0.05)))
    list(steps(app.send("hello", "Emily", *SLIDERS, ANON)))
    first = steps(app.send("one two three four five six", "Emily", *SLIDERS, ANON))
    next(first), next(first)
    app.set_temporary(True, ANON)
    secret = steps(app.send("SECRET sent in a temporary chat", "Emily", *SLIDERS, ANON))
    next(secret)
    app.set_temporary(False, ANON)  # switched off again before its turn came
    normal = steps(app.send("a normal message", "Emily", *SLIDERS, ANON))
    next(normal)
    app.set_temporary(True, ANON)  # and on again before that one's turn
    for h in (first, secret, normal):
        list(h)
    assert [m.query for m in app.engine.bank.history("Emily")] == [
        "hello",
        "one two three four five six",
        "a normal message",
    ]


def test_stop_reaches_a_reply_still_being_prepared_or_waiting_for_the_model(make_engine) -> None:  # type: ignore[no-untyped-def]
    model = EchoChatModel(mode="slow", delay=0.05)
    app = WebApp(make_engine(model), concurrency=1)
    other = gr.Request(session_hash="other-tab")
    busy = steps(app.send("one two three four five six seven eight nine ten", "Nora", *SLIDERS, other))
    next(busy), next(busy)  # holds the only model slot
    mine = steps(app.send("a b c d e f g h", "Emily", *SLIDERS, ANON))
    next(mine)  # shown with "…": its turn came, the model is busy elsewhere
    app.stop(ANON)
    list(busy), list(mine)
    stored = app.engine.bank.history("Emily")[0]
    assert stored.extra.get("stopped") and stored.response != "Echo: a b c d e f g h"
    assert app.engine.bank.history("Nora")[0].response.endswith("ten")  # the other tab's is untouched


def test_a_reply_that_ends_between_the_reload_and_the_follow_is_drawn_finished(make_engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(make_engine(EchoChatModel(mode="slow", delay=0.05)))
    leave_mid_reply(app, "one two three four five six", "Emily")
    reloaded = gr.Request(session_hash="reloaded")
    _, _, chatbot = app.on_load("Emily", reloaded)  # drawn mid-reply
    assert "Echo: one two three four five six" not in str(chatbot)
    deadline = time.monotonic() + 10
    while app.sessions.get(reloaded).busy() and time.monotonic() < deadline:
        time.sleep(0.02)  # the reply ends before the page asks to follow it
    frames = list(steps(app.follow(reloaded)))
    assert [m["content"] for m in frames[-1] if "metadata" not in m][-1] == "Echo: one two three four five six"
    assert list(steps(app.follow(reloaded))) == [gr.update()]  # nothing new: no redraw


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_failed_reply_says_in_the_pages_language_whether_the_message_was_saved(make_engine, monkeypatch, language) -> None:  # type: ignore[no-untyped-def]
    from memory_bank.errors import StoreError

    t = UI[language]
    app = WebApp(make_engine(EchoChatModel(mode="empty"), language=language))
    shown = list(steps(app.send("Hello there", "Emily", *SLIDERS, ANON)))[-1][0]
    saved = [m["content"] for m in shown if m["role"] == "assistant" and "⚠️" in str(m["content"])][-1]
    empty = "the model returned an empty reply" if language == "en" else "模型返回了空回复"
    assert saved == t.model_failed.replace("{error}", empty)

    def full_disk(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise StoreError("database or disk is full")

    monkeypatch.setattr(app.engine.bank, "add_turn", full_disk)
    shown = list(steps(app.send("Are you there?", "Emily", *SLIDERS, ANON)))[-1][0]
    lost = [m["content"] for m in shown if m["role"] == "assistant" and "⚠️" in str(m["content"])][-1]
    assert lost.startswith(t.not_saved.split("{error}")[0]) and "disk is full" in lost
    assert t.model_failed.split("{error}")[-1] not in lost  # never "Your message was saved"
    monkeypatch.undo()  # space freed: the next message stores the one that waited, and the page says so
    shown = list(steps(app.send("Still there?", "Emily", *SLIDERS, ANON)))[-1][0]
    assert not [m for m in shown if t.not_saved.split("{error}")[0] in str(m["content"])]
    assert [m.query for m in app.engine.bank.history("Emily")] == ["Hello there", "Are you there?", "Still there?"]


def test_a_refusal_toast_is_in_the_pages_language(engine) -> None:  # type: ignore[no-untyped-def]
    from memory_bank.errors import InvalidInputError
    from memory_bank.text import validate_user

    app = WebApp(engine)
    with pytest.raises(InvalidInputError) as refused:
        validate_user("bob\u200b")
    with pytest.warns(UserWarning) as shown:
        app._warn(str(refused.value), UI["zh"])
    assert "名字 'bob\\u200b' 含有看不见的字符" in str(shown[0].message)


def test_a_newcomer_who_chatted_then_reloaded_mid_reply_is_not_greeted_as_new(make_engine) -> None:  # type: ignore[no-untyped-def]
    """The reloaded page takes the tab over (the reply goes on): its session was opened when Nora
    had no memories, and the greeting said this was the first conversation."""
    app = WebApp(make_engine(EchoChatModel(mode="slow", delay=0.05)))
    list(steps(app.send("I adopted a cat named Miso.", "Nora", *SLIDERS, ANON)))
    leave_mid_reply(app, "one two three four five six seven", "Nora")
    _name, status, _chat = app.on_load("Nora", gr.Request(session_hash="reloaded"))
    assert "Welcome back, **Nora**" in status and "first conversation" not in status


def test_a_message_the_store_could_not_take_survives_signing_in_again_and_stopping_the_app(engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The page says an unsaved message is saved with the next one once the store works again;
    signing in again in the same tab (a new session) dropped it, and so did stopping the app."""
    from tests.silicon_friend.fakes import FullDisk

    bank = engine.bank
    full = FullDisk(bank, monkeypatch, on=False)
    app = WebApp(engine)
    app.remember("Emily", ANON)
    list(steps(app.send("Hello there", "Emily", *SLIDERS, ANON)))
    full.on = True
    list(steps(app.send("My sister Ana moved to Lisbon.", "Emily", *SLIDERS, ANON)))
    app.remember("Emily", ANON)  # the name sent again while the disk is still full: kept on screen
    full.on = False
    list(steps(app.send("Still there?", "Emily", *SLIDERS, ANON)))
    assert [m.query for m in bank.history("Emily")] == ["Hello there", "My sister Ana moved to Lisbon.", "Still there?"]
    full.on = True
    list(steps(app.send("One more thing.", "Emily", *SLIDERS, ANON)))
    full.on = False
    assert app.finish(timeout=5)  # stopping the app: a last try
    assert [m.query for m in bank.history("Emily")][-1] == "One more thing."
