"""The harness's variant ranker reproduces the bank's ranking when its changes are off."""

from __future__ import annotations

import datetime as dt

from memory_bank.config import RetrievalConfig
from memory_bank.embeddings import HashingEncoder
from memory_bank.evaluation.paper import load_questions
from memory_bank.evaluation.variants import V2Settings, months_in, rank_memories
from memory_bank.original_format import load_memory_file, user_memories
from memory_bank.records import RETRIEVABLE_KINDS
from tests.conftest import REPO

DATA = REPO / "eval_data" / "en"


def test_months_in() -> None:
    assert months_in("What did Mel paint in July 2023?", (2023, 2022)) == {"2023-07"}
    assert months_in("Where did we go in May?", (2024, 2023)) == {"2024-05", "2023-05"}
    assert months_in("2023年6月我做了什么？5月4日呢？", (2023,)) == {"2023-06"}  # 5月4日 names a day
    assert months_in("May I ask something?", (2023,)) == set()


def test_bank_path_equals_bank_rank() -> None:
    data = load_memory_file(DATA / "memories_en.json")
    enc = HashingEncoder(128)
    # The bank's ranking with only the hints the variant also implements switched off.
    cfg = RetrievalConfig(
        **{k: 0.0 for k in ("day_weight", "month_weight") if k in RetrievalConfig.model_fields}
    )
    bank_like = V2Settings(own_text=False, own_weight=1.0, day_weight=0.0, month_weight=0.0)
    for q in load_questions(DATA / "questions_en.jsonl")[:20]:
        mems = [m for m in user_memories(q.user, data[q.user])[0] if m.kind in RETRIEVABLE_KINDS]
        now = dt.date(2024, 3, 20)
        a = rank_memories(mems, [q.question], enc, 5, cfg=cfg, v2=None, now=now)
        b = rank_memories(mems, [q.question], enc, 5, cfg=cfg, v2=bank_like, now=now)
        assert a == b, q.question
