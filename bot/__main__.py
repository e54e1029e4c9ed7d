"""``python -m bot`` is ``threadbot``."""

import sys

from bot.cli import main

sys.exit(main())
