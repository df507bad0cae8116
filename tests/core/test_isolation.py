"""No search for one user ever returns another user's memory (property-based)."""

from __future__ import annotations

import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_bank import MemoryBank
from memory_bank.embeddings import HashingEncoder

_words = st.text(alphabet=string.ascii_lowercase + "博物馆音乐电影", min_size=1, max_size=8)
_names = st.text(alphabet=string.ascii_letters + " _-.'/中文", min_size=1, max_size=12).filter(lambda s: s.strip())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.lists(st.tuples(_names, st.lists(_words, min_size=1, max_size=6)), min_size=2, max_size=5),
    queries=st.lists(st.lists(_words, min_size=1, max_size=4), min_size=1, max_size=4),
)
def test_search_never_crosses_users(tmp_path_factory, data, queries) -> None:  # type: ignore[no-untyped-def]
    bank = MemoryBank.open(tmp_path_factory.mktemp("iso"), encoder_instance=HashingEncoder(64))
    owner: dict[str, str] = {}
    for name, words in data:
        m = bank.add_turn(name, " ".join(words), "")
        owner[m.memory_id + "@" + str(m.rowid)] = bank.user(name).name
    for name in {bank.user(n).name for n, _ in data}:
        for q in queries:
            for hit in bank.search(name, " ".join(q), k=50):
                assert hit.memory.user == name
                assert owner[hit.memory.memory_id + "@" + str(hit.memory.rowid)] == name
    bank.close()


def test_a_crowded_neighbour_does_not_hide_a_users_memories(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # mem0's post-filtering loses a user's results when another user has many closer memories.
    bank = MemoryBank.open(tmp_path, encoder_instance=HashingEncoder(64))
    for i in range(300):
        bank.add_turn("Crowd", f"pottery class pottery wheel {i}", "")
    bank.add_turn("Solo", "I signed up for a pottery class", "")
    hits = bank.search("Solo", "pottery class pottery wheel", k=5)
    assert [h.memory.user for h in hits] == ["Solo"]
    bank.close()
