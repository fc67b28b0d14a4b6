"""`python -m advisor`: see advisor.cli."""

import sys

from advisor.cli import main

sys.exit(main())
