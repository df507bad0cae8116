"""Shared test fixtures: offline settings, paths to the shared data, a fixed clock."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("MEMORYBANK_SHARED_DATA", REPO.parent / "shared" / "data"))
PAPER_DATA = SHARED_DATA / "memorybank_eval"
LOCOMO_DEV = SHARED_DATA / "locomo" / "locomo_dev.json"


def paper_file(lang: str, kind: str) -> Path:
    """``kind``: 'memory' or 'questions'; ``lang``: 'en' or 'zh'. Skips if the data is absent."""
    folder = "en" if lang == "en" else "cn"
    suffix = "en" if lang == "en" else "cn"
    name = f"memory_bank_{suffix}.json" if kind == "memory" else f"probing_questions_{suffix}.jsonl"
    path = PAPER_DATA / folder / name
    if not path.is_file():
        pytest.skip(f"paper evaluation data not found at {path} (set MEMORYBANK_SHARED_DATA)")
    return path


class FixedClock:
    """A clock tests can set and advance."""

    def __init__(self, start: str = "2023-05-01T12:00:00") -> None:
        self.now = dt.datetime.fromisoformat(start)

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, days: float = 0, **kw: float) -> None:
        self.now += dt.timedelta(days=days, **kw)


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()
