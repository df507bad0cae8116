"""The forgetting sweep: data sets as replayed haystacks, one row per setting, report and resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_bank.cli import main
from memory_bank.embeddings import HashingEncoder
from memory_bank.errors import InvalidInputError
from memory_bank.evaluation import forgetting_sweep as fs
from memory_bank.evaluation.locomo import haystack, load_locomo

REPO = Path(__file__).resolve().parents[2]


def test_eval_data_becomes_haystacks_with_day_turn_ids() -> None:
    hays = fs.paper_haystacks(REPO / "eval_data/en/memories_en.json", REPO / "eval_data/en/labels_en.jsonl")
    assert len(hays) == 6 and sum(len(h.memories) for h in hays) == 122
    ids = {m.extra["id"] for h in hays for m in h.memories}
    for h in hays:
        assert h.now == "2024-03-16" or h.now > max(m.date for m in h.memories)
        for p in h.probes:
            assert p.evidence and set(p.evidence) <= ids  # "absent" questions are not asked
    assert sum(len(h.probes) for h in hays) == 54  # 60 questions, 6 about things that never happened


def test_sweep_rows_compare_settings_with_off(locomo_file, tmp_path) -> None:  # type: ignore[no-untyped-def]
    ds = fs.DataSet("mini", "en", [haystack(c) for c in load_locomo(locomo_file)])
    enc = HashingEncoder(256)
    out = tmp_path / "sweep.json"
    points = fs.pick_points("paper,threshold-90,cold-7-always")
    assert [p.name for p in points] == ["off", "paper", "threshold-90", "cold-7-always"]
    res = fs.sweep([ds], points, lambda _: enc, out, run={"command": "test"})
    rows = {r["point"]: r for r in res["sets"]["mini"]["rows"]}
    assert rows["off"]["share_forgotten"] == 0 and rows["off"]["live_memories"] == 10
    assert rows["paper"]["forgotten"] > 0  # tau 1 day over four months
    assert rows["paper"]["live_memories"] == 10 - rows["paper"]["forgotten"]
    assert rows["threshold-90"]["forgotten"] == 0
    assert rows["cold-7-always"]["cold_consulted"] > 0
    assert json.loads(out.read_text())["sets"]["mini"]["rows"][0]["point"] == "off"
    md = out.with_suffix(".md").read_text()
    assert "## mini" in md and "threshold-90" in md
    # --resume keeps what was measured and runs nothing again.
    again = fs.sweep([ds], points, lambda _: enc, out, run={}, resume=True)
    assert again["sets"]["mini"]["rows"] == res["sets"]["mini"]["rows"]


def test_best_point_is_the_largest_share_within_two_points() -> None:
    rows = [
        {"point": "off", "recall_at_10": 0.75, "share_forgotten": 0.0},
        {"point": "a", "recall_at_10": 0.74, "share_forgotten": 0.2},
        {"point": "b", "recall_at_10": 0.60, "share_forgotten": 0.6},
        {"point": "c", "recall_at_10": 0.731, "share_forgotten": 0.35},
    ]
    assert fs.best_point(rows)["point"] == "c"  # type: ignore[index]


def test_unknown_point_and_no_data_are_clear_errors(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidInputError, match="unknown sweep point"):
        fs.pick_points("tau-1000")
    assert main(["eval", "forgetting", "--out", str(tmp_path / "x.json")]) == 2
    assert "no data set given" in capsys.readouterr().err
