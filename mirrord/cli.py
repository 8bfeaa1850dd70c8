"""Command line: mirrord's own flags plus MirrorMaker 1's, so a kafka-mirror-maker.sh unit can swap binaries.

This is the one place that turns errors into exit statuses and one-line messages.
"""

from __future__ import annotations

import argparse
import faulthandler
import logging
import os
import re
import signal
import sys
from pathlib import Path

from mirrord import __version__
from mirrord.errors import EX_CONFIG, EX_SOFTWARE, MirrordError, one_line
from mirrord.settings import config
from mirrord.settings.keys import EXACTLY_ONCE
from mirrord.settings.redact import redact

# flag → mirrord.conf key; MirrorMaker 1's spelling first.
FLAGS = {
    "--consumer.config": "consumer.config",
    "--producer.config": "producer.config",
    "--whitelist": "whitelist",
    "--include": "whitelist",
    "--topics.exclude": "topics.exclude",
    "--num.streams": "num.streams",
    "--offset.commit.interval.ms": "offset.commit.interval.ms",
    "--abort.on.send.failure": "abort.on.send.failure",
    "--state.dir": "state.dir",
    "--metrics.listen": "metrics.listen",
    "--flow": "flow",
    "--replication.policy": "replication.policy",
    "--source.alias": "source.alias",
    "--target.alias": "target.alias",
    "--spark.master": "spark.master",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 78: a bad command line is a config error
        sys.stderr.write(f"mirrord: command line: {one_line(redact(message))}\n")
        sys.exit(EX_CONFIG)


def _settings_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=Path, help=f"INI settings file (default {config.DEFAULT_CONFIG} "
                   "unless MirrorMaker 1 flags are given)")
    for flag, key in FLAGS.items():
        extra = {"nargs": "?", "const": "true"} if key == "abort.on.send.failure" else {}
        p.add_argument(flag, dest=flag[2:], metavar=key.split(".")[-1].upper(), help=config.KEYS[key].doc, **extra)
    p.add_argument("--log-level", default=os.environ.get("MIRRORD_LOG_LEVEL", "INFO"),
                   choices=["DEBUG", "INFO", "WARNING", "ERROR"])


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="mirrord", description="Mirror Kafka topics from a source to a target cluster on Spark. "
                "`mirrord offsets translate --help`: consumer group failover.")
    _settings_arguments(p)
    p.add_argument("--check", action="store_true", help="validate the configuration and exit")
    p.add_argument("--version", action="version", version=f"mirrord {__version__}")
    return p


def offsets_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="mirrord offsets translate",
                description="Where a consumer group resumes on the target, per partition, next to its position on "
                "the source (translated with the flow's offset syncs; never past the group's position).")
    _settings_arguments(p)
    p.add_argument("--group", required=True, help="the consumer group, as on the source")
    p.add_argument("--topic", type=_regex, help="only source topics matching this regular expression")
    p.add_argument("--apply", action="store_true", help="commit the translated offsets to the group on the target "
                   "(refused, exit 75, while the group has members there)")
    return p


def _regex(text: str) -> str:
    try:
        re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"invalid regular expression {text!r}: {exc}") from None
    return text


PATH_KEYS = ("consumer.config", "producer.config", "state.dir")


def settings_loader(args: argparse.Namespace):
    """Paths are made absolute now: the daemon changes its working directory, and reloads later."""
    flags = {FLAGS["--" + name]: value for name, value in vars(args).items()
             if "--" + name in FLAGS and value is not None}
    flags.update({k: str(Path(v).absolute()) for k, v in flags.items() if k in PATH_KEYS})
    conf = args.config
    if conf is None and "consumer.config" not in flags:
        conf = config.DEFAULT_CONFIG
    conf = conf.absolute() if conf is not None else None
    return lambda: config.load(conf, flags)


class RedactingFormatter(logging.Formatter):
    """Every log line, its exception text included, through the one redaction."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def _py4j_line(record: logging.LogRecord) -> bool:
    """py4j's lines in the journal. Its retries, logged through the root logger with a traceback at INFO
    (`logging.info("Exception while sending command.", exc_info=True)`, Spark's JVM gone first as a signal to the
    process group makes it), get the `py4j` logger's WARNING threshold like its other lines, so a clean stop's
    journal holds no traceback. Its errors (the same message at ERROR with two chained tracebacks when the JVM was
    killed under a stream) become one line, the exception's last words after the message: mirrord's own line
    says what the JVM's end means."""
    if f"{os.sep}py4j{os.sep}" not in record.pathname:
        return True
    if record.levelno < logging.WARNING:
        return False
    if record.exc_info and record.exc_info[1] is not None:
        exc = record.exc_info[1]
        record.msg, record.args = f"{record.getMessage()} ({type(exc).__name__}: {exc})", None
        record.exc_info = record.exc_text = None
    record.name = "py4j"
    return True


def _setup_logging(level: str) -> None:
    fmt = "%(levelname)s %(name)s: %(message)s"
    if not os.environ.get("JOURNAL_STREAM"):
        fmt = "%(asctime)s " + fmt
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(RedactingFormatter(fmt))
    handler.addFilter(_py4j_line)
    logging.basicConfig(level=level, handlers=[handler], force=True)
    logging.getLogger("py4j").setLevel(logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    # Stopped before the daemon has started anything: nothing to finish, a clean exit (Ctrl-C too).
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: sys.exit(0))
    argv = sys.argv[1:] if argv is None else argv
    offsets = argv[:2] == ["offsets", "translate"]
    if argv[:1] == ["offsets"] and not offsets:
        _Parser(prog="mirrord offsets").error("the only offsets command is `mirrord offsets translate`")
    args = offsets_parser().parse_args(argv[2:]) if offsets else parser().parse_args(argv)
    _setup_logging(args.log_level)
    try:
        load = settings_loader(args)
        if offsets:
            from mirrord.mm2 import failover

            return failover.run(load(), args.group, args.topic, args.apply)
        if args.check:
            from mirrord.settings.flow import Flow
            from mirrord.spark.modes import check_line
            from mirrord.spark.pipeline import check_transforms_alone

            settings = load()
            check_transforms_alone(Flow.from_settings(settings))
            delivery = ("; delivery = exactly-once: Kafka transactions on the target (its consumers read with "
                        "isolation.level=read_committed)" if settings.delivery == EXACTLY_ONCE else "")
            print(f"mirrord: configuration OK; {check_line(settings.trigger, len(settings.transforms))}{delivery}")
            return 0
        from mirrord.supervisor.daemon import Daemon
        from mirrord.supervisor.notify import Notifier

        # `systemctl kill -s USR1 mirrord`: every thread's stack into the journal, for a daemon that seems stuck.
        faulthandler.register(signal.SIGUSR1, file=sys.__stderr__, all_threads=True)

        return Daemon(load, Notifier()).run()
    except MirrordError as exc:
        sys.stderr.write(f"mirrord: {one_line(redact(str(exc)))}\n")
        return exc.exit_status
    except KeyboardInterrupt:  # pyspark's own SIGINT handler, for the moment before the daemon takes it back
        return 0
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one line, then the details
        sys.stderr.write(f"mirrord: internal error: {type(exc).__name__}: {one_line(redact(str(exc)))}\n")
        logging.getLogger("mirrord").debug("details", exc_info=True)
        return EX_SOFTWARE


if __name__ == "__main__":
    sys.exit(main())
