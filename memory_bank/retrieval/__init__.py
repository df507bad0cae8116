"""Hybrid ranking of one user's memories for a query, as a pipeline of scoring terms.

The paper ranks memory pieces by dense similarity alone. Chat memories are short and full of
names, titles and dates that a sentence encoder blurs, so the bank's pipeline
(:meth:`Pipeline.from_config`) scores each memory as

    dense cosine  +  w_lex * BM25 / max BM25
                  +  w_date * [on a day the query names]  (or w_month * [in a month it names])

then adds ``day_weight`` times its day's evidence (the mean of the day's ``day_top`` best
scores) and lifts a turn towards a higher-scoring turn just before or after it
(``prev_turn_weight``, ``next_turn_weight``). Turns are also indexed with the previous turn's
reply as context (see :func:`memory_bank.records.index_text`), which makes a short answer
findable. The weights were chosen on the paper's probing questions and the LoCoMo development
set together (README, Evaluation).

A search runs in five steps, one module each:

1. :mod:`~memory_bank.retrieval.query`: the query is parsed once (tokens, named days and
   months, its vector, "now", the kinds it may return); a query that is a dialogue is embedded
   as its context mixed with its latest user turn (:mod:`~memory_bank.retrieval.dialogue`);
2. :mod:`~memory_bank.retrieval.candidates`: the dense top N, the lexical top N, the memories
   on named days, and the turns next to any of those;
3. :mod:`~memory_bank.retrieval.terms`: each term scores the candidates (and their neighbours);
4. a fusion (:func:`weighted_sum` by default, :class:`ReciprocalRank` with ``fusion: rrf``,
   any callable) makes one base score of the terms';
5. :mod:`~memory_bank.retrieval.stages`: day evidence, then the neighbour lift; then the top k.

**Adding a scoring term.** Write a small class with a ``name``, a ``weight`` and
``score(ctx, positions)`` returning one ``float32`` per position, unweighted; vectorise it over
``positions`` and read shared arrays from ``ctx`` (:class:`Context`: the partition, the parsed
query, BM25 scores, positions on named days). Then either

* try it: ``Pipeline.from_config(cfg).with_term(MyTerm(0.3))`` (a term named like a default
  one replaces it; :mod:`memory_bank.evaluation.variants` does this to measure a ranking change), or
* adopt it: add its weight to :class:`~memory_bank.config.RetrievalConfig` (default 0 keeps the
  rankings as they are) and a line to :func:`~memory_bank.retrieval.terms.default_terms`.

A term of weight 0 is not built, so it costs nothing. A score that depends on other memories'
scores is a stage (``apply(ctx, cands, scores)``) rather than a term; see
:func:`~memory_bank.retrieval.stages.default_stages`.
"""

from memory_bank.retrieval.candidates import Candidates, CandidateStep
from memory_bank.retrieval.pipeline import (
    Fusion,
    Pipeline,
    Ranked,
    ReciprocalRank,
    bank_pipeline,
    rank,
    weighted_sum,
)
from memory_bank.retrieval.query import Context, Query
from memory_bank.retrieval.stages import DayEvidence, NeighbourLift, Stage
from memory_bank.retrieval.terms import (
    ColdPenalty,
    Dense,
    Echo,
    Lexical,
    NamedDay,
    NamedMonth,
    Term,
    Unanswered,
)

__all__ = [
    "CandidateStep",
    "Candidates",
    "ColdPenalty",
    "Context",
    "DayEvidence",
    "Dense",
    "Echo",
    "Fusion",
    "Lexical",
    "NamedDay",
    "NamedMonth",
    "NeighbourLift",
    "Pipeline",
    "Query",
    "Ranked",
    "ReciprocalRank",
    "Stage",
    "Term",
    "Unanswered",
    "bank_pipeline",
    "rank",
    "weighted_sum",
]
