"""Questions that count days back from today ("last Tuesday", "two weeks ago", "上周三") find
what was said on those days, not memories that merely use the same words."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    "turns, question, expected",
    [
        (
            [
                ("2023-06-13T20:00:00", "My boss praised my slides at the review."),  # last week's Tuesday
                ("2023-06-16T20:00:00", "I have a dentist appointment on Tuesday."),
                ("2023-06-18T20:00:00", "We watched a movie with friends."),
            ],
            "What did I tell you last Tuesday?",
            0,
        ),
        (
            [
                ("2023-06-07T09:00:00", "I finally booked the flight to Osaka."),  # two weeks ago
                ("2023-06-19T09:00:00", "These weeks fly by so fast."),
                ("2023-06-20T09:00:00", "I told you about it ago, remember?"),
            ],
            "What did I say two weeks ago?",
            0,
        ),
        (
            [
                ("2023-06-14T20:00:00", "老板表扬了我的报告。"),  # 上周三
                ("2023-06-17T20:00:00", "周末我们去爬山了，三个人一起。"),
                ("2023-06-19T20:00:00", "这周三要交报告，好紧张。"),
            ],
            "上周三我跟你说了什么？",
            0,
        ),
        (
            [
                ("2023-06-16T20:00:00", "我養了一隻小貓。"),  # 上週五 (Traditional)
                ("2023-06-20T20:00:00", "週五我們去看電影吧。"),
            ],
            "上週五我跟你說了什麼？",
            0,
        ),
    ],
)
def test_a_day_counted_back_finds_what_was_said_then(make_bank, turns, question, expected) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank(language="zh" if any("\u4e00" <= c <= "\u9fff" for c in question) else "en")
    ids = [bank.add_turn("Ann", text, "I see.", at=at).memory_id for at, text in turns]
    hits = bank.search("Ann", question, k=3, now="2023-06-21")
    assert hits[0].memory.memory_id == ids[expected], [h.memory.text for h in hits]


@pytest.mark.parametrize(
    "memory, distractor, question",
    [
        ("儿子换了手机号：139 0000 1234。", "我的手機壞了，只好用舊的。", "我兒子的手機號是多少？"),
        ("兒子換了手機號：139 0000 1234。", "我的手机坏了，只好用旧的。", "我儿子的手机号是多少？"),
    ],
)
def test_a_question_in_one_chinese_script_finds_a_memory_in_the_other(make_bank, memory, distractor, question) -> None:  # type: ignore[no-untyped-def]
    """A distractor in the question's own script shares one of its words (手机); the memory in the
    other script shares all of them (儿子, 手机号), but only once both are folded to one script."""
    bank = make_bank(language="zh")
    want = bank.add_turn("Ann", memory, "好的。", at="2023-06-10T20:00").memory_id
    bank.add_turn("Ann", distractor, "理财很重要。", at="2023-06-11T20:00")
    assert bank.search("Ann", question, k=1, now="2023-06-21")[0].memory.memory_id == want
