"""memory_tools: langchain-tests' standard tool suites, and the tools inside a real create_agent
(the user bound or read from the runtime context, never a model argument)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from langchain_tests.integration_tests import ToolsIntegrationTests
from langchain_tests.unit_tests import ToolsUnitTests

from memory_bank import InvalidInputError, MemoryBank
from memory_bank.embeddings import HashingEncoder
from memory_bank.langchain import MemoryBankStore, memory_tools
from tests.langchain.conftest import recording_model, tool_call, tool_results

EXAMPLES = {
    "search_memory": {"query": "What is my cat called?"},
    "save_memory": {"content": "Emily's cat is called Miso."},
    "forget_memory": {"memory_id": "Emily_2023-05-01_0"},
}


def _tools(bank: MemoryBank, **kw: Any) -> dict[str, BaseTool]:
    return {t.name: t for t in memory_tools(bank, **kw)}


class _Standard:
    """The standard suites, run for each tool on a bank where the example arguments make sense."""

    name = ""

    @pytest.fixture(autouse=True)
    def _bank(self, tmp_path: Path) -> Iterator[None]:
        self.bank = MemoryBank.open(tmp_path / "store", encoder_instance=HashingEncoder(256))
        self.bank.add_turn("Emily", "I adopted a cat named Miso.", "Lovely!", at="2023-05-01T10:00")
        yield
        self.bank.close()

    @property
    def tool_constructor(self) -> BaseTool:
        return _tools(self.bank, user="Emily")[self.name]

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return EXAMPLES[self.name]


class TestSearchMemoryUnit(_Standard, ToolsUnitTests):
    name = "search_memory"


class TestSearchMemoryIntegration(_Standard, ToolsIntegrationTests):
    name = "search_memory"


class TestSaveMemoryUnit(_Standard, ToolsUnitTests):
    name = "save_memory"


class TestSaveMemoryIntegration(_Standard, ToolsIntegrationTests):
    name = "save_memory"


class TestForgetMemoryUnit(_Standard, ToolsUnitTests):
    name = "forget_memory"


class TestForgetMemoryIntegration(_Standard, ToolsIntegrationTests):
    name = "forget_memory"


@dataclass
class Ctx:
    user_id: str



def test_the_model_never_names_the_user(bank: MemoryBank) -> None:
    for t in memory_tools(bank):
        properties = t.tool_call_schema.model_json_schema()["properties"]
        assert set(properties) == {next(iter(EXAMPLES[t.name]))}  # one argument, never a user


def test_save_search_forget_in_an_agent_with_the_user_from_context(bank: MemoryBank) -> None:
    model = recording_model(
        tool_call("save_memory", {"content": "My cat is called Miso."}, "c1"),
        "Saved.",
        tool_call("search_memory", {"query": "what is my cat called"}, "c2"),
        "Miso.",
        tool_call("search_memory", {"query": "what is my cat called"}, "c3"),
        "No idea.",
        tool_call("forget_memory", {"memory_id": "tool:c1"}, "c4"),
        "Forgotten.",
    )
    agent = create_agent(model, tools=memory_tools(bank), context_schema=Ctx)
    ask = {"messages": [{"role": "user", "content": "Remember: my cat is Miso."}]}
    assert tool_results(agent.invoke(ask, context=Ctx("Emily"))) == ["Saved memory tool:c1."]
    found = tool_results(agent.invoke(ask, context=Ctx("Emily")))
    assert found == ["[2023-05-01] (tool:c1) My cat is called Miso."]
    assert tool_results(agent.invoke(ask, context=Ctx("Jason"))) == ["No memories found."]  # isolation
    assert tool_results(agent.invoke(ask, context=Ctx("Emily"))) == ["Deleted memory tool:c1."]
    assert bank.history("Emily") == []


def test_a_retried_tool_call_saves_once_and_errors_reach_the_model(bank: MemoryBank) -> None:
    save = tool_call("save_memory", {"content": "I like tea."}, "c9")
    agent = create_agent(recording_model(save, "Saved.", save, "Saved."), tools=memory_tools(bank, user="Emily"))
    ask = {"messages": [{"role": "user", "content": "I like tea."}]}
    agent.invoke(ask)
    agent.invoke(ask)  # the same tool call replayed
    assert [m.memory_id for m in bank.history("Emily")] == ["tool:c9"]
    tools = _tools(bank, user="Emily")
    call = {"name": "forget_memory", "args": {"memory_id": "nope"}, "id": "c1", "type": "tool_call"}
    missing = tools["forget_memory"].invoke(call)
    assert isinstance(missing, ToolMessage) and "no memory with id 'nope'" in missing.text
    empty = tools["search_memory"].invoke({**call, "name": "search_memory", "args": {"query": "  "}})
    assert "query is empty" in empty.text
    assert tools["search_memory"].invoke({"query": "tea"}).startswith("[2023-05-01] (tool:c9) I like tea.")


def test_the_bank_can_come_from_the_agents_store(bank: MemoryBank) -> None:
    model = recording_model(tool_call("save_memory", {"content": "I play chess."}, "c1"), "Saved.")
    agent = create_agent(model, tools=memory_tools(None, user="Emily"), store=MemoryBankStore(bank))
    agent.invoke({"messages": [{"role": "user", "content": "I play chess."}]})
    assert [m.text for m in bank.history("Emily")] == ["I play chess."]
    bare = create_agent(
        recording_model(tool_call("save_memory", {"content": "x"}, "c2"), "ok"), tools=memory_tools(None, user="Emily")
    )
    state = bare.invoke({"messages": [{"role": "user", "content": "x"}]})
    assert "store=MemoryBankStore" in tool_results(state)[0]


def test_a_missing_user_is_a_clear_error(bank: MemoryBank) -> None:
    with pytest.raises(InvalidInputError, match="needs a user"):
        memory_tools(bank, context_key="")
    agent = create_agent(
        recording_model(tool_call("search_memory", {"query": "cat"}, "c1"), "ok"), tools=memory_tools(bank)
    )
    with pytest.raises(InvalidInputError, match="context=\\{'user_id': '<user>'\\}"):
        agent.invoke({"messages": [{"role": "user", "content": "cat?"}]})


def test_a_tool_call_id_used_again_for_other_content_saves_that_too(bank: MemoryBank) -> None:
    """Some servers number tool calls per run (``call_0`` every time): the second memory under a
    repeated id was dropped while the tool said "Saved"."""
    first = tool_call("save_memory", {"content": "Emily is allergic to peanuts."}, "call_0")
    second = tool_call("save_memory", {"content": "Emily's sister is called Anna."}, "call_0")
    agent = create_agent(recording_model(first, "Noted.", second, "Noted."), tools=memory_tools(bank, user="Emily"))
    said = tool_results(agent.invoke({"messages": [{"role": "user", "content": "I am allergic to peanuts."}]}))
    said += tool_results(agent.invoke({"messages": [{"role": "user", "content": "My sister is Anna."}]}))
    stored = {m.memory_id: m.query for m in bank.history("Emily")}
    assert sorted(stored.values()) == ["Emily is allergic to peanuts.", "Emily's sister is called Anna."]
    assert said == [f"Saved memory {memory_id}." for memory_id in stored]


def test_a_replayed_save_never_brings_back_what_the_user_corrected(bank: MemoryBank) -> None:
    save = tool_call("save_memory", {"content": "Emily lives in Paris."}, "call_1")
    agent = create_agent(recording_model(save, "Saved.", save, "Saved."), tools=memory_tools(bank, user="Emily"))
    ask = {"messages": [{"role": "user", "content": "I live in Paris."}]}
    agent.invoke(ask)
    bank.update_memory("Emily", "tool:call_1", text="Emily lives in Berlin (moved).")
    agent.invoke(ask)  # the same call replayed
    assert [(m.memory_id, m.query) for m in bank.history("Emily")] == [("tool:call_1", "Emily lives in Berlin (moved).")]


def test_a_replayed_save_never_brings_back_what_the_user_deleted(bank: MemoryBank) -> None:
    save = tool_call("save_memory", {"content": "Emily's PIN is 4321."}, "call_5")
    agent = create_agent(recording_model(save, "Saved.", save, "Saved."), tools=memory_tools(bank, user="Emily"))
    ask = {"messages": [{"role": "user", "content": "Remember my PIN."}]}
    agent.invoke(ask)
    bank.delete_memory("Emily", "tool:call_5")
    said = tool_results(agent.invoke(ask))  # the same call replayed
    assert bank.history("Emily") == []
    assert len(said) == 1 and said[0].startswith("Not saved: the user deleted this memory (tool:call_5) on ")


def test_a_repeated_call_id_with_new_content_saves_it_after_the_first_was_deleted(bank: MemoryBank) -> None:
    """Servers numbering calls per run (call_0 every time): once the first call_0 memory was
    deleted, every later save under call_0 said "Not saved"."""
    first = tool_call("save_memory", {"content": "Emily is allergic to peanuts."}, "call_0")
    second = tool_call("save_memory", {"content": "Emily's sister is called Anna."}, "call_0")
    agent = create_agent(
        recording_model(first, "Noted.", second, "Noted.", first, "Noted."), tools=memory_tools(bank, user="Emily")
    )
    ask = {"messages": [{"role": "user", "content": "Remember this."}]}
    agent.invoke(ask)
    bank.delete_memory("Emily", "tool:call_0")
    said = tool_results(agent.invoke(ask))  # new content, the same call id
    assert said[0].startswith("Saved memory tool:call_0:")
    again = tool_results(agent.invoke(ask))  # the deleted content, replayed
    assert again[0].startswith("Not saved") and [m.query for m in bank.history("Emily")] == [
        "Emily's sister is called Anna."
    ]


def test_a_bound_user_and_a_context_key_together_are_refused(bank: MemoryBank) -> None:
    """With both, the bound user answered for every caller: Jason's call read and wrote Emily's
    memories."""
    from memory_bank.langchain import MemoryBankMiddleware

    with pytest.raises(InvalidInputError, match="not both"):
        memory_tools(bank, user="Emily", context_key="user_id")
    with pytest.raises(InvalidInputError, match="not both"):
        MemoryBankMiddleware(bank, "Emily", context_key="user_id")
    assert len(memory_tools(bank, user="Emily")) == 3 and len(memory_tools(bank)) == 3


def test_a_query_the_bank_refuses_reaches_the_model_and_the_run_goes_on(bank: MemoryBank) -> None:
    """A model-written query with a NUL or a lone surrogate ended the whole agent run (and the
    turn with it); a lone surrogate in saved content was a UnicodeEncodeError."""
    bank.add_turn("Emily", "My cat is Miso.", "Nice!")
    tools = _tools(bank, user="Emily")
    for query in ["cat\x00name", "cat \ud800"]:
        call = {"name": "search_memory", "args": {"query": query}, "id": "c1", "type": "tool_call"}
        said = tools["search_memory"].invoke(call)
        assert isinstance(said, ToolMessage) and said.status == "error", said
    saved = tools["save_memory"].invoke({"name": "save_memory", "args": {"content": "cat \ud800"}, "id": "c2", "type": "tool_call"})
    assert isinstance(saved, ToolMessage) and "surrogate" in saved.text
    model = recording_model(tool_call("search_memory", {"query": "cat\x00"}, "c3"), "Your cat is Miso.")
    state = create_agent(model, tools=memory_tools(bank, user="Emily")).invoke(
        {"messages": [{"role": "user", "content": "what is my cat called?"}]}
    )
    assert state["messages"][-1].text == "Your cat is Miso."
