"""The answer evaluation with fake models: prompts, ablations, judge parsing, ranking, aggregation."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from memory_bank.embeddings import HashingEncoder
from memory_bank.errors import InvalidInputError
from memory_bank.evaluation.paper import attach_labels, load_labels, load_questions
from memory_bank.original_format import load_memory_file
from silicon_friend.evaluation.answers import AnswerSettings, run_answers
from silicon_friend.evaluation.judge import (
    PROMPTS,
    Judge,
    parse_ranking,
    parse_score,
    prompt_hash,
    ranks_from_scores,
)
from tests.conftest import REPO
from tests.silicon_friend.fakes import EchoChatModel

DATA = REPO / "eval_data" / "en"


class ScriptedJudge(BaseChatModel):
    """Answers by prompt kind: retrieval "1", correctness "0.5", coherence "Score: 1", ranking "B > A"."""

    _calls: list[str] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted-judge"

    @property
    def calls(self) -> list[str]:
        return self._calls

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        prompt = str(messages[-1].content)
        self.calls.append(prompt)
        if "Rank the replies" in prompt:
            text = "B > A"
        elif "retrieved memories contain" in prompt:
            text = "1"
        elif "reply's correctness against" in prompt:
            text = "0.5"
        else:
            text = "Score: 1"
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])


def test_parse_score_and_ranking() -> None:
    assert parse_score("0.5", (0.0, 0.5, 1.0)) == 0.5
    assert parse_score("Score: .5 because...", (0.0, 0.5, 1.0)) == 0.5
    assert parse_score("I'd say 1.0", (0.0, 0.5, 1.0)) == 1.0
    assert parse_score("0.5", (0.0, 1.0)) is None  # not allowed for retrieval
    assert parse_score("10 out of 10", (0.0, 1.0)) is None
    assert parse_score("", (0.0, 1.0)) is None
    assert parse_ranking("B > A > C", 3) == [1, 0, 2]
    assert parse_ranking("Best: [C], then [a], then B", 3) == [2, 0, 1]
    assert parse_ranking("B > A", 3) is None
    assert ranks_from_scores([(1.0, 1.0), (0.5, 1.0), (1.0, 1.0)]) == [1, 3, 1]


def test_judge_retries_once_then_gives_up() -> None:
    answers = iter(["hmm, good", "still thinking", "1"])
    seen: list[list[dict[str, str]]] = []

    def invoke(messages):  # type: ignore[no-untyped-def]
        seen.append(messages)
        return next(answers)

    judge = Judge(invoke, "en")
    j = judge.coherence("Hi", "Hello!")
    assert j.score is None and j.calls == 2 and judge.failures == 1
    assert "score only" in seen[1][-1]["content"]
    assert judge.retrieval("q", "a", ["m"]).score == 1.0


def test_prompts_are_versioned_in_both_languages() -> None:
    assert set(PROMPTS) == {"en", "zh"}
    for p in PROMPTS.values():
        assert "{question}" in p.correctness and "{answer}" in p.correctness and "{response}" in p.correctness
        assert "{memories}" in p.retrieval and "{replies}" in p.ranking
    assert len(prompt_hash()) == 12


def _questions(user: str) -> list:  # type: ignore[type-arg]
    qs = attach_labels(load_questions(DATA / "questions_en.jsonl"), load_labels(DATA / "labels_en.jsonl"))
    return [q for q in qs if q.user == user]


def test_run_answers_end_to_end_with_fakes() -> None:
    data = load_memory_file(DATA / "memories_en.json")
    questions = _questions("Sofia Lindqvist")[:3]  # absent (heap sort), multi, multi
    backbone = EchoChatModel(reply="We never wrote a heap sort, only merge sort and quicksort.")
    judge = ScriptedJudge()
    stages: list[tuple[str, int]] = []

    def progress(stage, total):  # type: ignore[no-untyped-def]
        stages.append((stage, total))
        return lambda n: None

    res = run_answers(
        data,
        questions,
        backbone=backbone,
        judge_model=judge,
        encoder=HashingEncoder(128),
        settings=AnswerSettings(systems=["memorybank", "no-memory", "no-portrait", "forgetting"], k=2),
        progress=progress,
    )
    assert [s for s, _ in stages] == ["answering", "judging"]
    recs = res["questions"]
    assert len(recs) == 3 and recs[0]["type"] == "absent"
    mb, nm = (recs[1]["systems"][n] for n in ("memorybank", "no-memory"))
    assert len(mb["memories"]) == 2 and nm["memories"] == []
    assert mb["response"].startswith("We never wrote")
    # The backbone saw the memories in its prompt for memorybank and none for no-memory.
    prompts = [str(c["messages"][0].content) for c in backbone.calls]
    assert any("merge sort" in p.lower() for p in prompts)
    # Paper forgetting (tau = 1 day) forgot most of a 12-day-old history before the questions.
    assert sum(res["info"]["forgotten"].values()) > 10
    assert mb["retrieval_accuracy"] == 1.0 and mb["correctness"] == 0.5 and mb["coherence"] == 1.0
    assert nm["retrieval_accuracy"] is None and recs[0]["systems"]["memorybank"]["retrieval_accuracy"] is None
    assert mb["evidence_hit"] in (0.0, 1.0) and recs[0]["systems"]["memorybank"]["evidence_hit"] is None
    # The judge ranked the shuffled replies "B > A"; with four systems that is unusable -> scores.
    assert all(r["rank_source"] == "scores" for r in recs)
    assert {r["systems"]["memorybank"]["rank"] for r in recs} == {1}  # all tied
    m = res["metrics"]["memorybank"]["all"]
    assert m["correctness"] == {"mean": 0.5, "n": 3} and m["retrieval_accuracy"]["n"] == 2
    assert res["judge"]["version"] == "judge-v1" and res["judge"]["failures"] == 0
    # Correctness and coherence for each (question, system); retrieval for the 2 labelled questions
    # of the 3 systems with memory; one ranking call per question.
    assert len(judge.calls) == 3 * 4 * 2 + 2 * 3 + 3


def test_ranking_from_the_judge_with_two_systems() -> None:
    data = load_memory_file(DATA / "memories_en.json")
    questions = _questions("Marcus Reid")[:2]
    res = run_answers(
        data,
        questions,
        backbone=EchoChatModel(),
        judge_model=ScriptedJudge(),
        encoder=HashingEncoder(128),
        settings=AnswerSettings(systems=["memorybank", "no-memory"]),
    )
    for r in res["questions"]:
        assert r["rank_source"] == "judge"
        order = r["ranking_order"]  # shuffled; the judge always puts the second shown first
        assert r["systems"][order[1]]["rank"] == 1 and r["systems"][order[0]]["ranking"] == 0.5


def test_summarised_layers_reach_the_prompt_and_ablations_drop_them() -> None:
    data = load_memory_file(DATA / "memories_en.json")
    questions = _questions("Tom Okafor")[:1]
    summary = "Tom is cheerful and competitive; he is planning his wedding and learning guitar in secret."
    backbone = EchoChatModel(reply=summary)
    res = run_answers(
        data,
        questions,
        backbone=backbone,
        judge_model=ScriptedJudge(),
        encoder=HashingEncoder(128),
        settings=AnswerSettings(systems=["memorybank", "no-portrait", "no-summaries"], summarize=True),
    )
    assert res["info"]["summaries"]["Tom Okafor"]["written"] > 0
    sys = res["questions"][0]["systems"]
    assert sys["memorybank"]["portrait_in_prompt"] and sys["memorybank"]["summary_in_prompt"]
    assert not sys["no-portrait"]["portrait_in_prompt"] and sys["no-portrait"]["summary_in_prompt"]
    assert not sys["no-summaries"]["summary_in_prompt"]
    assert all(m["kind"] == "turn" for m in sys["no-summaries"]["memories"])


def test_settings_are_checked() -> None:
    with pytest.raises(InvalidInputError, match="unknown systems"):
        AnswerSettings(systems=["memorybank", "gpt"]).check()
    data = load_memory_file(DATA / "memories_en.json")
    unlabelled = load_questions(DATA / "questions_en.jsonl")[:1]
    with pytest.raises(InvalidInputError, match="reference answer"):
        run_answers(
            data,
            unlabelled,
            backbone=EchoChatModel(),
            judge_model=ScriptedJudge(),
            encoder=HashingEncoder(64),
            settings=AnswerSettings(),
        )
