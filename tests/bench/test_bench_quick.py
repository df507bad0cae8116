"""`memorybank bench --quick`: runs end to end in seconds and writes the documented JSON."""

from __future__ import annotations

import json

from memory_bank.bench.runner import SCHEMA_KEYS
from memory_bank.cli import main


def test_quick_mode_writes_the_documented_json(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "bench.json"
    chart = tmp_path / "bench.png"
    code = main(["bench", "--quick", "--json", str(out), "--chart", str(chart), "--sizes", "200,600",
                 "--users", "8", "--per-user", "60", "--forget-size", "3000", "--queries", "5"])
    assert code == 0
    table = capsys.readouterr().out
    assert "| memories | system |" in table and "| target |" in table
    data = json.loads(out.read_text(encoding="utf-8"))
    assert {"processor", "cpus", "loadavg_start", "loadavg_end", "versions", "threads"} <= set(data["machine"])
    assert [r["size"] for r in data["results"]] == [200, 600]
    for entry in data["results"]:
        assert set(SCHEMA_KEYS) <= set(entry)
        assert entry["search_ms_p50"] > 0 and entry["add_ms_p50"] > 0 and entry["restart_s"] > 0
        assert entry["import_turns_per_s"] > 0 and entry["rss_mb"] > 0 and entry["forget_s"] is not None
        assert set(entry["baselines"]) == {"original", "langchain"}
        for baseline in entry["baselines"].values():
            assert set(SCHEMA_KEYS) <= set(baseline)
            assert baseline["search_ms_p50"] > 0
    users = data["scenarios"]["users"]
    assert users["memories"] == 8 * 60 and users["search_core_ms_p50_many_users_warm"] > 0
    forgetting = data["scenarios"]["forgetting"]
    assert forgetting["examined"] == 3000 and 0 < forgetting["forgotten"] < 3000
    assert {t["target"].split(" ")[0] for t in data["targets"]} >= {"search", "add", "restart", "forgetting"}
    assert chart.stat().st_size > 10_000


def test_unknown_baseline_is_a_one_line_error(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["bench", "--quick", "--baselines", "zep"]) == 2
    assert "unknown baseline 'zep'" in capsys.readouterr().err


def test_the_mem0_worker_runs_without_langchain() -> None:
    """mem0's environment need not have LangChain: the worker and the bank import without it."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['langchain_core'] = None; sys.modules['langchain_core.embeddings'] = None\n"
        "import memory_bank.bench.worker, memory_bank.bench.mem0_system\n"
        "from memory_bank import MemoryBank\n"
        "from memory_bank.embeddings import HashingEncoder\n"
        "import tempfile\n"
        "bank = MemoryBank.open(tempfile.mkdtemp(), encoder_instance=HashingEncoder(16))\n"
        "bank.add_turn('Ann', 'My cat is Miso.', 'Nice!')\n"
        "print(bank.search('Ann', 'cat', k=1)[0].memory.query)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "My cat is Miso."
