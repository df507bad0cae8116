"""MemoryBankMemory (classic BaseMemory): the paper's prompt ingredients, save, clear."""

from __future__ import annotations

import pytest
from langchain_classic.chains import ConversationChain, LLMChain
from langchain_core.messages import AIMessage, HumanMessage

from memory_bank import InvalidInputError, MemoryBank, MemoryKind
from memory_bank.langchain import MemoryBankMemory, as_memory, as_retriever, conversation_prompt
from tests.conftest import FixedClock
from tests.langchain.conftest import recording_model

# ConversationChain and LLMChain are deprecated by LangChain; classic apps still use them.
pytestmark = pytest.mark.filterwarnings("ignore::langchain_core._api.LangChainDeprecationWarning")


def _say(memory: MemoryBankMemory, query: str, reply: str) -> None:
    memory.save_context({"input": query}, {"response": reply})


def test_variables_are_the_papers_prompt_ingredients(bank: MemoryBank) -> None:
    memory = as_memory(bank, "Emily")
    assert memory.memory_variables == ["history", "memories", "user_portrait", "event_summary"]
    assert memory.load_memory_variables({"input": "hello"}) == {
        "history": "",
        "memories": "",
        "user_portrait": "",
        "event_summary": "",
    }  # a new user works


def test_a_saved_turn_is_retrievable_in_the_next_call(bank: MemoryBank, clock: FixedClock) -> None:
    first = as_memory(bank, "Emily")
    _say(first, "I adopted a cat named Miso.", "What a lovely name!")
    [stored] = bank.history("Emily")
    assert stored.timestamp == "2023-05-01T12:00:00"  # stored with its time
    # A new session (another memory object, the next day) recalls it with its date.
    clock.advance(days=1)
    memories = as_memory(bank, "Emily").load_memory_variables({"input": "What is my cat called?"})["memories"]
    assert memories == "[2023-05-01] Human: I adopted a cat named Miso. AI: What a lovely name!"
    # So does the retriever, at once.
    assert as_retriever(bank, "Emily", k=1).invoke("cat")[0].id == stored.memory_id


def test_with_chat_context_the_search_reads_the_windows_dialogue(bank: MemoryBank) -> None:
    bank.add_turn("Emily", "I adopted a cat named Miso.", "What a lovely name!", at="2023-04-28T10:00")
    bank.config.retrieval.chat_context_turns = 1
    memory = as_memory(bank, "Emily", k=1)
    _say(memory, "Tell me about my cat Miso", "Sure.")
    queries: list[str] = []
    search = bank.search
    bank.search = lambda user, q, **kw: queries.append(q) or search(user, q, **kw)  # type: ignore[method-assign]
    memory.load_memory_variables({"input": "What was her name again?"})
    assert queries == ["User: Tell me about my cat Miso\nAssistant: Sure.\nUser: What was her name again?"]


def test_history_is_a_window_of_this_session(bank: MemoryBank) -> None:
    memory = as_memory(bank, "Emily", window=2)
    for i in range(3):
        _say(memory, f"message {i}", f"reply {i}")
    history = memory.load_memory_variables({"input": "anything"})["history"]
    assert history == "Human: message 1\nAI: reply 1\nHuman: message 2\nAI: reply 2"
    assert memory.session == [("message 1", "reply 1"), ("message 2", "reply 2")]


def test_default_window_is_seven_turns(bank: MemoryBank) -> None:
    memory = as_memory(bank, "Emily")
    for i in range(9):
        _say(memory, f"message {i}", f"reply {i}")
    assert [q for q, _ in memory.session] == [f"message {i}" for i in range(2, 9)]


def test_memories_leave_out_turns_already_in_the_history(bank: MemoryBank) -> None:
    bank.add_turn("Emily", "My cat Miso likes tuna.", "Cats love fish.", at="2023-04-20T10:00")
    memory = as_memory(bank, "Emily", k=2)
    _say(memory, "I bought a toy for my cat Miso.", "She'll love it!")
    variables = memory.load_memory_variables({"input": "cat Miso"})
    assert "I bought a toy" in variables["history"]
    assert variables["memories"] == "[2023-04-20] Human: My cat Miso likes tuna. AI: Cats love fish."


def test_clear_empties_the_session_not_the_long_term_memory(bank: MemoryBank) -> None:
    memory = as_memory(bank, "Emily")
    _say(memory, "I adopted a cat named Miso.", "What a lovely name!")
    memory.clear()
    variables = memory.load_memory_variables({"input": "What is my cat called?"})
    assert variables["history"] == ""
    assert "Miso" in variables["memories"]
    assert len(bank.history("Emily")) == 1


def test_portrait_and_event_summary(bank: MemoryBank) -> None:
    bank.set_layer("Emily", MemoryKind.GLOBAL_PORTRAIT, "Warm and curious.")
    bank.set_layer("Emily", MemoryKind.GLOBAL_SUMMARY, "Emily adopted a cat and took up pottery.")
    variables = as_memory(bank, "Emily").load_memory_variables({"input": "hi"})
    assert variables["user_portrait"] == "Warm and curious."
    assert variables["event_summary"] == "Emily adopted a cat and took up pottery."


def test_recall_strengthens_unless_reinforcement_is_off(bank: MemoryBank, clock: FixedClock) -> None:
    m = bank.add_turn("Emily", "I adopted a cat named Miso.", "Lovely!", at="2023-04-30T10:00")
    as_memory(bank, "Emily", reinforce=False).load_memory_variables({"input": "my cat"})
    assert bank.memories("Emily")[0][0].strength == 1
    as_memory(bank, "Emily").load_memory_variables({"input": "my cat"})
    assert bank.memories("Emily")[0][0].strength == 2
    session = as_memory(bank, "Emily")  # the out-of-window path recalls too
    _say(session, "Hello again.", "Hi!")
    session.load_memory_variables({"input": "my cat"})
    strength = {mem.memory_id: mem.strength for mem, _ in bank.memories("Emily")}
    assert strength[m.memory_id] == 2  # recalled three times today: one recall day
    clock.advance(days=1)
    session.load_memory_variables({"input": "my cat"})
    assert {mem.memory_id: mem.strength for mem, _ in bank.memories("Emily")}[m.memory_id] == 3


def test_two_users_sharing_a_bank_never_see_each_other(bank: MemoryBank) -> None:
    emily, jason = as_memory(bank, "Emily"), as_memory(bank, "Jason")
    _say(emily, "My cat is called Miso.", "Lovely!")
    _say(jason, "My cat is called Tiger.", "Great!")
    emily.clear()
    jason.clear()
    assert "Tiger" not in emily.load_memory_variables({"input": "What is my cat called?"})["memories"]
    assert "Miso" not in jason.load_memory_variables({"input": "What is my cat called?"})["memories"]


@pytest.mark.parametrize("user", [None, ""])
def test_a_user_is_required(bank: MemoryBank, user: str | None) -> None:
    with pytest.raises(ValueError, match="user"):
        MemoryBankMemory(bank=bank, user=user)  # type: ignore[arg-type]


def test_ambiguous_inputs_need_an_input_key(bank: MemoryBank) -> None:
    memory = as_memory(bank, "Emily")
    with pytest.raises(ValueError, match="input_key"):
        memory.load_memory_variables({"input": "a", "topic": "b"})
    keyed = as_memory(bank, "Emily", input_key="input", output_key="text")
    keyed.save_context({"input": "a", "topic": "b"}, {"text": "reply", "other": "x"})
    assert keyed.session == [("a", "reply")]


def test_history_as_messages(bank: MemoryBank) -> None:
    memory = as_memory(bank, "Emily", return_messages=True)
    _say(memory, "Hi", "Hello!")
    assert memory.load_memory_variables({"input": "x"})["history"] == [
        HumanMessage(content="Hi"),
        AIMessage(content="Hello!"),
    ]


def test_conversation_chain_remembers_across_sessions(bank: MemoryBank, clock: FixedClock) -> None:
    model = recording_model("What a lovely name!", "Your cat is called Miso.")
    memory = as_memory(bank, "Emily")
    chain = ConversationChain(llm=model, memory=memory, prompt=conversation_prompt())
    chain.invoke({"input": "I adopted a cat named Miso today."})
    memory.clear()
    clock.advance(days=1)
    assert chain.invoke({"input": "What is my cat called?"})["response"] == "Your cat is called Miso."
    prompt = model.prompts[-1][0].text
    assert "[2023-05-01] Human: I adopted a cat named Miso today. AI: What a lovely name!" in prompt
    assert prompt.rstrip().endswith("Human: What is my cat called?\nAI:")
    assert [m.query for m in bank.history("Emily")] == [
        "I adopted a cat named Miso today.",
        "What is my cat called?",
    ]


def test_llm_chain_with_a_custom_input_name(bank: MemoryBank) -> None:
    bank.add_turn("Emily", "I adopted a cat named Miso.", "Lovely!", at="2023-04-30T10:00")
    model = recording_model("Miso!")
    memory = as_memory(bank, "Emily", input_key="question")
    chain = LLMChain(llm=model, memory=memory, prompt=conversation_prompt(input_key="question"))
    assert chain.invoke({"question": "What is my cat called?"})["text"] == "Miso!"
    assert "I adopted a cat named Miso." in model.prompts[-1][0].text


@pytest.mark.asyncio
async def test_async_load_and_save(bank: MemoryBank) -> None:
    memory = as_memory(bank, "Emily")
    await memory.asave_context({"input": "I adopted a cat named Miso."}, {"response": "Lovely!"})
    memory.clear()
    variables = await memory.aload_memory_variables({"input": "my cat"})
    assert "Miso" in variables["memories"]


def test_a_missing_input_is_refused_not_stored_as_none(bank: MemoryBank) -> None:
    memory = MemoryBankMemory(bank=bank, user="Emily")
    with pytest.raises(InvalidInputError, match="query is empty"):
        memory.save_context({"input": None}, {"response": None})
    memory.save_context({"input": [HumanMessage("I adopted a cat."), HumanMessage("Her name is Miso.")]}, {"response": None})
    assert [(t.query, t.response) for t in bank.history("Emily")] == [("I adopted a cat.\nHer name is Miso.", "")]


def test_the_window_drops_what_was_deleted_and_shows_what_was_edited(bank: MemoryBank) -> None:
    """A turn deleted (a memory view, forget_memory, MCP) or its user forgotten stayed in the
    history fed to the model; an edited one kept its old words."""

    memory = as_memory(bank, "Emily")
    memory.save_context({"input": "My PIN is 4242."}, {"response": "Noted."})
    memory.save_context({"input": "I live in Paris, 12 rue X."}, {"response": "Lovely."})
    first, second = bank.history("Emily")
    bank.delete_memory("Emily", first.memory_id)
    bank.update_memory("Emily", second.memory_id, text="I live in Paris.")
    history = memory.load_memory_variables({"input": "hello"})["history"]
    assert "4242" not in history and "12 rue X" not in history and "I live in Paris." in history
    bank.delete_user("Emily")
    assert memory.load_memory_variables({"input": "hello"})["history"] == "" and memory.session == []


def test_a_smaller_window_after_some_turns_is_no_error(bank: MemoryBank) -> None:
    memory = as_memory(bank, "Emily", window=3)
    for i in range(3):
        memory.save_context({"input": f"message {i}"}, {"response": "ok"})
    memory.window = 1
    assert memory.session == [("message 2", "ok")]
    assert "message 2" in memory.load_memory_variables({"input": "hi"})["history"]
