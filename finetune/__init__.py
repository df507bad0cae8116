"""LoRA fine-tuning of chat models for SiliconFriend (the paper's ChatGLM-6B / BELLE-7B step), for any causal LM.

Modules:

* :mod:`finetune.formats`: the prompt formats shared by training and inference (pure Python).
* :mod:`finetune.data`: dialog files (``{"input", "output"}`` or chat messages) to masked token ids.
* :mod:`finetune.config`: the typed YAML config; per-model files live in ``configs/finetune/``.
* :mod:`finetune.sft`: the training entry point, ``python -m finetune.sft --config FILE [--key value]``.
* :mod:`finetune.evaluate`: adapter against base model: loss, perplexity, sample replies.
* :mod:`finetune.inference`: :class:`~finetune.inference.ChatModel`, generation and streaming.
* :mod:`finetune.tiny` and :mod:`finetune.smollm2`: offline models for tests and small runs.

Nothing is imported or loaded at import time; torch, transformers and peft are imported on use.
"""
