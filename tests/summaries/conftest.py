"""Fixtures for the summariser tests: a scripted fake chat model, a bank on the shared fixed clock
(``clock`` from tests/conftest.py, 2023-05-01 12:00)."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import Field

from memory_bank import MemoryBank

_CODEWORD = re.compile(r"\b[A-Z]{4,}\b")


def codeword_responder(prompt: str, n: int) -> str:
    """Answers with the all-caps code words the material holds, so tests can trace content."""
    material = prompt.split("\n\n", 1)[-1]
    words = sorted(set(_CODEWORD.findall(material)))
    return f"Note {n}: the user talked about {' and '.join(words) or 'nothing special'}."


class ScriptedChatModel(BaseChatModel):
    """A fake chat model: answers from ``responses`` (text, an exception to raise, or a callable
    of (prompt, call number)), then from ``default``; records every prompt; streams by words.

    ``count_tokens`` counts words, so tests can reason about context budgets exactly.
    """

    responses: list[Any] = Field(default_factory=list)
    default: Callable[[str, int], str] | str = codeword_responder
    context_window: int | None = None
    max_tokens: int | None = None
    delay_per_token: float = 0.0
    gate: Any = None  # a threading.Event every call waits on
    entered: Any = Field(default_factory=threading.Event)  # set when a call starts
    streaming: bool = True
    prompts: list[str] = Field(default_factory=list)
    lock: Any = Field(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "scripted-fake"

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def _answer(self, messages: list[BaseMessage]) -> str:
        self.entered.set()
        if self.gate is not None:
            self.gate.wait(10)
        prompt = "\n\n".join(str(m.content) for m in messages)
        with self.lock:
            self.prompts.append(prompt)
            n = len(self.prompts)
            item = self.responses.pop(0) if self.responses else self.default
        if isinstance(item, BaseException):
            raise item
        return item(prompt, n) if callable(item) else str(item)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=self._answer(messages)))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for token in re.split(r"(?<=\s)", self._answer(messages)):
            if self.delay_per_token:
                time.sleep(self.delay_per_token)
            yield ChatGenerationChunk(message=AIMessageChunk(content=token))


@pytest.fixture
def fake() -> ScriptedChatModel:
    return ScriptedChatModel()


def add_days(bank: MemoryBank, user: str = "Emily", days: dict[str, list[str]] | None = None) -> None:
    """Store turns: ``{day: [query, ...]}``; each turn at 10:00 + its index minutes."""
    days = days or {
        "2023-04-27": ["I adopted a cat called MISO today.", "We went to the PARK."],
        "2023-04-28": ["I baked BREAD with my sister.", "I feel a bit tired."],
    }
    for day, queries in days.items():
        for i, q in enumerate(queries):
            bank.add_turn(user, q, f"That sounds nice ({i}).", at=f"{day}T10:{i:02d}:00")
