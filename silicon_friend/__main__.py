"""``python -m silicon_friend``: the same as the ``silicon-friend`` command (web, chat, eval)."""

import sys

from silicon_friend.cli import main

sys.exit(main())
