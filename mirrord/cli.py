"""Command line: mirrord's own flags plus MirrorMaker 1's, so a kafka-mirror-maker.sh unit can swap binaries.

This is the one place that turns errors into exit statuses and one-line messages.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path

from mirrord import __version__, config
from mirrord.errors import EX_CONFIG, EX_SOFTWARE, MirrordError

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
        sys.stderr.write(f"mirrord: command line: {message}\n")
        sys.exit(EX_CONFIG)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="mirrord", description="Mirror Kafka topics from a source to a target cluster on Spark.")
    p.add_argument("--config", type=Path, help=f"INI settings file (default {config.DEFAULT_CONFIG} "
                   "unless MirrorMaker 1 flags are given)")
    for flag, key in FLAGS.items():
        extra = {"nargs": "?", "const": "true"} if key == "abort.on.send.failure" else {}
        p.add_argument(flag, dest=flag[2:], metavar=key.split(".")[-1].upper(), help=config.KEYS[key].doc, **extra)
    p.add_argument("--check", action="store_true", help="validate the configuration and exit")
    p.add_argument("--log-level", default=os.environ.get("MIRRORD_LOG_LEVEL", "INFO"),
                   choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.add_argument("--version", action="version", version=f"mirrord {__version__}")
    return p


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


def _setup_logging(level: str) -> None:
    fmt = "%(levelname)s %(name)s: %(message)s"
    if not os.environ.get("JOURNAL_STREAM"):
        fmt = "%(asctime)s " + fmt
    logging.basicConfig(level=level, format=fmt, stream=sys.stderr)
    logging.getLogger("py4j").setLevel(logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    # Stopped before the daemon has started anything: nothing to finish, a clean exit.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    args = parser().parse_args(argv)
    _setup_logging(args.log_level)
    try:
        load = settings_loader(args)
        if args.check:
            from mirrord.pipeline import Flow, check_transforms_alone

            check_transforms_alone(Flow.from_settings(load()))
            print("mirrord: configuration OK")
            return 0
        from mirrord.daemon import Daemon
        from mirrord.notify import Notifier

        return Daemon(load, Notifier()).run()
    except MirrordError as exc:
        sys.stderr.write(f"mirrord: {exc}\n")
        return exc.exit_status
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one line, then the details
        sys.stderr.write(f"mirrord: internal error: {type(exc).__name__}: {exc}\n")
        logging.getLogger("mirrord").debug("details", exc_info=True)
        return EX_SOFTWARE


if __name__ == "__main__":
    sys.exit(main())
