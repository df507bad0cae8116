"""Small hand-made files in the LoCoMo and LongMemEval formats, for fast tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest


def locomo_conversation() -> dict[str, Any]:
    """Two speakers, three sessions over four months, with the data's quirks."""
    s1 = [
        {"speaker": "Ana", "dia_id": "D1:1", "text": "Hi Ben! I adopted a greyhound called Comet yesterday."},
        {"speaker": "Ben", "dia_id": "D1:2", "text": "That's lovely! What colour is Comet?"},
        {
            "speaker": "Ana",
            "dia_id": "D1:3",
            "text": "Brindle, and very shy.",
            "img_url": ["x"],
            "blip_caption": "a photo of a brindle dog on a sofa",
        },
        {"speaker": "Ben", "dia_id": "D1:4", "text": "I started pottery classes on Tuesdays."},
    ]
    s2 = [
        {"speaker": "Ben", "dia_id": "D2:1", "text": "My pottery teacher says my bowls are too thick."},
        {"speaker": "Ana", "dia_id": "D2:2", "text": "I ran the city half marathon in 1:58!"},
        {"speaker": "Ben", "dia_id": "D2:3", "text": "Amazing time. Did Comet come to cheer?"},
    ]
    s3 = [
        {"speaker": "Ana", "dia_id": "D3:1", "text": "I'm moving to Lisbon for a new job in design."},
        {"speaker": "Ben", "dia_id": "D3:2", "text": "Lisbon! Will you take Comet with you?"},
        {"speaker": "Ana", "dia_id": "D3:3", "text": "Of course, greyhounds love warm weather."},
    ]
    return {
        "sample_id": "conv-test",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": s1,
            "session_2_date_time": "10:00 am on 20 June, 2023",
            "session_2": s2,
            "session_3_date_time": "7:30 pm on 2 September, 2023",
            "session_3": s3,
            "session_4_date_time": "8:00 pm on 3 September, 2023",
            "session_4": [],
        },
        "qa": [
            {
                "question": "What did Ana call the greyhound she adopted?",
                "answer": "Comet",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": "When did Ana adopt a greyhound?",
                "answer": "7 May 2023",
                "evidence": ["D1:1"],
                "category": 2,
            },
            {
                "question": "What does Ben do on Tuesdays and what did his teacher say?",
                "answer": "pottery",
                "evidence": ["D1:4; D2:1"],
                "category": 1,
            },
            {"question": "Where is Ana moving?", "answer": "Lisbon", "evidence": ["D:3:01"], "category": 4},
            {
                "question": "What would Ana enjoy in Lisbon?",
                "answer": "warm weather",
                "evidence": ["D3:3", "D"],
                "category": 3,
            },
            {
                "question": "What did Ben's dog eat?",
                "adversarial_answer": "nothing",
                "evidence": [],
                "category": 5,
            },
        ],
        "event_summary": {},
        "observation": {},
        "session_summary": {},
    }


def longmemeval_instances() -> list[dict[str, Any]]:
    return [
        {
            "question_id": "q1",
            "question_type": "single-session-user",
            "question": "What breed is my dog?",
            "answer": "A greyhound",
            "question_date": "2023/06/01 (Thu) 10:00",
            "haystack_session_ids": ["s_a", "answer_1", "s_b"],
            "haystack_dates": ["2023/05/01 (Mon) 09:00", "2023/05/10 (Wed) 18:30", "2023/05/20 (Sat) 12:00"],
            "haystack_sessions": [
                [
                    {"role": "user", "content": "Can you suggest a pasta recipe?"},
                    {"role": "assistant", "content": "Try spaghetti aglio e olio."},
                ],
                [
                    {"role": "user", "content": "I just adopted a greyhound!", "has_answer": True},
                    {"role": "assistant", "content": "Greyhounds are gentle dogs."},
                    {"role": "user", "content": "Any tips for walks?"},
                    {"role": "assistant", "content": "Short walks at first."},
                ],
                [
                    {"role": "assistant", "content": "Welcome back!"},
                    {"role": "user", "content": "What's the capital of Peru?"},
                    {"role": "assistant", "content": "Lima."},
                ],
            ],
            "answer_session_ids": ["answer_1"],
        },
        {
            "question_id": "q2_abs",
            "question_type": "single-session-user",
            "question": "What is my cat called?",
            "answer": "You never mentioned a cat.",
            "question_date": "2023/06/01 (Thu) 10:00",
            "haystack_session_ids": ["s_c"],
            "haystack_dates": ["2023/05/01 (Mon) 09:00"],
            "haystack_sessions": [
                [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi!"}]
            ],
            "answer_session_ids": [],
        },
    ]


@pytest.fixture
def locomo_file(tmp_path: Path) -> Path:
    p = tmp_path / "locomo_mini.json"
    p.write_text(json.dumps([locomo_conversation()]), encoding="utf-8")
    return p


@pytest.fixture
def lme_file(tmp_path: Path) -> Path:
    p = tmp_path / "lme_mini.json"
    p.write_text(json.dumps(longmemeval_instances()), encoding="utf-8")
    return p
