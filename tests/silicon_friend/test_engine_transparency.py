"""What a reply used and changed: the memories shown under it, the "memory updated" notice, a
temporary chat that neither reads nor writes memories, a forgotten user's session, a reload."""

from __future__ import annotations

import pytest

from memory_bank import MemoryKind
from silicon_friend.engine import ChatSettings, SiliconFriend
from silicon_friend.errors import SessionEndedError
from tests.silicon_friend.fakes import EchoChatModel


def seed(engine: SiliconFriend) -> None:
    engine.bank.add_turn("Emily", "I adopted a cat named Miso.", "Lovely!", at="2023-04-28T10:00")
    engine.bank.add_turn("Emily", "I went hiking on Mount Tai.", "Sounds fun!", at="2023-04-29T10:00")


def test_a_reply_lists_the_memories_it_used_with_date_text_and_score(engine: SiliconFriend) -> None:
    seed(engine)
    hit = engine.bank.search("Emily", "Do you remember my cat Miso?", k=1)[0]  # before the reply
    turn = engine.reply(engine.start("Emily"), "Do you remember my cat Miso?", ChatSettings(top_k=1))
    assert [(m.memory_id, m.date, m.kind) for m in turn.used] == [
        ("Emily_2023-04-28_0", "2023-04-28", "turn")
    ]
    used = turn.used[0]
    assert "Miso" in used.text and used.score > 0
    assert used.score == pytest.approx(hit.score)  # the retrieval's own score, not a made-up one


def test_memory_updated_only_after_the_turn_is_committed(engine: SiliconFriend, clock) -> None:  # type: ignore[no-untyped-def]
    seed(engine)
    session = engine.start("Emily")
    seen: list[tuple[bool, int]] = []
    for _ in engine.stream(session, "my cat Miso", ChatSettings(top_k=1)):
        turn = session.turns[-1]
        seen.append((turn.stored, turn.reinforced))
    assert seen and all(s == (False, 0) for s in seen)  # nothing claimed while streaming
    turn = session.turns[-1]
    assert turn.stored and turn.reinforced == 1
    assert engine.bank.history("Emily")[-1].memory_id == turn.memory_id
    again = engine.reply(session, "my cat Miso again", ChatSettings(top_k=1))
    assert again.stored and again.reinforced == 0  # once a day: the same memory does not grow twice


def test_temporary_chat_neither_reads_nor_writes_memories(make_engine, bank) -> None:  # type: ignore[no-untyped-def]
    echo = EchoChatModel()
    engine = make_engine(echo)
    seed(engine)
    bank.set_layer("Emily", MemoryKind.GLOBAL_PORTRAIT, "Emily loves cats.")
    before = {m.memory_id: (m.strength, m.last_recall_date) for m, _ in bank.memories("Emily")}
    session = engine.start("Emily")
    session.temporary = True
    turn = engine.reply(session, "Do you remember my cat Miso?", ChatSettings(top_k=2))
    system = str(echo.calls[-1]["messages"][0].content)
    assert turn.response == "Echo: Do you remember my cat Miso?"
    assert "Miso" not in system and "loves cats" not in system  # nothing read
    assert turn.used == [] and not turn.stored and turn.temporary
    after = {m.memory_id: (m.strength, m.last_recall_date) for m, _ in bank.memories("Emily")}
    assert after == before  # nothing written, nothing reinforced
    second = engine.reply(session, "and now?")
    assert [t.type for t in echo.calls[-1]["messages"]] == [
        "system",
        "human",
        "ai",
        "human",
    ]  # still a dialog
    assert not second.stored and len(bank.history("Emily")) == 2
    session.temporary = False
    assert engine.reply(session, "back to normal").stored
    # a remembered turn is not prompted with the temporary chat's words (its reply is stored)
    assert [t.type for t in echo.calls[-1]["messages"]] == ["system", "human"]


def test_an_ended_session_stores_nothing(engine: SiliconFriend) -> None:
    session = engine.start("Emily")
    session.ended = True
    with pytest.raises(SessionEndedError, match="deleted"):
        engine.reply(session, "am I still here?")
    assert not engine.bank.has_user("Emily") and session.turns == []


def test_resume_shows_the_last_stored_turns(engine: SiliconFriend) -> None:
    first = engine.start("Emily")
    for i in range(4):
        engine.reply(first, f"message {i}")
    later = engine.start("Emily")
    engine.resume(later, 3)
    assert [t.query for t in later.turns] == ["message 1", "message 2", "message 3"]
    assert [t.response for t in later.turns] == [f"Echo: message {i}" for i in (1, 2, 3)]
    assert all(t.stored for t in later.turns)
    engine.resume(engine.start("Nobody"), 3)  # no memories: nothing to resume, no error
