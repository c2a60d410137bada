# slurm-train
#   make                      build what this machine can: the CPU engine and the launcher always,
#                             CUDA objects when nvcc is found, spank_train.so when spank.h is found
#   make test                 install what is missing, build, run every test suite
#   make demo                 install what is missing, build, run the demo on a local Slurm cluster
#   make bench                install what is missing, build, run the benchmarks (one table)
#   make install PREFIX=/opt/slurm-train/$(VERSION) [DESTDIR=...]; make uninstall (same PREFIX)
#   make gpu-bundle           binaries + the shared libraries they link, for a GPU machine without
#                             MPI/HDF5 (scripts/gpu-bundle.sh; CUDA builds only)
#   make format               the C++ and CUDA sources formatted as .clang-format says (make test
#                             checks it)
#   make clean
#   make fuzz [FUZZ_SECONDS=300] [FUZZ_RUNS=N FUZZ_SEED=S]  every libFuzzer target (each parser of
#                             outside input) so long each; runs and seed make it repeatable
#   SANITIZE=1                AddressSanitizer + UndefinedBehaviorSanitizer, in build/sanitize
#   V=1                       every compiler and linker command in full (default: one short line
#                             a file, "CXX launcher/watchdog.cc")
SHELL := /bin/bash
.DEFAULT_GOAL := all
.DELETE_ON_ERROR:
.SECONDARY:

VERSION := $(shell cat VERSION)
SANITIZE ?= 0
ifeq ($(SANITIZE),1)
  BUILD ?= build/sanitize
else
  BUILD ?= build
endif
PREFIX ?= /usr/local
DESTDIR ?=

# One short line per file built, as kbuild and CMake print; V=1 for the whole command lines.
V ?= 0
ifeq ($(V),1)
  Q :=
  say :=
else
  Q := @
  say = @printf '  %-6s %s\n' $(1) $(2);
endif

# ---- dependencies: each missing one is named with the Debian package that brings it ----------
pc_ok = $(shell pkg-config --exists $(1) 2>/dev/null && echo yes)
HAVE_PKG_CONFIG := $(shell command -v pkg-config >/dev/null && echo yes)
ifeq ($(HAVE_PKG_CONFIG),yes)
  MISSING := $(if $(call pc_ok,ompi-c),,libopenmpi-dev) \
             $(if $(call pc_ok,hdf5-openmpi),,libhdf5-openmpi-dev) \
             $(if $(call pc_ok,openblas),,libopenblas-dev) \
             $(if $(call pc_ok,fmt),,libfmt-dev) \
             $(if $(call pc_ok,libcrypto),,libssl-dev) \
             $(if $(call pc_ok,munge),,libmunge-dev) \
             $(if $(call pc_ok,cpp-httplib),,libcpp-httplib-dev)
else
  MISSING := pkg-config
endif
MISSING += $(if $(wildcard /usr/include/CLI/CLI.hpp),,libcli11-dev) \
           $(if $(wildcard /usr/include/toml++/toml.h),,libtomlplusplus-dev) \
           $(if $(wildcard /usr/include/nlohmann/json.hpp),,nlohmann-json3-dev) \
           $(if $(wildcard /usr/include/zlib.h),,zlib1g-dev) \
           $(if $(wildcard /usr/include/boost/beast/http.hpp),,libboost1.81-dev) \
           $(if $(wildcard /usr/include/doctest/doctest.h),,doctest-dev)
MISSING := $(strip $(MISSING))

SPANK_H := $(wildcard /usr/include/slurm/spank.h)
NVCC ?= $(firstword $(shell command -v nvcc 2>/dev/null) $(wildcard /usr/local/cuda/bin/nvcc))
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))

# ---- flags ----------------------------------------------------------------------------------
# libcrypto (HMAC-SHA-256 of the watchdog's frames) is OpenSSL's, which HDF5 already loads;
# libmunge proves a task's user to task 0 (launcher/munge_auth.h); `serve`'s HTTP is Boost.Beast's
# (header-only, serve/http_server.h); cpp-httplib is the HTTP client of its benchmark (bench/serve_load).
PKGS := ompi-c hdf5-openmpi openblas fmt libcrypto munge cpp-httplib
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null)

CXX ?= g++
WARN := -Wall -Wextra
CXXFLAGS_BASE := -std=c++20 -g -fPIC -pthread $(WARN) -I. -DSLURM_TRAIN_VERSION=\"$(VERSION)\" \
                 -DOMPI_SKIP_MPICXX
ifeq ($(SANITIZE),1)
  OPT := -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined \
         -DSLURM_TRAIN_SANITIZE
  LDSAN := -fsanitize=address,undefined
else
  OPT := -O2 -D_FORTIFY_SOURCE=2 -fstack-protector-strong
  LDSAN :=
endif
CXXFLAGS ?=
ALL_CXXFLAGS = $(CXXFLAGS_BASE) $(OPT) $(PKG_CFLAGS) $(CXXFLAGS)
LDFLAGS ?=
ALL_LDFLAGS = -pthread $(LDSAN) -Wl,-z,relro,-z,now $(LDFLAGS)
LIBS = $(PKG_LIBS) -lz

# ---- sources --------------------------------------------------------------------------------
JOBENV_SRC   := $(wildcard spank/jobenv/*.cc)
PLUGIN_SRC   := $(wildcard spank/*.cc)
ENGINE_SRC   := $(wildcard train/*/*.cc kernels/cpu/*.cc)
LAUNCHER_SRC := $(filter-out launcher/main.cc,$(wildcard launcher/*.cc serve/*.cc))
CUDA_SRC     := $(if $(NVCC),$(wildcard kernels/cuda/*.cu))
UNIT_SRC     := $(wildcard test/unit/*.cc)
CUDA_TEST_SRC := $(if $(CUDA_SRC),$(wildcard test/cuda/*.cc test/cuda/*.cu))
TESTPROG_SRC := $(wildcard test/integration/*.cc)
BENCH_SRC    := $(wildcard bench/*.cc)

obj = $(patsubst %.cc,$(BUILD)/obj/%.o,$(filter %.cc,$(1))) $(patsubst %.cu,$(BUILD)/obj/%.cu.o,$(filter %.cu,$(1)))
# The plugin's option parser is in the launcher too: submit checks --train-* values with it, so
# that both accept the same values.
PLUGIN_OPTIONS_SRC := spank/options.cc
# One archive per layer, linked highest first: a static archive only resolves what the objects
# before it need, so a lower layer that called a higher one would not link.
#   launcher (and the plugin's option parser) -> engine (train, kernels) -> jobenv
LIB_LAUNCHER := $(BUILD)/lib/libslurmtrain-launcher.a
LIB_ENGINE := $(BUILD)/lib/libslurmtrain-engine.a
LIB_JOBENV := $(BUILD)/lib/libslurmtrain-jobenv.a
$(LIB_LAUNCHER): $(call obj,$(LAUNCHER_SRC) $(PLUGIN_OPTIONS_SRC))
$(LIB_ENGINE): $(call obj,$(ENGINE_SRC) $(CUDA_SRC))
$(LIB_JOBENV): $(call obj,$(JOBENV_SRC))
LIB := $(LIB_LAUNCHER) $(LIB_ENGINE) $(LIB_JOBENV)

ifneq ($(CUDA_SRC),)
  ALL_CXXFLAGS += -DSLURM_TRAIN_WITH_CUDA -I$(CUDA_HOME)/include
  # cuBLASLt is opened on first use (kernels/cuda/cublaslt_library.h), not linked: loading it
  # costs every command 0.3 s; the run path lets dlopen find it where the build did.
  LIBS += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lnccl -lcudart -ldl
endif
# The GPU architectures compiled: a cubin for each of CUDA_ARCHS, and the PTX of CUDA_PTX_ARCH,
# which the driver compiles for later GPUs. doctor checks each GPU against them (gpu_checks.h).
CUDA_ARCHS ?= 80 90
CUDA_PTX_ARCH ?= 90
NVCCFLAGS := -std=c++20 -O2 -g -I. -DSLURM_TRAIN_VERSION=\"$(VERSION)\" -DSLURM_TRAIN_WITH_CUDA \
             $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a)) \
             -gencode arch=compute_$(CUDA_PTX_ARCH),code=compute_$(CUDA_PTX_ARCH) \
             -Xcompiler -fPIC,-Wall,-Wextra $(addprefix -Xcompiler ,$(PKG_CFLAGS))
comma := ,
$(BUILD)/obj/launcher/gpu_checks.o: ALL_CXXFLAGS += \
  -DSLURM_TRAIN_CUDA_ARCHS=$(subst $(eval) ,$(comma),$(strip $(CUDA_ARCHS))) -DSLURM_TRAIN_CUDA_PTX_ARCH=$(CUDA_PTX_ARCH)

LAUNCHER := $(BUILD)/bin/slurm-train
PLUGIN := $(if $(and $(SPANK_H),$(PLUGIN_SRC)),$(BUILD)/lib/spank_train.so)
UNIT_TESTS := $(if $(UNIT_SRC),$(BUILD)/test/unit-tests)
CUDA_TESTS := $(if $(CUDA_TEST_SRC),$(BUILD)/test/cuda-tests)
TEST_PROGRAMS := $(patsubst test/integration/%.cc,$(BUILD)/test/%,$(TESTPROG_SRC))
BENCH_PROGRAMS := $(patsubst bench/%.cc,$(BUILD)/bench/%,$(BENCH_SRC))

# ---- targets --------------------------------------------------------------------------------
.PHONY: all check-deps test test-programs demo demo-build bench install uninstall clean deps format

MAN_PAGES := $(BUILD)/share/man/man1/slurm-train.1 $(BUILD)/share/man/man8/spank_train.8

# gpu_check (scripts/gpu-check.sh's program) is built with everything in a CUDA build, so that
# CI, which has no GPU, still compiles and links it.
GPU_CHECK := $(if $(CUDA_SRC),$(BUILD)/bench/gpu_check)
# Its kernel table (bench/kernel_times.h) records through CUPTI, the toolkit's: linked by gpu_check only.
$(BUILD)/bench/gpu_check: LIBS += $(if $(CUDA_SRC),-lcupti)
all: $(LAUNCHER) $(PLUGIN) $(MAN_PAGES) test-programs $(GPU_CHECK)

check-deps:
	@if [ -n "$(MISSING)" ]; then \
	  echo "error: missing $(MISSING): run scripts/install-deps.sh (or apt-get install $(MISSING))" >&2; \
	  exit 1; fi

deps:
	@scripts/install-deps.sh

# A stand-in for the driver's NVML that answers from scripted facts (test/fixtures/nvml/): the
# tests run the NVML paths where there is no GPU, through SLURM_TRAIN_NVML_LIBRARY.
NVML_STAND_IN := $(BUILD)/test/nvml-stand-in/libnvidia-ml.so.1
$(NVML_STAND_IN): test/fixtures/nvml/stand_in.cc Makefile
	@mkdir -p $(@D)
	$(call say,LINK,$@)$(CXX) -std=c++20 -O1 -g -fPIC -shared $(WARN) $< -o $@

test-programs: $(UNIT_TESTS) $(CUDA_TESTS) $(TEST_PROGRAMS) $(NVML_STAND_IN)

# test, demo and bench install what is missing first, then build in a second make, which sees
# the freshly installed libraries; on every core unless the caller chose -j itself.
SUBMAKE = $(MAKE) --no-print-directory $(if $(filter -j%,$(MAKEFLAGS)),,-j$(shell nproc))

# The fuzzers' clang build too, on every core while nothing else runs (fuzz.bats then runs them).
test: deps
	@$(SUBMAKE) all fuzz-build
	@BUILD=$(BUILD) SANITIZE=$(SANITIZE) test/run-tests.sh

# The demo runs the launcher on a cluster with the plugin: it builds those two, no test program.
# They are named by demo-build, in the second make: this one decided whether spank.h exists when
# it read this file, before deps installed libslurm-dev.
demo: deps
	@$(SUBMAKE) demo-build
	@BUILD=$(BUILD) scripts/demo.sh

demo-build: $(LAUNCHER) $(PLUGIN)
	@[ -n "$(PLUGIN)" ] || { echo "error: no /usr/include/slurm/spank.h: the demo needs the SPANK plugin (apt-get install libslurm-dev)" >&2; exit 1; }

bench: deps
	@$(SUBMAKE) $(BENCH_PROGRAMS) all
	@BUILD=$(BUILD) bench/run.sh

$(BUILD)/obj/%.o: %.cc Makefile | check-deps
	@mkdir -p $(@D)
	$(call say,CXX,$<)$(CXX) $(ALL_CXXFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/%.cu.o: %.cu Makefile | check-deps
	@mkdir -p $(@D)
	$(call say,NVCC,$<)$(NVCC) $(NVCCFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/launcher/build_info.o: VERSION

# The CPU kernels' element-wise loops: -O3 vectorizes them; -ffp-contract=off forbids fused
# multiply-add, so that their AVX2 and AVX-512 clones round exactly as the reference does;
# -fno-math-errno lets sqrt vectorize (it no longer has to set errno on a negative argument);
# -fno-trapping-math lets the compiler evaluate both arms of a select (exp's clamp, the erfc's
# sign) where AVX2 has no masked operations: without it GCC keeps GELU's loops scalar on AVX2.
# Neither changes a rounded value: only errno and the floating-point exception flags.
VECTOR_LOOPS := kernels/cpu/cpu_kernels kernels/cpu/attention_gemm kernels/cpu/layernorm_rows kernels/cpu/column_sums
$(patsubst %,$(BUILD)/obj/%.o,$(VECTOR_LOOPS)): ALL_CXXFLAGS += -O3 -ffp-contract=off -fno-math-errno -fno-trapping-math

$(LIB):
	@mkdir -p $(@D)
	$(Q)rm -f $@
	$(call say,AR,$@)$(AR) rcs $@ $^

$(LAUNCHER): $(BUILD)/obj/launcher/main.o $(LIB)
	@mkdir -p $(@D)
	$(call say,LINK,$@)$(CXX) $(ALL_LDFLAGS) $^ -o $@ $(LIBS)

# The plugin exports only the SPANK symbols (version script) and links no MPI or HDF5. It is
# never sanitized, not even under SANITIZE=1: slurmstepd cannot load an ASan-instrumented
# library. Its logic is covered sanitized by the unit tests and the fuzzer instead.
PLUGIN_CXXFLAGS = $(CXXFLAGS_BASE) -O2 -D_FORTIFY_SOURCE=2 -fstack-protector-strong $(CXXFLAGS)
PLUGIN_OBJ := $(patsubst %.cc,$(BUILD)/plugin-obj/%.o,$(PLUGIN_SRC) $(JOBENV_SRC))

$(BUILD)/plugin-obj/%.o: %.cc Makefile | check-deps
	@mkdir -p $(@D)
	$(call say,CXX,$<)$(CXX) $(PLUGIN_CXXFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/lib/spank_train.so: $(PLUGIN_OBJ) spank/spank_train.map
	@mkdir -p $(@D)
	$(call say,LINK,$@)$(CXX) -shared -pthread -Wl,-z,relro,-z,now $(LDFLAGS) -Wl,--version-script=spank/spank_train.map \
	  $(filter %.o,$^) -o $@

# The plugin's pure files (all of spank/ but the Slurm dispatch) are unit-tested too.
PLUGIN_PURE_SRC := $(filter-out spank/plugin.cc,$(PLUGIN_SRC))

$(BUILD)/test/unit-tests: $(call obj,$(UNIT_SRC) $(filter-out $(PLUGIN_OPTIONS_SRC),$(PLUGIN_PURE_SRC))) $(LIB)
	@mkdir -p $(@D)
	$(call say,LINK,$@)$(CXX) $(ALL_LDFLAGS) $^ -o $@ $(LIBS)

# The CUDA kernels against the CPU reference kernels (each test reports itself skipped, with the
# reason, on a machine without a usable GPU).
$(BUILD)/test/cuda-tests: $(call obj,$(CUDA_TEST_SRC)) $(LIB)
	@mkdir -p $(@D)
	$(call say,LINK,$@)$(CXX) $(ALL_LDFLAGS) $^ -o $@ $(LIBS)

$(BUILD)/test/%: $(BUILD)/obj/test/integration/%.o $(LIB)
	@mkdir -p $(@D)
	$(call say,LINK,$@)$(CXX) $(ALL_LDFLAGS) $^ -o $@ $(LIBS)

$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(LIB)
	@mkdir -p $(@D)
	$(call say,LINK,$@)$(CXX) $(ALL_LDFLAGS) $^ -o $@ $(LIBS)

# ---- fuzzing: every parser of outside input under libFuzzer + ASan + UBSan (clang) ------------
# One target per parser (test/fuzz/*_fuzz.cc), each with its seed corpus of real files in
# test/fuzz/seeds/<target>/. The sources they call are compiled with clang, instrumented, into
# $(BUILD)/fuzz/obj and linked from one archive. `make fuzz` runs every target FUZZ_SECONDS each
# and prints its runs and coverage; make test runs a few seconds of each (fuzz.bats).
FUZZ_CXX ?= $(firstword $(shell command -v clang++-14 clang++ 2>/dev/null))
FUZZ_SECONDS ?= 300
FUZZ_TARGETS := $(patsubst test/fuzz/%.cc,%,$(wildcard test/fuzz/*_fuzz.cc))
FUZZERS := $(addprefix $(BUILD)/fuzz/,$(FUZZ_TARGETS))
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CXXFLAGS = -std=c++20 -g -O1 -fno-omit-frame-pointer -I. $(WARN) -DOMPI_SKIP_MPICXX \
                -DSLURM_TRAIN_VERSION=\"$(VERSION)\" $(PKG_CFLAGS) $(FUZZ_SAN)
# Everything but CUDA: the fuzz build runs on any machine.
FUZZ_LIB_SRC := $(JOBENV_SRC) $(PLUGIN_PURE_SRC) $(ENGINE_SRC) $(LAUNCHER_SRC)
FUZZ_LIB := $(BUILD)/fuzz/libfuzzed.a
# A single allocation above 1 GiB from inputs of at most FUZZ_MAX_LEN bytes is a finding, and
# so is a process above 2 GiB.
FUZZ_MAX_LEN ?= 131072
# FUZZ_RUNS and FUZZ_SEED make a run repeatable (make test's: the same inputs every time, so that
# it passes or fails on the code, not on how far a loaded machine got in the time).
FUZZ_RUNS ?=
FUZZ_SEED ?=
FUZZ_FLAGS = -max_total_time=$(FUZZ_SECONDS) -max_len=$(FUZZ_MAX_LEN) -timeout=10 -rss_limit_mb=2048 \
             -malloc_limit_mb=1024 -print_final_stats=1 $(if $(FUZZ_RUNS),-runs=$(FUZZ_RUNS)) \
             $(if $(FUZZ_SEED),-seed=$(FUZZ_SEED))

define need_clang
@[ -n "$(FUZZ_CXX)" ] || { echo "error: missing clang: apt-get install clang-14 libclang-rt-14-dev" >&2; exit 1; }
endef

$(BUILD)/fuzz/obj/%.o: %.cc Makefile | check-deps
	$(need_clang)
	@mkdir -p $(@D)
	$(call say,CXX,$<)$(FUZZ_CXX) $(FUZZ_CXXFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(FUZZ_LIB): $(patsubst %.cc,$(BUILD)/fuzz/obj/%.o,$(FUZZ_LIB_SRC))
	@mkdir -p $(@D)
	$(Q)rm -f $@
	$(call say,AR,$@)$(AR) rcs $@ $^

$(BUILD)/fuzz/%_fuzz: $(BUILD)/fuzz/obj/test/fuzz/%_fuzz.o $(FUZZ_LIB)
	$(call say,LINK,$@)$(FUZZ_CXX) $(FUZZ_SAN) -fsanitize=fuzzer -pthread $^ -o $@ $(PKG_LIBS) -lz

.PHONY: fuzz fuzz-build
fuzz-build: $(FUZZERS)

# Each target: its seeds, read only, and a working corpus under $(BUILD)/fuzz/corpus/<target>;
# a crash lands in $(BUILD)/fuzz/crashes/<target>/ and fails make after the other targets ran.
fuzz: $(FUZZERS)
	@failed=""; for target in $(FUZZ_TARGETS); do \
	  mkdir -p $(BUILD)/fuzz/corpus/$$target $(BUILD)/fuzz/crashes/$$target; \
	  echo "== $$target: $(FUZZ_SECONDS) s"; \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/test/fuzz/lsan.supp:print_suppressions=0 \
	  $(BUILD)/fuzz/$$target $(FUZZ_FLAGS) -artifact_prefix=$(BUILD)/fuzz/crashes/$$target/ \
	    $(BUILD)/fuzz/corpus/$$target test/fuzz/seeds/$$target >$(BUILD)/fuzz/$$target.log 2>&1 \
	    || { failed="$$failed $$target"; grep -m1 -A24 -E "ERROR|Test unit written" $(BUILD)/fuzz/$$target.log; }; \
	  grep -E "^(==[0-9]+== ?ERROR|SUMMARY|Done |stat::number_of_executed_units)" $(BUILD)/fuzz/$$target.log; \
	  grep -E "^#[0-9]+[[:space:]]" $(BUILD)/fuzz/$$target.log | tail -n 1; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz: findings in$$failed (see $(BUILD)/fuzz/<target>.log)" >&2; exit 1; fi

-include $(patsubst %.cc,$(BUILD)/fuzz/obj/%.d,$(FUZZ_LIB_SRC) $(wildcard test/fuzz/*_fuzz.cc))

.PHONY: gpu-bundle
# (+: the sub-make shares this make's job slots under -j, rather than falling back to one job.)
gpu-bundle: deps
	@[ -n "$(CUDA_SRC)" ] || { echo "error: gpu-bundle needs a CUDA build (nvcc not found)" >&2; exit 1; }
	@+$(SUBMAKE) all $(BENCH_PROGRAMS)
	BUILD=$(BUILD) scripts/gpu-bundle.sh $(BUILD)/gpu-bundle

# Man pages: the version filled in.
$(BUILD)/share/man/man1/%: docs/%.in VERSION
	@mkdir -p $(@D)
	$(call say,GEN,$@)sed 's|@VERSION@|$(VERSION)|g' $< >$@

$(BUILD)/share/man/man8/%: docs/%.in VERSION
	@mkdir -p $(@D)
	$(call say,GEN,$@)sed 's|@VERSION@|$(VERSION)|g' $< >$@

format:
	@git ls-files '*.cc' '*.h' '*.cu' '*.cuh' | xargs clang-format -i

install: all
	scripts/install.sh install $(BUILD) $(PREFIX) $(DESTDIR)

uninstall:
	scripts/install.sh uninstall $(PREFIX) $(DESTDIR)

# Stop any local cluster whose files live under build/ before removing them.
clean:
	@for run in $$(find build -path '*/run/slurmctld.pid' 2>/dev/null); do \
	  scripts/cluster.sh stop --dir "$$(dirname "$$(dirname "$$run")")" || exit 1; done
	rm -rf build

-include $(shell find $(BUILD)/obj $(BUILD)/plugin-obj -name '*.d' 2>/dev/null)
