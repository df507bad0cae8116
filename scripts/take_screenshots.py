"""Retake the README's screenshots (docs/img/) with the real default model in headless Chromium.

Serves the web app with the packaged SmolLM2 (or ``--llm``) over a throwaway store holding a few
dated 2023 turns, with the paper's forgetting on (so the plot and "why it fades" have something
to show), then: asks about the cat in a new conversation and opens "memories used" under the
real reply (``chat_memories_used.png``), and opens the memory tab filtered to the cat with one
memory's detail (``memory_tab.png``). Needs Chromium at /usr/bin/chromium and playwright.

    python scripts/take_screenshots.py --out docs/img
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
HISTORY = [
    ("2023-04-28T10:00", "I adopted a cat named Miso today!", "How lovely! How is Miso settling in?"),
    ("2023-04-28T10:05", "She hides under the sofa, but she loves tuna.", "Give her time; tuna helps."),
    ("2023-05-02T19:00", "Work was long today, I am tired.", "Rest well tonight; you earned it."),
    ("2023-05-03T08:30", "Hi! Nice weather this morning.", "Good morning! Enjoy the sun."),
    ("2023-05-06T21:00", "My sister Jo is moving to Lisbon for a design job.", "Exciting news for Jo!"),
]
#: Forgetting on, on a time scale where three-year-old chat still shows (the paper's one-day
#: scale would have archived all of it before the first reply).
FORGETTING = {
    "mode": "paper",
    "tau": 400.0,
    "policy": "threshold",
    "daily_pass": False,
    "content_weights": True,
}
USER = "Emily"
QUESTION = "What is my cat called?"


NO_TOASTS = "() => document.querySelectorAll('.toast-wrap').forEach(t => t.remove())"


def memory_tab(page: Any, out: Path) -> None:
    """The memory tab with every memory, the cat's turn opened, and the plot."""
    page.get_by_role("tab", name="My memories").click()
    page.wait_for_selector("#sf-memory-table [role=gridcell]", timeout=60_000)
    page.locator("#sf-memory-table [role=gridcell]", has_text="adopted").first.click()
    page.wait_for_selector("#sf-detail-text", state="visible", timeout=30_000)
    page.wait_for_selector("#sf-plot img, #sf-plot svg, #sf-plot canvas", timeout=30_000)
    page.mouse.move(0, 0)
    page.wait_for_timeout(800)
    page.evaluate(NO_TOASTS)
    top, bottom = page.evaluate(  # page coordinates (bounding boxes are the viewport's)
        "() => [['#sf-knows', 'top'], ['#sf-plot', 'bottom']].map(([s, side]) =>"
        " document.querySelector(s).getBoundingClientRect()[side] + window.scrollY)"
    )
    page.screenshot(
        path=str(out / "memory_tab.png"),
        full_page=True,
        clip={"x": 0, "y": top - 50, "width": 1100, "height": bottom - top + 60},
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="docs/img", help="folder for the PNG files")
    parser.add_argument("--llm", default=None, help="LLM spec (default: the packaged SmolLM2)")
    parser.add_argument("--port", type=int, default=7997)
    args = parser.parse_args(argv)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("error: playwright is missing; pip install playwright", file=sys.stderr)
        return 2
    from memory_bank import MemoryBank
    from silicon_friend.runtime import Options, build_engine
    from silicon_friend.web.server import serve

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        bank = MemoryBank.open(tmp, forgetting=FORGETTING)
        engine = build_engine(Options(data_dir=tmp, llm=args.llm, summaries=False), bank=bank)
        for at, query, response in HISTORY:
            engine.bank.add_turn(USER, query, response, at=at)
        demo = serve(engine, port=args.port, block=False)
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1100, "height": 900})
                page.goto(f"http://127.0.0.1:{args.port}/", wait_until="load")
                page.locator("#sf-name textarea, #sf-name input").first.fill(USER)
                page.locator("#sf-remember").click()
                page.wait_for_function(
                    "n => document.querySelector('#sf-status').innerText.includes(n)", arg=USER
                )
                memory_tab(page, out)  # first: the 2023 curves, before the chat recalls the cat
                page.get_by_role("tab", name="Chat").click()
                page.locator("#sf-new").click()
                page.locator("#sf-message textarea").fill(QUESTION)
                page.locator("#sf-message textarea").press("Enter")
                page.wait_for_function(
                    "() => document.querySelector('#sf-chatbot').innerText.includes('memory updated')",
                    timeout=600_000,
                )
                page.get_by_text("Memories used", exact=False).first.click()
                page.wait_for_timeout(800)
                page.evaluate(NO_TOASTS)
                page.locator("#sf-chatbot").screenshot(path=str(out / "chat_memories_used.png"))
                print("reply:", engine.bank.history(USER)[-1].response)
                browser.close()
        finally:
            demo.close()
            engine.bank.close()
    from PIL import Image

    for name in ("chat_memories_used.png", "memory_tab.png"):  # palette PNGs: a third of the size
        image = Image.open(out / name).convert("RGB")
        image.quantize(colors=128, method=Image.Quantize.MEDIANCUT).save(out / name, optimize=True)
    print(f"wrote {out / 'chat_memories_used.png'} and {out / 'memory_tab.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
