"""The web app in a real headless Chromium (Playwright): name, Remember Me, two messages (the
original crashed on the second), stored turns, the memories tab; in English and in Chinese.

Screenshots go to ``$TEST_ARTIFACTS`` (default ``./artifacts``). Skipped, with the reason, when
``/usr/bin/chromium`` or the playwright package is missing (CI installs Debian's chromium; never
``playwright install``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_bank import MemoryBank
from memory_bank.embeddings import HashingEncoder
from silicon_friend.engine import ChatSettings, SiliconFriend
from silicon_friend.models import prepare_model
from silicon_friend.web.texts import ui_texts
from tests.conftest import free_port
from tests.silicon_friend.fakes import EchoChatModel

CHROMIUM = Path("/usr/bin/chromium")
LAUNCH_ARGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--no-first-run", "--disable-quic",
]  # fmt: skip
REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.browser


def artifacts() -> Path:
    path = Path(os.environ.get("TEST_ARTIFACTS", "artifacts")).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not found: apt-get install chromium chromium-driver fonts-wqy-zenhei")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the playwright package is not installed: pip install playwright")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        yield b
        b.close()


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def chat_in_browser(
    browser: Any,
    url: str,
    language: str,
    name: str,
    messages: list[str],
    turns: Callable[[], int],
    reply_timeout: float,
    tag: str,
) -> Any:
    """Drive the page (screenshots ``browser_{tag}_*.png``); returns it, on the memories tab."""
    t = ui_texts(language)
    page = browser.new_page(viewport={"width": 1100, "height": 1100})
    page.goto(url, wait_until="load")
    page.wait_for_selector("#sf-name textarea, #sf-name input", timeout=30_000)
    assert page.title() == "SiliconFriend"
    page.locator("#sf-name textarea, #sf-name input").first.fill(name)
    page.get_by_role("button", name=t.remember, exact=True).click()
    # A server that has just started may still be importing its encoder on a loaded machine: the
    # wait is as long as a reply's (a wait, not a timing assertion).
    page.wait_for_function(
        "n => document.querySelector('#sf-status').innerText.includes(n)",
        arg=name,
        timeout=max(30_000, reply_timeout * 1000),
    )
    for i, message in enumerate(messages, 1):
        box = page.locator("#sf-message textarea")
        box.fill(message)
        if i == 1:
            page.get_by_role("button", name=t.send, exact=True).click()
        else:
            box.press("Enter")
        wait_until(lambda i=i: turns() >= i, reply_timeout, f"turn {i} to be stored")
        page.wait_for_function(
            "m => document.querySelector('#sf-chatbot').innerText.includes(m)", arg=message, timeout=10_000
        )
    page.wait_for_timeout(500)
    page.screenshot(path=str(artifacts() / f"browser_{tag}_chat.png"), full_page=True)
    page.get_by_role("tab", name=t.memories_tab).click()
    page.wait_for_function(
        "m => document.querySelector('#sf-memory-table').innerText.includes(m)",
        arg=messages[-1],
        timeout=15_000,
    )
    page.wait_for_selector("#sf-plot img, #sf-plot svg, #sf-plot canvas", timeout=15_000)
    page.screenshot(path=str(artifacts() / f"browser_{tag}_memories.png"), full_page=True)
    return page


@pytest.fixture
def served(tmp_path) -> Iterator[Callable[[str], tuple[str, SiliconFriend]]]:  # type: ignore[no-untyped-def]
    """Serve the app in-process with a fast echo model; returns (url, engine)."""
    from silicon_friend.web.server import serve

    demos: list[Any] = []
    banks: list[MemoryBank] = []

    def start(language: str, model: Any = None, credentials: Any = None) -> tuple[str, SiliconFriend]:
        bank = MemoryBank.open(tmp_path / language, language=language, encoder_instance=HashingEncoder(256))
        banks.append(bank)
        engine = SiliconFriend(
            bank, prepare_model(model or EchoChatModel(delay=0.01), context_tokens=2048), language=language,
            settings=ChatSettings(max_new_tokens=32),
        )  # fmt: skip
        port = free_port()
        demos.append(serve(engine, port=port, block=False, credentials=credentials))
        return f"http://127.0.0.1:{port}/", engine

    yield start
    for demo in demos:
        demo.close()
    for bank in banks:
        bank.close()


@pytest.mark.parametrize(
    ("language", "name", "messages"),
    [
        ("en", "Emily", ["I adopted a cat named Miso.", "What is my cat called?"]),
        ("zh", "小明", ["我今天养了一只猫，叫咪咪。", "我的猫叫什么名字？"]),
    ],
)
def test_chat_twice_and_see_my_memories(
    browser, served, language: str, name: str, messages: list[str]
) -> None:  # type: ignore[no-untyped-def]
    url, engine = served(language)
    bank = engine.bank
    turns = lambda: len(bank.history(name)) if bank.has_user(name) else 0  # noqa: E731
    page = chat_in_browser(browser, url, language, name, messages, turns, 20, f"echo_{language}")
    stored = bank.history(name)
    assert [(m.query, m.response) for m in stored] == [(m, f"Echo: {m}") for m in messages]
    page.get_by_role("tab", name=ui_texts(language).chat_tab).click()
    chat = page.locator("#sf-chatbot").inner_text()
    assert all(f"Echo: {m}" in chat for m in messages)
    # Nothing of the conversation is kept in the browser (Gradio's run history kept every message
    # and reply there, past "Forget me"); the page's storage holds at most the remembered name.
    kept = page.evaluate("() => JSON.stringify(localStorage) + JSON.stringify(sessionStorage)")
    assert not [m for m in messages if m in kept or json.dumps(m)[1:-1] in kept]
    page.close()


def test_two_browser_sessions_at_once_keep_their_own_memories(browser, served) -> None:  # type: ignore[no-untyped-def]
    url, engine = served("en")
    engine.model.chat_model.delay = 0.05  # replies overlap in time
    pages = {}
    for user in ("Ann", "Bob"):
        context = browser.new_context()
        page = context.new_page()
        page.goto(url, wait_until="load")
        page.locator("#sf-name textarea, #sf-name input").first.fill(user)
        page.get_by_role("button", name="Remember Me", exact=True).click()
        page.wait_for_function("n => document.querySelector('#sf-status').innerText.includes(n)", arg=user)
        pages[user] = page
    for i in range(2):
        for user, page in pages.items():  # send in both tabs before either reply is done
            page.locator("#sf-message textarea").fill(f"{user} message {i} with quite a few words in it")
            page.locator("#sf-send").click()
        for user, page in pages.items():
            page.wait_for_function(
                "m => document.querySelector('#sf-chatbot').innerText.includes(m)",
                arg=f"Echo: {user} message {i} with quite a few words in it",
                timeout=20_000,
            )
    for user, page in pages.items():
        assert [m.query for m in engine.bank.history(user)] == [
            f"{user} message {i} with quite a few words in it" for i in range(2)
        ]
        other = "Bob" if user == "Ann" else "Ann"
        assert other not in page.locator("#sf-chatbot").inner_text()
        page.context.close()


def test_two_logins_sign_in_and_chat_through_the_guard(browser, served) -> None:  # type: ignore[no-untyped-def]
    """With login on, the guard refuses any request naming a session without a login; the
    page's own requests (events, their streams, heartbeats) all carry one."""
    url, engine = served("en", credentials=[("alice", "pw-a"), ("bob", "pw-b")])
    for login, password in (("alice", "pw-a"), ("bob", "pw-b")):
        context = browser.new_context()
        page = context.new_page()
        page.goto(url, wait_until="load")
        fields = page.locator("input")
        fields.nth(0).fill(login)
        fields.nth(1).fill(password)
        fields.nth(1).press("Enter")
        page.locator("#sf-message textarea").fill(f"{login} says hello")
        page.locator("#sf-send").click()
        page.wait_for_function(
            "m => document.querySelector('#sf-chatbot').innerText.includes(m)", arg=f"Echo: {login} says hello"
        )
        context.close()
    assert {u: [m.query for m in engine.bank.history(u)] for u in engine.bank.users()} == {
        "alice": ["alice says hello"], "bob": ["bob says hello"]
    }


@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_page_fits_a_phone(browser, served, language: str) -> None:  # type: ignore[no-untyped-def]
    """On a phone (390x844) the title "SiliconFriend" was broken mid-word ("SiliconFr" / "iend")
    by the language switch beside it; the switch now goes under it. Nothing scrolls sideways."""
    url, _ = served(language)
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    page.goto(url, wait_until="load")
    page.wait_for_selector("#sf-header h1", timeout=30_000)
    lines = page.evaluate(
        """() => { const r = document.createRange();
        r.selectNodeContents(document.querySelector('#sf-header h1'));
        return new Set([...r.getClientRects()].map(x => Math.round(x.top))).size; }"""
    )
    widths = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    page.screenshot(path=str(artifacts() / f"browser_phone_{language}.png"))
    assert lines == 1 and widths[0] <= widths[1], (lines, widths)
    context.close()


@pytest.mark.integration
def test_make_run_serves_the_offline_default_model(browser, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """What `make run` starts (`silicon-friend web`, packaged SmolLM2), driven by the browser."""
    port = free_port()
    data = tmp_path / "data"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "silicon_friend.cli", "web", "--port", str(port), "--data-dir", str(data),
           "--max-new-tokens", "24"]  # fmt: skip
    log = tmp_path / "server.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until(
            lambda: "SiliconFriend is running at" in log.read_text() or proc.poll() is not None,
            120,
            "the server",
        )
        match = re.search(r"SiliconFriend is running at (http://\S+)", log.read_text())
        url = match.group(1) if match else None
        assert url == f"http://127.0.0.1:{port}", f"server did not start:\n{log.read_text()[-3000:]}"
        with MemoryBank.open(data, encoder="hashing") as reader:
            turns = lambda: len(reader.history("Emily")) if reader.has_user("Emily") else 0  # noqa: E731
            messages = ["Hi! I love hiking.", "What do I love?"]
            page = chat_in_browser(browser, url + "/", "en", "Emily", messages, turns, 180, "smollm2_en")
            stored = reader.history("Emily")
            assert len(stored) == 2 and all(m.response for m in stored)  # both replies came from SmolLM2
            banner = page.locator("#sf-model").inner_text()  # which model answers, and what it is
            assert "SmolLM2-135M-Instruct" in banner and "English-only demo model" in banner
            page.close()
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
        if proc.poll() is None:
            proc.kill()


@contextlib.contextmanager
def recording_server() -> Iterator[tuple[str, list[str]]]:
    """A local HTTP server that records every path it is asked for (an attacker's image host)."""
    import http.server
    import threading

    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("language", ["en", "zh"])
def test_injected_images_in_replies_names_and_messages_are_never_fetched(browser, served, language) -> None:  # type: ignore[no-untyped-def]
    t = ui_texts(language)
    with recording_server() as (evil, hits):
        reply = f"Sure! ![x]({evil}/reply-md.png) <img src=\"{evil}/reply-html.png\"> done"
        url, engine = served(language, EchoChatModel(reply=reply))
        name = f'Eve<img src="{evil}/name.png">'
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        page.goto(url, wait_until="load")
        page.locator("#sf-name textarea, #sf-name input").first.fill(name)
        page.get_by_role("button", name=t.remember, exact=True).click()
        page.wait_for_function("() => document.querySelector('#sf-status').innerText.includes('Eve')")
        page.locator("#sf-message textarea").fill(f"look ![me]({evil}/message.png) <img src={evil}/msg.png>")
        page.get_by_role("button", name=t.send, exact=True).click()
        page.wait_for_function(
            "() => document.querySelector('#sf-chatbot').innerText.includes('done')", timeout=20_000
        )
        page.get_by_role("tab", name=t.memories_tab).click()  # rows show an excerpt: the message's start
        page.wait_for_function(
            "() => document.querySelector('#sf-memory-table').innerText.includes('look')", timeout=15_000
        )
        page.wait_for_timeout(1500)
        page.screenshot(path=str(artifacts() / f"browser_inert_images_{language}.png"), full_page=True)
        shown = page.locator("#sf-chatbot").inner_text()
        page.close()
        assert hits == []  # the browser asked the attacker's server for nothing
        assert "reply-md.png" in shown  # the text is shown as text
        assert engine.bank.history(name)[0].response == reply  # and stored as the model said it


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_name_is_shown_as_typed_never_as_a_link_or_markup(browser, served, language) -> None:  # type: ignore[no-untyped-def]
    """A name is the user's own text: beside "Welcome" and in a toast it must not become a link
    (a phishing lure in the site's own look), emphasis, code or HTML."""
    t = ui_texts(language)
    url, _ = served(language, EchoChatModel(reply="ok"))
    name = "Eve [click here](https://evil.example/login) *now* <b>bold</b> `x` www.evil.example"
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    page.goto(url, wait_until="load")
    page.locator("#sf-name textarea, #sf-name input").first.fill(name)
    page.get_by_role("button", name=t.remember, exact=True).click()
    page.wait_for_function("() => document.querySelector('#sf-status').innerText.includes('click here')")
    status = page.locator("#sf-status")
    marked_up = status.locator("a, em, b, code").all_inner_texts()
    shown = status.inner_text()
    page.get_by_role("tab", name=t.memories_tab).click()
    page.locator("#sf-export").click()  # no memories yet: a toast names the user
    page.wait_for_function("() => document.querySelector('.toast-body') !== null", timeout=10_000)
    toast = page.evaluate("() => [...document.querySelectorAll('.toast-body')].map(e => e.innerText).join(' ')")
    page.close()
    assert name in shown
    assert [m for m in marked_up if m.strip() != "Eve"] == []  # only the greeting's own bold name, if any
    assert name in toast


def compose_and_confirm(box: Any) -> None:
    """An input method's composition in ``box``, ended by the Enter that picks the characters."""
    box.evaluate(
        """e => {
          e.dispatchEvent(new CompositionEvent("compositionstart", {bubbles: true}));
          for (const type of ["keydown", "keypress"])
            e.dispatchEvent(new KeyboardEvent(type, {key: "Enter", code: "Enter", keyCode: 229,
              isComposing: true, bubbles: true, cancelable: true}));
          e.dispatchEvent(new CompositionEvent("compositionend", {bubbles: true, data: "我今天"}));
        }"""
    )


def test_an_enter_that_confirms_an_input_method_candidate_sends_nothing(browser, served) -> None:  # type: ignore[no-untyped-def]
    """Typing Chinese with pinyin, the Enter that picks the characters sent the half-typed
    letters ("wo jin tian") as a message, stored as a turn. A plain Enter still sends."""
    url, engine = served("zh")
    t = ui_texts("zh")
    page = browser.new_context(locale="zh-CN", viewport={"width": 1100, "height": 900}).new_page()
    page.goto(url, wait_until="load")
    page.wait_for_selector("#sf-name textarea, #sf-name input", timeout=30_000)
    page.wait_for_timeout(1000)  # the page's handlers attached
    name = page.locator("#sf-name textarea, #sf-name input").first
    name.fill("xiao ming")  # the name box too signed in as the half-typed letters
    compose_and_confirm(name)
    page.wait_for_timeout(3000)
    assert "xiao ming" not in page.locator("#sf-status").inner_text()  # not signed in
    name.fill("小明")
    page.get_by_role("button", name=t.remember, exact=True).click()
    page.wait_for_function("n => document.querySelector('#sf-status').innerText.includes(n)", arg="小明",
                           timeout=30_000)  # fmt: skip
    box = page.locator("#sf-message textarea")
    box.fill("wo jin tian")
    compose_and_confirm(box)
    page.wait_for_timeout(1500)
    assert not engine.bank.has_user("小明") or not engine.bank.history("小明")
    box.fill("我今天养了一只猫。")
    box.press("Enter")
    wait_until(lambda: engine.bank.has_user("小明") and len(engine.bank.history("小明")) == 1, 20, "the turn")
    assert [m.query for m in engine.bank.history("小明")] == ["我今天养了一只猫。"]
    page.close()


def test_the_run_history_an_earlier_version_left_is_deleted(browser, served) -> None:  # type: ignore[no-untyped-def]
    """Gradio kept every message and reply in the browser under an id made at each start; turning
    it off deleted only the current start's, and an earlier version's stayed readable."""
    url, _ = served("en")
    page = browser.new_page()
    page.goto(url, wait_until="load")
    page.wait_for_selector("#sf-name textarea, #sf-name input", timeout=30_000)
    page.evaluate("() => localStorage.setItem('gradio:run-history:v2:earlier', 'my bank PIN is 4321')")
    page.reload(wait_until="load")
    page.wait_for_selector("#sf-name textarea, #sf-name input", timeout=30_000)
    page.wait_for_function("() => localStorage.getItem('gradio:run-history:v2:earlier') === null", timeout=10_000)
    assert "4321" not in page.evaluate("() => JSON.stringify(localStorage)")
    page.close()


def test_forget_me_leaves_no_name_in_the_browser(browser, served) -> None:  # type: ignore[no-untyped-def]
    """Forget me set the kept name to "", which the browser never stores: the name stayed and came
    back on the next load."""
    url, engine = served("en")
    page = browser.new_page()
    page.goto(url, wait_until="load")
    page.locator("#sf-name textarea, #sf-name input").first.fill("Forgetful")
    page.get_by_role("button", name="Remember Me", exact=True).click()
    page.wait_for_function("() => document.querySelector('#sf-status').innerText.includes('Forgetful')")
    kept = "() => localStorage.getItem('siliconfriend-name')"
    page.wait_for_function(f"() => ({kept})() !== null")
    remembered = page.evaluate(kept)  # the name, encoded
    page.get_by_role("tab", name=ui_texts("en").memories_tab).click()
    page.locator("#sf-forget-confirm input").check()
    page.locator("#sf-forget").click()
    page.wait_for_function("() => document.querySelector('#sf-status').innerText.includes('deleted')", timeout=15_000)
    page.wait_for_function(f"old => ({kept})() !== old", arg=remembered, timeout=10_000)  # written over
    page.reload(wait_until="load")
    page.wait_for_selector("#sf-name textarea, #sf-name input", timeout=30_000)
    page.wait_for_timeout(1500)  # the kept name, if any, is put back after the load
    assert page.locator("#sf-name textarea, #sf-name input").first.input_value() == ""
    assert "Forgetful" not in page.locator("#sf-status").inner_text() and not engine.bank.has_user("Forgetful")
    page.close()


@pytest.mark.parametrize("language", ["en", "zh"])
def test_forget_me_clears_the_users_other_open_pages(browser, served, language) -> None:  # type: ignore[no-untyped-def]
    """"Forget me" in one browser: the user's page open in another browser stops showing the
    deleted conversation and memories by itself (it showed them until it did something)."""
    t = ui_texts(language)
    name, secret = ("Nora", "my secret diary entry") if language == "en" else ("小红", "我的秘密日记")
    url, engine = served(language)
    pages = []
    for _ in range(2):
        page = browser.new_context().new_page()
        page.goto(url, wait_until="load")
        page.locator("#sf-name textarea, #sf-name input").first.fill(name)
        page.get_by_role("button", name=t.remember, exact=True).click()
        page.wait_for_function("n => document.querySelector('#sf-status').innerText.includes(n)", arg=name)
        pages.append(page)
    other, page = pages
    other.locator("#sf-message textarea").fill(secret)
    other.locator("#sf-message textarea").press("Enter")
    other.wait_for_function("s => document.querySelector('#sf-chatbot').innerText.includes(s)", arg=secret)
    other.get_by_role("tab", name=t.memories_tab).click()
    other.wait_for_function("s => document.body.innerText.includes(s)", arg=secret, timeout=20_000)
    page.get_by_role("tab", name=t.memories_tab).click()
    page.locator("#sf-forget-confirm input").check()
    page.locator("#sf-forget").click()
    wait_until(lambda: not engine.bank.has_user(name), 15, "the user to be deleted")
    other.wait_for_function(  # by itself, within a few seconds
        "s => !document.body.innerText.includes(s)", arg=secret, timeout=15_000
    )
    gone = t.forgot.replace("{user}", name).replace("*", "")
    other.wait_for_function("g => document.querySelector('#sf-status').innerText.includes(g)", arg=gone)
    for p in pages:
        p.context.close()
