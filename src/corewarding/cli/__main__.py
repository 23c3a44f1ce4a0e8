"""``python -m corewarding.cli``: the same as the ``corewarding`` command."""

import sys

from corewarding.cli.main import main

sys.exit(main())
