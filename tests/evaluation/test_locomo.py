"""LoCoMo: loader, evidence normalisation, the mapping to MemoryBank turns, systems, forgetting replay."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from memory_bank.config import CALENDAR_ONLY
from memory_bank.embeddings import HashingEncoder
from memory_bank.errors import InvalidInputError
from memory_bank.evaluation.benchmark import BM25System, DenseSystem, MemoryBankSystem, evaluate
from memory_bank.evaluation.locomo import (
    conversation_memories,
    haystack,
    load_locomo,
    normalise_evidence,
    parse_conversation,
    parse_session_time,
)
from tests.conftest import LOCOMO_DEV
from tests.evaluation.conftest import locomo_conversation


@pytest.mark.parametrize(
    ("raw", "ids"),
    [
        (["D8:6; D9:17"], ["D8:6", "D9:17"]),
        (["D:11:26"], ["D11:26"]),
        (["D30:05"], ["D30:5"]),
        (["D"], ["D"]),
        ("D1:3 D1:4", ["D1:3", "D1:4"]),
        (["D2:1", "D2:01"], ["D2:1"]),
        (None, []),
    ],
)
def test_normalise_evidence(raw, ids) -> None:  # type: ignore[no-untyped-def]
    assert normalise_evidence(raw) == ids


def test_session_time() -> None:
    assert parse_session_time("1:56 pm on 8 May, 2023") == dt.datetime(2023, 5, 8, 13, 56)
    assert parse_session_time("12:06 am on 11 November, 2022") == dt.datetime(2022, 11, 11, 0, 6)
    assert parse_session_time("12:30 pm on 1 Jan, 2024") == dt.datetime(2024, 1, 1, 12, 30)
    with pytest.raises(InvalidInputError):
        parse_session_time("sometime in May")


def test_conversation_becomes_turns_and_questions(locomo_file) -> None:  # type: ignore[no-untyped-def]
    (conv,) = load_locomo(locomo_file)
    assert conv.speakers == ("Ana", "Ben") and len(conv.sessions) == 3  # the empty session is skipped
    assert conv.last_date == "2023-09-02"
    mems = conversation_memories(conv, "conv-test")
    assert [m.extra["id"] for m in mems[:3]] == ["D1:1", "D1:2", "D1:3"]
    assert mems[0].text == "Ana: Hi Ben! I adopted a greyhound called Comet yesterday."
    assert mems[0].response == "" and mems[0].context is None
    assert mems[1].context == mems[0].text  # indexed after the utterance it answers
    assert mems[2].text.endswith("[image: a photo of a brindle dog on a sofa]")
    assert (mems[4].date, mems[4].turn, mems[4].context) == ("2023-06-20", 0, None)
    assert mems[4].memory_id == "conv-test_2023-06-20_0"
    hay = haystack(conv)
    assert [p.category for p in hay.probes] == ["4", "2", "1", "4", "3"]  # category 5 left out
    assert hay.probes[2].evidence == ["D1:4", "D2:1"] and hay.probes[2].sessions == ["1", "2"]
    assert hay.probes[3].evidence == ["D3:1"]
    assert hay.probes[4].evidence == ["D3:3", "D"] and hay.probes[4].sessions == ["3"]  # "D" matches nothing


def test_two_sessions_on_one_day_number_turns_on() -> None:
    item = locomo_conversation()
    item["conversation"]["session_2_date_time"] = "9:00 pm on 8 May, 2023"
    mems = conversation_memories(parse_conversation(item), "u")
    same_day = [m for m in mems if m.date == "2023-05-08"]
    assert [m.turn for m in same_day] == list(range(7))
    assert len({m.memory_id for m in mems}) == len(mems)


def test_not_locomo_is_an_input_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "x.json"
    p.write_text(json.dumps([{"qa": []}]), encoding="utf-8")
    with pytest.raises(InvalidInputError, match="not a LoCoMo conversation"):
        load_locomo(p)


def test_systems_find_the_evidence(locomo_file) -> None:  # type: ignore[no-untyped-def]
    hay = haystack(load_locomo(locomo_file)[0])
    enc = HashingEncoder(256)
    metrics, ranked = evaluate(
        [hay], [BM25System(), DenseSystem(enc), MemoryBankSystem(enc, name="ours")], [1, 3, 10]
    )
    for name in ("bm25", "dense", "ours"):
        assert ranked[name]["conv-test"]["conv-test#0"][0] == "D1:1", name  # the adopted greyhound -> Comet
        assert metrics[name]["turn_recall"]["all"]["10"] > 0.8
    # "D" can never be retrieved: category 3's only question is capped at 1/2.
    assert metrics["ours"]["turn_recall"]["3"]["10"] == 0.5


def test_forgetting_replay(locomo_file) -> None:  # type: ignore[no-untyped-def]
    hay = haystack(load_locomo(locomo_file)[0])
    enc = HashingEncoder(256)
    paper = MemoryBankSystem(
        enc,
        name="paper",
        forgetting={"mode": "paper", "tau": 1.0, "policy": "threshold", **CALENDAR_ONLY},
        replay=True,
        recall_k=2,
    )
    gentle = MemoryBankSystem(
        enc,
        name="gentle",
        forgetting={"mode": "paper", "tau": 90.0, "policy": "threshold", **CALENDAR_ONLY},
        replay=True,
        recall_k=2,
    )
    metrics, ranked = evaluate([hay], [paper, gentle], [10])
    # tau = 1 day: by September every turn of May and June is gone; only the last session is left.
    assert paper.stats.forgotten == 7 and paper.stats.recalls == 6  # utterances of sessions 2 and 3
    assert set(ranked["paper"]["conv-test"]["conv-test#0"]) <= {"D3:1", "D3:2", "D3:3"}
    assert gentle.stats.forgotten == 0
    assert metrics["gentle"]["turn_recall"]["all"]["10"] > metrics["paper"]["turn_recall"]["all"]["10"]


def test_dev_file_loads() -> None:
    if not LOCOMO_DEV.is_file():
        pytest.skip(f"LoCoMo dev file not found at {LOCOMO_DEV} (set MEMORYBANK_SHARED_DATA)")
    convs = load_locomo(LOCOMO_DEV)
    assert [c.sample_id for c in convs] == ["conv-26", "conv-30", "conv-41", "conv-42", "conv-43", "conv-44"]
    hays = [haystack(c) for c in convs]
    assert sum(len(h.memories) for h in hays) == 3435
    assert sum(len(h.probes) for h in hays) == 885
    ids = {m.extra["id"] for h in hays for m in h.memories}
    unmatched = [e for h in hays for p in h.probes for e in p.evidence if e not in ids]
    assert unmatched == ["D"]  # the only id that stays unmatched after normalisation


def test_stochastic_once_forgets_with_probability_one_minus_r(locomo_file) -> None:  # type: ignore[no-untyped-def]
    hay = haystack(load_locomo(locomo_file)[0])
    enc = HashingEncoder(64)

    def forgotten(tau: float, seed: int = 0) -> int:
        s = MemoryBankSystem(
            enc,
            forgetting={"mode": "paper", "tau": tau, "policy": "stochastic-once", "seed": seed},
            replay=True,
        )
        s.retrieve(hay, 5)
        assert s.config()["forgetting"]["policy"] == "stochastic-once"
        return s.stats.forgotten

    assert forgotten(1e6) == 0
    assert forgotten(1.0) == 7  # R = exp(-days) is ~0 for every turn older than the last session
    assert forgotten(30.0, seed=1) == forgotten(30.0, seed=1)  # reproducible per seed


@pytest.mark.integration
def test_dev_recall_at_10_reaches_the_target_with_the_defaults() -> None:
    """The issue's target on the LoCoMo dev set: turn recall@10 >= 75% on categories 1-4, with
    the bank's default configuration and encoder (a real MemoryBank per conversation)."""
    if not LOCOMO_DEV.is_file():
        pytest.skip(f"LoCoMo dev file not found at {LOCOMO_DEV} (set MEMORYBANK_SHARED_DATA)")
    from memory_bank.embeddings import get_encoder

    hays = [haystack(c) for c in load_locomo(LOCOMO_DEV)]
    metrics, _ = evaluate(hays, [BM25System(), MemoryBankSystem(get_encoder("minilm"), name="ours")], [10])
    ours, bm25 = metrics["ours"]["turn_recall"], metrics["bm25"]["turn_recall"]
    assert ours["all"]["10"] >= 0.75, ours
    assert ours["all"]["10"] > bm25["all"]["10"] + 0.1  # well above the lexical baseline
    assert all(ours[c]["10"] >= bm25[c]["10"] for c in ("1", "2", "3", "4")), (ours, bm25)
