"""Selective forgetting: content weights, per-kind time scales, the cold tier and the explanation,
each with a fixed clock (and a fixed seed where a pass draws)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memory_bank import Explanation, forgetting, salience
from memory_bank.config import CALENDAR_ONLY, SELECTIVE_FORGETTING
from memory_bank.errors import ConfigError, InvalidInputError, MemoryNotFoundError
from memory_bank.records import MemoryKind

CALENDAR = {
    "mode": "paper",
    "tau": 10.0,
    "policy": "threshold",
    "threshold": 0.05,
    "daily_pass": False,
    **CALENDAR_ONLY,
}
OFF = {"mode": "off"}


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
    assert isinstance(e, Explanation)
    assert e.recalls == 1 and e.strength == 2 and e.content_class == "personal"
    assert e.time_scale_days == 20.0 and e.anchor == "2023-05-11" and e.days_since == 10
    assert e.retention == pytest.approx(math.exp(-10 / 40))
    assert e.forgets_on == "2023-09-08"  # 40 * ln 20 = 119.8 -> day 120 after the recall
    assert e.archived is False and e.status == "strong"
    assert e.reason("en") == (
        "strong: recalled on 1 days, last 10 days ago; about the user's life (time scale 20 days); "
        "forgotten on 2023-09-08 unless recalled"
    )
    assert e.reason("zh") == (
        "牢固：在1天里被回忆过，最近一次在10天前；关于用户生活（时间尺度20天）；若不再回忆，将于2023-09-08遗忘"
    )
    assert e.to_dict()["reason"]["zh"] == e.reason("zh")
    with pytest.raises(InvalidInputError, match="use one of en, zh"):
        e.reason("fr")
    off = make_bank(tmp_path / "off", forgetting=OFF)
    off.add_turn("Ann", "Hi!", "Hello!", at="2023-05-01T09:00")
    e = off.explain("Ann", "Ann_2023-05-01_0", now="2024-05-01")
    assert e.forgets_on is None and e.retention == 1.0 and e.status == "kept"
    assert e.reason("en") == "kept: forgetting is off" and e.reason("zh") == "保留：遗忘已关闭"


def test_explanations_cover_every_memory_with_its_state(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank(forgetting={**CALENDAR, "content_weights": True, "kind_scales": {"daily_summary": 4}})
    bank.add_turn("Ann", "Hi there!", "Hello!", at="2023-05-01T09:00")
    bank.add_turn("Ann", "My sister Jo is moving to Lisbon for a design job.", "Exciting!", at="2023-05-01T09:01")
    bank.set_layer("Ann", MemoryKind.DAILY_SUMMARY, "Ann's sister moves to Lisbon.", date="2023-05-01")
    bank.set_layer("Ann", MemoryKind.GLOBAL_PORTRAIT, "Ann is close to her sister.")
    bank.forget("Ann", now="2023-05-09")  # small talk (tau 2.5) is gone after day 7
    by_id = {e.memory_id: e for e in bank.explanations("Ann", now="2023-05-21")}
    small, personal = by_id["Ann_2023-05-01_0"], by_id["Ann_2023-05-01_1"]
    assert (small.status, small.archived, small.content_class) == ("forgotten", True, "small_talk")
    assert small.reason("en") == (
        "forgotten: learned 20 days ago, never recalled; small talk (time scale 2.5 days); "
        "restore it to bring it back"
    )
    assert small.reason("zh") == "已遗忘：20天前记下，从未回忆；闲聊（时间尺度2.5天）；可恢复"
    # personal: tau 20, R = exp(-20 / 20) = 0.37 < 0.5
    assert personal.status == "fading" and personal.retention == pytest.approx(math.exp(-1))
    assert personal.reason("en").startswith("fading: learned 20 days ago, never recalled; about the user's life")
    summary = by_id["Ann_2023-05-01_summary"]
    assert (summary.kind, summary.kind_scale, summary.time_scale_days, summary.status) == (
        "daily_summary",
        4.0,
        40.0,
        "strong",
    )
    assert "a daily summary (time scale 40 days)" in summary.reason("en")
    portrait = next(e for e in by_id.values() if e.kind == "global_portrait")
    assert portrait.status == "kept" and "never fade" in portrait.reason("en")
    assert len(bank.explanations("Ann", include_archived=False, now="2023-05-21")) == len(by_id) - 1


def test_a_memory_the_clock_has_forgotten_is_explained_as_forgotten_before_any_pass(make_bank) -> None:  # type: ignore[no-untyped-def]
    """Without a pass since (the README's own example), a memory whose day to be forgotten was
    behind ``now`` was explained as "fading ... forgotten on <a past day> unless recalled",
    while a search at that ``now`` already leaves it out of the live tier."""
    bank = make_bank(forgetting={**CALENDAR, "content_weights": True, "daily_pass": False})
    bank.add_turn("Ann", "Hi there!", "Hello!", at="2023-05-01T09:00")
    small = bank.explain("Ann", "Ann_2023-05-01_0", now="2023-05-21")
    assert (small.status, small.archived) == ("forgotten", False)
    assert small.reason("en").startswith("forgotten: learned 20 days ago")
    assert bank.explain("Ann", "Ann_2023-05-01_0", now="2023-05-02").status == "strong"


def test_restore_counts_as_a_recall_so_the_next_pass_keeps_it(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank(forgetting=CALENDAR)
    bank.add_turn("Ann", "My cat is called Miso.", "Sweet name.", at="2023-05-01T09:00")
    assert bank.forget("Ann", now="2023-06-01")["Ann"].forgotten == ["Ann_2023-05-01_0"]
    bank.restore("Ann", ["Ann_2023-05-01_0"], now="2023-06-02")
    e = bank.explain("Ann", "Ann_2023-05-01_0", now="2023-06-03")
    assert (e.archived, e.strength, e.anchor, e.status) == (False, 2, "2023-06-02", "strong")
    assert bank.forget("Ann", now="2023-06-03")["Ann"].forgotten == []
    with pytest.raises(MemoryNotFoundError, match="Ann_2023-05-01_9"):
        bank.restore("Ann", ["Ann_2023-05-01_0", "Ann_2023-05-01_9"])


JOINT = {**CALENDAR, "cold_tier": True, "cold_below": 10.0, "cold_rank": "joint"}


def _twins(bank) -> None:  # type: ignore[no-untyped-def]
    """The same words twice: an old memory that will be forgotten and a recent one that stays."""
    bank.add_turn("Ann", "My cat Miso likes tuna.", "Sweet.", at="2023-05-01T09:00")
    bank.add_turn("Ann", "I started the cello in June.", "Great.", at="2023-06-20T09:00")
    bank.add_turn("Ann", "My cat Miso likes tuna.", "Sweet.", at="2023-06-20T09:01")
    assert bank.forget("Ann", now="2023-06-21")["Ann"].forgotten == ["Ann_2023-05-01_0"]


def test_joint_cold_ranking_takes_the_penalty_off_forgotten_memories(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank(forgetting={**JOINT, "cold_penalty": 0.25})
    _twins(bank)
    hits = bank.search("Ann", "Miso tuna", k=3, now="2023-06-21")
    assert [h.memory.memory_id for h in hits][:2] == ["Ann_2023-06-20_1", "Ann_2023-05-01_0"]
    assert hits[1].memory.archived and bank.cold.consulted == 1 and bank.cold.found == 1
    # The forgotten twin scores the penalty less, and so does its day's evidence (it is alone on
    # its day: day_weight 0.15 of its own score); the live twin is untouched.
    plain = make_bank(tmp_path / "plain", forgetting={**JOINT, "cold_penalty": 0.0})
    _twins(plain)
    twins = [h for h in plain.search("Ann", "Miso tuna", k=3, now="2023-06-21") if "Miso" in h.memory.text]
    diff = {h.memory.memory_id: h.score for h in twins}
    penalised = {h.memory.memory_id: h.score for h in hits if "Miso" in h.memory.text}
    assert penalised["Ann_2023-05-01_0"] == pytest.approx(diff["Ann_2023-05-01_0"] - 0.25 * 1.15, abs=1e-5)
    assert penalised["Ann_2023-06-20_1"] == pytest.approx(diff["Ann_2023-06-20_1"], abs=1e-5)


def test_joint_cold_ranking_scores_like_forgetting_off_without_a_penalty(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """One candidate set: with no penalty, the scores are those of an index that forgot nothing
    (BM25 normalised over both tiers, neighbours and day evidence across them)."""
    joint = make_bank(forgetting={**JOINT, "cold_penalty": 0.0})
    separate = make_bank(tmp_path / "separate", forgetting={**JOINT, "cold_rank": "separate"})
    off = make_bank(tmp_path / "off", forgetting=OFF)
    for b in (joint, separate, off):
        _twins(b) if b is not off else None
    for when, q, r in (
        ("2023-05-01T09:00", "My cat Miso likes tuna.", "Sweet."),
        ("2023-06-20T09:00", "I started the cello in June.", "Great."),
        ("2023-06-20T09:01", "My cat Miso likes tuna.", "Sweet."),
    ):
        off.add_turn("Ann", q, r, at=when)

    def ranking(b) -> list[tuple[str, float]]:  # type: ignore[no-untyped-def]
        return [(h.memory.memory_id, round(h.score, 5)) for h in b.search("Ann", "cello tuna", k=3, now="2023-06-21")]

    assert ranking(joint) == ranking(off)
    assert ranking(separate) != ranking(off)


def test_cold_rank_is_validated(make_bank) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match="cold_rank"):
        make_bank(forgetting={"cold_rank": "both"})
    with pytest.raises(ConfigError, match="cold_penalty"):
        make_bank(forgetting={"cold_penalty": -1})


def test_the_selective_setting_forgets_and_loses_nothing(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """SELECTIVE_FORGETTING (configs/forgetting.yaml): tau 7 x content weight, threshold 0.05,
    the cold tier ranked jointly on every search."""
    bank = make_bank(forgetting=SELECTIVE_FORGETTING)
    bank.add_turn("Ann", "Thanks, bye!", "Bye!", at="2023-05-01T09:00")
    bank.add_turn("Ann", "My cat Miso likes tuna.", "Sweet.", at="2023-05-01T09:01")
    # Day 60: both are below 0.05 (small talk after 5 days, personal after 42): a search finds
    # them forgotten by the clock (writing nothing) and still ranks them, 0.05 lower.
    hits = bank.search("Ann", "what does Miso like", k=2, now="2023-06-30")
    assert hits[0].memory.memory_id == "Ann_2023-05-01_1" and hits[0].memory.archived
    assert not any(m.archived for m, _ in bank.memories("Ann"))  # nothing persisted by a search
    assert bank.cold.consulted == 1
    bank.forget("Ann", now="2023-06-30")  # the day's pass persists what the clock decided
    assert all(m.archived for m, _ in bank.memories("Ann"))  # every live memory gone, none lost
    assert [(h.memory.memory_id, h.score) for h in bank.search("Ann", "what does Miso like", k=2, now="2023-06-30")] == [
        (h.memory.memory_id, h.score) for h in hits
    ]
    bank.search("Ann", "what does Miso like", k=1, now="2023-07-01", reinforce=True)
    assert bank.explain("Ann", "Ann_2023-05-01_1", now="2023-07-01").status == "strong"  # recalled: back
    # Always consulted with cold_below .inf (no separate live ranking) or a huge finite gate
    # (live ranking first): the same ranking.
    rankings = []
    for name, below in (("inf", float("inf")), ("gated", 1e9)):
        b = make_bank(tmp_path / name, forgetting={**SELECTIVE_FORGETTING, "cold_below": below})
        b.add_turn("Ann", "Thanks, bye!", "Bye!", at="2023-05-01T09:00")
        b.add_turn("Ann", "My cat Miso likes tuna.", "Sweet.", at="2023-05-01T09:01")
        b.add_turn("Ann", "I play the cello on Sundays.", "Lovely.", at="2023-06-29T10:00")
        assert len(b.forget("Ann", now="2023-06-30")["Ann"].forgotten) == 2
        hits = b.search("Ann", "cello or tuna", k=3, now="2023-06-30")
        rankings.append([(h.memory.memory_id, h.memory.archived, round(h.score, 5)) for h in hits])
    assert rankings[0] == rankings[1] and len(rankings[0]) == 3
    off = make_bank(tmp_path / "off", forgetting={**SELECTIVE_FORGETTING, **OFF})  # off: one setting away
    off.add_turn("Ann", "Thanks, bye!", "Bye!", at="2023-05-01T09:00")
    off.search("Ann", "bye", now="2024-05-01")
    assert not any(m.archived for m, _ in off.memories("Ann")) and off.cold.consulted == 0
    default = make_bank(tmp_path / "default").config.forgetting  # the default is this setting
    assert {k: getattr(default, k) for k in SELECTIVE_FORGETTING} == SELECTIVE_FORGETTING


def test_under_the_stochastic_policy_only_the_pass_calls_a_memory_forgotten(make_bank) -> None:  # type: ignore[no-untyped-def]
    """The stochastic policy's day is the one its odds turn, not the one it goes: a memory the
    day's pass kept (a search ranks it live) was explained as "forgotten ... restore it"."""
    bank = make_bank(forgetting={**CALENDAR, "policy": "stochastic", "daily_pass": False})
    bank.add_turn("Ann", "Hi there!", "Hello!", at="2023-05-01T09:00")
    late = bank.explain("Ann", "Ann_2023-05-01_0", now="2023-05-21")
    assert (late.status, late.archived) == ("fading", False) and late.retention < 0.5
    assert late.reason("en").endswith("more likely forgotten than kept by each day's pass from 2023-05-08 unless recalled")
    assert late.reason("zh").endswith("若不再回忆，从2023-05-08起每天的遗忘更可能忘掉它")

