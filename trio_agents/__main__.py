"""``python -m trio_agents``: the command line (see :mod:`trio_agents.cli`)."""

import sys

from ._main import main

sys.exit(main())
