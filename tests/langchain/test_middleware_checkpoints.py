"""MemoryBankMiddleware under LangGraph checkpoints, replays and retries (a real InMemorySaver):
each turn stored once, no memory block in the persisted state, no repeat of the thread's own
messages, and the agent's ``store=`` used or reported, never silently ignored."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from memory_bank import InvalidInputError, MemoryBank
from memory_bank.langchain import MemoryBankMiddleware, MemoryBankStore
from tests.langchain.conftest import recording_model


def _thread(name: str) -> RunnableConfig:
    return {"configurable": {"thread_id": name}}


def _fails_first(model: Any) -> Any:
    """``model``, whose first call times out (a run that fails at the model)."""
    answer = model._generate
    calls: list[int] = []

    def fails_first(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise TimeoutError("model timeout")
        return answer(*args, **kwargs)

    object.__setattr__(model, "_generate", fails_first)
    return model


def _say(agent: Any, text: str, config: RunnableConfig, **kw: Any) -> dict[str, Any]:
    return agent.invoke({"messages": [{"role": "user", "content": text}]}, config, **kw)  # type: ignore[no-any-return]


def test_replaying_a_checkpoint_stores_the_turn_once(bank: MemoryBank) -> None:
    model = recording_model("Lovely!", "Lovely, again!")
    saver = InMemorySaver()
    agent = create_agent(model, middleware=[MemoryBankMiddleware(bank, "Emily")], checkpointer=saver)
    _say(agent, "I adopted a cat named Miso.", _thread("t1"))
    history = list(agent.get_state_history(_thread("t1")))
    before_store = next(s for s in history if "MemoryBankMiddleware.after_agent" in s.next)
    before_model = next(s for s in history if "model" in s.next)
    agent.invoke(None, before_store.config)  # replay the step that stores the turn
    assert [(t.query, t.response) for t in bank.history("Emily")] == [("I adopted a cat named Miso.", "Lovely!")]
    agent.invoke(None, before_model.config)  # replay the whole turn (a regenerate): the model answers again
    assert len(model.prompts) == 2
    [turn] = bank.history("Emily")  # still one turn, now with the reply the thread shows
    assert (turn.query, turn.response) == ("I adopted a cat named Miso.", "Lovely, again!")
    human = before_model.values["messages"][-1]
    assert turn.memory_id == f"lc:{human.id}"


def test_a_retried_run_with_the_same_message_stores_it_once(bank: MemoryBank) -> None:
    agent = create_agent(
        recording_model("Lovely!", "Lovely!"), middleware=[MemoryBankMiddleware(bank, "Emily")]
    )
    message = HumanMessage("I adopted a cat named Miso.", id="msg-1")
    agent.invoke({"messages": [message]})
    agent.invoke({"messages": [message]})  # the client timed out and sent it again
    assert [m.memory_id for m in bank.history("Emily")] == ["lc:msg-1"]


def test_the_memory_block_never_reaches_a_checkpoint(bank: MemoryBank) -> None:
    bank.add_turn("Emily", "I adopted a cat named Miso.", "Lovely!", at="2023-04-30T10:00")
    model = recording_model("I remember.", "Tell me more.")
    saver = InMemorySaver()
    agent = create_agent(model, middleware=[MemoryBankMiddleware(bank, "Emily")], checkpointer=saver)
    _say(agent, "Do you remember my pet?", _thread("t2"))
    assert "Miso" in model.system_texts()[0]  # the model saw the memory...
    checkpoints = list(saver.list(_thread("t2")))
    assert checkpoints and not any("Miso" in repr(c.checkpoint) for c in checkpoints)  # ...no checkpoint did
    bank.delete_memory("Emily", "Emily_2023-04-30_0")
    _say(agent, "Do you remember my pet?", _thread("t2"))
    assert "Miso" not in model.system_texts()[1]  # deleted from the bank: gone from the agent too


def test_what_the_thread_already_shows_is_not_repeated(bank: MemoryBank) -> None:
    model = recording_model("Lovely!", "Miso.", "Miso!")
    agent = create_agent(
        model, middleware=[MemoryBankMiddleware(bank, "Emily")], checkpointer=InMemorySaver()
    )
    _say(agent, "I adopted a cat named Miso.", _thread("t1"))
    _say(agent, "What is my cat called?", _thread("t1"))
    same_thread = model.system_texts()[1]
    assert "I adopted a cat named Miso." not in same_thread  # it is in the messages already
    _say(agent, "What is my cat called?", _thread("t2"))
    assert "I adopted a cat named Miso." in model.system_texts()[2]  # a new thread needs the memory
    assert len(bank.history("Emily")) == 3


def test_the_bank_can_come_from_the_agents_store(bank: MemoryBank) -> None:
    model = recording_model("Lovely!", "Miso.")
    agent = create_agent(model, middleware=[MemoryBankMiddleware(None, "Emily")], store=MemoryBankStore(bank))
    agent.invoke({"messages": [{"role": "user", "content": "I adopted a cat named Miso."}]})
    agent.invoke({"messages": [{"role": "user", "content": "What is my cat called?"}]})
    assert "I adopted a cat named Miso." in model.system_texts()[1]
    assert len(bank.history("Emily")) == 2


def test_a_store_is_never_silently_ignored(
    bank: MemoryBank, make_bank: Any, caplog: pytest.LogCaptureFixture
) -> None:
    ask = {"messages": [{"role": "user", "content": "Hello"}]}
    no_bank = create_agent(recording_model("hi"), middleware=[MemoryBankMiddleware(None, "Emily")])
    with pytest.raises(InvalidInputError, match="store=MemoryBankStore"):
        no_bank.invoke(ask)
    other = MemoryBankStore(make_bank("other"))
    two_banks = create_agent(
        recording_model("hi"), middleware=[MemoryBankMiddleware(bank, "Emily")], store=other
    )
    with pytest.raises(InvalidInputError, match="different banks"):
        two_banks.invoke(ask)
    with caplog.at_level(logging.WARNING, logger="memory_bank.langchain.middleware"):
        plain = create_agent(
            recording_model("hi"), middleware=[MemoryBankMiddleware(bank, "Emily")], store=InMemoryStore()
        )
        plain.invoke(ask)
    assert "InMemoryStore" in caplog.text and "not a MemoryBankStore" in caplog.text
    assert [m.response for m in bank.history("Emily")] == ["hi"]  # the bank still keeps the turn


def test_summaries_run_in_the_background_for_agents(bank: MemoryBank, clock: Any) -> None:
    from memory_bank.summaries import RolloverScheduler, Summarizer, SummaryConfig
    from tests.summaries.conftest import ScriptedChatModel

    config = SummaryConfig(backoff_s=0, call_timeout_s=None, max_attempts=1)
    model = recording_model("Lovely!", "Good morning!", "Miso is well, I hope.")
    with RolloverScheduler(Summarizer(bank, ScriptedChatModel(), "en", config=config)) as scheduler:
        agent = create_agent(model, middleware=[MemoryBankMiddleware(bank, "Emily", summarizer=scheduler)])
        agent.invoke({"messages": [{"role": "user", "content": "I adopted a cat called MISO."}]})
        clock.advance(days=1)
        agent.invoke({"messages": [{"role": "user", "content": "Good morning!"}]})  # the 1st is over
        assert scheduler.wait(10)
        agent.invoke({"messages": [{"role": "user", "content": "How are you?"}]})
    assert "MISO" in bank.profile("Emily")["global_summary"]
    assert "MISO" in model.system_texts()[2].split("Summary of past events with this user:")[1]


def test_every_user_message_since_the_last_reply_is_stored(bank: MemoryBank) -> None:
    """Two messages before one reply, or a message whose run failed before the next one was
    answered: each is a turn (only the last has the reply)."""
    agent = create_agent(recording_model("Paris with a cat, lovely!"), middleware=[MemoryBankMiddleware(bank, "Emily")])
    agent.invoke({"messages": [HumanMessage("I just moved to Paris."), HumanMessage("And I adopted a cat named Miso.")]})
    assert [(t.query, t.response) for t in bank.history("Emily")] == [
        ("I just moved to Paris.", ""),
        ("And I adopted a cat named Miso.", "Paris with a cat, lovely!"),
    ]

    model = _fails_first(recording_model("Got it!"))
    agent = create_agent(model, middleware=[MemoryBankMiddleware(bank, "Ben")], checkpointer=InMemorySaver())
    with pytest.raises(TimeoutError):
        _say(agent, "My PIN reminder: I was born in Oslo.", _thread("b"))
    _say(agent, "Did you get that?", _thread("b"))
    assert [(t.query, t.response) for t in bank.history("Ben")] == [
        ("My PIN reminder: I was born in Oslo.", ""),
        ("Did you get that?", "Got it!"),
    ]


def test_a_message_edited_in_place_replaces_its_stored_turn(bank: MemoryBank) -> None:
    """LangGraph edits a message by putting a new one under the same id; the run that follows
    answers it. The stored turn becomes the message and reply as the thread now has them."""
    saver = InMemorySaver()
    agent = create_agent(
        recording_model("Noted, you live in Paris.", "Noted, you live in Lyon."),
        middleware=[MemoryBankMiddleware(bank, "Emily")],
        checkpointer=saver,
    )
    agent.invoke({"messages": [HumanMessage("I live in Paris.", id="m1")]}, _thread("e"))
    agent.invoke({"messages": [HumanMessage("Sorry, I meant: I live in Lyon.", id="m1")]}, _thread("e"))
    [turn] = bank.history("Emily")
    assert (turn.memory_id, turn.query, turn.response) == (
        "lc:m1",
        "Sorry, I meant: I live in Lyon.",
        "Noted, you live in Lyon.",
    )


def test_a_replayed_run_never_undoes_the_users_own_edit_of_the_turn(bank: MemoryBank) -> None:
    saver = InMemorySaver()
    model = recording_model("Noted, you live in Paris.", "Noted again, Paris.")
    agent = create_agent(model, middleware=[MemoryBankMiddleware(bank, "Emily")], checkpointer=saver)
    agent.invoke({"messages": [HumanMessage("I live in Paris, 12 rue X.", id="m1")]}, _thread("u"))
    bank.update_memory("Emily", "lc:m1", text="I live in Paris.")  # the user removed the address
    before_model = next(s for s in agent.get_state_history(_thread("u")) if "model" in s.next)
    agent.invoke(None, before_model.config)  # a regenerate of that turn
    [turn] = bank.history("Emily")
    assert (turn.query, turn.response) == ("I live in Paris.", "")


def test_in_a_shared_thread_only_the_calls_own_message_is_stored_under_its_user(bank: MemoryBank) -> None:
    """With the user given per call, an earlier message of the exchange (a run that failed) may
    be another user's: it was stored as this user's memory."""
    from dataclasses import dataclass

    @dataclass
    class Ctx:
        user_id: str

    model = _fails_first(recording_model("Hi Bob!"))
    agent = create_agent(
        model, middleware=[MemoryBankMiddleware(bank, context_key="user_id")], context_schema=Ctx, checkpointer=InMemorySaver()
    )
    with pytest.raises(TimeoutError):
        _say(agent, "My SSN is 078-05-1120.", _thread("group"), context=Ctx("Alice"))
    _say(agent, "Hello bot", _thread("group"), context=Ctx("Bob"))
    assert [(t.query, t.response) for t in bank.history("Bob")] == [("Hello bot", "Hi Bob!")]


def test_the_same_message_id_in_another_thread_is_stored_beside_never_over(bank: MemoryBank) -> None:
    agent = create_agent(
        recording_model("Lovely!", "Sunny."), middleware=[MemoryBankMiddleware(bank, "Emily")], checkpointer=InMemorySaver()
    )
    agent.invoke({"messages": [HumanMessage("I adopted a cat named Miso.", id="m1")]}, _thread("a"))
    agent.invoke({"messages": [HumanMessage("What's the weather like?", id="m1")]}, _thread("b"))
    assert sorted((t.query, t.response) for t in bank.history("Emily")) == [
        ("I adopted a cat named Miso.", "Lovely!"),
        ("What's the weather like?", "Sunny."),
    ]


def test_an_earlier_message_that_cannot_be_stored_does_not_block_the_turn(bank: MemoryBank) -> None:
    """...and a summary another middleware put in the thread as a user message is not stored."""
    agent = create_agent(recording_model("Congratulations!"), middleware=[MemoryBankMiddleware(bank, "Emily")])
    summary = HumanMessage("Summary so far: Emily's PIN is 4921.", additional_kwargs={"lc_source": "summarization"})
    agent.invoke({"messages": [summary, HumanMessage("broken\x00message"), HumanMessage("I got married today!")]})
    assert [(t.query, t.response) for t in bank.history("Emily")] == [("I got married today!", "Congratulations!")]


def test_a_regenerate_or_retry_never_brings_back_a_turn_the_user_deleted(bank: MemoryBank) -> None:
    """The turn's id no longer existed, so a replay stored the deleted turn again."""
    saver = InMemorySaver()
    model = recording_model("Noted, 12 Elm Street.", "Noted again.", "Hi again!")
    agent = create_agent(model, middleware=[MemoryBankMiddleware(bank, "Emily")], checkpointer=saver)
    agent.invoke({"messages": [HumanMessage("My address is 12 Elm Street.", id="m1")]}, _thread("u"))
    bank.delete_memory("Emily", "lc:m1")  # the user deletes it in a memory view
    before_model = next(s for s in agent.get_state_history(_thread("u")) if "model" in s.next)
    agent.invoke(None, before_model.config)  # a regenerate of that turn
    assert bank.history("Emily") == []
    retry = create_agent(recording_model("Noted.", "Noted."), middleware=[MemoryBankMiddleware(bank, "Emily")])
    again = {"messages": [HumanMessage("My address is 12 Elm Street.", id="m1")]}
    retry.invoke(again, _thread("u"))  # a client's retry of the run
    assert bank.history("Emily") == []
    bank.delete_user("Emily")
    retry.invoke(again, _thread("u"))  # after "forget me"
    assert not bank.has_user("Emily")


def test_another_threads_message_with_a_deleted_id_is_still_stored(bank: MemoryBank) -> None:
    """A client numbering messages per thread: thread a's message 1 was deleted, and thread b's
    own message 1 was skipped as if it were a replay of it."""
    saver = InMemorySaver()
    agent = create_agent(
        recording_model("Noted.", "Lovely!", "Noted again."),
        middleware=[MemoryBankMiddleware(bank, "Emily")],
        checkpointer=saver,
    )
    agent.invoke({"messages": [HumanMessage("My PIN is 4321.", id="1")]}, _thread("a"))
    bank.delete_memory("Emily", "lc:1")
    agent.invoke({"messages": [HumanMessage("I adopted a cat named Miso.", id="1")]}, _thread("b"))
    assert [m.query for m in bank.history("Emily")] == ["I adopted a cat named Miso."]
    before_model = next(s for s in agent.get_state_history(_thread("a")) if "model" in s.next)
    agent.invoke(None, before_model.config)  # thread a's deleted turn, regenerated
    assert [m.query for m in bank.history("Emily")] == ["I adopted a cat named Miso."]


def test_a_deleted_turn_comes_back_neither_in_its_second_form_nor_from_before_thread_keys(bank: MemoryBank) -> None:
    """A regenerate of a turn stored beside another thread's (lc:<id>:<digest>) brought the
    deleted words back under a new digest; a turn stored without a thread (an older version, an
    import) came back on a plain replay; the same words in a new thread were refused."""
    saver = InMemorySaver()
    agent = create_agent(
        recording_model("Hi!", "Noted.", "Noted again.", "Hello!", "Lovely!"),
        middleware=[MemoryBankMiddleware(bank, "Emily")],
        checkpointer=saver,
    )
    agent.invoke({"messages": [HumanMessage("Hi!", id="1")]}, _thread("a"))
    agent.invoke({"messages": [HumanMessage("My PIN is 4321.", id="1")]}, _thread("b"))
    second = next(m for m in bank.history("Emily") if m.query == "My PIN is 4321.")
    assert second.memory_id.startswith("lc:1:")
    bank.delete_memory("Emily", second.memory_id)
    before_model = next(s for s in agent.get_state_history(_thread("b")) if "model" in s.next)
    agent.invoke(None, before_model.config)  # regenerate in thread b: the same words, a new reply
    assert [m.query for m in bank.history("Emily")] == ["Hi!"]
    bank.delete_memory("Emily", "lc:1")
    agent.invoke({"messages": [HumanMessage("Hi!", id="1")]}, _thread("c"))  # the same words, a new thread
    assert [m.query for m in bank.history("Emily")] == ["Hi!"]
    bank.add_turn("Emily", "My cat is Miso.", "Lovely!", memory_id="lc:7")  # stored with no thread
    bank.delete_memory("Emily", "lc:7")
    agent.invoke({"messages": [HumanMessage("My cat is Miso.", id="7")]}, _thread("d"))
    assert "My cat is Miso." not in [m.query for m in bank.history("Emily")]



def test_without_a_thread_a_reused_message_id_is_another_message_when_its_words_differ(bank: MemoryBank) -> None:
    """An app without a checkpointer, numbering messages per conversation: a new conversation's
    message 1 replaced the earlier conversation's stored turn (lost), and once that turn was
    deleted every later message 1 was refused (dropped). The same words again stay a replay."""
    agent = create_agent(
        recording_model("Lovely!", "Nice!", "Noted.", "Again.", "Congratulations!", "Hm."),
        middleware=[MemoryBankMiddleware(bank, "Emily")],
    )
    agent.invoke({"messages": [HumanMessage("My cat is called Miso.", id="1")]})
    agent.invoke({"messages": [HumanMessage("I start at the bakery on Monday.", id="1")]})
    assert sorted(m.query for m in bank.history("Emily")) == ["I start at the bakery on Monday.", "My cat is called Miso."]
    agent.invoke({"messages": [HumanMessage("My cat is called Miso.", id="1")]})  # a retry: a new reply, same turn
    assert sorted((m.query, m.response) for m in bank.history("Emily")) == [
        ("I start at the bakery on Monday.", "Nice!"),
        ("My cat is called Miso.", "Noted."),
    ]
    for m in bank.history("Emily"):
        bank.delete_memory("Emily", m.memory_id)
    agent.invoke({"messages": [HumanMessage("My cat is called Miso.", id="1")]})  # a replay: refused
    assert bank.history("Emily") == []
    agent.invoke({"messages": [HumanMessage("My daughter Lily was born today!", id="1")]})  # new: stored
    assert [(m.query, m.response) for m in bank.history("Emily")] == [("My daughter Lily was born today!", "Congratulations!")]


def test_an_edit_in_a_thread_that_reuses_an_id_replaces_that_threads_own_turn(bank: MemoryBank) -> None:
    """Thread b's message 1 is stored beside thread a's; editing it in thread b left its pre-edit
    words stored (and found first by a search) beside the edited ones."""
    agent = create_agent(
        recording_model("Hi!", "Noted.", "Noted, edited."),
        middleware=[MemoryBankMiddleware(bank, "Emily")],
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [HumanMessage("Hi!", id="1")]}, _thread("a"))
    agent.invoke({"messages": [HumanMessage("My PIN is 4242.", id="1")]}, _thread("b"))
    agent.invoke({"messages": [HumanMessage("(PIN removed)", id="1")]}, _thread("b"))
    assert sorted((m.query, m.response) for m in bank.history("Emily")) == [("(PIN removed)", "Noted, edited."), ("Hi!", "Hi!")]


def test_an_answer_that_is_not_a_plain_message_is_stored_and_no_answer_keeps_the_message(bank: MemoryBank) -> None:
    """Structured output and a return_direct tool stored nothing (the turn was dropped with a
    debug line); a run without any answer now stores the user's message alone."""
    from langchain.agents.structured_output import ToolStrategy
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from pydantic import BaseModel

    from tests.langchain.conftest import tool_call

    class Answer(BaseModel):
        reply: str

    structured = create_agent(
        recording_model(tool_call("Answer", {"reply": "Noted, no peanuts."}, "c1")),
        middleware=[MemoryBankMiddleware(bank, "Emily")],
        response_format=ToolStrategy(Answer),
    )
    structured.invoke({"messages": [HumanMessage("I am allergic to peanuts.", id="s1")]})

    @tool(return_direct=True)
    def book_table(when: str) -> str:
        """Book a table."""
        return f"Booked for {when}."

    direct = create_agent(
        recording_model(tool_call("book_table", {"when": "8pm"}, "t1")),
        tools=[book_table],
        middleware=[MemoryBankMiddleware(bank, "Emily")],
    )
    direct.invoke({"messages": [HumanMessage("Book dinner at 8pm, I'm vegetarian.", id="d1")]})
    silent = create_agent(recording_model(AIMessage(content="")), middleware=[MemoryBankMiddleware(bank, "Emily")])
    silent.invoke({"messages": [HumanMessage("My sister is called Ana.", id="n1")]})
    assert sorted((m.query, m.response) for m in bank.history("Emily")) == [
        ("Book dinner at 8pm, I'm vegetarian.", "Booked for 8pm."),
        ("I am allergic to peanuts.", '{"reply":"Noted, no peanuts."}'),
        ("My sister is called Ana.", ""),
    ]


def test_an_earlier_message_of_the_exchange_never_empties_a_stored_reply(bank: MemoryBank) -> None:
    """The next exchange's earlier messages are stored without a reply: one already stored with
    its reply (an exchange whose answer was structured) keeps it."""
    agent = create_agent(recording_model("Noted.", "Lovely!"), middleware=[MemoryBankMiddleware(bank, "Emily")])
    first = HumanMessage("I am allergic to peanuts.", id="s1")
    agent.invoke({"messages": [first]})
    agent.invoke({"messages": [first, HumanMessage("I adopted a cat.", id="s2")]})  # its answer not sent back
    assert sorted((m.query, m.response) for m in bank.history("Emily")) == [
        ("I adopted a cat.", "Lovely!"),
        ("I am allergic to peanuts.", "Noted."),
    ]


def test_a_chat_turn_deleted_through_the_store_stays_deleted_on_a_replay(bank: MemoryBank) -> None:
    """A store delete (LangMem's manage tool) did not retire a chat turn: a retry stored it again.
    A key the store itself made may still be put again."""
    agent = create_agent(recording_model("Noted.", "Noted."), middleware=[MemoryBankMiddleware(bank, "Emily")])
    message = {"messages": [HumanMessage("My bank PIN is 4242.", id="m-1")]}
    agent.invoke(message)
    store = MemoryBankStore(bank)
    store.delete(("memories", "Emily"), "lc:m-1")
    agent.invoke(message)  # the client retries
    assert bank.history("Emily") == []
    store.put(("memories", "Emily"), "note", {"content": "likes tea"})
    store.delete(("memories", "Emily"), "note")
    store.put(("memories", "Emily"), "note", {"content": "likes green tea"})
    assert store.get(("memories", "Emily"), "note").value["content"] == "likes green tea"  # type: ignore[union-attr]


def test_without_a_thread_the_history_tells_conversations_apart_and_an_edit_replaces(bank: MemoryBank) -> None:
    """The same "ok" under the same id after two different histories kept one turn (a reply was
    lost); an edit in place of a later message was stored beside its old words (found first)."""
    agent = create_agent(
        recording_model("Zoo it is.", "Great, Friday.", "Dentist booked.", "Booked.", "Noted.", "Noted, edited."),
        middleware=[MemoryBankMiddleware(bank, "Emily")],
    )
    zoo = [HumanMessage("Let's meet Friday at the zoo?", id="1")]
    dentist = [HumanMessage("Book me a dentist on Tuesday?", id="1")]
    agent.invoke({"messages": zoo})
    agent.invoke({"messages": [*zoo, HumanMessage("ok", id="3")]})
    agent.invoke({"messages": dentist})
    agent.invoke({"messages": [*dentist, HumanMessage("ok", id="3")]})
    assert sorted((m.query, m.response) for m in bank.history("Emily") if m.query == "ok") == [
        ("ok", "Booked."),
        ("ok", "Great, Friday."),
    ]
    agent.invoke({"messages": [*zoo, HumanMessage("My PIN is 4242.", id="5")]})
    agent.invoke({"messages": [*zoo, HumanMessage("(PIN removed)", id="5")]})  # edited in place
    said = [m.query for m in bank.history("Emily")]
    assert "(PIN removed)" in said and "My PIN is 4242." not in said


def test_turns_an_earlier_version_stored_without_a_thread_keep_their_deletion_and_edits(bank: MemoryBank) -> None:
    """A turn stored with no thread recorded (lc_thread None), deleted, came back on a retry; one
    the user edited came back beside the edit on a regenerate; a turn an earlier version stored
    beside another thread's was stored again on a replay."""
    old = {"lc_thread": None, "replay_of": "lc:7"}
    bank.add_turn("Emily", "My new address is 12 Elm Street", "Noted.", memory_id="lc:7", extra=old)
    bank.add_turn("Emily", "My card PIN is 4242", "Noted!", memory_id="lc:8", extra={**old, "replay_of": "lc:8"})
    bank.delete_memory("Emily", "lc:7")
    bank.update_memory("Emily", "lc:8", text="My card PIN is (removed)", response="Noted!")
    agent = create_agent(recording_model("Noted again.", "Noted!!"), middleware=[MemoryBankMiddleware(bank, "Emily")])
    agent.invoke({"messages": [HumanMessage("My new address is 12 Elm Street", id="7")]})
    agent.invoke({"messages": [HumanMessage("My card PIN is 4242", id="8")]})
    assert [(m.memory_id, m.query) for m in bank.history("Emily")] == [("lc:8", "My card PIN is (removed)")]
    bank.add_turn("Emily", "I moved to Lisbon", "Nice!", memory_id="lc:1", extra={"lc_thread": "t1", "replay_of": "lc:1"})
    beside = {"lc_thread": "t2", "replay_of": "lc:1"}
    from memory_bank.langchain.middleware import _digest

    bank.add_turn("Emily", "My sister is Ana", "Lovely.", memory_id=f"lc:1:{_digest('My sister is Ana', 'Lovely.')}", extra=beside)
    replay = create_agent(recording_model("Lovely."), middleware=[MemoryBankMiddleware(bank, "Emily")], checkpointer=InMemorySaver())
    replay.invoke({"messages": [HumanMessage("My sister is Ana", id="1")]}, _thread("t2"))
    assert sorted(m.query for m in bank.history("Emily")) == ["I moved to Lisbon", "My card PIN is (removed)", "My sister is Ana"]


def test_a_message_is_stored_before_the_model_is_asked(bank: MemoryBank) -> None:
    """Turns were stored at the end of the run only: a model call that failed, a stream the
    caller stopped reading, or a cancelled run lost the user's message for good (with no
    checkpointer, as the README's own example, nothing brought it back)."""
    import asyncio

    agent = create_agent(_fails_first(recording_model("Never said.")), middleware=[MemoryBankMiddleware(bank, "Emily")])
    with pytest.raises(TimeoutError):
        _say(agent, "My sister Anna is moving to Lyon next week.", {})
    assert [(t.query, t.response) for t in bank.history("Emily")] == [("My sister Anna is moving to Lyon next week.", "")]

    streamed = create_agent(recording_model("What a lovely name for a cat, tell me more"), middleware=[MemoryBankMiddleware(bank, "Ben")])
    for i, _ in enumerate(streamed.stream({"messages": [{"role": "user", "content": "I adopted a cat named Miso."}]}, stream_mode="messages")):
        if i == 2:
            break  # the client went away mid-reply
    assert [t.query for t in bank.history("Ben")] == ["I adopted a cat named Miso."]

    slow = create_agent(recording_model("Lyon is lovely in spring, and"), middleware=[MemoryBankMiddleware(bank, "Cai")])

    async def cancelled() -> None:
        async def run() -> None:
            async for _ in slow.astream({"messages": [{"role": "user", "content": "I fly to Lyon in May."}]}, stream_mode="messages"):
                await asyncio.sleep(10)  # a slow consumer; the request is cancelled

        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(run(), 0.5)

    asyncio.run(cancelled())
    assert [t.query for t in bank.history("Cai")] == ["I fly to Lyon in May."]
    # and a run that ends adds its reply to the stored message, leaving the summaries' words in place
    ok = create_agent(recording_model("Lovely!"), middleware=[MemoryBankMiddleware(bank, "Dee")])
    _say(ok, "I adopted a cat named Miso.", {})
    assert [(t.query, t.response) for t in bank.history("Dee")] == [("I adopted a cat named Miso.", "Lovely!")]


def test_a_message_summarised_away_during_its_tool_loop_is_stored_with_its_reply(bank: MemoryBank) -> None:
    """LangChain's SummarizationMiddleware folds the run's own message into a summary when the
    tool loop grows long; the end of the run found no user message and stored nothing."""
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.tools import tool

    from tests.langchain.conftest import tool_call

    @tool
    def web_search(q: str) -> str:
        """Search the web."""
        return "a long page about " + q

    calls = [tool_call("web_search", {"q": f"lyon {i}"}, f"c{i}") for i in range(4)]
    model = recording_model(*calls, "Here is your 3-day Lyon plan.")
    summarising = SummarizationMiddleware(
        model=FakeListChatModel(responses=["(summary)"] * 10), trigger=("messages", 6), keep=("messages", 3)
    )
    agent = create_agent(
        model, tools=[web_search], middleware=[summarising, MemoryBankMiddleware(bank, "Emily")], checkpointer=InMemorySaver()
    )
    text = "Plan a trip to Lyon for me, my sister Anna lives there."
    _say(agent, text, _thread("t1"))
    assert [(t.query, t.response) for t in bank.history("Emily")] == [(text, "Here is your 3-day Lyon plan.")]


def test_a_message_the_bank_refuses_fails_the_run_before_the_model_is_paid(bank: MemoryBank) -> None:
    model = recording_model("An answer that would be thrown away.")
    agent = create_agent(model, middleware=[MemoryBankMiddleware(bank, "Emily")])
    with pytest.raises(InvalidInputError):
        _say(agent, "hello\x00there", {})
    assert model.system_texts() == [] and not bank.has_user("Emily")


def test_the_memory_block_leaves_out_what_the_thread_shows_not_what_it_does_not(bank: MemoryBank) -> None:
    """Any memory whose words equalled a message of the thread was left out, the current one's
    included (asked again in a new conversation, the earlier answer never reached the model), and
    an image-only message (no words) left out every day summary (they have no user words)."""
    from memory_bank import MemoryKind

    bank.add_turn("Emily", "What is my cat called?", "Your cat is called Miso.", at="2023-04-20T10:00")
    bank.set_layer("Emily", MemoryKind.DAILY_SUMMARY, "Emily visited Kyoto's temples.", date="2023-04-21")
    model = recording_model("Miso!", "Kyoto!")
    agent = create_agent(model, middleware=[MemoryBankMiddleware(bank, "Emily")], checkpointer=InMemorySaver())
    _say(agent, "What is my cat called?", _thread("new"))
    assert "Your cat is called Miso." in model.system_texts()[0]
    image = {"type": "image", "source_type": "url", "url": "https://example.invalid/kyoto.png"}
    agent.invoke({"messages": [{"role": "user", "content": [image]}, {"role": "user", "content": "Where was this? Kyoto?"}]}, _thread("img"))
    assert "Kyoto's temples" in model.system_texts()[1]


def test_a_message_edited_in_place_gets_the_memories_of_its_new_words(bank: MemoryBank) -> None:
    bank.add_turn("Emily", "My cat is called Miso.", "Lovely!", at="2023-04-20T10:00")
    bank.add_turn("Emily", "My sister Ana lives in Lisbon.", "Nice!", at="2023-04-21T10:00")
    model = _fails_first(recording_model("Lisbon!"))
    mw = MemoryBankMiddleware(bank, "Emily", k=1, reinforce=False, store_turns=False)
    agent = create_agent(model, middleware=[mw])
    with pytest.raises(TimeoutError):
        agent.invoke({"messages": [HumanMessage("What is my cat called?", id="m1")]})
    agent.invoke({"messages": [HumanMessage("Where does my sister live?", id="m1")]})  # edited, same id
    block = model.system_texts()[-1]
    assert "Lisbon" in block and "Miso" not in block  # not the block of the words it replaced


def test_a_retried_message_without_ids_is_stored_once_and_not_shown_itself(bank: MemoryBank) -> None:
    """An app that sends messages without ids gets new ones from LangGraph on every run: the
    copy a failed run stored stayed beside the retried turn, and was in the retry's own block."""
    model = _fails_first(recording_model("Lyon is lovely."))
    agent = create_agent(model, middleware=[MemoryBankMiddleware(bank, "Emily")])
    text = "My sister Anna is moving to Lyon next week."
    with pytest.raises(TimeoutError):
        _say(agent, text, {})
    _say(agent, text, {})  # the app retries
    assert [(t.query, t.response) for t in bank.history("Emily")] == [(text, "Lyon is lovely.")]
    assert "Anna" not in model.system_texts()[-1]


def test_the_same_words_sent_alone_twice_are_two_turns(bank: MemoryBank) -> None:
    """An app that sends each message alone (the memory is the bank's): "Yes", answered, then
    "Yes" to the next question is a second turn, not a retry of the first (whose reply a match
    by words would lose)."""
    model = recording_model("Shall we plan the trip?", "Then let us book it.")
    agent = create_agent(model, middleware=[MemoryBankMiddleware(bank, "Emily")])
    for _ in range(2):
        agent.invoke({"messages": [{"role": "user", "content": "Yes"}]})
    assert [(t.query, t.response) for t in bank.history("Emily")] == [
        ("Yes", "Shall we plan the trip?"),
        ("Yes", "Then let us book it."),
    ]


def test_a_thread_less_message_summarised_during_its_run_is_stored_once(bank: MemoryBank) -> None:
    """The run's start keyed the conversation by its earlier messages; a summary folded them away
    and the end of the run took the message for another conversation's, storing it again."""
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.messages import AIMessage

    summarising = SummarizationMiddleware(
        model=FakeListChatModel(responses=["(summary)"] * 10), trigger=("messages", 6), keep=("messages", 2)
    )
    agent = create_agent(recording_model("Noted, Lyon it is."), middleware=[summarising, MemoryBankMiddleware(bank, "Emily")])
    history: list[Any] = []
    for i in range(3):
        history += [HumanMessage(f"Old message number {i}", id=f"h{i}"), AIMessage(f"Reply {i}", id=f"a{i}")]
    agent.invoke({"messages": [*history, HumanMessage("My sister Anna lives in Lyon.", id="h3")]})
    assert [(t.query, t.response) for t in bank.history("Emily") if "Anna" in t.query] == [
        ("My sister Anna lives in Lyon.", "Noted, Lyon it is.")
    ]


def test_another_threads_turn_with_the_same_message_id_reaches_the_block(bank: MemoryBank, clock: Any) -> None:
    """A client numbering messages per thread: thread t2's message "1" left thread t1's turn
    lc:1 out of t2's block, as if t2 showed it."""
    model = recording_model("Lovely name!", "Your cat is Miso.")
    agent = create_agent(model, middleware=[MemoryBankMiddleware(bank, "Emily")], checkpointer=InMemorySaver())
    agent.invoke({"messages": [HumanMessage("My cat is called Miso.", id="1")]}, _thread("t1"))
    clock.advance(days=1)
    agent.invoke({"messages": [HumanMessage("What is my cat called?", id="1")]}, _thread("t2"))
    assert "My cat is called Miso." in model.system_texts()[-1]
