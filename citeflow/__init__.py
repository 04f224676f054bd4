"""citeflow: corpus snapshot -> citation-informed scientific-document embeddings.

Cross-cutting pieces live here: configuration (`citeflow.config`), the
versioned artifact store (`citeflow.artifacts`) and user-facing errors
(`citeflow.errors`). Stage entry points are in `jobs/`, Spark transforms in
`spark/`.
"""

__version__ = "0.1.0"
