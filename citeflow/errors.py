"""User-facing errors.

A `CiteflowError` is a mistake the user can fix (bad id, missing path, wrong
format, missing Java). The CLI prints its message and exits with status 2 and
no traceback; anything else is a bug and keeps its traceback.
"""


class CiteflowError(Exception):
    """An error caused by input or configuration, reported without a traceback."""
