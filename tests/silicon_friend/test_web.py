"""The web app's handlers (no browser): sessions, streaming, failures, login, memory actions."""

from __future__ import annotations

import threading
from pathlib import Path

import gradio as gr
import pytest

from memory_bank.original_format import load_memory_file
from silicon_friend.web.app import WebApp, message_text, normalise_history
from tests.silicon_friend.fakes import EchoChatModel

SLIDERS = (0.7, 0.9, 64, 2)
ANON = gr.Request()


def send(app: WebApp, session, message: str, name: str = "Emily", request=ANON):  # type: ignore[no-untyped-def]
    """Run the send handler to the end; return the final (session, chatbot, textbox) outputs."""
    outputs = list(app.send(message, name, session, *SLIDERS, request))
    assert outputs[0][2] == ""  # the textbox is cleared at once
    return outputs[-1]


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
    session, status, chatbot, name = app.remember("  Emily ", None, ANON)
    assert "Welcome, **Emily**" in status and chatbot == [] and name == "Emily"
    session, chatbot, _ = send(app, session, "I adopted a cat named Miso.")
    session, chatbot, _ = send(app, session, "What is my cat called?")
    assert [m["content"] for m in chatbot] == [
        "I adopted a cat named Miso.",
        "Echo: I adopted a cat named Miso.",
        "What is my cat called?",
        "Echo: What is my cat called?",
    ]
    assert len(engine.bank.history("Emily")) == 2
    _, status, _, _ = app.remember("Emily", session, ANON)
    assert "Welcome back, **Emily**" in status


def test_streaming_yields_partial_replies(make_engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(make_engine())
    outputs = list(app.send("one two three", "Emily", None, *SLIDERS, ANON))
    first_bot = outputs[0][1][-1]["content"]
    assert first_bot == "…"  # placeholder before the first token
    partials = [o[1][-1]["content"] for o in outputs[1:]]
    assert partials[0].strip() == "Echo:" and partials[-1] == "Echo: one two three"


def test_sending_without_a_name_asks_for_one(engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(engine)
    with pytest.raises(gr.Error, match="enter your name"):
        list(app.send("hi", "", None, *SLIDERS, ANON))
    with pytest.raises(gr.Error, match="control"):
        list(app.send("hi", "bad\x07name", None, *SLIDERS, ANON))


def test_changing_the_name_switches_the_user(engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(engine)
    session, *_ = send(app, None, "hello from Emily")
    session, *_ = send(app, session, "hello from Nora", name="Nora")
    assert session.user == "Nora" and [t.query for t in session.turns] == ["hello from Nora"]
    assert [m.query for m in engine.bank.history("Emily")] == ["hello from Emily"]


def test_failed_reply_is_shown_and_the_message_kept(make_engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(make_engine(EchoChatModel(mode="error")))
    with pytest.warns(UserWarning):  # gr.Warning outside a request
        _, chatbot, _ = send(app, None, "Are you there?")
    assert chatbot[-1]["content"].startswith("⚠️ The model failed to reply")
    assert "Your message was saved" in chatbot[-1]["content"]
    assert app.engine.bank.history("Emily")[0].query == "Are you there?"


def test_regenerate_remove_new_conversation(make_engine) -> None:  # type: ignore[no-untyped-def]
    model = EchoChatModel()
    app = WebApp(make_engine(model))
    session, *_ = send(app, None, "first")
    session, *_ = send(app, session, "second")
    model.prefix = "Again:"
    *_, (session, chatbot, _) = app.regenerate("Emily", session, *SLIDERS, ANON)
    assert chatbot[-1]["content"] == "Again: second" and len(app.engine.bank.history("Emily")) == 2
    assert [m["content"] for m in app.remove_last(session)] == ["first", "Echo: first"]
    assert app.new_conversation(session) == [] and session.turns == []
    assert len(app.engine.bank.history("Emily")) == 1


def test_stop_button_stops_the_reply(make_engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(make_engine(EchoChatModel(delay=0.05)))
    session = app.remember("Emily", None, ANON)[0]
    stream = app.send("a b c d e f g h i j k l", "Emily", session, *SLIDERS, ANON)
    next(stream), next(stream)
    app.stop(session)
    *_, (session, chatbot, _) = stream
    assert chatbot[-1]["content"].endswith("⏹ (stopped)") and session.turns[-1].stopped


def test_memory_tab_delete_export_and_forget_me(engine, tmp_path) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(engine)
    session, *_ = send(app, None, "I adopted a cat named Miso.")
    session, *_ = send(app, session, "I like tea.")
    session, table, figure, dropdown = app.memories("Emily", session, ANON)
    assert [row[3] for row in table][::-1] == [
        "I adopted a cat named Miso.\nEcho: I adopted a cat named Miso.",
        "I like tea.\nEcho: I like tea.",
    ]
    assert figure.axes and len(dropdown["choices"]) == 2
    victim = table[0][0]
    session, table, _, _, chatbot = app.delete_memory("Emily", session, victim, ANON)
    assert len(table) == 1 and len(chatbot) == 2 and len(engine.bank.history("Emily")) == 1
    session, file = app.export("Emily", session, ANON)
    data = load_memory_file(file["value"])
    assert list(data) == ["Emily"] and Path(file["value"]).name == "memories_Emily.json"
    with pytest.raises(gr.Error, match="Tick the box"):
        app.forget_me("Emily", session, False, ANON)
    out = app.forget_me("Emily", session, True, ANON)
    assert "were deleted" in out[1] and not engine.bank.has_user("Emily") and out[0].turns == []


def test_with_login_the_signed_in_name_is_the_memory_user(engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(engine, auth=True)
    emily, nora = gr.Request(username="emily"), gr.Request(username="nora")
    engine.bank.add_turn("nora", "my secret diary", "safe with me")
    name_update, session, status = app.on_load(emily)
    assert (
        name_update["value"] == "emily" and name_update["interactive"] is False and "Signed in as" in status
    )
    # Typing another name changes nothing: every action uses the login.
    session, *_ = send(app, session, "hello", name="nora", request=emily)
    assert session.user == "emily" and [m.query for m in engine.bank.history("nora")] == ["my secret diary"]
    _, table, _, _ = app.memories("nora", session, emily)
    assert all("secret" not in row[3] for row in table)
    # A session object from another login is never reused.
    _, table, _, _ = app.memories("emily", session, nora)
    assert [row[3] for row in table] == ["my secret diary\nsafe with me"]
    with pytest.raises(gr.Error, match="not signed in"):
        app.memories("emily", session, gr.Request())


def test_many_browser_sessions_at_once(make_engine) -> None:  # type: ignore[no-untyped-def]
    app = WebApp(make_engine(EchoChatModel(delay=0.001)))
    errors: list[BaseException] = []

    def browse(user: str) -> None:
        try:
            session = app.remember(user, None, ANON)[0]
            for j in range(3):
                session, chatbot, _ = send(app, session, f"{user} says {j}", name=user)
                assert chatbot[-1]["content"] == f"Echo: {user} says {j}"
            assert len(session.turns) == 3
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
                  "Summarize Memory Bank", "Export my memories", "Forget me", "Delete memory"):  # fmt: skip
        assert label in labels


def test_summarize_memory_bank_button(make_engine, bank) -> None:  # type: ignore[no-untyped-def]
    from memory_bank.summaries import Summarizer

    model = EchoChatModel(reply="The user adopted a cat called Miso and is very happy about it.")
    app = WebApp(make_engine(model, summarizer=Summarizer(bank, model, "en", sleep=lambda _s: None)))
    with pytest.raises(gr.Error, match="no memories"):
        app.summarize("Emily", None, ANON)
    session, *_ = send(app, None, "I adopted a cat named Miso.")
    session, text = app.summarize("Emily", session, ANON)
    assert "**Summary of past events**" in text and "adopted a cat called Miso" in text
    assert "(not summarised yet)" not in text


def test_a_refused_message_is_given_back(engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import silicon_friend.engine as engine_module

    monkeypatch.setattr(engine_module, "MAX_TEXT", 10)
    app = WebApp(engine)
    outputs = []
    with pytest.raises(gr.Error, match="limit is 10"):
        for out in app.send("far too long a message", "Emily", None, *SLIDERS, ANON):
            outputs.append(out)
    assert outputs[-1][1] == [] and outputs[-1][2] == "far too long a message"  # back in the textbox
