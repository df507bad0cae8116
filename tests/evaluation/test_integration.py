"""Real models, offline: the packaged encoders on our labelled set and LoCoMo (the answers run,
which needs the chatbot, is tested with the app: tests/silicon_friend/test_eval_integration.py)."""

from __future__ import annotations

import json

import pytest

from memory_bank.cli import main
from tests.conftest import LOCOMO_DEV, REPO, SHARED_DATA

pytestmark = pytest.mark.integration
DATA = REPO / "eval_data"
MADIAL_DIR = SHARED_DATA / "madial"


@pytest.mark.parametrize(("lang", "hit2", "hit3"), [("en", 0.85, 0.95), ("zh", 0.85, 0.95)])
def test_our_set_with_the_default_encoders(tmp_path, capsys, lang, hit2, hit3) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / f"own_{lang}.jsonl"
    code = main(
        ["eval", "retrieval", "--memory-file", str(DATA / lang / f"memories_{lang}.json"),
         "--questions", str(DATA / lang / f"questions_{lang}.jsonl"),
         "--labels", str(DATA / lang / f"labels_{lang}.jsonl"), "--language", lang, "--k", "3", "--out", str(out)]
    )  # fmt: skip
    capsys.readouterr()
    assert code == 0
    m = json.loads((tmp_path / f"own_{lang}.json").read_text(encoding="utf-8"))["metrics"]["all"]
    assert m["n"] == 54 and m["hit@2"] >= hit2 and m["hit@3"] >= hit3, m


def test_locomo_one_conversation_with_minilm(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    if not LOCOMO_DEV.is_file():
        pytest.skip(f"LoCoMo dev file not found at {LOCOMO_DEV}")
    out = tmp_path / "conv30.json"
    code = main(
        ["eval", "locomo", "--data", str(LOCOMO_DEV), "--conversations", "conv-30", "--systems", "bm25,ours",
         "--out", str(out)]
    )  # fmt: skip
    capsys.readouterr()
    assert code == 0
    s = json.loads(out.read_text(encoding="utf-8"))["systems"]
    at10 = {name: m["turn_recall"]["all"]["10"] for name, m in s.items()}
    assert at10["ours"] > at10["bm25"] > 0.5, at10


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_our_set_asked_a_second_time(tmp_path, capsys, lang) -> None:  # type: ignore[no-untyped-def]
    """After one round of useless answers stored as turns, the facts still come first
    (issue 16 floor: hit@3 >= 90; measured 96.3 EN, 94.4 ZH)."""
    out = tmp_path / f"own2_{lang}.jsonl"
    code = main(
        ["eval", "retrieval", "--memory-file", str(DATA / lang / f"memories_{lang}.json"),
         "--questions", str(DATA / lang / f"questions_{lang}.jsonl"),
         "--labels", str(DATA / lang / f"labels_{lang}.jsonl"), "--language", lang, "--k", "3",
         "--scenario", "second-ask", "--out", str(out)]
    )  # fmt: skip
    capsys.readouterr()
    assert code == 0
    m = json.loads((tmp_path / f"own2_{lang}.json").read_text(encoding="utf-8"))["metrics"]["all"]
    assert m["n"] == 54 and m["hit@3"] >= 0.90, m


# MADial-Bench recall@10 of "ours", measured 78.8 (EN) and 75.2 (ZH) with the default encoders;
# the floors are those less 2 points. The targets (80.6 / 82.4) are not met yet.
MADIAL_FLOORS = {"en": 0.765, "zh": 0.73}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_madial_recall_floor_above_both_baselines(tmp_path, capsys, lang) -> None:  # type: ignore[no-untyped-def]
    folder = MADIAL_DIR
    if not (folder / f"MADial-Bench-{lang}-memory.json").is_file():
        pytest.skip(f"MADial-Bench data not found in {folder} (set MEMORYBANK_SHARED_DATA)")
    out = tmp_path / f"madial_{lang}.json"
    code = main(["eval", "madial", "--data", str(folder), "--language", lang, "--k", "10", "--out", str(out)])
    capsys.readouterr()
    assert code == 0
    s = json.loads(out.read_text(encoding="utf-8"))["systems"]
    at10 = {name: m["turn_recall"]["all"]["10"] for name, m in s.items()}
    assert at10["ours"] >= MADIAL_FLOORS[lang], at10
    assert at10["ours"] > at10["dense"] and at10["ours"] > at10["bm25"], at10
