"""Imports are all-or-nothing per user, checked up front, and finish when run again (issue 15,
items 3, 4 and 8), on both stores."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from memory_bank import MemoryBank, MemoryFileError
from memory_bank.cli import main
from memory_bank.original_format import export_data, import_data, load_memory_file

OLD = {"Ann": {"name": "Ann", "history": {"2023-05-01": [{"query": "old memory of Ann", "response": "ok"}]}}}


def _file(turns: list[Any], day: str = "2023-06-01") -> dict[str, Any]:
    return {"Ann": {"name": "Ann", "history": {day: turns}}}


def _queries(bank: MemoryBank, user: str) -> list[str]:
    return [m.query or "" for m in bank.history(user)]


def test_a_replace_that_fails_while_writing_keeps_the_old_memories(make_bank, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    import_data(bank, copy.deepcopy(OLD))
    bank.add_turn("Bob", "Bob is not in the file", "ok")
    new = _file([{"query": f"new {i}", "response": "ok"} for i in range(50)])

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("disk gone while writing vectors")

    monkeypatch.setattr(type(bank.storage), "_put_vectors", staticmethod(broken))
    with pytest.raises(RuntimeError, match="disk gone"):
        import_data(bank, new, replace=True)
    monkeypatch.undo()
    again = make_bank()  # another process reading the same store
    assert _queries(again, "Ann") == ["old memory of Ann"]
    assert _queries(again, "Bob") == ["Bob is not in the file"]
    assert [h.memory.query for h in again.search("Ann", "old memory", k=5)] == ["old memory of Ann"]


BAD_INPUTS = {
    "two keys, one day": ({"2023-06-01": [["a", "b"]], "2023-06-01T00:00": [["c", "d"]]}, "names the same day"),
    "week date": ({"2023-W22-4": [["a", "b"]]}, "not a date"),
    "basic format": ({"20230601": [["a", "b"]]}, "not a date"),
    "hour 25": ({"2023-06-01T25:00": [["a", "b"]]}, "not a date"),
    "strength 2**63": (
        {"2023-06-01": [{"query": "q", "response": "r", "memory_strength": 2**63}]},
        "memory_strength must be a whole number from 1 to 2147483647",
    ),
    "lone surrogate": ({"2023-06-01": [{"query": "caf\ud800", "response": "r"}]}, "lone surrogate"),
    "NUL": ({"2023-06-01": [["a\x00b", "r"]]}, "NUL"),
    "too long": ({"2023-06-01": [["x" * 1_000_001, "r"]]}, "the limit is 1,000,000"),
    "two memories, one id": (
        {"2023-06-01": [{"query": "a", "response": "", "memory_id": "k"}, {"query": "b", "response": "", "memory_id": "k"}]},
        "used twice",
    ),
}


@pytest.mark.parametrize("history, match", BAD_INPUTS.values(), ids=list(BAD_INPUTS))
def test_inputs_that_would_fail_while_writing_are_refused_up_front(make_bank, history, match) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    import_data(bank, copy.deepcopy(OLD))
    with pytest.raises(MemoryFileError, match=match):
        import_data(bank, {"Ann": {"history": history}, "Zoe": {"history": {"2023-06-01": [["z", "z"]]}}}, replace=True)
    assert _queries(bank, "Ann") == ["old memory of Ann"]
    assert bank.users() == ["Ann"]  # nothing of the file was written, not even the good user


@pytest.mark.parametrize(
    "raw, match",
    [
        ('{"Ann": {"history": {}}, "Ann": {"history": {}}}', "appears twice"),
        ('{"Ann": {"history": {"2023-06-01": [], "2023-06-01": [["a", "b"]]}}}', "appears twice"),
        ('{"Ann": {"meta_information": ' + "[" * 100_000 + "]" * 100_000 + "}}", "nested too deeply"),
        ('{"Ann": {"history": {"2023-06-01": [["\\ud800", "r"]]}}}', "lone surrogate"),
    ],
    ids=["duplicate user", "duplicate day", "deep JSON", "escaped surrogate"],
)
def test_cli_refuses_bad_files_in_one_line(stores, tmp_path, capsys, raw, match) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "bad.json"
    path.write_text(raw)
    before = path.read_bytes()
    code = main(["import", str(path), "--store", stores.spec, "--encoder", "hashing-64"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("memorybank: error:") and match in err and len(err.strip().splitlines()) == 1
    assert path.read_bytes() == before
    with pytest.raises(MemoryFileError, match=match):
        load_memory_file(path)


def test_a_rerun_finishes_an_interrupted_import_without_replace_or_duplicates(make_bank) -> None:  # type: ignore[no-untyped-def]
    data = {
        u: {"name": u, "history": {"2023-05-01": [[f"{u} likes tea", "ok"], [f"{u} walks", "nice"]]}}
        for u in ("Ann", "Bob", "Cai")
    }
    bank = make_bank()
    bank.add_turn("Dee", "Dee is not in the file", "ok")
    import_data(bank, {"Ann": copy.deepcopy(data["Ann"])})  # the first user of a run that was killed
    counts = import_data(bank, copy.deepcopy(data))  # the same command again, no --replace
    assert counts == {"Bob": 2, "Cai": 2}  # Ann was already whole: skipped
    out = export_data(bank)
    assert {u: out[u] for u in data} == data
    assert sorted(bank.users()) == ["Ann", "Bob", "Cai", "Dee"]
    assert sum(len(bank.history(u)) for u in data) == 6  # nothing twice
    import_data(bank, copy.deepcopy(data), replace=True)
    assert _queries(bank, "Dee") == ["Dee is not in the file"]  # --replace touches only the file's users


def test_reimport_of_a_user_who_changed_since_still_needs_replace(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    import_data(bank, copy.deepcopy(OLD))
    bank.add_turn("Ann", "a new turn after the import", "ok")
    assert import_data(bank, copy.deepcopy(OLD)) == {}  # the same record: already imported, skipped
    assert len(bank.history("Ann")) == 2  # and the new turn is still there
    changed = json.loads(json.dumps(OLD).replace("old memory", "other memory"))
    with pytest.raises(ValueError, match="--replace"):
        import_data(bank, changed)


def test_a_user_written_while_an_import_embeds_is_kept_not_replaced(make_bank, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """An import checks for the user before it embeds, which takes minutes for a long history;
    a chat's first turn or another import of the user meanwhile was wiped by the import's
    write, which reported success."""
    importer, app = make_bank(), make_bank()  # two processes on one store
    embed = importer._embed

    def embed_while_the_user_chats(texts: list[str], **kwargs: Any) -> Any:
        if not app.has_user("Ann"):
            app.add_turn("Ann", "I just told the app about my cat Miso.", "Lovely!")
        return embed(texts, **kwargs)

    monkeypatch.setattr(importer, "_embed", embed_while_the_user_chats)
    with pytest.raises(Exception, match="already has memories in this store"):
        import_data(importer, _file([{"query": f"imported {i}", "response": "ok"} for i in range(5)]))
    assert _queries(make_bank(), "Ann") == ["I just told the app about my cat Miso."]
