"""librdkafka's log lines, through mirrord's logging and quiet: an outage is one line, not thousands.

mirrord's Kafka clients (confluent-kafka) hand their log lines to `LOGGER` (their `logger` setting),
served when the client is polled. A cluster that does not answer makes librdkafka log every reconnect
attempt (`Connect to ... failed: Connection refused`, every 50 ms per broker and client): mirrord's
cluster probe (health.py) already says when a cluster becomes unreachable, how long it has been, and
when it answers again, so those lines are dropped, unless they say why the cluster refused us (a login
or a TLS handshake refused: the probe only sees that it is unreachable). Every other line is let through
once a minute per kind, with the count of the ones held back.
"""

from __future__ import annotations

import logging
import re
import threading
import time

LOGGER = logging.getLogger("mirrord.kafka")
EVERY = 60.0
# What librdkafka says about connections to a broker that is away: the probe's business.
CONNECTION = re.compile(r"^(?:FAIL|REQTMOUT|DISCONNECT|BROKERFAIL|TERMINATE|ERROR) |Connection refused|"
                        r"Disconnected|brokers are down|Connect to |timed out|Receive failed|transport failure")
# ... but these say why a cluster that answers refuses mirrord: the operator's cause.
REFUSED = re.compile(r"authentication|SSL handshake|certificate", re.IGNORECASE)


class OncePerKind(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self._seen: dict[str, tuple[float, int]] = {}  # kind → (last let through, held back since)
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if CONNECTION.search(text) and not REFUSED.search(text):
            return False
        kind = re.sub(r"\d+", "#", text.split("]:", 1)[-1])[:80]  # the message, numbers aside
        now = time.monotonic()
        with self._lock:
            last, held = self._seen.get(kind, (-EVERY, 0))
            if now - last < EVERY:
                self._seen[kind] = (last, held + 1)
                return False
            self._seen[kind] = (now, 0)
        if held:
            record.msg = f"{record.msg} (and {held} more like it in the last minute)"
        return True


LOGGER.addFilter(OncePerKind())


def with_logger(settings: dict) -> dict:
    """A confluent-kafka client's settings, logging through mirrord's logging."""
    return {**settings, "logger": LOGGER}
