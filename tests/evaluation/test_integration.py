"""Real models, offline: the packaged encoders on our labelled set and LoCoMo, and an answers run
with the packaged SmolLM2 as backbone and a real OpenAI-compatible server on loopback as judge
(a smoke check of the pipeline: a 135M judge's scores mean little)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from memory_bank.cli import main
from tests.conftest import LOCOMO_DEV, REPO, llama_server

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


@pytest.fixture(scope="module")
def judge_server() -> Iterator[str]:
    with llama_server() as url:
        yield url


def test_answers_offline_smoke(tmp_path, capsys, judge_server, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    out = tmp_path / "answers.json"
    code = main(
        ["eval", "answers", "--memory-file", str(DATA / "en" / "memories_en.json"),
         "--questions", str(DATA / "en" / "questions_en.jsonl"),
         "--labels", str(DATA / "en" / "labels_en.jsonl"), "--users", "Sofia Lindqvist", "--limit", "2",
         "--llm", "llamacpp", "--judge", f"openai:smollm2@{judge_server}", "--systems", "memorybank,no-memory",
         "--max-new-tokens", "24", "--encoder", "hashing", "--out", str(out)]
    )  # fmt: skip
    stdout = capsys.readouterr().out
    assert code == 0
    res = json.loads(out.read_text(encoding="utf-8"))
    assert res["run"]["config"]["judge"].startswith("openai:smollm2@http://127.0.0.1")
    assert len(res["questions"]) == 2
    for rec in res["questions"]:
        for name in ("memorybank", "no-memory"):
            r = rec["systems"][name]
            assert r["error"] is None and r["response"], (name, r)
            assert r["correctness"] in (0.0, 0.5, 1.0, None) and r["rank"] in (1, 2)
    assert set(res["metrics"]) == {"memorybank", "no-memory"} and "memorybank:" in stdout
    md = (tmp_path / "answers.md").read_text(encoding="utf-8")
    assert "smoke check" in md
