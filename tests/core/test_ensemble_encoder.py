"""Encoder ensembles (memory_bank.ensemble_encoder): one vector per text whose inner product is
the weighted mean of the members' cosines, named so a store remembers it, cached member by
member in evaluations."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memory_bank import MemoryBank
from memory_bank.embeddings import HashingEncoder, canonical_name, get_encoder
from memory_bank.ensemble_encoder import EnsembleEncoder, parse_ensemble
from memory_bank.errors import ConfigError, EncoderMismatchError
from memory_bank.evaluation.encoders import CachingEncoder

TEXTS = ["My cat is called Miso.", "I adopted a cat last spring.", "明天的股票市场会下跌吗？", "Bart在圣诞节晚会上跳舞"]


def test_inner_product_is_the_weighted_mean_of_member_cosines() -> None:
    a, b = HashingEncoder(16), HashingEncoder(64)
    ens = EnsembleEncoder([(a, 3.0), (b, 1.0)])
    v = ens.encode(TEXTS)
    assert v.shape == (4, 80) and ens.dim == 80
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-6)
    va, vb = a.encode(TEXTS), b.encode(TEXTS)
    assert np.allclose(v @ v.T, 0.75 * (va @ va.T) + 0.25 * (vb @ vb.T), atol=1e-6)


def test_names_parse_to_normalised_weights_and_one_canonical_name() -> None:
    assert parse_ensemble("minilm") is None
    assert parse_ensemble("minilm+use-multilingual") == [("minilm", 0.5), ("use-multilingual", 0.5)]
    assert parse_ensemble("minilm@3+use-multilingual@1") == [("minilm", 0.75), ("use-multilingual", 0.25)]
    assert canonical_name("hashing@1+hashing-8@1") == "hashing-256+hashing-8"
    assert canonical_name("hashing-8@0.6+hashing-16@0.4") == "hashing-8@0.6+hashing-16@0.4"
    enc = get_encoder("hashing-8@3+hashing@1")
    assert enc.name == canonical_name("hashing-8@3+hashing@1") == "hashing-8@0.75+hashing-256@0.25"


@pytest.mark.parametrize("name", ["minilm+", "minilm@0+hashing", "minilm@x+hashing", "hashing@-1+hashing-8"])
def test_a_bad_ensemble_name_is_one_line_naming_the_fix(name: str) -> None:
    with pytest.raises(ConfigError, match=r"NAME@WEIGHT|two members") as err:
        parse_ensemble(name)
    assert "\n" not in str(err.value) and repr(name) in str(err.value)


def test_a_store_keeps_its_ensemble_and_refuses_a_member_alone(tmp_path: Path) -> None:
    store = tmp_path / "s"
    with MemoryBank.open(store, encoder="hashing-16+hashing-32") as bank:
        bank.add_turn("Ann", "My cat is called Miso.", "Lovely!", at="2023-05-01T10:00")
        bank.add_turn("Ann", "I started learning the guitar.", "Great!", at="2023-05-02T10:00")
        [hit] = bank.search("Ann", "What is my cat called?", k=1, now="2023-05-03")
        assert "Miso" in hit.memory.text
    with MemoryBank.open(store) as bank:  # the language's default gives way to the store's ensemble
        assert bank.encoder.name == "hashing-16+hashing-32"
    with pytest.raises(EncoderMismatchError, match=r"hashing-16\+hashing-32"), MemoryBank.open(
        store, encoder="hashing-16"
    ) as bank:
        bank.search("Ann", "cat", k=1)


def test_an_evaluation_cache_keeps_each_member_apart(tmp_path: Path) -> None:
    ens = CachingEncoder(get_encoder("hashing-16+hashing-32"), tmp_path)
    first = ens.encode(TEXTS)
    ens.save()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["embeddings-hashing-16.npz", "embeddings-hashing-32.npz"]
    alone = CachingEncoder(get_encoder("hashing-32"), tmp_path)  # a member's own run reuses them
    alone.encode(TEXTS)
    assert alone.computed == 0
    again = CachingEncoder(get_encoder("hashing-16+hashing-32"), tmp_path)
    assert np.allclose(again.encode(TEXTS), first) and again.computed == 0
    assert again.name == "hashing-16+hashing-32" and again.dim == 48


@pytest.mark.integration
def test_the_packaged_pair_ranks_a_bilingual_store(tmp_path: Path) -> None:
    """minilm+use-multilingual, the English ensemble measured in README.md (Evaluation)."""
    enc = get_encoder("minilm+use-multilingual")
    assert enc.dim == 384 + 512
    v = enc.encode(["I adopted a cat named Miso.", "My new kitten is called Miso.", "明天的股票市场会下跌吗？"])
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2]
    with MemoryBank.open(tmp_path / "s", encoder="minilm+use-multilingual") as bank:
        bank.add_turn("Ann", "We went to Gulangyu island last weekend.", "Sounds fun!", at="2023-05-01T10:00")
        bank.add_turn("Ann", "I started learning the guitar.", "Great!", at="2023-05-02T10:00")
        [hit] = bank.search("Ann", "Where did I travel recently?", k=1, now="2023-05-03")
        assert "Gulangyu" in hit.memory.text
