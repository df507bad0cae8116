"""The package surface: lazy imports and the one-call constructors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import memory_bank.langchain as mbl
from memory_bank import MemoryBank

REPO = Path(__file__).resolve().parents[2]


def test_importing_the_package_loads_no_heavy_langchain_module() -> None:
    code = (
        "import sys, memory_bank.langchain as m\n"
        "heavy = [n for n in sys.modules if n.startswith(('langchain_classic', 'langchain.agents', 'langgraph',"
        " 'langchain_community'))]\n"
        "assert not heavy, heavy\n"
        "m.MemoryBankRetriever\n"
        "assert 'langchain_classic' not in sys.modules and 'langchain.agents' not in sys.modules\n"
        "m.MemoryBankMemory\n"
        "assert 'langchain_classic' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_unknown_names_raise_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        mbl.NoSuchThing  # noqa: B018
    assert set(mbl.__all__) <= set(dir(mbl))


def test_one_call_constructors(bank: MemoryBank, tmp_path: Path) -> None:
    assert isinstance(mbl.as_retriever(bank, "Emily", k=3), mbl.MemoryBankRetriever)
    assert isinstance(mbl.as_memory(bank, "Emily", window=3), mbl.MemoryBankMemory)
    assert isinstance(mbl.as_middleware(bank, "Emily"), mbl.MemoryBankMiddleware)
    assert isinstance(mbl.as_loader(bank, "Emily"), mbl.MemoryForgetterLoader)
    makers: list[Any] = [mbl.as_retriever, mbl.as_memory, mbl.as_middleware, mbl.as_loader]
    for make in makers:
        for user in (None, ""):
            with pytest.raises(ValueError, match="user"):
                make(bank, user)


def test_a_bank_from_a_yaml_config_file(tmp_path: Path) -> None:
    config = tmp_path / "memory.yaml"
    config.write_text("memory_bank:\n  encoder: hashing\n  retrieval:\n    top_k: 1\n", encoding="utf-8")
    with MemoryBank.open(tmp_path / "store", config_file=config) as bank:
        bank.add_turn("Emily", "I adopted a cat named Miso.", "Lovely!")
        bank.add_turn("Emily", "My cat Miso likes tuna.", "Yum.")
        assert len(mbl.as_retriever(bank, "Emily").invoke("cat")) == 1
