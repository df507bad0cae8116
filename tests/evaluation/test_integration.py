"""Real models, offline: the packaged encoders on our labelled set and LoCoMo (the answers run,
which needs the chatbot, is tested with the app: tests/silicon_friend/test_eval_integration.py)."""

from __future__ import annotations

import json

import pytest

from memory_bank.cli import main
from tests.conftest import LOCOMO_DEV, REPO

pytestmark = pytest.mark.integration
DATA = REPO / "eval_data"


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
