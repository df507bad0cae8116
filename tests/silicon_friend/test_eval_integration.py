"""``silicon-friend eval answers`` with real models, offline: the packaged SmolLM2 as backbone and
a real OpenAI-compatible server on loopback as judge (a smoke check of the pipeline: a 135M
judge's scores mean little)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from silicon_friend.cli import main
from tests.conftest import REPO, llama_server

pytestmark = pytest.mark.integration
DATA = REPO / "eval_data"


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
    assert res["run"]["command"] == "silicon-friend eval answers"
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
