"""Every adapter reinforces a memory at most once a day (seven retrievals today: strength 2), and
one retriever serves many users through ``configurable_fields``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.runnables import ConfigurableField

from memory_bank import MemoryBank
from memory_bank.langchain import (
    MemoryBankMiddleware,
    MemoryBankRetriever,
    MemoryBankStore,
    as_memory,
    memory_tools,
)
from tests.conftest import FixedClock
from tests.langchain.conftest import recording_model

QUERY = "What is my cat called?"


def _retriever(bank: MemoryBank) -> None:
    MemoryBankRetriever(bank=bank, user="Emily", k=1).invoke(QUERY)


def _memory(bank: MemoryBank) -> None:
    as_memory(bank, "Emily", k=1).load_memory_variables({"input": QUERY})


def _middleware(bank: MemoryBank) -> None:
    agent = create_agent(
        recording_model("Miso."), middleware=[MemoryBankMiddleware(bank, "Emily", k=1, store_turns=False)]
    )
    agent.invoke({"messages": [{"role": "user", "content": QUERY}]})


def _store(bank: MemoryBank) -> None:
    MemoryBankStore(bank).search(("memories", "Emily"), query=QUERY, limit=1)


def _tool(bank: MemoryBank) -> None:
    {t.name: t for t in memory_tools(bank, user="Emily", k=1)}["search_memory"].invoke({"query": QUERY})


@pytest.mark.parametrize("retrieve", [_retriever, _memory, _middleware, _store, _tool])
def test_seven_retrievals_in_a_day_are_one_recall(
    bank: MemoryBank, clock: FixedClock, retrieve: Callable[[MemoryBank], Any]
) -> None:
    m = bank.add_turn("Emily", "I adopted a cat named Miso.", "Lovely!", at="2023-04-28T10:00")
    for _ in range(7):
        retrieve(bank)
    assert {x.memory_id: x.strength for x, _ in bank.memories("Emily")}[m.memory_id] == 2
    clock.advance(days=1)
    retrieve(bank)
    assert {x.memory_id: x.strength for x, _ in bank.memories("Emily")}[m.memory_id] == 3


def test_one_retriever_serves_many_users_through_configurable_fields(bank: MemoryBank) -> None:
    bank.add_turn("Emily", "I adopted a cat named Miso.", "Lovely!")
    bank.add_turn("Jason", "I adopted a dog named Rex.", "Great!")
    retriever = MemoryBankRetriever(bank=bank, user="nobody-yet", k=1).configurable_fields(
        user=ConfigurableField(id="user_id", name="User", description="whose memories to search")
    )
    emily = retriever.invoke("my pet", config={"configurable": {"user_id": "Emily"}})
    jason = retriever.invoke("my pet", config={"configurable": {"user_id": "Jason"}})
    assert [d.metadata["user"] for d in emily + jason] == ["Emily", "Jason"]
    assert "Miso" in emily[0].page_content and "Rex" in jason[0].page_content
    assert retriever.invoke("my pet") == []  # the default user has no memories: nothing, never all users


def test_the_core_and_the_agent_adapters_import_without_deprecation_warnings() -> None:
    import subprocess
    import sys

    from tests.conftest import REPO

    modules = "memory_bank, memory_bank.cli, memory_bank.langchain.store, memory_bank.langchain.tools, "
    modules += "memory_bank.langchain.middleware, memory_bank.langchain.retriever, memory_bank.mcp_server"
    code = f"import sys\nimport {modules}\nassert not [m for m in sys.modules if m.startswith('langchain_community')]"
    out = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-W", "error::PendingDeprecationWarning", "-c", code],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr


def test_a_per_call_retriever_whose_call_names_no_user_is_an_error(bank: MemoryBank) -> None:
    """With the documented placeholder user, a call that forgot user_id searched (and reinforced)
    the memories of a real user named '-'."""
    from memory_bank import InvalidInputError
    from memory_bank.langchain.retriever import PER_CALL

    bank.add_turn("-", "I am the user literally named dash.", "ok")
    bank.add_turn("Emily", "I adopted a cat named Miso.", "Lovely!")
    for placeholder in (PER_CALL, "-"):
        retriever = MemoryBankRetriever(bank=bank, user=placeholder, k=1).configurable_fields(
            user=ConfigurableField(id="user_id")
        )
        assert "Miso" in retriever.invoke("my pet", config={"configurable": {"user_id": "Emily"}})[0].page_content
        with pytest.raises(InvalidInputError, match="set per call"):
            retriever.invoke("my pet")
    assert {m.strength for m, _ in bank.memories("-")} == {1}
