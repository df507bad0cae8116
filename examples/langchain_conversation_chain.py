"""MemoryBank as the memory of a classic ``ConversationChain`` (langchain_classic).

    python examples/langchain_conversation_chain.py                  # offline: canned model
    python examples/langchain_conversation_chain.py --model openai:gpt-4o-mini

Two sessions on two days: what the user said in the first comes back, with its date, in the
second (the session history window is cleared in between; the long-term memory is not).
"""

from __future__ import annotations

import argparse
import datetime as dt
import tempfile
from collections.abc import Sequence

from langchain_classic.chains import ConversationChain
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from memory_bank import MemoryBank
from memory_bank.langchain import as_memory, conversation_prompt


class DemoClock:
    """A clock the example moves forward by a day between sessions."""

    def __init__(self) -> None:
        self.now = dt.datetime(2023, 5, 4, 18, 0)

    def __call__(self) -> dt.datetime:
        return self.now


def chat_model(spec: str | None, canned: list[str]) -> BaseChatModel:
    if spec:
        from langchain.chat_models import init_chat_model

        return init_chat_model(spec)
    return FakeListChatModel(responses=canned)


def main(argv: Sequence[str] | None = None) -> dict[str, str]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", help="memory store directory (default: a new temporary one)")
    parser.add_argument("--encoder", default="minilm", help="minilm (default), use-multilingual or hashing")
    parser.add_argument("--model", help="chat model spec for init_chat_model, e.g. openai:gpt-4o-mini")
    args = parser.parse_args(argv)

    clock = DemoClock()
    bank = MemoryBank.open(
        args.store or tempfile.mkdtemp(prefix="memorybank-"), encoder=args.encoder, clock=clock
    )
    memory = as_memory(bank, "Emily")
    model = chat_model(args.model, ["What a lovely name!", "Your cat is called Miso."])
    chain = ConversationChain(llm=model, memory=memory, prompt=conversation_prompt())

    chain.invoke({"input": "I adopted a cat named Miso today."})
    memory.clear()  # the session ends; the next one starts the following day
    clock.now += dt.timedelta(days=1)
    variables = memory.load_memory_variables({"input": "What is my cat called?"})
    print("memories the prompt gets:\n" + variables["memories"])
    answer = chain.invoke({"input": "What is my cat called?"})["response"]
    print(f"A: {answer}")
    bank.close()
    return {"memories": variables["memories"], "answer": answer}


if __name__ == "__main__":
    main()
