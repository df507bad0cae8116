"""Each summary call is bounded: its answer (max_output_tokens) and its material (max_input_tokens)."""

from __future__ import annotations

from memory_bank import MemoryBank
from memory_bank.config import SummaryConfig
from memory_bank.embeddings import HashingEncoder
from memory_bank.summaries import Summarizer
from tests.silicon_friend.fakes import EchoChatModel


def test_answers_and_material_per_call_are_capped(tmp_path) -> None:  # type: ignore[no-untyped-def]
    model = EchoChatModel(reply="The user spent the day gardening and planting tomatoes.")
    with MemoryBank.open(tmp_path / "s", encoder_instance=HashingEncoder(64)) as bank:
        for i in range(60):
            bank.add_turn("Ann", f"Turn {i}: today I planted a row of tomatoes in the garden, " * 3, "Nice!",
                          at=f"2023-05-01T10:{i:02d}")  # fmt: skip
        config = SummaryConfig(max_output_tokens=120, max_input_tokens=400)
        summarizer = Summarizer(bank, model, "en", config=config, sleep=lambda _s: None)
        report = summarizer.summarize_user("Ann", "2023-05-02")
        assert report.ok, report.failed
        assert {c["kwargs"].get("max_tokens") for c in model.calls} == {120}
        longest = max(len(str(c["messages"][-1].content).split()) for c in model.calls)
        assert longest < 400  # every prompt's material fits the cap (words < tokens)
        assert len(model.calls) > 4  # so the long day went in parts, then a merge
        uncapped = Summarizer(bank, model, "en", config=SummaryConfig(max_input_tokens=None))
        assert uncapped.budget(next(iter(uncapped.chains)), {"date": "2023-05-01"}) > 400
