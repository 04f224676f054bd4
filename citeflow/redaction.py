"""Secrets never at rest: redact settings whose key names a secret before they are written or shown.

A key names a secret when, split into words at `.`, `_`, `-` and case changes, it contains one of
`SECRET_WORDS` (secret, password, token, credential, ...) or one of `SECRET_PHRASES` (access key, private
key, api key, ...), e.g. `spark.hadoop.fs.s3a.secret.key`, `fs.azure.sas.token`, `aws_access_key_id`,
`apiKey`. Values are replaced by `REDACTED`; the key stays, so a manifest still says *that* it was set.

What is redacted, and where (the callers):
- dicts: the value of any secret-named key (manifests' resolved config and metrics: `citeflow.stage`;
  XCom summaries and Airflow logs: `citeflow.cockpit.orchestration`; the Artifacts tab:
  `citeflow.cockpit.artifact_view`);
- `key=value` strings, alone or comma-joined (`spark.conf`, `embed_graph.pbg`, override lines);
- the password of a URI's user info (`s3://user:pw@host/...`).

Redaction is for what is written and shown only: Spark still receives the real values (the stage passes
the config itself to `citeflow.spark.engine.session.get_spark`, never a redacted copy). Nothing here imports more than
the
standard library.
"""

from __future__ import annotations

import re
from typing import Any

REDACTED = "***"
SECRET_WORDS = frozenset(
    {
        "secret",
        "secrets",
        "password",
        "passwd",
        "pwd",
        "passphrase",
        "token",
        "credential",
        "credentials",
        "auth",
        "authorization",
        "sas",
        "apikey",
        "accesskey",
        "privatekey",
        "cookie",
    }
)
SECRET_PHRASES = (("access", "key"), ("private", "key"), ("api", "key"), ("account", "key"), ("client", "secret"))
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_URI_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/@:\s]*:)(?P<password>[^/@\s]+)(?P<at>@)")


def key_words(key: str) -> list[str]:
    """`fs.s3a.secretKey` -> ['fs', 's', '3', 'a', 'secret', 'key']: words at separators and case changes."""
    return [w.lower() for w in _WORDS.findall(str(key))]


def is_secret_key(key: str) -> bool:
    """Whether a setting's key names a secret (see the module docstring)."""
    words = key_words(key)
    if any(w in SECRET_WORDS for w in words):
        return True
    return any(words[i : i + 2] == list(phrase) for phrase in SECRET_PHRASES for i in range(len(words) - 1))


def redact_uri(text: str) -> str:
    """`s3://user:pw@host/x` -> `s3://user:***@host/x`; anything else unchanged."""
    return _URI_PASSWORD.sub(lambda m: f"{m['head']}{REDACTED}{m['at']}", text)


def redact_setting(text: str) -> str:
    """A `key=value` string, or several joined by commas, with secret values replaced.

    `spark.conf=a.secret.key=X,spark.y=1` (an override line) redacts the nested key as well.
    """
    if "=" not in text:
        return redact_uri(text)
    parts = []
    for part in text.split(","):
        if "=" not in part:
            parts.append(redact_uri(part))
            continue
        key, value = part.split("=", 1)
        if is_secret_key(key):
            parts.append(f"{key}={REDACTED}")
        elif "=" in value:
            parts.append(f"{key}={redact_setting(value)}")
        else:
            parts.append(f"{key}={redact_uri(value)}")
    return ",".join(parts)


def redact(value: Any) -> Any:
    """A copy of `value` (JSON-like: dicts, lists, tuples, strings) with every secret replaced."""
    if isinstance(value, dict):
        return {k: (REDACTED if is_secret_key(k) and v not in (None, "") else redact(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact(v) for v in value)
    if isinstance(value, str):
        return redact_setting(value)
    return value
