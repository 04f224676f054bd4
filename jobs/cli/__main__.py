"""`python -m citeflow.jobs.cli`: the `citeflow` command."""

import sys

from citeflow.jobs.cli import main

sys.exit(main())
