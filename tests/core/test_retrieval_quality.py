"""Retrieval quality on the paper's probing questions, with the real packaged encoders.

Evidence turns were labelled by this project (eval_data/paper_labels/). Targets from the
memory-core issue: an evidence turn in the top 3 for >= 95% of questions and in the top 2 for
>= 90%, in both languages, with the default settings (top-k aside).
"""

from __future__ import annotations

import pytest

from memory_bank import MemoryBank
from memory_bank.evaluation.paper import attach_labels, load_labels, load_questions, retrieve, score
from memory_bank.original_format import import_data, load_memory_file
from tests.conftest import REPO, paper_file


@pytest.mark.integration
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_evidence_in_top_2_and_top_3(tmp_path, lang) -> None:  # type: ignore[no-untyped-def]
    bank = MemoryBank.open(tmp_path / "store", language=lang)  # default encoder for the language
    import_data(bank, load_memory_file(paper_file(lang, "memory")))
    questions = attach_labels(
        load_questions(paper_file(lang, "questions")),
        load_labels(REPO / "eval_data" / "paper_labels" / f"probing_labels_{lang}.jsonl"),
    )
    assert len(questions) == 100
    rows = retrieve(bank, questions, 3, now="2023-05-07")
    # Every result belongs to the asking user.
    assert all(m["memory_id"].startswith(r["user"]) for r in rows for m in r["retrieved"])
    metrics = score(questions, rows, [2, 3])["all"]
    assert metrics["n"] >= 98
    assert metrics["hit@3"] >= 0.95, metrics
    assert metrics["hit@2"] >= 0.90, metrics
    bank.close()


@pytest.mark.integration
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_evidence_outranks_the_questions_asked_before(tmp_path, lang) -> None:  # type: ignore[no-untyped-def]
    """Asked a second time, after one round of useless answers stored as turns, the fact the user
    stated still comes before their earlier asking of the question (issue floor: hit@3 >= 90%)."""
    from memory_bank.evaluation.second_ask import USELESS_ANSWERS, asked_before

    questions = attach_labels(
        load_questions(paper_file(lang, "questions")),
        load_labels(REPO / "eval_data" / "paper_labels" / f"probing_labels_{lang}.jsonl"),
    )
    data = asked_before(load_memory_file(paper_file(lang, "memory")), questions, lang, "2023-05-07")
    bank = MemoryBank.open(tmp_path / "store", language=lang)
    import_data(bank, data)
    rows = retrieve(bank, questions, 3, now="2023-05-08")
    metrics = score(questions, rows, [3])["all"]
    assert metrics["hit@3"] >= 0.90, metrics
    # The earlier askings are in the store and are found, just below the evidence.
    asked = [m for r in rows for m in r["retrieved"] if m["date"] == "2023-05-07"]
    assert asked and all(any(a in m["text"] for a in USELESS_ANSWERS[lang]) for m in asked)
    bank.close()
