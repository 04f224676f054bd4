"""`python -m jobs.cli`: the `citeflow` command."""

import sys

from jobs.cli import main

sys.exit(main())
