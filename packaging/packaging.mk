# .deb and .rpm of mirrord, built from the work tree (packaging/build.sh); included by the top Makefile.

SYSTEM_DEPS += python3.11 python3-venv dpkg-dev lintian rpm rpmlint
PKG_VERSION ?= $(shell sed -n 's/^__version__ = "\(.*\)"$$/\1/p' mirrord/__init__.py)

.PHONY: deb rpm packages lintian rpm-lint packaging-test jar-list

# dist/mirrord_<version>_amd64.deb; PKG_VERSION=... overrides the version (upgrade tests).
deb: jars system-deps
	PKG_VERSION=$(PKG_VERSION) packaging/build.sh deb

# dist/mirrord-<version>-1.x86_64.rpm, the same tree as the .deb.
rpm: jars system-deps
	PKG_VERSION=$(PKG_VERSION) packaging/build.sh rpm

packages: deb rpm

# Lintian on the built .deb: errors fail; accepted tags are overridden in packaging/deb/lintian-overrides.
lintian: deb
	lintian --fail-on error dist/mirrord_$(PKG_VERSION)_amd64.deb

# rpmlint on the built .rpm, with the filters of packaging/rpm/mirrord.rpmlintrc.
rpm-lint: rpm
	rpmlint -r packaging/rpm/mirrord.rpmlintrc dist/mirrord-$(subst -,_,$(PKG_VERSION))-1.x86_64.rpm

# The packaging tests alone (build, install into a booted Debian container, upgrade, rpm, molecule).
packaging-test: setup system-deps
	$(PY) -m pytest -q tests/packaging $(PYTEST_ARGS)

# packaging/spark-jars.txt: the pyspark jars the packages keep, those any JVM of a run of the integration
# tests loaded a class from (-Xlog:class+load); after a pyspark upgrade. 15 to 20 minutes.
jar-list: setup
	$(PY) packaging/jar_list.py
