"""The "asked a second time" scenario: memory pollution by earlier questions and useless answers.

A store holds the user's own questions too. After a user has asked the probing questions once
and the companion could not answer ("I'm not sure, could you remind me?"), those question turns
are memories, and they resemble the question far more than the turn that holds the fact does.
:func:`asked_before` adds, for every user, one day of such turns (each of the user's questions,
in order, with a useless answer) to a memory file's data; the questions are then asked again on
the next day. The evidence turns are unchanged, so hit@k measures whether the fact still
outranks the earlier asking.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Sequence
from typing import Any

from memory_bank.evaluation.paper import Question

#: Replies that answer nothing, as a weak model gives them (cycled through, per language).
USELESS_ANSWERS: dict[str, tuple[str, ...]] = {
    "en": (
        "I'm not sure, could you remind me?",
        "Sorry, I don't remember that. Can you tell me again?",
        "Hmm, I can't recall. What was it?",
    ),
    "zh": (
        "我不太确定，你能提醒我一下吗？",
        "抱歉，我不记得了。你能再告诉我一次吗？",
        "嗯，我想不起来了。是什么呢？",
    ),
}


def asked_before(
    data: dict[str, Any], questions: Sequence[Question], language: str, day: str
) -> dict[str, Any]:
    """A copy of memory-file ``data`` where each user asked their ``questions`` on ``day`` and
    got a useless answer to each (one turn per question, stored like any chat turn)."""
    answers = USELESS_ANSWERS["zh" if language == "zh" else "en"]
    out = copy.deepcopy(data)
    keys = {k.strip(): k for k in out}
    for i, q in enumerate(questions):
        user = out[keys[q.user]]
        history = user.setdefault("history", {})
        history.setdefault(day, []).append({"query": q.question, "response": answers[i % len(answers)]})
    return out


def next_day(day: str) -> str:
    return (dt.date.fromisoformat(day[:10]) + dt.timedelta(days=1)).isoformat()
