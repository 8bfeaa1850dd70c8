# Benchmark: mirrord against MirrorMaker 2 (run twice: tasks.max = partitions as `mm2`, = num.streams as
# `mm2-streams`; mirrord is compared with the better of the two), MirrorMaker 1, kcat and the brokers' own limit.
# `make bench` runs everything and regenerates the tables in BENCHMARKS.md (about 90 min on 2 cores);
# `make bench BENCH_ARGS="--reps 1 --contenders mm2,mm2-streams,mirrord"` narrows it; `make bench-smoke` is the
# quick check.
.PHONY: bench bench-smoke bench-jars

SYSTEM_DEPS += kcat
BENCH_ARGS ?=

# MirrorMaker 2 (4.2) and MirrorMaker 1 (3.9) each in a folder of its own: their jars never share a classpath.
$(JARS)/mm2/.resolved: bench/maven/mm2.pom.xml
	rm -rf $(JARS)/mm2
	mvn -q -f $< dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/$(JARS)/mm2
	touch $@

$(JARS)/mm1/.resolved: bench/maven/mm1.pom.xml
	rm -rf $(JARS)/mm1
	mvn -q -f $< dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/$(JARS)/mm1
	touch $@

bench-jars: $(JARS)/mm2/.resolved $(JARS)/mm1/.resolved

# The smoke test in tests/bench runs inside `make test`, so the test setup brings these jars too.
jars: bench-jars

bench: setup system-deps
	$(PY) -m bench.run $(BENCH_ARGS)

bench-smoke: setup system-deps
	$(PY) -m pytest -q tests/bench $(PYTEST_ARGS)
