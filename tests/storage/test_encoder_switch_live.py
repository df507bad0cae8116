"""Another server re-embeds the store with another encoder (``memorybank reembed``) while this
one runs: this one used to keep its old encoder, so its searches read vectors the store no
longer had (nothing found, no error) and its new turns got vectors no search of the store's
encoder finds. Now a bank that follows the store's encoder follows the switch, and one whose
encoder was asked for by name says so and writes nothing. On both backends."""

from __future__ import annotations

import pytest

from memory_bank import MemoryBank, load_config
from memory_bank.embeddings import HashingEncoder
from memory_bank.errors import EncoderMismatchError


def _texts(bank: MemoryBank, query: str) -> list[str]:
    return [r.memory.text for r in bank.search("Ann", query, k=2) if r.score > 0]


def test_a_running_server_follows_another_servers_reembed(make_bank, stores, clock) -> None:  # type: ignore[no-untyped-def]
    make_bank().add_turn("Ann", "I adopted a cat named Miso", "lovely", at="2023-05-01T10:00")
    follower = MemoryBank(load_config(None, store=stores.spec), storage=stores(), clock=clock)
    assert _texts(follower, "cat Miso") == ["I adopted a cat named Miso\nlovely"]  # hashing-64
    switcher = make_bank(encoder=HashingEncoder(32))
    assert switcher.reembed() == 1
    assert _texts(follower, "cat Miso") == ["I adopted a cat named Miso\nlovely"]
    assert follower.encoder_name == "hashing-32"
    follower.add_turn("Ann", "my sister Anna lives in Lyon", "nice", at="2023-05-02T10:00")
    for bank in (switcher, make_bank(encoder=HashingEncoder(32))):  # running, and restarted
        assert _texts(bank, "sister Anna Lyon")[:1] == ["my sister Anna lives in Lyon\nnice"]


def test_a_server_whose_encoder_was_named_refuses_after_a_reembed(make_bank) -> None:  # type: ignore[no-untyped-def]
    named = make_bank()  # given hashing-64 by instance
    named.add_turn("Ann", "I adopted a cat named Miso", "lovely", at="2023-05-01T10:00")
    assert _texts(named, "cat Miso")
    make_bank(encoder=HashingEncoder(32)).reembed()
    with pytest.raises(EncoderMismatchError, match="hashing-32"):
        named.search("Ann", "cat Miso")
    with pytest.raises(EncoderMismatchError, match="reembed"):
        named.add_turn("Ann", "my sister Anna lives in Lyon", "nice", at="2023-05-02T10:00")
    assert [m.text for m in named.history("Ann")] == ["I adopted a cat named Miso\nlovely"]


def test_a_turn_stored_with_the_old_encoder_during_a_reembed_is_embedded_too(make_bank, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    old = make_bank()
    old.add_turn("Ann", "I adopted a cat named Miso", "lovely", at="2023-05-01T10:00")
    switcher = make_bank(encoder=HashingEncoder(32))
    set_meta = switcher.storage.set_meta

    def meanwhile(values, **kw):  # type: ignore[no-untyped-def]  # the old server writes before the switch
        if "encoder" in values:
            old.add_turn("Ann", "my sister Anna lives in Lyon", "nice", at="2023-05-02T10:00")
        set_meta(values, **kw)

    monkeypatch.setattr(switcher.storage, "set_meta", meanwhile)
    assert switcher.reembed() == 2
    assert _texts(make_bank(encoder=HashingEncoder(32)), "sister Anna Lyon")[:1] == [
        "my sister Anna lives in Lyon\nnice"
    ]


def test_an_interrupted_reembed_is_refused_not_searched_and_a_rerun_finishes_it(make_bank) -> None:  # type: ignore[no-untyped-def]
    """A reembed stopped after its first users (Ctrl-C, a kill) left their vectors of the new
    encoder while the store still named the old one: their searches found nothing, with no
    error, until someone ran reembed again. The switch is marked before the first vector: a
    search says what happened and how to finish it, and finishing it finds everything."""
    bank = make_bank()
    for user, text in (("Ann", "I adopted a cat named Miso"), ("Bob", "I play the cello")):
        bank.add_turn(user, text, "lovely", at="2023-05-01T10:00")
    switcher = make_bank(encoder=HashingEncoder(32))
    put = switcher.storage.put_vectors
    calls = []

    def interrupted(*args, **kwargs):  # type: ignore[no-untyped-def]
        if calls:
            raise KeyboardInterrupt
        calls.append(args)
        put(*args, **kwargs)

    switcher.storage.put_vectors = interrupted  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        switcher.reembed(batch_size=1)
    for restarted in (make_bank(), make_bank(encoder=HashingEncoder(32))):
        with pytest.raises(EncoderMismatchError, match=r"memorybank reembed .*--encoder hashing-32"):
            restarted.search("Ann", "cat Miso")
    finisher = make_bank(encoder=HashingEncoder(32))
    assert finisher.reembed() == 1
    assert _texts(finisher, "cat Miso") == ["I adopted a cat named Miso\nlovely"]
    assert [r.memory.text for r in finisher.search("Bob", "cello", k=1)] == ["I play the cello\nlovely"]


def test_a_language_whose_encoder_is_not_the_stores_is_said_not_only_logged(tmp_path, clock, caplog) -> None:  # type: ignore[no-untyped-def]
    """--language zh on a store an English encoder wrote searched Chinese with the English
    encoder and said nothing (an info line for debugging): it is a warning naming the switch."""
    import logging

    MemoryBank.open(tmp_path / "s", clock=clock, encoders={"en": "hashing-64"}).add_turn(
        "Ann", "I adopted a cat", "lovely", at="2023-05-01T10:00"
    )
    with caplog.at_level(logging.WARNING, logger="memory_bank.bank"):
        zh = MemoryBank.open(
            tmp_path / "s", clock=clock, language="zh", encoders={"en": "hashing-64", "zh": "hashing-32"}
        )
        assert zh.encoder.name == "hashing-64"
    assert "using it instead of 'hashing-32' (the zh default)" in caplog.text
    assert "memorybank reembed --store" in caplog.text and "--encoder hashing-32" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="memory_bank.bank"):  # an encoder of the store's own choosing
        chosen = MemoryBank.open(tmp_path / "s", clock=clock, language="zh", encoders={"zh": "hashing-32"})
        assert chosen.encoder.name == "hashing-64"
    assert caplog.text == ""
