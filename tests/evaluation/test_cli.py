"""End-to-end runs of each ``memorybank eval`` command (hashing encoder: fast, offline)."""

from __future__ import annotations

import json
from pathlib import Path

from memory_bank.cli import main
from tests.conftest import REPO, paper_file

DATA = REPO / "eval_data"


def run(capsys, *argv: str) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_eval_retrieval_on_our_set_with_labels(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "runs" / "own_en.jsonl"
    code, stdout, _ = run(
        capsys,
        "eval",
        "retrieval",
        "--memory-file",
        str(DATA / "en" / "memories_en.json"),
        "--questions",
        str(DATA / "en" / "questions_en.jsonl"),
        "--labels",
        str(DATA / "en" / "labels_en.jsonl"),
        "--k",
        "3",
        "--encoder",
        "hashing",
        "--out",
        str(out),
    )
    assert code == 0
    rows = _rows(out)
    assert len(rows) == 60
    assert {"user", "qid", "question", "retrieved"} <= set(rows[0])
    assert [r["qid"] for r in rows[:10]] == list(range(10))
    first = rows[0]["retrieved"][0]
    assert {"kind", "date", "turn", "score", "text"} <= set(first) and first["kind"] == "turn"
    assert all(len(r["retrieved"]) == 3 for r in rows)
    assert "54 labelled questions" in stdout and "hit@3" in stdout and "recall@3" in stdout
    results = json.loads((tmp_path / "runs" / "own_en.json").read_text(encoding="utf-8"))
    assert {"run", "config", "dataset", "ks", "metrics"} <= set(results)
    assert {"packages", "git_commit", "machine", "config"} <= set(results["run"])
    assert results["dataset"]["absent"] == 6 and results["metrics"]["all"]["n"] == 54
    md = (tmp_path / "runs" / "own_en.md").read_text(encoding="utf-8")
    assert "hit@3" in md and "own_en-curve.png" in md
    assert (tmp_path / "runs" / "own_en-curve.png").stat().st_size > 1000


def test_eval_retrieval_reuses_a_given_store(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    args = [
        "eval",
        "retrieval",
        "--memory-file",
        str(DATA / "zh" / "memories_zh.json"),
        "--questions",
        str(DATA / "zh" / "questions_zh.jsonl"),
        "--language",
        "zh",
        "--encoder",
        "hashing",
        "--store",
        str(tmp_path / "store"),
    ]
    assert run(capsys, *args, "--out", str(tmp_path / "a.jsonl"))[0] == 0
    assert run(capsys, *args, "--out", str(tmp_path / "b.jsonl"))[0] == 0  # no "already has memories" error
    assert _rows(tmp_path / "a.jsonl") == _rows(tmp_path / "b.jsonl")
    assert not (tmp_path / "a.json").exists()  # no labels: no report


def test_eval_retrieval_on_the_paper_data(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "paper_en.jsonl"
    code, stdout, _ = run(
        capsys,
        "eval",
        "retrieval",
        "--memory-file",
        str(paper_file("en", "memory")),
        "--questions",
        str(paper_file("en", "questions")),
        "--labels",
        str(DATA / "paper_labels" / "probing_labels_en.jsonl"),
        "--encoder",
        "hashing",
        "--k",
        "2",
        "--out",
        str(out),
    )
    assert code == 0
    rows = _rows(out)
    assert len(rows) == 100
    users = {r["user"] for r in rows}
    assert {"Jason", "Linda", "Ivy", "Roland"} <= users  # keys with stray spaces, matched stripped
    for r in rows:
        assert all(m["memory_id"].startswith(r["user"]) for m in r["retrieved"])
    assert "98 labelled questions" in stdout


def test_eval_retrieval_errors(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"Nobody": ["Who am I?"]}) + "\n", encoding="utf-8")
    code, _, err = run(
        capsys,
        "eval",
        "retrieval",
        "--memory-file",
        str(DATA / "en" / "memories_en.json"),
        "--questions",
        str(q),
        "--encoder",
        "hashing",
        "--out",
        str(tmp_path / "o.jsonl"),
    )
    assert code == 2 and "not in the memory file" in err and "Nobody" in err


def test_eval_locomo_with_forgetting(tmp_path, capsys, locomo_file) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "locomo.json"
    code, stdout, _ = run(
        capsys,
        "eval",
        "locomo",
        "--data",
        str(locomo_file),
        "--k",
        "1,3,10",
        "--systems",
        "bm25,dense,ours,proposed-v2",
        "--forgetting",
        "paper",
        "--encoder",
        "hashing",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--out",
        str(out),
    )
    assert code == 0
    res = json.loads(out.read_text(encoding="utf-8"))
    assert list(res["systems"]) == [
        "bm25",
        "dense",
        "ours",
        "proposed-v2",
        "ours+forgetting(paper)",
        "ours+forgetting",
    ]
    ours = res["systems"]["ours"]
    assert set(ours["turn_recall"]) == {"all", "1", "2", "3", "4"} and ours["n"]["all"] == 5
    assert set(ours["session_recall"]["all"]) == {"1", "3", "10"}
    q = res["questions"][0]
    assert {"question", "category", "evidence", "retrieved"} <= set(q)
    assert q["category"] == "4" and q["retrieved"][0] == "D1:1"
    assert len(q["retrieved"]) <= 10 and set(q["retrieved_by_system"]) >= {"bm25", "dense"}
    stats = res["forgetting_stats"]
    assert stats["ours+forgetting(paper)"]["forgotten"] > 0
    settings = res["run"]["config"]["forgetting_settings"]
    assert settings["tau"] == 7.0 and settings["cold_tier"] and settings["cold_rank"] == "joint"
    assert "ours+forgetting" in stdout
    for suffix in (".md", "-turn-recall.png", "-session-recall.png", "-categories.png"):
        assert (tmp_path / f"locomo{suffix}").is_file(), suffix
    assert list((tmp_path / "cache").glob("embeddings-*.npz"))


def test_eval_locomo_rejects_unknown_system(tmp_path, capsys, locomo_file) -> None:  # type: ignore[no-untyped-def]
    code, _, err = run(
        capsys,
        "eval",
        "locomo",
        "--data",
        str(locomo_file),
        "--systems",
        "bm25,gpt",
        "--encoder",
        "hashing",
        "--out",
        str(tmp_path / "x.json"),
    )
    assert code == 2 and "unknown system 'gpt'" in err


def test_eval_longmemeval(tmp_path, capsys, lme_file) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "lme.json"
    code, _, _ = run(
        capsys,
        "eval",
        "longmemeval",
        "--data",
        str(lme_file),
        "--k",
        "1,5",
        "--encoder",
        "hashing",
        "--out",
        str(out),
    )
    assert code == 0
    res = json.loads(out.read_text(encoding="utf-8"))
    assert res["dataset"]["questions"] == 1
    assert res["systems"]["bm25"]["turn_recall"]["all"]["1"] == 1.0
    assert res["questions"][0]["evidence_sessions"] == ["answer_1"]


def test_eval_answers_points_to_the_app(capsys) -> None:  # type: ignore[no-untyped-def]
    code, _, err = run(capsys, "eval", "answers", "--memory-file", "x.json", "--judge", "openai:m")
    assert code == 2
    assert "silicon-friend eval answers" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_eval_retrieval_second_ask_stores_the_earlier_askings(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "second.jsonl"
    code, stdout, _ = run(
        capsys,
        "eval",
        "retrieval",
        "--memory-file",
        str(DATA / "en" / "memories_en.json"),
        "--questions",
        str(DATA / "en" / "questions_en.jsonl"),
        "--labels",
        str(DATA / "en" / "labels_en.jsonl"),
        "--scenario",
        "second-ask",
        "--encoder",
        "hashing",
        "--out",
        str(out),
    )
    assert code == 0 and "54 labelled questions" in stdout
    results = json.loads((tmp_path / "second.json").read_text(encoding="utf-8"))
    first_turns = sum(
        len(day) for u in json.loads((DATA / "en" / "memories_en.json").read_text()).values() for day in u["history"].values()
    )
    assert results["dataset"]["turns"] == first_turns + 60  # one stored turn per question asked before
    assert results["config"]["scenario"] == "second-ask"
    assert results["config"]["now"] > max(json.loads((DATA / "en" / "memories_en.json").read_text())["Marcus Reid"]["history"])
    assert len(_rows(out)) == 60
