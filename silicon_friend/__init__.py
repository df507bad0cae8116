"""SiliconFriend: a warm AI companion with long-term memory (MemoryBank paper, §3).

Layout:

* :mod:`silicon_friend.engine`: the conversation engine (prompting, storing turns, reinforcement,
  background day summaries, failure handling). No UI code.
* :mod:`silicon_friend.prompts` and :mod:`silicon_friend.budget`: the bilingual prompt table and
  fitting a prompt into the model's context window.
* :mod:`silicon_friend.models`: turning an LLM spec into a chat model, token counting, streaming
  with timeouts and cancellation.
* :mod:`silicon_friend.web`: the Gradio app; :mod:`silicon_friend.terminal`: the terminal chat;
  :mod:`silicon_friend.cli`: the ``silicon-friend`` command.
* :mod:`silicon_friend.backends.hf`: the ``hf`` backbone (transformers + optional LoRA adapter).

Importing this package loads no model, parses no arguments and touches no file.
"""

__version__ = "0.1.0"
