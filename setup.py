"""The one compiled part: BM25's posting scan (memory_bank/_bm25scan.c).

Everything else is declared in pyproject.toml. The extension is optional: where it cannot be
built (no C compiler), the install still succeeds and the index uses its NumPy path, which
gives the same scores.
"""

import sys

from setuptools import Extension, setup

flags = [] if sys.platform == "win32" else ["-O2", "-ffp-contract=off"]  # no fused multiply-add
setup(
    ext_modules=[
        Extension(
            "memory_bank._bm25scan", ["memory_bank/_bm25scan.c"], extra_compile_args=flags, optional=True
        )
    ]
)
