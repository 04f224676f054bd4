"""citeflow: corpus snapshot -> citation-informed scientific-document embeddings.

Cross-cutting pieces live here: configuration (`citeflow.config`), the
versioned artifact store (`citeflow.artifacts`) and user-facing errors
(`citeflow.errors`). Stage entry points are in `jobs/`, Spark transforms in
`spark/`.
"""

from pkgutil import extend_path

__version__ = "0.1.0"

# The folders jobs/, spark/, ... install as citeflow.jobs, citeflow.spark, ... (setup.py). A checkout's root holds
# this package's own folder without them, and comes first on sys.path wherever Python starts there (pytest, `python
# -m` in the checkout): the package then also looks for its modules in every other `citeflow` folder on sys.path,
# the installed one among them (a development install's tree of links: docs/development.md).
__path__ = extend_path(__path__, __name__)
