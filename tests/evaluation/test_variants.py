"""Ranking changes under measurement are terms on the bank's pipeline, not copies of it."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pytest

from memory_bank import MemoryBank
from memory_bank.embeddings import HashingEncoder
from memory_bank.evaluation.paper import load_questions
from memory_bank.evaluation.variants import PROPOSALS, ComposedDense, Proposal, rank_memories
from memory_bank.index import Partition
from memory_bank.original_format import import_data, load_memory_file, user_memories
from memory_bank.records import RETRIEVABLE_KINDS
from memory_bank.retrieval import Context, DayEvidence, NeighbourLift, Query
from memory_bank.stores import VectorBatch
from tests.conftest import REPO

DATA = REPO / "eval_data" / "en"


def test_composed_dense_follows_its_definition() -> None:
    """own_weight * cos(q, v) + (1 - own_weight) * cos(q, normalise(v + v_prev))."""
    e = np.eye(4, dtype=np.float32)
    vectors = np.stack([e[0], e[1], e[2], e[0]])  # turns 0, 1, 2 of one day, then a summary
    part = Partition(4)
    part.add(
        VectorBatch(
            np.arange(1, 5),
            vectors,
            ["a", "b", "c", "d"],
            ["turn", "turn", "turn", "daily_summary"],
            ["2023-05-01"] * 4,
            [0, 1, 2, None],
        )
    )
    ctx = Context(part, Query.parse(part, "q", e[0]))
    got = ComposedDense(1.0, own_weight=0.25).score(ctx, np.arange(4))
    # turn 0: no previous turn, cos 1 both ways; turn 1: own 0, in context cos(e0, (e0+e1)/sqrt2);
    # turn 2: own 0, in context cos(e0, (e1+e2)/sqrt2) = 0; the summary has no previous turn.
    expected = [1.0, 0.75 / math.sqrt(2), 0.0, 1.0]
    assert got.dtype == np.float32
    assert got.tolist() == pytest.approx(expected, abs=1e-7)
    assert ComposedDense(1.0, own_weight=1.0).score(ctx, np.arange(4)).tolist() == [1.0, 0.0, 0.0, 1.0]


def test_proposed_v2_is_the_bank_pipeline_with_another_dense_term() -> None:
    proposal = PROPOSALS["proposed-v2"]
    pipeline = proposal.pipeline(proposal.config())
    assert [t.name for t in pipeline.terms] == ["dense", "lexical", "named_day", "named_month", "echo", "unanswered"]
    assert pipeline.terms[0] == ComposedDense(1.0, own_weight=0.5)
    assert [t.weight for t in pipeline.terms[1:]] == [0.5, 0.5, 0.3, 1.0, 0.2]
    assert pipeline.stages == (DayEvidence(0.5, 3), NeighbourLift(0.3, 0.3))
    assert proposal.own_text


def test_proposal_with_its_changes_off_ranks_like_the_bank(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The harness's partitions (no store) and a proposal with the bank's vectors, weights and
    dense term give what a real MemoryBank's search gives."""
    data = load_memory_file(DATA / "memories_en.json")
    enc = HashingEncoder(128)
    # The harness ranks without forgetting; imported turns have content weights, so the bank's
    # default (selective) forgetting would leave some out by ``now``.
    bank = MemoryBank.open(tmp_path / "store", encoder_instance=enc, forgetting={"mode": "off"})
    import_data(bank, data)
    off = Proposal({}, own_text=False, own_weight=1.0, summary="the bank")
    now = dt.date(2024, 3, 20)
    questions = load_questions(DATA / "questions_en.jsonl")
    for user in dict.fromkeys(q.user for q in questions):
        asked = [q.question for q in questions if q.user == user]
        mems = [m for m in user_memories(user, data[user])[0] if m.kind in RETRIEVABLE_KINDS]
        ranked = rank_memories(mems, asked, enc, 5, proposal=off, now=now)
        assert ranked == rank_memories(mems, asked, enc, 5, proposal=None, now=now)
        for question, idx in zip(asked, ranked, strict=True):
            hits = bank.search(user, question, 5, now=now)
            assert [mems[i].memory_id for i in idx] == [h.memory.memory_id for h in hits], question
    bank.close()
