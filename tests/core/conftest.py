from __future__ import annotations

import pytest

from memory_bank import MemoryBank
from memory_bank.embeddings import HashingEncoder
from memory_bank.encoder_identity import PROBE_TEXT


class CountingEncoder(HashingEncoder):
    """The hashing encoder, counting how many texts it embedded (memories and queries: the
    store's encoder check embeds one fixed probe sentence, which is not counted)."""

    def __init__(self, dim: int = 256) -> None:
        super().__init__(dim)
        self.calls = 0
        self.texts = 0

    def encode(self, texts):  # type: ignore[no-untyped-def]
        if list(texts) == [PROBE_TEXT]:
            return super().encode(texts)
        self.calls += 1
        self.texts += len(texts)
        return super().encode(texts)


@pytest.fixture
def encoder() -> CountingEncoder:
    return CountingEncoder()


@pytest.fixture
def make_bank(tmp_path, clock, encoder):  # type: ignore[no-untyped-def]
    banks: list[MemoryBank] = []

    def make(store=None, **overrides):  # type: ignore[no-untyped-def]
        bank = MemoryBank.open(store or tmp_path / "store", clock=clock, encoder_instance=encoder, **overrides)
        banks.append(bank)
        return bank

    yield make
    for b in banks:
        b.close()


@pytest.fixture
def bank(make_bank):  # type: ignore[no-untyped-def]
    return make_bank()
