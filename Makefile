# mirrord — every target sets up what it needs (virtualenv, jars, Debian packages) on first use.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
JARS := .cache/jars
SPARK_VERSION := 4.2.0
KAFKA_VERSION := 4.2.0

.PHONY: all setup jars jvm-test test unit demo lint clean distclean

all: test

# Python environment: pinned pyspark, confluent-kafka, ... and mirrord itself (editable).
$(VENV)/.installed: setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[test]'
	touch $@

# Jars from Maven Central into a gitignored cache; reused on the next run.
$(JARS)/spark/.resolved: build/maven/spark-kafka.pom.xml
	mvn -q -f build/maven/spark-kafka.pom.xml dependency:copy-dependencies -DincludeScope=runtime \
	  -DincludeArtifactIds=spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2 \
	  -DoutputDirectory=$(CURDIR)/$(JARS)/spark
	touch $@

$(JARS)/kafka/.resolved: build/maven/kafka.pom.xml
	mvn -q -f build/maven/kafka.pom.xml dependency:copy-dependencies -DincludeScope=runtime \
	  -DoutputDirectory=$(CURDIR)/$(JARS)/kafka
	touch $@

# mirrord's own jar (jvm/: its source, its writer, the metrics plugin), beside Spark's connector. Its tests run in
# jvm-test, once per `make test`, not again here.
$(JARS)/spark/mirrord-jvm.jar: jvm/pom.xml $(shell find jvm/src -type f 2>/dev/null)
	mvn -q -f jvm/pom.xml package -DskipTests
	mkdir -p $(@D)
	cp jvm/target/mirrord-jvm-0.1.0.jar $@

jars: $(JARS)/spark/.resolved $(JARS)/kafka/.resolved $(JARS)/spark/mirrord-jvm.jar

# The JVM side's unit tests (Surefire), on every `make test`; one summary line when they pass.
jvm-test:
	rm -rf jvm/target/surefire-reports
	mvn -q -f jvm/pom.xml test
	@cat jvm/target/surefire-reports/*.txt | awk '/^Tests run:/ { gsub(",", ""); t += $$3; f += $$5; e += $$7; s += $$9 } \
	  END { printf "jvm: %d tests, %d failures, %d errors, %d skipped\n", t, f, e, s }'

setup: $(VENV)/.installed jars

# The whole test suite, against real Kafka brokers started by the harness: two phases of two pytest lanes at once
# (the integration tests beside those that hold no time bound, then the fault tests beside those that wait:
# tests/lanes.py).
test: setup system-deps jvm-test
	$(PY) -m tests.lanes $(PYTEST_ARGS)

unit: setup
	$(PY) -m pytest -q tests/unit $(PYTEST_ARGS)

# Local source and target brokers, a trickle of records, mirrord between them; Ctrl-C stops all.
demo: setup
	$(PY) -m tests.harness.demo

lint: setup
	$(VENV)/bin/ruff check mirrord tests bench

clean:
	rm -rf build/out dist *.egg-info .pytest_cache

distclean: clean
	rm -rf $(VENV) .cache

# Debian packages the system-level tests need (systemd-nspawn, Prometheus, packaging tools).
SYSTEM_DEPS ?=
# tests/faults/test_partition.py: a network namespace of the test's own (unshare, nsenter, ip)
SYSTEM_DEPS += util-linux iproute2
system-deps:
	@missing=""; for p in $(SYSTEM_DEPS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

# Each area keeps its own targets (and adds to SYSTEM_DEPS) in a file of its own.
-include systemd/systemd.mk packaging/packaging.mk ansible/ansible.mk bench/bench.mk
