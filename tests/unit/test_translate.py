from pathlib import Path

import pytest

from mirrord.config import ClientConfig
from mirrord.errors import ConfigError
from mirrord.translate import check_librdkafka, consumer_to_spark, producer_settings, redact


def cfg(**props) -> ClientConfig:
    return ClientConfig(Path("/etc/mirrord/x.properties"), {"bootstrap.servers": "b:9092", **props})


def test_consumer_properties_become_spark_source_options():
    src = consumer_to_spark(cfg(**{"group.id": "g", "auto.offset.reset": "latest", "security.protocol": "SASL_SSL",
                                   "enable.auto.commit": "false", "exclude.internal.topics": "true"}))
    assert src.starting == "latest"
    assert src.spark_options == {"kafka.bootstrap.servers": "b:9092", "kafka.security.protocol": "SASL_SSL"}


@pytest.mark.parametrize(("key", "value", "message"), [
    ("enable.auto.commit", "true", "mirrord commits offsets"),
    ("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer", "copied as bytes"),
    ("interceptor.classes", "com.example.Audit", "does not support consumer interceptors"),
    ("auto.offset.reset", "none", "must be earliest or latest"),
])
def test_consumer_keys_spark_cannot_take_are_refused_with_file_and_key(key, value, message):
    with pytest.raises(ConfigError) as exc:
        consumer_to_spark(cfg(**{key: value}))
    assert str(exc.value).startswith(f"/etc/mirrord/x.properties: {key}: ") and message in str(exc.value)


def test_producer_defaults_are_safe_and_java_names_are_translated():
    settings, ignored = producer_settings(cfg(**{
        "delivery.timeout.ms": "60000", "max.request.size": "2097152", "buffer.memory": "33554432",
        "partitioner.class": "x.Partitioner", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                            'username="mirror" password="s3cret";'}))
    assert settings["acks"] == "all" and settings["enable.idempotence"] == "true"
    assert settings["message.timeout.ms"] == "60000" and settings["message.max.bytes"] == "2097152"
    assert settings["queue.buffering.max.kbytes"] == "32768"
    assert (settings["sasl.username"], settings["sasl.password"]) == ("mirror", "s3cret")
    assert "partitioner.class" in ignored
    check_librdkafka(cfg(), settings)


def test_without_idempotence_one_request_in_flight_keeps_order():
    settings, _ = producer_settings(cfg(acks="1"))
    assert settings["max.in.flight.requests.per.connection"] == "1"


def test_jks_truststore_is_refused_with_a_way_out():
    with pytest.raises(ConfigError, match="ssl.truststore.type: the producer reads PEM"):
        producer_settings(cfg(**{"ssl.truststore.location": "/etc/ssl/kafka.jks"}))


def test_unknown_producer_key_is_a_config_error_naming_it():
    settings, _ = producer_settings(cfg(**{"lingr.ms": "5"}))
    with pytest.raises(ConfigError, match=r"x.properties: lingr.ms: not a property known to the producer"):
        check_librdkafka(cfg(), settings)


def test_secrets_are_redacted():
    assert redact({"sasl.jaas.config": "pw", "ssl.keystore.password": "pw", "acks": "all"}) == {
        "sasl.jaas.config": "[hidden]", "ssl.keystore.password": "[hidden]", "acks": "all"}
