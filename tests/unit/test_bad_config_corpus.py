"""A wide corpus of malformed configurations, each through `mirrord --check` as an operator would run it:
exit 78 and exactly one line on stderr naming the file (or flag, or variable), the key and what is wrong.

Run in-process (mirrord.cli.main), so the corpus is fast; the cases only Kafka's Java client can judge
(`java=True`) start its check, a JVM each. Java reads .properties as ISO-8859-1: a byte that is not UTF-8
is a valid character there, not an error; it is an error only where it makes a key Kafka does not know.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.unit.cli_check import run_check

CONF = ("[mirrord]\nwhitelist = orders\nconsumer.config = consumer.properties\n"
        "producer.config = producer.properties\nstate.dir = state\n")
CONSUMER = "bootstrap.servers=127.0.0.1:9\ngroup.id=g\n"
PRODUCER = "bootstrap.servers=127.0.0.1:10\n"


@dataclass(frozen=True)
class Case:
    expected: tuple[str, ...]  # every one in the stderr line
    conf: str | bytes = CONF  # mirrord.conf, or CONF + lines
    consumer: str | bytes = CONSUMER
    producer: str | bytes = PRODUCER
    args: tuple[str, ...] = ("--config", "mirrord.conf")
    env: dict[str, str] = field(default_factory=dict)


MM1 = ("--consumer.config", "consumer.properties", "--producer.config", "producer.properties", "--whitelist", "t")
JAVA = {"lingr", "acks-most", "fetch-bytes-lots", "latin1-key", "jaas-syntax", "jaas-kerberos", "jaas-no-password"}

CASES: dict[str, Case] = {
    # mirrord.conf: INI syntax
    "no-section-header": Case(("mirrord.conf", "line 1", "before any [mirrord] section"), conf="whitelist = x\n"),
    "section-twice": Case(("mirrord.conf", "[mirrord]", "line 6", "appears twice"), conf=CONF + "[mirrord]\n"),
    "key-twice": Case(("mirrord.conf", "whitelist", "line 6", "set twice"), conf=CONF + "whitelist = b\n"),
    "line-without-equals": Case(("mirrord.conf", "line 6", "not a 'key = value' line"), conf=CONF + "num.streams\n"),
    "unclosed-section": Case(("mirrord.conf", "line 1", "before any"), conf="[mirrord\nwhitelist = x\n"),
    "unknown-section": Case(("mirrord.conf", "[kafka]", "unknown section"), conf=CONF + "[kafka]\nacks = all\n"),
    "missing-reference": Case(("mirrord.conf", "whitelist", "bad ${...} reference"),
                              conf=CONF.replace("orders", "${region}-orders")),
    "bare-dollar": Case(("mirrord.conf", "whitelist", "bad ${...} reference"), conf=CONF.replace("orders", "$orders")),
    "not-utf8": Case(("mirrord.conf", "not a readable text file"), conf=CONF.encode() + b"flow = caf\xe9\n"),
    "is-a-directory": Case(("state", "is a directory"), args=("--config", "state")),
    "missing-file": Case(("absent.conf", "file not found"), args=("--config", "absent.conf")),
    # unknown and misspelt keys
    "misspelt-key": Case(("mirrord.conf", "num.stream", "unknown setting", "did you mean num.streams?"),
                         conf=CONF + "num.stream = 2\n"),
    "unknown-key": Case(("mirrord.conf", "colour", "unknown setting in [mirrord]"), conf=CONF + "colour = blue\n"),
    "spark-key-not-spark": Case(("mirrord.conf", "driver.memory", "Spark settings (spark.*) only"),
                                conf=CONF + "[spark]\ndriver.memory = 1g\n"),
    "whitelist-missing": Case(("mirrord.conf", "whitelist", "required"), conf="[mirrord]\nflow = f\n"),
    # wrong types and values in mirrord.conf
    "streams-word": Case(("mirrord.conf", "num.streams", "positive integer", "'three'"),
                         conf=CONF + "num.streams = three\n"),
    "streams-zero": Case(("mirrord.conf", "num.streams", "positive integer"), conf=CONF + "num.streams = 0\n"),
    "streams-float": Case(("mirrord.conf", "num.streams", "positive integer"), conf=CONF + "num.streams = 1.5\n"),
    "interval-negative": Case(("mirrord.conf", "offset.commit.interval.ms", "positive integer"),
                              conf=CONF + "offset.commit.interval.ms = -5\n"),
    "abort-maybe": Case(("mirrord.conf", "abort.on.send.failure", "true or false"),
                        conf=CONF + "abort.on.send.failure = maybe\n"),
    "listen-no-port": Case(("mirrord.conf", "metrics.listen", "HOST:PORT"), conf=CONF + "metrics.listen = nowhere\n"),
    "listen-port-range": Case(("mirrord.conf", "metrics.listen", "HOST:PORT"), conf=CONF + "metrics.listen = :99999\n"),
    "policy-unknown": Case(("mirrord.conf", "replication.policy", "'identity' or 'prefix'"),
                           conf=CONF + "replication.policy = mirror\n"),
    "flow-bad-name": Case(("mirrord.conf", "flow", "letters, digits"), conf=CONF + "flow = east/west\n"),
    "flow-too-long": Case(("mirrord.conf", "flow", "at most 150 characters"), conf=CONF + "flow = " + "f" * 151 + "\n"),
    "alias-space": Case(("mirrord.conf", "source.alias", "letters, digits"), conf=CONF + "source.alias = us east\n"),
    "max-offsets-word": Case(("mirrord.conf", "max.offsets.per.trigger", "positive integer"),
                             conf=CONF + "max.offsets.per.trigger = lots\n"),
    "sync-sometimes": Case(("mirrord.conf", "sync.group.offsets.enabled", "true or false"),
                           conf=CONF + "sync.group.offsets.enabled = sometimes\n"),
    "groups-bad-regex": Case(("mirrord.conf", "groups", "invalid regular expression"), conf=CONF + "groups = (\n"),
    "whitelist-bad-regex": Case(("mirrord.conf", "whitelist", "invalid regular expression"),
                                conf=CONF.replace("orders", "prd-(a|b")),
    "whitelist-empty": Case(("mirrord.conf", "whitelist", "must not be empty"), conf=CONF.replace("orders", '""')),
    "stall-zero": Case(("mirrord.conf", "stall.timeout.ms", "positive integer"), conf=CONF + "stall.timeout.ms = 0\n"),
    "separator-empty": Case(("mirrord.conf", "replication.policy.separator", "must not be empty"),
                            conf=CONF + "replication.policy.separator =\n"),
    "consumer-config-missing": Case(("nope.properties", "file not found"),
                                    conf=CONF.replace("= consumer.properties", "= nope.properties")),
    # conflicting settings
    "prefix-same-aliases": Case(("mirrord.conf", "target.alias", "must differ from source.alias"),
                                conf=CONF + "replication.policy = prefix\nsource.alias = dc\ntarget.alias = dc\n"),
    "identity-same-cluster": Case(("producer.properties", "bootstrap.servers", "copied onto itself"),
                                  producer="bootstrap.servers=127.0.0.1:9\n"),
    "idempotence-weak-acks": Case(("producer.properties", "acks", "enable.idempotence=true needs acks=all"),
                                  producer=PRODUCER + "enable.idempotence=true\nacks=1\n"),
    "acks-reordered": Case(("producer.properties", "max.in.flight.requests.per.connection",
                            "must be 1 without the idempotent producer"),
                           producer=PRODUCER + "enable.idempotence=false\nmax.in.flight.requests.per.connection=5\n"),
    "auto-commit-on": Case(("consumer.properties", "enable.auto.commit", "mirrord commits offsets"),
                           consumer=CONSUMER + "enable.auto.commit=true\n"),
    # .properties files
    "no-bootstrap": Case(("consumer.properties", "bootstrap.servers", "required"), consumer="group.id=g\n"),
    "empty-bootstrap": Case(("producer.properties", "bootstrap.servers", "required"), producer="bootstrap.servers=\n"),
    "bad-unicode-escape": Case(("consumer.properties", "not a readable Java properties file"),
                               consumer=CONSUMER + "client.id=\\u00zz\n"),
    "offset-reset-none": Case(("consumer.properties", "auto.offset.reset", "earliest or latest"),
                              consumer=CONSUMER + "auto.offset.reset=none\n"),
    "string-deserializer": Case(("consumer.properties", "value.deserializer", "copied as bytes"),
                                consumer=CONSUMER + "value.deserializer=org.apache.kafka.common.serialization."
                                                    "StringDeserializer\n"),
    "consumer-interceptor": Case(("consumer.properties", "interceptor.classes", "consumer interceptors"),
                                 consumer=CONSUMER + "interceptor.classes=com.example.Audit\n"),
    "transactional-id": Case(("producer.properties", "transactional.id", "names each stream's transactions itself"),
                             producer=PRODUCER + "transactional.id=m1\n"),
    "mirrord-key-in-producer": Case(("producer.properties", "mirrord.offset.lag.max", "mirrord's own"),
                                    producer=PRODUCER + "mirrord.offset.lag.max=5\n"),
    "jks-truststore": Case(("producer.properties", "ssl.truststore.type", "PEM trust stores only"),
                           producer=PRODUCER + "ssl.truststore.location=/etc/ssl/kafka.jks\n"),
    "jks-keystore": Case(("consumer.properties", "ssl.keystore.type", "PKCS12 keystores only"),
                         consumer=CONSUMER + "ssl.keystore.location=/etc/ssl/kafka.jks\n"),
    "security-protocol-typo": Case(("consumer.properties", "security.protocol", "Invalid value"),
                                   consumer=CONSUMER + "security.protocol=TLS\n"),
    "lingr": Case(("producer.properties", "lingr.ms", "not a property of Kafka's Java producer"),
                  producer=PRODUCER + "lingr.ms=5\n"),
    "acks-most": Case(("producer.properties", "acks", "Invalid value most"), producer=PRODUCER + "acks=most\n"),
    "fetch-bytes-lots": Case(("consumer.properties", "fetch.max.bytes", "Invalid value lots"),
                             consumer=CONSUMER + "fetch.max.bytes=lots\n"),
    "latin1-key": Case(("consumer.properties", "client.\u00efd", "not a property of Kafka's Java consumer"),
                       consumer=CONSUMER.encode() + b"client.\xefd=x\n"),
    "jaas-syntax": Case(("consumer.properties", "sasl.jaas.config", "not a valid JAAS configuration"),
                        consumer=CONSUMER + "sasl.jaas.config=org.example.Login required password=\"x\"\n"),
    "jaas-kerberos": Case(("consumer.properties", "sasl.jaas.config", "PlainLoginModule and ScramLoginModule only"),
                          consumer=CONSUMER + "sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule "
                                              "required useKeyTab=true;\n"),
    # OAUTHBEARER runs in Spark's Java clients, but mirrord's admin client (librdkafka) has no equivalent of
    # the Java login module and its callback handler: refused at start, not half-supported.
    "jaas-oauthbearer": Case(("producer.properties", "sasl.jaas.config", "PlainLoginModule and ScramLoginModule only"),
                             producer=PRODUCER + "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
                                                 "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer."
                                                 "OAuthBearerLoginModule required clientId=\"c\" "
                                                 "clientSecret=\"s3cr3t-oauth\";\n"),
    "jaas-no-password": Case(("consumer.properties", "sasl.jaas.config", "needs the username and password"),
                             consumer=CONSUMER + "sasl.jaas.config=org.apache.kafka.common.security.plain."
                                                 "PlainLoginModule required username=\"u\";\n"),
    # flags
    "flag-streams-zero": Case(("--num.streams", "positive integer"), args=(*MM1, "--num.streams", "0")),
    "flag-bad-regex": Case(("--whitelist", "invalid regular expression"), args=(*MM1[:-1], "a(")),
    "flag-listen": Case(("--metrics.listen", "HOST:PORT"), args=(*MM1, "--metrics.listen", "x")),
    "flag-unknown": Case(("command line", "--num-streams", "unrecognized arguments"),
                         args=(*MM1, "--num-streams", "2")),
    "flag-abort-maybe": Case(("--abort.on.send.failure", "true or false"),
                             args=(*MM1, "--abort.on.send.failure=maybe")),
    "flag-without-value": Case(("command line", "--whitelist", "expected one argument"), args=(*MM1[:-1],)),
    "flag-line-break": Case(("command line", "unrecognized arguments", "a\\nb"), args=(*MM1, "a\nb")),
    "flag-policy": Case(("--replication.policy", "'identity' or 'prefix'"), args=(*MM1, "--replication.policy", "x")),
    # environment variables
    "env-streams": Case(("environment", "MIRRORD_NUM_STREAMS", "positive integer"),
                        env={"MIRRORD_NUM_STREAMS": "lots"}),
    "env-whitelist": Case(("environment", "MIRRORD_WHITELIST", "invalid regular expression"),
                          env={"MIRRORD_WHITELIST": "("}),
    "env-listen": Case(("environment", "MIRRORD_METRICS_LISTEN", "HOST:PORT"), env={"MIRRORD_METRICS_LISTEN": "x:y"}),
    "env-interval": Case(("environment", "MIRRORD_OFFSET_COMMIT_INTERVAL_MS", "positive integer"),
                         env={"MIRRORD_OFFSET_COMMIT_INTERVAL_MS": "0"}),
    "env-prefix-aliases": Case(("environment", "MIRRORD_TARGET_ALIAS", "must differ from source.alias"),
                               env={"MIRRORD_REPLICATION_POLICY": "prefix", "MIRRORD_SOURCE_ALIAS": "dc",
                                    "MIRRORD_TARGET_ALIAS": "dc"}),
}


@pytest.fixture
def check(tmp_path: Path, monkeypatch, capsys):
    """`mirrord --check ARGS` in tmp_path with a case's files and environment: (exit status, stderr lines)."""
    def run(case: Case) -> tuple[int, list[str]]:
        for name, body in (("mirrord.conf", case.conf), ("consumer.properties", case.consumer),
                           ("producer.properties", case.producer)):
            (tmp_path / name).write_bytes(body if isinstance(body, bytes) else body.encode())
        (tmp_path / "state").mkdir()
        status = run_check(tmp_path, case.args, case.env, monkeypatch)
        return status, capsys.readouterr().err.splitlines()
    return run


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_malformed_configuration_is_exit_78_and_one_line_naming_where_what_and_why(check, name):
    status, lines = check(CASES[name])
    assert status == 78, lines
    assert len(lines) == 1 and lines[0].startswith("mirrord: "), lines
    for part in CASES[name].expected:
        assert part in lines[0], f"{part!r} not in {lines[0]!r}"
    assert "s3cr3t" not in lines[0]  # the corpus's passwords and client secrets never appear


def test_the_corpus_is_wide():
    assert len(CASES) >= 40
    assert JAVA <= CASES.keys()


def test_the_valid_base_of_the_corpus_passes(check):
    assert check(Case(()))[0] == 0
