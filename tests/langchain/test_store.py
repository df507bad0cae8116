"""MemoryBankStore against the behaviours LangGraph's own store tests check.

LangGraph ships no packaged conformance suite for ``BaseStore``; the behaviours below are the ones
its store tests check, read from langchain-ai/langgraph ``libs/checkpoint/tests/test_store.py``
(list_namespaces basic / wildcards / pagination / max_depth, empty namespaces refused, vector
search with filters and pagination, non-ASCII text) and ``libs/checkpoint-sqlite/tests/test_store.py``
(test_batch_order, test_batch_get_ops, test_batch_put_ops, test_batch_search_ops,
test_batch_list_namespaces_ops, test_basic_store_operations, test_vector_search_with_filters,
test_vector_search_pagination, test_vector_search_edge_cases, test_search_items, test_non_ascii,
filter operators). Our namespaces name users, so the upstream namespaces become
``("memories", user)`` / ``(user,)``, and what upstream checks across namespaces is checked
across users (which must never see each other's items).
"""

from __future__ import annotations

import datetime as dt

import pytest
from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, PutOp, SearchOp

from memory_bank import InvalidInputError, MemoryBank, MemoryKind
from memory_bank.langchain import MemoryBankStore
from tests.conftest import FixedClock

ANN, BOB = ("memories", "Ann"), ("memories", "Bob")


@pytest.fixture
def store(bank: MemoryBank) -> MemoryBankStore:
    return MemoryBankStore(bank)


def test_basic_operations(store: MemoryBankStore, clock: FixedClock) -> None:
    assert store.search(ANN) == []
    value = {"title": "Test Document", "content": "Hello, World!"}
    store.put(ANN, "doc1", value)
    item = store.get(ANN, "doc1")
    assert item is not None and (item.namespace, item.key, item.value) == (ANN, "doc1", value)
    assert item.created_at.tzinfo is not None and item.updated_at >= item.created_at
    clock.advance(minutes=5)
    store.put(ANN, "doc1", {"title": "Updated", "content": "Hello, LangGraph!"})
    updated = store.get(ANN, "doc1")
    assert updated is not None and updated.value == {"title": "Updated", "content": "Hello, LangGraph!"}
    assert updated.updated_at > item.updated_at and updated.created_at == item.created_at
    assert store.get(BOB, "doc1") is None  # another user's namespace
    same = store.get(("Ann",), "doc1")  # (user,) names the same user
    assert same is not None and (same.namespace, same.value) == (("Ann",), updated.value)
    store.put(ANN, "doc2", {"content": "Greetings!"})
    assert {i.key for i in store.search(ANN, limit=10)} == {"doc1", "doc2"}
    assert ANN in store.list_namespaces(prefix=("memories",))
    store.delete(ANN, "doc1")
    store.delete(ANN, "doc2")
    store.delete(ANN, "never-there")  # deleting a missing key is a no-op, as upstream
    assert store.get(ANN, "doc1") is None and store.search(ANN, limit=10) == []


def test_a_put_is_a_dated_memory_of_the_user(store: MemoryBankStore, bank: MemoryBank) -> None:
    store.put(ANN, "cat", {"content": "Ann's cat is called Miso.", "topic": "pets"})
    [memory] = bank.history("Ann")
    assert (memory.memory_id, memory.kind, memory.date, memory.text) == (
        "cat", MemoryKind.TURN, "2023-05-01", "Ann's cat is called Miso."
    )
    assert bank.search("Ann", "what is the cat called", k=1)[0].memory.memory_id == "cat"
    bank.add_turn("Ann", "I started pottery.", "Fun!")  # a chat turn is an item too
    [chat] = [i for i in store.search(ANN) if i.key != "cat"]
    assert chat.value == {"content": "I started pottery.\nFun!", "kind": "turn", "date": "2023-05-01"}


def test_batch_order(store: MemoryBankStore) -> None:
    store.put(ANN, "key1", {"data": "value1"})
    store.put(BOB, "key2", {"data": "value2"})
    results = store.batch(
        [
            GetOp(ANN, "key1"),
            PutOp(BOB, "key2", {"data": "value2"}),
            SearchOp(ANN, filter={"data": "value1"}, limit=10, offset=0),
            ListNamespacesOp(match_conditions=(), max_depth=None, limit=10, offset=0),
            GetOp(ANN, "key3"),
        ]
    )
    assert len(results) == 5
    assert results[0] is not None and results[0].value == {"data": "value1"}  # type: ignore[union-attr]
    assert results[1] is None
    assert [i.key for i in results[2]] == ["key1"]  # type: ignore[union-attr]
    assert ANN in results[3] and BOB in results[3]  # type: ignore[operator]
    assert results[4] is None
    reordered = store.batch(
        [
            SearchOp(ANN, filter=None, limit=5, offset=0),
            PutOp(ANN, "key3", {"data": "value3"}),
            GetOp(ANN, "key3"),  # a put is seen by the operations after it
        ]
    )
    assert [i.key for i in reordered[0]] == ["key1"]  # type: ignore[union-attr]
    assert reordered[1] is None and reordered[2].value == {"data": "value3"}  # type: ignore[union-attr]


async def test_async_twins(store: MemoryBankStore) -> None:
    await store.aput(ANN, "k", {"content": "Ann plays the cello."})
    item = await store.aget(ANN, "k")
    assert item is not None and item.value["content"] == "Ann plays the cello."
    hits = await store.asearch(ANN, query="cello")
    assert [h.key for h in hits] == ["k"]
    assert await store.alist_namespaces() == [ANN]
    await store.adelete(ANN, "k")
    assert await store.aget(ANN, "k") is None


def test_batch_put_with_none_deletes(store: MemoryBankStore) -> None:
    store.put(ANN, "key3", {"data": "old"})
    results = store.batch(
        [PutOp(ANN, "key1", {"data": "value1"}), PutOp(ANN, "key2", {"data": "value2"}), PutOp(ANN, "key3", None)]
    )
    assert results == [None, None, None]
    assert store.get(ANN, "key1").value == {"data": "value1"}  # type: ignore[union-attr]
    assert store.get(ANN, "key3") is None


def test_search_filters_limits_and_offsets(store: MemoryBankStore) -> None:
    docs = [
        ("doc1", {"content": "red apple", "color": "red", "score": 4.5, "tags": ["fruit"]}),
        ("doc2", {"content": "red car", "color": "red", "score": 3.0, "tags": ["vehicle"]}),
        ("doc3", {"content": "green apple", "color": "green", "score": 4.0, "tags": ["fruit"]}),
        ("doc4", {"content": "blue car", "color": "blue", "score": 3.5, "meta": {"owner": "Ann"}}),
    ]
    for key, value in docs:
        store.put(ANN, key, value)
    assert {i.key for i in store.search(ANN, query="apple", filter={"color": "red"})} == {"doc1", "doc2"}
    assert store.search(ANN, query="car", filter={"color": "red"})[0].key == "doc2"
    high = store.search(ANN, query="blue car", filter={"score": {"$gt": 3.2}})
    assert high[0].key == "doc4" and {i.key for i in high} == {"doc1", "doc3", "doc4"}
    both = store.search(ANN, query="apple", filter={"score": {"$gte": 4.0}, "color": "green"})
    assert [i.key for i in both] == ["doc3"]
    assert {i.key for i in store.search(ANN, filter={"tags": ["fruit"]})} == {"doc1", "doc3"}
    assert [i.key for i in store.search(ANN, filter={"meta": {"owner": "Ann"}})] == ["doc4"]
    assert {i.key for i in store.search(ANN, filter={"color": {"$ne": "red"}})} == {"doc3", "doc4"}
    assert {i.key for i in store.search(ANN, filter={"score": {"$lt": 3.5}})} == {"doc2"}
    with pytest.raises(InvalidInputError, match=r"\$regex"):
        store.search(ANN, filter={"color": {"$regex": "r.*"}})
    first, second = store.search(ANN, limit=2), store.search(ANN, limit=2, offset=2)
    assert len(first) == len(second) == 2 and {i.key for i in first}.isdisjoint({i.key for i in second})
    assert len(store.search(ANN)) == 4 and store.search(ANN, limit=0) == []


def test_query_search_pages_and_scores(store: MemoryBankStore) -> None:
    for i in range(5):
        store.put(ANN, f"doc{i}", {"content": f"test document number {i}"})
    page1, page2 = store.search(ANN, query="test", limit=2), store.search(ANN, query="test", limit=2, offset=2)
    assert len(page1) == len(page2) == 2 and {i.key for i in page1}.isdisjoint({i.key for i in page2})
    every = store.search(ANN, query="test document", limit=10)
    assert len(every) == 5 and all(i.score is not None for i in every)
    scores = [i.score or 0.0 for i in every]
    assert scores == sorted(scores, reverse=True)
    assert [i.key for i in every[:2]] == [i.key for i in store.search(ANN, query="test document", limit=2)]


def test_query_edge_cases(store: MemoryBankStore) -> None:
    store.put(ANN, "doc1", {"content": "test document"})
    for query in ("", None, "test " * 100, "test!@#$%^&*()"):
        assert [i.key for i in store.search(ANN, query=query)] == ["doc1"]


def test_non_ascii(store: MemoryBankStore) -> None:
    store.put(ANN, "zh", {"content": "我的猫叫米索，它喜欢晒太阳。"})
    store.put(ANN, "ja", {"content": "私の猫はミソです"})
    assert store.get(ANN, "zh").value["content"] == "我的猫叫米索，它喜欢晒太阳。"  # type: ignore[union-attr]
    assert store.search(ANN, query="我的猫叫什么")[0].key == "zh"
    store.put(("memories", "李雷"), "k", {"content": "李雷喜欢打篮球。"})
    assert store.get(("李雷",), "k") is not None


def test_list_namespaces(store: MemoryBankStore) -> None:
    for user in ("Ann", "Bob", "Chen"):
        store.put(("memories", user), "k", {"content": f"{user} likes tea"})
    assert store.list_namespaces() == [("memories", "Ann"), ("memories", "Bob"), ("memories", "Chen")]
    assert store.list_namespaces(prefix=("memories", "Bob")) == [BOB]
    assert store.list_namespaces(suffix=("Chen",)) == [("memories", "Chen")]
    assert len(store.list_namespaces(prefix=("*", "*"))) == 3
    assert store.list_namespaces(prefix=("other",)) == []
    assert store.list_namespaces(max_depth=1) == [("memories",)]
    assert store.list_namespaces(limit=2) == [ANN, BOB]
    assert store.list_namespaces(offset=2) == [("memories", "Chen")]
    batch = store.batch(
        [ListNamespacesOp(match_conditions=(MatchCondition("suffix", ("Ann",)),), max_depth=None, limit=10)]
    )
    assert batch == [[ANN]]


def test_users_never_see_each_other(store: MemoryBankStore) -> None:
    store.put(ANN, "cat", {"content": "My cat is called Miso."})
    store.put(BOB, "cat", {"content": "My cat is called Tiger."})
    assert store.get(ANN, "cat").value["content"] == "My cat is called Miso."  # type: ignore[union-attr]
    assert [i.value["content"] for i in store.search(BOB, query="cat")] == ["My cat is called Tiger."]
    store.delete(BOB, "cat")
    assert store.get(ANN, "cat") is not None
    assert store.search(("memories", "Nobody"), query="cat") == []


@pytest.mark.parametrize("namespace", [("memories",), ("a", "b", "c"), ("memories", "Ann", "notes")])
def test_a_namespace_that_names_no_user_is_an_error(store: MemoryBankStore, namespace: tuple[str, ...]) -> None:
    with pytest.raises(InvalidInputError, match="namespace_user"):
        store.put(namespace, "k", {"content": "x"})
    with pytest.raises(InvalidInputError, match="which user"):
        store.search(namespace, query="x")  # no search spans users
    with pytest.raises(Exception, match="empty"):
        store.put((), "k", {"content": "x"})


def test_a_mapping_function_and_field_choices(bank: MemoryBank) -> None:
    store = MemoryBankStore(
        bank,
        text_field="memory",
        namespace_user=lambda ns: ns[1] if ns[:1] == ("tenant-a",) else "",
        user_namespace=lambda user: ("tenant-a", user),
    )
    store.put(("tenant-a", "Ann"), "k1", {"memory": "Ann likes green tea."})
    store.put(("tenant-a", "Ann"), "k2", {"memory": "x", "note": "Ann is a nurse."}, index=["note"])
    store.put(("tenant-a", "Ann"), "k3", {"kind": "Memory", "memory": {"fact": "Ann has two sisters"}})
    assert {m.text for m in bank.history("Ann")} == {
        "Ann likes green tea.", "Ann is a nurse.", '{"fact": "Ann has two sisters"}'
    }
    assert store.list_namespaces() == [("tenant-a", "Ann")]
    with pytest.raises(InvalidInputError):
        store.put(("tenant-b", "Ann"), "k", {"memory": "x"})
    with pytest.raises(InvalidInputError, match="no text"):
        store.put(("tenant-a", "Ann"), "k4", {})


def test_ttl_maps_onto_forgetting_and_reinforcement(bank: MemoryBank, clock: FixedClock) -> None:
    store = MemoryBankStore(bank)
    store.put(ANN, "cello", {"content": "Ann plays the cello."})
    for _ in range(3):
        store.search(ANN, query="cello")
    strength = {m.memory_id: m.strength for m, _ in bank.memories("Ann")}
    assert strength["cello"] == 2  # a search recalls, at most once a day
    clock.advance(days=1)
    store.search(ANN, query="cello", refresh_ttl=False)
    store.get(ANN, "cello")
    MemoryBankStore(bank, ttl={"refresh_on_read": False}).search(ANN, query="cello")
    assert {m.memory_id: m.strength for m, _ in bank.memories("Ann")}["cello"] == 2
    with pytest.raises(InvalidInputError, match="Ebbinghaus"):
        store.put(ANN, "k", {"content": "x"}, ttl=60)
    with pytest.raises(InvalidInputError, match="default_ttl"):
        MemoryBankStore(bank, ttl={"default_ttl": 60})
    bank.archive("Ann", ["cello"])  # what forgetting does to a faded memory
    assert store.get(ANN, "cello") is None and store.search(ANN, query="cello") == []


def test_created_at_of_a_chat_turn_is_when_it_happened(store: MemoryBankStore, bank: MemoryBank) -> None:
    bank.add_turn("Ann", "Back from Lyon.", "Welcome back!", at="2023-04-20T18:30")
    [item] = store.search(ANN)
    assert item.created_at == dt.datetime(2023, 4, 20, 18, 30, tzinfo=dt.timezone.utc)


def test_a_forgotten_item_is_written_again_by_a_put_and_deleted_by_a_delete(bank: MemoryBank) -> None:
    """An app with fixed keys ("prefs") kept losing every write once the curve forgot the item,
    and a delete left the forgotten text in the store."""
    store = MemoryBankStore(bank)
    store.put(ANN, "prefs", {"content": "Ann likes tea."})
    store.put(ANN, "job", {"content": "Ann is a nurse."})
    bank.archive("Ann", ["prefs", "job"], hidden=False)  # what the daily forgetting pass does
    assert store.get(ANN, "prefs") is None
    assert [i.key for i in store.search(ANN, query="what does Ann drink or do for work?")] == []
    store.put(ANN, "prefs", {"content": "Ann now likes coffee."})
    item = store.get(ANN, "prefs")
    assert item is not None and item.value == {"content": "Ann now likes coffee."}
    assert [i.key for i in store.search(ANN, query="coffee")] == ["prefs"]
    store.delete(ANN, "job")  # forgotten, and deleted for good
    assert {m.memory_id for m, _ in bank.memories("Ann", include_archived=True)} == {"prefs"}


def test_a_key_that_is_a_summary_layers_id_is_refused_and_never_overwritten(bank: MemoryBank) -> None:
    store = MemoryBankStore(bank)
    bank.set_layer("Ann", MemoryKind.GLOBAL_PORTRAIT, "Calm and kind.")
    with pytest.raises(InvalidInputError, match="global portrait; choose another key"):
        store.put(ANN, "Ann_overall_personality", {"content": "Ann's passport is X123."})
    with pytest.raises(InvalidInputError, match="form of the ids the bank gives"):
        store.put(ANN, "Ann_overall_history", {"content": "Ann's passport is X123."})  # no summary yet
    assert bank.layer("Ann", MemoryKind.GLOBAL_PORTRAIT).text == "Calm and kind."  # type: ignore[union-attr]
    assert store.search(ANN) == []


def test_a_value_the_store_cannot_write_is_refused_before_anything_is_written(bank: MemoryBank) -> None:
    store = MemoryBankStore(bank)
    for user, value in (("Ann", {"content": "x", "when": dt.date(2023, 5, 1)}), ("Bob", {"content": "x", "s": {1}})):
        with pytest.raises(InvalidInputError, match="cannot be stored as JSON"):
            store.put(("memories", user), "k", value)
    with pytest.raises(InvalidInputError, match="surrogate"):
        store.put(ANN, "bad\ud800key", {"content": "x"})
    assert bank.users() == []  # no empty user left behind


def test_a_put_never_unhides_and_search_finds_live_items_behind_forgotten_ones(bank: MemoryBank) -> None:
    store = MemoryBankStore(bank)
    store.put(ANN, "health", {"content": "Ann has asthma."})
    bank.archive("Ann", ["health"], hidden=True)  # hidden by the user on purpose
    store.put(ANN, "health", {"content": "Ann has asthma, mild."})
    assert store.get(ANN, "health") is None and store.search(ANN, query="asthma") == []
    for i in range(30):
        store.put(ANN, f"old{i}", {"content": f"Ann played the cello in concert {i}."})
    bank.archive("Ann", [f"old{i}" for i in range(30)], hidden=False)  # forgotten by the curve
    store.put(ANN, "now", {"content": "Ann plays the cello every Sunday."})
    assert [i.key for i in store.search(ANN, query="cello", limit=5)] == ["now"]
    assert [i.key for i in store.search(ANN, query="cello", filter={"content": "Ann plays the cello every Sunday."})] == ["now"]
    bank.set_layer("Ann", MemoryKind.DAILY_SUMMARY, "Ann talked about music.", date="2023-05-01")
    with pytest.raises(InvalidInputError, match="daily summary; choose another key"):
        store.put(ANN, "Ann_2023-05-01_summary", {"content": "x"})
    for bad in ("a\x00b", "line\nbreak"):
        with pytest.raises(InvalidInputError, match="control characters"):
            store.put(ANN, bad, {"content": "x"})
    with pytest.raises(InvalidInputError, match="query must be a string"):
        store.search(ANN, query=5)  # type: ignore[arg-type]


def test_a_key_deleted_then_put_again_is_a_new_item(bank: MemoryBank) -> None:
    """A key-value store's delete does not retire its key (as a replayed turn's id is)."""
    store = MemoryBankStore(bank)
    store.put(ANN, "prefs", {"data": "tea"})
    store.delete(ANN, "prefs")
    store.put(ANN, "prefs", {"data": "coffee"})
    assert store.get(ANN, "prefs").value == {"data": "coffee"}  # type: ignore[union-attr]
    bank.delete_user("Ann")
    store.put(ANN, "prefs", {"data": "water"})  # after the user was deleted: a new start
    assert store.get(ANN, "prefs").value == {"data": "water"}  # type: ignore[union-attr]


def test_a_value_field_removed_by_a_put_leaves_no_copy_in_the_files(bank: MemoryBank) -> None:
    """Removing a field while keeping the text left its old value in the write-ahead log (only a
    changed text was flushed out)."""
    from pathlib import Path

    store = MemoryBankStore(bank)
    store.put(ANN, "profile", {"content": "Ann's contact details", "ssn": "SSN-123-45-6789"})
    store.put(ANN, "profile", {"content": "Ann's contact details"})
    folder = Path(bank.storage.path).parent  # type: ignore[attr-defined]
    assert not [f.name for f in folder.iterdir() if f.is_file() and b"SSN-123-45-6789" in f.read_bytes()]
    assert store.get(ANN, "profile").value == {"content": "Ann's contact details"}  # type: ignore[union-attr]


def test_values_json_cannot_hold_and_filters_that_are_not_dicts_are_clear_errors(store: MemoryBankStore) -> None:
    for value in ({"content": dt.date(2024, 1, 1)}, {"content": {1, 2}}, {"content": b"x"}):
        with pytest.raises(InvalidInputError, match="is not JSON"):
            store.put(ANN, "k", value)
    store.put(ANN, "k", {"content": "tea"})
    with pytest.raises(InvalidInputError, match="filter must be a dict"):
        store.search(ANN, filter=["content"])  # type: ignore[arg-type]
