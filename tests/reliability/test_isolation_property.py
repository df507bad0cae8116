"""Isolation, property-based: random users, memories and queries through every API never return or
show another user's memory, and every entry point without a user refuses with an error."""

from __future__ import annotations

import json
import types

import gradio as gr
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from memory_bank import MemoryBank, MemoryKind
from memory_bank.cli import main as cli_main
from memory_bank.embeddings import HashingEncoder
from memory_bank.errors import MemoryBankError
from memory_bank.langchain import MemoryBankMemory, MemoryBankMiddleware, MemoryBankRetriever
from silicon_friend.engine import ChatSettings, SiliconFriend
from silicon_friend.models import prepare_model
from silicon_friend.web.app import WebApp
from tests.conftest import FixedClock
from tests.silicon_friend.fakes import EchoChatModel, steps

# Distinct names (no two differ only by case or spaces), each with a marker word only its memories hold.
USERS = ["Ann", "Bob", "Chen Wei", "李雷", "o'neil"]
MARK = {u: f"mark{i}q" for i, u in enumerate(USERS)}
_word = st.text(alphabet="abcdefghijklmnop", min_size=1, max_size=8)
_sentence = st.lists(_word, min_size=1, max_size=6).map(" ".join)
_memories = st.lists(st.tuples(st.sampled_from(USERS), _sentence, _sentence), min_size=1, max_size=12)
_queries = st.lists(st.one_of(_sentence, st.sampled_from(list(MARK.values()))), min_size=1, max_size=3)
SETTINGS = settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

CASES = {"tried": 0}


def _fill(bank: MemoryBank, memories: list[tuple[str, str, str]]) -> dict[str, set[str]]:
    """Store each turn with its owner's marker; give every owner a portrait and summary too."""
    owners: dict[str, set[str]] = {}
    for user, query, response in memories:
        bank.add_turn(user, f"{query} {MARK[user]}", f"{response} {MARK[user]}")
        owners.setdefault(user, set())
    for user in owners:
        bank.set_layer(user, MemoryKind.GLOBAL_PORTRAIT, f"portrait {MARK[user]}")
        bank.set_layer(user, MemoryKind.GLOBAL_SUMMARY, f"summary {MARK[user]}")
        bank.set_layer(
            user, MemoryKind.DAILY_SUMMARY, f"daily {MARK[user]}", date=bank.clock().date().isoformat()
        )
    return owners


def _foreign(user: str, text: str) -> list[str]:
    return [m for u, m in MARK.items() if u != user and m in text]


@SETTINGS
@given(memories=_memories, queries=_queries, k=st.integers(1, 6))
def test_library_and_langchain_apis_never_cross_users(tmp_path_factory, memories, queries, k) -> None:  # type: ignore[no-untyped-def]
    bank = MemoryBank.open(
        tmp_path_factory.mktemp("iso"), clock=FixedClock(), encoder_instance=HashingEncoder(64)
    )
    try:
        owners = _fill(bank, memories)
        for user in USERS:
            for q in queries:
                CASES["tried"] += 1
                if user not in owners:
                    with pytest.raises(MemoryBankError):
                        bank.search(user, q, k=k)
                else:
                    for hit in bank.search(user, q, k=k):
                        assert hit.memory.user == user and not _foreign(user, hit.memory.text)
                docs = MemoryBankRetriever(bank=bank, user=user, k=k).invoke(q)
                assert all(d.metadata["user"] == user and not _foreign(user, d.page_content) for d in docs)
                mem = MemoryBankMemory(bank=bank, user=user, k=k)
                variables = mem.load_memory_variables({"input": q})
                assert not _foreign(user, json.dumps(variables, ensure_ascii=False, default=str))
                mw = MemoryBankMiddleware(bank, user, k=k)
                block = mw.recall(mw.resolve_user(None), q)
                assert not _foreign(user, block)
                if user in owners:
                    assert MARK[user] in block  # the portrait is there: the check can see text
                by_ctx = MemoryBankMiddleware(bank, context_key="user_id", k=k)
                runtime = types.SimpleNamespace(context={"user_id": user})
                assert not _foreign(user, by_ctx.recall(by_ctx.resolve_user(runtime), q))
    finally:
        bank.close()


def test_middleware_in_a_real_agent_sees_only_its_user(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from langchain.agents import create_agent

    bank = MemoryBank.open(tmp_path / "s", clock=FixedClock(), encoder_instance=HashingEncoder(64))
    _fill(bank, [(u, "my pet", "nice pet") for u in USERS])
    for user in USERS:
        model = EchoChatModel(reply="ok then")
        agent = create_agent(model, middleware=[MemoryBankMiddleware(bank, context_key="user_id", k=5)])
        agent.invoke({"messages": [{"role": "user", "content": "my pet"}]}, context={"user_id": user})
        prompt = " ".join(str(m.content) for call in model.calls for m in call["messages"])
        assert MARK[user] in prompt and not _foreign(user, prompt)
        with pytest.raises(MemoryBankError):
            agent.invoke({"messages": [{"role": "user", "content": "my pet"}]}, context={"user_id": ""})
    bank.close()


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(memories=_memories, queries=_queries)
def test_cli_search_and_memories_never_cross_users(tmp_path_factory, capsys, memories, queries) -> None:  # type: ignore[no-untyped-def]
    store = str(tmp_path_factory.mktemp("cli"))
    common = ["--store", store, "--encoder", "hashing", "--language", "en"]
    capsys.readouterr()
    for user, query, response in memories:
        assert cli_main(["add", *common, "--user", user, "--query", f"{query} {MARK[user]}",
                         "--response", f"{response} {MARK[user]}"]) == 0  # fmt: skip
    owners = {u for u, _, _ in memories}
    capsys.readouterr()
    for user in sorted(owners):
        for q in queries:
            CASES["tried"] += 1
            assert cli_main(["search", *common, "--json", "--user", user, q, "--k", "5"]) == 0
            out = capsys.readouterr().out
            hits = json.loads(out)
            assert hits and all(h["user"] == user for h in hits)
            assert not _foreign(user, out)
        assert cli_main(["memories", *common, "--json", "--user", user]) == 0
        out = capsys.readouterr().out
        assert MARK[user] in out and not _foreign(user, out)
        assert cli_main(["export", *common, "--user", user]) == 0
        out = capsys.readouterr().out
        assert MARK[user] in out and not _foreign(user, out)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(memories=_memories, message=_sentence)
def test_engine_prompt_for_one_user_never_holds_another_users_memory(
    tmp_path_factory, memories, message
) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock()
    bank = MemoryBank.open(tmp_path_factory.mktemp("eng"), clock=clock, encoder_instance=HashingEncoder(64))
    try:
        _fill(bank, memories)
        model = EchoChatModel(reply="fine")
        friend = SiliconFriend(
            bank, prepare_model(model, context_tokens=4096), settings=ChatSettings(top_k=5)
        )
        for user in USERS:
            CASES["tried"] += 1
            before = len(model.calls)
            turn = friend.reply(friend.start(user), message)
            assert not turn.failed
            prompt = " ".join(str(m.content) for call in model.calls[before:] for m in call["messages"])
            assert not _foreign(user, prompt), (user, prompt)
            mine = {m.memory_id for m, _ in bank.memories(user)}
            assert set(turn.memories) <= mine
    finally:
        bank.close()


@pytest.mark.parametrize("nobody", [None, "", "   "])
def test_every_entry_point_without_a_user_refuses(tmp_path, capsys, nobody) -> None:  # type: ignore[no-untyped-def]
    bank = MemoryBank.open(tmp_path / "s", clock=FixedClock(), encoder_instance=HashingEncoder(64))
    bank.add_turn("Ann", "secret mark0q", "ok")
    refused = (MemoryBankError, ValidationError)
    with pytest.raises(refused):
        bank.search(nobody, "secret")  # type: ignore[arg-type]
    with pytest.raises(refused):
        MemoryBankRetriever(bank=bank, user=nobody)  # type: ignore[arg-type]
    with pytest.raises(refused):
        MemoryBankMemory(bank=bank, user=nobody)  # type: ignore[arg-type]
    with pytest.raises(refused):
        MemoryBankMiddleware(bank, nobody)
    by_ctx = MemoryBankMiddleware(bank, context_key="user_id")
    for ctx in ({}, {"user_id": nobody}, None):
        with pytest.raises(refused):
            by_ctx.resolve_user(types.SimpleNamespace(context=ctx))  # type: ignore[arg-type]
    friend = SiliconFriend(bank, prepare_model(EchoChatModel(), context_tokens=4096))
    with pytest.raises(refused):
        friend.start(nobody)  # type: ignore[arg-type]
    with pytest.raises(MemoryBankError):
        list(friend.stream(None, "secret"))  # type: ignore[arg-type]
    app = WebApp(friend)
    with pytest.warns(UserWarning):  # refused with a toast
        list(steps(app.send("secret", nobody, 0.7, 0.9, 64, 2, gr.Request())))  # type: ignore[arg-type]
    with pytest.warns(UserWarning):
        assert app.export(nobody, gr.Request()) == gr.update()  # type: ignore[arg-type]
    authed = WebApp(friend, auth=True)
    authed.build()  # the memory tab's components exist
    with pytest.warns(UserWarning):  # no signed-in username: refused, never "Ann"
        shown = authed.memory_tab.memories("Ann", "", "", "all", "all", "", "", 1, gr.Request())  # type: ignore[arg-type]
        assert "mark0q" not in repr(shown)
    bank.close()
    capsys.readouterr()
    store = ["--store", str(tmp_path / "s"), "--encoder", "hashing"]
    for argv in (["search", *store, "secret"], ["search", *store, "--user", nobody or "", "secret"]):
        if nobody is None and "--user" in argv:
            continue
        assert cli_main(argv) == 2
        err = capsys.readouterr().err
        assert "error" in err and "mark0q" not in err
