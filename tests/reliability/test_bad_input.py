"""Bad input never crashes with a stack trace, never modifies the input, never loses stored data."""

from __future__ import annotations

import json
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_bank import InvalidInputError, MemoryBank, MemoryBankError, MemoryFileError
from memory_bank.cli import main
from memory_bank.embeddings import HashingEncoder
from memory_bank.original_format import check_memory_data, export_data, import_data, load_memory_file
from tests.conftest import paper_file

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)
_dates = st.sampled_from(["2023-04-27", "2023-05-06", "2023-13-01", "yesterday", ""])
_turn = st.one_of(
    st.fixed_dictionaries({"query": st.text(max_size=20), "response": st.text(max_size=20)}),
    st.lists(st.text(max_size=10), max_size=3),
    _json,
)
_user = st.fixed_dictionaries(
    {},
    optional={
        "name": _json,
        "history": st.one_of(st.dictionaries(_dates, st.lists(_turn, max_size=3), max_size=3), _json),
        "summary": st.one_of(st.dictionaries(_dates, st.one_of(st.text(max_size=10), _json), max_size=2), _json),
        "personality": st.dictionaries(_dates, _json, max_size=2),
        "overall_history": _json,
        "meta_information": _json,
    },
)
_file = st.one_of(st.dictionaries(st.text(max_size=10), _user, max_size=3), _json)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=_file)
def test_importer_fuzz_either_imports_losslessly_or_refuses_clearly(tmp_path_factory, data) -> None:  # type: ignore[no-untyped-def]
    try:
        check_memory_data(data)
    except MemoryFileError as e:
        assert str(e)  # a message naming the problem
        return
    bank = MemoryBank.open(tmp_path_factory.mktemp("fz"), encoder_instance=HashingEncoder(32))
    try:
        import_data(bank, json.loads(json.dumps(data)))
    except InvalidInputError:
        return  # e.g. two keys that collide: refused before anything is written
    finally:
        exported = export_data(bank) if bank.users() else None
        bank.close()
    assert exported is not None or not data


def test_truncated_file_is_refused_and_left_alone(tmp_path) -> None:  # type: ignore[no-untyped-def]
    raw = paper_file("en", "memory").read_bytes()
    bad = tmp_path / "truncated.json"
    bad.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(MemoryFileError, match="not valid JSON"):
        load_memory_file(bad)
    assert bad.read_bytes() == raw[: len(raw) // 2]


def test_failed_import_loses_nothing_already_stored(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bank = MemoryBank.open(tmp_path / "s", encoder_instance=HashingEncoder(32))
    bank.add_turn("Ann", "keep me", "ok")
    with pytest.raises(MemoryFileError):
        import_data(bank, {"Bob": {"history": {"2023-04-27": [{"query": 1}]}}})
    with pytest.raises(InvalidInputError, match="--replace"):
        import_data(bank, {"Ann": {"history": {}}})
    assert [m.query for m in bank.history("Ann")] == ["keep me"]
    assert bank.users() == ["Ann"]
    bank.close()


def test_megabyte_messages(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bank = MemoryBank.open(tmp_path / "s", encoder_instance=HashingEncoder(32))
    big = ("I love long walks by the sea. " * 40_000)[:1_000_000]
    m = bank.add_turn("Ann", big, "That is a lot to read!")
    assert bank.search("Ann", "long walks by the sea", k=1)[0].memory.memory_id == m.memory_id
    with pytest.raises(InvalidInputError, match="limit is 1,000,000"):
        bank.add_turn("Ann", big + big, "")
    assert len(bank.history("Ann")) == 1
    bank.close()


@pytest.mark.parametrize("name", ["../../etc/passwd", "a/b\\c", "..", "名字 with spaces", "x" * 200, "🙂"])
def test_odd_but_valid_names_are_opaque_keys(tmp_path, name) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "s"
    bank = MemoryBank.open(store, encoder_instance=HashingEncoder(32))
    bank.add_turn(name, "hello there", "hi")
    assert bank.search(name, "hello", k=1)[0].memory.user == name
    assert sorted(p.name for p in store.iterdir()) == sorted(
        p.name for p in store.iterdir() if p.name.startswith("memorybank.sqlite3")
    )  # no file named after the user anywhere
    assert not (tmp_path / "etc").exists()
    bank.close()


@pytest.mark.parametrize("name", ["", " ", "\x00", "a\x00b", "tab\tname", "bell\x07", "x" * 201, "\u202eevil"])
def test_bad_names_are_refused(tmp_path, name) -> None:  # type: ignore[no-untyped-def]
    bank = MemoryBank.open(tmp_path / "s", encoder_instance=HashingEncoder(32))
    with pytest.raises(InvalidInputError):
        bank.add_turn(name, "q", "r")
    assert bank.users() == []
    bank.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(args=st.lists(st.text(alphabet=string.printable + "中文\x00", max_size=12), max_size=6))
def test_cli_fuzz_never_tracebacks(tmp_path_factory, capsys, monkeypatch, args) -> None:  # type: ignore[no-untyped-def]
    work = tmp_path_factory.mktemp("cli")
    monkeypatch.chdir(work)  # whatever files the fuzzed flags name land here
    store = str(work / "store")
    for command in ("search", "add", "memories", "forget", "delete", "export"):
        try:
            code = main([command, "--store", store, "--encoder", "hashing", *args])
        except SystemExit as e:  # argparse usage errors
            code = e.code
        except MemoryBankError:  # pragma: no cover - main() must catch these
            pytest.fail("a MemoryBankError escaped main()")
        assert code in (0, 2)
        capsys.readouterr()


@pytest.mark.parametrize("encoder", ["hashing-abc", "hashing-0", "hashing-100000000", "hashing--5"])
def test_odd_hashing_encoder_names_are_one_line(tmp_path, capsys, encoder) -> None:  # type: ignore[no-untyped-def]
    code = main(["add", "--store", str(tmp_path / "s"), "--encoder", encoder, "--user", "Ann", "--query", "hi"])
    err = capsys.readouterr().err
    assert code == 2 and "whole number from 1 to 4096" in err and len(err.strip().splitlines()) == 1


def test_the_environments_mistakes_are_one_line_and_an_empty_user_exports_nobody(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    store = str(tmp_path / "s")
    common = ["--store", store, "--encoder", "hashing-32"]
    for user in ("Alice", "Bob"):
        assert main(["add", *common, "--user", user, "--query", f"{user} likes tea"]) == 0
    (tmp_path / "a_file").write_text("not a folder")
    runs = {
        "empty user": ["export", *common, "--user", "", "--out", str(tmp_path / "out.json")],  # an unset $NAME
        "export through a file": ["export", *common, "--out", str(tmp_path / "a_file" / "out.json")],
        "backup through a file": ["backup", "--store", store, "--out", str(tmp_path / "a_file" / "b.mbk")],
        "negative seed": ["forget", *common, "--user", "Alice", "--policy", "stochastic", "--seed", "-5"],
        "a day before 1970": ["forget", *common, "--user", "Alice", "--policy", "stochastic", "--seed", "3", "--now", "1960-01-01"],
    }
    codes = {}
    for what, argv in runs.items():
        codes[what] = main(argv)
        err = capsys.readouterr().err
        assert "Traceback" not in err and len(err.strip().splitlines()) <= 1, (what, err)
    assert codes == {"empty user": 2, "export through a file": 2, "backup through a file": 2, "negative seed": 0, "a day before 1970": 0}
    assert not (tmp_path / "out.json").exists()
