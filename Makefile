# SPDX-License-Identifier: GPL-2.0 OR MIT
#
# peermem: build the module, run it in the dev VM, test it.
#
#   make            build build/peermem/peermem.ko against $(KDIR)
#   make dropin     build build/nvidia-peermem/nvidia-peermem.ko (same module, named
#                   nvidia_peermem for applications that look for it)
#   make run        set up, build, boot the dev VM and show the module working
#   make test       set up, build, run every test (dev VM, then debug VM; PEERMEM_TEST_DEBUG=0
#                   skips the latter); ends with "N passed, N failed"
#   make test-debug only the debug-VM part of make test (KASAN, kmemleak, ...; docs/debug-kernel.md)
#   make bench      benchmark against nvidia-peermem's pinning strategy (build/bench/report)
#   make bench-publish  copy that report into docs/bench
#   make check      rustfmt and clippy with the kernel's settings
#   make cli-docs   manual pages and shell completions of peermem and bench-report (build/cli-docs)
#   make fmt        format the module (kernel settings) and the host workspace
#   make install    install the module and its modprobe/depmod snippets (DESTDIR, KVER)
#   make toolchain  print the compiler variables handed to the kernel's make (KDIR)
#
# KDIR defaults to the project's dev kernel (built and cached by scripts/build-kernel);
# any Rust-enabled kernel build tree works: make KDIR=/path/to/build

ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
# rustup's cargo and cargo-installed bindgen, also for shells that did not read a
# profile (CI).
export PATH := $(PATH):$(HOME)/.cargo/bin
# Where build outputs go (scripts building for another kernel variant pass their own).
BUILD ?= $(ROOT)/build
# Resolved lazily: only targets that need a kernel build it.
KDIR_DEV = $(shell $(ROOT)/scripts/build-kernel dev)
KDIR ?=
K = $(or $(KDIR),$(KDIR_DEV))
# The toolchain the kernel was built with, handed to the kernel's make.
# - No KDIR (the dev kernel): Debian's rustc-web and LLVM 19, which built it.
# - KDIR given: scripts/kernel-toolchain reads $(KDIR)/.config and finds the rustc that
#   prints its CONFIG_RUSTC_VERSION_TEXT and clang/ld.lld of its major version
#   (LLVM=-NN, or LLVM=1); where one is not installed the build stops, naming it and
#   the package that provides it. LLVM= and RUSTC= given on the command line or in the
#   environment win (the rest is still found). CC and LD are always passed too (what
#   LLVM implies, or the kernel's gcc): dkms appends CC=clang LD=ld.lld to its make
#   command for clang-built kernels, names Debian's versioned packages lack, and
#   values on the kernel's make command line win over those it inherits.
ifeq ($(KDIR),)
LLVM ?= -19
RUSTC ?= /usr/bin/rustc
KMAKE_VARS = LLVM=$(LLVM) RUSTC=$(RUSTC) RUSTDOC=/usr/bin/rustdoc \
	RUSTFMT=/usr/bin/rustfmt CLIPPY_DRIVER=/usr/bin/clippy-driver
else
given = $(if $(filter command line environment,$(origin $(1))),$(1)='$($(1))')
# Run once, when a module target first needs it (make clean and install-dkms never
# do).
TOOLCHAIN = $(eval TOOLCHAIN := $$(shell env -u LLVM -u RUSTC $(call given,LLVM) \
	$(call given,RUSTC) $(ROOT)/scripts/kernel-toolchain $(KDIR) || echo KERNEL-TOOLCHAIN-FAILED))$(TOOLCHAIN)
KMAKE_VARS = $(if $(filter KERNEL-TOOLCHAIN-FAILED,$(TOOLCHAIN)),$(error \
	no toolchain for the kernel at $(KDIR), see above),$(TOOLCHAIN))
endif
export LIBCLANG_PATH ?= /usr/lib/llvm-19/lib
# Module.symvers of nvidia.ko and of ib_core (the peer-memory core) to link against.
# Empty by default: the test bed's fakes provide them (tests/fakes).
KBUILD_EXTRA_SYMBOLS ?=

FORCE:
.PHONY: FORCE all modules dropin toolchain setup kernel run test test-debug bench bench-publish check cli-docs fmt clean \
	install install-dropin install-dkms install-dkms-dropin test-install

all: modules

setup:
	@$(ROOT)/scripts/setup

kernel: setup
	@$(ROOT)/scripts/build-kernel dev >/dev/null

# The module, built out of the source tree (MO=) so both names can coexist.
modules: $(BUILD)/peermem/peermem.ko
dropin: $(BUILD)/nvidia-peermem/nvidia-peermem.ko

# Always handed to Kbuild, which rebuilds what changed, including the kernel built
# against (another KDIR changes every object's command line).
$(BUILD)/peermem/peermem.ko: FORCE
	@mkdir -p $(@D)
	$(MAKE) -C $(K) M=$(ROOT) MO=$(@D) $(KMAKE_VARS) \
		KBUILD_EXTRA_SYMBOLS="$(KBUILD_EXTRA_SYMBOLS)" modules

$(BUILD)/nvidia-peermem/nvidia-peermem.ko: FORCE
	@mkdir -p $(@D)
	$(MAKE) -C $(K) M=$(ROOT) MO=$(@D) $(KMAKE_VARS) PEERMEM_DROPIN=1 \
		KBUILD_EXTRA_SYMBOLS="$(KBUILD_EXTRA_SYMBOLS)" modules

# The compilers a build against $(KDIR) uses (scripts/kernel-toolchain), or the dev
# kernel's without KDIR.
toolchain:
	@echo $(KMAKE_VARS)

run: setup
	@$(ROOT)/scripts/run-demo

test: setup
	@$(ROOT)/scripts/test-all

test-debug: setup
	@$(ROOT)/scripts/test-debug

# A benchmark, not a test: peermem side by side with nvidia-peermem's strategy.
bench: setup
	@$(ROOT)/scripts/bench

# Copies the last `make bench` report (build/bench/report) into the tracked docs/bench.
bench-publish:
	@test -d $(BUILD)/bench/report || { echo "no benchmark report: run make bench first"; exit 1; }
	cp -r $(BUILD)/bench/report/. $(ROOT)/docs/bench/

check: setup
	@$(ROOT)/scripts/check

# Manual pages (man/) and bash, zsh and fish completions (completions/), generated from
# the tools' clap definitions by tools/cli-docs; nothing tracked changes.
cli-docs:
	cargo run --quiet -p cli-docs -- $(BUILD)/cli-docs

# Formats the module with the kernel's rustfmt settings and the host workspace.
fmt:
	/usr/bin/rustfmt --edition 2021 --config-path $(K)/.rustfmt.toml $(ROOT)/src/peermem.rs
	cargo fmt --all

# Install into $(DESTDIR)/lib/modules/$(KVER)/extra with the modprobe.d and depmod.d
# snippets (docs/install.md); install-dkms lays out the dkms source tree of the peermem
# package (peermem.ko), install-dkms-dropin that of peermem-dropin (nvidia-peermem.ko).
KVER ?= $(shell uname -r)
install: modules
	DESTDIR=$(DESTDIR) KVER=$(KVER) $(ROOT)/scripts/install $(BUILD)/peermem/peermem.ko
install-dropin: dropin
	DESTDIR=$(DESTDIR) KVER=$(KVER) $(ROOT)/scripts/install $(BUILD)/nvidia-peermem/nvidia-peermem.ko
install-dkms:
	DESTDIR=$(DESTDIR) $(ROOT)/scripts/install --dkms
install-dkms-dropin:
	DESTDIR=$(DESTDIR) $(ROOT)/scripts/install --dkms --dropin
test-install:
	@$(ROOT)/packaging/test-install.sh

clean:
	rm -rf $(BUILD) target
