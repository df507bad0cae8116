"""Summaries a user does not wait for, in a real headless Chromium (EN and ZH): right after an
import, signing in fills "What I know about you" with no button pressed, the state line says
what is done, and a run whose calls fail says so where the user looks (the state line and a
toast), keeping every turn. Skipped with the reason when Chromium or playwright is missing."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from memory_bank import MemoryBank
from memory_bank.embeddings import HashingEncoder
from memory_bank.original_format import import_data
from memory_bank.summaries import RolloverScheduler, Summarizer, SummaryConfig
from silicon_friend.engine import ChatSettings, SiliconFriend
from silicon_friend.models import prepare_model
from silicon_friend.web.texts import ui_texts
from tests.conftest import free_port
from tests.silicon_friend.fakes import EchoChatModel
from tests.silicon_friend.test_browser import artifacts, browser, wait_until  # noqa: F401 (fixture)
from tests.silicon_friend.test_browser_chat import toasts

pytestmark = pytest.mark.browser

NOW = dt.datetime(2026, 12, 1, 12)
#: An exported memory file in the original MemoryBank format: three days of a user's history.
HISTORY = {
    "en": {
        "2023-04-27": [{"query": "I adopted a cat named Miso.", "response": "What a lovely name!"}],
        "2023-04-28": [{"query": "I planted tomatoes in the garden.", "response": "That sounds relaxing."}],
        "2023-04-29": [{"query": "Miso slept on my keyboard.", "response": "Cats love warm places."}],
    },
    "zh": {
        "2023-04-27": [{"query": "我养了一只猫，叫咪咪。", "response": "好可爱的名字！"}],
        "2023-04-28": [{"query": "我在花园里种了番茄。", "response": "听起来很放松。"}],
        "2023-04-29": [{"query": "咪咪睡在我的键盘上。", "response": "猫咪喜欢温暖的地方。"}],
    },
}
GOOD = {
    "en": "The user adopted a cat named Miso and planted tomatoes in the garden.",
    "zh": "用户养了一只叫咪咪的猫，还在花园里种了番茄。",
}
#: What a weak model writes: the companion talking to the user, refused every time.
WEAK = {"en": "That sounds lovely! You must be so happy with your cat.", "zh": "听起来真棒！你一定很开心。"}


@pytest.fixture
def imported_app(tmp_path) -> Iterator[Callable[[str, str, str], tuple[str, MemoryBank]]]:  # type: ignore[no-untyped-def]
    """Serve the app over a store into which ``user``'s history was just imported; the chat
    model and the summariser answer ``reply``. Returns (url, bank)."""
    from silicon_friend.web.server import serve

    demos: list[Any] = []
    engines: list[SiliconFriend] = []
    banks: list[MemoryBank] = []

    def start(language: str, user: str, reply: str) -> tuple[str, MemoryBank]:
        bank = MemoryBank.open(
            tmp_path / language, language=language, encoder_instance=HashingEncoder(256), clock=lambda: NOW
        )
        banks.append(bank)
        import_data(bank, {user: {"name": user, "history": HISTORY[language]}})  # as `memorybank import`
        model = EchoChatModel(reply=reply)
        summarizer = Summarizer(bank, model, language, config=SummaryConfig(backoff_s=0, max_attempts=2))
        engine = SiliconFriend(
            bank, prepare_model(model, context_tokens=2048), language=language,
            settings=ChatSettings(max_new_tokens=32), summarizer=summarizer,
            scheduler=RolloverScheduler(summarizer),
        )  # fmt: skip
        engines.append(engine)
        port = free_port()
        demos.append(serve(engine, port=port, block=False))
        return f"http://127.0.0.1:{port}/", bank

    yield start
    for demo in demos:
        demo.close()
    for engine in engines:
        engine.close()
    for bank in banks:
        bank.close()


def sign_in(browser: Any, url: str, user: str) -> Any:  # noqa: F811
    page = browser.new_page(viewport={"width": 1200, "height": 1000})
    page.goto(url, wait_until="load")
    page.wait_for_selector("#sf-name textarea, #sf-name input", timeout=30_000)
    page.locator("#sf-name textarea, #sf-name input").first.fill(user)
    page.locator("#sf-remember").click()
    page.wait_for_function("n => document.querySelector('#sf-status').innerText.includes(n)", arg=user)
    return page


def shows(page: Any, selector: str, text: str, timeout: float = 30_000) -> None:
    page.wait_for_function(
        "([s, t]) => [...document.querySelectorAll(s)].some(e => e.innerText.includes(t))",
        arg=[selector, text],
        timeout=timeout,
    )


@pytest.mark.parametrize("language", ["en", "zh"])
def test_after_an_import_the_summaries_fill_in_without_pressing_summarize(browser, imported_app, language) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    t = ui_texts(language)
    user = "Emily" if language == "en" else "小明"
    url, bank = imported_app(language, user, GOOD[language])
    page = sign_in(browser, url, user)
    page.get_by_role("tab", name=t.memories_tab).click()
    shows(
        page, "#sf-summary-state", t.summary_done.split("{")[0].strip()
    )  # "✓ Summaries up to date: 8 written…"
    shows(page, "#sf-knows", GOOD[language])  # the portrait, the overview and the days, no button pressed
    knows = page.locator("#sf-knows").inner_text()
    assert t.portrait_title in knows and t.memory.daily_title in knows and "2023-04-29" in knows
    assert bank.profile(user)["global_portrait"] == GOOD[language]
    page.screenshot(path=str(artifacts() / f"browser_summaries_after_import_{language}.png"), full_page=True)
    page.close()


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_failed_summary_call_is_shown_where_the_user_looks(browser, imported_app, language) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    t = ui_texts(language)
    user = "Emily" if language == "en" else "小明"
    url, bank = imported_app(language, user, WEAK[language])
    page = sign_in(browser, url, user)
    failed = t.summary_some_failed.split("{")[0].strip()  # "⚠️" then the count
    reason = t.summary_reasons["voice"]
    shows(page, "#sf-summary", reason)  # on the chat tab, under the buttons
    wait_until(lambda: reason in toasts(page), 30, "the failure's toast")
    page.get_by_role("tab", name=t.memories_tab).click()
    shows(page, "#sf-summary-state", failed)
    assert reason in page.locator("#sf-summary-state").inner_text()
    page.screenshot(path=str(artifacts() / f"browser_summaries_failed_{language}.png"), full_page=True)
    assert len(bank.history(user)) == 3  # every imported turn kept
    assert bank.profile(user)["global_portrait"] == ""  # nothing made of the refused answers
    page.close()
