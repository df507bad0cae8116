"""Fixtures for SiliconFriend's tests: a hashing-encoder bank on a fixed clock, an echo chat model."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from memory_bank import MemoryBank
from memory_bank.embeddings import HashingEncoder
from silicon_friend.engine import ChatSettings, SiliconFriend
from silicon_friend.models import prepare_model
from tests.silicon_friend.fakes import EchoChatModel


@pytest.fixture(scope="session", autouse=True)
def _patient_gradio_startup() -> Iterator[None]:
    """Gradio's ``launch`` checks that the app answers on localhost and gives up when one HEAD
    of its page takes more than 3 s, which a test app on a busy 2-core machine sometimes does
    ("When localhost is not accessible, a shareable link must be created", seen once in a full
    run, passing alone). That check is not what these tests test: it gets 30 s here."""
    import gradio.networking as networking

    quick = networking.url_ok

    def patient(url: str) -> bool:
        deadline = time.monotonic() + 30
        while not quick(url):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.5)
        return True

    networking.url_ok = patient
    yield
    networking.url_ok = quick


@pytest.fixture
def bank(tmp_path, clock) -> Iterator[MemoryBank]:  # type: ignore[no-untyped-def]
    b = MemoryBank.open(tmp_path / "store", clock=clock, encoder_instance=HashingEncoder(256))
    yield b
    b.close()


@pytest.fixture
def echo() -> EchoChatModel:
    return EchoChatModel()


@pytest.fixture
def make_engine(bank, echo) -> Callable[..., SiliconFriend]:  # type: ignore[no-untyped-def]
    def make(model: Any = None, *, context_tokens: int = 4096, **kwargs: Any) -> SiliconFriend:
        loaded = prepare_model(model or echo, context_tokens=context_tokens)
        kwargs.setdefault("settings", ChatSettings(max_new_tokens=64))
        kwargs.setdefault("first_token_timeout", 5.0)
        kwargs.setdefault("idle_timeout", 5.0)
        return SiliconFriend(bank, loaded, **kwargs)

    return make


@pytest.fixture
def engine(make_engine) -> SiliconFriend:  # type: ignore[no-untyped-def]
    return make_engine()
