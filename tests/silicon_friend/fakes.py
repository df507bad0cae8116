"""Fake chat models for fast tests (an echo model that streams word by word and can fail on demand),
and a driver for the web app's async handlers."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import ConfigDict, PrivateAttr


class EchoChatModel(BaseChatModel):
    """Replies ``"<prefix> <last user message>"`` (or the fixed ``reply``), streaming word by word.

    ``mode``: ``"ok"``, ``"error"`` (raises), ``"empty"`` (returns nothing), ``"hang"`` (blocks until
    released), ``"slow"`` (``delay`` seconds between words). Every call's messages and keyword
    arguments are recorded in ``calls``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    prefix: str = "Echo:"
    reply: str | None = None
    mode: str = "ok"
    delay: float = 0.0
    _calls: list[dict[str, Any]] = PrivateAttr(default_factory=list)
    _release: threading.Event = PrivateAttr(default_factory=threading.Event)

    @property
    def _llm_type(self) -> str:
        return "echo"

    @property
    def calls(self) -> list[dict[str, Any]]:
        return self._calls

    def release(self) -> None:
        self._release.set()

    def _words(self, messages: list[BaseMessage], **kwargs: Any) -> list[str]:
        self._calls.append({"messages": list(messages), "kwargs": kwargs})
        if self.mode == "error":
            raise RuntimeError("backend exploded")
        if self.mode == "hang":
            self._release.wait(30)
            return []
        if self.mode == "empty":
            return []
        last = next((m for m in reversed(messages) if m.type == "human"), None)
        text = self.reply if self.reply is not None else f"{self.prefix} {last.content if last else ''}"
        return [w + " " for w in text.split(" ")]

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        text = "".join(self._words(messages, **kwargs)).strip()
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for word in self._words(messages, **kwargs):
            if self.delay:
                time.sleep(self.delay)
            yield ChatGenerationChunk(message=AIMessageChunk(content=word))


class steps:
    """Drive one of the web app's async generator handlers from plain test code, as Gradio
    does: ``next()``, ``list()``, ``for``, ``close()`` (the page going away), on a loop of its own."""

    def __init__(self, agen: Any) -> None:
        self.agen = agen
        self.loop = asyncio.new_event_loop()

    def __iter__(self) -> steps:
        return self

    def __next__(self) -> Any:
        try:
            return self.loop.run_until_complete(self.agen.__anext__())
        except StopAsyncIteration:
            self.loop.close()
            raise StopIteration from None

    def close(self) -> None:
        if not self.loop.is_closed():
            self.loop.run_until_complete(self.agen.aclose())
            self.loop.close()


class FullDisk:
    """Makes ``bank.add_turn`` fail as a full disk does while ``on`` (a passing store failure):

        disk = FullDisk(bank, monkeypatch)   # on at once
        disk.on = False                      # space freed
    """

    def __init__(self, bank: Any, monkeypatch: Any, *, on: bool = True) -> None:
        self.on = on
        real = bank.add_turn

        def add_turn(*args: Any, **kwargs: Any) -> Any:
            if self.on:
                from memory_bank.errors import StoreError

                raise StoreError("the disk holding the store is full")
            return real(*args, **kwargs)

        monkeypatch.setattr(bank, "add_turn", add_turn)


class CutModel(EchoChatModel):
    """Streams "I hear you. Exams are hard! Let us make a" and reports that it stopped at its
    token cap (``finish_reason: length``)."""

    def _stream(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[no-untyped-def]
        from langchain_core.messages import AIMessageChunk
        from langchain_core.outputs import ChatGenerationChunk

        for word in ["I hear you.", " Exams are hard!", " Let us make a"]:
            yield ChatGenerationChunk(message=AIMessageChunk(content=word))
        yield ChatGenerationChunk(message=AIMessageChunk(content="", response_metadata={"finish_reason": "length"}))
