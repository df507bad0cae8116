"""MemoryBankRetriever: documents, k, reinforcement, isolation, new users, async."""

from __future__ import annotations

import pytest

from memory_bank import InvalidInputError, MemoryBank, MemoryKind
from memory_bank.langchain import MemoryBankRetriever, as_retriever


def _strengths(bank: MemoryBank, user: str) -> dict[str, int]:
    return {m.memory_id: m.strength for m, _ in bank.memories(user)}


@pytest.fixture
def emily(bank: MemoryBank) -> MemoryBank:
    bank.add_turn("Emily", "I adopted a cat named Miso.", "What a lovely name!", at="2023-04-30T18:00")
    bank.add_turn("Emily", "I start a pottery class on Monday.", "Have fun!", at="2023-05-01T09:00")
    bank.add_turn("Emily", "My sister Anna lives in Lyon.", "Do you visit her?", at="2023-05-01T10:00")
    return bank


def test_documents_carry_the_memory_and_its_metadata(emily: MemoryBank) -> None:
    docs = as_retriever(emily, "Emily", k=1).invoke("What is my cat called?")
    assert len(docs) == 1
    doc = docs[0]
    assert doc.page_content == "I adopted a cat named Miso.\nWhat a lovely name!"
    assert doc.id == doc.metadata["memory_id"] == "Emily_2023-04-30_0"
    meta = doc.metadata
    assert (meta["user"], meta["kind"], meta["date"], meta["turn"]) == ("Emily", "turn", "2023-04-30", 0)
    assert meta["score"] > 0 and 0 < meta["retention"] <= 1
    assert meta["strength"] == 2  # recalled by this very retrieval


def test_k_at_construction_and_at_invoke(emily: MemoryBank) -> None:
    retriever = MemoryBankRetriever(bank=emily, user="Emily")
    assert len(retriever.invoke("cat")) == emily.config.retrieval.top_k == 2
    assert len(retriever.invoke("cat", k=3)) == 3
    assert len(MemoryBankRetriever(bank=emily, user="Emily", k=1).invoke("cat")) == 1


def test_recalled_memories_gain_strength(emily: MemoryBank) -> None:
    before = _strengths(emily, "Emily")
    hit = as_retriever(emily, "Emily", k=1).invoke("What is my cat called?")[0].metadata["memory_id"]
    after = _strengths(emily, "Emily")
    assert after[hit] == before[hit] + 1
    assert {i: s for i, s in after.items() if i != hit} == {i: s for i, s in before.items() if i != hit}
    recalled = {m.memory_id: m.last_recall_date for m, _ in emily.memories("Emily")}
    assert recalled[hit] == "2023-05-01"  # the bank's clock


def test_no_strength_change_when_reinforcement_is_off(emily: MemoryBank) -> None:
    before = _strengths(emily, "Emily")
    as_retriever(emily, "Emily", k=3, reinforce=False).invoke("cat")
    as_retriever(emily, "Emily", k=3).invoke("cat", reinforce=False)  # per call
    assert _strengths(emily, "Emily") == before


def test_two_users_never_see_each_other(emily: MemoryBank) -> None:
    emily.add_turn("Jason", "My cat is called Tiger.", "Great name!", at="2023-05-01T11:00")
    for user, other in (("Emily", "Jason"), ("Jason", "Emily")):
        docs = as_retriever(emily, user, k=10).invoke("What is my cat called?")
        assert docs and {d.metadata["user"] for d in docs} == {user}
        assert not any(d.id and d.id.startswith(other) for d in docs)


def test_a_new_user_gets_nothing_rather_than_an_error(emily: MemoryBank) -> None:
    assert as_retriever(emily, "Newcomer").invoke("What is my cat called?") == []
    assert not emily.has_user("Newcomer")
    assert as_retriever(emily, "Emily").invoke("   ") == []


@pytest.mark.parametrize("user", [None, "", "   "])
def test_a_user_is_required(emily: MemoryBank, user: str | None) -> None:
    with pytest.raises(ValueError, match="user"):
        MemoryBankRetriever(bank=emily, user=user)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="user"):
        as_retriever(emily, user)  # type: ignore[arg-type]


def test_unknown_invoke_arguments_are_rejected(emily: MemoryBank) -> None:
    with pytest.raises(TypeError, match="top_k"):
        as_retriever(emily, "Emily").invoke("cat", top_k=3)


def test_kinds_restrict_the_search(emily: MemoryBank) -> None:
    emily.set_layer("Emily", MemoryKind.DAILY_SUMMARY, "Emily talked about her cat Miso.", date="2023-04-30")
    docs = as_retriever(emily, "Emily", k=5, kinds=(MemoryKind.DAILY_SUMMARY,)).invoke("cat Miso")
    assert [d.metadata["kind"] for d in docs] == ["daily_summary"]


async def _ainvoke(retriever: MemoryBankRetriever, query: str) -> list[str]:
    return [d.page_content for d in await retriever.ainvoke(query, k=1)]


@pytest.mark.asyncio
async def test_async_invoke(emily: MemoryBank) -> None:
    retriever = as_retriever(emily, "Emily")
    assert await _ainvoke(retriever, "What is my cat called?") == [
        "I adopted a cat named Miso.\nWhat a lovely name!"
    ]


def test_invalid_k_is_rejected(emily: MemoryBank) -> None:
    with pytest.raises(ValueError):
        MemoryBankRetriever(bank=emily, user="Emily", k=0)
    with pytest.raises(InvalidInputError):
        as_retriever(emily, "Emily").invoke("cat", k=0)


def test_a_query_or_k_that_is_not_one_is_a_clear_error(emily: MemoryBank) -> None:
    retriever = as_retriever(emily, "Emily")
    for query in (None, 42):
        with pytest.raises(InvalidInputError, match="query must be a string"):
            retriever.invoke(query)  # type: ignore[arg-type]
    for k in (float("nan"), float("inf"), "many"):
        with pytest.raises(InvalidInputError, match="k must be a whole number"):
            emily.search("Emily", "cat", k=k)  # type: ignore[arg-type]
