"""Finding and loading base models, tokenizers and adapters (heavy imports happen inside functions).

``resolve_model_path`` maps the special names ``builtin:tiny`` and ``builtin:smollm2`` to local
directories (built or converted once into the cache, see :mod:`finetune.tiny` and
:mod:`finetune.smollm2`); any other name is passed to transformers unchanged (a hub id or a folder).
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import Any

from finetune.errors import MissingDependencyError, ModelLoadError
from finetune.smollm2 import cache_root, convert_smollm2
from finetune.tiny import build_tiny_model

logger = logging.getLogger(__name__)

_PIP_NAMES = {
    "peft": "peft",
    "accelerate": "accelerate",
    "transformers": "transformers",
    "torch": "torch==2.13.0",
}


def require(module: str) -> Any:
    """Import an optional dependency or fail with the exact ``pip install`` line."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingDependencyError(
            f"this needs {module}: pip install {_PIP_NAMES.get(module, module)} "
            "(or pip install -e '.[finetune]')"
        ) from e


def resolve_model_path(name: str) -> str:
    """A directory or hub id transformers can load, building or converting the built-in models once."""
    if name == "builtin:tiny":
        return str(build_tiny_model(cache_root() / "tiny-llama"))
    if name == "builtin:smollm2":
        return str(convert_smollm2())
    if name.startswith("builtin:"):
        raise ModelLoadError(f"unknown built-in model {name!r}; known: builtin:tiny, builtin:smollm2")
    return name


def torch_dtype(name: str) -> Any:
    """``"auto"`` or the ``torch.dtype`` called ``name``."""
    if name == "auto":
        return "auto"
    torch = require("torch")
    return getattr(torch, name)


def _first_line(e: BaseException) -> str:
    """An exception's message on one line (transformers' run over several)."""
    text = " ".join(str(e).split())
    return text or type(e).__name__


def load_tokenizer(path: str, trust_remote_code: bool = False) -> Any:
    """The tokenizer at ``path``, with a pad token (EOS when it has none)."""
    transformers = require("transformers")
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, TypeError, AttributeError) as e:  # TypeError: a config.json of no object
        raise ModelLoadError(f"cannot load a tokenizer from {path!r}: {_first_line(e)}") from e
    if tokenizer.pad_token_id is None:
        if tokenizer.eos_token_id is None:
            raise ModelLoadError(f"the tokenizer of {path!r} has neither a pad nor an EOS token")
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_causal_lm(path: str, dtype: str = "auto", trust_remote_code: bool = False, **kwargs: Any) -> Any:
    """A causal LM; remote-code models that register only ``AutoModel`` (ChatGLM-6B) load through it."""
    transformers = require("transformers")
    try:
        config = transformers.AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code)
        auto_map = getattr(config, "auto_map", None) or {}
        cls = transformers.AutoModelForCausalLM
        if trust_remote_code and "AutoModelForCausalLM" not in auto_map and "AutoModel" in auto_map:
            cls = transformers.AutoModel
        model = cls.from_pretrained(
            path, dtype=torch_dtype(dtype), trust_remote_code=trust_remote_code, **kwargs
        )
    except (OSError, ValueError, TypeError, AttributeError) as e:
        raise ModelLoadError(f"cannot load a causal language model from {path!r}: {_first_line(e)}") from e
    logger.info("loaded %s (%s, %.1fM parameters)", path, type(model).__name__, model.num_parameters() / 1e6)
    return model


def load_adapter(model: Any, adapter_path: str | Path, trainable: bool = False) -> Any:
    """Wrap ``model`` with the PEFT adapter saved in ``adapter_path`` (``PeftModel.from_pretrained``)."""
    peft = require("peft")
    if not (Path(adapter_path) / "adapter_config.json").is_file():
        raise ModelLoadError(f"{adapter_path} is not a PEFT adapter directory (no adapter_config.json)")
    return peft.PeftModel.from_pretrained(model, str(adapter_path), is_trainable=trainable)
