"""Selective forgetting: content weights, per-kind time scales, the cold tier and the explanation,
each with a fixed clock (and a fixed seed where a pass draws)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memory_bank import forgetting, salience
from memory_bank.errors import ConfigError
from memory_bank.records import MemoryKind

CALENDAR = {"mode": "paper", "tau": 10.0, "policy": "threshold", "threshold": 0.05, "daily_pass": False}


@pytest.mark.parametrize(
    ("text", "cls"),
    [
        ("Hi!", "small_talk"),
        ("Thanks so much, see you soon!", "small_talk"),
        ("Caroline: Bye, take care!", "small_talk"),
        ("谢谢你，晚安！", "small_talk"),
        ("I adopted a greyhound called Comet, she is shy and brindle.", "personal"),
        ("Melanie: My daughter starts school in Lisbon next month.", "personal"),
        ("我上周在大理报了木工课，每周六上午上课。", "personal"),
        ("What do you think about jazz festivals?", "chat"),
        ("今天天气不错", "chat"),
    ],
)
def test_content_class_in_english_and_chinese(text: str, cls: str) -> None:
    assert salience.content_class(text) == cls
    assert salience.content_weight(text) == salience.CONTENT_WEIGHTS[cls]


def test_time_scales_multiply_tau_by_kind_and_weight() -> None:
    scales = forgetting.time_scales(
        20.0, ["turn", "turn", "daily_summary"], np.array([0.25, 2.0, 1.0]), kind_scales={"daily_summary": 3}
    )
    assert np.asarray(scales).tolist() == [5.0, 40.0, 60.0]
    assert forgetting.time_scales(20.0) == 20.0
    r = forgetting.retention_array(np.array([5.0, 5.0]), np.array([1.0, 1.0]), tau=np.array([5.0, 10.0]))
    assert r.tolist() == pytest.approx([math.exp(-1), math.exp(-0.5)])


def test_forget_after_days_is_the_first_day_below_the_threshold() -> None:
    day = forgetting.forget_after_days(2, 10.0, threshold=0.05)
    assert day == math.floor(20 * math.log(20)) + 1  # 60
    assert forgetting.retention(day, 2, tau=10) < 0.05 <= forgetting.retention(day - 1, 2, tau=10)
    assert forgetting.forget_after_days(1, 10.0, mode="off") is None


def test_content_weights_make_small_talk_fade_first(make_bank, clock) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank(forgetting={**CALENDAR, "content_weights": True})
    bank.add_turn("Ann", "Hi there!", "Hello!", at="2023-05-01T09:00")
    bank.add_turn("Ann", "My sister Jo is moving to Lisbon for a design job.", "Exciting!", at="2023-05-01T09:01")
    bank.add_turn("Ann", "What is a good film tonight?", "Try Arrival.", at="2023-05-01T09:02")
    assert [m.weight for m in bank.history("Ann")] == [0.25, 2.0, 1.0]
    # tau 10: small talk goes after 2.5 * ln 20 (day 8), chat after day 30, personal after day 60.
    assert bank.forget("Ann", now="2023-05-09")["Ann"].forgotten == ["Ann_2023-05-01_0"]
    assert bank.forget("Ann", now="2023-05-31")["Ann"].forgotten == ["Ann_2023-05-01_2"]
    assert bank.forget("Ann", now="2023-06-29")["Ann"].forgotten == []
    assert bank.forget("Ann", now="2023-06-30")["Ann"].forgotten == ["Ann_2023-05-01_1"]


def test_without_content_weights_every_turn_keeps_the_calendar(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank(forgetting=CALENDAR)
    bank.add_turn("Ann", "Hi there!", "Hello!", at="2023-05-01T09:00")
    bank.add_turn("Ann", "My sister Jo is moving to Lisbon for a design job.", "Exciting!", at="2023-05-01T09:01")
    assert bank.forget("Ann", now="2023-05-30")["Ann"].forgotten == []
    assert len(bank.forget("Ann", now="2023-05-31")["Ann"].forgotten) == 2


def test_kind_scales_let_daily_summaries_outlive_turns(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank(forgetting={**CALENDAR, "kind_scales": {"daily_summary": 4}})
    bank.add_turn("Ann", "I planted tomatoes in the garden.", "Lovely!", at="2023-05-01T09:00")
    bank.set_layer("Ann", MemoryKind.DAILY_SUMMARY, "Ann planted tomatoes.", date="2023-05-01")
    assert bank.forget("Ann", now="2023-05-31")["Ann"].forgotten == ["Ann_2023-05-01_0"]
    assert bank.forget("Ann", now="2023-08-28")["Ann"].forgotten == []  # tau 40: day 120 (40 * ln 20 = 119.8)
    assert bank.forget("Ann", now="2023-08-29")["Ann"].forgotten == ["Ann_2023-05-01_summary"]


def test_kind_scales_are_validated(make_bank) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match="kind_scales"):
        make_bank(forgetting={"kind_scales": {"daily_summary": 0}})
    with pytest.raises(ConfigError, match="kind_scales"):
        make_bank(forgetting={"kind_scales": {"global_portrait": 2}})


def test_stochastic_passes_with_weights_are_reproducible(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    runs = []
    for i in range(2):
        bank = make_bank(
            tmp_path / f"s{i}",
            forgetting={"mode": "paper", "tau": 5.0, "seed": 11, "content_weights": True, "daily_pass": False},
        )
        for d in range(1, 21):
            bank.add_turn("Ann", f"My garden bed {d} has tomatoes and basil.", "Nice", at=f"2023-05-{d:02d}T09:00")
            bank.add_turn("Ann", "Thanks!", "", at=f"2023-05-{d:02d}T09:05")
        runs.append(bank.forget("Ann", now="2023-05-25")["Ann"].forgotten)
    assert runs[0] == runs[1] and runs[0]
    small = sum(m.endswith("_1") for m in runs[0])
    assert small > len(runs[0]) - small  # small talk goes first


def test_cold_tier_finds_forgotten_memories_and_a_recall_brings_them_back(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    cfg = {**CALENDAR, "cold_tier": True, "cold_below": 10.0}  # consult whenever the best live score < 10
    bank = make_bank(forgetting=cfg)
    bank.add_turn("Ann", "My cat is called Miso.", "Sweet name.", at="2023-05-01T09:00")
    bank.add_turn("Ann", "I started the cello in June.", "Great.", at="2023-06-20T09:00")
    assert bank.forget("Ann", now="2023-06-21")["Ann"].forgotten == ["Ann_2023-05-01_0"]
    hits = bank.search("Ann", "what is my cat called Miso", k=2, now="2023-06-21")
    assert hits[0].memory.memory_id == "Ann_2023-05-01_0" and hits[0].memory.archived
    assert bank.cold.consulted == 1
    bank.search("Ann", "what is my cat called Miso", k=1, now="2023-06-22", reinforce=True)
    back = {m.memory_id: m for m in bank.history("Ann")}
    assert "Ann_2023-05-01_0" in back and back["Ann_2023-05-01_0"].strength == 2

    off = make_bank(tmp_path / "plain", forgetting=CALENDAR)
    off.add_turn("Ann", "My cat is called Miso.", "Sweet name.", at="2023-05-01T09:00")
    off.add_turn("Ann", "I started the cello in June.", "Great.", at="2023-06-20T09:00")
    off.forget("Ann", now="2023-06-21")
    ids = [h.memory.memory_id for h in off.search("Ann", "what is my cat called Miso", k=2, now="2023-06-21")]
    assert "Ann_2023-05-01_0" not in ids  # without the cold tier a forgotten memory stays out


def test_cold_tier_is_skipped_when_the_live_tier_matches_well(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank(forgetting={**CALENDAR, "cold_tier": True, "cold_below": 0.0})
    bank.add_turn("Ann", "My cat is called Miso.", "Sweet name.", at="2023-05-01T09:00")
    bank.add_turn("Ann", "I started the cello in June.", "Great.", at="2023-06-20T09:00")
    bank.forget("Ann", now="2023-06-21")
    ids = [h.memory.memory_id for h in bank.search("Ann", "cat Miso", k=2, now="2023-06-21")]
    assert ids == ["Ann_2023-06-20_0"] and bank.cold.consulted == 0


def test_explain_says_why_a_memory_fades(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank(forgetting={**CALENDAR, "content_weights": True})
    bank.add_turn("Ann", "My sister Jo is moving to Lisbon for a design job.", "Exciting!", at="2023-05-01T09:00")
    bank.reinforce("Ann", ["Ann_2023-05-01_0"], now="2023-05-11")
    e = bank.explain("Ann", "Ann_2023-05-01_0", now="2023-05-21")
    assert e["recalls"] == 1 and e["strength"] == 2 and e["content_class"] == "personal"
    assert e["time_scale_days"] == 20.0 and e["anchor"] == "2023-05-11"
    assert e["retention"] == pytest.approx(math.exp(-10 / 40))
    assert e["forgets_on"] == "2023-09-08"  # 40 * ln 20 = 119.8 -> day 120 after the recall
    assert e["archived"] is False
    off = make_bank(tmp_path / "off")
    off.add_turn("Ann", "Hi!", "Hello!", at="2023-05-01T09:00")
    e = off.explain("Ann", "Ann_2023-05-01_0", now="2024-05-01")
    assert e["forgets_on"] is None and e["retention"] == 1.0
