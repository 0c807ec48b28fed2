"""``python -m skdp``: the same as the ``skdp`` command."""

import sys

from ._cli import main

sys.exit(main())
