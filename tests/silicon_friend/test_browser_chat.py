"""The chat side in a real headless Chromium, in English and Chinese: "memories used" under a
reply (collapsed until opened) and "memory updated", the temporary chat, the language switch, a
reload that shows the recent conversation, Stop, and messages sent while a reply streams.

Screenshots go to ``$TEST_ARTIFACTS`` (default ``./artifacts``); skipped like test_browser.py when
Chromium or playwright is missing.
"""

from __future__ import annotations

from typing import Any

import pytest

from silicon_friend.web.texts import ui_texts
from tests.silicon_friend.fakes import EchoChatModel
from tests.silicon_friend.test_browser import artifacts, browser, served, wait_until  # noqa: F401

pytestmark = pytest.mark.browser

CASES = {
    "en": ("Emily", "I adopted a cat named Miso.", "Do you remember my cat Miso?"),
    "zh": ("小明", "我今天养了一只猫，叫咪咪。", "你还记得我的猫咪咪吗？"),
}


def chat_text(page: Any) -> str:
    return str(page.locator("#sf-chatbot").inner_text())


def wait_chat(page: Any, text: str, timeout: float = 20_000) -> None:
    page.wait_for_function(
        "m => (document.querySelector('#sf-chatbot')?.innerText || '').includes(m)", arg=text, timeout=timeout
    )


def open_as(browser: Any, url: str, name: str, language: str, context: Any = None) -> Any:  # noqa: F811
    t = ui_texts(language)
    page = context.new_page() if context is not None else browser.new_page()
    page.set_viewport_size({"width": 1100, "height": 1000})
    page.goto(url, wait_until="load")
    page.locator("#sf-name textarea, #sf-name input").first.fill(name)
    page.get_by_role("button", name=t.remember, exact=True).click()
    page.wait_for_function("n => document.querySelector('#sf-status').innerText.includes(n)", arg=name)
    return page


def say(page: Any, message: str) -> None:
    page.locator("#sf-message textarea").fill(message)
    page.locator("#sf-message textarea").press("Enter")


@pytest.mark.parametrize("language", ["en", "zh"])
def test_memories_used_are_shown_collapsed_with_memory_updated(browser, served, language) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    t = ui_texts(language)
    name, fact, question = CASES[language]
    url, engine = served(language)
    engine.bank.add_turn(name, fact, "❤", at="2023-04-28T10:00")
    page = open_as(browser, url, name, language)
    assert fact in chat_text(page)  # the recent conversation is shown again...
    page.locator("#sf-new").click()  # ...and a new one starts: the fact is now a memory to recall
    page.wait_for_function("f => !document.querySelector('#sf-chatbot').innerText.includes(f)", arg=fact)
    say(page, question)
    title = t.memories_used.replace("{n}", "1")
    wait_chat(page, f"Echo: {question}")
    wait_chat(page, t.memory_updated)  # shown once the turn is in the store
    assert len(engine.bank.history(name)) == 2
    assert chat_text(page).count(t.memory_updated) == 1  # the resumed turn claims nothing
    text = chat_text(page)
    assert title in text and "2023-04-28" not in text  # collapsed: only the title line shows
    page.get_by_text(title).click()
    wait_chat(page, "2023-04-28")
    assert fact in chat_text(page) and t.kinds["turn"] in chat_text(page)
    page.wait_for_timeout(300)
    shot = artifacts() / f"browser_memories_used_{language}.png"
    page.locator("#sf-chatbot").screenshot(path=str(shot))
    page.close()


@pytest.mark.parametrize("language", ["en", "zh"])
def test_temporary_chat_is_shown_and_stores_nothing(browser, served, language) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    t = ui_texts(language)
    name, fact, question = CASES[language]
    url, engine = served(language)
    engine.bank.add_turn(name, fact, "❤", at="2023-04-28T10:00")
    page = open_as(browser, url, name, language)
    page.locator("#sf-new").click()
    page.get_by_label(t.temporary_label).check()
    page.wait_for_selector("#sf-temporary-banner", state="visible")
    assert "🕶" in page.locator("#sf-temporary-banner").inner_text()
    say(page, question)
    wait_chat(page, t.temporary_turn)
    assert fact not in " ".join(str(m["messages"]) for m in engine.model.chat_model.calls)  # nothing read
    assert len(engine.bank.history(name)) == 1  # nothing written
    page.get_by_label(t.temporary_label).uncheck()
    page.wait_for_selector("#sf-temporary-banner", state="hidden")
    say(page, "and now for real")
    wait_until(lambda: len(engine.bank.history(name)) == 2, 20, "the turn to be stored")
    page.close()


@pytest.mark.parametrize(("start", "switch"), [("en", "zh"), ("zh", "en")])
def test_the_language_switch_relabels_the_page(browser, served, start, switch) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    before, after = ui_texts(start), ui_texts(switch)
    name = CASES[start][0]
    url, _ = served(start)
    page = open_as(browser, url, name, start)
    say(page, "hello")
    wait_chat(page, before.memory_updated)
    page.get_by_text("中文" if switch == "zh" else "English", exact=True).click()
    page.get_by_role("button", name=after.send, exact=True).wait_for(timeout=10_000)
    for label in (after.remember, after.stop, after.new_conversation, after.regenerate, after.summarize):
        assert page.get_by_role("button", name=label, exact=True).count() == 1
    assert page.get_by_role("tab", name=after.memories_tab).count() == 1
    assert page.get_by_role("button", name=before.send, exact=True).count() == 0
    wait_chat(page, after.memory_updated)  # the notes under replies too
    page.screenshot(path=str(artifacts() / f"browser_language_{start}_to_{switch}.png"), full_page=True)
    page.close()


def test_a_reload_shows_the_recent_conversation(browser, served) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    url, _ = served("en")
    page = open_as(browser, url, "Emily", "en")
    for message in ("first thing", "second thing"):
        say(page, message)
        wait_chat(page, f"Echo: {message}")
    page.reload(wait_until="load")
    wait_chat(page, "Echo: second thing")
    assert "Echo: first thing" in chat_text(page)
    assert "Emily" in page.locator("#sf-status").inner_text()
    page.close()


def test_a_reload_mid_reply_finishes_the_reply_and_the_waiting_message_on_screen(browser, served) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    t = ui_texts("en")
    words = " ".join(f"w{i}" for i in range(30))
    url, engine = served("en", EchoChatModel(delay=0.1))
    page = open_as(browser, url, "Emily", "en")
    say(page, f"story {words}")
    wait_chat(page, "w3")
    say(page, "waiting in line")  # sent while the reply streams
    wait_chat(page, t.queued)
    page.reload(wait_until="load")  # the page goes away mid-reply and comes back
    wait_chat(page, f"Echo: story {words}", timeout=30_000)  # drawn as it goes on, no click needed
    wait_chat(page, "Echo: waiting in line", timeout=30_000)
    stored = [(m.query, m.response) for m in engine.bank.history("Emily")]
    assert stored == [(f"story {words}", f"Echo: story {words}"), ("waiting in line", "Echo: waiting in line")]
    assert t.stopped not in chat_text(page)
    page.close()


def test_a_newcomer_who_only_typed_a_name_sees_the_chat_after_a_reload(browser, served) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    url, _ = served("en")
    page = browser.new_page(viewport={"width": 1100, "height": 1000})
    page.goto(url, wait_until="load")
    page.locator("#sf-name textarea, #sf-name input").first.fill("Nora")
    say(page, "hello, I am new here")  # no Remember Me
    wait_chat(page, "Echo: hello, I am new here")
    page.wait_for_function("() => document.querySelector('#sf-status').innerText.includes('Nora')")
    page.reload(wait_until="load")
    wait_chat(page, "Echo: hello, I am new here")
    page.close()


def test_the_next_message_typed_while_the_server_is_slow_is_neither_wiped_nor_lost(browser, served, monkeypatch) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    from silicon_friend.web.app import WebApp

    slow = WebApp._session

    def _session(self, name, request):  # type: ignore[no-untyped-def]  # a busy server answers late
        import time

        time.sleep(2.5)
        return slow(self, name, request)

    monkeypatch.setattr(WebApp, "_session", _session)
    url, engine = served("en")
    page = open_as(browser, url, "Emily", "en")
    say(page, "first message")
    page.wait_for_function(  # emptied as it was sent, long before the server answers
        "() => document.querySelector('#sf-message textarea').value === ''", timeout=1500
    )
    page.locator("#sf-message textarea").fill("second message")
    page.wait_for_timeout(3000)  # the first one's handler answers meanwhile
    assert page.locator("#sf-message textarea").input_value() == "second message"  # not wiped
    page.locator("#sf-message textarea").press("Enter")
    wait_chat(page, "Echo: second message")
    assert [m.query for m in engine.bank.history("Emily")] == ["first message", "second message"]
    page.close()


def test_a_message_given_back_later_keeps_what_was_typed_meanwhile(browser, served, monkeypatch) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    """A waiting message refused at its turn comes back into the box, and the next message the
    user was typing meanwhile stays after it (the box was written over: the draft was lost); the
    same words refused again come back again."""
    from memory_bank.errors import StoreError
    from silicon_friend.engine import SiliconFriend

    real = SiliconFriend.stream

    def stream(self, session, message, *args, **kwargs):  # type: ignore[no-untyped-def]
        if message.startswith("refuse me"):
            import time

            time.sleep(1.5)  # the user types meanwhile
            raise StoreError("the store refused the turn")
        return real(self, session, message, *args, **kwargs)

    monkeypatch.setattr(SiliconFriend, "stream", stream)
    url, engine = served("en")
    page = open_as(browser, url, "Emily", "en")
    box = page.locator("#sf-message textarea")
    say(page, "refuse me, please")
    page.wait_for_function("() => document.querySelector('#sf-message textarea').value === ''", timeout=1500)
    box.fill("my next thought")  # typed while the first waits for its turn
    page.wait_for_function(
        "() => document.querySelector('#sf-message textarea').value.includes('refuse me')", timeout=15_000
    )
    assert box.input_value() == "refuse me, please\n\nmy next thought"
    box.fill("refuse me, please")  # the same words, refused again: back again
    box.press("Enter")
    page.wait_for_function("() => document.querySelector('#sf-message textarea').value === ''", timeout=1500)
    page.wait_for_function(
        "() => document.querySelector('#sf-message textarea').value === 'refuse me, please'", timeout=15_000
    )
    say(page, "a fine message")
    wait_chat(page, "Echo: a fine message")
    assert [m.query for m in engine.bank.history("Emily")] == ["a fine message"]
    page.close()


def test_stop_is_calm_and_a_message_sent_while_streaming_is_answered(browser, served) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    t = ui_texts("en")
    words = " ".join(f"w{i}" for i in range(60))
    url, engine = served("en", EchoChatModel(reply=words, delay=0.1))
    page = open_as(browser, url, "Emily", "en")
    say(page, "tell me a long story")
    wait_chat(page, "w3")
    say(page, "and this one too")  # sent while the reply streams
    wait_chat(page, t.queued)
    page.locator("#sf-stop").click()
    stored = lambda: len(engine.bank.history("Emily")) if engine.bank.has_user("Emily") else 0  # noqa: E731
    wait_until(lambda: stored() == 2, 30, "both turns to be stored")
    wait_chat(page, t.stopped)
    text = chat_text(page)
    assert "failed" not in text and "⚠" not in text
    assert [m.query for m in engine.bank.history("Emily")] == ["tell me a long story", "and this one too"]
    page.close()


def toasts(page: Any) -> str:
    return str(
        page.evaluate("() => [...document.querySelectorAll('.toast-body')].map(e => e.innerText).join('\\n')")
    )


def toast_titles(page: Any) -> str:
    """The toast titles as shown: the element's text, or the text CSS puts in its place."""
    return str(
        page.evaluate(
            """() => [...document.querySelectorAll('.toast-title')].map(e => {
                const after = getComputedStyle(e, '::after').content;
                return parseFloat(getComputedStyle(e).fontSize) > 0 ? e.innerText : after.replace(/"/g, '');
            }).join('\\n')"""
        )
    )


@pytest.mark.parametrize("language", ["en", "zh"])
def test_mistakes_are_toasts_that_leave_the_page_usable(browser, served, language) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    """Sending before giving a name, and "Forget me" unticked: a toast in the page's language, no
    error overlay on the chat, the table or the checkbox, the message kept, and nothing stored."""
    t = ui_texts(language)
    name, fact, _ = CASES[language]
    url, engine = served(language)
    page = browser.new_page(viewport={"width": 1100, "height": 1000})
    page.goto(url, wait_until="load")
    page.wait_for_selector("#sf-message textarea", timeout=30_000)
    say(page, fact)
    page.wait_for_function("m => document.body.innerText.includes(m)", arg=t.need_name, timeout=15_000)
    assert t.need_name in toasts(page)
    titles = toast_titles(page)  # titled in the page's language (Gradio's own title is English)
    assert t.warning_title in titles and (language == "en" or "Warning" not in titles), titles
    page.wait_for_function(  # given back into the box (the page emptied it as it sent), to send once named
        "m => document.querySelector('#sf-message textarea').value === m", arg=fact, timeout=15_000
    )
    assert page.locator(".error, [data-testid=error]").count() == 0  # no overlay on any component
    page.locator("#sf-name textarea, #sf-name input").first.fill(name)
    page.locator("#sf-remember").click()
    page.wait_for_function("n => document.querySelector('#sf-status').innerText.includes(n)", arg=name)
    page.locator("#sf-send").click()  # the kept message goes now
    wait_chat(page, f"Echo: {fact}")
    page.get_by_role("tab", name=t.memories_tab).click()
    page.wait_for_selector("#sf-memory-table [role=gridcell]", timeout=20_000)
    page.locator("#sf-forget").click()
    page.wait_for_function(
        "m => document.body.innerText.includes(m)", arg=t.forget_unconfirmed, timeout=15_000
    )
    assert page.locator(".error, [data-testid=error]").count() == 0
    page.get_by_label(t.forget_confirm).check()  # the box is not covered: it can be ticked
    assert fact in page.locator("#sf-memory-table").inner_text() and len(engine.bank.history(name)) == 1
    page.screenshot(path=str(artifacts() / f"browser_mistakes_{language}.png"), full_page=True)
    page.close()


def test_a_turn_removed_in_one_tab_leaves_the_other_tabs_page_by_itself(browser, served) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    """Tab B kept showing a turn tab A had removed, and its Remove Last Turn then removed another."""
    url, engine = served("en")
    context = browser.new_context()
    a = open_as(browser, url, "Emily", "en", context)
    for text in ("one: I have a cat", "two: I like tea", "three: I live in Paris"):
        say(a, text)
        wait_chat(a, f"Echo: {text}")
    b = open_as(browser, url, "Emily", "en", context)
    wait_chat(b, "three: I live in Paris")
    a.locator("#sf-remove").click()
    wait_until(lambda: len(engine.bank.history("Emily")) == 2, 15, "the removal")
    b.wait_for_function(  # by itself, within a few seconds
        "() => !document.querySelector('#sf-chatbot').innerText.includes('three')", timeout=15_000
    )
    context.close()


def test_backslashes_show_as_typed(browser, served) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    """``C:\\Users\\_temp`` showed as ``C:\\Users_temp``: markdown took the backslashes as escapes."""
    url, engine = served("en")
    page = open_as(browser, url, "Emily", "en")
    typed = r"my files are in C:\Users\_temp and a\_b, see \\server"
    say(page, typed)
    wait_chat(page, "Echo: ")
    wait_chat(page, typed)
    wait_until(lambda: engine.bank.has_user("Emily"), 20, "the turn to be stored")
    assert [m.query for m in engine.bank.history("Emily")] == [typed]
    page.close()


def test_remove_last_works_after_a_message_with_an_indent(browser, served) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    """The page's copy of a message loses its indent and tabs (Gradio's cleandoc): the check that
    the page shows the conversation as it is refused Remove Last Turn for good after one."""
    url, engine = served("zh")
    page = open_as(browser, url, "小明", "zh")
    for text in ("\u3000\u3000今天天气很好，我去公园散步了。", "第二条\n  缩进的一行\t和制表符"):
        say(page, text)
        wait_chat(page, "Echo: ")
        wait_until(lambda t=text: engine.bank.has_user("小明") and t in [m.query for m in engine.bank.history("小明")], 20, "stored")
    page.locator("#sf-remove").click()
    wait_until(lambda: len(engine.bank.history("小明")) == 1, 15, "the removal")
    page.close()
