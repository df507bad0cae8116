"""LangChain's standard retriever suite (langchain-tests) on MemoryBankRetriever."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_tests.integration_tests import RetrieversIntegrationTests

from memory_bank import MemoryBank
from memory_bank.embeddings import HashingEncoder
from memory_bank.langchain import MemoryBankRetriever


# pyproject sets no asyncio_mode, so the suite's async test needs the mark; the sync tests it also
# reaches only warn about it.
@pytest.mark.asyncio
@pytest.mark.filterwarnings("ignore:The test <Function .* is marked with '@pytest.mark.asyncio'")
class TestMemoryBankRetrieverStandard(RetrieversIntegrationTests):
    bank: MemoryBank

    @pytest.fixture(autouse=True)
    def _bank(self, tmp_path) -> Iterator[None]:  # type: ignore[no-untyped-def]
        self.bank = MemoryBank.open(tmp_path / "store", encoder_instance=HashingEncoder(256))
        for i, (q, r) in enumerate(
            [
                ("I adopted a cat named Miso.", "What a lovely name!"),
                ("My cat Miso likes tuna.", "Cats love fish."),
                ("I start a pottery class on Monday.", "Have fun!"),
                ("My sister Anna lives in Lyon.", "Do you visit her often?"),
            ]
        ):
            self.bank.add_turn("Emily", q, r, at=f"2023-05-0{i + 1}T10:00")
        self.bank.add_turn("Jason", "My dog is called Rex.", "Nice!", at="2023-05-01T10:00")
        yield
        self.bank.close()

    @property
    def retriever_constructor(self) -> type[MemoryBankRetriever]:
        return MemoryBankRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"bank": self.bank, "user": "Emily"}

    @property
    def retriever_query_example(self) -> str:
        return "What is my cat called?"
