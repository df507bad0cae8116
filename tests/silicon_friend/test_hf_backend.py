"""The hf backbone: a tiny Llama built from a config plus a LoRA adapter trained by finetune/,
loaded through the LLM spec (``hf:MODEL+ADAPTER``) and prompted in the adapter's own format."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from silicon_friend.backends.hf import message_dicts

SMOKE = Path(__file__).resolve().parents[2] / "configs" / "finetune" / "smoke.yaml"


def test_message_dicts_alternate_roles() -> None:
    messages = [SystemMessage("sys"), HumanMessage("a"), HumanMessage("b"), AIMessage("c"), HumanMessage("d")]
    assert message_dicts(messages) == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "a\n\nb"},
        {"role": "assistant", "content": "c"},
        {"role": "user", "content": "d"},
    ]


@pytest.fixture(scope="module")
def tiny_adapter(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tiny random Llama and a LoRA adapter trained on it for a few steps (belle format)."""
    pytest.importorskip("peft")
    import torch

    from finetune.config import load_config
    from finetune.sft import run_sft
    from finetune.tiny import build_tiny_model

    root = tmp_path_factory.mktemp("hf")
    model_dir = build_tiny_model(root / "tiny")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        overrides = {"model_name_or_path": str(model_dir), "output_dir": str(root / "run"), "max_steps": 2,
                     "eval_strategy": "no", "save_strategy": "no", "validation_split": 0.0, "disable_tqdm": True}  # fmt: skip
        result = run_sft(load_config(SMOKE, overrides))
    finally:
        torch.set_num_threads(threads)
    return model_dir, result.adapter_dir


@pytest.mark.integration
def test_hf_spec_with_lora_adapter_chats_in_the_trained_format(tiny_adapter, bank) -> None:  # type: ignore[no-untyped-def]
    from finetune.formats import get_format
    from finetune.inference import generate
    from memory_bank.llm import build_chat_model
    from silicon_friend.engine import ChatSettings, SiliconFriend
    from silicon_friend.models import load_model

    model_dir, adapter_dir = tiny_adapter
    chat = build_chat_model(f"hf:{model_dir}+{adapter_dir}")  # through the entry point
    assert type(chat).__name__ == "HFChatModel" and chat.prompt_format == "belle"  # from finetune.json
    assert chat.context_window == 1024 and chat.count_tokens("hello world") > 0

    # The prompt is exactly what finetune.formats builds for training.
    messages = [
        SystemMessage("Be kind."),
        HumanMessage("Hi"),
        AIMessage("Hello!"),
        HumanMessage("I feel sad."),
    ]
    expected = get_format("belle").build_prompt("I feel sad.", history=[("Hi", "Hello!")], system="Be kind.")
    assert chat._chat.prompt(message_dicts(messages)) == expected

    # Streaming and invoke give finetune.inference's greedy reply.
    settings = {"temperature": 0.0, "max_tokens": 12}
    streamed = "".join(c.text for c in chat.stream(messages, **settings))
    reference = generate(chat._chat.model, chat._chat.tokenizer, message_dicts(messages), "belle",
                         max_new_tokens=12, temperature=0.0)  # fmt: skip
    assert streamed.strip() == reference == chat.invoke(messages, **settings).text.strip()

    # Without an adapter the base model is prompted with its tokenizer's chat template.
    assert build_chat_model(f"hf:{model_dir}").prompt_format == "chat_template"

    # And SiliconFriend runs on it: two turns, stored.
    loaded = load_model(f"hf:{model_dir}+{adapter_dir}")
    assert loaded.context_tokens == 1024
    engine = SiliconFriend(bank, loaded, settings=ChatSettings(temperature=0.0, max_new_tokens=8))
    session = engine.start("Emily")
    engine.reply(session, "I can't sleep before exams.")
    engine.reply(session, "What should I do?")
    assert len(bank.history("Emily")) == 2
    assert all(not t.error or "empty" in t.error for t in session.turns)  # a random model may say nothing


def test_hf_spec_errors_are_clear() -> None:
    from memory_bank.errors import MemoryBankError
    from memory_bank.llm import build_chat_model

    with pytest.raises(MemoryBankError, match="hf model"):
        build_chat_model("hf:/no/such/model")


@pytest.mark.integration
def test_a_model_or_adapter_folder_never_runs_its_own_code_unasked(tiny_adapter, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """An adapter whose finetune.json named a base folder of its own with trust_remote_code: true,
    or a model folder with an auto_map, ran that folder's Python code when loaded."""
    import json
    import shutil

    from memory_bank.errors import MemoryBankError
    from memory_bank.llm import build_chat_model

    model_dir, adapter_dir = tiny_adapter
    adapter = tmp_path / "adapter"
    shutil.copytree(adapter_dir, adapter)
    base = shutil.copytree(model_dir, adapter / "base")
    marker = tmp_path / "ran"
    (base / "configuration_own.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
        "from transformers import LlamaConfig\nclass OwnConfig(LlamaConfig):\n    model_type = 'llama'\n"
    )
    config = json.loads((base / "config.json").read_text())
    (base / "config.json").write_text(json.dumps({**config, "auto_map": {"AutoConfig": "configuration_own.OwnConfig"}}))
    meta = json.loads((adapter / "finetune.json").read_text())
    (adapter / "finetune.json").write_text(json.dumps({**meta, "base_model": str(base), "trust_remote_code": True}))
    for spec in (f"hf:+{adapter}", f"hf:{base}"):
        with pytest.raises(MemoryBankError, match=r"runs its own Python code.*--trust-remote-code"):
            build_chat_model(spec)
    assert not marker.exists()
    with pytest.raises(MemoryBankError, match=r"adapter folder .* not found"):
        build_chat_model(f"hf:{model_dir}+{tmp_path / 'no-such-adapter'}")
    (adapter / "finetune.json").write_text("[1, 2]")
    with pytest.raises(MemoryBankError, match="not a JSON object"):
        build_chat_model(f"hf:{model_dir}+{adapter}")
