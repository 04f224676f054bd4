"""`python -m citeflow.cockpit.local_airflow`: the local launcher's command line (cli.py)."""

import sys

from citeflow.cockpit.local_airflow.cli import main

if __name__ == "__main__":
    sys.exit(main())
