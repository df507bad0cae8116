"""Evaluate a LoRA adapter against its base model: validation loss, perplexity and sample replies.

::

    python -m finetune.evaluate --config configs/finetune/smoke.yaml --adapter runs/finetune/smoke/adapter \
        [--samples 3] [--max_new_tokens 128] [--output DIR] [--key value ...]

The validation dialogs are those of the training run (the same files, split and seed from the config).
For the base model (the adapter switched off) and for the adapted model it reports the loss per
supervised token and its perplexity, and greedy replies to the first few validation prompts. Results go
to ``eval.json`` and ``eval.md`` in ``--output`` (default: next to the adapter, ``../eval``), with the
config, package versions, git commit and machine.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from finetune.config import SFTConfig, load_config
from finetune.data import CausalLMCollator
from finetune.errors import FinetuneError
from finetune.formats import Conversation, get_format
from finetune.inference import generate
from finetune.models import load_adapter, load_causal_lm, load_tokenizer, require, resolve_model_path
from finetune.runinfo import git_commit, machine, package_versions, write_json
from finetune.sft import prepare_data

logger = logging.getLogger(__name__)


def token_loss(
    model: Any, features: Sequence[dict[str, list[int]]], pad_token_id: int, batch_size: int = 8
) -> float:
    """Mean cross-entropy per supervised token (labels != -100) over ``features``."""
    torch = require("torch")
    collate = CausalLMCollator(pad_token_id)
    total, count = 0.0, 0
    device = getattr(model, "device", "cpu")
    with torch.inference_mode():
        for start in range(0, len(features), batch_size):
            batch = {k: v.to(device) for k, v in collate(features[start : start + batch_size]).items()}
            logits = model(
                input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
            ).logits.float()
            labels = batch["labels"][:, 1:]
            total += torch.nn.functional.cross_entropy(
                logits[:, :-1].reshape(-1, logits.shape[-1]),
                labels.reshape(-1),
                ignore_index=-100,
                reduction="sum",
            ).item()
            count += int((labels != -100).sum())
    return total / max(count, 1)


def _prompt_of(conv: Conversation) -> tuple[Conversation, str]:
    *history, (query, reference) = conv.turns
    return Conversation(tuple(history), query, conv.system), reference


def evaluate_adapter(
    config: SFTConfig,
    adapter_path: str | Path,
    *,
    num_samples: int = 3,
    max_new_tokens: int = 128,
    output_dir: str | Path | None = None,
) -> dict[str, Any]:
    """Compare base and adapted model on the validation dialogs; write ``eval.json`` and ``eval.md``."""
    started = time.perf_counter()
    model_path = resolve_model_path(config.model_name_or_path)
    tokenizer = load_tokenizer(model_path, config.trust_remote_code)
    data = prepare_data(config, tokenizer)
    if not data.validation:
        raise FinetuneError("no validation dialogs: set validation_split > 0 or validation_files")
    model = load_adapter(
        load_causal_lm(model_path, config.torch_dtype, config.trust_remote_code), adapter_path
    )
    torch = require("torch")
    model.to("cuda" if torch.cuda.is_available() else "cpu").eval()
    fmt = get_format(config.format)

    results: dict[str, Any] = {}
    samples: list[dict[str, str]] = [{} for _ in data.validation_conversations[:num_samples]]
    for name, switch in (("base", model.disable_adapter), ("adapter", contextlib.nullcontext)):
        with switch():
            loss = token_loss(
                model, data.validation, tokenizer.pad_token_id, config.per_device_eval_batch_size
            )
            results[name] = {"loss": loss, "perplexity": math.exp(loss) if loss < 50 else None}
            for sample, conv in zip(samples, data.validation_conversations, strict=False):
                prompt, reference = _prompt_of(conv)
                sample.update(prompt=prompt.query or "", reference=reference)
                sample[name] = generate(
                    model, tokenizer, prompt, fmt, max_new_tokens=max_new_tokens, temperature=0
                )
    report = {
        "adapter_path": str(adapter_path),
        "model": config.model_name_or_path,
        "validation_dialogs": len(data.validation),
        **results,
        "samples": samples,
        "time_s": round(time.perf_counter() - started, 2),
        "config": config.model_dump(mode="json"),
        "versions": package_versions(),
        "git_commit": git_commit(),
        "machine": machine(),
    }
    out = Path(output_dir) if output_dir else Path(adapter_path).resolve().parent / "eval"
    write_json(out / "eval.json", report)
    (out / "eval.md").write_text(_markdown(report), encoding="utf-8")
    logger.info(
        "base loss %.4f, adapter loss %.4f; report in %s",
        results["base"]["loss"],
        results["adapter"]["loss"],
        out,
    )
    return report


def _markdown(report: dict[str, Any]) -> str:
    def ppl(x: float | None) -> str:
        return f"{x:.2f}" if x is not None else "n/a"

    lines = [
        f"# Adapter evaluation: {report['adapter_path']}",
        "",
        f"Base model `{report['model']}`, {report['validation_dialogs']} validation dialogs, "
        f"commit `{report['git_commit']}`.",
        "",
        "| model | loss per reply token | perplexity |",
        "|---|---|---|",
        *(f"| {n} | {report[n]['loss']:.4f} | {ppl(report[n]['perplexity'])} |" for n in ("base", "adapter")),
        "",
        "## Sample replies (greedy)",
    ]
    for i, s in enumerate(report["samples"], 1):
        lines += [
            "",
            f"### {i}. {s['prompt']}",
            "",
            f"- **reference**: {s['reference']}",
            f"- **base**: {s['base']}",
            f"- **adapter**: {s['adapter']}",
        ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        allow_abbrev=False, prog="python -m finetune.evaluate", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--config", required=True, help="the training config (model, format, data, split)")
    parser.add_argument("--adapter", required=True, help="adapter directory saved by finetune.sft")
    parser.add_argument("--samples", type=int, default=3, help="number of sample replies")
    parser.add_argument("--max_new_tokens", type=int, default=128)
    parser.add_argument("--output", default=None, help="folder for eval.json and eval.md")
    args, overrides = parser.parse_known_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        evaluate_adapter(
            load_config(args.config, overrides),
            args.adapter,
            num_samples=args.samples,
            max_new_tokens=args.max_new_tokens,
            output_dir=args.output,
        )
    except FinetuneError as e:
        logger.error("%s", e)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
