"""MemoryBankMiddleware with langchain.agents.create_agent and fake chat models."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool

from memory_bank import InvalidInputError, MemoryBank, MemoryKind
from memory_bank.langchain import MemoryBankMiddleware, as_middleware
from memory_bank.langchain.middleware import last_turn
from tests.conftest import FixedClock
from tests.langchain.conftest import recording_model


def _ask(agent: Any, text: str, **kw: Any) -> str:
    state = agent.invoke({"messages": [{"role": "user", "content": text}]}, **kw)
    return state["messages"][-1].text


@dataclass
class Ctx:
    user_id: str


def test_memories_saved_in_one_call_reach_the_next(bank: MemoryBank, clock: FixedClock) -> None:
    model = recording_model("What a lovely name!", "Your cat is called Miso.")
    agent = create_agent(
        model, system_prompt="You are a warm companion.", middleware=[as_middleware(bank, "Emily")]
    )
    assert _ask(agent, "I adopted a cat named Miso.") == "What a lovely name!"
    [turn] = bank.history("Emily")
    assert (turn.query, turn.response) == ("I adopted a cat named Miso.", "What a lovely name!")
    clock.advance(days=1)
    assert _ask(agent, "What is my cat called?") == "Your cat is called Miso."
    first, second = model.system_texts()
    assert first == "You are a warm companion."  # nothing to remember yet
    assert second.startswith("You are a warm companion.\n\n")
    assert "[2023-05-01] User: I adopted a cat named Miso. AI: What a lovely name!" in second
    assert len(bank.history("Emily")) == 2


def test_portrait_and_event_summary_reach_the_system_message(bank: MemoryBank) -> None:
    bank.set_layer("Emily", MemoryKind.GLOBAL_PORTRAIT, "Warm and curious; likes encouragement.")
    bank.set_layer("Emily", MemoryKind.GLOBAL_SUMMARY, "Emily adopted a cat and took up pottery.")
    model = recording_model("Hello Emily!")
    _ask(create_agent(model, middleware=[MemoryBankMiddleware(bank, "Emily")]), "Hi there")
    [system] = model.system_texts()  # no system prompt of its own: the middleware makes one
    assert "Warm and curious; likes encouragement." in system
    assert "Emily adopted a cat and took up pottery." in system
    assert isinstance(model.prompts[0][0], SystemMessage)


def test_the_user_can_come_from_the_runtime_context(bank: MemoryBank) -> None:
    model = recording_model("Noted.", "Noted too.", "Miso.", "Tiger.")
    middleware = MemoryBankMiddleware(bank, context_key="user_id")
    agent = create_agent(model, middleware=[middleware], context_schema=Ctx)
    _ask(agent, "My cat is called Miso.", context=Ctx("Emily"))
    _ask(agent, "My cat is called Tiger.", context=Ctx("Jason"))
    _ask(agent, "What is my cat called?", context=Ctx("Emily"))
    _ask(agent, "What is my cat called?", context={"user_id": "Jason"})
    emily_sees, jason_sees = model.system_texts()[2:]
    assert "Miso" in emily_sees and "Tiger" not in emily_sees
    assert "Tiger" in jason_sees and "Miso" not in jason_sees
    assert [m.user for m in bank.history("Emily")] == ["Emily"] * 2


def test_a_missing_user_is_a_clear_error_never_all_users(bank: MemoryBank) -> None:
    with pytest.raises(InvalidInputError, match="needs a user"):
        MemoryBankMiddleware(bank)
    with pytest.raises(InvalidInputError, match="user"):
        MemoryBankMiddleware(bank, "")
    agent = create_agent(recording_model("hi"), middleware=[as_middleware(bank, None, context_key="user_id")])
    with pytest.raises(InvalidInputError, match="context=\\{'user_id': '<user>'\\}"):
        _ask(agent, "Hello")
    with pytest.raises(InvalidInputError, match="context"):
        _ask(agent, "Hello", context={"user_id": "  "})
    assert bank.users() == []


def test_recall_strengthens_unless_reinforcement_is_off(bank: MemoryBank) -> None:
    m = bank.add_turn("Emily", "I adopted a cat named Miso.", "Lovely!", at="2023-04-30T10:00")

    def strength() -> int:
        return {x.memory_id: x.strength for x, _ in bank.memories("Emily")}[m.memory_id]

    off = MemoryBankMiddleware(bank, "Emily", reinforce=False, store_turns=False)
    _ask(create_agent(recording_model("Miso."), middleware=[off]), "my cat?")
    assert strength() == 1
    _ask(create_agent(recording_model("Miso."), middleware=[MemoryBankMiddleware(bank, "Emily")]), "my cat?")
    assert strength() == 2


def test_a_tool_loop_recalls_once_and_stores_the_final_reply(bank: MemoryBank) -> None:
    bank.add_turn("Emily", "I adopted a cat named Miso.", "Lovely!", at="2023-04-30T10:00")

    @tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"Sunny in {city}."

    call = AIMessage(content="", tool_calls=[{"name": "weather", "args": {"city": "Lyon"}, "id": "c1"}])
    model = recording_model(call, "It is sunny in Lyon; take Miso out!")
    agent = create_agent(model, tools=[weather], middleware=[MemoryBankMiddleware(bank, "Emily")])
    assert _ask(agent, "What's the weather for a walk with my cat?") == "It is sunny in Lyon; take Miso out!"
    first, second = model.system_texts()
    assert "I adopted a cat named Miso." in first and first == second  # injected before each call
    assert {x.memory_id: x.strength for x, _ in bank.memories("Emily")}["Emily_2023-04-30_0"] == 2  # once
    stored = bank.history("Emily")[-1]
    assert (stored.query, stored.response) == (
        "What's the weather for a walk with my cat?",
        "It is sunny in Lyon; take Miso out!",
    )


def test_existing_system_message_blocks_are_kept(bank: MemoryBank) -> None:
    bank.set_layer("Emily", MemoryKind.GLOBAL_PORTRAIT, "Warm.")
    model = recording_model("ok")
    system = SystemMessage(content=[{"type": "text", "text": "Be brief."}])
    _ask(create_agent(model, system_prompt=system, middleware=[MemoryBankMiddleware(bank, "Emily")]), "hi")
    sent = model.prompts[0][0]
    assert isinstance(sent.content, list) and sent.content[0] == {"type": "text", "text": "Be brief."}
    assert "Warm." in sent.text


@pytest.mark.asyncio
async def test_async_agent(bank: MemoryBank) -> None:
    model = recording_model("Lovely!", "Miso.")
    agent = create_agent(model, middleware=[MemoryBankMiddleware(bank, "Emily")])
    await agent.ainvoke({"messages": [{"role": "user", "content": "I adopted a cat named Miso."}]})
    state = await agent.ainvoke({"messages": [{"role": "user", "content": "What is my cat called?"}]})
    assert state["messages"][-1].text == "Miso."
    assert "I adopted a cat named Miso." in model.system_texts()[1]
    assert len(bank.history("Emily")) == 2


def test_last_turn() -> None:
    msgs = [
        HumanMessage("old"),
        AIMessage("old reply"),
        HumanMessage("new"),
        AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "1"}]),
        ToolMessage("result", tool_call_id="1"),
        AIMessage("final"),
    ]
    assert last_turn(msgs) == ("new", "final")
    assert last_turn(msgs[:4]) == ("new", None)
    assert last_turn([AIMessage("hi")]) == ("", None)


def test_with_a_checkpointer_each_turn_is_stored_once(bank: MemoryBank) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    model = recording_model("Lovely!", "Miso.", "Bye!")
    agent = create_agent(
        model, middleware=[MemoryBankMiddleware(bank, "Emily")], checkpointer=InMemorySaver()
    )
    config: RunnableConfig = {"configurable": {"thread_id": "t1"}}
    for text in ("I adopted a cat named Miso.", "What is my cat called?", "Good night."):
        state = agent.invoke({"messages": [{"role": "user", "content": text}]}, config)
    assert len(state["messages"]) == 6
    assert "memory_bank_context" not in state  # private to the middleware
    assert [(m.query, m.response) for m in bank.history("Emily")] == [
        ("I adopted a cat named Miso.", "Lovely!"),
        ("What is my cat called?", "Miso."),
        ("Good night.", "Bye!"),
    ]
