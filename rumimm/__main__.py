"""``python -m rumimm``: the command line of :mod:`rumimm.cli`."""

import sys

from rumimm.cli import main

sys.exit(main())
