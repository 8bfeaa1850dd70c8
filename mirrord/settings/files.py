"""The files behind the settings: the two Java .properties files and mirrord.conf's INI sections.

Reading a file turns every reason it cannot be used (missing, unreadable, not the format, a bad
line) into one ConfigError naming the file, and the line or key, never the line's text (it may hold
a secret).
"""

from __future__ import annotations

import configparser
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import javaproperties

from mirrord.errors import ConfigError
from mirrord.settings import transforms
from mirrord.settings.keys import Origin, flow_name, optional_regex, regex
from mirrord.settings.redact import dataclass_repr, remember_secrets
from mirrord.settings.transforms import Transform

DEFAULT_CONFIG = Path("/etc/mirrord/mirrord.conf")
SECTION = "mirrord"
SPARK_SECTION = "spark"


@dataclass(frozen=True)
class ClientConfig:
    """One .properties file: where it is and what it says."""

    path: Path
    properties: Mapping[str, str]

    __repr__ = dataclass_repr

    def error(self, key: str | None, reason: str) -> ConfigError:
        return ConfigError(self.path, key, reason)


def _open(path: Path, mode: str = "r"):
    """open() with the reasons a file cannot be read turned into ConfigErrors naming it."""
    try:
        return open(path, mode, **({} if "b" in mode else {"encoding": "utf-8"}))
    except FileNotFoundError:
        raise ConfigError(path, None, "file not found") from None
    except PermissionError:
        raise ConfigError(path, None, "permission denied") from None
    except IsADirectoryError:
        raise ConfigError(path, None, "is a directory, not a file") from None


def read_properties(path: Path) -> ClientConfig:
    try:
        with _open(path, "rb") as fp:  # ISO-8859-1 with \uXXXX escapes, as java.util.Properties reads it
            props = javaproperties.load(fp)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(path, None, f"not a readable Java properties file: {exc}") from None
    props = {k.strip(): v.strip() for k, v in props.items()}
    remember_secrets(props)
    if not props.get("bootstrap.servers"):
        raise ConfigError(path, "bootstrap.servers", "required, and missing or empty")
    return ClientConfig(path=path, properties=props)


def read_ini(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=configparser.ExtendedInterpolation(), strict=True)
    parser.optionxform = str  # keys are case-sensitive, dotted, as Kafka's
    try:
        with _open(path) as fp:
            parser.read_file(fp)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(path, None, f"not a readable text file: {exc}") from None
    except configparser.Error as exc:
        raise _ini_error(path, exc) from None
    unknown_sections = {s for s in parser.sections() if not s.startswith(transforms.SECTION_PREFIX)} - {
        SECTION, SPARK_SECTION}
    if unknown_sections:
        name = sorted(unknown_sections)[0]
        raise ConfigError(path, f"[{name}]", f"unknown section (expected [{SECTION}], [{SPARK_SECTION}] and "
                                             f"[{transforms.SECTION_PREFIX}NAME])")
    return parser


def _ini_error(path: Path, exc: configparser.Error) -> ConfigError:
    """configparser's multi-line messages as one line naming the line (never its text: it may hold a secret)."""
    if isinstance(exc, configparser.MissingSectionHeaderError):
        return ConfigError(path, None, f"line {exc.lineno}: a setting before any [{SECTION}] section header")
    if isinstance(exc, configparser.DuplicateSectionError):
        return ConfigError(path, f"[{exc.section}]", f"line {exc.lineno}: the section appears twice")
    if isinstance(exc, configparser.DuplicateOptionError):
        return ConfigError(path, exc.option, f"line {exc.lineno}: set twice in [{exc.section}]")
    if isinstance(exc, configparser.ParsingError):
        return ConfigError(path, None, f"line {exc.errors[0][0]}: not a 'key = value' line")
    return ConfigError(path, None, f"not a valid INI file: {exc.message.splitlines()[0]}")


def section_settings(parser: configparser.ConfigParser, name: str, path: Path, is_setting,
                     raw: bool = False) -> dict[str, str]:
    """A section's settings; [DEFAULT] keys that are not settings are variables for ${...} (unless raw)."""
    if not parser.has_section(name):
        return {}
    try:
        shared = parser.defaults()
        return {k: v for k, v in parser.items(name, raw=raw) if k not in shared or is_setting(k)}
    except configparser.InterpolationError as exc:
        raise ConfigError(path, getattr(exc, "option", None), f"bad ${{...}} reference: {exc.message}") from None


# Every key of a [transform:NAME] section; `etc/mirrord.conf` documents them.
TRANSFORM_KEYS = ("topics", "filter", "sample", "key", "value", "drop.headers")


def _transform(name: str, values: Mapping[str, str], path: Path) -> Transform:
    """One [transform:NAME] section; its expressions are checked by Spark later (pipeline.check_transforms)."""
    section = f"[{transforms.SECTION_PREFIX}{name}]"
    flow_name(name, Origin(str(path), section))
    for key in values:
        if key not in TRANSFORM_KEYS:
            raise ConfigError(path, f"{section} {key}", f"unknown setting (expected {', '.join(TRANSFORM_KEYS)})")
    if not values.get("topics", "").strip():
        raise ConfigError(path, f"{section} topics", "required: a regex of the source topics it applies to")
    origin = lambda key: Origin(str(path), f"{section} {key}")  # noqa: E731
    text = {k: values.get(k, "").strip() for k in TRANSFORM_KEYS}
    if not any(text[k] for k in TRANSFORM_KEYS if k != "topics"):
        raise ConfigError(path, section, "does nothing: set filter, sample, key, value or drop.headers")
    sample = 1.0
    if text["sample"]:
        try:
            sample = transforms.parse_sample(text["sample"])
        except ValueError as exc:
            raise origin("sample").error(str(exc)) from None
    return Transform(name=name, topics=regex(text["topics"], origin("topics")), filter=text["filter"],
                     sample=sample, key=text["key"], value=text["value"],
                     drop_headers=optional_regex(text["drop.headers"], origin("drop.headers")))


def read_transforms(parser: configparser.ConfigParser, path: Path) -> tuple[Transform, ...]:
    """Taken as written, without ${...} interpolation: JSON paths in Spark SQL start with `$`."""
    return tuple(_transform(section.removeprefix(transforms.SECTION_PREFIX),
                            section_settings(parser, section, path, TRANSFORM_KEYS.__contains__, raw=True), path)
                 for section in parser.sections() if section.startswith(transforms.SECTION_PREFIX))
