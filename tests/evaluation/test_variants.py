"""The harness's variant ranker reproduces the bank's ranking when its changes are off."""

from __future__ import annotations

import datetime as dt

from memory_bank.config import RetrievalConfig
from memory_bank.embeddings import HashingEncoder
from memory_bank.evaluation.paper import load_questions
from memory_bank.evaluation.variants import V2Settings, rank_memories
from memory_bank.original_format import load_memory_file, user_memories
from memory_bank.records import RETRIEVABLE_KINDS
from tests.conftest import REPO

DATA = REPO / "eval_data" / "en"


def test_bank_path_equals_bank_rank() -> None:
    data = load_memory_file(DATA / "memories_en.json")
    enc = HashingEncoder(128)
    # The variant with the bank's vectors and the bank's hint weights: a loop-per-candidate
    # reference for the bank's vectorised day evidence and month hint.
    cfg = RetrievalConfig()
    bank_like = V2Settings(
        own_text=False, own_weight=1.0, day_weight=cfg.day_weight, day_top=cfg.day_top, month_weight=cfg.month_weight
    )
    for q in load_questions(DATA / "questions_en.jsonl"):
        mems = [m for m in user_memories(q.user, data[q.user])[0] if m.kind in RETRIEVABLE_KINDS]
        now = dt.date(2024, 3, 20)
        a = rank_memories(mems, [q.question], enc, 5, cfg=cfg, v2=None, now=now)
        b = rank_memories(mems, [q.question], enc, 5, cfg=cfg, v2=bank_like, now=now)
        assert a == b, q.question
