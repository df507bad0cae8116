"""The conversation engine: prompts, storage, reinforcement, failures, stop, concurrency."""

from __future__ import annotations

import threading
import time

import pytest

from memory_bank import MemoryKind
from memory_bank.errors import InvalidInputError
from silicon_friend.engine import ChatSettings, Session, SiliconFriend
from silicon_friend.errors import PromptTooLongError, SiliconFriendError
from silicon_friend.models import call_params, reports_finish
from silicon_friend.reasons import reason
from tests.silicon_friend.fakes import CutModel, EchoChatModel, FullDisk


def system_of(model: EchoChatModel, call: int = -1) -> str:
    return str(model.calls[call]["messages"][0].content)


def test_two_turns_in_a_row_are_answered_and_stored(engine: SiliconFriend, echo: EchoChatModel) -> None:
    session = engine.start("Emily")
    first = "".join(engine.stream(session, "I adopted a cat named Miso."))
    second = engine.reply(session, "What is my cat called?")  # the original crashed here
    assert first.strip() == "Echo: I adopted a cat named Miso."
    assert second.response == "Echo: What is my cat called?" and second.error is None
    stored = engine.bank.history("Emily")
    assert [(m.query, m.response) for m in stored] == [
        ("I adopted a cat named Miso.", "Echo: I adopted a cat named Miso."),
        ("What is my cat called?", "Echo: What is my cat called?"),
    ]
    assert [t.memory_id for t in session.turns] == [m.memory_id for m in stored]
    assert len(echo.calls) == 2  # one LLM call per reply
    # The second prompt carries the first turn as dialog history.
    roles = [m.type for m in echo.calls[1]["messages"]]
    assert roles == ["system", "human", "ai", "human"]


def test_sampling_settings_reach_the_model(engine: SiliconFriend, echo: EchoChatModel) -> None:
    session = engine.start("Emily")
    engine.reply(session, "Hi", ChatSettings(temperature=0.2, top_p=0.5, max_new_tokens=48))
    assert echo.calls[0]["kwargs"] == {"temperature": 0.2, "top_p": 0.5, "max_tokens": 48}


def test_related_memories_with_dates_are_used_and_reinforced(
    engine: SiliconFriend, echo: EchoChatModel, clock
) -> None:  # type: ignore[no-untyped-def]
    bank = engine.bank
    bank.add_turn("Emily", "I adopted a cat named Miso.", "Lovely!", at="2023-04-28T10:00")
    bank.add_turn("Emily", "I went hiking on Mount Tai.", "Sounds fun!", at="2023-04-29T10:00")
    session = engine.start("Emily")
    assert session.returning
    turn = engine.reply(session, "Do you remember my cat Miso?", ChatSettings(top_k=1))
    system = system_of(echo)
    assert "[2023-04-28] Emily: I adopted a cat named Miso. | SiliconFriend: Lovely!" in system
    assert "Mount Tai" not in system and "first conversation" not in system
    assert turn.memories == ["Emily_2023-04-28_0"]
    recalled = {m.memory_id: m for m, _ in bank.memories("Emily")}["Emily_2023-04-28_0"]
    assert recalled.strength == 2 and recalled.last_recall_date == clock().date().isoformat()


def test_turns_already_in_the_dialog_are_not_retrieved_again(
    engine: SiliconFriend, echo: EchoChatModel
) -> None:
    session = engine.start("Emily")
    engine.reply(session, "My cat Miso is sick.")
    engine.reply(session, "Miso the cat is at the vet.")
    assert "Memories related" not in system_of(echo)  # the only related turn is in the dialog


@pytest.mark.parametrize("context_turns", [0, 1])
def test_the_memory_search_reads_the_message_or_the_recent_dialogue(
    engine: SiliconFriend, monkeypatch: pytest.MonkeyPatch, context_turns: int
) -> None:
    engine.bank.add_turn("Emily", "I adopted a cat named Miso.", "Lovely!", at="2023-04-28T10:00")
    engine.bank.config.retrieval.chat_context_turns = context_turns
    queries: list[str] = []
    search = engine.bank.search
    monkeypatch.setattr(engine.bank, "search", lambda user, q, **kw: queries.append(q) or search(user, q, **kw))
    session = engine.start("Emily")
    engine.reply(session, "My cat is sick.")
    engine.reply(session, "What should I do?")
    expected = "What should I do?"
    if context_turns:
        expected = "User: My cat is sick.\nAssistant: Echo: My cat is sick.\nUser: What should I do?"
    assert queries == ["My cat is sick.", expected]


def test_top_k_zero_is_a_no_memory_baseline(engine: SiliconFriend, echo: EchoChatModel) -> None:
    engine.bank.add_turn("Emily", "I adopted a cat named Miso.", "Lovely!", at="2023-04-28T10:00")
    engine.reply(engine.start("Emily"), "my cat Miso", ChatSettings(top_k=0))
    assert "Miso" not in system_of(echo)


def test_new_user_gets_the_first_time_prompt_once(engine: SiliconFriend, echo: EchoChatModel) -> None:
    session = engine.start("Nora")
    assert not session.returning
    engine.reply(session, "Hello!")
    engine.reply(session, "How are you?")
    assert "first conversation with Nora" in system_of(echo, 0)
    assert "first conversation" not in system_of(echo, 1)
    assert engine.start("Nora").returning
    engine.new_conversation(session)  # a new conversation in the same session: not the first either
    engine.reply(session, "I am back.")
    assert "first conversation" not in system_of(echo, 2)


def test_portrait_and_global_summary_reach_the_prompt(engine: SiliconFriend, echo: EchoChatModel) -> None:
    bank = engine.bank
    bank.add_turn("Emily", "hello", "hi", at="2023-04-28T10:00")
    bank.set_layer("Emily", MemoryKind.GLOBAL_PORTRAIT, "Emily is introverted; be gentle.")
    bank.set_layer("Emily", MemoryKind.GLOBAL_SUMMARY, "Emily moved to Beijing in April.")
    engine.reply(engine.start("Emily"), "Any advice for today?")
    system = system_of(echo)
    assert "Emily is introverted; be gentle." in system and "Emily moved to Beijing in April." in system
    assert system.index("introverted") < system.index("moved to Beijing")


@pytest.mark.parametrize(("mode", "message"), [("error", "backend exploded"), ("empty", "empty reply")])
def test_a_failed_reply_keeps_the_users_message(make_engine, mode: str, message: str) -> None:  # type: ignore[no-untyped-def]
    model = EchoChatModel(mode=mode)
    engine = make_engine(model)
    session = engine.start("Emily")
    assert "".join(engine.stream(session, "I lost my job today.")) == ""
    turn = session.turns[-1]
    assert turn.failed and message in (turn.error or "")
    stored = engine.bank.history("Emily")
    assert [(m.query, m.response) for m in stored] == [("I lost my job today.", "")]
    assert turn.memory_id == stored[0].memory_id
    # The chat goes on; the failed turn is not shown to the model as dialog.
    model.mode = "ok"
    assert engine.reply(session, "Are you there?").response == "Echo: Are you there?"
    assert [m.type for m in model.calls[-1]["messages"]] == ["system", "human"]


def test_a_model_that_hangs_times_out(make_engine) -> None:  # type: ignore[no-untyped-def]
    model = EchoChatModel(mode="hang")
    engine = make_engine(model, first_token_timeout=0.3)
    session = engine.start("Emily")
    started = time.monotonic()
    turn = engine.reply(session, "Hello?")
    model.release()
    assert time.monotonic() - started < 3
    assert turn.failed and "within" in (turn.error or "")
    assert engine.bank.history("Emily")[0].query == "Hello?"


def test_stop_keeps_the_partial_reply(make_engine) -> None:  # type: ignore[no-untyped-def]
    engine = make_engine(EchoChatModel(delay=0.05))
    session = engine.start("Emily")
    pieces = []
    for piece in engine.stream(session, "one two three four five six seven eight nine ten"):
        pieces.append(piece)
        if len(pieces) == 2:
            engine.stop(session)
    turn = session.turns[-1]
    assert turn.stopped and not turn.failed
    assert turn.response == "Echo: one" and len(pieces) == 2
    assert engine.bank.history("Emily")[0].response == "Echo: one"


def test_closing_the_stream_early_still_stores_the_turn(engine: SiliconFriend) -> None:
    session = engine.start("Emily")
    stream = engine.stream(session, "a b c d")
    next(stream)
    stream.close()
    assert session.turns[-1].stopped
    assert [m.response for m in engine.bank.history("Emily")] == ["Echo:"]


def test_regenerate_and_remove_last_turn(make_engine) -> None:  # type: ignore[no-untyped-def]
    model = EchoChatModel()
    engine = make_engine(model)
    session = engine.start("Emily")
    engine.reply(session, "first")
    engine.reply(session, "second")
    model.prefix = "Again:"
    assert "".join(engine.regenerate(session)).strip() == "Again: second"
    assert [(m.query, m.response) for m in engine.bank.history("Emily")] == [
        ("first", "Echo: first"),
        ("second", "Again: second"),
    ]
    removed = engine.remove_last_turn(session)
    assert removed is not None and removed.query == "second"
    assert [m.query for m in engine.bank.history("Emily")] == ["first"]
    assert [t.query for t in session.turns] == ["first"]
    engine.new_conversation(session)
    assert session.turns == [] and len(engine.bank.history("Emily")) == 1
    with pytest.raises(InvalidInputError):
        engine.regenerate(engine.start("Nobody"))


def test_a_message_too_long_for_the_context_is_refused_before_it_is_stored(make_engine) -> None:  # type: ignore[no-untyped-def]
    """Regenerate could never answer it, so it is refused with the fix ("send a shorter message")
    and the front end gives it back; nothing half-done is stored or shown."""
    engine = make_engine(context_tokens=300)
    session = engine.start("Emily")
    with pytest.raises(PromptTooLongError, match="send a shorter message"):
        engine.reply(session, "word " * 2000)
    assert session.turns == [] and not engine.bank.has_user("Emily")
    engine.reply(session, "hello")  # the chat goes on
    assert [m.query for m in engine.bank.history("Emily")] == ["hello"]
    small = make_engine(context_tokens=300)  # a stored turn the model can no longer take: Regenerate keeps it
    long_turn = small.start("Emily")
    engine.bank.add_turn("Emily", "word " * 2000, "")
    small.resume(long_turn, 7)
    with pytest.raises(PromptTooLongError):
        list(small.regenerate(long_turn))
    assert len(engine.bank.history("Emily")) == 2 and long_turn.turns[-1].query.startswith("word")


def test_small_context_keeps_prompts_within_budget(make_engine, echo: EchoChatModel) -> None:  # type: ignore[no-untyped-def]
    engine = make_engine(context_tokens=512)
    session = engine.start("Emily")
    for i in range(10):
        turn = engine.reply(session, f"Message number {i}: " + "blah " * 30)
        assert not turn.failed
    fitted = engine.prepare(session, "last one")
    assert fitted.prompt_tokens + fitted.max_new_tokens <= 512
    assert fitted.history_turns < 7


def test_bad_input_is_rejected(engine: SiliconFriend) -> None:
    with pytest.raises(InvalidInputError):
        engine.start("bad\x00name")
    with pytest.raises(InvalidInputError):
        engine.start("   ")
    with pytest.raises(InvalidInputError):
        engine.reply(engine.start("Emily"), "   ")
    with pytest.raises(InvalidInputError):
        ChatSettings(temperature=5)


class RecordingScheduler:
    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []
        self.closed = False

    def on_turn(self, user: str, day: object) -> bool:
        self.calls.append((user, day))
        return True

    def close(self, wait: bool = True) -> None:
        self.closed, self.waited = True, wait


def test_each_stored_turn_is_reported_to_the_scheduler(make_engine, clock) -> None:  # type: ignore[no-untyped-def]
    scheduler = RecordingScheduler()
    engine = make_engine(scheduler=scheduler)
    session = engine.start("Emily")
    engine.reply(session, "day one")
    clock.advance(1)
    engine.reply(session, "day two")
    engine.close()
    assert [str(d) for _, d in scheduler.calls] == ["2023-05-01", "2023-05-02"] and scheduler.closed
    assert not scheduler.waited  # shutting down does not wait for summaries still to be made


def test_day_rollover_summarises_the_finished_day_in_the_background(make_engine, bank, clock) -> None:  # type: ignore[no-untyped-def]
    from memory_bank.summaries import RolloverScheduler, Summarizer

    model = EchoChatModel(reply="The user talked about their new cat Miso and felt happy about it.")
    summarizer = Summarizer(bank, model, "en", sleep=lambda _s: None)
    scheduler = RolloverScheduler(summarizer)
    engine = make_engine(model, summarizer=summarizer, scheduler=scheduler)
    session = engine.start("Emily")
    engine.reply(session, "I adopted a cat named Miso.")
    assert scheduler.wait(10)
    assert bank.layer("Emily", MemoryKind.DAILY_SUMMARY, "2023-05-01") is None  # the day is not over
    clock.advance(1)
    engine.reply(session, "Good morning!")
    assert scheduler.wait(30)
    engine.close()
    daily = bank.layer("Emily", MemoryKind.DAILY_SUMMARY, "2023-05-01")
    assert daily is not None and daily.text


def test_summarize_now_includes_today(make_engine, bank) -> None:  # type: ignore[no-untyped-def]
    from memory_bank.summaries import Summarizer

    model = EchoChatModel(reply="The user adopted a cat called Miso and is very happy about it.")
    engine = make_engine(model, summarizer=Summarizer(bank, model, "en", sleep=lambda _s: None))
    session = engine.start("Emily")
    engine.reply(session, "I adopted a cat named Miso.")
    profile = engine.summarize(session)
    assert profile["global_summary"] and profile["global_portrait"]
    assert bank.layer("Emily", MemoryKind.DAILY_SUMMARY, "2023-05-01") is not None


def test_summarize_without_the_summaries_package_says_so(engine: SiliconFriend) -> None:
    session = engine.start("Emily")
    engine.reply(session, "hi")
    with pytest.raises(SiliconFriendError, match="summaries are off"):
        engine.summarize(session)


def test_concurrent_sessions_never_lose_or_mix_turns(make_engine) -> None:  # type: ignore[no-untyped-def]
    engine = make_engine(EchoChatModel(delay=0.002))
    users = [f"user{i}" for i in range(8)]
    errors: list[BaseException] = []

    def chat(user: str, session: Session) -> None:
        try:
            for j in range(4):
                turn = engine.reply(session, f"{user} message {j}")
                assert turn.response == f"Echo: {user} message {j}", turn
        except BaseException as e:
            errors.append(e)

    sessions = [(u, engine.start(u)) for u in users]
    sessions.append(("user0", engine.start("user0")))  # a second tab of the same user
    threads = [threading.Thread(target=chat, args=s) for s in sessions]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    for user in users:
        stored = engine.bank.history(user)
        expected = 8 if user == "user0" else 4
        assert len(stored) == expected
        assert all(m.query.startswith(f"{user} ") and m.response == f"Echo: {m.query}" for m in stored)
        assert len({m.memory_id for m in stored}) == expected


def test_openai_server_limit_is_updated_per_call() -> None:
    class ServerModel(EchoChatModel):
        extra_body: dict | None = None

    params = call_params(
        ServerModel(extra_body={"max_tokens": 400}), temperature=0.5, top_p=0.9, max_tokens=32
    )
    assert params["extra_body"] == {"max_tokens": 32} and params["max_tokens"] == 32
    assert "extra_body" not in call_params(EchoChatModel(), temperature=0.5, top_p=0.9, max_tokens=32)


def test_control_characters_never_cost_the_turn(make_engine) -> None:  # type: ignore[no-untyped-def]
    engine = make_engine(EchoChatModel(reply="fine\x00 thanks\x07"))
    turn = engine.reply(engine.start("Emily"), "hello\x00 there")
    assert turn.response == "fine thanks" and not turn.failed
    assert [(m.query, m.response) for m in engine.bank.history("Emily")] == [("hello there", "fine thanks")]


def test_small_model_decoding_is_chosen_for_the_packaged_default_and_tiny_names() -> None:
    from memory_bank.llm import parse_llm_spec
    from silicon_friend.models import SMALL_MODEL, Decoding, decoding_for

    assert decoding_for("llamacpp", parse_llm_spec(None)) == SMALL_MODEL
    assert (
        decoding_for(
            "openai:smollm2@http://127.0.0.1:8080/v1",
            parse_llm_spec("openai:smollm2@http://127.0.0.1:8080/v1"),
        )
        == SMALL_MODEL
    )
    assert decoding_for("openai:gpt-4o-mini", parse_llm_spec("openai:gpt-4o-mini")) == Decoding()
    assert SMALL_MODEL.repeat_penalty > 1 and SMALL_MODEL.max_reply_tokens and SMALL_MODEL.brief


def test_repetition_penalty_reaches_llamacpp_and_compatible_servers_only() -> None:
    class ServerModel(EchoChatModel):
        extra_body: dict | None = None

    class LlamaModel(EchoChatModel):
        @property
        def _llm_type(self) -> str:
            return "llamacpp"

    kw = {"temperature": 0.5, "top_p": 0.9, "max_tokens": 32, "repeat_penalty": 1.15}
    assert call_params(LlamaModel(), **kw)["repeat_penalty"] == 1.15
    server = call_params(ServerModel(extra_body={"max_tokens": 400}), **kw)
    assert (
        server["extra_body"] == {"max_tokens": 32, "repeat_penalty": 1.15} and "repeat_penalty" not in server
    )
    assert "repeat_penalty" not in call_params(EchoChatModel(), **kw)  # e.g. the OpenAI API itself


def test_a_reply_cut_at_its_token_cap_ends_at_its_last_full_sentence(make_engine) -> None:  # type: ignore[no-untyped-def]
    from silicon_friend.models import end_at_sentence

    engine = make_engine(CutModel())
    turn = engine.reply(engine.start("Emily"), "I am stressed")
    assert turn.response == "I hear you. Exams are hard!"
    assert end_at_sentence("还好。我们一起想办法") == "还好。" and end_at_sentence("no end") == "no end"


@pytest.mark.parametrize("finish", [None, "stop"])
def test_a_stream_cut_off_before_its_finish_reason_is_a_failure_not_a_whole_reply(make_engine, finish) -> None:  # type: ignore[no-untyped-def]
    """An OpenAI-compatible server (or a proxy) that closes the stream mid-reply, without the
    finish reason every reply of it ends with: the half-sentence is not kept as the whole reply.
    The user's message is stored, and the failure says to try again."""
    from langchain_core.messages import AIMessageChunk
    from langchain_core.outputs import ChatGenerationChunk

    class ServerModel(EchoChatModel):
        reports_finish_reason: bool = True

        def _stream(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[no-untyped-def]
            for word in ["I hear you.", " Exams are hard, and what you", " said about"]:
                yield ChatGenerationChunk(message=AIMessageChunk(content=word))
            if finish is not None:
                yield ChatGenerationChunk(message=AIMessageChunk(content="", response_metadata={"finish_reason": finish}))

    engine = make_engine(ServerModel())
    turn = engine.reply(engine.start("Emily"), "I am stressed")
    stored = engine.bank.history("Emily")
    assert [m.query for m in stored] == ["I am stressed"]  # the message is never lost
    if finish is None:
        assert turn.error == reason("cut_off") and turn.response == "" and stored[0].response == ""
    else:
        assert turn.error is None and stored[0].response == turn.response.strip() != ""
    assert reports_finish(ServerModel()) and not reports_finish(EchoChatModel())


def test_the_openai_client_and_llamacpp_are_known_to_end_replies_with_a_finish_reason() -> None:
    pytest.importorskip("langchain_openai")
    from memory_bank.llm import build_chat_model

    assert reports_finish(build_chat_model("openai:m@http://127.0.0.1:9/v1"))


def test_small_models_are_asked_for_a_short_reply_under_a_reply_cap(make_engine, echo) -> None:  # type: ignore[no-untyped-def]
    from silicon_friend.models import SMALL_MODEL

    engine = make_engine()
    engine.model.decoding = SMALL_MODEL
    engine.reply(engine.start("Emily"), "Hi", ChatSettings(max_new_tokens=400))
    assert "one to three short sentences" in system_of(echo)
    assert echo.calls[0]["kwargs"]["max_tokens"] == SMALL_MODEL.max_reply_tokens


def test_a_turn_the_store_could_not_take_is_stored_with_the_next_one(engine: SiliconFriend, clock, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A passing store failure (a full disk freed, a lock another process held past the wait)
    lost the message for good: it was only ever said to be unsaved. It is now stored before the
    next turn, at the time it was said, and the front ends stop calling it unsaved."""
    bank = engine.bank
    disk = FullDisk(bank, monkeypatch)
    session = engine.start("Emily")
    lost = engine.reply(session, "My sister Ana moved to Lisbon.")
    said_at = lost.timestamp
    assert lost.unsaved and "full" in (lost.error or "")
    clock.advance(hours=2)
    still = engine.reply(session, "Still there?")  # the disk is still full: both wait
    assert lost.unsaved and still.unsaved and not bank.has_user("Emily")
    disk.on = False  # space freed
    clock.advance(hours=2)
    engine.reply(session, "Where does my sister live?")
    stored = bank.history("Emily")
    assert [m.query for m in stored] == ["My sister Ana moved to Lisbon.", "Still there?", "Where does my sister live?"]
    assert stored[0].timestamp == said_at and stored[0].response == lost.response
    assert not any(t.unsaved for t in session.turns) and lost.error is None and still.error is None
    assert [t.memory_id for t in session.turns] == [m.memory_id for m in stored]


def test_while_the_store_refuses_a_message_waits_once_and_turns_keep_their_order(engine: SiliconFriend, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """With an earlier turn unsaved, each message waited twice for a store held locked (the
    earlier turn's try, then its own), and a lock let go between the two stored the new turn
    before the earlier one."""
    from memory_bank.errors import StoreError

    bank, real, tries = engine.bank, engine.bank.add_turn, []
    held = {"on": True}

    def add_turn(*args, **kwargs):  # type: ignore[no-untyped-def]
        tries.append(args[1])
        if held["on"]:
            held["on"] = len(tries) < 2  # let go after the second try
            raise StoreError.of("locked", store="'s'", seconds="5")
        return real(*args, **kwargs)

    monkeypatch.setattr(bank, "add_turn", add_turn)
    session = engine.start("Emily")
    first = engine.reply(session, "My sister Ana moved to Lisbon.")
    second = engine.reply(session, "She loves it there.")  # the earlier turn's try is refused: one wait
    assert tries == ["My sister Ana moved to Lisbon.", "My sister Ana moved to Lisbon."]
    assert first.unsaved and second.unsaved and "another program held the store" in (second.error or "")
    engine.reply(session, "Anything else?")
    assert [m.query for m in bank.history("Emily")] == [
        "My sister Ana moved to Lisbon.", "She loves it there.", "Anything else?"
    ]


def test_a_turn_the_store_refuses_for_its_content_does_not_hold_up_the_others(engine: SiliconFriend, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from memory_bank.errors import InvalidInputError

    bank, real, tries = engine.bank, engine.bank.add_turn, []

    def add_turn(*args, **kwargs):  # type: ignore[no-untyped-def]
        tries.append(args[1])
        if args[1] == "refused":
            raise InvalidInputError("the store refuses this text")
        return real(*args, **kwargs)

    monkeypatch.setattr(bank, "add_turn", add_turn)
    session = engine.start("Emily")
    refused = engine.reply(session, "refused")
    engine.reply(session, "one")
    engine.reply(session, "two")
    # tried with its reply, then alone, and not again with every turn
    assert refused.unsaved and tries == ["refused", "refused", "one", "two"]
    assert [m.query for m in bank.history("Emily")] == ["one", "two"]


def test_a_forgotten_users_unsaved_turn_is_never_stored(engine: SiliconFriend, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The last try to store unsaved turns (a front end closing, a reload) would bring back a
    user who asked to be forgotten."""
    disk = FullDisk(engine.bank, monkeypatch)
    session = engine.start("Emily")
    engine.reply(session, "My sister Ana moved to Lisbon.")
    disk.on = False
    session.ended = True  # "Forget me" (the user had nothing stored)
    assert not engine.store_unsaved(session) and not engine.bank.has_user("Emily")


def test_new_conversation_stores_or_keeps_a_turn_the_store_could_not_take(engine: SiliconFriend, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    bank = engine.bank
    disk = FullDisk(bank, monkeypatch)
    session = engine.start("Emily")
    lost = engine.reply(session, "My sister Ana moved to Lisbon.")
    engine.new_conversation(session)  # still full: the turn stays on screen, unsaved
    assert session.turns == [lost] and lost.unsaved
    disk.on = False
    engine.new_conversation(session)  # it can be stored now: it is, and the screen empties
    assert session.turns == [] and [m.query for m in bank.history("Emily")] == ["My sister Ana moved to Lisbon."]


def test_a_clock_that_went_back_a_day_keeps_the_last_message_last(engine: SiliconFriend, clock) -> None:  # type: ignore[no-untyped-def]
    """A user who flew west (the machine's local time now a day behind the turns said hours
    before) or a corrected clock: the message just sent was dated the day before, sorted before
    the turns said earlier, and a reloaded page resumed the conversation without it (and the
    prompt's recent dialogue left it out). A turn said now is dated no earlier than the latest."""
    session = engine.start("Kai")
    for text in ("We landed in Kiritimati.", "The lagoon is so blue."):
        engine.reply(session, text)
    clock.advance(hours=-26)  # the clock of the same moment, 26 hours behind
    engine.reply(session, "Back home, and jet-lagged.")
    said = engine.bank.history("Kai")
    assert [m.query for m in said] == ["We landed in Kiritimati.", "The lagoon is so blue.", "Back home, and jet-lagged."]
    assert len({m.date for m in said}) == 1
    again = engine.start("Kai")
    engine.resume(again, 7)
    assert again.turns[-1].query == "Back home, and jet-lagged."
    # A turn given an earlier time on purpose (a replayed history) keeps it.
    engine.bank.add_turn("Kai", "An old diary entry.", "", at="2023-01-05T10:00")
    assert engine.bank.history("Kai")[0].query == "An old diary entry."


def test_summarize_now_after_the_clock_went_back_includes_the_conversation(make_engine, bank, clock) -> None:  # type: ignore[no-untyped-def]
    """The turns said after the clock went back are dated the latest turn's day, a day after
    the clock's: "Summarize now" summarised the clock's today and left them out."""
    from memory_bank.summaries import Summarizer

    model = EchoChatModel(reply="The user adopted a cat called Miso.")
    engine = make_engine(model, summarizer=Summarizer(bank, model, "en", sleep=lambda _s: None))
    session = engine.start("Kai")
    engine.reply(session, "I adopted a cat called Miso.")
    clock.advance(hours=-26)
    engine.reply(session, "She sleeps on my keyboard.")
    engine.summarize(session)
    day = bank.history("Kai")[-1].date
    layer = bank.layer("Kai", MemoryKind.DAILY_SUMMARY, day)
    assert day == "2023-05-01" and layer is not None and layer.text and not layer.stale
