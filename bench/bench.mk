# Benchmark: mirrord against MirrorMaker 2 (run twice: tasks.max = partitions as `mm2`, = num.streams as
# `mm2-streams`; mirrord is compared with the better of the two), MirrorMaker 1, kcat and the brokers' own limit.
# `make bench` runs everything and regenerates the tables in BENCHMARKS.md (about 90 min on 2 cores);
# `make bench BENCH_ARGS="--reps 1 --contenders mm2,mm2-streams,mirrord"` narrows it; `make bench-smoke` is the
# quick check.
# `make bench-scaling` runs the partition-scaling series, one bench run per shape (about 2 h on 2 cores): 12
# partitions (3 repetitions), then 96, 480 and 2,000 partitions and 200 topics × 3 partitions with 20 of the
# stream's topics created while it runs (one repetition each); contenders mm2, mm2-streams, mirrord and
# spark-realtime, workloads backfill-100, backfill-1024 and steady. Each run's raw results go to
# bench/results/scaling/<shape>/<time>/ (the main tables of BENCHMARKS.md are left alone); at the end
# `python -m bench.report --scaling` writes the table between <!-- bench:scaling:begin/end --> in BENCHMARKS.md
# from the newest run of each shape. A shape whose run breaks down is left out of the table, the others still run.
# `make bench-scaling SCALING_SHAPES="p96 t200x3"` runs some of them (the table still takes every shape's newest).
.PHONY: bench bench-smoke bench-jars bench-scaling

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

# The series of `make bench-scaling`: a shape is pN (N partitions in one topic) or tTxP (T topics of P partitions,
# a tenth of the stream's topics created while it runs).
SCALING_DIR ?= bench/results/scaling
SCALING_SHAPES ?= p12 p96 p480 p2000 t200x3
SCALING_ALL := p12 p96 p480 p2000 t200x3
SCALING_REPS ?= 3
SCALING_ARGS ?= --contenders mm2,mm2-streams,mirrord,spark-realtime --workloads backfill-100,backfill-1024,steady \
	--no-limit --run-timeout 180 --startup-timeout 300 --doc ''

# A shape's bench.run arguments: pN -> --partitions N; tTxP -> --topics T --partitions T*P (the late topics: a
# tenth of T, bench.run's default). 12 partitions get SCALING_REPS repetitions, every other shape one.
bench-scaling: setup system-deps
	@for s in $(SCALING_SHAPES); do \
	  case $$s in \
	    p12) shape="--reps $(SCALING_REPS) --partitions 12";; \
	    p*) shape="--reps 1 --partitions $${s#p}";; \
	    t*x*) t=$${s#t}; shape="--reps 1 --topics $${t%x*} --partitions $$(( $${t%x*} * $${t#*x} ))";; \
	    *) echo "bench-scaling: unknown shape $$s (pN or tTxP)"; exit 2;; \
	  esac; \
	  echo "bench-scaling: $$s: bench.run $(SCALING_ARGS) $$shape --results $(SCALING_DIR)/$$s $(BENCH_ARGS)"; \
	  $(PY) -m bench.run $(SCALING_ARGS) $$shape --results $(SCALING_DIR)/$$s $(BENCH_ARGS) \
	    || echo "bench-scaling: the $$s run failed (exit $$?); the table goes on without it"; \
	done
	$(PY) -m bench.report --scaling $(addprefix $(SCALING_DIR)/,$(sort $(SCALING_ALL) $(SCALING_SHAPES)))
