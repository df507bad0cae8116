"""Fixtures for the LangChain adapters: a chat model that records what it was sent (the ``bank``
fixture, hashing encoder and fixed clock, comes from ``tests/conftest.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatResult
from pydantic import Field


class RecordingChatModel(GenericFakeChatModel):
    """A fake chat model that replies from a list and keeps every prompt it was sent.

    ``bind_tools`` is accepted (and ignored) so that agents with tools can use it.
    """

    prompts: list[list[BaseMessage]] = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.prompts.append(list(messages))
        return super()._generate(messages, *args, **kwargs)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> RecordingChatModel:  # type: ignore[override]
        return self

    def system_texts(self) -> list[str]:
        """The system message of each prompt ('' where there was none)."""
        return [next((m.text for m in p if m.type == "system"), "") for p in self.prompts]


def recording_model(*replies: str | AIMessage) -> RecordingChatModel:
    messages = [r if isinstance(r, AIMessage) else AIMessage(content=r) for r in replies]
    return RecordingChatModel(messages=iter(messages))


def tool_call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    """A model reply that calls one tool."""
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])


def tool_results(state: dict[str, Any]) -> list[str]:
    """The texts of the tool messages in an agent's final state."""
    return [m.text for m in state["messages"] if isinstance(m, ToolMessage)]
