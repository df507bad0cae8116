"""The paper's probing questions and our labels: loaders, quirks of the published data, scoring."""

from __future__ import annotations

import json

import pytest

from memory_bank.errors import InvalidInputError
from memory_bank.evaluation.paper import (
    Question,
    attach_labels,
    check_users,
    default_now,
    load_labels,
    load_questions,
    metric_ks,
    score,
)
from memory_bank.original_format import load_memory_file, user_memories
from tests.conftest import REPO, paper_file

LABELS = REPO / "eval_data" / "paper_labels"


def test_questions_strip_user_keys_and_number_per_user(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "q.jsonl"
    p.write_text(
        json.dumps({" Jason ": ["What do I like?", "Where did I go?"]})
        + "\n\n"
        + json.dumps({"Ivy": ["Hi?"]})
        + "\n",
        encoding="utf-8",
    )
    qs = load_questions(p)
    assert [(q.user, q.qid, q.question) for q in qs] == [
        ("Jason", 0, "What do I like?"),
        ("Jason", 1, "Where did I go?"),
        ("Ivy", 0, "Hi?"),
    ]


@pytest.mark.parametrize(
    "content", ["not json\n", json.dumps(["a list"]) + "\n", json.dumps({"u": "not a list"}) + "\n"]
)
def test_malformed_questions_are_input_errors(tmp_path, content) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "q.jsonl"
    p.write_text(content, encoding="utf-8")
    with pytest.raises(InvalidInputError):
        load_questions(p)


def test_label_for_another_question_is_an_error() -> None:
    qs = [Question("Ann", 0, "What is my cat called?")]
    labels = {("Ann", 0): Question("Ann", 0, "Something else?", [("2023-01-01", 0)], "x", "single")}
    with pytest.raises(InvalidInputError, match="another question"):
        attach_labels(qs, labels)


def test_score_hand_made() -> None:
    qs = [
        Question("A", 0, "q0", [("d1", 0), ("d1", 1)], "x", "multi"),
        Question("A", 1, "q1", [("d2", 3)], "y", "single"),
        Question("A", 2, "q2", [], "no", "absent"),
    ]

    def ret(*items):  # type: ignore[no-untyped-def]
        return [{"kind": k, "date": d, "turn": t} for k, d, t in items]

    rows = [
        {
            "user": "A",
            "qid": 0,
            "retrieved": ret(("turn", "d1", 1), ("daily_summary", "d1", None), ("turn", "d1", 0)),
        },
        {"user": "A", "qid": 1, "retrieved": ret(("turn", "d2", 2), ("turn", "d2", 3))},
        {"user": "A", "qid": 2, "retrieved": ret(("turn", "d9", 0))},
    ]
    m = score(qs, rows, [1, 2])
    # Summaries are skipped when matching turns: q0's turns are at turn ranks 1 and 2.
    assert m["all"] == {"n": 2, "hit@1": 0.5, "recall@1": 0.25, "hit@2": 1.0, "recall@2": 1.0}
    assert m["multi"]["recall@1"] == 0.5 and m["single"]["hit@1"] == 0.0
    assert "absent" not in m


def test_metric_ks_and_default_now() -> None:
    assert metric_ks(3) == [1, 2, 3]
    assert metric_ks(7) == [1, 2, 3, 5, 7]
    data = {"u": {"history": {"2023-04-27": [], "2023-05-06": []}}}
    assert default_now(data) == "2023-05-07"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_published_data_and_our_labels_line_up(lang) -> None:  # type: ignore[no-untyped-def]
    data = load_memory_file(paper_file(lang, "memory"))
    qs = load_questions(paper_file(lang, "questions"))
    assert len(qs) == 100 and len(data) == 15
    check_users(qs, data, "probing questions")  # every asking user (keys stripped) has memories
    labels = load_labels(LABELS / f"probing_labels_{lang}.jsonl")
    attach_labels(qs, labels)
    assert all(q.type is not None for q in qs)
    keys = {k.strip(): k for k in data}
    for q in qs:  # every evidence turn exists in the memory file
        for day, turn in q.evidence:
            assert turn < len(data[keys[q.user]]["history"][day]), (q.user, q.qid)


def test_published_english_quirks() -> None:
    data = load_memory_file(paper_file("en", "memory"))
    assert {" Jason ", " Linda", " Ivy ", " Roland "} <= set(data)
    empty = [(u, d) for u, v in data.items() for d, turns in v["history"].items() if not turns]
    assert [u.strip() for u, _ in empty] == ["John Zhang"]
    _, extra = user_memories("John Zhang", data["John Zhang"])
    assert len(extra["days"]) == len(data["John Zhang"]["history"])  # the empty day is kept
    assert default_now(data) == "2023-05-07"
