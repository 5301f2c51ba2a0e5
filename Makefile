# titan - Llama 3 pre-training tools.  See README.md.
#   make            build the tools into bin/
#   make check      build and run the whole test suite
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
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

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

ALL_CFLAGS = -std=gnu11 $(WARN) $(CFLAGS) -fopenmp -Ilib $(PKG_CFLAGS) $(BLAS_CFLAGS) -MMD -MP
LDLIBS     = $(PKG_LIBS) $(BLAS_LIBS) -fopenmp -lm -lpthread

LIB_SRC  := $(shell find lib -name '*.c' | sort)
CMD_SRC  := $(sort $(wildcard cmd/*.c))
TEST_SRC := $(sort $(wildcard tests/unit/test_*.c))
LIB_OBJ  := $(LIB_SRC:%.c=build/obj/%.o)
TOOLS    := $(CMD_SRC:cmd/%.c=bin/%)
TESTS    := $(TEST_SRC:tests/unit/%.c=build/tests/%)

all: $(TOOLS) $(TESTS)

build/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

build/libtitan.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $(LIB_OBJ)

bin/%: build/obj/cmd/%.o build/libtitan.a
	@mkdir -p bin
	$(CC) $(ALL_CFLAGS) -o $@ $< build/libtitan.a $(LDLIBS)

build/tests/%: build/obj/tests/unit/%.o build/libtitan.a
	@mkdir -p build/tests
	$(CC) $(ALL_CFLAGS) -o $@ $< build/libtitan.a $(LDLIBS)

check: all
	scripts/run-tests.sh

bench: all
	scripts/bench.sh

demo:
	scripts/install-deps.sh
	$(MAKE) all
	scripts/demo.sh

install: $(TOOLS)
	mkdir -p $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 \
	         $(DESTDIR)$(PREFIX)/share/man/man5 $(DESTDIR)$(PREFIX)/share/man/man7
	cp $(TOOLS) $(DESTDIR)$(PREFIX)/bin/
	for f in man/*.1; do cp $$f $(DESTDIR)$(PREFIX)/share/man/man1/; done
	for f in man/*.5; do cp $$f $(DESTDIR)$(PREFIX)/share/man/man5/; done
	for f in man/*.7; do cp $$f $(DESTDIR)$(PREFIX)/share/man/man7/; done

clean:
	rm -rf build bin

.PHONY: all check bench demo install clean
-include $(shell find build/obj -name '*.d' 2>/dev/null)
