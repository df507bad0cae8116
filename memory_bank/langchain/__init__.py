"""MemoryBank for LangChain apps: a retriever, a classic memory, agent middleware and a
forgetting document loader, each bound to one user.

>>> from memory_bank import MemoryBank
>>> from memory_bank.langchain import as_retriever
>>> bank = MemoryBank.open("./memories", encoder="hashing")            # doctest: +SKIP
>>> retriever = as_retriever(bank, "Emily", k=3)                       # doctest: +SKIP

* :class:`MemoryBankRetriever`, a ``langchain_core`` ``BaseRetriever``: LCEL chains, RAG;
* :class:`MemoryBankMemory`, a ``langchain_classic`` ``BaseMemory``: ``ConversationChain``, ``LLMChain``;
* :class:`MemoryBankMiddleware`, an ``AgentMiddleware``: ``langchain.agents.create_agent``;
* :class:`MemoryForgetterLoader`, a ``BaseLoader``: forgetting in front of any vector store;
* :class:`MemoryBankStore`, a LangGraph ``BaseStore``: ``create_agent(store=...)``, LangMem;
* :func:`memory_tools`: ``search_memory`` / ``save_memory`` / ``forget_memory`` tools for agents.

Importing this package imports none of them: each module (and ``langchain_classic`` or
``langchain.agents`` behind it) loads when its name is first used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import datetime as dt
    from collections.abc import Callable, Iterable

    from memory_bank.bank import MemoryBank
    from memory_bank.forgetting import ForgettingMode, ForgettingPolicy
    from memory_bank.langchain.loader import ForgettingResult, MemoryForgetterLoader
    from memory_bank.langchain.memory import MemoryBankMemory
    from memory_bank.langchain.middleware import MemoryBankMiddleware
    from memory_bank.langchain.prompts import conversation_prompt
    from memory_bank.langchain.retriever import MemoryBankRetriever
    from memory_bank.langchain.store import MemoryBankStore
    from memory_bank.langchain.tools import memory_tools
    from memory_bank.records import MemoryKind
    from memory_bank.summaries.scheduler import RolloverScheduler

_LAZY = {
    "MemoryBankRetriever": "memory_bank.langchain.retriever",
    "MemoryBankMemory": "memory_bank.langchain.memory",
    "MemoryBankMiddleware": "memory_bank.langchain.middleware",
    "MemoryForgetterLoader": "memory_bank.langchain.loader",
    "ForgettingResult": "memory_bank.langchain.loader",
    "conversation_prompt": "memory_bank.langchain.prompts",
    "MemoryBankStore": "memory_bank.langchain.store",
    "memory_tools": "memory_bank.langchain.tools",
}

__all__ = [
    "ForgettingResult",
    "MemoryBankMemory",
    "MemoryBankMiddleware",
    "MemoryBankRetriever",
    "MemoryBankStore",
    "MemoryForgetterLoader",
    "as_loader",
    "as_memory",
    "as_middleware",
    "as_retriever",
    "conversation_prompt",
    "memory_tools",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def as_retriever(
    bank: MemoryBank,
    user: str,
    *,
    k: int | None = None,
    reinforce: bool = True,
    kinds: Iterable[MemoryKind] | None = None,
) -> MemoryBankRetriever:
    """A :class:`MemoryBankRetriever` over ``user``'s memories (see its fields)."""
    from memory_bank.langchain.retriever import MemoryBankRetriever

    return MemoryBankRetriever(
        bank=bank, user=user, k=k, reinforce=reinforce, kinds=None if kinds is None else tuple(kinds)
    )


def as_memory(
    bank: MemoryBank,
    user: str,
    *,
    k: int | None = None,
    window: int | None = None,
    reinforce: bool = True,
    input_key: str | None = None,
    output_key: str | None = None,
    human_prefix: str = "Human",
    ai_prefix: str = "AI",
    return_messages: bool = False,
    history_key: str = "history",
    memories_key: str = "memories",
    portrait_key: str = "user_portrait",
    summary_key: str = "event_summary",
    summarizer: RolloverScheduler | None = None,
) -> MemoryBankMemory:
    """A classic :class:`MemoryBankMemory` for ``user`` (see its fields; ``None`` for ``k`` and
    ``window`` means the bank's ``retrieval.top_k`` and ``history_window``; ``summarizer``:
    :func:`~memory_bank.summaries.background_summaries` writes the portrait and summaries)."""
    from memory_bank.langchain.memory import MemoryBankMemory

    return MemoryBankMemory(
        bank=bank,
        user=user,
        k=k,
        window=window,
        reinforce=reinforce,
        input_key=input_key,
        output_key=output_key,
        human_prefix=human_prefix,
        ai_prefix=ai_prefix,
        return_messages=return_messages,
        history_key=history_key,
        memories_key=memories_key,
        portrait_key=portrait_key,
        summary_key=summary_key,
        summarizer=summarizer,
    )


def as_middleware(
    bank: MemoryBank | None,
    user: str | None,
    *,
    context_key: str | None = None,
    k: int | None = None,
    reinforce: bool = True,
    store_turns: bool = True,
    summarizer: RolloverScheduler | None = None,
) -> MemoryBankMiddleware:
    """A :class:`MemoryBankMiddleware` for ``user`` (or ``user=None, context_key="user_id"``)."""
    from memory_bank.langchain.middleware import MemoryBankMiddleware

    return MemoryBankMiddleware(
        bank,
        user,
        context_key=context_key,
        k=k,
        reinforce=reinforce,
        store_turns=store_turns,
        summarizer=summarizer,
    )


def as_loader(
    bank: MemoryBank,
    user: str,
    *,
    mode: ForgettingMode = "paper",
    tau: float = 1.0,
    policy: ForgettingPolicy = "stochastic",
    threshold: float = 0.05,
    seed: int | None = None,
    now: dt.datetime | dt.date | str | None = None,
    clock: Callable[[], dt.datetime] | None = None,
    kinds: Iterable[MemoryKind] | None = None,
    write_back: bool = False,
) -> MemoryForgetterLoader:
    """A :class:`MemoryForgetterLoader` reading ``user``'s memories from the store."""
    from memory_bank.langchain.loader import MemoryForgetterLoader

    return MemoryForgetterLoader(
        bank,
        user,
        mode=mode,
        tau=tau,
        policy=policy,
        threshold=threshold,
        seed=seed,
        now=now,
        clock=clock,
        kinds=kinds,
        write_back=write_back,
    )
