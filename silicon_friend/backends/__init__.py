"""Chat-model backbones that SiliconFriend adds to :mod:`memory_bank.llm` through the
``memorybank.llm_backends`` entry points (``hf``: transformers + optional LoRA adapter)."""
