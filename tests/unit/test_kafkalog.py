"""librdkafka's lines through mirrord's logging: connection noise dropped, the rest once a minute per kind."""

from __future__ import annotations

import logging

from mirrord.kafka.kafkalog import OncePerKind


def record(text: str) -> logging.LogRecord:
    return logging.LogRecord("mirrord.kafka", logging.ERROR, __file__, 1, text, None, None)


def test_reconnect_attempts_are_dropped_and_other_lines_come_once_a_minute_with_a_count():
    quiet = OncePerKind()
    fail = ("FAIL [rdkafka#producer-1] [thrd:127.0.0.1:9/bootstrap]: 127.0.0.1:9/bootstrap: Connect to "
            "ipv4#127.0.0.1:9 failed: Connection refused (after 0ms in state CONNECT)")
    assert not any(quiet.filter(record(fail)) for _ in range(1000))
    auth = "SASL [rdkafka#consumer-3] [thrd:sasl]: Authentication failed for user 7"
    assert quiet.filter(record(auth))
    assert not quiet.filter(record(auth.replace("7", "8")))  # the same kind, numbers aside
    quiet._seen = {kind: (last - 61, held) for kind, (last, held) in quiet._seen.items()}
    again = record(auth)
    assert quiet.filter(again) and again.getMessage().endswith("(and 1 more like it in the last minute)")


def test_a_refused_login_or_handshake_is_kept_though_librdkafka_files_it_as_a_connection_failure():
    quiet = OncePerKind()
    refused = ("FAIL [rdkafka#producer-1] [thrd:sasl_plaintext://127.0.0.1:9/bootstrap]: sasl_plaintext://127.0.0.1:9/"
               "bootstrap: SASL authentication error: Authentication failed during authentication due to invalid "
               "credentials with SASL mechanism SCRAM-SHA-512 (after 2ms in state AUTH_REQ)")
    handshake = ("FAIL [rdkafka#producer-2] [thrd:ssl://127.0.0.1:9/bootstrap]: ssl://127.0.0.1:9/bootstrap: SSL "
                 "handshake failed: error:0A000086:SSL routines::certificate verify failed (after 3ms in state "
                 "SSL_HANDSHAKE)")
    assert quiet.filter(record(refused)) and quiet.filter(record(handshake))
    assert not quiet.filter(record(refused))  # then once a minute, like every other kind
