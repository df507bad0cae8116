"""Encoder ensembles: the weighted mean of several encoders' cosines, as one vector per text.

Two encoders trained on different data err on different memories, so the mean of their
cosines can rank better than either. Each text is embedded by every member on its own; the
ensemble's vector is the concatenation of the members' unit vectors, each scaled by the square
root of its weight (weights summing to 1)::

    [sqrt(w1) a1, sqrt(w2) a2] . [sqrt(w1) b1, sqrt(w2) b2] = w1 cos(a1, b1) + w2 cos(a2, b2)

Defined in :mod:`memory_bank.embeddings` (its factory builds them); this module names them.
The concatenation is itself a unit vector, so an ensemble is an ordinary
:class:`~memory_bank.embeddings.Encoder`: the index, the stores (one vector per memory, of the
summed dimension) and the record of which encoder built a store need nothing new. A store
built with ``minilm+use-multilingual`` is refused to a plain ``minilm`` query, as any other
pair of encoders is.

Names: ``a+b`` (equal weights) or ``a@0.6+b@0.4`` (weights, normalised to sum 1), each member
any name :func:`~memory_bank.embeddings.get_encoder` knows except another ensemble.

>>> from memory_bank.embeddings import HashingEncoder
>>> enc = EnsembleEncoder([(HashingEncoder(8), 0.5), (HashingEncoder(16), 0.5)])
>>> enc.name, enc.dim
('hashing-8+hashing-16', 24)
"""

from memory_bank.embeddings import MEMBER_SEP, WEIGHT_SEP, EnsembleEncoder, ensemble_name, parse_ensemble

__all__ = ["MEMBER_SEP", "WEIGHT_SEP", "EnsembleEncoder", "ensemble_name", "parse_ensemble"]
