"""What the user said outranks what they asked before (issue: memory pollution by earlier questions).

A store holds the user's questions too. When the companion could not answer ("could you remind
me?") or guessed, those turns resemble the next asking of the question far more than the turn
holding the fact; the echo and unanswered terms of the ranking let the fact win.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from memory_bank.index import Partition
from memory_bank.retrieval.terms import echo_penalty
from memory_bank.stores import VectorBatch
from memory_bank.text import tokenize


def _partition(turns: list[tuple[str, str]]) -> Partition:
    part = Partition(4)
    n = len(turns)
    part.add(
        VectorBatch(
            np.arange(1, n + 1, dtype=np.int64),
            np.eye(n, 4, dtype=np.float32),
            [f"{q}\n{r}" for q, r in turns],
            ["turn"] * n,
            ["2024-05-01"] * n,
            list(range(n)),
            [q for q, _ in turns],
            [r for _, r in turns],
        )
    )
    return part


def test_echo_measures_how_far_the_users_words_repeat_the_query() -> None:
    part = _partition(
        [
            ("My cat is called Mimi.", "What a sweet name!"),
            ("What is my cat called?", "I'm not sure, could you remind me?"),
            ("我的猫叫什么名字？", "我不太确定，你能提醒我一下吗？"),
        ]
    )
    en = part.echo(np.arange(3), tokenize("What is my cat called?"))
    assert en[1] == 1.0 and en[0] == 0.0 and en[2] == 0.0  # a statement is what is sought: no echo
    assert part.echo(np.arange(3), tokenize("My cat is called Mimi."))[0] == 0.0
    zh = part.echo(np.arange(3), tokenize("我的猫叫什么名字？"))
    assert zh[2] == 1.0 and zh[0] == 0.0
    assert part.echo(np.arange(3), []).tolist() == [0.0, 0.0, 0.0]
    assert echo_penalty(np.array([0.2, 0.5, 0.75, 1.0]), 0.5).tolist() == [0.0, 0.0, 0.5, 1.0]


def test_a_question_answered_by_a_question_is_flagged() -> None:
    part = _partition(
        [
            ("What is my cat called?", "I'm not sure, could you remind me?"),
            ("Can you recommend a sci-fi film?", "The Wandering Earth: stunning visuals."),
            ("I adopted a cat today.", "Lovely! What is her name?"),
            ("我骑车的时候受伤了吗？", "抱歉，我不记得了。你能再告诉我一次吗？"),
        ]
    )
    assert part.unanswered(np.arange(4)).tolist() == [True, False, False, True]


@pytest.mark.parametrize(
    ("fact", "question", "non_answer"),
    [
        ("My cat is called Mimi, she is a grey tabby.", "What is my cat called?", "I'm not sure, could you remind me?"),
        ("我的猫叫咪咪，是一只灰色的虎斑猫。", "我的猫叫什么名字？", "我不太确定，你能提醒我一下吗？"),
    ],
)
def test_the_fact_outranks_earlier_askings_of_the_question(
    make_bank: Any, clock: Any, tmp_path: Any, fact: str, question: str, non_answer: str
) -> None:
    bank = make_bank()
    bank.add_turn("ann", fact, "What a lovely cat!")
    clock.advance(days=3)
    for _ in range(3):  # asked three times, never answered
        bank.add_turn("ann", question, non_answer)
    clock.advance(days=1)
    top = bank.search("ann", question, 3)
    assert top[0].memory.text.startswith(fact), [r.memory.text for r in top]
    # Off, the earlier askings win: the terms are what makes the difference.
    plain = make_bank(tmp_path / "plain", retrieval={"echo_weight": 0.0, "unanswered_weight": 0.0})
    plain.add_turn("ann", fact, "What a lovely cat!")
    for _ in range(3):
        plain.add_turn("ann", question, non_answer)
    assert not plain.search("ann", question, 1)[0].memory.text.startswith(fact)
