"""What reaches the journal: mirrord's lines, and no library's noise from a clean stop."""

from __future__ import annotations

import logging
import sys

import py4j.java_gateway
import py4j.protocol

from mirrord import cli


def test_py4js_retry_logged_through_the_root_logger_stays_out_of_the_journal(capsys):
    """py4j logs a command's retry (Spark's JVM gone first, as a signal to the process group makes it) with its
    traceback at INFO through the root logger: a clean stop's journal held it (make test, a signal while Spark
    starts). It is held to the py4j logger's WARNING; py4j's errors and mirrord's own INFO lines still show."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        cli._setup_logging("INFO")
        try:
            raise BrokenPipeError(32, "Broken pipe")
        except BrokenPipeError:
            exc_info = sys.exc_info()
        for severity, text in ((logging.INFO, "Exception while sending command."), (logging.ERROR, "py4j error")):
            root.handle(logging.LogRecord("root", severity, py4j.java_gateway.__file__, 1056, text, None, exc_info))
        logging.getLogger("mirrord").info("stopped after mirroring 0 records in 0 batches")
        err = capsys.readouterr().err
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    assert "Exception while sending command" not in err, err
    assert "py4j error" in err and "stopped after mirroring 0 records" in err, err


def test_py4js_errors_are_one_line_each_never_a_traceback(capsys):
    """Spark's JVM killed under a stream (the kernel's out-of-memory killer): py4j logged "Exception while
    sending command." at ERROR through the root logger with two chained tracebacks, 18 lines each, before
    mirrord's own line said the JVM was killed (tests/faults/test_campaign.py kills it so)."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        cli._setup_logging("INFO")
        try:
            try:
                raise ConnectionResetError(104, "Connection reset by peer")
            except ConnectionResetError as reset:
                raise py4j.protocol.Py4JNetworkError("Error while sending or receiving", reset) from reset
        except py4j.protocol.Py4JNetworkError:
            exc_info = sys.exc_info()
        root.handle(logging.LogRecord("root", logging.ERROR, py4j.java_gateway.__file__, 1059,
                                      "Exception while sending command.", None, exc_info))
        err = capsys.readouterr().err
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    assert err.endswith("ERROR py4j: Exception while sending command. (Py4JNetworkError: Error while sending or "
                        "receiving)\n"), err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
