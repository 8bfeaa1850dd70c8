from pathlib import Path

import pytest

from mirrord.errors import ConfigError
from mirrord.settings.config import ClientConfig
from mirrord.settings.translate import JaasLogin, admin_settings, check_librdkafka, consumer_to_spark, sink_options

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def cfg(**props) -> ClientConfig:
    return ClientConfig(Path("/etc/mirrord/x.properties"), {"bootstrap.servers": "b:9092", **props})


def test_consumer_properties_become_spark_source_options():
    src = consumer_to_spark(cfg(**{"group.id": "g", "auto.offset.reset": "latest", "security.protocol": "SASL_SSL",
                                   "enable.auto.commit": "false", "exclude.internal.topics": "true"}))
    assert src.starting == "latest"
    assert src.spark_options == {"kafka.bootstrap.servers": "b:9092", "kafka.security.protocol": "SASL_SSL",
                                 "kafka.isolation.level": "read_committed", "kafka.fetch.min.bytes": "65536",
                                 "kafka.fetch.max.wait.ms": "10"}


@pytest.mark.parametrize("own", [{"fetch.min.bytes": "1"}, {"fetch.max.wait.ms": "500"}])
def test_a_fetch_waits_up_to_10_ms_for_64_kib_unless_consumer_properties_set_either_key(own):
    """A fetch answered at its first byte made thousands of fetches a second (docs/decisions.md §9); a file that
    sets either key keeps the Java consumer's default for the other: never 64 KiB waited for 500 ms."""
    options = consumer_to_spark(cfg(**own)).spark_options
    fetch = {key: value for key, value in options.items() if key.startswith("kafka.fetch.")}
    assert fetch == {f"kafka.{key}": value for key, value in own.items()}


def test_the_source_is_read_committed_unless_consumer_properties_say_otherwise():
    assert consumer_to_spark(cfg()).spark_options["kafka.isolation.level"] == "read_committed"
    chosen = consumer_to_spark(cfg(**{"isolation.level": "READ_UNCOMMITTED"}))
    assert chosen.spark_options["kafka.isolation.level"] == "read_uncommitted"


@pytest.mark.parametrize(("key", "value", "message"), [
    ("enable.auto.commit", "true", "mirrord commits offsets"),
    ("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer", "copied as bytes"),
    ("interceptor.classes", "com.example.Audit", "does not support consumer interceptors"),
    ("auto.offset.reset", "none", "must be earliest or latest"),
    ("isolation.level", "serializable", "must be read_committed or read_uncommitted"),
])
def test_consumer_keys_spark_cannot_take_are_refused_with_file_and_key(key, value, message):
    with pytest.raises(ConfigError) as exc:
        consumer_to_spark(cfg(**{key: value}))
    assert str(exc.value).startswith(f"/etc/mirrord/x.properties: {key}: ") and message in str(exc.value)


def test_producer_properties_pass_to_the_writers_producers_with_safe_defaults_and_their_own_interceptors():
    options, ignored = sink_options(cfg(**{
        "delivery.timeout.ms": "60000", "compression.type": "lz4", "partitioner.class": "x.Partitioner",
        "interceptor.classes": "com.example.Audit", "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
        "key.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer"}))
    assert options == {
        "kafka.bootstrap.servers": "b:9092", "kafka.delivery.timeout.ms": "60000", "kafka.compression.type": "lz4",
        "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN",
        "kafka.acks": "all", "kafka.enable.idempotence": "true", "kafka.linger.ms": "5", "kafka.batch.size": "65536",
        "kafka.max.block.ms": "9223372036854775807",  # the file's delivery.timeout.ms wins; the outage default stays
        "kafka.interceptor.classes": "com.example.Audit"}
    assert "partitioner.class" in ignored


def test_by_default_the_sink_waits_for_an_unreachable_target_instead_of_failing_the_batch():
    options, _ = sink_options(cfg())
    assert options["kafka.delivery.timeout.ms"] == "2147483647"
    assert options["kafka.max.block.ms"] == "9223372036854775807"


def test_without_idempotence_one_request_in_flight_keeps_order():
    options, _ = sink_options(cfg(acks="1"))
    assert options["kafka.enable.idempotence"] == "false"
    assert options["kafka.max.in.flight.requests.per.connection"] == "1"


@pytest.mark.parametrize(("key", "value", "message"), [
    ("value.serializer", "org.apache.kafka.common.serialization.StringSerializer", "copied as bytes"),
    ("transactional.id", "m1", "names each stream's transactions itself"),
    ("mirrord.offset.lag.max", "5", "mirrord's own"),
])
def test_producer_keys_the_sink_cannot_take_are_refused_with_file_and_key(key, value, message):
    with pytest.raises(ConfigError) as exc:
        sink_options(cfg(**{key: value}))
    assert str(exc.value).startswith(f"/etc/mirrord/x.properties: {key}: ") and message in str(exc.value)


@pytest.mark.parametrize("settings", [
    {"enable.idempotence": "false", "max.in.flight.requests.per.connection": "5"},
    {"acks": "1", "max.in.flight.requests.per.connection": "2"},
])
def test_a_producer_that_could_reorder_acknowledgements_is_refused(settings):
    """Offset syncs pair records in acknowledgement order: a retried request landing after its successor
    would pair them wrongly, and a failed-over group could skip records."""
    with pytest.raises(ConfigError, match="x.properties: max.in.flight.requests.per.connection: must be 1 without "
                                          "the idempotent producer"):
        sink_options(cfg(**settings))
    ok, _ = sink_options(cfg(**{"max.in.flight.requests.per.connection": "5"}))  # idempotent: ordered by Kafka
    assert ok["kafka.max.in.flight.requests.per.connection"] == "5"


def test_idempotence_asked_for_with_weak_acks_is_a_config_error():
    with pytest.raises(ConfigError, match="x.properties: acks: enable.idempotence=true needs acks=all"):
        sink_options(cfg(acks="1", **{"enable.idempotence": "true"}))


def test_admin_client_gets_connection_and_security_keys_in_librdkafka_names():
    settings = admin_settings(cfg(**{
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "linger.ms": "5",
        "ssl.truststore.type": "PEM", "ssl.truststore.location": "/etc/mirrord/ca.pem",
        "sasl.jaas.config": f'{SCRAM} required username="mirror" password="s3cret";'}),
        JaasLogin(SCRAM, {"username": "mirror", "password": "s3cret"}))
    assert settings == {"bootstrap.servers": "b:9092", "security.protocol": "SASL_SSL",
                        "sasl.mechanism": "SCRAM-SHA-512", "ssl.ca.location": "/etc/mirrord/ca.pem",
                        "sasl.username": "mirror", "sasl.password": "s3cret",
                        "reconnect.backoff.max.ms": "1000"}  # Java's default, not librdkafka's 10 s
    assert admin_settings(cfg(**{"reconnect.backoff.max.ms": "5000"}))["reconnect.backoff.max.ms"] == "5000"


def test_jks_truststore_is_refused_for_the_admin_client_with_a_way_out():
    with pytest.raises(ConfigError, match="ssl.truststore.type: mirrord's admin client reads PEM"):
        admin_settings(cfg(**{"ssl.truststore.location": "/etc/ssl/kafka.jks"}))


def test_a_bad_admin_value_is_a_config_error_naming_the_key():
    with pytest.raises(ConfigError, match=r"x.properties: security.protocol: "):
        check_librdkafka(cfg(), admin_settings(cfg(**{"security.protocol": "SASL_PLAINTXT"})))


@pytest.mark.parametrize(("login", "message"), [
    (JaasLogin("com.sun.security.auth.module.Krb5LoginModule", {"useKeyTab": "true"}),
     "PlainLoginModule and ScramLoginModule only, not com.sun.security.auth.module.Krb5LoginModule"),
    (JaasLogin(SCRAM, {"username": "mirror"}), "ScramLoginModule needs the username and password options"),
])
def test_a_login_librdkafka_cannot_use_is_a_config_error(login, message):
    with pytest.raises(ConfigError, match="x.properties: sasl.jaas.config: ") as exc:
        admin_settings(cfg(**{"sasl.jaas.config": "as parsed"}), login)
    assert message in str(exc.value)


def test_librdkafka_names_the_files_key_it_refuses_and_hides_secret_values():
    bad_trust = cfg(**{"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                       "ssl.truststore.location": "/nonexistent/ca.pem"})
    with pytest.raises(ConfigError, match=r"x.properties: ssl.truststore.location: .*ssl.ca.location failed"):
        check_librdkafka(bad_trust, admin_settings(bad_trust))
    bad_key = cfg(**{"security.protocol": "SSL", "ssl.keystore.type": "PKCS12", "ssl.keystore.location": "/x.p12",
                     "ssl.keystore.password": "hunter2"})
    with pytest.raises(ConfigError) as exc:
        check_librdkafka(bad_key, admin_settings(bad_key))
    assert "hunter2" not in str(exc.value)
