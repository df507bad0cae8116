"""``python -m memory_bank``: the ``memorybank`` command, for environments without its script."""

import sys

from memory_bank.cli import main

sys.exit(main())
