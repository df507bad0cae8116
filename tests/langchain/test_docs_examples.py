"""The README section's code blocks and the example scripts run offline."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

# ConversationChain and LLMChain are deprecated by LangChain; classic apps still use them.
pytestmark = pytest.mark.filterwarnings("ignore::langchain_core._api.LangChainDeprecationWarning")

REPO = Path(__file__).resolve().parents[2]
_README = (REPO / "README.md").read_text(encoding="utf-8")
_START = _README.index("## Use it in LangChain")
SECTION = _README[_START : _README.index("\n## ", _START + 3)]
BLOCKS = re.findall(r"```python\n(.*?)```", SECTION, flags=re.S)
#: Text each block of the doc prints, in order (the memory or the reply it leads to).
EXPECTED = [
    "Your cat is called Miso.",
    "] Human: I adopted a cat named Miso. AI: What a lovely name!",  # after the date
    "['I adopted a cat named Miso.', 'What is my cat called?']",
    "My sister Anna lives in Lyon.",
]


def test_the_doc_has_the_expected_examples() -> None:
    assert len(BLOCKS) == len(EXPECTED)


@pytest.mark.parametrize(("code", "expected"), zip(BLOCKS, EXPECTED, strict=True), ids=range(len(BLOCKS)))
def test_doc_block_runs(code: str, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    namespace: dict[str, Any] = {"__name__": "__doc_example__"}
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), namespace)
    assert expected in out.getvalue()
    namespace["bank"].close()


def _example(name: str) -> ModuleType:
    path = REPO / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_example_retriever_chain(tmp_path: Path) -> None:
    main = _example("langchain_retriever_chain").main
    assert main(["--store", str(tmp_path), "--encoder", "hashing"]) == "Your cat is called Miso."


def test_example_conversation_chain(tmp_path: Path) -> None:
    out = _example("langchain_conversation_chain").main(["--store", str(tmp_path), "--encoder", "hashing"])
    assert out["memories"] == "[2023-05-04] Human: I adopted a cat named Miso today. AI: What a lovely name!"
    assert out["answer"] == "Your cat is called Miso."


def test_example_agent_middleware(tmp_path: Path) -> None:
    replies = _example("langchain_agent_middleware").main(["--store", str(tmp_path), "--encoder", "hashing"])
    assert replies == ["What a lovely name!", "Your cat is called Miso."]


def test_example_forgetting_faiss() -> None:
    out = _example("langchain_forgetting_faiss").main(["--encoder", "hashing"])
    assert out["forgotten"] == ["Emily_2023-04-27_1", "Emily_2023-05-03_0"]
    assert set(out["hits"]) <= set(out["kept"]) and out["hits"]


@pytest.mark.integration
def test_example_forgetting_faiss_with_minilm() -> None:
    out = _example("langchain_forgetting_faiss").main(["--encoder", "minilm", "--query", "my cat"])
    assert out["hits"][0] in {"Emily_2023-04-27_0", "Emily_2023-05-05_0", "Emily_2023-05-05_summary"}
