"""MemoryForgetterLoader: forgetting at load time, reproducible, read-only unless asked."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from memory_bank import InvalidInputError, MemoryBank
from memory_bank.config import PAPER_FORGETTING
from memory_bank.langchain import MemoryForgetterLoader, as_loader
from memory_bank.original_format import import_data, load_memory_file

NOW = "2023-05-06"


def _file_data() -> dict[str, Any]:
    days = [f"2023-05-0{d}" for d in range(1, 6)]
    return {
        " Emily ": {  # a stray-space key, as in the paper's data
            "name": "Emily",
            "history": {
                day: [
                    {"query": f"Emily talks about topic {d}.{i}", "response": f"reply {d}.{i}"}
                    for i in range(4)
                ]
                for d, day in enumerate(days)
            }
            | {"2023-05-05": [["An old list-shaped turn.", "Still readable."], ["Another one.", "Yes."]]},
            "summary": {day: {"content": f"Summary of {day}."} for day in days},
            "personality": {"2023-05-01": "Cheerful."},
            "overall_history": "Emily had a busy week.",
            "overall_personality": "Warm.",
        },
        "Jason": {"name": "Jason", "history": {"2023-05-01": [{"query": "Jason's turn.", "response": "ok"}]}},
    }


@pytest.fixture
def memory_file(tmp_path: Path) -> Path:
    path = tmp_path / "memory.json"
    path.write_text(json.dumps(_file_data(), indent=2), encoding="utf-8")
    return path


def _digest(path: Path) -> tuple[str, int]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


def test_forgetting_is_reproducible_with_a_seed(memory_file: Path) -> None:
    runs = [MemoryForgetterLoader(memory_file, "Emily", seed=3, now=NOW).forget() for _ in range(2)]
    assert runs[0].forgotten == runs[1].forgotten
    assert [d.id for d in runs[0].documents] == [d.id for d in runs[1].documents]
    assert 0 < len(runs[0].forgotten) < runs[0].examined == 5 * 4 - 2 + 5  # 23 turns + 5 summaries
    other = MemoryForgetterLoader(memory_file, "Emily", seed=4, now=NOW).forget()
    assert other.forgotten != runs[0].forgotten
    kept = {d.id for d in runs[0].documents}
    assert kept.isdisjoint(runs[0].forgotten)
    assert len(kept) + len(runs[0].forgotten) == runs[0].examined


def test_the_clock_is_injectable(memory_file: Path) -> None:
    import datetime as dt

    by_clock = MemoryForgetterLoader(memory_file, "Emily", seed=3, clock=lambda: dt.datetime(2023, 5, 6, 9))
    assert (
        by_clock.forget().forgotten
        == MemoryForgetterLoader(memory_file, "Emily", seed=3, now=NOW).forget().forgotten
    )


def test_the_source_file_is_never_modified(memory_file: Path) -> None:
    before = _digest(memory_file)
    loader = MemoryForgetterLoader(memory_file, "Emily", seed=1, now="2023-06-01")
    docs = loader.load()
    assert loader.last_result is not None and loader.last_result.forgotten and not loader.last_result.written
    assert len(docs) < loader.last_result.examined
    assert _digest(memory_file) == before


def test_write_back_removes_the_forgotten_memories_only(memory_file: Path) -> None:
    result = MemoryForgetterLoader(memory_file, "Emily", seed=3, now=NOW, write_back=True).forget()
    assert result.written and result.forgotten
    data = load_memory_file(memory_file)  # still a valid memory file
    assert data["Jason"] == _file_data()["Jason"]
    assert data[" Emily "]["overall_personality"] == "Warm."
    # Reloading with forgetting off gives exactly the survivors, with their ids unchanged.
    again = MemoryForgetterLoader(memory_file, "Emily", mode="off").forget()
    assert [d.id for d in again.documents] == [d.id for d in result.documents]
    assert again.forgotten == []


def test_mode_off_keeps_everything_and_threshold_is_deterministic(memory_file: Path) -> None:
    off = MemoryForgetterLoader(memory_file, "Emily", mode="off", now=NOW).forget()
    assert off.forgotten == [] and len(off.documents) == off.examined
    assert {d.metadata["retention"] for d in off.documents} == {1.0}
    cut = MemoryForgetterLoader(memory_file, "Emily", policy="threshold", threshold=0.1, now=NOW).forget()
    # Strength 1: R = exp(-t); t = 3 days gives 0.05 (< 0.1), t = 2 days gives 0.135 (kept).
    assert {d.metadata["date"] for d in cut.documents} == {"2023-05-04", "2023-05-05"}
    assert all(i.split("_")[1] <= "2023-05-03" for i in cut.forgotten)


def test_documents_and_their_metadata(memory_file: Path) -> None:
    docs = MemoryForgetterLoader(memory_file, "Emily", mode="off", now=NOW).load()
    by_id = {d.id: d for d in docs}
    turn = by_id["Emily_2023-05-05_0"]
    assert turn.page_content == "An old list-shaped turn.\nStill readable."
    assert turn.metadata | {"source": None} == {
        "memory_id": "Emily_2023-05-05_0",
        "user": "Emily",
        "kind": "turn",
        "date": "2023-05-05",
        "turn": 0,
        "strength": 1,
        "last_recall_date": None,
        "timestamp": None,
        "retention": 1.0,
        "source": None,
    }
    assert turn.metadata["source"] == str(memory_file)
    assert by_id["Emily_2023-05-01_summary"].metadata["kind"] == "daily_summary"
    assert {d.metadata["user"] for d in docs} == {"Emily"}  # never another user's


def test_unknown_user_loads_nothing_and_a_user_is_required(memory_file: Path) -> None:
    assert MemoryForgetterLoader(memory_file, "Nobody").load() == []
    for user in (None, ""):
        with pytest.raises(InvalidInputError, match="user"):
            MemoryForgetterLoader(memory_file, user)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="mode"):
        MemoryForgetterLoader(memory_file, "Emily", mode="sometimes")  # type: ignore[arg-type]


def test_from_the_store_it_matches_the_banks_own_pass(memory_file: Path, make_bank: Any) -> None:
    bank: MemoryBank = make_bank(forgetting={**PAPER_FORGETTING, "seed": 3, "daily_pass": False})
    import_data(bank, load_memory_file(memory_file))
    before = [(m.memory_id, m.archived) for m, _ in bank.memories("Emily")]
    result = as_loader(bank, "Emily", seed=3, now=NOW).forget()
    assert [(m.memory_id, m.archived) for m, _ in bank.memories("Emily")] == before  # read-only
    assert result.forgotten == bank.forget("Emily", now=NOW)["Emily"].forgotten
    assert as_loader(bank, "Nobody").load() == []


def test_write_back_to_the_store_archives(memory_file: Path, make_bank: Any) -> None:
    bank: MemoryBank = make_bank()
    import_data(bank, load_memory_file(memory_file))
    result = as_loader(bank, "Emily", seed=3, now=NOW, write_back=True).forget()
    archived = {m.memory_id for m, _ in bank.memories("Emily") if m.archived}
    assert archived == set(result.forgotten)


@pytest.mark.parametrize(("key", "asked"), [("Zoe\u0308", "Zo\u00eb"), ("Zoe\u0308", "Zoe\u0308"), ("Mary  Ann", "Mary Ann")])
def test_a_file_key_is_found_by_the_user_name_rule_as_import_finds_it(tmp_path: Path, key: str, asked: str) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps({key: {"name": key, "history": {"2023-05-01": [{"query": "hi", "response": "hey"}]}}}))
    docs = MemoryForgetterLoader(path, asked, mode="off", now=NOW).load()
    assert [d.page_content for d in docs] == ["hi\nhey"]
    with pytest.raises(InvalidInputError, match="tau must be a number of days"):
        MemoryForgetterLoader(path, asked, tau="1")  # type: ignore[arg-type]
