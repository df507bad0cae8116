"""MADial-Bench: the benchmark's protocol (query, per-user candidates, recall/nDCG) and the CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from memory_bank.cli import main
from memory_bank.errors import InvalidInputError
from memory_bank.evaluation.madial import EN_USER1_MEMORIES, haystacks, load_madial, ndcg_at_k

ZH_MEMORIES = [
    {"1": {"time": "2023-12-25", "scene": "活动类", "emotion": "开心", "event": "Bart在圣诞节晚会上跳舞，感觉非常开心。", "user-id": 1, "id": "1"}},
    {"3": {"time": "2023-03-07", "scene": "活动类", "emotion": "开心", "event": "Bart在体育节上获得男子一百米第一名。", "user-id": 1, "id": "3"}},
    {"2": {"time": "2023-06-01", "scene": "喜好类", "emotion": "开心", "event": "Lisa在生日派对上收到一束花。", "user-id": 2, "id": "2"}},
    {"10": {"time": "2023-07-01", "scene": "活动类", "emotion": "难过", "event": "Lisa的风筝挂在了树上。", "user-id": 2, "id": "10"}},
]  # fmt: skip
ZH_DIALOGUES = [
    {"dialogue": ["<BOD>\n", "<Bart>:\"元旦晚会我要表演！\"\n", "<Assistant>:\"太棒了！\"\n",
                  "<Bart>:\"我想跳舞。\"\n", "<Assistant>:\"你记得去年圣诞节晚会上你跳舞吗？\"\n", "<EOD>\n"],
     "test-turn": [4], "relevant-id": [1], "user-id": 1, "id": 0},
    {"dialogue": ["<BOD>\n", "<Lisa>:\"今天我又去放风筝了。\"\n", "<Assistant>:\"还记得上次风筝挂在树上吗？\"\n", "<EOD>\n"],
     "test-turn": [2], "relevant-id": [10, 2], "user-id": 2, "id": 1},
]  # fmt: skip


def _write(folder: Path, lang: str, memories: list[dict], dialogues: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in (("memory", memories), ("dialogue", dialogues)):
        text = "\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n"
        (folder / f"MADial-Bench-{lang}-{name}.json").write_text(text, encoding="utf-8")
    return folder


def test_query_is_the_raw_dialogue_before_the_first_test_turn(tmp_path: Path) -> None:
    events, dialogues = load_madial(_write(tmp_path, "zh", ZH_MEMORIES, ZH_DIALOGUES), "zh")
    assert dialogues[0].query == "<BOD>\n<Bart>:\"元旦晚会我要表演！\"\n<Assistant>:\"太棒了！\"\n<Bart>:\"我想跳舞。\"\n"
    assert dialogues[0].latest == "<Bart>:\"我想跳舞。\"\n"
    assert dialogues[1].relevant == ["10", "2"]
    assert [(e.mid, e.user) for e in events] == [("1", 1), ("3", 1), ("2", 2), ("10", 2)]


def test_candidates_are_the_asking_users_memories_only(tmp_path: Path) -> None:
    hays = haystacks(*load_madial(_write(tmp_path, "zh", ZH_MEMORIES, ZH_DIALOGUES), "zh"))
    by_user = {h.user: h for h in hays}
    assert [m.extra["id"] for m in by_user["Bart"].memories] == ["1", "3"]
    assert [p.qid for p in by_user["Bart"].probes] == ["0"]
    assert [m.extra["id"] for m in by_user["Lisa"].memories] == ["2", "10"]
    m = by_user["Bart"].memories[0]
    assert (m.date, m.text, m.response, m.turn) == ("2023-12-25", "Bart在圣诞节晚会上跳舞，感觉非常开心。", "", None)


def test_english_memories_are_split_between_the_two_users_by_position(tmp_path: Path) -> None:
    mems = [{str(i): {"time": "2023-01-01", "event": f"event {i}"}} for i in range(EN_USER1_MEMORIES + 3)]
    dia = [{"dialogue": ["<BOD>\n", "<Lisa>: \"hi\"\n", "<Assistant>: \"x\"\n"], "test-turn": [2],
            "relevant-id": [EN_USER1_MEMORIES + 1], "user-id": 2}]  # fmt: skip
    events, _ = load_madial(_write(tmp_path, "en", mems, dia), "en")
    assert {e.user for e in events[:EN_USER1_MEMORIES]} == {1}
    assert {e.user for e in events[EN_USER1_MEMORIES:]} == {2}


def test_ndcg_with_binary_relevance() -> None:
    assert ndcg_at_k(["a"], ["a", "b"], 10) == 1.0
    assert ndcg_at_k(["a", "b"], ["x", "a"], 2) == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3)))
    assert ndcg_at_k(["a"], ["x", "y"], 2) == 0.0


def test_missing_or_malformed_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="does not exist"):
        load_madial(tmp_path, "zh")
    _write(tmp_path, "zh", ZH_MEMORIES, [{"dialogue": ["<BOD>\n"], "user-id": 1}])
    with pytest.raises(InvalidInputError, match="dialogue line 1 is malformed"):
        load_madial(tmp_path, "zh")


def test_eval_madial_runs_every_system_and_writes_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _write(tmp_path / "madial", "zh", ZH_MEMORIES, ZH_DIALOGUES)
    out = tmp_path / "runs" / "madial_zh.json"
    argv = ["eval", "madial", "--data", str(data), "--language", "zh", "--encoder", "hashing",
            "--k", "1,2", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    stdout = capsys.readouterr().out
    assert "bm25" in stdout and "dense" in stdout and "ours" in stdout
    res = json.loads(out.read_text(encoding="utf-8"))
    assert set(res["systems"]) == {"bm25", "dense", "ours"} == set(res["ndcg"])
    assert res["dataset"]["dialogues"] == 2 and res["dataset"]["memories"] == 4
    # Lexical matching finds the Christmas dance by its words ("圣诞", "跳舞") for Bart.
    first = next(q for q in res["questions"] if q["conversation"] == "Bart")
    assert first["retrieved_by_system"]["bm25"][0] == "1"
    assert all(set(q["retrieved"]) <= {"1", "3"} for q in res["questions"] if q["conversation"] == "Bart")
    md = (tmp_path / "runs" / "madial_zh.md").read_text(encoding="utf-8")
    assert "## nDCG@k (%)" in md and "| ours |" in md


def test_eval_madial_bad_language_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["eval", "madial", "--data", str(tmp_path), "--language", "fr", "--out", str(tmp_path / "x.json")])
    assert e.value.code == 2
