"""The "My memories" tab in a real headless Chromium, in English and Chinese: readable rows and
headers, paging, what it knows, a row's full text and why it fades, edit, add, delete with undo,
filter and restore; and two users at once, neither reaching the other's memories.

Screenshots go to ``$TEST_ARTIFACTS`` (default ``./artifacts``); skipped with the reason when
Chromium or playwright is missing (see ``test_browser.py``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from memory_bank import MemoryBank, MemoryKind
from memory_bank.embeddings import HashingEncoder
from silicon_friend.engine import ChatSettings, SiliconFriend
from silicon_friend.models import prepare_model
from silicon_friend.web.texts import memory_texts, ui_texts
from tests.conftest import free_port
from tests.silicon_friend.fakes import EchoChatModel
from tests.silicon_friend.test_browser import artifacts, browser, wait_until  # noqa: F401 (fixture)

pytestmark = pytest.mark.browser

NOW = dt.datetime(2026, 12, 1, 12)
TEXTS = {
    "en": {
        "cat": ("I adopted a cat named Miso.", "What a lovely name! Tell me how Miso settles in at home."),
        "note": "Today I worked in the garden and planted tomatoes, row {i}.",
        "reply": "That sounds relaxing! Gardening is a wonderful way to unwind.",
        "portrait": "Emily is calm and caring, and loves her garden.",
        "edited": "I adopted a cat named Mochi.",
        "added": "My sister Jo lives in Lisbon.",
        "old": "I used to play the violin as a child.",
    },
    "zh": {
        "cat": ("我养了一只猫，叫咪咪。", "好可爱的名字！跟我说说咪咪在家里适应得怎么样。"),
        "note": "今天我在花园里种了番茄，第 {i} 行。",
        "reply": "听起来很放松！园艺是很好的放松方式。",
        "portrait": "小明性格温和体贴，喜欢自己的花园。",
        "edited": "我养了一只猫，叫豆豆。",
        "added": "我妹妹住在成都。",
        "old": "我小时候学过小提琴。",
    },
}


@pytest.fixture
def memory_app(tmp_path) -> Iterator[Callable[[str], tuple[str, MemoryBank]]]:  # type: ignore[no-untyped-def]
    """Serve the app (echo model) over a store with forgetting on; returns (url, bank)."""
    from silicon_friend.web.server import serve

    demos: list[Any] = []
    banks: list[MemoryBank] = []

    def start(language: str) -> tuple[str, MemoryBank]:
        bank = MemoryBank.open(
            tmp_path / language, language=language, encoder_instance=HashingEncoder(256), clock=lambda: NOW,
            forgetting={"mode": "paper", "tau": 400.0, "policy": "threshold", "daily_pass": False,
                        "content_weights": True},
        )  # fmt: skip
        banks.append(bank)
        engine = SiliconFriend(
            bank, prepare_model(EchoChatModel(), context_tokens=2048), language=language,
            settings=ChatSettings(max_new_tokens=32),
        )  # fmt: skip
        port = free_port()
        demos.append(serve(engine, port=port, block=False))
        return f"http://127.0.0.1:{port}/", bank

    yield start
    for demo in demos:
        demo.close()
    for bank in banks:
        bank.close()


def seed(bank: MemoryBank, user: str, language: str, notes: int = 30) -> None:
    """Imported 2023 history: a cat, many garden notes, a portrait, a day's summary."""
    x = TEXTS[language]
    bank.add_turn(user, *x["cat"], at="2023-04-28T10:00")
    for i in range(notes):
        bank.add_turn(user, x["note"].format(i=i), x["reply"], at=f"2023-05-{1 + i % 28:02d}T10:00")
    bank.add_turn(user, x["old"], "", at="2023-04-20T10:00")
    bank.set_layer(user, MemoryKind.GLOBAL_PORTRAIT, x["portrait"])
    bank.set_layer(user, MemoryKind.DAILY_SUMMARY, x["cat"][0], date="2023-04-28")


def open_memories(browser: Any, url: str, language: str, user: str, *, context: bool = False) -> Any:  # noqa: F811
    viewport = {"width": 1200, "height": 1000}
    page = (
        browser.new_context(viewport=viewport).new_page() if context else browser.new_page(viewport=viewport)
    )
    page.goto(url, wait_until="load")
    page.wait_for_selector("#sf-name textarea, #sf-name input", timeout=30_000)
    page.locator("#sf-name textarea, #sf-name input").first.fill(user)
    page.locator("#sf-remember").click()
    page.wait_for_function("n => document.querySelector('#sf-status').innerText.includes(n)", arg=user)
    page.get_by_role("tab", name=ui_texts(language).memories_tab).click()
    page.wait_for_selector("#sf-memory-table [role=gridcell]", timeout=20_000)
    return page


def shows(page: Any, selector: str, text: str, timeout: float = 30_000) -> None:
    # A wait, not a speed check: on a busy machine a background summary run can hold the page.
    page.wait_for_function(
        "([s, t]) => [...document.querySelectorAll(s)].some(e => e.innerText.includes(t))",
        arg=[selector, text],
        timeout=timeout,
    )


def click_row(page: Any, text: str, opens: str) -> None:
    """Click the table cell that shows ``text`` (the excerpt of a memory) and wait for the
    detail to show ``opens``. A click can land on the table a search is just replacing (its
    rows then mean the old list): clicked again while the detail does not show it."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for _ in range(3):
        page.locator("#sf-memory-table [role=gridcell]", has_text=text).first.click()
        try:
            shows(page, "#sf-detail-text", opens, timeout=10_000)
            return
        except PlaywrightTimeout:
            continue
    shows(page, "#sf-detail-text", opens)


def search(page: Any, words: str) -> None:
    box = page.locator("#sf-filter-text textarea, #sf-filter-text input").first
    box.fill(words)
    box.press("Enter")


@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_memory_tab_is_readable_and_under_the_users_control(browser, memory_app, language) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    t, x = memory_texts(language), TEXTS[language]
    user = "Emily" if language == "en" else "小明"
    url, bank = memory_app(language)
    seed(bank, user, language)
    page = open_memories(browser, url, language, user)
    # What it knows, always there; the total stated (34 memories, 25 on this page).
    shows(page, "#sf-knows", x["portrait"])
    shows(page, "#sf-memory-info", "34")
    assert page.locator("#sf-knows").inner_text().count(t.daily_title) == 1
    # Headers whole and on one line; compact rows (one line each, not whole replies).
    headers = page.evaluate(
        """() => [...document.querySelectorAll('#sf-memory-table th')].map(th => {
            const s = th.querySelector('.header') || th, r = s.getBoundingClientRect(), c = th.getBoundingClientRect();
            return [s.innerText, s.getClientRects().length, r.right <= c.right + 1 && r.left >= c.left - 1];
        })"""
    )
    assert [h[0] for h in headers] == list(t.columns) and all(h[1] == 1 and h[2] for h in headers), headers
    heights = page.evaluate(
        "() => [...document.querySelectorAll('#sf-memory-table [role=row]')].slice(1, 6).map(r => r.getBoundingClientRect().height)"
    )
    assert heights and max(heights) < 50, heights
    page.wait_for_selector("#sf-plot img, #sf-plot svg, #sf-plot canvas", timeout=15_000)
    assert page.locator("#sf-plot label").first.inner_text() == t.plot_label  # not Gradio's "Plot"
    page.screenshot(path=str(artifacts() / f"browser_memory_tab_{language}.png"), full_page=True)
    # Page 2 holds the rest, and says so.
    page.locator("#sf-page-next").click()
    shows(page, "#sf-memory-info", "26–34")
    page.locator("#sf-page-prev").click()
    shows(page, "#sf-memory-info", "1–25")
    # A row opens the whole memory and why it fades; edit it.
    search(page, x["cat"][0][:6])
    shows(page, "#sf-memory-info", "1–2")  # the turn and the day's summary
    click_row(page, x["cat"][1][:4], x["cat"][1])  # the full reply, not the excerpt
    shows(page, "#sf-detail-text", t.why_title)
    page.screenshot(path=str(artifacts() / f"browser_memory_detail_{language}.png"), full_page=True)
    assert page.locator("#sf-edit-text textarea").input_value() == x["cat"][0]  # the message alone
    assert page.locator("#sf-edit-reply textarea").input_value() == x["cat"][1]  # the reply in its own box
    page.locator("#sf-edit-text textarea").fill(x["edited"])
    page.locator("#sf-edit-save").click()
    edited = (x["edited"], x["cat"][1])  # the reply kept where it was
    wait_until(
        lambda: (lambda m: (m.query, m.response))(bank.history(user, date="2023-04-28")[0]) == edited,
        30,
        "the edit to be stored",
    )
    # Delete it, then undo.
    page.locator("#sf-delete").click()
    wait_until(lambda: not bank.history(user, date="2023-04-28"), 30, "the delete")
    page.locator("#sf-undo").click()
    wait_until(
        lambda: [m.query for m in bank.history(user, date="2023-04-28")] == [x["edited"]], 30, "the undo"
    )
    # The undo's reply drawn (its button hidden) before the next action: on a busy machine the
    # page still renders it (table, chart) after the store has changed, and an action queued
    # behind it waits that long.
    page.wait_for_selector("#sf-undo", state="hidden", timeout=30_000)
    # Add one by hand.
    page.locator("#sf-add-text textarea").fill(x["added"])
    page.locator("#sf-add").click()
    wait_until(lambda: any(m.query == x["added"] for m in bank.history(user)), 30, "the added memory")
    assert next(m for m in bank.history(user) if m.query == x["added"]).date == NOW.date().isoformat()
    # A forgotten memory: found with the "forgotten" filter, and restored.
    old = next(m for m in bank.history(user) if m.query == x["old"])
    bank.storage.set_archived(bank.user(user).id, [old.rowid or 0], True)  # as the curve forgets
    search(page, "")
    page.locator("#sf-filter-status input").click()
    page.get_by_role("option", name=t.statuses["forgotten"], exact=True).click()
    shows(page, "#sf-memory-info", "1–1")
    click_row(page, x["old"][:4], t.reasons.archived[:12])
    page.locator("#sf-restore").click()
    wait_until(lambda: any(m.query == x["old"] for m in bank.history(user)), 15, "the restore")
    page.close()


@pytest.mark.parametrize(("start", "switch"), [("en", "zh"), ("zh", "en")])
def test_the_memory_tab_follows_the_language_switch(browser, memory_app, start, switch) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    before, after = memory_texts(start), memory_texts(switch)
    user = "Emily" if start == "en" else "小明"
    url, bank = memory_app(start)
    seed(bank, user, start, notes=3)
    page = open_memories(browser, url, start, user)
    click_row(page, TEXTS[start]["cat"][1][:4], before.why_title)
    page.get_by_text("中文" if switch == "zh" else "English", exact=True).click()
    # Headers, kind and status names in the rows, the page line, what it knows, the open detail.
    page.wait_for_function(
        "h => [...document.querySelectorAll('#sf-memory-table th')].map(th => th.innerText.trim()).join('|') === h",
        arg="|".join(after.columns),
        timeout=15_000,
    )
    table = page.locator("#sf-memory-table").inner_text()
    assert after.kinds["turn"] in table and after.statuses["kept"] in table
    assert before.kinds["turn"] not in table
    shows(page, "#sf-memory-info", after.page_info.split("{")[0])
    shows(page, "#sf-knows", after.knows_title)
    shows(page, "#sf-detail-text", after.why_title)
    assert before.why_title not in page.locator("#sf-detail-text").inner_text()
    # Every label and button of the tab.
    for label in (after.add_button, after.apply, after.save, after.delete):
        assert page.get_by_role("button", name=label, exact=True).count() == 1, label
    for label in (before.add_button, before.apply, before.save, before.delete):
        assert page.get_by_role("button", name=label, exact=True).count() == 0, label
    for label in (after.add_label, after.search_label, after.kind_label, after.status_label):
        assert page.get_by_label(label, exact=True).count() == 1, label
    # The filters' choices, and they still filter.
    page.locator("#sf-filter-kind input").click()
    page.get_by_role("option", name=after.kinds["daily_summary"], exact=True).click()
    shows(page, "#sf-memory-info", "1–1")
    assert after.kinds["daily_summary"] in page.locator("#sf-memory-table").inner_text()
    page.wait_for_selector("#sf-plot img, #sf-plot svg, #sf-plot canvas", timeout=15_000)
    page.screenshot(path=str(artifacts() / f"browser_memory_language_{start}_to_{switch}.png"), full_page=True)
    page.close()


def test_two_users_at_once_never_see_or_change_each_others_memories(browser, memory_app) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    url, bank = memory_app("en")
    seed(bank, "Ann", "en", notes=3)
    bank.add_turn("Bob", "Bob's secret: the safe code is 4711.", "I will keep it.", at="2023-05-02T10:00")
    ann = open_memories(browser, url, "en", "Ann", context=True)
    bob = open_memories(browser, url, "en", "Bob", context=True)
    assert "4711" not in ann.locator("#sf-memory-table").inner_text()
    assert "tomatoes" not in bob.locator("#sf-memory-table").inner_text()
    # Ann deletes one of hers; Bob's tab offers no undo, and Bob's edit changes only his.
    click_row(ann, "I adopted", "I adopted")
    ann.locator("#sf-delete").click()
    wait_until(lambda: not bank.history("Ann", date="2023-04-28"), 15, "Ann's delete")
    ann.wait_for_selector("#sf-undo", state="visible", timeout=10_000)
    assert not bob.locator("#sf-undo").is_visible()
    click_row(bob, "secret", "safe code is 4711")
    bob.locator("#sf-edit-text textarea").fill("Bob's note: buy milk.")
    bob.locator("#sf-edit-reply textarea").fill("Noted.")
    bob.locator("#sf-edit-save").click()
    wait_until(lambda: bank.history("Bob")[0].text == "Bob's note: buy milk.\nNoted.", 15, "Bob's edit")
    ann.locator("#sf-undo").click()
    wait_until(lambda: len(bank.history("Ann", date="2023-04-28")) == 1, 15, "Ann's undo")
    ann.locator("#sf-filter-apply").click()
    shows(ann, "#sf-memory-table", "I adopted")
    assert "milk" not in ann.locator("#sf-memory-table").inner_text()
    assert [(m.query, m.response) for m in bank.history("Bob")] == [("Bob's note: buy milk.", "Noted.")]
    for page in (ann, bob):
        page.context.close()
