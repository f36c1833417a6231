# SPDX-License-Identifier: GPL-2.0 OR MIT
#
# peermem: build the module, run it in the dev VM, test it.
#
#   make            build build/peermem/peermem.ko against $(KDIR) (also: make all, make modules)
#   make dropin     build build/nvidia-peermem/nvidia-peermem.ko (same module, named
#                   nvidia_peermem for applications that look for it)
#   make run        set up, build, boot the dev VM and show the module working
#   make test       set up, build, run every test (dev VM, User-Mode Linux, then debug VM;
#                   PEERMEM_TEST_DEBUG=0 skips the latter); ends with "N passed, N failed"
#   make test-debug only the debug-VM part of make test (KASAN, kmemleak, ...; docs/debug-kernel.md)
#   make bench      benchmark against nvidia-peermem's pinning strategy, under QEMU TCG and
#                   User-Mode Linux (build/bench/report, build/bench/report/uml)
#   make bench-kit  one archive for the UML benchmark and stress runs on another host with
#                   nothing installed (build/peermem-bench-kit.tar.gz; docs/bench)
#   make bench-publish  copy those reports into docs/bench
#   make check      rustfmt and clippy with the kernel's settings
#   make cli-docs   manual pages and shell completions of peermem and bench-report (build/cli-docs)
#   make fmt        format the module (kernel settings) and the host workspace
#   make install    install the module (Kbuild modules_install), its modprobe.d and depmod.d
#                   files, peermem.service (enabled), and the peermem tool (DESTDIR, PREFIX);
#                   make uninstall
#   make install-dropin  the same for the drop-in name (nvidia-peermem.ko)
#   make install-tool    only the peermem tool, its manual pages and completions
#   make install-dkms, install-dkms-dropin  lay out the dkms source tree of either package
#   make test-install    only scripts/install's tests (packaging/test-install.sh)
#   make deb        Debian packages: peermem-dkms, peermem-dropin-dkms, peermem-tools (build/deb)
#   make image      the container image precompiled for KDIR's release, as root (the drop-in
#                   built against it; scripts/image; build/image, docs/fleet.md), named
#                   REGISTRY/peermem:<tag> with REGISTRY=host[:port][/path]
#   make image-build-on-node  the container image that builds the module on each node
#                   (REGISTRY= as make image)
#   make toolchain  print the compiler variables handed to the kernel's make (KDIR)
#   make lib-rust   build and install KDIR's Rust build files where the distribution ships
#                   none (Debian), from its kernel source package (scripts/lib-rust)
#   make setup      install what the test bed needs (scripts/setup; make run and make test
#                   call it)
#   make kernel     build (or find in the cache) the test bed's dev kernel
#   make clean      remove build/ and target/
#
# KDIR defaults to the running kernel's build tree (/lib/modules/$(uname -r)/build);
# the test bed's scripts name their kernels: make KDIR=/path/to/build

ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
# rustup's cargo and cargo-installed bindgen, also for shells that did not read a
# profile (CI).
export PATH := $(PATH):$(HOME)/.cargo/bin
# Where build outputs go (scripts building for another kernel variant pass their own).
BUILD ?= $(ROOT)/build
# The project's dev kernel (built and cached by scripts/build-kernel), resolved lazily:
# only the developer targets that name it build it (fmt).
KDIR_DEV = $(shell $(ROOT)/scripts/build-kernel dev)
# The kernel to build for: KDIR, else the running kernel's build tree. KVER (what
# make install installs for) is KDIR's release, else the running kernel's.
ifeq ($(KDIR),)
KVER ?= $(shell uname -r)
KDIR := /lib/modules/$(KVER)/build
else
KVER ?= $(shell cat $(KDIR)/include/config/kernel.release 2>/dev/null)
endif
K = $(KDIR)
# The toolchain the kernel was built with, handed to the kernel's make:
# scripts/kernel-toolchain reads $(KDIR)/.config and finds the rustc that prints its
# CONFIG_RUSTC_VERSION_TEXT and clang/ld.lld of its major version (LLVM=-NN, or
# LLVM=1); where one is not installed the build stops, naming it and the package that
# provides it. LLVM= and RUSTC= given on the command line or in the environment win
# (the rest is still found). CC and LD are always passed too (what LLVM implies, or the
# kernel's gcc): dkms appends CC=clang LD=ld.lld to its make command for clang-built
# kernels, names Debian's versioned packages lack, and values on the kernel's make
# command line win over those it inherits.
given = $(if $(filter command line environment,$(origin $(1))),$(1)='$($(1))')
# Run once, when a module target first needs it (make clean and install-dkms never
# do).
TOOLCHAIN = $(eval TOOLCHAIN := $$(shell env -u LLVM -u RUSTC $(call given,LLVM) \
	$(call given,RUSTC) $(ROOT)/scripts/kernel-toolchain $(KDIR) || echo KERNEL-TOOLCHAIN-FAILED))$(TOOLCHAIN)
# A missing build tree, said before anything else is tried.
NO_KDIR = no kernel build tree at $(K)$(if $(filter /lib/modules/%,$(K)), for the running \
	kernel $(KVER): install its headers (Debian: linux-headers-$(KVER); Ubuntu: \
	linux-headers-$(KVER) and linux-lib-rust-$(KVER))$(comma) or give KDIR= a kernel build \
	tree,: give KDIR= a kernel build tree)
comma := ,
KMAKE_VARS = $(if $(wildcard $(K)/.config),,$(error $(NO_KDIR)))$(if $(filter \
	KERNEL-TOOLCHAIN-FAILED,$(TOOLCHAIN)),$(error no toolchain for the kernel at $(KDIR), \
	see above),$(TOOLCHAIN))

export LIBCLANG_PATH ?= /usr/lib/llvm-19/lib
# Module.symvers of nvidia.ko and of ib_core (the peer-memory core) to link against.
# Empty by default: the test bed's fakes provide them (tests/fakes).
KBUILD_EXTRA_SYMBOLS ?=

# The first rule is the default goal: a bare `make` builds the module.
all: modules

FORCE:
.PHONY: FORCE all modules dropin toolchain lib-rust setup kernel run test test-debug bench bench-kit bench-publish check cli-docs fmt clean \
	install install-dropin install-tool uninstall install-dkms install-dkms-dropin deb test-install \
	tool-static image image-build-on-node

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

# The compilers a build against $(KDIR) uses (scripts/kernel-toolchain).
toolchain:
	@echo $(KMAKE_VARS)

# The Rust build files of $(KDIR)'s kernel (rust/*.rmeta, rust/*.so, scripts/target.json)
# where its distribution ships none (Debian): built from the distribution's kernel
# source package with the kernel's .config and compilers, installed into $(KDIR).
lib-rust:
	@$(ROOT)/scripts/lib-rust --kdir $(K)

run: setup
	@$(ROOT)/scripts/run-demo

test: setup
	@$(ROOT)/scripts/test-all

test-debug: setup
	@$(ROOT)/scripts/test-debug

# A benchmark, not a test: peermem side by side with nvidia-peermem's strategy.
bench: setup
	@$(ROOT)/scripts/bench

# One archive for the UML benchmark and stress runs on another host with nothing
# installed (build/peermem-bench-kit.tar.gz; docs/bench, "The UML run").
bench-kit: setup
	@$(ROOT)/scripts/bench-kit

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
	/usr/bin/rustfmt --edition 2021 --config-path $(KDIR_DEV)/.rustfmt.toml $(ROOT)/src/peermem.rs
	cargo fmt --all

# Install for $(KVER) (KDIR's kernel) through the kernel's Kbuild (modules_install into
# extra/, signed where the kernel's or a Machine Owner Key is configured), with the
# modprobe.d and depmod.d files, peermem.service (enabled), and the peermem tool with its manual
# pages and completions under $(PREFIX) (docs/install.md). uninstall removes all of
# it. install-dkms lays out the dkms source tree of the peermem package (peermem.ko),
# install-dkms-dropin that of peermem-dropin (nvidia-peermem.ko).
PREFIX ?= /usr/local
install: modules install-tool
	DESTDIR=$(DESTDIR) $(ROOT)/scripts/install --kdir $(K) --kver $(KVER) $(BUILD)/peermem/peermem.ko
install-dropin: dropin install-tool
	DESTDIR=$(DESTDIR) $(ROOT)/scripts/install --kdir $(K) --kver $(KVER) $(BUILD)/nvidia-peermem/nvidia-peermem.ko
install-tool:
	DESTDIR=$(DESTDIR) PREFIX=$(PREFIX) $(ROOT)/scripts/install-tool
uninstall:
	DESTDIR=$(DESTDIR) $(ROOT)/scripts/install --uninstall --kver $(KVER)
	DESTDIR=$(DESTDIR) PREFIX=$(PREFIX) $(ROOT)/scripts/install-tool --uninstall
install-dkms:
	DESTDIR=$(DESTDIR) $(ROOT)/scripts/install --dkms
install-dkms-dropin:
	DESTDIR=$(DESTDIR) $(ROOT)/scripts/install --dkms --dropin
# Debian/Ubuntu packages into $(BUILD)/deb: peermem-dkms, peermem-dropin-dkms (the
# module's two names, built by dkms per kernel) and peermem-tools (scripts/deb).
deb:
	@$(ROOT)/scripts/deb $(BUILD)/deb
test-install:
	@$(ROOT)/packaging/test-install.sh

# The container images (docs/fleet.md; scripts/image, as root, with debootstrap and
# buildah), with the peermem tool linked statically: precompiled for $(KDIR)'s release
# (the drop-in built against it), or the one that builds the module on each node with
# dkms. OCI archives under build/image, named for REGISTRY where it is given.
TOOL_STATIC = $(or $(CARGO_TARGET_DIR),$(ROOT)/target)/x86_64-unknown-linux-gnu/release/peermem
tool-static:
	cd $(ROOT) && RUSTFLAGS="-C target-feature=+crt-static" \
		cargo build --quiet --release --locked -p peermem --target x86_64-unknown-linux-gnu
image: dropin tool-static
	@$(ROOT)/scripts/image $(if $(REGISTRY),--registry $(REGISTRY)) $(BUILD)/nvidia-peermem/nvidia-peermem.ko $(TOOL_STATIC)
image-build-on-node: tool-static
	@$(ROOT)/scripts/image $(if $(REGISTRY),--registry $(REGISTRY)) --build-on-node $(TOOL_STATIC)

clean:
	rm -rf $(BUILD) target
