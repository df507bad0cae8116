"""MemoryBankStore under real agents: create_agent(store=...) with tools that read and write it,
LangMem's store-backed memory tools on top of it, and the packaged MiniLM encoder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.tools import tool

from memory_bank import MemoryBank
from memory_bank.langchain import MemoryBankStore
from tests.langchain.conftest import recording_model, tool_call, tool_results


def test_create_agent_tools_read_and_write_the_store(bank: MemoryBank) -> None:
    @tool
    def remember(fact: str, runtime: ToolRuntime) -> str:
        """Remember a fact about the user."""
        assert runtime.store is not None
        user = runtime.context["user_id"]
        runtime.store.put(("memories", user), f"fact-{runtime.tool_call_id}", {"content": fact})
        return "saved"

    @tool
    def recall(query: str, runtime: ToolRuntime) -> str:
        """Look up what is known about the user."""
        assert runtime.store is not None
        hits = runtime.store.search(("memories", runtime.context["user_id"]), query=query, limit=1)
        return "; ".join(h.value["content"] for h in hits) or "nothing"

    model = recording_model(
        tool_call("remember", {"fact": "Emily's cat is called Miso."}, "c1"),
        "Noted!",
        tool_call("recall", {"query": "what is the cat called"}, "c2"),
        "Your cat is called Miso.",
        tool_call("recall", {"query": "what is the cat called"}, "c3"),
        "I don't know.",
    )
    agent = create_agent(model, tools=[remember, recall], store=MemoryBankStore(bank))
    ask = {"messages": [{"role": "user", "content": "My cat is called Miso."}]}
    agent.invoke(ask, context={"user_id": "Emily"})
    assert [m.memory_id for m in bank.history("Emily")] == ["fact-c1"]
    state = agent.invoke({"messages": [{"role": "user", "content": "Cat?"}]}, context={"user_id": "Emily"})
    assert tool_results(state) == ["Emily's cat is called Miso."]
    jason = agent.invoke({"messages": [{"role": "user", "content": "Cat?"}]}, context={"user_id": "Jason"})
    assert tool_results(jason) == ["nothing"]  # another user's namespace: nothing of Emily's


def test_langmem_memory_tools_on_the_store(bank: MemoryBank) -> None:
    langmem = pytest.importorskip("langmem", reason="langmem is not installed (pip install langmem)")
    namespace = ("memories", "{langgraph_user_id}")  # LangMem's documented default
    tools = [langmem.create_manage_memory_tool(namespace), langmem.create_search_memory_tool(namespace)]
    model = recording_model(
        tool_call("manage_memory", {"content": "Emily is learning the cello.", "action": "create"}, "c1"),
        "I'll remember that.",
        tool_call("search_memory", {"query": "which instrument does Emily play?"}, "c2"),
        "The cello.",
    )
    agent = create_agent(model, tools=tools, store=MemoryBankStore(bank))
    config: Any = {"configurable": {"langgraph_user_id": "Emily"}}
    agent.invoke({"messages": [{"role": "user", "content": "I started the cello."}]}, config)
    [memory] = bank.history("Emily")
    assert memory.text == "Emily is learning the cello."
    state = agent.invoke({"messages": [{"role": "user", "content": "What do I play?"}]}, config)
    [found] = tool_results(state)
    assert "Emily is learning the cello." in found and memory.memory_id in found
    update = tool_call(
        "manage_memory", {"content": "Emily plays the viola now.", "action": "update", "id": memory.memory_id}, "c3"
    )
    agent = create_agent(recording_model(update, "Updated."), tools=tools, store=MemoryBankStore(bank))
    agent.invoke({"messages": [{"role": "user", "content": "I switched to viola."}]}, config)
    assert [m.text for m in bank.history("Emily")] == ["Emily plays the viola now."]  # updated in place
    assert bank.history("Emily")[0].memory_id == memory.memory_id


@pytest.mark.integration
def test_store_search_with_the_packaged_minilm_encoder(tmp_path: Path) -> None:
    bank = MemoryBank.open(tmp_path / "store", encoder="minilm")
    try:
        store = MemoryBankStore(bank)
        facts = {
            "cat": "Emily adopted a grey cat named Miso.",
            "job": "Emily works as a nurse at the city hospital.",
            "trip": "Emily is planning a trip to Kyoto in April.",
            "food": "Emily is allergic to peanuts.",
        }
        for key, text in facts.items():
            store.put(("memories", "Emily"), key, {"content": text})
        store.put(("memories", "Jason"), "cat", {"content": "Jason has a dog called Rex."})
        assert store.search(("memories", "Emily"), query="What is my pet's name?", limit=1)[0].key == "cat"
        assert store.search(("memories", "Emily"), query="Where am I travelling?", limit=1)[0].key == "trip"
        assert store.search(("memories", "Emily"), query="what can't I eat", limit=1)[0].key == "food"
        hits = store.search(("memories", "Jason"), query="What is my pet's name?")
        assert [h.value["content"] for h in hits] == ["Jason has a dog called Rex."]
    finally:
        bank.close()
