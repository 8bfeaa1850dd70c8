"""Kafka Java client properties → Spark's Kafka source and sink options, and librdkafka admin settings.

consumer.properties and producer.properties are written for Kafka's Java clients, as
MirrorMaker 1 took them, and Java clients read them: Spark's Kafka source and sink take them as
`kafka.<key>`; the few keys Spark forbids are mapped or refused. mirrord's own AdminClient
(confluent-kafka, for topics, configs and group offsets) gets the connection and security keys,
translated to librdkafka's names. Nothing is dropped silently: keys that have no meaning in a
mirror are returned as `ignored` with the reason, for a warning at start.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from mirrord.errors import ConfigError, MirrordError
from mirrord.settings.config import ClientConfig
from mirrord.settings.redact import dataclass_repr, is_secret, redact

BYTE_ARRAY_DESERIALIZER = "org.apache.kafka.common.serialization.ByteArrayDeserializer"
BYTE_ARRAY_SERIALIZER = "org.apache.kafka.common.serialization.ByteArraySerializer"


@dataclass(frozen=True)
class SourceOptions:
    spark_options: dict[str, str]
    starting: str  # "earliest" or "latest": where a partition with no committed offset starts
    ignored: dict[str, str] = field(default_factory=dict)

    __repr__ = dataclass_repr


@dataclass(frozen=True)
class JaasLogin:
    """A sasl.jaas.config as Kafka's own parser read it (io.mirrord.check.ClientConfigCheck)."""

    module: str
    options: Mapping[str, str]

    __repr__ = dataclass_repr


# Aborted transactions are not data: the Java consumer's default (read_uncommitted) would mirror them as
# committed records (KAFKA-14021). consumer.properties may still say read_uncommitted.
SOURCE_ISOLATION = "read_committed"
# A fetch answered at its first byte (the Java consumer's fetch.min.bytes 1) made each stream's consumer ask the source
# thousands of times a second for a few records each on a fast network, costing the source's brokers and mirrord
# CPU; the broker holds a fetch up to 10 ms for 64 KiB instead (docs/decisions.md §9). A file that sets either key
# keeps the Java consumer's default for the other. A stream that found nothing for a second rests on a second consumer
# whose fetches the broker holds (jvm/: IdlePace, Doorbell), so an idle one does not ask a hundred times a second.
SOURCE_FETCH = {"fetch.min.bytes": "65536", "fetch.max.wait.ms": "10"}


def consumer_to_spark(cfg: ClientConfig) -> SourceOptions:
    """Spark Kafka source options (`kafka.*`) from consumer.properties."""
    options: dict[str, str] = {}
    ignored: dict[str, str] = {}
    starting = "earliest"
    for key, value in cfg.properties.items():
        low = value.strip().lower()
        if key == "auto.offset.reset":
            if low not in ("earliest", "latest"):
                raise cfg.error(key, f"must be earliest or latest, got {value!r}")
            starting = low
        elif key == "group.id":
            continue  # mirrord commits the mirrored offsets under this group itself
        elif key == "enable.auto.commit":
            if low != "false":
                raise cfg.error(key, "mirrord commits offsets after each mirrored batch; set false or remove it")
        elif key in ("key.deserializer", "value.deserializer"):
            if value.strip() != BYTE_ARRAY_DESERIALIZER:
                raise cfg.error(key, f"records are copied as bytes; only {BYTE_ARRAY_DESERIALIZER} is accepted")
        elif key == "interceptor.classes":
            raise cfg.error(key, "Spark's Kafka source does not support consumer interceptors")
        elif key == "exclude.internal.topics":
            if low != "true":
                raise cfg.error(key, "internal topics are never mirrored; set true or remove it")
        elif key == "isolation.level":
            if low not in ("read_committed", "read_uncommitted"):
                raise cfg.error(key, f"must be read_committed or read_uncommitted, got {value!r}")
            options[f"kafka.{key}"] = low
        elif key in ("partition.assignment.strategy", "group.instance.id", "auto.commit.interval.ms"):
            ignored[key] = "partitions are assigned by Spark, not by a consumer group"
        else:
            options[f"kafka.{key}"] = value
    options.setdefault("kafka.isolation.level", SOURCE_ISOLATION)
    if not SOURCE_FETCH.keys() & cfg.properties.keys():
        options.update({f"kafka.{key}": value for key, value in SOURCE_FETCH.items()})
    return SourceOptions(options, starting, ignored)


# The producer side is mirrord's writer (jvm/, a Java producer per stream): producer.properties passes through as
# `kafka.<key>`.
# Defaults where mirrord's differ from the Java producer's own; the file wins. acks and idempotence:
# docs/decisions.md §2 (Delivery). linger.ms 5 is the Java clients' default since Kafka 4.0 (the
# connector's 3.9 client still says 0). batch.size 64 KiB, four times Java's, for backfills: set by
# reasoning, not measured on its own (the bench gives every contender 256 KiB). With none of batch.size,
# buffer.memory and linger.ms in the file, the writer sizes batch.size and buffer.memory for each stream's
# partitions instead (io.mirrord.sink.StreamProducers, docs/decisions.md §2).
# An unreachable target is an outage, not a failed batch (docs/decisions.md §5): as Kafka Connect does for its
# source tasks, the producer waits for the target as long as it takes instead of failing the batch.
SINK_DEFAULTS = {"acks": "all", "enable.idempotence": "true", "linger.ms": "5", "batch.size": "65536",
                 "delivery.timeout.ms": "2147483647", "max.block.ms": "9223372036854775807"}
# Keys of the Java producer that mean nothing for a byte-for-byte mirror: accepted with a warning.
NOT_APPLICABLE = {
    "partitioner.class": "mirrord writes each record to its source partition number",
    "partitioner.ignore.keys": "mirrord writes each record to its source partition number",
    "partitioner.adaptive.partitioning.enable": "mirrord writes each record to its source partition number",
    "partitioner.availability.timeout.ms": "mirrord writes each record to its source partition number",
}


def sink_options(cfg: ClientConfig) -> tuple[dict[str, str], dict[str, str]]:
    """The writer's producer options (`kafka.*`) from producer.properties, and the keys accepted but not applied.
    The file's own interceptors (`interceptor.classes`) see records as they are written."""
    options: dict[str, str] = {}
    ignored: dict[str, str] = {}
    for key, value in cfg.properties.items():
        if key in ("key.serializer", "value.serializer"):
            if value.strip() != BYTE_ARRAY_SERIALIZER:
                raise cfg.error(key, f"records are copied as bytes; only {BYTE_ARRAY_SERIALIZER} is accepted")
        elif key == "transactional.id":
            raise cfg.error(key, "mirrord names each stream's transactions itself (delivery = exactly-once in "
                                 "mirrord.conf); remove it")
        elif key.startswith("mirrord."):
            raise cfg.error(key, "the mirrord.* producer keys are mirrord's own; set them in mirrord.conf")
        elif key in NOT_APPLICABLE:
            ignored[key] = NOT_APPLICABLE[key]
        else:
            options[key] = value.strip()
    for key, value in SINK_DEFAULTS.items():
        options.setdefault(key, value)
    acks = options["acks"].lower()
    idempotent = options["enable.idempotence"].lower()
    if idempotent not in ("true", "false"):
        raise cfg.error("enable.idempotence", f"must be true or false, got {options['enable.idempotence']!r}")
    if idempotent == "true" and acks not in ("all", "-1"):
        if "enable.idempotence" in cfg.properties:
            raise cfg.error("acks", f"enable.idempotence=true needs acks=all, got {options['acks']!r}")
        options["enable.idempotence"] = "false"
    if options["enable.idempotence"] == "false":
        options.setdefault("max.in.flight.requests.per.connection", "1")  # keep order across retries
        in_flight = options["max.in.flight.requests.per.connection"]
        if in_flight != "1":  # Kafka's client judges the number itself; any other valid value is above 1
            raise cfg.error("max.in.flight.requests.per.connection",
                            f"must be 1 without the idempotent producer, got {in_flight!r}: a retried request "
                            "could land after the next one, and the offset syncs would pair source and target "
                            "offsets wrongly (a failed-over group could skip records); set 1, or "
                            "enable.idempotence=true with acks=all")
    return {f"kafka.{k}": v for k, v in options.items()}, ignored


# Connection and security settings of Kafka's Java clients that librdkafka (the AdminClient mirrord
# uses for topics, configs and group offsets) knows under the same name.
SAME = frozenset({
    "bootstrap.servers", "client.id", "security.protocol", "sasl.mechanism", "sasl.kerberos.service.name",
    "ssl.key.password", "ssl.keystore.location", "ssl.keystore.password", "ssl.endpoint.identification.algorithm",
    "ssl.cipher.suites", "reconnect.backoff.ms", "reconnect.backoff.max.ms", "metadata.max.age.ms",
    "socket.connection.setup.timeout.ms", "socket.connection.setup.timeout.max.ms", "client.dns.lookup",
    "request.timeout.ms", "sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.scope",
    "sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret",
})

# Keys of the admin settings that come from a differently named key of the file, for errors.
FILE_KEYS = {"ssl.ca.location": "ssl.truststore.location", "sasl.username": "sasl.jaas.config",
             "sasl.password": "sasl.jaas.config"}
# Login modules librdkafka has an equivalent of: their username and password become sasl.username/password.
PASSWORD_LOGINS = frozenset({"org.apache.kafka.common.security.plain.PlainLoginModule",
                             "org.apache.kafka.common.security.scram.ScramLoginModule"})

# Stands for a sasl.jaas.config before Kafka's parser has read it: librdkafka judges the other settings
# against credentials of this shape (their values mean nothing to it until it connects).
SHAPE_OF_A_LOGIN = JaasLogin("org.apache.kafka.common.security.scram.ScramLoginModule",
                             {"username": "username", "password": "password"})


def _jaas(cfg: ClientConfig, login: JaasLogin | None) -> dict[str, str]:
    if login is None:
        raise ValueError(f"{cfg.path}: sasl.jaas.config not parsed by Kafka's client check")
    if login.module not in PASSWORD_LOGINS:
        raise cfg.error("sasl.jaas.config", "mirrord's admin client can use PlainLoginModule and "
                        f"ScramLoginModule only, not {login.module}")
    if "username" not in login.options or "password" not in login.options:
        raise cfg.error("sasl.jaas.config", f"{login.module.rsplit('.', 1)[-1]} needs the username and "
                        "password options")
    return {"sasl.username": login.options["username"], "sasl.password": login.options["password"]}


def admin_settings(cfg: ClientConfig, login: JaasLogin | None = None) -> dict[str, str]:
    """librdkafka settings for an AdminClient on the cluster a .properties file describes: its connection
    and security keys, translated from the Java client's names; `login` is its sasl.jaas.config, parsed."""
    props = cfg.properties
    out: dict[str, str] = {}
    truststore_type = props.get("ssl.truststore.type", "JKS").upper()
    keystore_type = props.get("ssl.keystore.type", "JKS").upper()
    for key, value in props.items():
        if key in SAME:
            if key == "ssl.keystore.location" and keystore_type != "PKCS12":
                raise cfg.error("ssl.keystore.type", "mirrord's admin client reads PKCS12 keystores only; "
                                "convert the JKS file")
            out[key] = value
        elif key == "sasl.jaas.config":
            out.update(_jaas(cfg, login))
        elif key == "ssl.truststore.location":
            if truststore_type != "PEM":
                raise cfg.error("ssl.truststore.type", "mirrord's admin client reads PEM trust stores only; "
                                "set ssl.truststore.type=PEM and point ssl.truststore.location at a PEM file")
            out["ssl.ca.location"] = value
    out.setdefault("reconnect.backoff.max.ms", RECONNECT_BACKOFF_MAX_MS)
    return out


# Kafka's Java clients' default; librdkafka's (10 s) saw a cluster back from an outage up to 10 s late
RECONNECT_BACKOFF_MAX_MS = "1000"


# The settings others depend on, in the order librdkafka accepts them one at a time (a SASL protocol
# needs its mechanism, SCRAM needs its credentials, a keystore its password); then every other key, in the
# file's order.
_PREREQUISITES = ("sasl.username", "sasl.password", "sasl.mechanism", "security.protocol", "ssl.keystore.password",
                  "ssl.key.password")


def check_librdkafka(cfg: ClientConfig, settings: Mapping[str, str]) -> None:
    """Let librdkafka validate the admin client's keys and values now, so a typo is a config error, not a crash.

    librdkafka says only _INVALID_ARG and a sentence; the key is the one whose addition it refuses."""
    from confluent_kafka import KafkaError, KafkaException, Producer

    first = [k for k in _PREREQUISITES if k in settings]
    keys = first + [k for k in settings if k not in first and k != "bootstrap.servers"]
    offline: dict[str, str] = {"log_level": "0"}  # what it refuses comes as the exception; no stray lines
    for key in keys:
        offline[key] = settings[key]
        try:
            Producer(offline).flush(0)
        except KafkaException as exc:
            err = exc.args[0]
            if err.code() != KafkaError._INVALID_ARG:
                raise MirrordError(f"{cfg.path}: librdkafka cannot check the settings: {redact(err.str())}") from None
            name = FILE_KEYS.get(key, key)
            reason = "invalid value (not shown: it may be a secret)" if is_secret(name) else redact(err.str())
            raise ConfigError(cfg.path, name, reason) from None
        except (TypeError, ValueError) as exc:
            raise ConfigError(cfg.path, FILE_KEYS.get(key, key), redact(str(exc))) from None
