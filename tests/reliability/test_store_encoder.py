"""A store remembers the encoder its vectors come from (issue 15, item 6): a search or an add
with another encoder is never a silent ``[]`` or a store of mixed vectors. An encoder asked for
by name that is not the store's is refused with one line naming the store's encoder and the
fix (CLI: exit 2); the language's default encoder gives way to the store's own; a model changed
under the same name is told apart by its fingerprint; an encoder that cannot load leaves no
empty user behind (item 4)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from memory_bank import MemoryBank, MemoryKind
from memory_bank.cli import main
from memory_bank.embeddings import HashingEncoder
from memory_bank.encoder_identity import DIM_KEY, NAME_KEY, PROBE_KEY
from memory_bank.errors import ConfigError, EncoderMismatchError
from memory_bank.langchain import MemoryBankRetriever
from memory_bank.stores.sqlite import DB_FILENAME


def _store(tmp_path: Path, dim: int = 32) -> Path:
    store = tmp_path / "s"
    with MemoryBank.open(store, encoder_instance=HashingEncoder(dim)) as bank:
        bank.add_turn("Ann", "My cat is called Miso.", "Lovely!", at="2023-05-01T10:00")
    return store


def _meta(store: Path) -> dict[str, str]:
    con = sqlite3.connect(store / DB_FILENAME)
    try:
        return dict(con.execute("SELECT key, value FROM meta").fetchall())
    finally:
        con.close()


class OtherHashing(HashingEncoder):
    """Another model that calls itself ``hashing-32`` (a checkpoint replaced in place)."""

    def encode(self, texts):  # type: ignore[no-untyped-def]
        return np.ascontiguousarray(super().encode(texts)[:, ::-1])


def test_the_store_records_its_encoder_with_the_first_vectors(tmp_path: Path) -> None:
    store = tmp_path / "s"
    with MemoryBank.open(store, encoder_instance=HashingEncoder(32)) as bank:
        bank.set_layer("Ann", MemoryKind.GLOBAL_PORTRAIT, "Warm.")  # no vector: nothing recorded
        assert NAME_KEY not in _meta(store)
        bank.add_turn("Ann", "My cat is called Miso.", "Lovely!")
    meta = _meta(store)
    assert (meta[NAME_KEY], meta[DIM_KEY]) == ("hashing-32", "32")
    assert len(json.loads(meta[PROBE_KEY])) == 32


def test_cli_search_with_another_encoder_is_one_line_naming_the_store_encoder(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    store = _store(tmp_path)
    code = main(["search", "--store", str(store), "--encoder", "hashing-64", "--user", "Ann", "my cat"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert "'hashing-32' (32-d)" in err and "--encoder hashing-32" in err and "reembed" in err
    code = main(["add", "--store", str(store), "--encoder", "hashing-64", "--user", "Ann", "--query", "x"])
    assert code == 2 and "'hashing-32'" in capsys.readouterr().err
    with MemoryBank.open(store, encoder_instance=HashingEncoder(32)) as bank:
        assert [m.query for m in bank.history("Ann")] == ["My cat is called Miso."]  # nothing written


def test_without_an_encoder_flag_the_store_encoder_is_used(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """What the issue saw: a store imported with --language zh and searched without it. The
    language's default encoder (here: minilm, not even loaded) gives way to the store's."""
    store = _store(tmp_path)
    assert main(["search", "--store", str(store), "--user", "Ann", "--json", "my cat"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert [h["text"] for h in hits] == ["My cat is called Miso.\nLovely!"]
    for language in ("zh", "en"):
        with MemoryBank.open(store, language=language) as bank:
            assert bank.encoder.name == "hashing-32"
            assert bank.search("Ann", "my cat", k=1)


def test_library_api_refuses_another_encoder_and_writes_nothing(tmp_path: Path) -> None:
    store = _store(tmp_path)
    with MemoryBank.open(store, encoder="hashing-64") as bank:
        with pytest.raises(EncoderMismatchError, match=r"'hashing-32' \(32-d\), not 'hashing-64'"):
            bank.search("Ann", "my cat")
        with pytest.raises(EncoderMismatchError):
            bank.add_turn("Bob", "hello", "hi")
        assert not bank.has_user("Bob")  # the refused add created no user
    with MemoryBank.open(store, encoder_instance=HashingEncoder(64)) as bank, pytest.raises(EncoderMismatchError):
        bank.search("Ann", "my cat")


def test_a_model_changed_under_the_same_name_is_told_apart(tmp_path: Path) -> None:
    store = _store(tmp_path)
    with MemoryBank.open(store, encoder_instance=OtherHashing(32)) as bank:
        with pytest.raises(EncoderMismatchError, match="another model"):
            bank.search("Ann", "my cat")
        assert bank.reembed() == 1  # re-embeds everything, though the name is the same
        assert bank.search("Ann", "my cat", k=1)
    with MemoryBank.open(store, encoder_instance=HashingEncoder(32)) as bank, pytest.raises(
        EncoderMismatchError, match="another model"
    ):
        bank.search("Ann", "my cat")


def test_an_older_store_adopts_the_encoder_its_vectors_name(tmp_path: Path) -> None:
    store = _store(tmp_path)
    con = sqlite3.connect(store / DB_FILENAME)
    con.execute("DELETE FROM meta WHERE key IN (?, ?, ?)", (NAME_KEY, DIM_KEY, PROBE_KEY))
    con.commit()
    con.close()
    with MemoryBank.open(store, encoder="hashing-64") as bank, pytest.raises(EncoderMismatchError, match="hashing-32"):
        bank.search("Ann", "my cat")
    with MemoryBank.open(store) as bank:  # no encoder asked for: the vectors' one
        assert bank.search("Ann", "my cat", k=1)
        bank.add_turn("Ann", "Miso sleeps all day.", "Cats do.", at="2023-05-01T10:05")
    assert _meta(store)[NAME_KEY] == "hashing-32" and PROBE_KEY in _meta(store)


def test_langchain_retriever_raises_the_mismatch(tmp_path: Path) -> None:
    store = _store(tmp_path)
    with MemoryBank.open(store, encoder="hashing-64") as bank:
        retriever = MemoryBankRetriever(bank=bank, user="Ann", k=1)
        with pytest.raises(EncoderMismatchError, match="hashing-32"):
            retriever.invoke("my cat")
    with MemoryBank.open(store) as bank:
        assert [d.page_content for d in MemoryBankRetriever(bank=bank, user="Ann", k=1).invoke("my cat")]


def test_an_encoder_that_cannot_load_leaves_no_user(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "s"
    code = main(["add", "--store", str(store), "--encoder", "hashing-abc", "--user", "Bob", "--query", "hi"])
    assert code == 2 and "hashing-abc" in capsys.readouterr().err
    with MemoryBank.open(store, encoder="hashing-99999") as bank:
        for write in (
            lambda: bank.add_turn("Bob", "hi"),
            lambda: bank.set_layer("Bob", MemoryKind.DAILY_SUMMARY, "A day.", date="2023-05-01"),
        ):
            with pytest.raises(ConfigError, match="hashing-99999"):
                write()
        assert bank.users() == []
