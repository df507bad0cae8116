"""The answer evaluation (paper §4.2): SiliconFriend answers the probing questions, a judge scores.

It runs the chatbot, so it belongs to the app; the library's evaluation
(:mod:`memory_bank.evaluation`: retrieval, LoCoMo, LongMemEval) needs no LLM.

* :mod:`~silicon_friend.evaluation.answers`: the systems compared and the run;
* :mod:`~silicon_friend.evaluation.judge`: the LLM judge and its versioned prompts;
* :mod:`~silicon_friend.evaluation.cli`: ``silicon-friend eval answers``.
"""
