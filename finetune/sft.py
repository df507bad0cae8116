"""LoRA supervised fine-tuning of any causal LM on dialog data: the one training entry point.

::

    python -m finetune.sft --config configs/finetune/smoke.yaml [--max_steps 5] [--output_dir DIR] [--merge]

Per-model settings (prompt format, LoRA target modules, precision) live in ``configs/finetune/*.yaml``;
see :mod:`finetune.config`. The run uses transformers' ``Trainer`` with a peft ``LoraConfig``: it is
seeded, holds out a validation split and reports its loss, saves checkpoints (resume with
``--resume_from_checkpoint DIR`` or ``true``), and writes into ``output_dir``:

* ``adapter/``: the PEFT adapter (``adapter_config.json`` + weights, loadable with
  ``PeftModel.from_pretrained``), the tokenizer, and ``finetune.json`` (base model, prompt format);
* ``merged/`` with ``--merge``: the base model with the adapter merged in;
* ``metrics.json``: loss curves, eval loss and perplexity, time, peak memory, config, versions, commit.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import importlib.util
import json
import logging
import math
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from finetune.config import SFTConfig, load_config
from finetune.data import (
    CausalLMCollator,
    TokenStats,
    load_files,
    split_train_validation,
    tokenize_conversations,
)
from finetune.errors import ConfigError, FinetuneError
from finetune.formats import Conversation, Supervise, get_format
from finetune.models import load_causal_lm, load_tokenizer, require, resolve_model_path
from finetune.runinfo import git_commit, machine, package_versions, peak_memory_mb, write_json
from finetune.saving import save_model_dir

logger = logging.getLogger(__name__)

ADAPTER_METADATA = "finetune.json"


@dataclass
class SFTResult:
    """Where a run wrote its outputs, its metrics, and the trained model (merged when ``merge``)."""

    output_dir: Path
    adapter_dir: Path
    merged_dir: Path | None
    metrics: dict[str, Any]
    model: Any = field(repr=False, default=None)


@dataclass
class PreparedData:
    train: list[dict[str, list[int]]]
    validation: list[dict[str, list[int]]]
    validation_conversations: list[Conversation]
    train_stats: TokenStats
    validation_stats: TokenStats


def prepare_data(config: SFTConfig, tokenizer: Any) -> PreparedData:
    """Read, split (seeded) and tokenise the dialogs named by ``config``."""
    conversations = load_files(config.resolved_files("train"), config.system_prompt)
    if config.validation_files:
        train, validation = (
            conversations,
            load_files(config.resolved_files("validation"), config.system_prompt),
        )
    else:
        # Split the distinct dialogs: a dialog given twice is never in both parts (the validation
        # loss would look better than it is); repeats stay in training, where they weigh more.
        times = collections.Counter(conversations)
        distinct, validation = split_train_validation(list(times), config.validation_split, config.seed)
        train = [c for c in distinct for _ in range(times[c])]
        if len(train) > len(distinct):  # repeats spread, as the split's order spread the dialogs
            random.Random(config.seed).shuffle(train)
    if config.max_train_samples:
        train = train[: config.max_train_samples]
    fmt = get_format(config.format)
    supervise: Supervise = "all" if config.train_on == "all_turns" else "last"
    train_features, train_stats = tokenize_conversations(train, fmt, tokenizer, config.max_length, supervise)
    val_features, val_stats = tokenize_conversations(validation, fmt, tokenizer, config.max_length, supervise)
    if not train_features:
        raise FinetuneError("no training example left after tokenisation; raise max_length")
    logger.info(
        "%d training and %d validation dialogs; %d supervised of %d training tokens",
        train_stats.examples,
        val_stats.examples,
        train_stats.supervised_tokens,
        train_stats.tokens,
    )
    return PreparedData(train_features, val_features, list(validation), train_stats, val_stats)


def precision_flags(precision: str) -> dict[str, bool]:
    """``bf16``/``fp16`` TrainingArguments for a precision name; ``auto`` picks bf16 on a capable GPU."""
    torch = require("torch")
    if precision == "auto":
        precision = "bf16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "fp32"
    return {"bf16": precision == "bf16", "fp16": precision == "fp16"}


def training_arguments(config: SFTConfig, has_validation: bool) -> Any:
    transformers = require("transformers")
    known = {f.name for f in dataclasses.fields(transformers.TrainingArguments)}
    # Names that transformers 5 renamed; the old ones still work on 4.x.
    checkpointing = (
        "activation_checkpointing" if "activation_checkpointing" in known else "gradient_checkpointing"
    )
    warmup = (
        {"warmup_ratio": config.warmup_ratio}
        if "warmup_ratio" in known
        else {"warmup_steps": config.warmup_ratio}
    )
    return transformers.TrainingArguments(
        output_dir=config.output_dir,
        num_train_epochs=config.num_train_epochs,
        max_steps=config.max_steps,
        per_device_train_batch_size=config.per_device_train_batch_size,
        per_device_eval_batch_size=config.per_device_eval_batch_size,
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        learning_rate=config.learning_rate,
        lr_scheduler_type=config.lr_scheduler_type,
        weight_decay=config.weight_decay,
        max_grad_norm=config.max_grad_norm,
        logging_steps=config.logging_steps,
        logging_first_step=True,
        eval_strategy=config.eval_strategy if has_validation else "no",
        eval_steps=config.eval_steps,
        save_strategy=config.save_strategy,
        save_steps=config.save_steps,
        save_total_limit=config.save_total_limit,
        seed=config.seed,
        data_seed=config.seed,
        report_to=config.report_to or "none",
        disable_tqdm=config.disable_tqdm,
        dataloader_num_workers=config.dataloader_num_workers,
        dataloader_pin_memory=require("torch").cuda.is_available(),
        remove_unused_columns=False,
        label_names=["labels"],
        **{checkpointing: config.gradient_checkpointing},
        **({f"{checkpointing}_kwargs": {"use_reentrant": False}} if config.gradient_checkpointing else {}),
        **warmup,
        **precision_flags(config.precision),
    )


def check_training_settings(config: SFTConfig) -> None:
    """Refuse, before anything is loaded, the settings the trainer would refuse only after the
    data were read and the model loaded (minutes on a large model), with a traceback: a learning
    rate schedule it does not know, a precision this machine cannot train in, a report
    destination whose package is not installed."""
    torch = require("torch")
    if config.precision in ("bf16", "fp16") and not torch.cuda.is_available():
        raise ConfigError(
            f"precision {config.precision!r} needs a GPU, and none is available here: "
            "set precision: auto (or fp32) to train on the CPU"
        )
    if config.precision == "bf16" and not torch.cuda.is_bf16_supported():
        raise ConfigError("this GPU cannot train in bf16: set precision: auto, fp16 or fp32")
    for name in config.report_to:
        if name not in ("none", "all") and importlib.util.find_spec(name) is None:
            raise ConfigError(
                f"report_to names {name!r}, whose package is not installed: pip install {name}, "
                "or leave it out of report_to"
            )
    try:
        training_arguments(config, has_validation=True)
    except ValueError as e:  # e.g. "cosin is not a valid SchedulerType, please select one of [...]"
        raise ConfigError(f"the training settings are refused: {e}") from None


def build_peft_model(config: SFTConfig, model_path: str) -> Any:
    peft = require("peft")
    model = load_causal_lm(
        model_path,
        "bfloat16"
        if config.torch_dtype == "auto" and precision_flags(config.precision)["bf16"]
        else config.torch_dtype,
        config.trust_remote_code,
    )
    if config.gradient_checkpointing:
        model.config.use_cache = False
    lora = peft.LoraConfig(
        task_type="CAUSAL_LM",
        r=config.lora.r,
        lora_alpha=config.lora.alpha,
        lora_dropout=config.lora.dropout,
        target_modules=config.lora.target_modules,
        bias=config.lora.bias,
        modules_to_save=config.lora.modules_to_save,
    )
    try:
        model = peft.get_peft_model(model, lora)
    except ValueError as e:  # peft names the missing target modules
        raise FinetuneError(f"cannot apply LoRA to {model_path}: {e}; check lora.target_modules") from e
    trainable, total = model.get_nb_trainable_parameters()
    logger.info(
        "LoRA r=%d: %d trainable of %d parameters (%.3f%%)",
        config.lora.r,
        trainable,
        total,
        100 * trainable / total,
    )
    return model


def _curves(log_history: list[dict[str, Any]]) -> dict[str, list[dict[str, float]]]:
    train = [
        {"step": e["step"], "loss": e["loss"], "learning_rate": e.get("learning_rate")}
        for e in log_history
        if "loss" in e
    ]
    evals = {e["step"]: {"step": e["step"], "loss": e["eval_loss"]} for e in log_history if "eval_loss" in e}
    return {"train_loss": train, "eval_loss": list(evals.values())}


def resolve_checkpoint(resume: str | bool | None, output_dir: Path) -> str | None:
    """The checkpoint to resume from: a given folder, or with ``True`` the last one in ``output_dir``."""
    if not resume:
        return None
    if resume is True:
        last = (
            require("transformers").trainer_utils.get_last_checkpoint(str(output_dir))
            if output_dir.is_dir()
            else None
        )
        if last is None:
            raise FinetuneError(
                f"resume_from_checkpoint: true, but {output_dir} holds no checkpoint-* folder"
            )
        return str(last)
    if not (Path(resume) / "trainer_state.json").is_file():
        raise FinetuneError(
            f"resume_from_checkpoint: {resume} is not a Trainer checkpoint (no trainer_state.json)"
        )
    return str(resume)


def check_output_dir(config: SFTConfig, output_dir: Path, model_path: str, *, resumed: bool) -> None:
    """Refuse, before any training, an output folder that would lose someone's work: one that
    holds another run (its checkpoints would be rotated away, its adapter replaced) unless the
    run is resumed or ``overwrite_output_dir`` says so, a file, and a merge that would be written
    over the base model being trained (or into it)."""
    if output_dir.exists() and not output_dir.is_dir():
        raise FinetuneError(f"output_dir {output_dir} is a file; give a folder")
    held = sorted(p.name for p in output_dir.iterdir()) if output_dir.is_dir() else []
    if held and not resumed and not config.overwrite_output_dir:
        shown = ", ".join(held[:4]) + (", ..." if len(held) > 4 else "")
        raise FinetuneError(
            f"output_dir {output_dir} already holds files ({shown}); resume that run with "
            "--resume_from_checkpoint true, choose another --output_dir, or pass "
            "--overwrite_output_dir true to replace it"
        )
    if config.merge:
        merged, base = (output_dir / "merged").resolve(), Path(model_path).expanduser().resolve()
        if merged == base or base.is_relative_to(merged) or merged.is_relative_to(base):
            raise FinetuneError(
                f"--merge would write the merged model over the base model being trained ({model_path}); "
                "choose another --output_dir"
            )


def check_resumable(config: SFTConfig, checkpoint: Path) -> None:
    """A checkpoint trained with another LoRA rank or scaling cannot be resumed (its matrices have
    other shapes): said in one line, before the model is loaded."""
    try:
        saved = json.loads((checkpoint / "adapter_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # not a peft checkpoint of ours: the Trainer says what is wrong with it
    given = {"r": config.lora.r, "lora_alpha": config.lora.alpha}
    differ = [f"{k} {saved.get(k)} there, {v} here" for k, v in given.items() if k in saved and saved[k] != v]
    if differ:
        raise FinetuneError(
            f"resume_from_checkpoint: {checkpoint} was trained with other LoRA settings ({'; '.join(differ)}); "
            "resume with the same lora settings, or start a new run"
        )


#: Beyond this a trained LoRA weight is divergence, not learning (they stay near 1 or below; a
#: learning rate of 1e30 gave 1.7e30 and a model whose every reply was empty).
MAX_ADAPTER_WEIGHT = 1e4


def check_finite(model: Any, train_loss: float | None) -> None:
    """Refuse to save an adapter whose training diverged: NaN or infinite weights or loss."""
    torch = require("torch")
    if train_loss is not None and not math.isfinite(train_loss):
        raise FinetuneError(f"the training loss is {train_loss}; lower learning_rate (nothing was saved)")
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if not bool(torch.isfinite(p).all()):
            raise FinetuneError(
                f"the adapter's weight {name} is not finite (the training diverged); lower learning_rate "
                "(nothing was saved)"
            )
        if float(p.detach().abs().max()) > MAX_ADAPTER_WEIGHT:  # finite, but the model says nothing
            raise FinetuneError(
                f"the adapter's weight {name} reached {float(p.detach().abs().max()):.3g} (the training "
                "diverged); lower learning_rate (nothing was saved)"
            )


def run_sft(config: SFTConfig) -> SFTResult:
    """Train a LoRA adapter as ``config`` says and write adapter, metrics and (optionally) a merged model."""
    transformers = require("transformers")
    started = time.perf_counter()
    transformers.set_seed(config.seed)
    if config.cpu_threads:
        require("torch").set_num_threads(config.cpu_threads)
    output_dir = Path(config.output_dir)
    resume = resolve_checkpoint(config.resume_from_checkpoint, output_dir)
    model_path = resolve_model_path(config.model_name_or_path)
    # Resuming unlocks only the folder that holds the checkpoint (another run's folder stays guarded).
    resumed = resume is not None and Path(resume).resolve().parent == output_dir.resolve()
    check_output_dir(config, output_dir, model_path, resumed=resumed)
    if resume is not None:
        check_resumable(config, Path(resume))
    check_training_settings(config)
    tokenizer = load_tokenizer(model_path, config.trust_remote_code)
    data = prepare_data(config, tokenizer)
    model = build_peft_model(config, model_path)
    trainer = transformers.Trainer(
        model=model,
        args=training_arguments(config, bool(data.validation)),
        train_dataset=data.train,
        eval_dataset=data.validation or None,
        data_collator=CausalLMCollator(tokenizer.pad_token_id, with_attention_mask=config.attention_mask),
        processing_class=tokenizer,
    )
    start_step = json.loads((Path(resume) / "trainer_state.json").read_text())["global_step"] if resume else 0
    train_output = trainer.train(resume_from_checkpoint=resume)
    eval_metrics = trainer.evaluate() if data.validation else {}
    adapter_dir = output_dir / "adapter"
    merged_dir = output_dir / "merged" if config.merge else None
    if not trainer.is_world_process_zero():  # several processes: the first one writes
        return SFTResult(output_dir, adapter_dir, merged_dir, {}, model)

    check_finite(model, train_output.training_loss)
    metadata = {
        "base_model": config.model_name_or_path,
        "base_model_path": model_path,
        "format": config.format,
        "system_prompt": config.system_prompt,
        "trust_remote_code": config.trust_remote_code,
    }
    # Staged and moved into place: a kill while saving never leaves a half-written or mixed
    # adapter (weights of one run, metadata of another) where a chat would load it.
    replace = config.overwrite_output_dir or resumed  # checked before training
    save_model_dir(model, tokenizer, adapter_dir, ADAPTER_METADATA, metadata, replace=replace)
    if merged_dir is not None:
        model = model.merge_and_unload()
        merged = {**metadata, "merged": True}
        save_model_dir(model, tokenizer, merged_dir, ADAPTER_METADATA, merged, replace=replace)
        logger.info("saved the merged model in %s", merged_dir)

    eval_loss = eval_metrics.get("eval_loss")
    runtime = train_output.metrics.get("train_runtime", 0.0)
    metrics = {
        "model": config.model_name_or_path,
        "steps": trainer.state.global_step,
        "epochs": trainer.state.epoch,
        "train_loss": train_output.training_loss,
        "eval_loss": eval_loss,
        "eval_perplexity": math.exp(eval_loss) if eval_loss is not None and eval_loss < 50 else None,
        "curves": _curves(trainer.state.log_history),
        "data": {"train": asdict(data.train_stats), "validation": asdict(data.validation_stats)},
        "train_runtime_s": runtime,
        "seconds_per_step": runtime / max(trainer.state.global_step - start_step, 1),
        "total_time_s": round(time.perf_counter() - started, 2),
        "memory": peak_memory_mb(),
        "config": config.model_dump(mode="json"),
        "versions": package_versions(),
        "git_commit": git_commit(),
        "machine": machine(),
    }
    write_json(output_dir / "metrics.json", metrics)
    logger.info(
        "adapter saved in %s; eval loss %s; metrics in %s",
        adapter_dir,
        eval_loss,
        output_dir / "metrics.json",
    )
    return SFTResult(output_dir, adapter_dir, merged_dir, metrics, model)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        prog="python -m finetune.sft",
        description="LoRA fine-tuning of a causal LM on dialogs. Any config key can be overridden: --key value.",
    )
    parser.add_argument("--config", required=True, help="YAML file, e.g. configs/finetune/smoke.yaml")
    parser.add_argument("--print_config", action="store_true", help="print the resolved config and exit")
    args, overrides = parser.parse_known_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_config(args.config, overrides)
        if args.print_config:
            sys.stdout.write(config.model_dump_json(indent=2) + "\n")
            return 0
        run_sft(config)
    except FinetuneError as e:
        logger.error("%s", e)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
