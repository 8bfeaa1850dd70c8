"""Secrets out of everything mirrord shows: reprs, log lines, errors, STATUS lines, metric labels.

A secret is the value of a key Kafka's clients type as a password (sasl.jaas.config, ssl.key.password,
ssl.keystore.password, ssl.truststore.password, ssl.keystore.key, ...), of librdkafka's (sasl.password,
ssl.key.pem, sasl.oauthbearer.client.secret, ...) or of Spark's (Spark's own default
`spark.redaction.regex` words). `SECRET_KEY` names them all; Spark gets the same pattern as its
`spark.redaction.regex`, so the options mirrord passes to Spark are hidden in Spark's output too.

Text is redacted twice over: `key=value` pairs and JAAS `password="..."` options by pattern, and every
secret value mirrord has read (`remember`) wherever it appears, whatever surrounds it.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Iterable, Mapping

HIDDEN = "[hidden]"
# Java regex syntax too (Spark's spark.redaction.regex); a superset of Spark's default
# `(?i)secret|password|token|access[.]?key`.
SECRET_KEY = re.compile(r"(?i:secret|password|passphrase|token|access[.]?key|credential|jaas"
                        r"|keystore[.]key|key[.]pem|private[.]key|oauthbearer[.]config)")
_KEY = r"[\w.\-]*" + SECRET_KEY.pattern + r"[\w.\-]*"
# `key=value`, `key -> value` (Scala), `'key': 'value'` (a dict): the value runs to its closing quote, or
# to the end of a JAAS configuration (`;`), a separator or the line. An unquoted `key: reason` is an
# error message naming the key, and stays.
_PAIR = re.compile(r"(?i)(" + _KEY + r"""(?:['"]\s*:|\s*(?:=|->))\s*)(?:'[^']*'|"[^"]*"|[^\n,;)}\]]*;?)""")
_JAAS_OPTION = re.compile(r"""(?i)(\w*(?:password|secret|token|credential)\w*\s*=\s*)(?:"(?:[^"\\]|\\.)*"|\S+)""")
MIN_REMEMBERED = 3  # shorter values would hide ordinary words; such a secret is no secret anyway

_known: set[str] = set()
_lock = threading.Lock()


def is_secret(key: str) -> bool:
    return bool(SECRET_KEY.search(key))


def remember(values: Iterable[str]) -> None:
    """Hide these values wherever they appear in text from now on (secrets read from the configuration)."""
    with _lock:
        _known.update(v for v in values if len(v) >= MIN_REMEMBERED)


def remember_secrets(properties: Mapping[str, str]) -> None:
    """Remember the secret values of a properties mapping, and the password-like options inside them."""
    found = [v for k, v in properties.items() if is_secret(k)]
    inner = [m.group(0).split("=", 1)[1].strip().strip('"') for v in found for m in _JAAS_OPTION.finditer(v)]
    remember([*found, *inner])


def redact(value):
    """The one redaction: a mapping gets its secret keys' values hidden; text its secrets; else unchanged."""
    if isinstance(value, Mapping):
        return {k: (HIDDEN if isinstance(k, str) and is_secret(k) else redact(v)) for k, v in value.items()}
    if not isinstance(value, str):
        return value
    with _lock:
        known = sorted(_known, key=len, reverse=True)
    for secret in known:
        if secret in value:
            value = value.replace(secret, HIDDEN)
    value = _PAIR.sub(lambda m: m.group(1) + HIDDEN, value)
    return _JAAS_OPTION.sub(lambda m: m.group(1) + HIDDEN, value)


def dataclass_repr(self) -> str:
    """`__repr__` for dataclasses that hold properties: every field through `redact`."""
    fields = ", ".join(f"{f.name}={_repr(getattr(self, f.name))}" for f in dataclasses.fields(self) if f.repr)
    return f"{type(self).__name__}({fields})"


def _repr(value) -> str:
    if isinstance(value, Mapping):
        return repr(redact(value))
    return redact(repr(value))
