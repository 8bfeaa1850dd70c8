"""Kafka Java client properties → Spark Kafka source options and librdkafka (confluent-kafka) settings.

consumer.properties and producer.properties are written for Kafka's Java clients, as
MirrorMaker 1 took them. The source side runs in Spark's Java consumer, so most keys pass
through as `kafka.<key>`; the few Spark forbids are mapped or refused. The target side is a
librdkafka producer: keys are renamed where librdkafka names them differently, and refused with
the reason where librdkafka cannot do what the key asks. Nothing is dropped silently: keys that
have no meaning in a mirror are returned as `ignored` with the reason, for a warning at start.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from mirrord.config import ClientConfig
from mirrord.errors import ConfigError

BYTE_ARRAY_DESERIALIZER = "org.apache.kafka.common.serialization.ByteArrayDeserializer"
BYTE_ARRAY_SERIALIZER = "org.apache.kafka.common.serialization.ByteArraySerializer"
SECRET_KEY = re.compile(r"password|secret|jaas|token|credential", re.IGNORECASE)


def redact(props: Mapping[str, str]) -> dict[str, str]:
    """A copy safe to log: values of keys that may hold secrets are replaced."""
    return {k: ("[hidden]" if SECRET_KEY.search(k) else v) for k, v in props.items()}


@dataclass(frozen=True)
class SourceOptions:
    spark_options: dict[str, str]
    starting: str  # "earliest" or "latest": where a partition with no committed offset starts
    ignored: dict[str, str] = field(default_factory=dict)


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
        elif key in ("partition.assignment.strategy", "group.instance.id", "auto.commit.interval.ms"):
            ignored[key] = "partitions are assigned by Spark, not by a consumer group"
        else:
            options[f"kafka.{key}"] = value
    return SourceOptions(options, starting, ignored)


# Java producer keys that librdkafka knows under the same name with the same meaning.
SAME = frozenset({
    "bootstrap.servers", "client.id", "acks", "enable.idempotence", "compression.type", "linger.ms",
    "batch.size", "retries", "retry.backoff.ms", "retry.backoff.max.ms", "request.timeout.ms",
    "max.in.flight.requests.per.connection", "security.protocol", "sasl.mechanism",
    "sasl.kerberos.service.name", "ssl.key.password", "ssl.keystore.location", "ssl.keystore.password",
    "ssl.endpoint.identification.algorithm", "ssl.cipher.suites", "reconnect.backoff.ms",
    "reconnect.backoff.max.ms", "metadata.max.age.ms", "socket.connection.setup.timeout.ms",
    "socket.connection.setup.timeout.max.ms", "connections.max.idle.ms", "client.dns.lookup",
    "compression.level", "transaction.timeout.ms", "sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.scope",
    "sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret",
})
RENAMED = {
    "delivery.timeout.ms": "message.timeout.ms",
    "max.request.size": "message.max.bytes",
    "send.buffer.bytes": "socket.send.buffer.bytes",
    "receive.buffer.bytes": "socket.receive.buffer.bytes",
}
# Keys of the Java client that mean nothing for a byte-for-byte mirror: accepted with a warning.
NOT_APPLICABLE = {
    "partitioner.class": "mirrord writes each record to its source partition number",
    "partitioner.ignore.keys": "mirrord writes each record to its source partition number",
    "max.block.ms": "mirrord waits for buffer space instead of failing the send",
    "metric.reporters": "mirrord exports Prometheus metrics itself",
    "metrics.recording.level": "mirrord exports Prometheus metrics itself",
}
# librdkafka defaults that differ from the Java producer's; set unless the file says otherwise.
JAVA_DEFAULTS = {"message.timeout.ms": "120000", "linger.ms": "5", "batch.size": "16384"}

# librdkafka reports some keys by its own alias; errors name the key as the file spells it.
LIBRDKAFKA_ALIASES = {"request.required.acks": "acks", "queue.buffering.max.ms": "linger.ms",
                      "enable.idempotence": "enable.idempotence", "compression.codec": "compression.type"}

JAAS = re.compile(r"(\w+)\s*=\s*\"((?:[^\"\\]|\\.)*)\"")


def _jaas(cfg: ClientConfig, value: str) -> dict[str, str]:
    if "PlainLoginModule" not in value and "ScramLoginModule" not in value:
        raise cfg.error("sasl.jaas.config", "only PlainLoginModule and ScramLoginModule can be used by the producer")
    fields = dict(JAAS.findall(value))
    if "username" not in fields or "password" not in fields:
        raise cfg.error("sasl.jaas.config", "needs username=\"...\" and password=\"...\"")
    return {"sasl.username": fields["username"], "sasl.password": fields["password"]}


def java_to_librdkafka(cfg: ClientConfig, *, keys: frozenset[str] | None = None) -> tuple[dict[str, str], dict]:
    """librdkafka settings from Java client properties, and the keys accepted but not applied.

    `keys` restricts the translation to connection and security settings (for admin clients
    built from consumer.properties, whose other keys go to Spark's consumer).
    """
    props = cfg.properties
    out: dict[str, str] = {}
    ignored: dict[str, str] = {}
    truststore_type = props.get("ssl.truststore.type", "JKS").upper()
    keystore_type = props.get("ssl.keystore.type", "JKS").upper()
    for key, value in props.items():
        if keys is not None and key not in keys and not key.startswith(("ssl.", "sasl.", "security.")):
            continue
        if key in SAME:
            if key == "ssl.keystore.location" and keystore_type != "PKCS12":
                raise cfg.error("ssl.keystore.type", "the producer reads PKCS12 keystores only; convert the JKS file")
            out[key] = value
        elif key in RENAMED:
            out[RENAMED[key]] = value
        elif key == "buffer.memory":
            out["queue.buffering.max.kbytes"] = str(max(1, int(value) // 1024)) if value.isdigit() else value
        elif key == "sasl.jaas.config":
            out.update(_jaas(cfg, value))
        elif key == "ssl.truststore.location":
            if truststore_type != "PEM":
                raise cfg.error("ssl.truststore.type", "the producer reads PEM trust stores only; "
                                "set ssl.truststore.type=PEM and point ssl.truststore.location at a PEM file")
            out["ssl.ca.location"] = value
        elif key in ("ssl.truststore.type", "ssl.keystore.type", "ssl.truststore.password"):
            continue
        elif key in ("key.serializer", "value.serializer"):
            if value.strip() != BYTE_ARRAY_SERIALIZER:
                raise cfg.error(key, f"records are copied as bytes; only {BYTE_ARRAY_SERIALIZER} is accepted")
        elif key in NOT_APPLICABLE:
            ignored[key] = NOT_APPLICABLE[key]
        elif key == "group.id" or keys is not None:
            continue
        else:
            out[key] = value  # librdkafka's own name, or unknown: librdkafka validates it at start
    return out, ignored


ADMIN_KEYS = frozenset({"bootstrap.servers", "client.id", "client.dns.lookup", "request.timeout.ms",
                        "reconnect.backoff.ms", "reconnect.backoff.max.ms", "metadata.max.age.ms"})


def admin_settings(cfg: ClientConfig) -> dict[str, str]:
    """Connection and security settings for an AdminClient on the cluster a file describes."""
    settings, _ = java_to_librdkafka(cfg, keys=ADMIN_KEYS)
    return settings


def producer_settings(cfg: ClientConfig) -> tuple[dict[str, str], dict[str, str]]:
    """The target producer: acks=all and idempotence unless the file says otherwise (DESIGN 4)."""
    settings, ignored = java_to_librdkafka(cfg)
    for key, value in JAVA_DEFAULTS.items():
        settings.setdefault(key, value)
    settings.setdefault("acks", "all")
    if settings["acks"] in ("all", "-1"):
        settings.setdefault("enable.idempotence", "true")
    elif settings.get("enable.idempotence", "false") == "true":
        raise cfg.error("acks", f"enable.idempotence=true needs acks=all, got {settings['acks']!r}")
    if settings.get("enable.idempotence", "false") != "true":
        settings.setdefault("max.in.flight.requests.per.connection", "1")  # keep order across retries
    return settings, ignored


def check_librdkafka(cfg: ClientConfig, settings: Mapping[str, str]) -> None:
    """Let librdkafka validate every key and value now, so a typo is a config error, not a crash later."""
    from confluent_kafka import KafkaException, Producer

    offline = {**{k: v for k, v in settings.items() if k != "bootstrap.servers"}, "log_level": "3"}
    try:
        Producer(offline)
    except KafkaException as exc:
        text = str(exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else exc)
        match = re.search(r'property "([^"]+)"', text) or re.search(r'"([^"]+)"', text)
        key = match.group(1) if match else None
        key = LIBRDKAFKA_ALIASES.get(key, key)
        if key not in cfg.properties:
            key = next((k for k, v in RENAMED.items() if v == key and k in cfg.properties), key)
        reason = "not a property known to the producer" if "No such configuration" in text else text
        if key and SECRET_KEY.search(key):
            reason = "invalid value (not shown: it may be a secret)"
        raise ConfigError(cfg.path, key, reason) from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(cfg.path, None, str(exc)) from None
