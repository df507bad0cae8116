"""Evaluation harnesses: the paper's probing questions, our labelled set, LoCoMo retrieval."""
