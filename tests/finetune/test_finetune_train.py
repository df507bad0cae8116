"""End to end on the tiny model: train, save, reload, resume, merge, evaluate and chat."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from finetune.config import load_config
from finetune.errors import FinetuneError
from finetune.evaluate import evaluate_adapter
from finetune.inference import ChatModel
from finetune.sft import SFTResult, main, resolve_checkpoint, run_sft

SMOKE = Path(__file__).resolve().parents[2] / "configs" / "finetune" / "smoke.yaml"
STEPS = {"max_steps": 12, "save_steps": 6, "eval_steps": 6, "disable_tqdm": True}


@pytest.fixture(scope="module")
def run_a(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path, single_thread: None) -> SFTResult:
    config = load_config(
        SMOKE,
        {
            **STEPS,
            "model_name_or_path": str(tiny_model_dir),
            "output_dir": str(tmp_path_factory.mktemp("run") / "a"),
        },
    )
    return run_sft(config)


def logits(model: Any, tokenizer: Any) -> Any:
    import torch

    batch = tokenizer(
        ["Human: I can't sleep.\n\nAssistant: ", "Human: 我很孤独。"], return_tensors="pt", padding=True
    )
    with torch.inference_mode():
        return model.eval()(**batch).logits


def load_base(path: Path | str) -> Any:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path)


def test_training_lowers_the_loss_and_writes_metrics(run_a: SFTResult) -> None:
    metrics = json.loads((run_a.output_dir / "metrics.json").read_text())
    losses = [point["loss"] for point in metrics["curves"]["train_loss"]]
    assert len(losses) == 12
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3 - 0.3
    assert [p["step"] for p in metrics["curves"]["eval_loss"]] == [6, 12]
    assert metrics["steps"] == 12 and metrics["eval_loss"] > 0 and metrics["eval_perplexity"] > 1
    assert metrics["config"]["lora"]["r"] == 16 and metrics["versions"]["peft"]
    assert metrics["data"]["train"]["supervised_tokens"] < metrics["data"]["train"]["tokens"]
    assert metrics["memory"]["peak_rss_mb"] > 0 and metrics["seconds_per_step"] > 0


def test_adapter_reloads_with_identical_logits(
    run_a: SFTResult, tiny_model_dir: Path, tiny_tokenizer: Any
) -> None:
    import torch
    from peft import PeftModel

    assert {"adapter_config.json", "adapter_model.safetensors", "finetune.json"} <= {
        p.name for p in run_a.adapter_dir.iterdir()
    }
    assert json.loads((run_a.adapter_dir / "finetune.json").read_text())["format"] == "belle"
    reloaded = PeftModel.from_pretrained(load_base(tiny_model_dir), str(run_a.adapter_dir))
    trained = logits(run_a.model, tiny_tokenizer)
    torch.testing.assert_close(logits(reloaded, tiny_tokenizer), trained, atol=1e-6, rtol=0)
    assert (
        logits(load_base(tiny_model_dir), tiny_tokenizer) - trained
    ).abs().max() > 1e-2  # it learned something


def test_resume_from_checkpoint_then_merge(
    run_a: SFTResult, tmp_path: Path, tiny_model_dir: Path, tiny_tokenizer: Any
) -> None:
    import torch
    from peft import PeftModel

    out = tmp_path / "b"
    argv = [
        "--config",
        str(SMOKE),
        "--output_dir",
        str(out),
        "--merge",
        "--resume_from_checkpoint",
        str(run_a.output_dir / "checkpoint-6"),
    ]
    assert main(argv + [f"--{k}={v}" for k, v in STEPS.items()]) == 0
    first = json.loads((run_a.output_dir / "metrics.json").read_text())["curves"]["train_loss"]
    resumed = json.loads((out / "metrics.json").read_text())["curves"]["train_loss"]
    assert [p["step"] for p in resumed] == list(range(1, 13))  # steps 1-6 come from the checkpoint
    assert [p["loss"] for p in resumed] == pytest.approx([p["loss"] for p in first], abs=1e-4)
    # smoke.yaml names ``builtin:tiny``, which resolved to the session's tiny model: run A's base.
    assert json.loads((out / "adapter" / "finetune.json").read_text())["base_model_path"] == str(
        tiny_model_dir
    )
    with_adapter = PeftModel.from_pretrained(load_base(tiny_model_dir), str(out / "adapter"))
    torch.testing.assert_close(
        logits(load_base(out / "merged"), tiny_tokenizer),
        logits(with_adapter, tiny_tokenizer),
        atol=1e-4,
        rtol=1e-4,
    )


def test_evaluate_reports_base_and_adapter(run_a: SFTResult, tmp_path: Path) -> None:
    config = load_config(SMOKE, {"model_name_or_path": run_a.metrics["model"], "output_dir": str(tmp_path)})
    report = evaluate_adapter(config, run_a.adapter_dir, num_samples=2, max_new_tokens=6, output_dir=tmp_path)
    assert report["adapter"]["loss"] == pytest.approx(run_a.metrics["eval_loss"], rel=1e-4)
    assert report["base"]["loss"] != pytest.approx(report["adapter"]["loss"])
    assert len(report["samples"]) == 2 and {"prompt", "reference", "base", "adapter"} <= set(
        report["samples"][0]
    )
    assert "| adapter |" in (tmp_path / "eval.md").read_text()
    assert (
        json.loads((tmp_path / "eval.json").read_text())["validation_dialogs"] == report["validation_dialogs"]
    )


def test_chat_model_uses_the_adapters_format_and_streams_the_same_reply(run_a: SFTResult) -> None:
    chat = ChatModel.load(adapter_path=run_a.adapter_dir)
    messages = [{"role": "user", "content": "I feel lonely."}]
    assert chat.format.name == "belle"
    assert chat.prompt(messages) == "Human: I feel lonely.\n\nAssistant: "
    reply = chat.generate(messages, max_new_tokens=12, temperature=0)
    assert reply and reply == "".join(chat.stream(messages, max_new_tokens=12, temperature=0)).strip()
    sampled = chat.generate(messages, max_new_tokens=12, temperature=1.0, top_p=0.9, seed=5)
    assert (
        sampled
        == "".join(chat.stream(messages, max_new_tokens=12, temperature=1.0, top_p=0.9, seed=5)).strip()
    )
    pieces = chat.stream(messages, max_new_tokens=200, temperature=1.0)
    next(pieces)
    pieces.close()  # stopping early ends the worker thread without hanging


def test_resume_true_picks_the_last_checkpoint_and_bad_ones_are_refused(
    run_a: SFTResult, tmp_path: Path
) -> None:
    assert resolve_checkpoint(True, run_a.output_dir) == str(run_a.output_dir / "checkpoint-12")
    assert resolve_checkpoint(None, run_a.output_dir) is None
    with pytest.raises(FinetuneError, match="holds no checkpoint"):
        resolve_checkpoint(True, tmp_path)
    with pytest.raises(FinetuneError, match="not a Trainer checkpoint"):
        resolve_checkpoint(str(tmp_path / "checkpoint-3"), tmp_path)


def test_a_run_never_replaces_another_runs_work_unasked(run_a: SFTResult, tiny_model_dir: Path) -> None:
    """Training into a folder that held another run rotated its checkpoints away and replaced
    its adapter; --merge could write over the base model being trained."""
    held = sorted(p.name for p in run_a.output_dir.iterdir())
    second = {**STEPS, "model_name_or_path": str(tiny_model_dir), "output_dir": str(run_a.output_dir)}
    with pytest.raises(FinetuneError, match=r"already holds files.*--overwrite_output_dir true"):
        run_sft(load_config(SMOKE, second))
    assert sorted(p.name for p in run_a.output_dir.iterdir()) == held  # nothing touched
    over_base = {
        **STEPS,
        "model_name_or_path": str(run_a.output_dir / "merged"),
        "output_dir": str(run_a.output_dir),
        "merge": True,
        "overwrite_output_dir": True,
    }
    (run_a.output_dir / "merged").mkdir(exist_ok=True)
    try:
        with pytest.raises(FinetuneError, match="over the base model being trained"):
            run_sft(load_config(SMOKE, over_base))
    finally:
        (run_a.output_dir / "merged").rmdir()
    with pytest.raises(FinetuneError, match="learning_rate"):
        load_config(SMOKE, {**second, "learning_rate": "inf"})


def test_a_diverged_training_is_not_saved(tiny_model_dir: Path) -> None:
    from transformers import AutoModelForCausalLM

    from finetune.sft import check_finite

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    check_finite(model, 2.5)
    next(iter(model.parameters())).data.fill_(float("nan"))
    with pytest.raises(FinetuneError, match=r"not finite.*nothing was saved"):
        check_finite(model, 2.5)
    with pytest.raises(FinetuneError, match="training loss is nan"):
        check_finite(model, float("nan"))
    fresh = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    next(iter(fresh.parameters())).data.fill_(1.7e30)  # finite, and meaningless
    with pytest.raises(FinetuneError, match=r"reached 1\.7e\+30"):
        check_finite(fresh, 6.93)


def test_a_save_that_fails_midway_leaves_the_previous_adapter_whole(run_a: SFTResult, tmp_path: Path) -> None:
    """The adapter was written file by file in place: a kill left one run's weights with another's
    metadata, which the chat loaded without a word."""
    import shutil

    from finetune.saving import save_model_dir

    target = tmp_path / "adapter"
    shutil.copytree(run_a.adapter_dir, target)
    before = {p.name: p.read_bytes() for p in target.iterdir()}

    class Killed(Exception):
        pass

    class HalfSaved:
        def save_pretrained(self, where: Path) -> None:
            (Path(where) / "adapter_model.safetensors").write_bytes(b"half")
            raise Killed

    with pytest.raises(Killed):
        save_model_dir(HalfSaved(), None, target, "finetune.json", {"format": "chatml"})
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["adapter"]  # no staging folder left behind


def test_resuming_with_other_lora_settings_is_one_line(run_a: SFTResult, tmp_path: Path) -> None:
    argv = ["--config", str(SMOKE), "--output_dir", str(tmp_path / "c"), "--lora.r", "3",
            "--resume_from_checkpoint", str(run_a.output_dir / "checkpoint-6")]  # fmt: skip
    with pytest.raises(FinetuneError, match=r"other LoRA settings \(r "):
        run_sft(load_config(SMOKE, {"output_dir": str(tmp_path / "c"), "lora": {"r": 3},
                                    "resume_from_checkpoint": str(run_a.output_dir / "checkpoint-6")}))  # fmt: skip
    assert main(argv) == 2


def test_building_a_model_never_empties_a_folder_of_the_users(tmp_path: Path) -> None:
    from finetune.tiny import build_tiny_model

    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "thesis.txt").write_text("three years of work")
    with pytest.raises(FinetuneError, match="holds files this did not write"):
        build_tiny_model(folder)
    assert (folder / "thesis.txt").read_text() == "three years of work"


def test_resuming_from_another_folder_does_not_unlock_this_one(run_a: SFTResult, tmp_path: Path) -> None:
    """--resume_from_checkpoint with a checkpoint of another run turned the output folder's guard
    off: a folder of the user's files was written over."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "important.txt").write_text("keep me")
    config = load_config(SMOKE, {**STEPS, "output_dir": str(folder),
                                 "resume_from_checkpoint": str(run_a.output_dir / "checkpoint-6")})  # fmt: skip
    with pytest.raises(FinetuneError, match="already holds files"):
        run_sft(config)
    assert [p.name for p in folder.iterdir()] == ["important.txt"]


def test_a_model_folder_whose_config_is_not_an_object_is_one_line(tmp_path: Path, tiny_model_dir: Path) -> None:
    import shutil

    from finetune.errors import ModelLoadError
    from finetune.models import load_causal_lm

    broken = shutil.copytree(tiny_model_dir, tmp_path / "broken")
    (broken / "config.json").write_text("[1, 2]")
    with pytest.raises(ModelLoadError, match="cannot load a causal language model"):
        load_causal_lm(str(broken))


def test_a_save_killed_between_its_renames_is_said_where_the_copies_are(run_a: SFTResult, tmp_path: Path) -> None:
    import shutil

    from finetune.errors import ModelLoadError

    shutil.copytree(run_a.adapter_dir, tmp_path / ".adapter-k2j3")  # the new copy, never moved in
    with pytest.raises(ModelLoadError, match=r"interrupted save left .*\.adapter-k2j3: rename the newest to adapter"):
        ChatModel.load(None, tmp_path / "adapter")


@pytest.mark.parametrize(
    ("setting", "said"),
    [
        ({"lr_scheduler_type": "cosin"}, "cosin is not a valid"),
        ({"report_to": "no_such_tracker_pkg"}, "pip install no_such_tracker_pkg"),
        ({"precision": "bf16"}, "precision 'bf16' needs a GPU"),
    ],
)
def test_settings_the_trainer_refuses_are_refused_before_the_model_loads(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch, setting: dict[str, Any], said: str
) -> None:
    """A schedule typo, a tracker not installed, bf16 without a GPU: one line before anything is
    loaded (they were a traceback after the data were read and the model loaded)."""
    import torch

    import finetune.sft as sft

    if setting.get("precision") and torch.cuda.is_available():
        pytest.skip("a GPU is here: bf16 may train")

    def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the model was loaded before the settings were checked")

    monkeypatch.setattr(sft, "load_tokenizer", never)
    config = load_config(SMOKE, {**STEPS, "output_dir": str(tmp_path / "out"), "model_name_or_path": str(tiny_model_dir), **setting})
    with pytest.raises(FinetuneError, match=said):
        run_sft(config)
    assert main(["--config", str(SMOKE), "--output_dir", str(tmp_path / "cli"), "--model_name_or_path", str(tiny_model_dir),
                 *(f"--{k}={v}" for k, v in setting.items())]) == 2  # fmt: skip


def test_an_adapter_loaded_on_another_base_says_so(
    run_a: SFTResult, tiny_model_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An adapter given another base of the same shape loaded without a word and answered
    badly; now the load says which base it was trained on. Its own base, named or not: no word."""
    import logging
    import shutil

    other = shutil.copytree(tiny_model_dir, tmp_path / "another-base")
    with caplog.at_level(logging.WARNING, logger="finetune.inference"):
        ChatModel.load(str(tiny_model_dir), run_a.adapter_dir)
        ChatModel.load(None, run_a.adapter_dir)
        assert "was trained on" not in caplog.text
        ChatModel.load(str(other), run_a.adapter_dir)
    assert f"was trained on {tiny_model_dir}" in caplog.text and str(other) in caplog.text
