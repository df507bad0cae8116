"""A LangGraph agent whose long-term memory is a MemoryBankStore, with MemoryBank's memory tools
and middleware sharing it.

    python examples/agent_memory_store.py                       # offline: a scripted model
    python examples/agent_memory_store.py --model openai:gpt-4o-mini

The store is what ``create_agent(store=...)`` hands to tools (``runtime.store``); the memory tools
and the middleware take their bank from it, and the user from the runtime context, so one agent
serves many users and the model never chooses whose memories it reads.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from memory_bank import MemoryBank
from memory_bank.langchain import MemoryBankMiddleware, MemoryBankStore, memory_tools


@dataclass
class Context:
    user_id: str


class ScriptedModel(GenericFakeChatModel):
    """Replies from a script, tool calls included (tools are accepted and ignored)."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedModel:  # type: ignore[override]
        return self


def chat_model(spec: str | None) -> BaseChatModel:
    if spec:
        from langchain.chat_models import init_chat_model

        return init_chat_model(spec)
    save = {"name": "save_memory", "args": {"content": "Emily is allergic to peanuts."}, "id": "call-1"}
    search = {"name": "search_memory", "args": {"query": "food allergies"}, "id": "call-2"}
    script = [
        AIMessage(content="", tool_calls=[save]),
        AIMessage(content="Noted: no peanuts for you."),
        AIMessage(content="", tool_calls=[search]),
        AIMessage(content="Careful: you are allergic to peanuts."),
    ]
    return ScriptedModel(messages=iter(script))


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", help="memory store directory (default: a new temporary one)")
    parser.add_argument("--encoder", default="minilm", help="minilm (default), use-multilingual or hashing")
    parser.add_argument("--model", help="chat model spec for init_chat_model, e.g. openai:gpt-4o-mini")
    args = parser.parse_args(argv)

    bank = MemoryBank.open(args.store or tempfile.mkdtemp(prefix="memorybank-"), encoder=args.encoder)
    store = MemoryBankStore(bank)
    agent = create_agent(
        chat_model(args.model),
        tools=memory_tools(None),  # the bank of the agent's store, the user of the context
        middleware=[MemoryBankMiddleware(None, context_key="user_id")],
        store=store,
        context_schema=Context,
        system_prompt="You are a warm companion with a long-term memory.",
    )
    replies = []
    for text in ("Remember that I'm allergic to peanuts.", "Can I have the satay tonight?"):
        state = agent.invoke({"messages": [{"role": "user", "content": text}]}, context=Context("Emily"))
        replies.append(state["messages"][-1].text)
        print(f"Q: {text}\nA: {replies[-1]}")
    items = store.search(("memories", "Emily"), query="peanuts", limit=5)
    print("store items:", [(i.key, i.value["content"][:40]) for i in items])
    out = {"replies": replies, "keys": [i.key for i in items]}
    bank.close()
    return out


if __name__ == "__main__":
    main()
