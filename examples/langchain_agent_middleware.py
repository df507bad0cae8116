"""MemoryBank as middleware of a ``langchain.agents.create_agent`` agent.

    python examples/langchain_agent_middleware.py                    # offline: canned model
    python examples/langchain_agent_middleware.py --model openai:gpt-4o-mini

The middleware adds the related memories, the user portrait and the event summary to the system
message before each model call and stores every finished turn. Here the user comes from the
agent's runtime context, so one agent serves many users.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from memory_bank import MemoryBank, MemoryKind
from memory_bank.langchain import as_middleware


@dataclass
class Context:
    user_id: str


def chat_model(spec: str | None, canned: list[str]) -> BaseChatModel:
    if spec:
        from langchain.chat_models import init_chat_model

        return init_chat_model(spec)
    return FakeListChatModel(responses=canned)


def main(argv: Sequence[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", help="memory store directory (default: a new temporary one)")
    parser.add_argument("--encoder", default="minilm", help="minilm (default), use-multilingual or hashing")
    parser.add_argument("--model", help="chat model spec for init_chat_model, e.g. openai:gpt-4o-mini")
    args = parser.parse_args(argv)

    bank = MemoryBank.open(args.store or tempfile.mkdtemp(prefix="memorybank-"), encoder=args.encoder)
    bank.set_layer("Emily", MemoryKind.GLOBAL_PORTRAIT, "Warm and curious; likes gentle encouragement.")
    agent = create_agent(
        chat_model(args.model, ["What a lovely name!", "Your cat is called Miso."]),
        system_prompt="You are a warm, attentive companion.",
        middleware=[as_middleware(bank, None, context_key="user_id")],
        context_schema=Context,
    )
    replies = []
    for text in ("I adopted a cat named Miso today.", "What is my cat called?"):
        state = agent.invoke({"messages": [{"role": "user", "content": text}]}, context=Context("Emily"))
        replies.append(state["messages"][-1].text)
        print(f"Q: {text}\nA: {replies[-1]}")
    print("stored turns:", [m.memory_id for m in bank.history("Emily")])
    bank.close()
    return replies


if __name__ == "__main__":
    main()
