"""The compiled part (memory_bank/_native.c): BM25's posting scan and the top-k of its scores.

Everything else is declared in pyproject.toml. The extension is optional: where it cannot be
built (no C compiler), the install still succeeds and the search uses its NumPy paths, which
give the same results.
"""

import sys

from setuptools import Extension, setup

flags = [] if sys.platform == "win32" else ["-O2", "-ffp-contract=off"]  # no fused multiply-add
setup(
    ext_modules=[
        Extension(
            "memory_bank._native", ["memory_bank/_native.c"], extra_compile_args=flags, optional=True
        )
    ]
)
