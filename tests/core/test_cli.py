"""The memorybank command line: happy paths and one-line errors with exit code 2."""

from __future__ import annotations

import json

import pytest

from memory_bank.cli import main
from tests.core.test_original_format import LEGACY


@pytest.fixture
def store(tmp_path):  # type: ignore[no-untyped-def]
    return str(tmp_path / "store")


def run(capsys, *argv: str) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    code = main([*argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_import_search_memories_forget_export(tmp_path, capsys, store) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "mem.json"
    src.write_text(json.dumps(LEGACY), encoding="utf-8")
    curve = tmp_path / "curve.yaml"  # the paper's curve, tau 1 day, by the calendar alone
    curve.write_text("forgetting: {tau: 1.0, policy: stochastic, content_weights: false, cold_tier: false}\n")
    common = ["--store", store, "--encoder", "hashing", "--config", str(curve)]
    assert run(capsys, "import", str(src), *common)[0] == 0
    code, out, _ = run(capsys, "search", *common, "--user", "Jason", "--k", "2", "--json", "--now", "2023-05-03",
                       "--reinforce", "I like chess")
    assert code == 0
    results = json.loads(out)
    assert len(results) == 2
    assert {"memory_id", "user", "kind", "date", "turn", "text", "score", "strength", "retention"} <= set(results[0])
    assert results[0]["user"] == "Jason" and results[0]["turn"] == 1 and results[0]["date"] == "2023-04-27"
    code, out, _ = run(capsys, "memories", *common, "--user", "Jason", "--now", "2023-05-04", "--mode", "paper", "--json")
    mems = {m["memory_id"]: m for m in json.loads(out)}
    assert mems["Jason_2023-04-27_1"]["strength"] == 2
    assert mems["Jason_2023-04-27_1"]["last_recall_date"] == "2023-05-03"
    assert mems["Jason_2023-04-27_1"]["retention"] == pytest.approx(0.606531, abs=1e-5)  # exp(-1/2)
    assert {"archived", "kind", "date", "turn"} <= set(mems["Jason_2023-04-27_1"])
    code, out, _ = run(capsys, "forget", *common, "--user", "Jason", "--now", "2023-06-30", "--mode", "paper",
                       "--seed", "1", "--json")
    assert code == 0 and json.loads(out)["Jason"]["mode"] == "paper"
    # The stochastic curve may already have dropped some on the day's first write (the import
    # ran at today's date): count what is forgotten now, whichever pass forgot it.
    code, out, _ = run(capsys, "memories", *common, "--user", "Jason", "--json")
    assert code == 0 and sum(bool(m["archived"]) for m in json.loads(out)) >= 3
    out_file = tmp_path / "out.json"
    assert run(capsys, "export", *common, "--out", str(out_file))[0] == 0
    exported = json.loads(out_file.read_text(encoding="utf-8"))
    assert exported["Linda"] == LEGACY["Linda"]
    # An existing file (the one just imported, in the README's sequence) is never overwritten
    # unless asked: the export is refused, and the file is as it was.
    before = out_file.read_bytes()
    code, _, err = run(capsys, "export", *common, "--user", "Linda", "--out", str(out_file))
    assert code == 2 and "already exists" in err and "--force" in err and out_file.read_bytes() == before
    assert run(capsys, "export", *common, "--user", "Linda", "--out", str(out_file), "--force")[0] == 0
    assert list(json.loads(out_file.read_text(encoding="utf-8"))) == ["Linda"]
    assert any(t.get("archived") for t in exported[" Jason "]["history"]["2023-04-27"] if isinstance(t, dict))


def test_add_queries_stats_delete(tmp_path, capsys, store) -> None:  # type: ignore[no-untyped-def]
    common = ["--store", store, "--encoder", "hashing"]
    code, out, _ = run(capsys, "add", *common, "--user", "Ann", "--query", "I play the harp", "--response", "Lovely",
                       "--at", "2023-05-01T10:00")
    assert code == 0 and json.loads(out)["memory_id"] == "Ann_2023-05-01_0"
    run(capsys, "add", *common, "--user", "Bob", "--query", "I play the drums", "--response", "Loud!")
    queries = tmp_path / "q.jsonl"
    queries.write_text(
        json.dumps({"user": "Ann", "query": "harp"}) + "\n" + json.dumps({"user": " Bob ", "query": "drums"}) + "\n"
    )
    code, out, _ = run(capsys, "search", *common, "--queries", str(queries), "--k", "5")
    lines = [json.loads(x) for x in out.splitlines()]
    assert [r["user"] for line in lines for r in line["results"]] == ["Ann", "Bob"]
    code, out, _ = run(capsys, "stats", *common, "--json")
    assert json.loads(out)["users"] == 2 and json.loads(out)["memories"]["turn"] == 2
    assert run(capsys, "delete", *common, "--user", "Ann")[0] == 0
    code, out, _ = run(capsys, "stats", *common, "--json")
    assert json.loads(out)["users"] == 1


def test_now_is_today_for_every_command(tmp_path, capsys, store) -> None:  # type: ignore[no-untyped-def]
    """``--now`` is a common option, yet ``add`` dated the turn by the real clock (and ran the
    day's forgetting pass at the real today): it is now the bank's today for every command."""
    common = ["--store", store, "--encoder", "hashing"]
    code, out, _ = run(capsys, "add", *common, "--user", "Ann", "--query", "I adopted a cat", "--now", "2024-03-20")
    assert code == 0 and json.loads(out)["date"] == "2024-03-20"
    code, out, _ = run(capsys, "memories", *common, "--user", "Ann", "--json", "--now", "2024-03-21")
    assert code == 0 and "2024-03-20" in out
    code, _, err = run(capsys, "add", "--store", str(tmp_path / "new"), "--user", "Ann", "--query", "q", "--now", "2024-13-01")
    assert code == 2 and "--now '2024-13-01' is not a valid date" in err
    assert not (tmp_path / "new").exists()  # refused before a store was made


@pytest.mark.parametrize(
    "argv, match",
    [
        (["search", "--user", "Nobody", "hello"], "no memories for user 'Nobody'"),
        (["search", "--user", "Ann", ""], "query is empty"),
        (["add", "--user", "", "--query", "q"], "user name is empty"),
        (["add", "--user", "bad\x07name", "--query", "q"], "control"),
        (["add", "--user", "Ann", "--query", "q", "--at", "not-a-time"], "ISO 8601"),
        (["search", "--user", "Ann", "--now", "2023-02-30", "q"], "not a valid date"),
        (["delete", "--user", "Ann", "--memory-id", "nope"], "no memory with id 'nope'"),
    ],
)
def test_bad_input_gives_one_line_and_exit_2(capsys, store, argv, match) -> None:  # type: ignore[no-untyped-def]
    run(capsys, "add", "--store", store, "--encoder", "hashing", "--user", "Ann", "--query", "seed", "--response", "r")
    code, out, err = run(capsys, *argv[:1], "--store", store, "--encoder", "hashing", *argv[1:])
    assert code == 2
    assert err.startswith("memorybank: error:") and match in err and err.count("\n") == 1
    code, out, _ = run(capsys, "stats", "--store", store, "--encoder", "hashing", "--json")
    assert json.loads(out)["memories"]["turn"] == 1  # nothing lost


def test_missing_store_and_malformed_file(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    code, _, err = run(capsys, "stats", "--store", str(tmp_path / "none"))
    assert code == 2 and "no memory store" in err
    bad = tmp_path / "bad.json"
    bad.write_text('{"u": {"history": {"2023-04-27": [{"query": 3}]}}}')
    before = bad.read_bytes()
    code, _, err = run(capsys, "import", str(bad), "--store", str(tmp_path / "s"), "--encoder", "hashing")
    assert code == 2 and "'query' must be a string" in err
    assert bad.read_bytes() == before


@pytest.mark.parametrize("module", ["memory_bank", "memory_bank.cli"])
def test_python_dash_m_offers_every_command(module: str) -> None:
    """``python -m`` (no console script on PATH) lists the commands the extension modules own."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    for command in ("import", "search", "summarize", "eval", "bench", "migrate", "check", "backup"):
        assert f"    {command} " in out, command


def test_export_checks_its_target_before_the_work(tmp_path, capsys, store) -> None:  # type: ignore[no-untyped-def]
    """A directory was first 'already exists, add --force', then with --force 'is a directory';
    a dangling link 'already exists', and with --force the link's missing folders were made."""
    common = ["--store", store, "--encoder", "hashing"]
    assert run(capsys, "add", *common, "--user", "Ann", "--query", "hi")[0] == 0
    (tmp_path / "adir").mkdir()
    code, _, err = run(capsys, "export", *common, "--out", str(tmp_path / "adir"))
    assert code == 2 and "is a directory" in err
    (tmp_path / "dangling.json").symlink_to(tmp_path / "nowhere" / "x.json")
    code, _, err = run(capsys, "export", *common, "--out", str(tmp_path / "dangling.json"), "--force")
    assert code == 2 and "is a link to nothing" in err and not (tmp_path / "nowhere").exists()
