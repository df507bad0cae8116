"""SiliconFriend on real local models (marked integration): the packaged SmolLM2 through
llama.cpp in-process, and through llama_cpp.server as an OpenAI-compatible server on loopback."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from silicon_friend.engine import ChatSettings, SiliconFriend, Turn
from silicon_friend.models import load_model
from tests.conftest import llama_server

pytestmark = pytest.mark.integration


def test_default_model_replies_and_budgets_a_2048_context(bank, clock) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("llama_cpp")
    model = load_model({"backend": "llamacpp", "n_ctx": 2048})
    assert model.context_tokens == 2048
    assert model.count_tokens("Hello, I went to the museum yesterday.") < 20  # the real tokenizer
    for day in range(1, 6):  # a long past: many related memories
        for i in range(6):
            bank.add_turn(
                "Emily", f"On day {day} I walked my dog Rex in the park, story {i}. " * 6, "Lovely! " * 20,
                at=f"2023-04-{day:02d}T1{i}:00",
            )  # fmt: skip
    engine = SiliconFriend(bank, model, settings=ChatSettings(max_new_tokens=24, top_k=8, temperature=0.0))
    session = engine.start("Emily")
    for i in range(9):  # long in-session history too
        session.turns.append(
            Turn(query=f"Tell me about my dog Rex, part {i}. " * 10, timestamp="2023-05-01T10:00",
                 response="Rex is a good dog. " * 20)
        )  # fmt: skip
    fitted = engine.prepare(session, "What is my dog called?")
    assert fitted.prompt_tokens + fitted.max_new_tokens <= 2048
    assert fitted.history_turns < 7 and len(fitted.memories) < 8  # trimmed to fit
    pieces = list(engine.stream(session, "What is my dog called?"))
    turn = session.turns[-1]
    assert turn.error is None and turn.response and len(pieces) > 1  # streamed, no context overflow
    assert bank.history("Emily")[-1].response == turn.response


def test_stop_a_real_stream(bank) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("llama_cpp")
    engine = SiliconFriend(bank, load_model(None), settings=ChatSettings(max_new_tokens=200))
    session = engine.start("Emily")
    pieces = []
    for piece in engine.stream(session, "Write a long story about a dragon."):
        pieces.append(piece)
        if len(pieces) == 3:
            engine.stop(session)
    turn = session.turns[-1]
    assert turn.stopped and len(pieces) <= 5 and bank.history("Emily")[0].response == turn.response


@pytest.fixture(scope="module")
def openai_server() -> Iterator[str]:
    with llama_server() as url:
        yield url


def test_openai_backend_against_a_real_server(openai_server: str, bank, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a local server needs no key
    model = load_model({"backend": "openai", "model": "smollm2", "base_url": openai_server, "n_ctx": 2048})
    assert model.context_tokens == 2048
    engine = SiliconFriend(bank, model, settings=ChatSettings(max_new_tokens=16, temperature=0.0))
    session = engine.start("Emily")
    first = list(engine.stream(session, "Hi! My cat is called Miso."))
    second = list(engine.stream(session, "What is my cat called?"))
    assert len(first) > 1 and len(second) > 1  # streamed token by token
    assert all(not t.error and t.response for t in session.turns)
    assert [m.query for m in bank.history("Emily")] == [
        "Hi! My cat is called Miso.",
        "What is my cat called?",
    ]
    # The per-reply token limit reaches the server (it would otherwise use the spec's 400).
    counter = load_model(None).count_tokens
    assert all(counter(t.response) <= 18 for t in session.turns)


def test_terminal_chat_subprocess_with_the_default_model(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("llama_cpp")
    cmd = [sys.executable, "-m", "silicon_friend.cli", "chat", "--user", "Emily", "--data-dir", str(tmp_path),
           "--encoder", "hashing", "--max-new-tokens", "16"]  # fmt: skip
    done = subprocess.run(
        cmd, input="Hi! I love hiking.\nWhat do I love?\n/memories\nclear\nstop\n", capture_output=True,
        text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.count("SiliconFriend: ") == 2 and "S=1" in out and "conversation cleared" in out
    assert "Bye, Emily!" in out
