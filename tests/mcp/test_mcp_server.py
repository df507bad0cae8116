"""``memorybank mcp`` with the official MCP SDK's own client: a real stdio session that saves,
searches, lists, deletes and reads the profile; two users' servers on one store never see each
other's memories; over HTTP, the bearer token decides the user, and a request without a valid
token or from a foreign Host/Origin is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from memory_bank import MemoryBank, MemoryKind
from memory_bank.embeddings import HashingEncoder
from tests.conftest import REPO, free_port

pytest.importorskip("mcp", reason="the MCP server needs the mcp package (pip install mcp)")

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

ENV = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
# As the `memorybank` script runs it (python -m memory_bank.cli would load a second cli module).
CLI = [sys.executable, "-c", "import sys; from memory_bank.cli import main; sys.exit(main())", "mcp"]


@asynccontextmanager
async def stdio_session(store: Path, user: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=[*CLI[1:], "--store", str(store), "--user", user, "--encoder", "hashing"],
        env=ENV,
        cwd=str(REPO),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, **args: Any) -> Any:
    result = await session.call_tool(tool, args)
    assert not result.is_error, result.content
    if result.structured_content is not None:
        data = result.structured_content
        return data.get("result", data) if isinstance(data, dict) and set(data) == {"result"} else data
    return result.content[0].text  # type: ignore[union-attr]


async def test_a_stdio_session_saves_searches_lists_deletes(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with MemoryBank.open(store, encoder="hashing") as bank:
        bank.set_layer("Emily", MemoryKind.GLOBAL_PORTRAIT, "Warm and curious.")
    async with stdio_session(store, "Emily") as s:
        names = {t.name for t in (await s.list_tools()).tools}
        assert names == {"search_memories", "save_memory", "list_memories", "delete_memory", "get_profile"}
        for t in (await s.list_tools()).tools:
            assert "user" not in t.input_schema.get("properties", {})  # the model never picks the user
        note = await call(s, "save_memory", text="My cat is called Miso.")
        turn = await call(s, "save_memory", text="I start pottery classes on Monday.", reply="How exciting!")
        hits = await call(s, "search_memories", query="what is my cat called", k=1)
        assert [h["memory_id"] for h in hits] == [note["memory_id"]]
        assert hits[0]["text"] == "My cat is called Miso." and "score" in hits[0]
        listed = await call(s, "list_memories")
        assert [m["memory_id"] for m in listed] == [turn["memory_id"], note["memory_id"]]
        assert await call(s, "get_profile") == {"portrait": "Warm and curious.", "event_summary": ""}
        await call(s, "delete_memory", memory_id=note["memory_id"])
        assert [m["memory_id"] for m in await call(s, "list_memories")] == [turn["memory_id"]]
        missing = await s.call_tool("delete_memory", {"memory_id": "nope"})
        assert missing.is_error and "nope" in missing.content[0].text  # type: ignore[union-attr]
    with MemoryBank.open(store, encoder="hashing") as bank:
        assert [m.text for m in bank.history("Emily")] == ["I start pottery classes on Monday.\nHow exciting!"]


async def test_two_users_servers_never_see_each_other(tmp_path: Path) -> None:
    store = tmp_path / "store"
    async with stdio_session(store, "Emily") as emily, stdio_session(store, "Jason") as jason:
        await call(emily, "save_memory", text="My cat is called Miso.")
        await call(jason, "save_memory", text="My dog is called Rex.")
        for session, own, other in ((emily, "Miso", "Rex"), (jason, "Rex", "Miso")):
            texts = [h["text"] for h in await call(session, "search_memories", query="my pet's name", k=5)]
            texts += [m["text"] for m in await call(session, "list_memories")]
            assert any(own in t for t in texts) and not any(other in t for t in texts)


def test_stdio_without_a_user_is_a_clear_error(tmp_path: Path) -> None:
    out = subprocess.run([*CLI, "--store", str(tmp_path)], env=ENV, cwd=REPO, capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert out.returncode == 2 and "needs --user" in out.stderr and "Traceback" not in out.stderr


@contextmanager
def http_server(store: Path, tokens: dict[str, str]) -> Iterator[str]:
    token_file = store.parent / "tokens.json"
    token_file.write_text(json.dumps(tokens), encoding="utf-8")
    port = free_port()
    cmd = [*CLI, "--store", str(store), "--transport", "http", "--port", str(port), "--tokens", str(token_file),
           "--encoder", "hashing"]  # fmt: skip
    proc = subprocess.Popen(cmd, env=ENV, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url, timeout=2)
            except urllib.error.HTTPError:
                break  # it answers (401 without a token)
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the MCP HTTP server did not start: {proc.stderr.read() if proc.stderr else ''}")
                time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def _status(url: str, headers: dict[str, str]) -> int:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    accept = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    request = urllib.request.Request(url, data=body, headers={**accept, **headers}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


@asynccontextmanager
async def http_session(url: str, token: str) -> AsyncIterator[ClientSession]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def test_http_token_decides_the_user_and_foreign_hosts_are_refused(tmp_path: Path) -> None:
    emily_token, jason_token = "e" * 32, "j" * 32
    store = tmp_path / "store"
    MemoryBank.open(store, encoder_instance=HashingEncoder(64)).close()
    with http_server(store, {emily_token: "Emily", jason_token: "Jason"}) as url:
        assert _status(url, {}) == 401
        assert _status(url, {"authorization": "Bearer " + "x" * 32}) == 401
        assert _status(url, {"authorization": f"Bearer {emily_token}", "host": "evil.example:80"}) in (400, 403, 421)
        assert _status(url, {"authorization": f"Bearer {emily_token}", "origin": "http://evil.example"}) in (400, 403)
        async with http_session(url, emily_token) as emily:
            await call(emily, "save_memory", text="My cat is called Miso.")
        async with http_session(url, jason_token) as jason:
            assert await call(jason, "list_memories") == []
            await call(jason, "save_memory", text="My dog is called Rex.")
        async with http_session(url, emily_token) as emily:
            assert [m["text"] for m in await call(emily, "list_memories")] == ["My cat is called Miso."]


async def test_with_a_summarizer_saves_and_deletions_keep_the_profile_current(bank: MemoryBank, clock: Any) -> None:
    """``memorybank mcp --llm SPEC``: notes saved over MCP get their day summarised in the
    background, so ``get_profile`` has something to say; a deletion re-summarises the day."""
    from memory_bank.mcp_server import Users, build_server
    from memory_bank.summaries import SummaryConfig, background_summaries
    from tests.summaries.conftest import ScriptedChatModel

    config = SummaryConfig(backoff_s=0, call_timeout_s=None, max_attempts=1)
    with background_summaries(bank, ScriptedChatModel(), "en", config=config) as scheduler:
        server = build_server(bank, Users("Emily"), scheduler)

        async def tool(name: str, **args: Any) -> Any:
            result = await server.call_tool(name, args)
            assert not result.is_error, result.content
            return result.structured_content

        await tool("save_memory", text="My cat is called MISO.")
        secret = await tool("save_memory", text="My locker code word is ZEBRA.")
        clock.advance(days=1)
        await tool("save_memory", text="Good morning!")
        assert scheduler.wait(10)
        profile = await tool("get_profile")
        assert "MISO" in profile["event_summary"] and "ZEBRA" in profile["event_summary"]
        await tool("delete_memory", memory_id=secret["memory_id"])
        assert scheduler.wait(10)
        profile = await tool("get_profile")
        assert "MISO" in profile["event_summary"] and "ZEBRA" not in profile["event_summary"]


def test_without_llm_the_server_makes_no_summaries(bank: MemoryBank) -> None:
    from memory_bank.mcp_cli import _scheduler

    assert _scheduler(bank, None) is None  # no --llm, no summaries.llm in the config

async def test_a_server_with_another_encoder_than_the_store_says_so(tmp_path: Path) -> None:
    """Issue 15, item 6: not a silent empty search, but the store's encoder and the fix."""
    store = tmp_path / "store"
    with MemoryBank.open(store, encoder="hashing-32") as bank:
        bank.add_turn("Emily", "My cat is called Miso.", "Lovely!")
    async with stdio_session(store, "Emily") as s:  # started with --encoder hashing
        for tool, args in (("search_memories", {"query": "my cat"}), ("save_memory", {"text": "x"})):
            result = await s.call_tool(tool, args)
            assert result.is_error and "'hashing-32'" in result.content[0].text  # type: ignore[union-attr]
    with MemoryBank.open(store, encoder="hashing-32") as bank:
        assert [m.query for m in bank.history("Emily")] == ["My cat is called Miso."]


def test_the_bearer_scheme_is_read_in_any_case_and_nothing_else_passes() -> None:
    from memory_bank.mcp_server import Users

    users = Users(tokens={"e" * 32: "Emily"})
    for header in (f"Bearer {'e' * 32}", f"bearer {'e' * 32}", f"BEARER  {'e' * 32} "):
        assert users.for_token(header) == "Emily", header
    for header in (None, "", "Bearer", "Bearer ", f"Basic {'e' * 32}", f"Bearer{'e' * 32}", f"Bearer {'e' * 31}"):
        assert users.for_token(header) is None, header


def _raw(url: str, method: str, headers: dict[str, str], body: dict[str, Any] | None = None) -> tuple[int, dict[str, str]]:
    data = json.dumps(body).encode() if body is not None else None
    accept = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    request = urllib.request.Request(url, data=data, headers={**accept, **headers}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return int(r.status), dict(r.headers)
    except urllib.error.HTTPError as e:
        return int(e.code), dict(e.headers)


def test_an_http_session_answers_only_the_token_that_opened_it(tmp_path: Path) -> None:
    """Any valid token could end (DELETE) another client's session, or speak in it, given its id."""
    alice, bob = "a" * 32, "b" * 32
    store = tmp_path / "store"
    MemoryBank.open(store, encoder_instance=HashingEncoder(64)).close()
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    with http_server(store, {alice: "Alice", bob: "Bob"}) as url:
        status, headers = _raw(url, "POST", {"authorization": f"Bearer {alice}"}, init)
        session = {k.lower(): v for k, v in headers.items()}["mcp-session-id"]
        assert status == 200
        _raw(url, "POST", {"authorization": f"Bearer {alice}", "mcp-session-id": session},
             {"jsonrpc": "2.0", "method": "notifications/initialized"})  # fmt: skip
        assert _raw(url, "POST", {"authorization": f"Bearer {bob}", "mcp-session-id": session}, ping)[0] == 404
        assert _raw(url, "DELETE", {"authorization": f"Bearer {bob}", "mcp-session-id": session})[0] == 404
        assert _raw(url, "POST", {"authorization": f"Bearer {alice}", "mcp-session-id": session}, ping)[0] == 200


def test_tokens_an_http_header_cannot_carry_and_bad_ports_are_one_line(tmp_path: Path) -> None:
    from memory_bank import InvalidInputError
    from memory_bank.mcp_server import load_tokens

    file = tmp_path / "tokens.json"
    for token in ("pässwörd-0123456789", " leading-space-0123456789"):
        file.write_text(json.dumps({token: "Emily"}), encoding="utf-8")
        with pytest.raises(InvalidInputError, match="printable ASCII"):
            load_tokens(file)
    done = subprocess.run([*CLI, "--store", str(tmp_path / "s"), "--transport", "http", "--port", "70000"],
                          env=ENV, cwd=REPO, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr and "--port" in done.stderr


async def test_tool_errors_name_the_tools_own_arguments_and_bad_dates_are_refused(tmp_path: Path) -> None:
    from mcp import Client

    from memory_bank.mcp_server import Users, build_server

    bank = MemoryBank.open(tmp_path / "store", encoder_instance=HashingEncoder(64))
    bank.add_turn("Emily", "My cat is Miso.", "Lovely!")
    async with Client(build_server(bank, Users("Emily"))) as session:
        empty = await session.call_tool("save_memory", {"text": "  "})
        assert empty.is_error and "text is empty" in empty.content[0].text  # type: ignore[union-attr]
        bad = await session.call_tool("list_memories", {"date": "not a date"})
        assert bad.is_error and "date" in bad.content[0].text  # type: ignore[union-attr]
        good = await session.call_tool("list_memories", {"date": bank.history("Emily")[0].date})
        assert not good.is_error


class _FakeSDK:
    """The MCP SDK's streamable-HTTP app, faked: it opens a session (``s0``, ``s1``...) for a
    request without one, and records the DELETEs it is given (by the first session header, as
    the SDK reads it)."""

    def __init__(self) -> None:
        self.opened: list[str] = []
        self.ended: list[bytes] = []

    def streamable_http_app(self, **_: Any) -> Any:
        return self.app

    async def app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        first = [v for k, v in scope["headers"] if k == b"mcp-session-id"]
        extra = []
        if not first:
            self.opened.append(f"s{len(self.opened)}")
            extra = [(b"mcp-session-id", self.opened[-1].encode())]
        elif scope["method"] == "DELETE":
            self.ended.append(first[0])
        await send({"type": "http.response.start", "status": 200, "headers": extra})
        await send({"type": "http.response.body", "body": b"{}"})


def _guarded(sdk: _FakeSDK, tokens: dict[str, str]) -> Callable[..., Awaitable[int]]:
    """``call(token, *session_ids, method="POST")``: the HTTP status ``http_app`` answers."""
    from memory_bank.mcp_server import Users, http_app

    app = http_app(sdk, Users(tokens=tokens), 8765)  # type: ignore[arg-type]

    async def call(token: str, *sessions: str, method: str = "POST") -> int:
        headers = [(b"authorization", f"Bearer {token}".encode())]
        headers += [(b"mcp-session-id", s.encode()) for s in sessions]
        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await app({"type": "http", "method": method, "headers": headers}, None, send)
        return int(sent[0]["status"])

    return call


def _alice_and_bob(monkeypatch: pytest.MonkeyPatch, **limits: int) -> tuple[_FakeSDK, Callable[..., Awaitable[int]], str, str]:
    """The fake SDK behind ``http_app`` with the session ``limits`` given, and two tokens."""
    import memory_bank.mcp_server as mcp_server

    for name, value in limits.items():
        monkeypatch.setattr(mcp_server, name, value)
    alice, bob = "a" * 32, "b" * 32
    sdk = _FakeSDK()
    return sdk, _guarded(sdk, {alice: "Alice", bob: "Bob"}), alice, bob


async def test_session_owners_fail_closed_when_forgotten_and_go_with_a_delete(monkeypatch: pytest.MonkeyPatch) -> None:
    """Owners were forgotten oldest-opened first, used or not, and never on a DELETE: after enough
    other sessions, any valid token could speak in, or end, a session whose owner was forgotten."""
    sdk, call, alice, bob = _alice_and_bob(monkeypatch, MAX_SESSIONS=2)
    assert await call(alice) == 200 and sdk.opened == ["s0"]
    for _ in range(2):
        assert await call(bob) == 200  # Bob opens sessions until Alice's owner record is dropped
    assert await call(bob, "s0") == 404 and await call(bob, "s0", method="DELETE") == 404  # fails closed
    assert await call(bob, "s2") == 200 and await call(bob, "s2", method="DELETE") == 200
    assert await call(bob, "s2") == 404  # its owner record went with the DELETE


async def test_one_token_cannot_push_out_anothers_sessions_or_send_a_header_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client opening sessions in a loop forgot every other client's (they failed closed), and
    a second mcp-session-id header was checked while the SDK used the first: any token could end
    another client's session."""
    sdk, call, alice, bob = _alice_and_bob(monkeypatch, MAX_SESSIONS_PER_TOKEN=2)
    assert await call(alice) == 200 and sdk.opened == ["s0"]
    for _ in range(5):
        assert await call(bob) == 200
    assert await call(alice, "s0") == 200  # Bob's flood forgot Bob's own oldest, not Alice's
    assert await call(bob, "s1") == 404 and await call(bob, "s5") == 200
    assert await call(bob, "s0", "s5", method="DELETE") == 400 and sdk.ended == []
    assert await call(alice, "s0") == 200
