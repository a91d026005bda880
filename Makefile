# Sluice — one non-recursive Makefile.
#
#   make                 build everything (into build/, or build-san/ with SANITIZE=1)
#   make check           layering check, unit tests (Check), integration tests (real Kafka clients)
#   make check-layers    which folder may include which (tools/layers.rules; daemon/README.md)
#   make run             start a standalone broker with data in ./data
#   make run-cluster     ZooKeeper and three brokers on loopback (examples/cluster/);
#                        LINKED=1: and a second cluster linked to it (cluster links)
#   make deps            install the Debian packages listed in DEBIAN_PACKAGES
#   make SANITIZE=1 check   the same suite under ASan + UBSan
#   make fuzz            libFuzzer targets in tests/fuzz/ (FUZZ_SECONDS=N each)
#   make bench           build the benchmarks in bench/ (make bench-run runs them)
#   make clean
#
# Modules are static libraries, one per folder, built from every .c in it;
# adding a file never needs an edit here.

# The one list of Debian packages the project needs (build, tests, tools).
DEBIAN_PACKAGES := build-essential pkg-config libevent-dev libsqlite3-dev \
	libzstd-dev zlib1g-dev liblz4-dev libsnappy-dev check libsubunit-dev \
	kcat librdkafka-dev python3 python3-confluent-kafka python3-kafka \
	python3-pytest python3-pytest-xdist python3-snappy python3-lz4 python3-zstandard sqlite3 procps \
	libedit-dev clang libclang-rt-14-dev valgrind zookeeper libzookeeper-mt-dev \
	libssl-dev openssl libavro-dev liblzma-dev libjansson-dev python3-avro python3-requests curl
PKGS := libevent libevent_pthreads libevent_openssl openssl sqlite3 libzstd zlib liblz4 snappy jansson

CC      ?= cc
BUILD   ?= build$(if $(SANITIZE),-san)
# -fPIC everywhere: protocol/ objects also go into the shared libsluice.
CFLAGS_BASE := -std=gnu11 -Wall -Wextra -Werror -O2 -g -D_GNU_SOURCE -I. -I$(BUILD)/gen \
	-fno-strict-aliasing -pthread -fPIC
ifdef SANITIZE
CFLAGS_BASE += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS_SAN := -fsanitize=address,undefined
endif
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
# The ZooKeeper C client (cluster mode) has no pkg-config file.
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lzookeeper_mt
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null)
ALL_CFLAGS := $(CFLAGS_BASE) $(PKG_CFLAGS) $(CFLAGS)
ALL_LDFLAGS := $(LDFLAGS_SAN) -pthread $(LDFLAGS)

# ---- modules ---------------------------------------------------------------
PROTO_SRC := $(wildcard protocol/*.c)
SEG_SRC   := $(wildcard segments/*.c)
MD_SRC    := $(wildcard metadata/*.c)
SCH_SRC   := $(wildcard schema/*.c)
DAEMON_SRC:= $(filter-out daemon/main.c,$(wildcard daemon/*.c daemon/*/*.c))
ADMIN_SRC := $(filter-out admin/sluice-sql.c,$(wildcard admin/*.c))
SQL_FILES := $(sort $(wildcard sql/*.sql) $(wildcard sql/migrations/*.sql))

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

LIBKP  := $(BUILD)/libkp.a
LIBSEG := $(BUILD)/libseg.a
LIBMD  := $(BUILD)/libmd.a
# schema/: Avro schemas for the registry (jansson); below the daemon.
LIBSCH := $(BUILD)/libsch.a
LIBD   := $(BUILD)/libdaemon.a
LIBADMIN := $(BUILD)/libadmin.a
SQL_EMBED := $(BUILD)/gen/sql_embed.c
# The Kafka message codec, generated from protocol/messages/*.json by
# protocol/gen_msgs.py (kp_msgs.h, kp_msgs.c); part of libkp and libsluice.
MSG_JSON := $(sort $(wildcard protocol/messages/*.json))
KP_MSGS_H := $(BUILD)/gen/kp_msgs.h
KP_MSGS_C := $(BUILD)/gen/kp_msgs.c
# The records of Kafka's internal topics (__consumer_offsets' keys and
# values; __transaction_state's go beside them), generated the same way
# from protocol/records/*.json into kp_records.h, kp_records.c.
REC_JSON := $(sort $(wildcard protocol/records/*.json))
KP_RECORDS_H := $(BUILD)/gen/kp_records.h
PROTO_OBJ := $(call obj,$(PROTO_SRC)) $(BUILD)/obj/gen/kp_msgs.o $(BUILD)/obj/gen/kp_records.o
# Link order: dependents first, each library once.  libadmin sits above
# libdaemon (main.c starts it; sql_worker.c and admin_http.c call bk_*) and
# nothing in daemon/ calls back into admin/ (the /metrics text is written
# with protocol/'s kp_buf_printf; admin_http.c adds the surface's own
# counter).  Not --start-group: that would hide a new cycle, which should
# fail the link instead.
LIBS_ALL := $(LIBADMIN) $(LIBD) $(LIBMD) $(LIBSCH) $(LIBSEG) $(LIBKP)

SLUICED := $(BUILD)/sluiced
# clients/: libsluice (static + shared) and the tools in clients/tools/.
CLIENT_SRC := $(wildcard clients/*.c)
LIBSLUICE_A := $(BUILD)/libsluice.a
LIBSLUICE_SO := $(BUILD)/libsluice.so
# The major follows SL_VERSION_STR's (clients/sluice.h): 1 since sl_header's
# key_len changed the ABI.
LIBSLUICE_SONAME := libsluice.so.1
TOOLS_SRC := $(wildcard clients/tools/*.c)
TOOLS_BIN := $(patsubst clients/tools/%.c,$(BUILD)/%,$(filter clients/tools/sluice-%,$(TOOLS_SRC)))
# admin/: libadmin (the SQL surface, its workers, the admin HTTP endpoint)
# and the shell sluice-sql.
SLUICE_SQL := $(BUILD)/sluice-sql
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
BENCH_SRC := $(wildcard bench/*.c)
BENCH_BIN := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC))

# Objects of tests, benches and tools are chained (pattern rules make them
# intermediate); keep them between runs.  Only those: with every target
# secondary, a library's object that did not exist yet was not built when
# its source was older than the library (a file from a merge), and the
# link failed.
.SECONDARY: $(call obj,$(UNIT_SRC) $(BENCH_SRC) $(TOOLS_SRC) $(wildcard tests/fuzz/fuzz_*.c))

.PHONY: all check check-layers check-labels unit integration run run-cluster deps deps-if-missing bench bench-run clean
all: $(SLUICED) $(UNIT_BIN) $(BENCH_BIN) $(if $(CLIENT_SRC),$(LIBSLUICE_A) $(LIBSLUICE_SO) $(TOOLS_BIN)) $(SLUICE_SQL)

# Order-only on the generated header: any object may include kp_msgs.h,
# and -MMD tracks it from the second build on.
$(BUILD)/obj/%.o: %.c | $(KP_MSGS_H) $(KP_RECORDS_H)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(SQL_EMBED): $(SQL_FILES) sql/embed.sh
	@mkdir -p $(dir $@)
	sh sql/embed.sh $(SQL_FILES) > $@.tmp && mv $@.tmp $@

$(KP_MSGS_H) $(KP_MSGS_C) &: $(MSG_JSON) protocol/gen_msgs.py
	@mkdir -p $(dir $@)
	python3 protocol/gen_msgs.py $(BUILD)/gen $(MSG_JSON)

$(KP_RECORDS_H) $(BUILD)/gen/kp_records.c &: $(REC_JSON) protocol/gen_msgs.py
	@mkdir -p $(dir $@)
	python3 protocol/gen_msgs.py --name kp_records $(BUILD)/gen $(REC_JSON)

# Schemas of types libkp's messages do not use yet (uint16, float64, a
# nullable struct), generated beside it for test_kp_msgs_types only.
KP_TYPES_JSON := $(sort $(wildcard tests/unit/kp_msgs_types/*.json))
$(BUILD)/gen/kp_msgs_types.h $(BUILD)/gen/kp_msgs_types.c &: $(KP_TYPES_JSON) protocol/gen_msgs.py
	@mkdir -p $(dir $@)
	python3 protocol/gen_msgs.py --name kp_msgs_types $(BUILD)/gen $(KP_TYPES_JSON)

$(BUILD)/obj/gen/kp_%.o: $(BUILD)/gen/kp_%.c $(BUILD)/gen/kp_%.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/obj/gen/sql_embed.o: $(SQL_EMBED)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(LIBKP): $(PROTO_OBJ)
	@rm -f $@; ar rcs $@ $^
$(LIBSEG): $(call obj,$(SEG_SRC))
	@rm -f $@; ar rcs $@ $^
$(LIBMD): $(call obj,$(MD_SRC)) $(BUILD)/obj/gen/sql_embed.o
	@rm -f $@; ar rcs $@ $^
$(LIBSCH): $(call obj,$(SCH_SRC))
	@rm -f $@; ar rcs $@ $^
$(LIBD): $(call obj,$(DAEMON_SRC))
	@rm -f $@; ar rcs $@ $^
$(LIBADMIN): $(call obj,$(ADMIN_SRC))
	@rm -f $@; ar rcs $@ $^

$(SLUICED): $(call obj,daemon/main.c) $(LIBS_ALL)
	$(CC) $(ALL_LDFLAGS) -o $@ $+ $(PKG_LIBS) -lm

$(LIBSLUICE_A): $(call obj,$(CLIENT_SRC)) $(PROTO_OBJ)
	@rm -f $@; ar rcs $@ $^
$(LIBSLUICE_SO): $(call obj,$(CLIENT_SRC)) $(PROTO_OBJ)
	$(CC) $(ALL_LDFLAGS) -shared -Wl,-soname,$(LIBSLUICE_SONAME) -o $@ $^ $(PKG_LIBS) -lm
$(BUILD)/sluice-%: $(call obj,clients/tools/sluice-%.c) $(LIBSLUICE_A)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm
# sluice-export encodes with Avro C (libavro-dev) and writes the container
# files itself (export_ocf.c: its codecs need zlib, snappy, liblzma, zstd);
# export_registry.c asks a schema registry (jansson for its JSON);
# export_files.c: durable directories, no-replace renames, partition locks.
AVRO_LIBS := $(shell pkg-config --libs avro-c 2>/dev/null || echo -lavro) -llzma
$(BUILD)/sluice-export: $(call obj,clients/tools/sluice-export.c clients/tools/export_registry.c clients/tools/export_files.c clients/tools/export_ocf.c) $(LIBSLUICE_A)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS) $(AVRO_LIBS) -lm
# The shell references only the surface (sq_open, sq_run, formats), so the
# linker takes those objects from libadmin and leaves the worker threads
# and the HTTP endpoint (libevent, bk_*) out; no libdaemon needed.
$(SLUICE_SQL): $(call obj,admin/sluice-sql.c) $(LIBADMIN) $(LIBMD) $(LIBSCH) $(LIBSEG) $(LIBKP)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS) -ledit -lm

# ---- install: libsluice (static + shared), sluice.h, libsluice.pc, tools ----
#   make install PREFIX=/opt/sluice [DESTDIR=stage]      make uninstall PREFIX=…
PREFIX ?= /usr/local
SL_LIBDIR = $(DESTDIR)$(PREFIX)/lib
SL_PC_LIBS := -lssl -lcrypto -lzstd -lz -llz4 -lsnappy -lpthread -lm
.PHONY: install uninstall
install: $(LIBSLUICE_A) $(LIBSLUICE_SO) $(TOOLS_BIN)
	install -d $(DESTDIR)$(PREFIX)/include $(SL_LIBDIR)/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 clients/sluice.h $(DESTDIR)$(PREFIX)/include/sluice.h
	install -m 644 $(LIBSLUICE_A) $(SL_LIBDIR)/libsluice.a
	install -m 755 $(LIBSLUICE_SO) $(SL_LIBDIR)/$(LIBSLUICE_SONAME)
	ln -sf $(LIBSLUICE_SONAME) $(SL_LIBDIR)/libsluice.so
	printf 'prefix=%s\nlibdir=$${prefix}/lib\nincludedir=$${prefix}/include\n\nName: libsluice\nDescription: C producer, consumer and admin client for Sluice and Kafka brokers\nVersion: %s\nLibs: -L$${libdir} -lsluice\nLibs.private: %s\nCflags: -I$${includedir}\n' \
	  '$(PREFIX)' "$$(sed -n 's/^#define SL_VERSION_STR "\(.*\)"/\1/p' clients/sluice.h)" \
	  '$(SL_PC_LIBS)' > $(SL_LIBDIR)/pkgconfig/libsluice.pc
	install -m 755 $(TOOLS_BIN) $(DESTDIR)$(PREFIX)/bin/
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/include/sluice.h $(SL_LIBDIR)/libsluice.a \
	  $(SL_LIBDIR)/libsluice.so $(SL_LIBDIR)/$(LIBSLUICE_SONAME) \
	  $(SL_LIBDIR)/pkgconfig/libsluice.pc \
	  $(patsubst $(BUILD)/%,$(DESTDIR)$(PREFIX)/bin/%,$(TOOLS_BIN))

# A unit test links only the modules its name says it tests, so a module
# builds and tests without the ones above it: test_kp_* (protocol),
# test_seg_* (segments), test_md_* (metadata), test_sch_* (schema),
# test_d_* (daemon and admin, all).
TEST_LINK = $(CC) $(ALL_LDFLAGS) -o $@ $+ $(PKG_LIBS) $(CHECK_LIBS) -lm
$(BUILD)/tests/test_kp_%: $(call obj,tests/unit/test_kp_%.c) $(LIBKP)
	@mkdir -p $(dir $@); $(TEST_LINK)
$(BUILD)/tests/test_seg_%: $(call obj,tests/unit/test_seg_%.c) $(LIBSEG) $(LIBKP)
	@mkdir -p $(dir $@); $(TEST_LINK)
$(BUILD)/tests/test_md_%: $(call obj,tests/unit/test_md_%.c) $(LIBMD) $(LIBKP)
	@mkdir -p $(dir $@); $(TEST_LINK)
$(BUILD)/tests/test_sch_%: $(call obj,tests/unit/test_sch_%.c) $(LIBSCH) $(LIBKP)
	@mkdir -p $(dir $@); $(TEST_LINK)
$(BUILD)/tests/test_d_%: $(call obj,tests/unit/test_d_%.c) $(LIBS_ALL)
	@mkdir -p $(dir $@); $(TEST_LINK)
$(call obj,tests/unit/test_kp_msgs_types.c): $(BUILD)/gen/kp_msgs_types.h
$(BUILD)/tests/test_kp_msgs_types: $(call obj,tests/unit/test_kp_msgs_types.c) \
		$(BUILD)/obj/gen/kp_msgs_types.o $(LIBKP)
	@mkdir -p $(dir $@); $(TEST_LINK)
# test_cl_*: libsluice, also against librdkafka's mock cluster.
$(BUILD)/tests/test_cl_%: $(call obj,tests/unit/test_cl_%.c) $(LIBSLUICE_A)
	@mkdir -p $(dir $@); $(TEST_LINK) -lrdkafka

$(BUILD)/bench/%: $(call obj,bench/%.c) $(LIBS_ALL)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $+ $(PKG_LIBS) $(if $(findstring rdkafka,$*)$(filter cluster_bench txn_bench,$*),-lrdkafka) -lm
# It runs the sluice-bench tool (order-only: built first, not linked in).
$(BUILD)/bench/libsluice_vs_rdkafka_bench: | $(BUILD)/sluice-bench

# ---- fuzzing (tests/fuzz/; issue 8) -------------------------------------------
# libFuzzer targets, one per surface that takes hostile bytes: request frames
# through the real handlers, RecordBatch parsing and codecs, segment recovery
# from arbitrary files (with its .txnindex), the properties parser, the admin
# SQL authorizer, the transaction records read back from the logs (markers,
# __transaction_state), Avro schema text and Avro bodies (schema/).
# Built with clang into build-fuzz/ (every module instrumented, ASan+UBSan).
#   make fuzz [FUZZ_SECONDS=N] [FUZZ_TARGETS="fuzz_d_request ..."]
# runs each target for N seconds from its seeds in tests/fuzz/corpus/<target>/
# (new inputs collect in build-fuzz/corpus/<target>/; the seeds are not
# touched) and fails on the first crash, leak, timeout or sanitizer report,
# leaving the input in build-fuzz/findings/.  `make check` runs it with
# FUZZ_SECONDS=20.  A fixed finding's input goes into the seed corpus.
FUZZ_BUILD   := build-fuzz
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_SRC     := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_TARGETS ?= $(patsubst tests/fuzz/%.c,%,$(FUZZ_SRC))
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
.PHONY: fuzz fuzz-build fuzz-check
# A fixed seed in `make check`: a CI finding can be replayed exactly with
# `make fuzz FUZZ_SECONDS=20 FUZZ_SEED=1`; plain `make fuzz` explores anew.
fuzz-check:
	@$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=20 FUZZ_SEED=1
# FUZZ_JOBS targets at a time (libFuzzer uses one core each); each one's
# verdict goes to build-fuzz/<target>.result, printed in target order once
# all are done.
FUZZ_JOBS ?= 2
fuzz: fuzz-build
	@mkdir -p $(FUZZ_BUILD)/findings; rm -f $(patsubst %,$(FUZZ_BUILD)/%.result,$(FUZZ_TARGETS))
	@printf '%s\n' $(FUZZ_TARGETS) | xargs -P $(FUZZ_JOBS) -n 1 sh -c '$(FUZZ_ONE)' fuzz-one; \
	  rc=$$?; for t in $(FUZZ_TARGETS); do cat $(FUZZ_BUILD)/$$t.result || rc=1; done; exit $$rc
# One target ($$1): exit 1 on a finding, its verdict in $$1.result.
FUZZ_ONE = t=$$1; res=$(FUZZ_BUILD)/$$t.result; \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$t tests/fuzz/corpus/$$t; \
	  log=$(FUZZ_BUILD)/$$t.log; \
	  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
	  $(FUZZ_BUILD)/fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 $(if $(FUZZ_SEED),-seed=$(FUZZ_SEED)) \
	    -rss_limit_mb=2048 -max_len=65536 -close_fd_mask=2 -print_final_stats=1 \
	    -artifact_prefix=$(FUZZ_BUILD)/findings/$$t- \
	    $(FUZZ_BUILD)/corpus/$$t tests/fuzz/corpus/$$t >$$log 2>&1; rc=$$?; \
	  execs=$$(sed -n "s/^stat::number_of_executed_units: *//p" $$log); \
	  if [ $$rc -eq 0 ]; then echo "fuzz $$t: $${execs:-?} executions in $(FUZZ_SECONDS) s, no finding" >$$res; \
	  else { echo "fuzz $$t: FINDING (exit $$rc) after $${execs:-?} executions; log $$log:"; \
	    tail -40 $$log; } >$$res; exit 1; fi
# Libraries rebuilt by clang with coverage; Fetch/JoinGroup deferral is
# finished by the harness (fuzz_d_request.c), hence the --wrap.
fuzz-build:
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=$(FUZZ_CC) SANITIZE= \
	  CFLAGS="-fsanitize=fuzzer-no-link $(FUZZ_SAN)" \
	  $(patsubst %,$(FUZZ_BUILD)/fuzz/%,$(FUZZ_TARGETS))
# The schema targets need only their module (the shorter stem wins).
$(BUILD)/fuzz/fuzz_sch_%: $(call obj,tests/fuzz/fuzz_sch_%.c) $(LIBSCH) $(LIBKP)
	@mkdir -p $(dir $@)
	$(CC) -fsanitize=fuzzer $(FUZZ_SAN) -pthread -o $@ $+ $(PKG_LIBS) -lm
$(BUILD)/fuzz/%: $(call obj,tests/fuzz/%.c) $(LIBS_ALL)
	@mkdir -p $(dir $@)
	$(CC) -fsanitize=fuzzer $(FUZZ_SAN) -Wl,--wrap=net_req_finish -pthread -o $@ $+ $(PKG_LIBS) -lm

# ---- dependencies ----------------------------------------------------------
deps:
	@missing=$$(for p in $(DEBIAN_PACKAGES); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing:" $$missing; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "make deps: all Debian packages present"; fi
	@# Node.js clients (kafkajs, @kafkajs/confluent-schema-registry), pinned by
	@# tests/node/package-lock.json; npm itself from Debian when there is none.
	@command -v npm >/dev/null 2>&1 || { SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends nodejs npm; }
	@if [ ! -f tests/node/node_modules/.package-lock.json ] || \
	    [ tests/node/package-lock.json -nt tests/node/node_modules/.package-lock.json ]; then \
	  echo "make deps: npm ci in tests/node"; \
	  cd tests/node && npm ci --no-audit --no-fund --loglevel=error; \
	else echo "make deps: Node.js clients present"; fi

# Called by check and run: cheap when everything is installed.
deps-if-missing:
	@$(MAKE) --no-print-directory deps

# ---- tests -----------------------------------------------------------------
# One suite after the other: under MAKEFLAGS=-j2 (.ci/run) `$(MAKE) unit
# integration` ran both at once, on a machine whose timing tests then
# measured each other.
check: deps-if-missing
	@$(MAKE) --no-print-directory check-layers
	@$(MAKE) --no-print-directory check-labels
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory integration
	@$(MAKE) --no-print-directory fuzz-check

# Every #include against tools/layers.rules: no include a rule does not
# allow, no cycle between folders, no libevent, SQLite or ZooKeeper in
# segments/ and protocol/, no room's private header from another room.
# The checker's own tests first.  Needs no build; first in check, it fails fast.
check-layers:
	@python3 tools/test_check_layers.py
	@python3 tools/check_layers.py

# Invariant labels (L3, C7, ...) repeat across files: a citation outside the
# defining file names the file, so one grep finds every definition.
check-labels:
	@python3 tools/check_labels.py

unit: $(UNIT_BIN)
	@fail=0; for t in $(UNIT_BIN); do \
	  echo "== $$t"; CK_DEFAULT_TIMEOUT=120 timeout 600 $$t || fail=1; done; \
	exit $$fail

# Everything tests/integration runs: the broker, sluice-sql, libsluice.so
# (ctypes) and the tools (sluice-produce, sluice-consume), which the tests
# find beside $$SLUICED.  Asked for together (`make unit integration`, as
# .ci/run does under ASan), the integration run waits for the unit run.
INTEGRATION_DEPS := $(SLUICED) $(SLUICE_SQL) $(if $(CLIENT_SRC),$(LIBSLUICE_SO) $(TOOLS_BIN))
integration: $(INTEGRATION_DEPS) | $(filter unit,$(MAKECMDGOALS))
	@SLUICED=$(abspath $(SLUICED)) sh tests/integration/run.sh

# On a terminal the broker runs as its own job (bash -m gives it the
# terminal), so Ctrl-C reaches the broker alone: it stops cleanly and make
# exits 0 rather than dying of the SIGINT too.
run: deps-if-missing
	@$(MAKE) --no-print-directory $(SLUICED)
	@mkdir -p data
	@if [ -t 0 ]; then bash -mc '$(SLUICED) -c examples/standalone.properties; exit $$?'; \
	 else exec $(SLUICED) -c examples/standalone.properties; fi

# Foreground; Ctrl-C stops ZooKeeper and the brokers (by PID).
run-cluster: deps-if-missing
	@$(MAKE) --no-print-directory $(SLUICED) $(SLUICE_SQL)
	@SLUICED=$(SLUICED) SLUICE_SQL=$(SLUICE_SQL) LINKED=$(LINKED) exec sh examples/cluster/run-cluster.sh

# `make bench` builds the benchmarks; `make bench-run` runs each in turn,
# under the lock other sessions' benchmarks take (flock), so none of them
# measures on a machine another benchmark is loading.
bench: $(BENCH_BIN)

bench-run: $(BENCH_BIN) $(SLUICED) $(SLUICE_SQL) $(BUILD)/sluice-bench
	@for b in $(BENCH_BIN); do echo "== $$b"; flock /tmp/sluice-bench.lock $$b || exit 1; done
	@echo "== bench/link_bench.sh"; flock /tmp/sluice-bench.lock sh bench/link_bench.sh

clean:
	rm -rf build build-san

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
