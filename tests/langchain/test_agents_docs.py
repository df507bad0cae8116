"""The README's "Memory for agents" code blocks and examples/agent_memory_store.py run offline."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_README = (REPO / "README.md").read_text(encoding="utf-8")
_START = _README.index("## Memory for agents")
SECTION = _README[_START : _README.index("\n## ", _START + 3)]
BLOCKS = re.findall(r"```python\n(.*?)```", SECTION, flags=re.S)
EXPECTED = ["cat Emily's cat is called Miso.", ") Emily is allergic to peanuts."]


@pytest.mark.parametrize(("code", "expected"), zip(BLOCKS, EXPECTED, strict=True), ids=range(2))
def test_readme_block_runs(code: str, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    assert expected in out.getvalue()


def test_the_mcp_config_block_is_valid_json() -> None:
    import json

    [block] = re.findall(r"```json\n(.*?)```", SECTION, flags=re.S)
    server = json.loads(block)["mcpServers"]["memorybank"]
    assert server["command"] == "memorybank" and server["args"][:1] == ["mcp"] and "--user" in server["args"]


def test_example_agent_memory_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = importlib.util.spec_from_file_location("agent_memory_store", REPO / "examples" / "agent_memory_store.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclass looks itself up there
    spec.loader.exec_module(module)
    with contextlib.redirect_stdout(io.StringIO()):
        out = module.main(["--store", str(tmp_path), "--encoder", "hashing"])
    assert out["replies"] == ["Noted: no peanuts for you.", "Careful: you are allergic to peanuts."]
    assert "tool:call-1" in out["keys"]  # the saved memory, as a store item
