"""`python -m streams.cli ...` is `crosstalk ...`."""

import sys

from streams.cli.main import main

sys.exit(main())
