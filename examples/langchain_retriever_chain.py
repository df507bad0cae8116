"""MemoryBank in an LCEL chain: the user's related memories go into the prompt.

    python examples/langchain_retriever_chain.py                     # offline: canned model
    python examples/langchain_retriever_chain.py --model openai:gpt-4o-mini

``--model`` takes any ``init_chat_model`` spec (its provider package must be installed); without
it a canned fake model answers, so the example runs offline. ``--encoder hashing`` skips loading
the MiniLM sentence encoder.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence

from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough

from memory_bank import MemoryBank
from memory_bank.langchain import as_retriever

PROMPT = ChatPromptTemplate.from_messages(
    [
        (
            "system",
            "You are a warm companion with a long-term memory of this user.\n"
            "Related memories (with their dates):\n{memories}",
        ),
        ("human", "{question}"),
    ]
)


def format_docs(docs: Sequence[Document]) -> str:
    return "\n".join(f"[{d.metadata['date']}] {d.page_content}" for d in docs)


def build_chain(retriever: Runnable[str, list[Document]], model: BaseChatModel) -> Runnable[str, str]:
    """question -> {related memories, question} -> prompt -> model -> text."""
    memories = retriever | RunnableLambda(format_docs)
    return {"memories": memories, "question": RunnablePassthrough()} | PROMPT | model | StrOutputParser()


def chat_model(spec: str | None, canned: list[str]) -> BaseChatModel:
    if spec:
        from langchain.chat_models import init_chat_model

        return init_chat_model(spec)
    return FakeListChatModel(responses=canned)


def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", help="memory store directory (default: a new temporary one)")
    parser.add_argument("--encoder", default="minilm", help="minilm (default), use-multilingual or hashing")
    parser.add_argument("--model", help="chat model spec for init_chat_model, e.g. openai:gpt-4o-mini")
    args = parser.parse_args(argv)

    bank = MemoryBank.open(args.store or tempfile.mkdtemp(prefix="memorybank-"), encoder=args.encoder)
    if not bank.has_user("Emily"):
        bank.add_turn("Emily", "I adopted a cat named Miso.", "What a lovely name!", at="2023-05-04T18:00")
        bank.add_turn("Emily", "I start my pottery class on Monday.", "Have fun!", at="2023-05-05T09:00")

    retriever = as_retriever(bank, "Emily", k=2)
    chain = build_chain(retriever, chat_model(args.model, ["Your cat is called Miso."]))
    question = "What is my cat called?"
    print("memories:\n" + format_docs(retriever.invoke(question, reinforce=False)))
    answer = chain.invoke(question)
    print(f"Q: {question}\nA: {answer}")
    bank.close()
    return answer


if __name__ == "__main__":
    main()
