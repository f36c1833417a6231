#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR MIT
#
# packaging/test-ubuntu-tree.sh [KDIR]: peermem against an Ubuntu host's headers-only
# kernel tree. scripts/ubuntu-tree lays out, from the built 7.0 kernel KDIR (default:
# the 7.0 dev kernel, which must be built), Ubuntu's linux-headers-7.0.0-34,
# linux-headers-7.0.0-34-generic and linux-lib-rust-7.0.0-34-generic under a temporary
# root; then:
#   - the layout: the flavour tree's .config, Module.symvers, generated headers, host
#     programs, its rust link into linux-lib-rust and the crates' metadata there, the
#     Ubuntu kernel release, /lib/modules/<release>/build; no kernel sources (.c outside
#     scripts/, rust/kernel/*.rs); no dangling links;
#   - a C module (the fakes, tests/fakes) and a minimal Rust module build against it as
#     against KDIR itself;
#   - peermem.ko and nvidia-peermem.ko build with `make KDIR=<flavour tree>` against the
#     fakes' Module.symvers (KBUILD_EXTRA_SYMBOLS, as scripts/build-modules does), with
#     the tree's kernel release in their vermagic;
#   - the real dkms, both packages: packaging/test-dkms.sh with the tree at Ubuntu's
#     own paths (a mount namespace binds the temporary root's usr/src over /usr/src;
#     the kernel is /usr/src/linux-headers-7.0.0-34-generic);
#   - --no-rust (linux-headers without linux-lib-rust): the build fails and says what
#     is missing;
#   - a tree whose .config names a rustc that is not installed: the build fails naming
#     the kernel's rustc.
# The dkms part needs root, dkms and unshare (packaging/test-dkms.sh). Prints each
# part's time. Last line: "N passed, N failed"; exits non-zero on any failure.
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/packaging/check-lib.sh"
built() { # built NAME FILE LOG: FILE exists, else the end of LOG
	if [ -f "$2" ]; then ok "$1"; else bad "$1"; tail -n 15 <<<"$3" | sed 's/^/     /'; fi
}
t0=$SECONDS
lap() { local t=$((SECONDS - t0)); t0=$SECONDS; echo "     ($t s)"; }

if [ $# -ge 1 ]; then
	kdir=$1
else
	. "$ROOT/scripts/kernel-env"
	kdir=$(kernel_dir dev 7.0) || { bad "prerequisites: no 7.0 dev kernel (scripts/build-kernel dev 7.0)"; finish; }
fi
kdir=$(cd "$kdir" 2>/dev/null && pwd -P) || { bad "prerequisites: no directory $1"; finish; }
[ -f "$kdir/Module.symvers" ] && [ -f "$kdir/include/config/kernel.release" ] ||
	{ bad "prerequisites: $kdir is not a built kernel tree (scripts/build-kernel dev 7.0)"; finish; }

ABI=7.0.0-34
REL=$ABI-generic
T=$(mktemp -d "${TMPDIR:-/tmp}/peermem-utree.XXXXXX")
trap 'rm -rf "$T"' EXIT
DEST=$T/root
HDR=$DEST/usr/src/linux-headers-$REL
COMMON=$DEST/usr/src/linux-headers-$ABI
LIBRUST=$DEST/usr/src/linux-lib-rust-$REL
TC=$("$ROOT/scripts/kernel-toolchain" "$kdir") || { bad "prerequisites: the compilers of $kdir (scripts/kernel-toolchain)"; finish; }
# shellcheck disable=SC2206
TCA=($TC)
kmake() { make -C "$1" "${TCA[@]}" "${@:2}"; }

# ---------------------------------------------------------------- the tree
out=$("$ROOT/scripts/ubuntu-tree" "$kdir" "$DEST" "$ABI" 2>&1)
expect "ubuntu-tree: exits 0" "$?" 0
sed 's/^/     /' <<<"$out"
lap
for f in .config Module.symvers Makefile include/generated/autoconf.h include/generated/rustc_cfg \
	include/config/auto.conf arch/x86/include/generated/asm/cpufeaturemasks.h scripts/module.lds scripts/target.json; do
	check "flavour tree: $f, a file of its own" bash -c "[ -f '$HDR/$f' ] && [ ! -L '$HDR/$f' ]"
done
for f in scripts/basic/fixdep scripts/mod/modpost tools/objtool/objtool; do
	check "flavour tree: host program $f" test -x "$HDR/$f"
done
expect "flavour tree: kernel release" "$(cat "$HDR/include/config/kernel.release" 2>&1)" "$REL"
check "flavour tree: UTS_RELEASE \"$REL\"" grep -qx "#define UTS_RELEASE \"$REL\"" "$HDR/include/generated/utsrelease.h"
check "flavour tree: UTS_UBUNTU_RELEASE_ABI ${ABI##*-}" grep -qx "#define UTS_UBUNTU_RELEASE_ABI ${ABI##*-}" "$HDR/include/generated/utsrelease.h"
expect "flavour tree: include/linux links into the common tree" "$(readlink "$HDR/include/linux")" "../../linux-headers-$ABI/include/linux"
expect "flavour tree: scripts/Makefile.build links into the common tree" "$(readlink "$HDR/scripts/Makefile.build")" "../../linux-headers-$ABI/scripts/Makefile.build"
expect "flavour tree: rust -> linux-lib-rust (debian/scripts/link-lib-rust)" "$(readlink "$HDR/rust")" "../linux-lib-rust-$REL/rust"
for f in libcore.rmeta libcompiler_builtins.rmeta libkernel.rmeta libbindings.rmeta libuapi.rmeta libffi.rmeta \
	libbuild_error.rmeta libpin_init.rmeta libmacros.so libpin_init_internal.so; do
	check "linux-lib-rust: rust/$f" test -f "$LIBRUST/rust/$f"
done
check "linux-lib-rust: libmacros.so stripped" bash -c "! readelf -S '$LIBRUST/rust/libmacros.so' | grep -q '\.symtab'"
check "linux-lib-rust: rust/Makefile links into the common tree" test -f "$LIBRUST/rust/Makefile"
expect "/lib/modules/$REL/build is the flavour tree" "$(readlink -f "$DEST/lib/modules/$REL/build")" "$(readlink -f "$HDR")"
cs=$(cd "$DEST/usr/src" && find . -name '*.c' ! -path '*/scripts/*' | head -n 5)
expect "no kernel sources: no .c outside scripts/ (Ubuntu ships scripts/' host-program sources)" "$cs" ""
rs=$(cd "$DEST/usr/src" && find . -name '*.rs' ! -name '*generated*' ! -path '*/scripts/*' | head -n 5)
expect "no kernel sources: no .rs outside scripts/ but the generated bindings" "$rs" ""
ob=$(cd "$DEST" && find . \( -name '*.o' -o -name '.*.cmd' \) | head -n 5)
expect "no build artefacts (.o, .cmd)" "$ob" ""
# scripts/kernel-doc -> ../tools/docs/kernel-doc dangles in Ubuntu's package too
# (scripts/ is copied whole, tools/docs/ not at all).
dl=$(cd "$DEST" && find -L . -type l ! -name kernel-doc 2>/dev/null | head -n 5)
expect "no dangling links (but scripts/kernel-doc, as in Ubuntu's package)" "$dl" ""
echo "     size: $(du -sh --apparent-size "$COMMON" | cut -f1) common, $(du -sh --apparent-size "$HDR" | cut -f1) flavour, $(du -sh --apparent-size "$LIBRUST" | cut -f1) lib-rust (apparent); $(du -sh "$DEST" | cut -f1) on disk"
lap

# ---------------------------------------------------------------- modules against it
# The fakes (C): ib_core and nvidia, whose Module.symvers peermem links against.
fakes=
for f in ib_core:ib_core nvidia-default:nvidia; do
	mo=$T/fakes/${f%%:*} m=${f#*:}
	mkdir -p "$mo"
	log=$(kmake "$HDR" -s M="$ROOT/tests/fakes/$m" MO="$mo" FAKE_NV_VARIANT=default modules 2>&1)
	built "C module against the tree: tests/fakes/$m ($m.ko)" "$mo/$m.ko" "$log"
	fakes="$fakes $mo/Module.symvers"
done
fakes=${fakes# }
# The core's next release (other CRCs), for the dkms part's MOFED upgrade.
mkdir -p "$T/fakes/ib_core-25.10"
log=$(kmake "$HDR" -s M="$ROOT/tests/fakes/ib_core" MO="$T/fakes/ib_core-25.10" FAKE_CORE_RELEASE=2 \
	FAKE_CORE_VERSION=25.10 FAKE_CORE_SUITES=0 modules 2>&1)
built "C module against the tree: tests/fakes/ib_core, the next release" "$T/fakes/ib_core-25.10/ib_core.ko" "$log"
expect "C module: vermagic is the tree's release" "$(modinfo -F vermagic "$T/fakes/ib_core/ib_core.ko" 2>&1 | cut -d' ' -f1)" "$REL"
lap
# A minimal Rust module, against KDIR and against the tree.
mkdir -p "$T/hello"
echo 'obj-m := rust_hello.o' > "$T/hello/Kbuild"
cat > "$T/hello/rust_hello.rs" <<'EOF'
// SPDX-License-Identifier: GPL-2.0
//! A minimal out-of-tree Rust module.
use kernel::prelude::*;

module! {
    type: Hello,
    name: "rust_hello",
    authors: ["peermem"],
    description: "out-of-tree Rust module against a headers tree",
    license: "GPL",
}

struct Hello;

impl kernel::Module for Hello {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        pr_info!("hello\n");
        Ok(Hello)
    }
}
EOF
for k in full:"$kdir" tree:"$HDR"; do
	mo=$T/hello-${k%%:*}
	mkdir -p "$mo"
	log=$(kmake "${k#*:}" M="$T/hello" MO="$mo" modules 2>&1)
	built "Rust module (module!) against the $([ "${k%%:*}" = full ] && echo "full kernel tree" || echo "headers-only tree")" \
		"$mo/rust_hello.ko" "$log"
done
expect "Rust module: vermagic is the tree's release" "$(modinfo -F vermagic "$T/hello-tree/rust_hello.ko" 2>&1 | cut -d' ' -f1)" "$REL"
lap

# peermem, through the project's Makefile (scripts/kernel-toolchain reads the tree's .config).
log=$(make -C "$ROOT" KDIR="$HDR" BUILD="$T/build" KBUILD_EXTRA_SYMBOLS="$fakes" modules dropin 2>&1)
rc=$?
expect "peermem: make KDIR=<flavour tree> modules dropin exits 0" "$rc" 0
[ "$rc" = 0 ] || { grep -E 'error|warning: unused|\*\*\*' <<<"$log" | head -n 30 | sed 's/^/     /'; }
for k in peermem/peermem:peermem nvidia-peermem/nvidia-peermem:nvidia_peermem; do
	ko=$T/build/${k%%:*}.ko
	check "peermem: ${ko##*/} built" test -f "$ko"
	expect "peermem: ${ko##*/}: vermagic is the tree's release" "$(modinfo -F vermagic "$ko" 2>&1 | cut -d' ' -f1)" "$REL"
	expect "peermem: ${ko##*/}: name" "$(modinfo -F name "$ko" 2>&1)" "${k#*:}"
	expect "peermem: ${ko##*/}: links against the fakes (depends)" "$(modinfo -F depends "$ko" 2>&1 | tr , '\n' | sort | tr '\n' ' ')" "ib_core nvidia "
done
lap

# ---------------------------------------------------------------- dkms
# packaging/test-dkms.sh with the tree where Ubuntu has it: in a mount namespace of its
# own the temporary root's usr/src is /usr/src, and the kernel
# /usr/src/linux-headers-<release> (test-dkms.sh links /lib/modules/<release>/build to it).
if [ "$(id -u)" = 0 ] && command -v dkms >/dev/null && command -v unshare >/dev/null; then
	out=$(PEERMEM_OFA_SYMVERS=$T/fakes/ib_core/Module.symvers PEERMEM_NVIDIA_SYMVERS=$T/fakes/nvidia-default/Module.symvers \
		PEERMEM_OFA_NEXT_SYMVERS=$T/fakes/ib_core-25.10/Module.symvers \
		unshare --mount --propagation private bash -c 'mount --bind "$1/usr/src" /usr/src && exec "$2" "/usr/src/linux-headers-$3"' \
		- "$DEST" "$ROOT/packaging/test-dkms.sh" "$REL" 2>"$T/dkms.err")
	grep -vE '^[0-9]+ passed, [0-9]+ failed$' <<<"$out" | sed -E 's/^(ok   |FAIL )/\1dkms: /'
	last=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' <<<"$out" | tail -n 1)
	if [ -n "$last" ]; then
		p=${last%% *}; f=${last#*passed, }; f=${f%% *}
		passed=$((passed + p)); failed=$((failed + f))
	else
		bad "dkms: packaging/test-dkms.sh ended early"
		tail -n 15 "$T/dkms.err" | sed 's/^/     /'
	fi
else
	bad "dkms: prerequisites: root, dkms and unshare (packaging/test-dkms.sh)"
fi
lap

# ---------------------------------------------------------------- no linux-lib-rust
NR=$T/norust
out=$("$ROOT/scripts/ubuntu-tree" --no-rust "$kdir" "$NR" "$ABI" 2>&1)
expect "--no-rust: ubuntu-tree exits 0" "$?" 0
NHDR=$NR/usr/src/linux-headers-$REL
check "--no-rust: no linux-lib-rust" test ! -e "$NR/usr/src/linux-lib-rust-$REL"
check "--no-rust: the rust link dangles, as on a host without linux-lib-rust" bash -c "[ -L '$NHDR/rust' ] && [ ! -e '$NHDR/rust' ]"
mkdir -p "$T/hello-norust"
log=$(kmake "$NHDR" M="$T/hello" MO="$T/hello-norust" modules 2>&1)
check "--no-rust: the Rust module does not build" test $? -ne 0
grep -m 3 -E '^error' <<<"$log" | sed 's/^/     rustc says: /'
log=$(make -C "$ROOT" KDIR="$NHDR" BUILD="$T/build-norust" KBUILD_EXTRA_SYMBOLS="$fakes" modules 2>&1)
check "--no-rust: make KDIR= modules fails" test $? -ne 0
grep -m 3 -E '^error|Rust metadata' <<<"$log" | sed 's/^/     make says: /'
has "--no-rust: the failure names the missing Rust metadata" "$log" "rust/libkernel.rmeta"
has "--no-rust: the failure names Ubuntu's package" "$log" "linux-lib-rust-$REL"
lap

# ---------------------------------------------------------------- the kernel's rustc missing
# Ubuntu 26.04's kernels are built with its rustc 1.93 (not installed here): the same
# tree, its .config naming that rustc.
MR=$DEST/usr/src/linux-headers-$ABI-rustc193
cp -a "$HDR" "$MR"
want_text="rustc 1.93.1 (01f6ddf75 2026-02-11) (built from a source tarball)"
sed -i -e "s/^CONFIG_RUSTC_VERSION=.*/CONFIG_RUSTC_VERSION=109301/" \
	-e "s/^CONFIG_RUSTC_VERSION_TEXT=.*/CONFIG_RUSTC_VERSION_TEXT=\"$want_text\"/" "$MR/.config"
err=$(PEERMEM_APT_CACHE=none "$ROOT/scripts/kernel-toolchain" "$MR" 2>&1 >/dev/null)
check "rustc 1.93.1 missing: kernel-toolchain fails" test $? -eq 1
has "rustc 1.93.1 missing: kernel-toolchain names the kernel's rustc" "$err" "missing rustc 1.93.1, the kernel's build: $want_text"
log=$(PEERMEM_APT_CACHE=none make -C "$ROOT" KDIR="$MR" BUILD="$T/build-rustc" KBUILD_EXTRA_SYMBOLS="$fakes" modules 2>&1)
check "rustc 1.93.1 missing: make KDIR= modules fails" test $? -ne 0
has "rustc 1.93.1 missing: make says which rustc" "$log" "missing rustc 1.93.1, the kernel's build: $want_text"
has "rustc 1.93.1 missing: make says the build stopped for it" "$log" "no toolchain for the kernel at $MR"
grep -m 1 'missing rustc' <<<"$log" | sed 's/^/     /'
lap

finish
