"""Safe defaults: no unpickling of store files, a loopback-only web server without a share link or
analytics unless asked, API keys from the environment only and never logged or stored, private
store files, and a login that only ever opens its own memories."""

from __future__ import annotations

import logging
import os
import re
import stat
from pathlib import Path
from typing import Any

import gradio as gr
import pytest

from memory_bank import MemoryBank
from memory_bank.embeddings import HashingEncoder
from memory_bank.errors import MemoryBankError
from memory_bank.llm import build_chat_model, parse_llm_spec
from silicon_friend.engine import SiliconFriend
from silicon_friend.models import prepare_model
from silicon_friend.web.app import WebApp, build_app
from tests.conftest import FixedClock
from tests.silicon_friend.fakes import EchoChatModel, steps

ROOT = Path(__file__).resolve().parents[2]
DB = "memorybank.sqlite3"

# -- no unpickling ---------------------------------------------------------------------------------
#: The one allowed use: the benchmark's LangChain-FAISS *baseline* reloads the index it wrote itself
#: in its own scratch directory, to measure the original design (never a MemoryBank store).
ALLOWED = {("memory_bank/bench/systems.py", "allow_dangerous_deserialization=True")}
UNSAFE = [
    re.compile(r"^\s*(import|from)\s+(c?pickle|dill|joblib|shelve)\b"),
    re.compile(r"\b(c?pickle|dill|joblib)\.loads?\("),
    re.compile(r"allow_pickle\s*=\s*True"),
    re.compile(r"allow_dangerous_deserialization\s*=\s*True"),
    re.compile(r"\btorch\.load\((?![^)]*weights_only\s*=\s*True)"),
    re.compile(r"\bshelve\.open\("),
]


def test_no_unpickling_anywhere_in_the_library_or_the_app() -> None:
    found = []
    files = sorted((ROOT / "memory_bank").rglob("*.py")) + sorted((ROOT / "silicon_friend").rglob("*.py"))
    assert len(files) > 30
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            for pattern in UNSAFE:
                m = pattern.search(code)
                if m and (rel, m.group(0)) not in ALLOWED:
                    found.append(f"{rel}:{n}: {line.strip()}")
    assert found == []


def test_store_holds_no_pickled_blobs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import sqlite3

    bank = MemoryBank.open(tmp_path / "s", encoder_instance=HashingEncoder(64))
    bank.add_turn("Ann", "hello", "hi")
    bank.close()
    con = sqlite3.connect(tmp_path / "s" / DB)
    blobs = [b for (b,) in con.execute("SELECT vector FROM embeddings")]
    con.close()
    assert blobs and not any(bytes(b).startswith(b"\x80") for b in blobs)  # no pickle protocol header
    assert len(blobs[0]) == 64 * 4  # raw float32


# -- the web server --------------------------------------------------------------------------------
def test_cli_defaults_are_loopback_no_share_no_login() -> None:
    from silicon_friend.cli import build_parser

    args = build_parser().parse_args(["web"])
    assert args.host == "127.0.0.1" and args.share is False and not args.auth and not args.auth_file
    assert build_parser().parse_args(["web", "--share"]).share is True


class _FakeDemo:
    server_port = 7860

    def __init__(self) -> None:
        self.launched: dict[str, Any] = {}

    def queue(self, **kwargs: Any) -> _FakeDemo:
        return self

    def launch(self, **kwargs: Any) -> None:
        self.launched = kwargs

    def block_thread(self) -> None:  # the real one serves until Ctrl-C
        pass


@pytest.fixture
def engine(tmp_path):  # type: ignore[no-untyped-def]
    bank = MemoryBank.open(tmp_path / "s", clock=FixedClock(), encoder_instance=HashingEncoder(64))
    yield SiliconFriend(bank, prepare_model(EchoChatModel(reply="ok then"), context_tokens=4096))
    bank.close()


@pytest.mark.parametrize("share", [False, True])
def test_cli_web_passes_safe_launch_kwargs(monkeypatch, engine, share) -> None:  # type: ignore[no-untyped-def]
    import silicon_friend.runtime
    import silicon_friend.web.app
    from silicon_friend.cli import main

    demos: list[_FakeDemo] = []
    built: list[dict[str, Any]] = []

    def fake_build(web: Any) -> _FakeDemo:
        built.append({"auth": web.auth})
        demos.append(_FakeDemo())
        return demos[-1]

    monkeypatch.delenv("GRADIO_ANALYTICS_ENABLED", raising=False)
    monkeypatch.setattr(silicon_friend.runtime, "build_engine", lambda options: engine)
    monkeypatch.setattr(silicon_friend.web.app.WebApp, "build", fake_build)
    monkeypatch.setattr(engine.bank, "close", lambda: None)  # the fixture closes it
    argv = ["web", "--data-dir", "unused", "--llm", "openai:x@http://127.0.0.1:9/v1"]
    assert main([*argv, "--share"] if share else argv) == 0
    launched = demos[0].launched
    assert launched["server_name"] == "127.0.0.1" and launched["share"] is share
    assert launched["auth"] is None and built[0]["auth"] is False
    assert os.environ["GRADIO_ANALYTICS_ENABLED"] == "False"


def test_serve_defaults_and_gradio_analytics_off(monkeypatch, engine) -> None:  # type: ignore[no-untyped-def]
    import inspect

    import silicon_friend.web.app
    from silicon_friend.web.server import serve

    params = inspect.signature(serve).parameters
    assert params["host"].default == "127.0.0.1" and params["share"].default is False
    assert build_app(engine).analytics_enabled is False
    demo = _FakeDemo()
    monkeypatch.setattr(silicon_friend.web.app.WebApp, "build", lambda web: demo)
    serve(engine, credentials=[("Ann", "pw")], block=False)
    assert demo.launched["auth"] == [("Ann", "pw")] and demo.launched["share"] is False
    assert demo.launched["server_name"] == "127.0.0.1"


# -- API keys --------------------------------------------------------------------------------------
KEY = "sk-test-DO-NOT-LEAK-5f2c9e1a7b3d"


def test_api_key_comes_from_the_environment_only() -> None:
    with pytest.raises(MemoryBankError):
        parse_llm_spec({"backend": "openai", "model": "gpt-4o-mini", "api_key": KEY})
    spec = parse_llm_spec("openai:gpt-4o-mini")
    assert spec.api_key_env == "OPENAI_API_KEY" and "api_key" not in spec.model_dump()


def test_api_key_never_logged_or_stored_after_a_chat(tmp_path, monkeypatch, caplog) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("langchain_openai")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    caplog.set_level(logging.DEBUG)
    spec = parse_llm_spec({"backend": "openai", "model": "gpt-4o-mini", "base_url": "http://127.0.0.1:9/v1",
                           "max_retries": 0, "timeout": 2})  # fmt: skip
    chat = build_chat_model(spec)
    assert KEY not in repr(chat) and KEY not in str(chat)
    bank = MemoryBank.open(tmp_path / "s", clock=FixedClock(), encoder_instance=HashingEncoder(64))
    friend = SiliconFriend(
        bank, prepare_model(chat, context_tokens=4096), first_token_timeout=10, idle_timeout=10
    )
    turn = friend.reply(friend.start("Ann"), "hello, are you there?")
    assert turn.failed  # nothing listens on port 9; the turn is kept
    assert KEY not in (turn.error or "")
    bank.close()
    assert KEY not in caplog.text
    for f in (tmp_path / "s").iterdir():
        assert KEY.encode() not in f.read_bytes(), f
    again = MemoryBank.open(tmp_path / "s", encoder_instance=HashingEncoder(64))
    assert [m.query for m in again.history("Ann")] == ["hello, are you there?"]
    again.close()


# -- store permissions -----------------------------------------------------------------------------
def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_new_store_is_private(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    old = os.umask(0o022)
    try:
        bank = MemoryBank.open(tmp_path / "new" / "store", encoder_instance=HashingEncoder(64))
        bank.add_turn("Ann", "secret", "ok")
        bank.close()
        store = tmp_path / "new" / "store"
        assert _mode(store) == 0o700 and _mode(store / DB) == 0o600
        bank = MemoryBank.open(store, encoder_instance=HashingEncoder(64))  # reopened: sidecars private too
        bank.add_turn("Ann", "secret two", "ok")
        assert {f.name: _mode(f) for f in store.iterdir()} == {f.name: 0o600 for f in store.iterdir()}
        bank.close()
    finally:
        os.umask(old)


def test_store_in_an_existing_directory_is_private_too(tmp_path) -> None:  # type: ignore[no-untyped-def]
    old = os.umask(0o022)
    try:
        store = tmp_path / "data"
        store.mkdir(mode=0o755)
        bank = MemoryBank.open(store, encoder_instance=HashingEncoder(64))
        bank.add_turn("Ann", "my secret XYZZY", "ok")
        modes = {f.name: _mode(f) for f in store.iterdir()}
        bank.close()
        assert _mode(store) == 0o700
        assert modes == {name: 0o600 for name in modes}
    finally:
        os.umask(old)


# -- login -----------------------------------------------------------------------------------------
def test_with_login_each_user_only_ever_opens_their_own_memories(engine) -> None:  # type: ignore[no-untyped-def]
    bank = engine.bank
    bank.add_turn("Bob", "Bob's secret BOBSAFE", "ok")
    app = WebApp(engine, auth=True)
    ann = gr.Request(username="Ann", session_hash="tab")
    # The name box says Bob, but the login is Ann: everything happens as Ann.
    _status, _, name, _kept = app.remember("Bob", ann)
    assert app.sessions.get(ann).session.user == "Ann" and name == "Ann"
    for _ in steps(app.send("Ann's note ANNSAFE", "Bob", 0.7, 0.9, 64, 5, ann)):
        pass
    assert [m.query for m in bank.history("Ann")] == ["Ann's note ANNSAFE"]
    assert [m.query for m in bank.history("Bob")] == ["Bob's secret BOBSAFE"]
    form = ("", "all", "all", "", "", 1)  # the memory tab's search, kind, status, from, to, page
    app.build()
    for_ann = app.memory_tab.memories("Bob", "", *form, ann)
    assert "BOBSAFE" not in repr(for_ann) and "ANNSAFE" in repr(for_ann)
    # Ann cannot delete Bob's memory (deletion acts on a row of her own table, never an id the
    # browser sends), nor export or forget Bob.
    with pytest.warns(UserWarning):  # nothing of hers selected: nothing to delete
        app.memory_tab.handlers()["delete"]("Bob", "", *form, ann)
    assert bank.history("Bob") and bank.history("Ann")
    link = app.export("Bob", ann)["value"]
    item = app.downloads.get(link.split("sf-export/", 1)[1].split(")", 1)[0], "Ann")
    assert item is not None and b"ANNSAFE" in item.data and b"BOBSAFE" not in item.data
    app.forget_me("Bob", True, ann)
    assert not bank.has_user("Ann") and bank.history("Bob")
    # The prompt Ann's chat builds never holds Bob's memory.
    model = engine.model.chat_model
    for _ in steps(app.send("BOBSAFE secret?", "Bob", 0.7, 0.9, 64, 5, ann)):
        pass
    prompt = " ".join(str(m.content) for m in model.calls[-1]["messages"][:-1])
    assert "BOBSAFE" not in prompt
    # Without a signed-in name nothing opens.
    with pytest.warns(UserWarning):
        shown = app.memory_tab.memories("Bob", "", *form, gr.Request())
    assert "BOBSAFE" not in repr(shown)
