"""Evaluation harnesses: the paper's probing questions, our labelled set, LoCoMo and LongMemEval.

Modules (nothing is imported or loaded until used):

* :mod:`~memory_bank.evaluation.paper`: probing questions and label files; retrieval and its scores
  (``memorybank eval retrieval``);
* :mod:`~memory_bank.evaluation.dataset`: the source format of ``eval_data/``;
* :mod:`~memory_bank.evaluation.locomo`, :mod:`~memory_bank.evaluation.longmemeval`: loaders;
  :mod:`~memory_bank.evaluation.benchmark`: systems and turn/session recall@k;
  :mod:`~memory_bank.evaluation.runs`, :mod:`~memory_bank.evaluation.locomo_run`: the benchmark
  commands (``memorybank eval locomo``, ``memorybank eval longmemeval``);
* :mod:`~memory_bank.evaluation.variants`: ranking changes measured before being proposed;
* :mod:`~memory_bank.evaluation.metrics`, :mod:`~memory_bank.evaluation.report`,
  :mod:`~memory_bank.evaluation.encoders`: metrics, run metadata and charts, an embedding cache.

The answer evaluation (the paper's four metrics) runs the chatbot, so it lives in the app:
:mod:`silicon_friend.evaluation` (``silicon-friend eval answers``). Everything here needs only
the library's public API and no LLM.

See the Evaluation section of ``README.md``.
"""
