"""The web app's handlers (no browser): sessions, streaming, failures, login, memory actions."""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time

import gradio as gr
import pytest

from memory_bank.errors import InvalidInputError
from silicon_friend.web.app import WebApp, message_text, normalise_history
from tests.silicon_friend.fakes import EchoChatModel, steps

SLIDERS = (0.7, 0.9, 64, 2)
ANON = gr.Request(session_hash="tab1")


def send(app: WebApp, message: str, name: str = "Emily", request=ANON):  # type: ignore[no-untyped-def]
    """Run the send handler to the end; return the final (chatbot, textbox) outputs."""
    outputs = list(steps(app.send(message, name, *SLIDERS, request)))
    assert all(o[1] == gr.update() for o in outputs)  # the page emptied the box; nothing refills it
    return outputs[-1]


def said(chatbot):  # type: ignore[no-untyped-def]
    """The messages of a rendered chat, without the notes under replies ("memories used")."""
    return [m for m in chatbot if "metadata" not in m]


def session_of(app: WebApp, request=ANON):  # type: ignore[no-untyped-def]
    return app.sessions.get(request).session


def test_gradio_6_history_is_normalised() -> None:
    history = [
        {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Hello"}, {"type": "text", "text": "!"}]},
        {"role": "user", "content": "plain"},
        ["old", "pair"],
    ]
    assert normalise_history(history) == [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "plain"},
        {"role": "user", "content": "old"},
        {"role": "assistant", "content": "pair"},
    ]
    assert message_text(None) == "" and normalise_history(None) == []


def test_remember_me_then_two_messages(engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(engine)
    status, chatbot, name, kept = app.remember("  Emily ", ANON)
    assert "Welcome, **Emily**" in status and chatbot == [] and name == kept == "Emily"
    send(app, "I adopted a cat named Miso.")
    chatbot, _ = send(app, "What is my cat called?")
    assert [m["content"] for m in said(chatbot)] == [
        "I adopted a cat named Miso.",
        "Echo: I adopted a cat named Miso.",
        "What is my cat called?",
        "Echo: What is my cat called?",
    ]
    assert len(engine.bank.history("Emily")) == 2
    status, *_ = app.remember("Emily", ANON)
    assert "Welcome back, **Emily**" in status


def test_streaming_yields_partial_replies(make_engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(make_engine(EchoChatModel(mode="slow", delay=0.05)))
    outputs = list(steps(app.send("one two three", "Emily", *SLIDERS, ANON)))
    # The message is on screen in every frame: queued, then "…" while its reply is prepared.
    assert all(said(o[0])[-2] == {"role": "user", "content": "one two three"} for o in outputs)
    replies = [said(o[0])[-1]["content"] for o in outputs]
    partials = [r for r in replies if r.startswith("Echo:")]
    assert replies[: len(replies) - len(partials)] and all(
        r in ("…", "⏳ Queued: I will answer this after the current reply.") for r in replies[: -len(partials)]
    )
    assert len(partials) >= 3 and all(b.startswith(a.strip()) for a, b in itertools.pairwise(partials))
    assert partials[-1] == "Echo: one two three"


def test_sending_without_a_name_warns_without_blocking_the_page(engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(engine)
    for name, why in (("", "enter your name"), ("bad\x07name", "control")):
        with pytest.warns(UserWarning, match=why):  # a toast (gr.Warning), not an error overlay
            outputs = list(steps(app.send("hi", name, *SLIDERS, ANON)))
        assert outputs == [(gr.update(), "hi")]  # the message goes back into the box
    assert engine.bank.users() == []


def test_changing_the_name_switches_the_user(engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(engine)
    send(app, "hello from Emily")
    send(app, "hello from Nora", name="Nora")
    session = session_of(app)
    assert session.user == "Nora" and [t.query for t in session.turns] == ["hello from Nora"]
    assert [m.query for m in engine.bank.history("Emily")] == ["hello from Emily"]


def test_failed_reply_is_shown_and_the_message_kept(make_engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(make_engine(EchoChatModel(mode="error")))
    with pytest.warns(UserWarning):  # gr.Warning outside a request
        chatbot, _ = send(app, "Are you there?")
    assert said(chatbot)[-1]["content"].startswith("⚠️ The model failed to reply")
    assert "Your message was saved" in said(chatbot)[-1]["content"]
    assert app.engine.bank.history("Emily")[0].query == "Are you there?"


def test_regenerate_remove_new_conversation(make_engine) -> None:  # type: ignore[no-untyped-def]
    model = EchoChatModel()
    app = WebApp(make_engine(model))
    send(app, "first")
    send(app, "second")
    model.prefix = "Again:"
    *_, (chatbot, _) = steps(app.regenerate("Emily", *SLIDERS, ANON))
    assert said(chatbot)[-1]["content"] == "Again: second" and len(app.engine.bank.history("Emily")) == 2
    assert [m["content"] for m in said(app.remove_last(ANON))] == ["first", "Echo: first"]
    chat, status = app.new_conversation(ANON)
    assert chat == [] and session_of(app).turns == [] and "first" not in status.lower()
    assert len(app.engine.bank.history("Emily")) == 1


def test_stop_button_stops_the_reply(make_engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(make_engine(EchoChatModel(delay=0.05)))
    app.remember("Emily", ANON)
    stream = steps(app.send("a b c d e f g h i j k l", "Emily", *SLIDERS, ANON))
    next(stream), next(stream), next(stream)
    app.stop(ANON)
    *_, (chatbot, _) = stream
    assert said(chatbot)[-1]["content"].endswith("⏹ (stopped)") and session_of(app).turns[-1].stopped


def test_a_message_sent_while_a_reply_streams_waits_its_turn(make_engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(make_engine(EchoChatModel(delay=0.1)))
    first = steps(app.send("one two three four five six", "Emily", *SLIDERS, ANON))
    next(first), next(first), next(first)  # the first reply is streaming
    results: list[object] = []
    second = threading.Thread(
        target=lambda: results.append(list(steps(app.send("and me?", "Emily", *SLIDERS, ANON))))
    )
    second.start()
    import time

    deadline = time.monotonic() + 5
    while "and me?" not in app.sessions.get(ANON).queued() and time.monotonic() < deadline:
        time.sleep(0.01)
    chat = [m["content"] for m in said(next(first)[0])]
    assert chat[-2:] == ["and me?", "⏳ Queued: I will answer this after the current reply."]
    list(first)
    second.join(10)
    assert [(m.query, m.response) for m in app.engine.bank.history("Emily")] == [
        ("one two three four five six", "Echo: one two three four five six"),
        ("and me?", "Echo: and me?"),
    ]


FORM = ("", "all", "all", "", "", 1)  # the memory tab's search, kind, status, from, to, page


def memory_table(app: WebApp, name: str = "Emily", request=ANON, form=FORM) -> list[list]:  # type: ignore[no-untyped-def]
    """The rows of the memory tab's table as ``app`` shows them to ``request``."""
    out = app.memory_tab.memories(name, "", *form, request)
    return out[3]["data"] if isinstance(out[3], dict) else out[3]


def test_memory_tab_delete_export_and_forget_me(engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(engine)
    send(app, "I adopted a cat named Miso.")
    send(app, "I like tea.")
    out = app.memory_tab.memories("Emily", "", *FORM, ANON)
    assert [row[2] for row in out[3]["data"]][::-1] == [
        "I adopted a cat named Miso. Echo: I adopted a cat named Miso.",
        "I like tea. Echo: I like tea.",
    ]
    assert out[4].axes
    app.memory_tab.select("Emily", gr.SelectData(None, {"index": [0, 2], "value": ""}), ANON)
    *_, chatbot = app.memory_tab.handlers()["delete"]("Emily", "", *FORM, ANON)
    assert len(memory_table(app)) == 1 and len(said(chatbot)) == 2 and len(engine.bank.history("Emily")) == 1
    link = app.export("Emily", ANON)
    token = link["value"].split("sf-export/", 1)[1].split(")", 1)[0]
    item = app.downloads.get(token, None)
    assert item is not None and item.filename == "memories_Emily.json"
    assert list(json.loads(item.data)) == ["Emily"]
    app.remove_last(ANON)  # a deletion after the export: the exported file had the removed words
    assert app.downloads.get(token, None) is None
    link = app.export("Emily", ANON)
    token = link["value"].split("sf-export/", 1)[1].split(")", 1)[0]
    with pytest.warns(UserWarning, match="Tick the box"):
        app.forget_me("Emily", False, ANON)
    assert engine.bank.has_user("Emily")
    out = app.forget_me("Emily", True, ANON)
    assert "were deleted" in out[0] and not engine.bank.has_user("Emily") and session_of(app).turns == []
    assert out[-1] and not out[-1].strip()  # the kept name is overwritten (an empty value is never stored)
    assert "Emily" not in str(app.on_load(out[-1], ANON))
    assert app.downloads.get(token, None) is None
    with pytest.warns(UserWarning, match="no deletion to undo"):  # the undo list went with the user
        app.memory_tab.handlers()["undo"]("Emily", "", *FORM, ANON)
    assert not engine.bank.has_user("Emily")


def test_with_login_the_signed_in_name_is_the_memory_user(engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(engine, auth=True)
    emily, nora = (
        gr.Request(username="emily", session_hash="t"),
        gr.Request(username="nora", session_hash="t"),
    )
    engine.bank.add_turn("nora", "my secret diary", "safe with me")
    name_update, status, _ = app.on_load("", emily)
    assert (
        name_update["value"] == "emily" and name_update["interactive"] is False and "Signed in as" in status
    )
    # Typing another name changes nothing: every action uses the login.
    send(app, "hello", name="nora", request=emily)
    assert session_of(app, emily).user == "emily"
    assert [m.query for m in engine.bank.history("nora")] == ["my secret diary"]
    assert all("secret" not in row[2] for row in memory_table(app, "nora", emily))
    # The same session hash under another login is another session.
    assert [row[2] for row in memory_table(app, "emily", nora)] == ["my secret diary safe with me"]
    with pytest.warns(UserWarning, match="not signed in"):
        out = app.memory_tab.memories("emily", "", *FORM, gr.Request(session_hash="t"))
    assert out == (gr.update(),) * len(app.memory_tab.outputs)


def test_many_browser_sessions_at_once(make_engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(make_engine(EchoChatModel(delay=0.001)))
    errors: list[BaseException] = []

    def browse(user: str) -> None:
        try:
            tab = gr.Request(session_hash=f"tab-{user}")
            app.remember(user, tab)
            for j in range(3):
                chatbot, _ = send(app, f"{user} says {j}", name=user, request=tab)
                assert said(chatbot)[-1]["content"] == f"Echo: {user} says {j}"
            assert len(session_of(app, tab).turns) == 3
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=browse, args=(f"user{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    for i in range(6):
        assert [m.query for m in app.engine.bank.history(f"user{i}")] == [
            f"user{i} says {j}" for j in range(3)
        ]


def test_the_app_builds_with_title_and_labels(engine) -> None:  # type: ignore[no-untyped-def]
    demo = WebApp(engine).build()
    assert demo.title == "SiliconFriend"
    labels = {b.value for b in demo.blocks.values() if isinstance(getattr(b, "value", None), str)}
    for label in ("Remember Me", "Send", "Stop", "New Conversation", "Regenerate", "Remove Last Turn",
                  "Summarize Memory Bank", "Export my memories", "Forget me", "Delete", "Remember this"):  # fmt: skip
        assert label in labels


def background_engine(make_engine, bank, model):  # type: ignore[no-untyped-def]
    from memory_bank.summaries import RolloverScheduler, Summarizer

    summarizer = Summarizer(bank, model, "en", sleep=lambda _s: None)
    return make_engine(model, summarizer=summarizer, scheduler=RolloverScheduler(summarizer))


def test_summarize_memory_bank_button_works_in_the_background(make_engine, bank) -> None:  # type: ignore[no-untyped-def]
    model = EchoChatModel(reply="The user adopted a cat called Miso and is very happy about it.")
    engine = background_engine(make_engine, bank, model)
    app = WebApp(engine)
    with pytest.warns(UserWarning, match="no memories"):
        app.summarize("Emily", ANON)
    send(app, "I adopted a cat named Miso.")
    app.set_temporary(True, ANON)
    with pytest.warns(UserWarning, match="temporary chat writes no memories"):  # as its switch promises
        app.summarize("Emily", ANON)
    assert engine.scheduler.wait(10) and [m.kind.value for m, _ in bank.memories("Emily")] == ["turn"]
    app.set_temporary(False, ANON)
    first = app.summarize("Emily", ANON)  # returns at once, with the state
    assert "in the background" in first or "Summaries up to date" in first
    assert engine.scheduler.wait(10)
    text, knows, line = app.summary_tick(ANON)
    assert line.startswith("✓ Summaries up to date: 4 written")  # today's two layers, then the two global ones
    assert "**Summary of past events**" in text and "adopted a cat called Miso" in text
    assert "adopted a cat called Miso" in knows and "(not summarised yet)" not in text
    assert app.summary_tick(ANON) == (gr.update(),) * 3  # nothing changed: nothing redrawn
    engine.close()


def test_the_summary_timer_stops_once_the_last_state_is_drawn(make_engine, bank) -> None:  # type: ignore[no-untyped-def]
    # an idle page is not re-rendered every two seconds: the timer runs while a run is queued or
    # running and stops on the tick that draws its end
    model = EchoChatModel(reply="The user adopted a cat called Miso and is very happy about it.")
    engine = background_engine(make_engine, bank, model)
    app = WebApp(engine)
    *_, timer = app.timer_tick(ANON)
    assert timer.active is False  # nobody signed in: nothing to poll
    send(app, "I adopted a cat named Miso.")
    app.summarize("Emily", ANON)
    assert engine.scheduler.wait(10)
    _text, _knows, line, timer = app.timer_tick(ANON)
    assert line.startswith("✓ Summaries up to date") and timer.active is False  # drawn, then off
    engine.close()


def test_a_refused_message_is_given_back(engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import silicon_friend.engine as engine_module

    monkeypatch.setattr(engine_module, "MAX_TEXT", 10)
    app = WebApp(engine)
    with pytest.warns(UserWarning, match="limit is 10"):
        outputs = list(steps(app.send("far too long a message", "Emily", *SLIDERS, ANON)))
    assert outputs[-1] == ([], "far too long a message") and not engine.bank.users()  # back in the box


def test_a_message_too_long_for_the_model_is_given_back(make_engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(make_engine(context_tokens=300))
    long = "I like tea. " * 600
    with pytest.warns(UserWarning, match="send a shorter message"):
        outputs = list(steps(app.send(long, "Emily", *SLIDERS, ANON)))
    assert outputs[-1] == ([], long) and not app.engine.bank.users()  # back in the box, nothing stored
    chat = list(steps(app.send("I like tea.", "Emily", *SLIDERS, ANON)))[-1][0]
    assert [m["content"] for m in chat[:2]] == ["I like tea.", "Echo: I like tea."]  # the chat goes on


def test_user_and_model_text_is_rendered_inert(make_engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(
        make_engine(EchoChatModel(reply="Sure! ![x](http://evil.example/leak.png) <img src=http://e/x>"))
    )
    chatbot, _ = send(app, "<b>hi</b> ![me](http://evil.example/me.png)")
    text = " ".join(m["content"] for m in chatbot)
    assert "<" not in text and "![" not in text


def test_a_name_in_another_case_is_pointed_out(engine) -> None:  # type: ignore[no-untyped-def]
    engine.bank.add_turn("Frank", "I love sailing.", "Nice!")
    app = WebApp(engine)
    with pytest.warns(UserWarning, match="case-sensitive.*Frank"):
        status, *_ = app.remember("frank", ANON)
    assert "first conversation" in status
    with warnings_none():
        app.remember("Frank", ANON)


def test_with_login_no_login_learns_that_another_login_exists(engine) -> None:  # type: ignore[no-untyped-def]
    """Logins "alice" and "Alice" are two users; the case hint named one to the other."""
    engine.bank.add_turn("alice", "my private plans", "safe with me")
    app = WebApp(engine, auth=True)
    with warnings_none():
        status, *_ = app.remember("Alice", gr.Request(username="Alice", session_hash="a"))
    assert "alice" not in status


def test_an_unknown_user_error_names_no_other_user(engine) -> None:  # type: ignore[no-untyped-def]
    """The error reaches MCP clients and web pages: it must not list who else has memories."""
    from memory_bank import UserNotFoundError

    engine.bank.add_turn("Alice Secretname", "my private plans", "safe with me")
    with pytest.raises(UserNotFoundError) as caught:
        engine.bank.user("Mallory")
    assert "Mallory" in str(caught.value) and "Secretname" not in str(caught.value)


@contextlib.contextmanager
def warnings_none():  # type: ignore[no-untyped-def]
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def test_a_failed_background_summary_is_shown_and_the_old_summaries_stay(make_engine, bank) -> None:  # type: ignore[no-untyped-def]
    from langchain_core.language_models import FakeListChatModel

    from memory_bank import MemoryKind

    bank.add_turn("Emily", "I adopted a cat named Miso.", "Lovely!", at="2023-04-28T10:00")
    bank.add_turn("Emily", "Miso slept on my keyboard.", "Cats love warm places!", at="2023-04-29T10:00")
    bank.set_layer("Emily", MemoryKind.GLOBAL_PORTRAIT, "Emily is warm and caring.")
    # A weak model: the pet as the portrait, and the companion's voice, every time.
    weak = FakeListChatModel(
        responses=[
            "Miso is a playful and curious cat who loves naps.",
            "That sounds lovely! You must be happy.",
        ]
    )
    engine = background_engine(make_engine, bank, weak)
    app = WebApp(engine)
    app.remember("Emily", ANON)  # signing in queues the two unsummarised days
    assert app.summary_tick(ANON)[2]  # the state line shows the run (queued, running or done)
    assert engine.scheduler.wait(20)
    status = engine.summary_status("Emily")
    assert status.state == "done" and status.report.failed and (status.done, status.total) == (3, 3)
    with pytest.warns(UserWarning, match="could not be made.*keep their previous text"):  # a toast, once
        text, knows, line = app.summary_tick(ANON)
    assert line.startswith("⚠️ 2 of the summaries could not be made (day’s mood 2023-04-28: the model kept")
    assert "Emily is warm and caring." in text and "Emily is warm and caring." in knows
    assert bank.profile("Emily")["global_portrait"] == "Emily is warm and caring."  # the old one stays
    assert len(bank.history("Emily")) == 2  # no turn lost
    engine.close()


def test_a_double_click_on_send_is_one_message(engine, capsys) -> None:  # type: ignore[no-untyped-def]
    """The box keeps the text until the first click's answer clears it: a double click sent it
    twice, stored and answered twice. The same words sent again a moment later are a new message
    (within 1.5 s a quick second "ok" was dropped, and silently)."""
    app = WebApp(engine)
    sent = time.monotonic()
    first = steps(app.send("I got the job!", "Emily", *SLIDERS, ANON))
    next(first)  # the first click: in line
    # The second click of the double click (on a thread: were it a message, it would wait its turn).
    second = threading.Thread(target=lambda: list(steps(app.send("I got the job!", "Emily", *SLIDERS, ANON))))
    second.start()
    list(first)
    second.join(10)
    assert [m.query for m in engine.bank.history("Emily")] == ["I got the job!"]
    assert "sent once" in capsys.readouterr().out  # the dropped click is said
    time.sleep(max(0.0, sent + 0.8 - time.monotonic()))
    send(app, "I got the job!")
    assert [m.query for m in engine.bank.history("Emily")] == ["I got the job!"] * 2


def test_a_message_that_shows_nothing_is_not_sent(engine) -> None:  # type: ignore[no-untyped-def]
    """A lone zero-width space passed the empty-message check (str.strip keeps it) and was
    stored and answered as a turn."""
    app = WebApp(engine)
    for invisible in ("\u200b", " \u200b\u2060 ", "\u00a0"):
        list(steps(app.send(invisible, "Emily", *SLIDERS, ANON)))
    assert not engine.bank.has_user("Emily") or not engine.bank.history("Emily")
    with pytest.raises(InvalidInputError, match="empty"):
        list(engine.stream(session_of(app), "\u200b"))
    send(app, "👍")  # an emoji alone is a message
    assert [m.query for m in engine.bank.history("Emily")] == ["👍"]


def test_the_name_is_kept_before_the_reply_and_across_restarts(engine) -> None:  # type: ignore[no-untyped-def]
    """The page runs a trigger's events in their order, each after the one before ends: keep_name
    registered after the reply ran when the first reply was over (a newcomer who reloaded during
    it lost the conversation from the screen). And the kept name's key was made at each start, so
    Remember Me was lost at every restart."""
    app = WebApp(engine)
    demo = app.build()
    names = [getattr(f.fn, "__name__", "") for f in demo.fns.values()]
    assert names.index("keep_name") < names.index("send")
    secret = app._name_secret()
    assert secret and WebApp(engine)._name_secret() == secret  # the next start reads the same key


def test_a_double_click_window_does_not_slide_and_refused_messages_all_come_back() -> None:
    from silicon_friend.web.sessions import WebSession

    tab = WebSession()
    assert not tab.repeated("ok", within=0.3)
    time.sleep(0.2)
    assert tab.repeated("ok", within=0.3)  # a double click
    time.sleep(0.15)
    assert not tab.repeated("ok", within=0.3)  # 0.35 s after the one sent: a new message
    assert tab.hand_back("second", 2) == "second"
    assert tab.hand_back("first", 1) == "first\n\nsecond"  # refused at once: in the order sent
    tab.enqueue("third")
    assert tab.hand_back("fourth") == "fourth"


def test_remove_last_and_regenerate_never_act_on_a_turn_the_page_does_not_show(make_engine) -> None:  # type: ignore[no-untyped-def]
    """Tab A removed "three"; tab B, still showing it, removed "two" (which it did not show as
    last) or answered "two" again. Now B is told the conversation changed and sees it as it is;
    its page is also redrawn at its next watch tick."""
    app = WebApp(make_engine(EchoChatModel()))
    other = gr.Request(session_hash="tab2")
    for text in ("one", "two", "three"):
        send(app, text)
    app.remember("Emily", other)
    shown_in_b = app._render_tab(other)  # what tab B's page shows
    assert [m["content"] for m in said(shown_in_b)][-2:] == ["three", "Echo: three"]
    app.remove_last(ANON, app._render_tab(ANON))  # tab A removes "three"
    assert [m.query for m in app.engine.bank.history("Emily")] == ["one", "two"]
    chat = app.remove_last(other, shown_in_b)  # tab B, from its stale page
    assert [m.query for m in app.engine.bank.history("Emily")] == ["one", "two"]  # nothing removed
    assert [m["content"] for m in said(chat)][-2:] == ["two", "Echo: two"]  # and it sees the turn now last
    *_, (chat, _) = steps(app.regenerate("Emily", *SLIDERS, other, shown_in_b))
    assert [(m.query, m.response) for m in app.engine.bank.history("Emily")] == [("one", "Echo: one"), ("two", "Echo: two")]
    tick = app.ended_tick(other)  # the watch redraws the page of a tab whose turns changed elsewhere
    assert tick[1] != gr.update() and [m["content"] for m in said(tick[1])][-1] == "Echo: two"
    assert app.ended_tick(other)[1] == gr.update()  # once


def test_a_user_stored_under_an_older_spelling_of_the_name_is_one_user_everywhere(engine) -> None:  # type: ignore[no-untyped-def]
    """A user an older version stored under a spelling the name rule changes (decomposed "Zoë")
    is found by the rule's form; the web app compared the two spellings by .strip() only: each
    message opened a new conversation, and "Forget me" left the user's export downloadable."""
    import unicodedata

    bank = engine.bank
    stored, typed = unicodedata.normalize("NFD", "Zoë"), unicodedata.normalize("NFC", "Zoë")
    bank.storage.ensure_user(stored)
    bank.add_turn(stored, "my bank PIN is 4417", "noted")
    app = WebApp(engine)
    list(steps(app.send("first message", typed, *SLIDERS, ANON)))
    chatbot = list(steps(app.send("second message", typed, *SLIDERS, ANON)))[-1][0]
    assert [m["content"] for m in chatbot if m["role"] == "user" and "metadata" not in m] == [
        "first message", "second message"
    ]
    link = app.export(typed, ANON)
    token = link["value"].split("sf-export/", 1)[1].split(")", 1)[0]
    app.forget_me(typed, True, ANON)
    assert not bank.has_user(typed) and app.downloads.get(token, None) is None

