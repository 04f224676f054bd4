"""`python -m citeflow.cockpit.deployment`: the deployment launcher's command line (`cli.main`)."""

import sys

from citeflow.cockpit.deployment.cli import main

sys.exit(main())
