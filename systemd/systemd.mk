# systemd units, the container harness and the observability files.
# Included by the top Makefile; `make test` runs tests/system and tests/observability with the rest.

SYSTEM_DEPS += systemd systemd-container debootstrap prometheus

.PHONY: systemd-check rules-check system-test observability-test

# Static checks of the units: `systemd-analyze verify` clean and exposure score <= 2.5.
systemd-check: setup system-deps
	$(PY) -m pytest -q tests/system/test_units_static.py $(PYTEST_ARGS)

# promtool check rules + promtool test rules.
rules-check: system-deps
	promtool check rules etc/prometheus/mirrord-alerts.yml
	promtool test rules etc/prometheus/mirrord-alerts.test.yml

# The units under a real systemd booted with systemd-nspawn (needs root).
system-test: setup system-deps
	$(PY) -m pytest -q tests/system $(PYTEST_ARGS)

# Prometheus rules and a real Prometheus server scraping a live mirrord.
observability-test: setup system-deps
	$(PY) -m pytest -q tests/observability $(PYTEST_ARGS)
