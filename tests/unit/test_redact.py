"""The one redaction: secrets out of reprs, text, log lines, STATUS lines and metric labels."""

from __future__ import annotations

import dataclasses
import logging
import re
from pathlib import Path

import pytest

from mirrord.cli import RedactingFormatter
from mirrord.settings import redact as redaction
from mirrord.settings.config import ClientConfig, Settings
from mirrord.settings.flow import Flow
from mirrord.settings.policy import make_policy
from mirrord.settings.redact import HIDDEN, redact
from mirrord.settings.translate import JaasLogin, SourceOptions, sink_options
from mirrord.spark.session import spark_conf

JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="mirror" password="Pa55-w0rd";'
SECRETS = {"sasl.jaas.config": JAAS, "ssl.key.password": "k3y-pass", "ssl.keystore.password": "st0re-pass",
           "ssl.truststore.password": "tru5t-pass", "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----abc",
           "sasl.password": "l1brd-pass", "sasl.oauthbearer.client.secret": "0auth-secret"}
VALUES = ["Pa55-w0rd", "k3y-pass", "st0re-pass", "tru5t-pass", "BEGIN PRIVATE KEY", "l1brd-pass", "0auth-secret"]


def client(**extra) -> ClientConfig:
    return ClientConfig(Path("/etc/mirrord/producer.properties"), {"bootstrap.servers": "b:9092", **SECRETS, **extra})


def settings() -> Settings:
    return Settings(flow="f", consumer=client(), producer=client(), whitelist="t", num_streams=1, batch_interval_ms=1,
                    abort_on_send_failure=True, state_root=Path("/s"), metrics_listen=None,
                    replication_policy="identity", source_alias="s", target_alias="t", separator=".",
                    spark_master="local[1]", max_offsets_per_trigger=None, stall_timeout_ms=1,
                    spark_conf={"spark.ssl.keyPassword": "sp4rk-pass"})


def assert_no_secret(text: str) -> None:
    for value in [*VALUES, "sp4rk-pass"]:
        assert value not in text, text


@pytest.mark.parametrize("key", [*SECRETS, "kafka.sasl.jaas.config", "spark.ssl.keyPassword",
                                 "sasl.oauthbearer.config", "ssl.key.pem"])
def test_kafkas_password_type_keys_are_secret(key):
    assert redaction.is_secret(key)


@pytest.mark.parametrize("key", ["bootstrap.servers", "sasl.mechanism", "security.protocol", "ssl.truststore.type",
                                 "ssl.truststore.location", "ssl.keystore.location", "group.id"])
def test_connection_keys_are_not_secret(key):
    assert not redaction.is_secret(key)


def test_reprs_of_everything_holding_properties_hide_the_secrets():
    s = settings()
    sink, _ = sink_options(s.producer)
    flow = Flow(s, make_policy("identity", "s", "t", "."), "t",
                SourceOptions({f"kafka.{k}": v for k, v in SECRETS.items()}, "earliest"), sink,
                {"sasl.password": "l1brd-pass"}, {"ssl.key.password": "k3y-pass"})
    login = JaasLogin("ScramLoginModule", {"username": "mirror", "password": "Pa55-w0rd"})
    for thing in (s, s.consumer, flow, flow.source_options, login):
        text = repr(thing)
        assert_no_secret(text)
        assert HIDDEN in text and "bootstrap.servers" in repr(s.consumer)


def test_text_loses_key_value_pairs_jaas_passwords_and_every_remembered_secret():
    redaction.remember_secrets({"sasl.jaas.config": 'x.PlainLoginModule required username="u" password="rem3mbered";'})
    text = redact(f"Map(kafka.sasl.jaas.config -> {JAAS}, kafka.acks -> all) {{'ssl.key.password': 'k3y-pass'}} "
                  "ssl.truststore.password=tru5t-pass; login failed for rem3mbered")
    assert_no_secret(text)
    assert "rem3mbered" not in text and "kafka.acks -> all" in text


def test_an_error_naming_a_secret_key_keeps_its_reason():
    assert redact("producer.properties: sasl.jaas.config: needs the username and password options") == \
        "producer.properties: sasl.jaas.config: needs the username and password options"


def test_log_lines_go_through_the_redaction():
    redaction.remember(["l0gged-secret"])
    record = logging.LogRecord("mirrord", logging.ERROR, __file__, 1, "cannot connect with %s", ("l0gged-secret",),
                               None)
    assert RedactingFormatter("%(message)s").format(record) == f"cannot connect with {HIDDEN}"


def test_sparks_redaction_regex_covers_every_option_mirrord_passes_to_spark():
    s = settings()
    regex = re.compile(spark_conf(s, [])["spark.redaction.regex"])
    sink, _ = sink_options(s.producer)
    secret_options = [k for k in sink if redaction.is_secret(k)]
    assert "kafka.sasl.jaas.config" in secret_options
    assert all(regex.search(k) for k in secret_options + ["spark.ssl.keyPassword", "fs.s3a.access.key"])
    assert not regex.search("kafka.bootstrap.servers")


def test_an_operators_own_redaction_regex_is_kept_beside_mirrords():
    s = dataclasses.replace(settings(), spark_conf={"spark.redaction.regex": "jdbc[.]url"})
    regex = re.compile(spark_conf(s, [])["spark.redaction.regex"])
    assert regex.search("kafka.sasl.jaas.config") and regex.search("jdbc.url")
