"""A summary run against what happens to its user meanwhile: a turn deleted or added while a
layer is being stored, the user forgotten (and a new user of that name begun) mid-run.

Each race is forced at the moment it could happen in production: the encoder embeds the layer's
text inside ``MemoryBank.set_layer``, after the summariser's last check of the day's turns and
before the layer is written (10-50 ms with a real encoder), and there a second bank on the same
store ("another process": the memory view, "Forget me", the chat) does its write.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memory_bank import MemoryBank, MemoryKind, UserNotFoundError
from memory_bank.embeddings import HashingEncoder
from memory_bank.summaries import Summarizer
from tests.summaries.conftest import ScriptedChatModel


class _Meanwhile(HashingEncoder):
    """Runs ``then`` once, as the first summary text (the fake's "Note ...") is embedded."""

    then: Callable[[], Any] | None = None

    def encode(self, texts: Any) -> Any:
        if self.then is not None and any(str(t).startswith("Note ") for t in texts):
            then, self.then = self.then, None
            then()
        return super().encode(texts)


def _banks(tmp_path: Path, clock: Any) -> tuple[MemoryBank, MemoryBank, _Meanwhile]:
    encoder = _Meanwhile(256)
    bank = MemoryBank.open(tmp_path / "s", clock=clock, encoder_instance=encoder, forgetting={"mode": "off"})
    other = MemoryBank.open(tmp_path / "s", clock=clock, encoder_instance=HashingEncoder(256))
    bank.add_turn("Ann", "I adopted a cat called MISO.", "Nice!", at="2023-04-28T10:00")
    bank.add_turn("Ann", "My bank PIN is SECRET.", "Noted.", at="2023-04-28T10:05")
    return bank, other, encoder


def test_a_turn_deleted_as_its_days_summary_is_stored_is_not_kept_in_it(tmp_path, clock) -> None:  # type: ignore[no-untyped-def]
    """The deletion blanked the day's layers, then the summary made before it was written over
    them, marked done: the deleted words stayed in it, in the global summary and in searches,
    and no later run remade it."""
    bank, other, encoder = _banks(tmp_path, clock)
    summarizer = Summarizer(bank, ScriptedChatModel(), "en")
    encoder.then = lambda: other.delete_memory("Ann", "Ann_2023-04-28_1")  # "delete" in the memory view
    first = summarizer.summarize_user("Ann")
    assert first.changed  # said, not hidden
    layer = bank.layer("Ann", MemoryKind.DAILY_SUMMARY, "2023-04-28")
    assert layer is None or "SECRET" not in layer.text
    assert all("SECRET" not in m.text for m, _ in bank.memories("Ann") if m.kind is not MemoryKind.TURN)
    summarizer.summarize_user("Ann")  # the next run makes it from what is left
    layer = bank.layer("Ann", MemoryKind.DAILY_SUMMARY, "2023-04-28")
    assert layer is not None and "MISO" in layer.text and "SECRET" not in layer.text and not layer.stale
    assert "SECRET" not in bank.profile("Ann")["global_summary"]
    assert not any("SECRET" in r.memory.text for r in bank.search("Ann", "What is my bank PIN?", k=5))


def test_a_late_turn_stored_as_its_days_summary_is_stored_is_summarised_next_run(tmp_path, clock) -> None:  # type: ignore[no-untyped-def]
    """A turn of the day added in that moment (a reply finished past midnight, an unsaved turn
    stored later) marked the layers stale, and the summary made without it was written over the
    mark as done: the turn was never summarised."""
    bank, other, encoder = _banks(tmp_path, clock)
    summarizer = Summarizer(bank, ScriptedChatModel(), "en")
    encoder.then = lambda: other.add_turn("Ann", "I bought a BIKE.", "Cool!", at="2023-04-28T23:50")
    summarizer.summarize_user("Ann")
    assert summarizer.due_days("Ann") == ["2023-04-28"]
    summarizer.summarize_user("Ann")
    layer = bank.layer("Ann", MemoryKind.DAILY_SUMMARY, "2023-04-28")
    assert layer is not None and "BIKE" in layer.text and not layer.stale
    assert summarizer.due_days("Ann") == []


@pytest.mark.parametrize("moment", ["while the model writes", "as the layer is stored"])
@pytest.mark.parametrize("reused_id", [True, False])
def test_a_user_forgotten_during_a_summary_run_gets_nothing_nor_does_the_next_user(  # type: ignore[no-untyped-def]
    tmp_path, clock, reused_id: bool, moment: str
) -> None:
    """"Forget me" while the run made Ann's layers, then a new start under the same name (or
    another user, who got Ann's id): the run wrote Ann's summaries, quoting her deleted turns,
    into the new account, and layers of her other days made from no turns at all (or made a
    new Ann for them)."""
    bank, other, encoder = _banks(tmp_path, clock)
    bank.add_turn("Ann", "We went hiking at the LAKE.", "Lovely!", at="2023-04-29T10:00")
    newcomer = "Bob" if reused_id else "Ann"

    def forget_and_begin_again() -> None:
        other.delete_user("Ann")
        other.add_turn(newcomer, "Hello, I am new here.", "Welcome!", at="2023-05-01T09:00")

    def first_call(prompt: str, n: int) -> str:
        forget_and_begin_again()
        return "Note 1: the user talked about MISO and SECRET."

    if moment == "as the layer is stored":
        encoder.then = forget_and_begin_again
        model = ScriptedChatModel()
    else:
        model = ScriptedChatModel(responses=[first_call])
    with pytest.raises(UserNotFoundError):
        Summarizer(bank, model, "en").summarize_user("Ann")
    assert bank.users() == [newcomer]
    kept = [(m.kind, m.text) for m, _ in bank.memories(newcomer, include_archived=True)]
    assert kept == [(MemoryKind.TURN, "Hello, I am new here.\nWelcome!")]
