"""A tiny Llama built from a config, for tests and smoke runs: no hub, no download, seconds on a CPU.

The tokenizer is a byte-level BPE trained on the fly with ``tokenizers`` on the bundled counselling
dialogs (English and Chinese), so it encodes any text; it adds ``<s>`` in front of a sequence like
Llama's, knows ChatML's ``<|im_start|>``/``<|im_end|>`` and carries a ChatML chat template, so every
prompt format in :mod:`finetune.formats` works with it. The weights are random (seeded).

Usage::

    from finetune.tiny import build_tiny_model
    path = build_tiny_model(tmp_path / "tiny")      # a normal Hugging Face model directory
    AutoModelForCausalLM.from_pretrained(path)
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path

from finetune.errors import MissingDependencyError
from finetune.saving import save_model_dir

logger = logging.getLogger(__name__)

SPECIAL_TOKENS = ("<s>", "</s>", "<pad>", "<|im_start|>", "<|im_end|>")

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

_MARKER = "tiny_model.json"


def _default_texts() -> list[str]:
    texts = []
    for path in sorted((Path(__file__).resolve().parent / "data").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                texts += [record.get("input", ""), record.get("output", "")]
                texts += [t for pair in record.get("history", []) for t in pair]
    # The markers of every built-in format, so they become single tokens or short merges.
    texts += ["Human: \n\nAssistant: ", "[Round 1]\n\n问：\n\n答：", "<|im_start|>user\n"] * 20
    return texts


def build_tiny_model(
    directory: str | Path,
    *,
    texts: Iterable[str] | None = None,
    vocab_size: int = 1024,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    max_positions: int = 1024,
    initializer_range: float = 0.2,
    seed: int = 0,
) -> Path:
    """Build (once) a tiny random Llama with its own tokenizer in ``directory``; return the path.

    An existing build with the same settings is reused. ``texts`` defaults to the bundled dialogs.
    """
    directory = Path(directory).expanduser()
    settings = {
        "vocab_size": vocab_size,
        "hidden_size": hidden_size,
        "num_layers": num_layers,
        "num_heads": num_heads,
        "max_positions": max_positions,
        "initializer_range": initializer_range,
        "seed": seed,
        "custom_texts": texts is not None,
    }
    marker = directory / _MARKER
    if texts is None and marker.is_file() and json.loads(marker.read_text()) == settings:
        return directory
    try:
        import torch
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
        from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    except ImportError as e:
        raise MissingDependencyError(
            f"building the tiny model needs {e.name}: pip install torch transformers tokenizers"
        ) from e

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(list(texts) if texts is not None else _default_texts(), trainer=trainer)
    bos_id = bpe.token_to_id("<s>")
    bpe.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos_id)]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        model_max_length=max_positions,
    )
    tokenizer.chat_template = CHATML_TEMPLATE

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=max(1, num_heads // 2),
        max_position_embeddings=max_positions,
        bos_token_id=bos_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        initializer_range=initializer_range,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    save_model_dir(model, tokenizer, directory, _MARKER, settings)
    logger.info(
        "built a tiny Llama (%d parameters, vocab %d) in %s",
        model.num_parameters(),
        len(tokenizer),
        directory,
    )
    return directory
