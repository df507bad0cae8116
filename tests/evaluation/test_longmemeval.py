"""The LongMemEval loader, on a small file of the same schema."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from memory_bank.errors import InvalidInputError
from memory_bank.evaluation.benchmark import BM25System, evaluate
from memory_bank.evaluation.longmemeval import haystacks, load_longmemeval, parse_lme_date


def test_dates() -> None:
    assert parse_lme_date("2023/05/20 (Sat) 02:21") == dt.datetime(2023, 5, 20, 2, 21)
    assert parse_lme_date("2023/05/20") == dt.datetime(2023, 5, 20)
    assert parse_lme_date("2023-05-20T08:00") == dt.datetime(2023, 5, 20, 8, 0)
    with pytest.raises(InvalidInputError):
        parse_lme_date("last Tuesday")


def test_instances_become_haystacks(lme_file) -> None:  # type: ignore[no-untyped-def]
    instances = load_longmemeval(lme_file)
    assert [i.question_id for i in instances] == ["q1", "q2_abs"]
    assert instances[1].abstention and not instances[0].abstention
    hays = haystacks(instances)
    assert len(hays) == 1  # abstention questions are left out by default
    (hay,) = hays
    assert hay.user == "q1" and hay.now == "2023-06-01"
    ids = [m.extra["id"] for m in hay.memories]
    assert ids == ["s_a:0", "answer_1:0", "answer_1:1", "s_b:0", "s_b:1"]
    dog = hay.memories[1]
    assert (dog.query, dog.response, dog.date, dog.turn) == (
        "I just adopted a greyhound!",
        "Greyhounds are gentle dogs.",
        "2023-05-10",
        0,
    )
    assert hay.memories[3].query == "" and hay.memories[3].text == "Welcome back!"  # a reply with no message
    (probe,) = hay.probes
    assert probe.evidence == ["answer_1:0"] and probe.sessions == ["answer_1"]
    assert probe.category == "single-session-user"
    assert len(haystacks(instances, include_abstention=True)) == 2


def test_retrieval_on_it(lme_file) -> None:  # type: ignore[no-untyped-def]
    metrics, ranked = evaluate(haystacks(load_longmemeval(lme_file)), [BM25System()], [1, 5])
    assert ranked["bm25"]["q1"]["q1"][0] == "answer_1:0"
    assert metrics["bm25"]["turn_recall"]["all"]["1"] == 1.0
    assert metrics["bm25"]["session_recall"]["all"]["1"] == 1.0


def test_malformed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "bad.json"
    item = {
        "question_id": "x",
        "question": "?",
        "haystack_session_ids": ["a", "b"],
        "haystack_dates": ["2023/01/01"],
        "haystack_sessions": [[]],
    }
    p.write_text(json.dumps([item]), encoding="utf-8")
    with pytest.raises(InvalidInputError, match="differ in length"):
        load_longmemeval(p)
    p.write_text(json.dumps({"not": "a list"}), encoding="utf-8")
    with pytest.raises(InvalidInputError, match="list of instances"):
        load_longmemeval(p)
