"""MemoryBank as middleware for ``langchain.agents.create_agent``.

Importing this module imports ``langchain.agents``; :mod:`memory_bank.langchain` only does so when
:class:`MemoryBankMiddleware` is first used.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.middleware.types import PrivateStateAttr
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import run_in_executor
from langgraph.runtime import Runtime
from typing_extensions import NotRequired

from memory_bank.bank import MemoryBank
from memory_bank.errors import InvalidInputError
from memory_bank.langchain.documents import require_user
from memory_bank.langchain.prompts import format_memories, memory_block

logger = logging.getLogger(__name__)

#: State key holding this turn's memory block (private to the middleware).
CONTEXT_KEY = "memory_bank_context"


class MemoryBankState(AgentState[Any]):
    """Agent state plus the memory block retrieved for the current turn."""

    memory_bank_context: NotRequired[Annotated[str, PrivateStateAttr]]


def last_turn(messages: Sequence[BaseMessage]) -> tuple[str, str | None]:
    """(the last user message, the final reply after it or ``None``) in an agent's messages.

    The reply is the last AI message after the user's that calls no tool; tool calls and
    tool results in between are the agent's work, not the conversation.
    """
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage):
            query = messages[i].text
            replies = [
                m
                for m in messages[i + 1 :]
                if isinstance(m, AIMessage) and not m.tool_calls and m.text.strip()
            ]
            return query, (replies[-1].text if replies else None)
    return "", None


def _with_block(system: SystemMessage | None, block: str) -> SystemMessage:
    if system is None:
        return SystemMessage(content=block)
    content = system.content
    if isinstance(content, str):
        new: str | list[str | dict[Any, Any]] = f"{content}\n\n{block}" if content.strip() else block
    else:
        new = [*content, {"type": "text", "text": block}]
    return system.model_copy(update={"content": new})


class MemoryBankMiddleware(AgentMiddleware[MemoryBankState, Any]):
    """Long-term memory for agents made with :func:`langchain.agents.create_agent`.

    Before the agent's first model call of a turn it retrieves the ``k`` memories related to
    the user's message (recalling them, unless ``reinforce=False``) and reads the global user
    portrait and event summary; before every model call of that turn it appends them to the
    system message. After the agent's final reply it stores the turn (user message, reply), so
    the next turn can retrieve it. Works with any chat model.

    The user is bound at construction (``user=``), or read per call from the runtime context
    under ``context_key`` (``agent.invoke(..., context={"user_id": "Emily"})``); a call
    without one is an error, never "all users".

    Example::

        from langchain.agents import create_agent
        from memory_bank import MemoryBank
        from memory_bank.langchain import MemoryBankMiddleware

        bank = MemoryBank.open("./memories")
        agent = create_agent(model, middleware=[MemoryBankMiddleware(bank, user="Emily")])
        agent.invoke({"messages": [{"role": "user", "content": "What is my cat called?"}]})
    """

    state_schema = MemoryBankState

    def __init__(
        self,
        bank: MemoryBank,
        user: str | None = None,
        *,
        context_key: str | None = None,
        k: int | None = None,
        reinforce: bool = True,
        store_turns: bool = True,
    ) -> None:
        if user is None and not context_key:
            raise InvalidInputError(
                "MemoryBankMiddleware needs a user: pass user='<name>', or context_key='user_id' to "
                "read the user from the agent's runtime context"
            )
        if k is not None and k < 1:
            raise InvalidInputError(f"k must be at least 1, got {k}")
        self.bank = bank
        self.user = None if user is None else require_user(user, "MemoryBankMiddleware")
        self.context_key = context_key
        self.k = k
        self.reinforce = reinforce
        self.store_turns = store_turns
        self.tools = []

    def resolve_user(self, runtime: Runtime[Any] | None) -> str:
        """The user of this call: the bound one, else the one in the runtime context."""
        if self.user is not None:
            return self.user
        key = self.context_key or ""
        ctx = getattr(runtime, "context", None)
        value = ctx.get(key) if isinstance(ctx, Mapping) else getattr(ctx, key, None)
        if value is None or (isinstance(value, str) and not value.strip()):
            raise InvalidInputError(
                f"MemoryBankMiddleware has no user for this call: invoke the agent with "
                f"context={{{key!r}: '<user>'}}, or build the middleware with user='<name>'"
            )
        return require_user(value, "MemoryBankMiddleware")

    def recall(self, user: str, query: str) -> str:
        """The memory block for ``query``: related memories with dates, portrait, event summary."""
        if not self.bank.has_user(user):
            return ""
        memories = ""
        if query.strip():
            results = self.bank.search(user, query, k=self.k, reinforce=self.reinforce)
            memories = format_memories(results, language=self.bank.config.language)
        profile = self.bank.profile(user)
        return memory_block(
            memories,
            profile["global_portrait"],
            profile["global_summary"],
            language=self.bank.config.language,
        )

    # -- hooks --------------------------------------------------------------------------------
    def before_agent(self, state: MemoryBankState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        user = self.resolve_user(runtime)
        query, _ = last_turn(state["messages"])
        return {CONTEXT_KEY: self.recall(user, query)}

    async def abefore_agent(self, state: MemoryBankState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return await run_in_executor(None, self.before_agent, state, runtime)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        return handler(self._inject(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        return await handler(self._inject(request))

    def after_agent(self, state: MemoryBankState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        if not self.store_turns:
            return None
        query, reply = last_turn(state["messages"])
        if not query.strip() or reply is None:
            logger.debug("no complete turn to store (query=%r, reply=%r)", query[:40], reply)
            return None
        memory = self.bank.add_turn(self.resolve_user(runtime), query, reply)
        logger.debug("stored turn %s", memory.memory_id)
        return None

    async def aafter_agent(self, state: MemoryBankState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return await run_in_executor(None, self.after_agent, state, runtime)

    def _inject(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        block = request.state.get(CONTEXT_KEY) if request.state else None
        if not isinstance(block, str) or not block:
            return request
        return request.override(system_message=_with_block(request.system_message, block))
