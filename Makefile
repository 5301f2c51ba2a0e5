# titan - Llama 3 pre-training tools.  See README.md.
#   make            build the tools into bin/
#   make check      build and run the whole test suite
#   make check-asan the same tests (most) under ASan and UBSan, in build-asan/
#   make bench      benchmarks beside their references (PyTorch), same run
#   make demo       install dependencies, build, train the default model
#   make install PREFIX=/usr/local
.SUFFIXES:

CC      ?= cc
PREFIX  ?= /usr/local
ARCH    ?= -march=native
OPT     ?= -O3
CFLAGS  ?= $(OPT) $(ARCH) -g
WARN     = -Wall -Wextra -Wno-unused-parameter
PKGS     = libzstd libarchive jansson libxxhash libpcre2-8
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
# Without pkg-config (or its .pc files), the plain names: the compiler finds
# them through its defaults or LIBRARY_PATH (scripts/gpu-deps.sh).
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null || echo -lzstd -larchive -ljansson -lxxhash -lpcre2-8)

# OpenBLAS: prefer Debian's OpenMP build so BLAS and our kernels share one
# thread pool (the pthread build's spinning workers fight OpenMP for cores).
BLAS_OMP_DIR = /usr/lib/x86_64-linux-gnu/openblas-openmp
BLAS_OMP_INC = /usr/include/x86_64-linux-gnu/openblas-openmp
ifneq ($(wildcard $(BLAS_OMP_DIR)/libopenblas.so),)
BLAS_CFLAGS = -I$(BLAS_OMP_INC)
BLAS_LIBS   = -L$(BLAS_OMP_DIR) -Wl,-rpath,$(BLAS_OMP_DIR) -lopenblas
else
BLAS_CFLAGS := $(shell pkg-config --cflags openblas 2>/dev/null)
BLAS_LIBS   := $(shell pkg-config --libs openblas 2>/dev/null || echo -lopenblas)
endif

# -Wvla: no array on the stack sized at run time (a layer count from a
# config file once overflowed the stack); sizes from input go to the heap.
ALL_CFLAGS = -std=gnu11 $(WARN) -Wvla $(CFLAGS) -fopenmp -Ilib $(PKG_CFLAGS) $(BLAS_CFLAGS) -MMD -MP
LDLIBS     = $(PKG_LIBS) $(BLAS_LIBS) $(PMIX_LIBS) -fopenmp -lm -lpthread -ldl

# PMIx (lib/comm/bootstrap_pmix.c only): optional; a build without it runs
# single-process and `--nproc` jobs and refuses PMIx launches (mpirun).
PMIX_CFLAGS := $(shell pkg-config --cflags pmix 2>/dev/null)
PMIX_LIBS   := $(shell pkg-config --libs pmix 2>/dev/null || { [ -f /usr/include/pmix.h ] && echo -lpmix; })
build/obj/lib/comm/bootstrap_pmix.o: ALL_CFLAGS += $(PMIX_CFLAGS)

# lib/comm/mpi/ is libtitan-mpi.so's (below), not libtitan.a's.
LIB_SRC  := $(shell find lib -name '*.c' -not -path 'lib/comm/mpi/*' | sort)
CMD_SRC  := $(sort $(wildcard cmd/*.c))
TEST_SRC := $(sort $(wildcard tests/unit/test_*.c))
LIB_OBJ  := $(LIB_SRC:%.c=build/obj/%.o)
TOOLS    := $(CMD_SRC:cmd/%.c=bin/%)
TESTS    := $(TEST_SRC:tests/unit/%.c=build/tests/%)
# Fuzz targets: `make check` replays each one's corpus through its entry point
# (build/tests/test_fuzz_NAME, built with $(CC)); `make fuzz` fuzzes them.
FUZZ_SRC    := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_REPLAY := $(FUZZ_SRC:tests/fuzz/fuzz_%.c=build/tests/test_fuzz_%)

# CUDA backend: a separate shared library, built only where nvcc exists
# (skipped silently otherwise). The tools dlopen it at run time (lookup
# order: lib/backend/backend.h), so a CPU build never needs CUDA: it lands at
# build/lib/titan/ (found by build/tests/*), a copy in bin/ (found by the
# tools), and PREFIX/lib/titan/ on install.
NVCC     ?= /usr/local/cuda/bin/nvcc
CUDA_SO   = build/lib/titan/libtitan-cuda.so
ifneq ($(wildcard $(NVCC)),)
CUDA_LIBDIR ?= $(abspath $(dir $(NVCC))../lib64)
CU_SRC   := $(sort $(wildcard kernels/*.cu))
# NCCL (kernels/comm_nccl.cu, the nccl communicator): only where nccl.h is;
# without it the library simply has no titan_cuda_nccl_api.
NCCL_H   := $(firstword $(wildcard $(dir $(NVCC))../include/nccl.h /usr/include/nccl.h))
ifeq ($(NCCL_H),)
CU_SRC   := $(filter-out kernels/comm_nccl.cu,$(CU_SRC))
else
NCCL_LIBS = -lnccl
endif
CU_OBJ   := $(CU_SRC:%.cu=build/obj/%.o)
CUDA_OUT  = $(CUDA_SO) bin/libtitan-cuda.so
NVCCFLAGS ?= -O3 -gencode arch=compute_80,code=sm_80 \
             -gencode arch=compute_90,code=[sm_90,compute_90]
ALL_NVCCFLAGS = -std=c++17 $(NVCCFLAGS) -Ilib $(CUDNN_INC) -Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Wextra \
                -Xcompiler -Wno-unused-parameter -MMD -MP
# The whole CUDA backend on the CPU (tests/emu/cuda_emu.h): every kernels/*.cu
# made host C++ by gen_kernels.awk, over a host CUDA runtime, cuBLASLt, CUB
# and (where nccl.h is) NCCL between processes. The suite runs test_cuda_ops,
# test_comm_nccl and training runs on it
# (TITAN_CUDA_LIB=build/emu/libtitan-cuda-emu.so).
EMU_SO      = build/emu/libtitan-cuda-emu.so
EMU_CU_SRC := $(CU_SRC)
# cuDNN's headers: kernels/cudnn_graph.cuh (the library itself is opened at
# run time) and tests/emu/cudnn_emu.cpp (a host interpreter of the backend
# graphs the attention builds). The toolkit's or the system's, else those of
# PyTorch's cuDNN wheel (GPU images often have only that one); without any,
# the backend is built without its cuDNN attention path.
CUDNN_H  := $(firstword $(wildcard $(dir $(NVCC))../include/cudnn.h /usr/include/cudnn.h))
ifeq ($(CUDNN_H),)
CUDNN_H  := $(firstword $(wildcard $(shell python3 -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null)/include/cudnn.h))
CUDNN_INC := $(if $(CUDNN_H),-isystem $(patsubst %/,%,$(dir $(CUDNN_H))))
endif
EMU_CU_OBJ := $(EMU_CU_SRC:kernels/%.cu=build/emu/cuda/%.o) build/emu/cuda/cuda_emu.o \
              build/emu/cuda/cublaslt_emu.o build/emu/cuda/cusolver_emu.o $(if $(NCCL_H),build/emu/cuda/nccl_emu.o) \
              $(if $(CUDNN_H),build/emu/cuda/cudnn_emu.o)
EMU_SO_FLAGS = -std=c++17 -O2 -g -fPIC -fvisibility=hidden -ffp-contract=off -fno-strict-aliasing \
               $(WARN) -Wno-unknown-pragmas $(filter -Werror,$(CFLAGS)) -Ilib -Ikernels -Itests/emu \
               -isystem $(dir $(NVCC))../include $(CUDNN_INC) -MMD -MP
# Two tests on it, linked with its runtime: the emulator's own checks
# (tests/emu/test_cuda_emu.cu, CUDA source made host C++ the same way: it
# catches what it says), and attention_tc.cu against a double-precision
# reference (it includes the generated file: its device helpers are static).
EMU_SELF_TEST = build/tests/test_cuda_emu
EMU_TEST      = build/tests/test_attention_tc_emu
# fp8.cu's transposed and two-layout casts against the host's codec, the
# same way (tests/emu/test_fp8_emu.cpp).
EMU_FP8_TEST  = build/tests/test_fp8_emu
# The cuDNN interpreter alone: small graphs against hand loops, and its refusals.
EMU_CUDNN_TEST = $(if $(CUDNN_H),build/tests/test_cudnn_emu)
# kernels/vmm.cu's object linked against a host mock of the CUDA runtime and
# driver calls it makes (tests/mock/): the suite checks releasable memory
# without a GPU. libcudart only registers vmm.o's fat binary.
VMM_MOCK_TEST  = build/tests/test_vmm_mock
VMM_MOCK_FLAGS = -std=c++17 -O2 -g $(WARN) $(filter -Werror,$(CFLAGS)) -Ilib \
                 -isystem $(dir $(NVCC))../include
endif

# The durability test's LD_PRELOAD shim (tests/durability/sync_trace.c): it
# logs the writes, syncs and renames of a checkpoint save for
# tests/durability/check_sync.py (tests/cli/durability.sh).
SYNC_TRACE = build/tests/sync_trace.so

# The mpi communicator's MPI calls: a shared library of their own, built
# only where mpicc exists (Debian: libopenmpi-dev) and dlopen'ed by
# lib/comm/comm_mpi.c when a job asks for mpi, so that no tool needs an MPI
# runtime to start. Found like libtitan-cuda.so: beside the tool, or
# ../lib/titan/ from it (build/tests/*), or TITAN_MPI_LIB.
MPICC   ?= mpicc
MPI_SO   = build/lib/titan/libtitan-mpi.so
MPI_OUT := $(if $(shell command -v $(MPICC) 2>/dev/null),$(MPI_SO) bin/libtitan-mpi.so)

all: $(TOOLS) $(TESTS) $(SYNC_TRACE) $(FUZZ_REPLAY) $(CUDA_OUT) $(EMU_TEST) $(EMU_FP8_TEST) $(EMU_SO) $(EMU_SELF_TEST) \
     $(EMU_CUDNN_TEST) $(VMM_MOCK_TEST) $(MPI_OUT)

$(MPI_SO): lib/comm/mpi/libtitan_mpi.c lib/comm/comm_mpi_api.h build/FLAGS
	@mkdir -p $(dir $@)
	$(MPICC) -std=gnu11 $(WARN) $(CFLAGS) -fPIC -fvisibility=hidden -shared -Ilib -o $@ $<

bin/libtitan-mpi.so: $(MPI_SO)
	@mkdir -p bin
	cp $< $@

# Objects are rebuilt when the compilers or their flags change (make OPT=-O0,
# CFLAGS=..., another CC), so a build never mixes objects of two settings:
# build/FLAGS (cc), FLAGS.cu (nvcc) and FLAGS.emu (the emulator's c++) hold
# the last build's, rewritten only when they differ, and each compiler's
# objects depend on its file (CFLAGS do not rebuild the CUDA objects).
# -Werror changes no code, so it is left out (CI builds with it, then make
# check builds without). := keeps target-specific additions (bootstrap_pmix.o's)
# out of the key.
FLAGS_C   := $(filter-out -Werror,$(CC) $(ALL_CFLAGS))
FLAGS_CU  := $(NVCC) $(ALL_NVCCFLAGS)
FLAGS_EMU := $(filter-out -Werror,$(CXX) $(EMU_SO_FLAGS))
build/FLAGS: KEY = $(FLAGS_C)
build/FLAGS.cu: KEY = $(FLAGS_CU)
build/FLAGS.emu: KEY = $(FLAGS_EMU)
build/FLAGS build/FLAGS.cu build/FLAGS.emu: FORCE
	@mkdir -p build
	@printf '%s\n' '$(KEY)' | cmp -s - $@ || printf '%s\n' '$(KEY)' >$@
FORCE:
# Nothing built is deleted as an intermediate (the objects of tools and
# tests, the generated emulator sources): a deleted one would be rebuilt by
# the next make, since build/FLAGS* are remade on every run.
.SECONDARY:

ifneq ($(CUDA_OUT),)
build/obj/kernels/%.o: kernels/%.cu build/FLAGS.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(ALL_NVCCFLAGS) -c $< -o $@

$(CUDA_SO): $(CU_OBJ)
	@mkdir -p $(dir $@)
	$(NVCC) -shared -cudart shared -o $@ $(CU_OBJ) -L$(CUDA_LIBDIR) \
	    -Xlinker -rpath,$(CUDA_LIBDIR) -lcublasLt -lcusolver $(NCCL_LIBS)

bin/libtitan-cuda.so: $(CUDA_SO)
	@mkdir -p bin
	cp $< $@

build/emu/cuda/%.cpp: kernels/%.cu tests/emu/gen_kernels.awk
	@mkdir -p build/emu/cuda
	awk -f tests/emu/gen_kernels.awk $< >$@.tmp && mv $@.tmp $@

# a kernel family's shared header, made host C++ the same way (its PTX
# wrappers blanked); the sources that include it find it beside them
build/emu/cuda/%.cuh: kernels/%.cuh tests/emu/gen_kernels.awk
	@mkdir -p build/emu/cuda
	awk -f tests/emu/gen_kernels.awk $< >$@.tmp && mv $@.tmp $@

build/emu/cuda/attention_tc.o build/emu/cuda/attention_tc_bwd.o: build/emu/cuda/attention_tc.cuh

build/emu/cuda/%.cpp: tests/emu/%.cu tests/emu/gen_kernels.awk
	@mkdir -p build/emu/cuda
	awk -f tests/emu/gen_kernels.awk $< >$@.tmp && mv $@.tmp $@

build/emu/cuda/%.o: build/emu/cuda/%.cpp build/FLAGS.emu
	$(CXX) $(EMU_SO_FLAGS) -c $< -o $@

build/emu/cuda/%.o: tests/emu/%.cpp build/FLAGS.emu
	@mkdir -p build/emu/cuda
	$(CXX) $(EMU_SO_FLAGS) -c $< -o $@


$(EMU_SO): $(EMU_CU_OBJ)
	$(CXX) -shared -o $@ $(EMU_CU_OBJ) -Wl,--no-undefined $(BLAS_LIBS) -lpthread

$(EMU_SELF_TEST): build/emu/cuda/test_cuda_emu.cpp build/emu/cuda/cuda_emu.o tests/emu/emu_test.h
	@mkdir -p build/tests
	$(CXX) $(EMU_SO_FLAGS) -o $@ $(filter-out %.h,$^) -lpthread

ifneq ($(CUDNN_H),)
$(EMU_CUDNN_TEST): tests/emu/test_cudnn_emu.cpp build/emu/cuda/cudnn_emu.o build/emu/cuda/cuda_emu.o \
                   tests/emu/emu_test.h
	@mkdir -p build/tests
	$(CXX) $(EMU_SO_FLAGS) -o $@ $(filter-out %.h,$^) -lpthread
endif

$(EMU_TEST): tests/emu/test_attention_tc_emu.cpp build/emu/cuda/attention_tc.cpp \
             build/emu/cuda/attention_tc_bwd.cpp build/emu/cuda/attention_tc.cuh \
             tests/gpu/bf16_check.h tests/gpu/cuda_standins.h build/emu/cuda/cuda_emu.o
	@mkdir -p build/tests
	$(CXX) $(EMU_SO_FLAGS) -Ibuild/emu/cuda -o $@ $< build/emu/cuda/cuda_emu.o -lpthread

$(EMU_FP8_TEST): tests/emu/test_fp8_emu.cpp build/emu/cuda/fp8.cpp tests/gpu/cuda_standins.h \
                 build/emu/cuda/cuda_emu.o
	@mkdir -p build/tests
	$(CXX) $(EMU_SO_FLAGS) -Ibuild/emu/cuda -o $@ $< build/emu/cuda/cuda_emu.o -lpthread

$(VMM_MOCK_TEST): tests/mock/test_vmm_mock.cpp build/obj/kernels/vmm.o
	@mkdir -p build/tests
	$(CXX) $(VMM_MOCK_FLAGS) -o $@ $^ -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR) -lcudart -lpthread
endif

build/obj/%.o: %.c build/FLAGS
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

build/libtitan.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $(LIB_OBJ)

bin/%: build/obj/cmd/%.o build/libtitan.a
	@mkdir -p bin
	$(CC) $(ALL_CFLAGS) -o $@ $(filter %.o,$^) build/libtitan.a $(LDLIBS)

# A tool's own helpers (cmd/TOOL/*.c: its printing, not the library's) link
# into that tool alone.
TOOL_HELPER_SRC := $(sort $(wildcard cmd/*/*.c))
$(foreach t,$(TOOLS),$(eval $(t): $(patsubst %.c,build/obj/%.o,$(filter cmd/$(notdir $(t))/%,$(TOOL_HELPER_SRC)))))

build/tests/test_fuzz_%: build/obj/tests/fuzz/fuzz_%.o build/obj/tests/fuzz/replay.o build/libtitan.a
	@mkdir -p build/tests
	$(CC) $(ALL_CFLAGS) -o $@ $(filter %.o,$^) build/libtitan.a $(LDLIBS)

$(SYNC_TRACE): tests/durability/sync_trace.c
	@mkdir -p build/tests
	$(CC) -std=gnu11 $(WARN) $(filter -Werror,$(CFLAGS)) -O2 -g -shared -fPIC -o $@ $< -ldl

# `make fuzz [FUZZ_SECONDS=60]`: each target (tests/fuzz/fuzz_*.c: TOML and
# the job schema, tokenizer files, shard directories, corpus readers,
# config.json, safetensors, checkpoint catalogs and data, pack archives,
# flight dumps) with clang's libFuzzer, ASan and UBSan for FUZZ_SECONDS, one
# after another (scripts/fuzz.sh); crashers land in build/fuzz/crashes/. The
# library layers they reach are built again with the sanitizers and coverage
# into build/fuzz/libtitan.a. Needs clang and its libFuzzer runtime (Debian:
# clang, libclang-rt-14-dev, libomp-14-dev); `make check` does not.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_FLAGS    = -std=gnu11 -g -O1 -fopenmp -fsanitize=address,undefined -fno-sanitize-recover=all \
                -Ilib $(PKG_CFLAGS) -MMD -MP
FUZZ_LIB_SRC := $(sort $(wildcard $(patsubst %,lib/%/*.c,core tensor data job ckpt interchange trace model)) \
                lib/comm/flight.c lib/train/setup.c)
FUZZ_LIB_OBJ := $(FUZZ_LIB_SRC:%.c=build/fuzz/obj/%.o)
FUZZ_BIN     := $(FUZZ_SRC:tests/fuzz/fuzz_%.c=build/fuzz/fuzz_%)

build/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

build/fuzz/libtitan.a: $(FUZZ_LIB_OBJ)
	rm -f $@ && ar rcs $@ $(FUZZ_LIB_OBJ)

build/fuzz/fuzz_%: build/fuzz/obj/tests/fuzz/fuzz_%.o build/fuzz/libtitan.a
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer -o $@ $< build/fuzz/libtitan.a $(PKG_LIBS) -lm

fuzz: $(FUZZ_BIN)
	scripts/fuzz.sh $(FUZZ_SECONDS) $(FUZZ_BIN)

build/tests/%: build/obj/tests/unit/%.o build/libtitan.a
	@mkdir -p build/tests
	$(CC) $(ALL_CFLAGS) -o $@ $< build/libtitan.a $(LDLIBS)

# `make check-asan`: the sanitizer tier. The library, the tools, the unit
# tests and the fuzz replays rebuilt by gcc with AddressSanitizer and
# UndefinedBehaviorSanitizer (any report aborts the program) into
# build-asan/ and bin-asan/, beside the normal build and never over it; then
# scripts/run-tests.sh runs, against them, every unit test and the CLI tests
# of ASAN_CLI_TESTS: those that feed the parsers and error paths (bad
# inputs, checkpoints, shards, tokenizers, exit codes, options). Left out:
# the multi-rank training suites (dist_train, tp_train, pp_train, cp_train:
# minutes each under ASan, and their ranks run the code one process runs),
# trace (its hang tests race 2-rank jobs against fixed waits that ASan's
# slowdown breaks; bad_inputs feeds titan-trace its bad dumps and metrics),
# gguf (4 minutes, nearly all of it the Python references; bad_inputs feeds
# the GGUF export its bad tokenizer files and catalogs) and the CUDA
# emulator (C++ built without the sanitizers; what it checks is the
# kernels' logic). Measured from a clean build-asan/ on a 2-core VM shared
# with other jobs: 10 min 23 s wall, 8 min 11 s CPU, test_ops 227 s of it.
# Run-time options and the leak suppressions: tests/asan/.
ASAN_CC      ?= gcc
ASAN_FLAGS    = -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
ASAN_OPT     ?= -O1
ASAN_CFLAGS   = -std=gnu11 $(WARN) -Wvla $(ASAN_OPT) $(ARCH) -g $(filter -Werror,$(CFLAGS)) $(ASAN_FLAGS) \
                -fopenmp -Ilib $(PKG_CFLAGS) $(BLAS_CFLAGS) -MMD -MP
ASAN_CLI_TESTS ?= bad_inputs exit_codes cli_habits ckpt shard init_load reshard train_tokenizer layers threads \
                  man_pages
ASAN_LIB_OBJ := $(LIB_SRC:%.c=build-asan/obj/%.o)
ASAN_TOOLS   := $(TOOLS:bin/%=bin-asan/%)
ASAN_TESTS   := $(TESTS:build/%=build-asan/%) $(FUZZ_REPLAY:build/%=build-asan/%)
FLAGS_ASAN   := $(filter-out -Werror,$(ASAN_CC) $(ASAN_CFLAGS))

build-asan/FLAGS: KEY = $(FLAGS_ASAN)
build-asan/FLAGS: FORCE
	@mkdir -p build-asan
	@printf '%s\n' '$(KEY)' | cmp -s - $@ || printf '%s\n' '$(KEY)' >$@

build-asan/obj/lib/comm/bootstrap_pmix.o: ASAN_CFLAGS += $(PMIX_CFLAGS)
build-asan/obj/%.o: %.c build-asan/FLAGS
	@mkdir -p $(dir $@)
	$(ASAN_CC) $(ASAN_CFLAGS) -c $< -o $@

build-asan/libtitan.a: $(ASAN_LIB_OBJ)
	rm -f $@ && ar rcs $@ $(ASAN_LIB_OBJ)

bin-asan/%: build-asan/obj/cmd/%.o build-asan/libtitan.a
	@mkdir -p bin-asan
	$(ASAN_CC) $(ASAN_CFLAGS) -o $@ $(filter %.o,$^) build-asan/libtitan.a $(LDLIBS)

$(foreach t,$(ASAN_TOOLS),$(eval $(t): $(patsubst %.c,build-asan/obj/%.o,$(filter cmd/$(notdir $(t))/%,$(TOOL_HELPER_SRC)))))

build-asan/tests/test_fuzz_%: build-asan/obj/tests/fuzz/fuzz_%.o build-asan/obj/tests/fuzz/replay.o build-asan/libtitan.a
	@mkdir -p build-asan/tests
	$(ASAN_CC) $(ASAN_CFLAGS) -o $@ $(filter %.o,$^) build-asan/libtitan.a $(LDLIBS)

build-asan/tests/%: build-asan/obj/tests/unit/%.o build-asan/libtitan.a
	@mkdir -p build-asan/tests
	$(ASAN_CC) $(ASAN_CFLAGS) -o $@ $< build-asan/libtitan.a $(LDLIBS)

asan: $(ASAN_TOOLS) $(ASAN_TESTS)

check-asan: asan
	scripts/run-tests.sh --build build-asan --bin bin-asan --asan $(ASAN_CLI_TESTS)

check: all
	scripts/run-tests.sh

bench: all
	scripts/bench.sh
	scripts/bench_tokenizer.sh
	scripts/bench_comm.sh
	scripts/bench_dist.sh

# The demo needs no Python: the tests' references (build/venv) are left out.
demo:
	TITAN_NO_PYREF=1 scripts/install-deps.sh
	$(MAKE) all
	scripts/demo.sh

install: $(TOOLS)
	mkdir -p $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 \
	         $(DESTDIR)$(PREFIX)/share/man/man5 $(DESTDIR)$(PREFIX)/share/man/man7
	cp $(TOOLS) $(DESTDIR)$(PREFIX)/bin/
	for f in man/*.1; do cp $$f $(DESTDIR)$(PREFIX)/share/man/man1/; done
	for f in man/*.5; do cp $$f $(DESTDIR)$(PREFIX)/share/man/man5/; done
	for f in man/*.7; do cp $$f $(DESTDIR)$(PREFIX)/share/man/man7/; done
	if [ -f $(CUDA_SO) ]; then mkdir -p $(DESTDIR)$(PREFIX)/lib/titan && \
	    cp $(CUDA_SO) $(DESTDIR)$(PREFIX)/lib/titan/; fi
	if [ -f $(MPI_SO) ]; then mkdir -p $(DESTDIR)$(PREFIX)/lib/titan && \
	    cp $(MPI_SO) $(DESTDIR)$(PREFIX)/lib/titan/; fi

clean:
	rm -rf build bin build-asan bin-asan

.PHONY: all check bench demo install clean fuzz FORCE asan check-asan
-include $(shell find build/obj build/emu build/tests build/fuzz/obj -name '*.d' 2>/dev/null)
-include $(shell find build-asan/obj -name '*.d' 2>/dev/null)
