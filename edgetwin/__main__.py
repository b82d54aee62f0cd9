"""``python -m edgetwin ...``: the ``edgetwin`` command."""

import sys

from edgetwin.cli import main

sys.exit(main())
