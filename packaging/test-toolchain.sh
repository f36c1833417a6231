#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR MIT
#
# packaging/test-toolchain.sh: scripts/kernel-toolchain and the Makefile's use of it,
# on the recorded .config fixtures of tests/toolchain/ with stub compilers (scripts
# printing the version texts; PEERMEM_TOOLCHAIN_PATH points at them, PEERMEM_APT_CACHE
# at a stub apt-cache), and on the dev kernel's own .config with the installed
# compilers when that kernel is built. Needs no root. Last line: "N passed, N failed".
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
FIX=$ROOT/tests/toolchain
KT=$ROOT/scripts/kernel-toolchain
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
. "$ROOT/packaging/check-lib.sh"
# expect NAME GOT WANT
# has NAME TEXT PATTERN (fixed string)
has() {
	if grep -qF -- "$3" <<<"$2"; then ok "$1"; else bad "$1"; echo "     no '$3' in:"; sed 's/^/       /' <<<"$2"; fi
}

# kdir FIXTURE: a directory with the fixture as its .config.
kdir() { mkdir -p "$TMP/k/$1"; cp "$FIX/$1.config" "$TMP/k/$1/.config"; echo "$TMP/k/$1"; }
# stub DIR NAME VERSION-TEXT: an executable printing VERSION-TEXT for --version (and
# the number for gcc's -dumpversion).
stub() {
	mkdir -p "$1"
	printf '#!/bin/sh\ncase "$1" in -dumpversion) echo "%s" | sed "s/.* \\([0-9][0-9.]*\\)$/\\1/" ;; *) echo "%s" ;; esac\n' "$3" "$3" > "$1/$2"
	chmod +x "$1/$2"
}

RUSTC_WEB="rustc 1.96.0 (ac68faa20 2026-05-25) (built from a source tarball)"
RUSTC_UP="rustc 1.96.0 (ac68faa20 2026-05-25)"
CLANG19="Debian clang version 19.1.7 (3~deb12u1)"
LLD19="Debian LLD 19.1.7 (compatible with GNU linkers)"
llvm_tools() { # llvm_tools DIR SUFFIX
	local t
	for t in llvm-ar llvm-nm llvm-objcopy llvm-objdump llvm-readelf llvm-strip; do stub "$1" "$t$2" "LLVM version 19.1.7"; done
}

# Debian-like: versioned LLVM 19, rustc-web's rustc and rustdoc in one directory.
deb=$TMP/deb
stub "$deb" clang-19 "$CLANG19"; stub "$deb" ld.lld-19 "$LLD19"; llvm_tools "$deb" -19
stub "$deb" rustc "$RUSTC_WEB"; stub "$deb" rustdoc "rustdoc 1.96.0 (ac68faa20 2026-05-25) (built from a source tarball)"
stub "$deb" gcc-12 "gcc-12 (Debian 12.2.0-14) 12.2.0"
# apt knows rustc-web 1.96 and a versioned rustc-1.97.
apt=$TMP/apt-cache
cat > "$apt" <<'EOF'
#!/bin/sh
case "$2" in
rustc-web) printf 'rustc-web:\n  Installed: 1.96.0+dfsg1-1~deb12u2\n  Candidate: 1.96.0+dfsg1-1~deb12u2\n' ;;
rustc-1.97) printf 'rustc-1.97:\n  Installed: (none)\n  Candidate: 1.97.0+dfsg1-2\n' ;;
rustc) printf 'rustc:\n  Installed: (none)\n  Candidate: 1.63.0+dfsg1-2\n' ;;
esac
EOF
chmod +x "$apt"
export PEERMEM_APT_CACHE=$apt
unset LLVM RUSTC
# run PATHS FIXTURE-KDIR [VAR=VALUE...]: kernel-toolchain's stdout; stderr in $TMP/err.
run() {
	local path=$1 k=$2; shift 2
	env "$@" PEERMEM_TOOLCHAIN_PATH="$path" "$KT" "$k" 2>"$TMP/err"
}

# 1. The dev kernel's compiler lines, the compilers installed Debian's way.
k=$(kdir clang19-rustc196)
got=$(run "$deb" "$k"); rc=$?
expect "clang 19 + rustc-web: exit 0" "$rc" 0
expect "clang 19 + rustc-web: LLVM=-19, CC/LD, rustc and rustdoc" "$got" \
	"LLVM=-19 CC=clang-19 LD=ld.lld-19 RUSTC=$deb/rustc RUSTDOC=$deb/rustdoc"
got=$(run "$deb" "$k" LLVM=-18 RUSTC=/opt/rust/bin/rustc)
expect "given LLVM= and RUSTC= are taken as they are" "$got" \
	"LLVM=-18 CC=clang-18 LD=ld.lld-18 RUSTC=/opt/rust/bin/rustc"
got=$(run "$deb" "$k" LLVM=/usr/lib/llvm-19/bin/)
expect "a given LLVM= prefix makes CC and LD paths" "$got" \
	"LLVM=/usr/lib/llvm-19/bin/ CC=/usr/lib/llvm-19/bin/clang LD=/usr/lib/llvm-19/bin/ld.lld RUSTC=$deb/rustc RUSTDOC=$deb/rustdoc"
got=$(run "$deb" "$k" RUSTC=rustc-nowhere); rc=$?
expect "a given RUSTC= is not checked" "$rc/$got" "0/LLVM=-19 CC=clang-19 LD=ld.lld-19 RUSTC=rustc-nowhere"
# The test bed's User-Mode Linux kernel (CONFIG_UML=y): the same compilers, and ARCH=um,
# which the kernel's make does not guess for its modules.
mkdir -p "$TMP/k/uml"
{ cat "$FIX/clang19-rustc196.config"; echo CONFIG_UML=y; } > "$TMP/k/uml/.config"
got=$(run "$deb" "$TMP/k/uml"); rc=$?
expect "a UML kernel: ARCH=um first" "$rc/$got" \
	"0/ARCH=um LLVM=-19 CC=clang-19 LD=ld.lld-19 RUSTC=$deb/rustc RUSTDOC=$deb/rustdoc"

# Unversioned names of the right major: LLVM=1.
un=$TMP/unversioned
stub "$un" clang "$CLANG19"; stub "$un" ld.lld "$LLD19"; llvm_tools "$un" ""; stub "$un" rustc "$RUSTC_WEB"
got=$(run "$un" "$k")
expect "unversioned clang/ld.lld 19: LLVM=1" "$got" "LLVM=1 CC=clang LD=ld.lld RUSTC=$un/rustc"
# Unversioned names of another major: clang 19 is missing.
old=$TMP/old
stub "$old" clang "Debian clang version 14.0.6"; stub "$old" ld.lld "Debian LLD 14.0.6 (compatible with GNU linkers)"
llvm_tools "$old" ""; stub "$old" rustc "$RUSTC_WEB"
got=$(run "$old" "$k"); rc=$?; err=$(cat "$TMP/err")
expect "clang 14 only: exit 1, nothing on stdout" "$rc/$got" "1/"
has "clang 14 only: names clang 19 and its package" "$err" "missing clang 19: Debian package clang-19"
# Versioned clang without lld and LLVM's tools.
part=$TMP/partial
stub "$part" clang-19 "$CLANG19"; stub "$part" rustc "$RUSTC_WEB"
got=$(run "$part" "$k"); rc=$?; err=$(cat "$TMP/err")
expect "clang-19 without lld-19: exit 1" "$rc/$got" "1/"
has "clang-19 without lld-19: names ld.lld and lld-19" "$err" "missing ld.lld 19 (ld.lld-19): Debian package lld-19"
has "clang-19 without llvm-19: names llvm-ar-19 and llvm-19" "$err" "llvm-ar-19 llvm-nm-19 llvm-objcopy-19 llvm-objdump-19 llvm-readelf-19 llvm-strip-19: Debian package llvm-19"

# A rustup proxy named rustc is never the compiler; rustup's toolchains are searched.
rp=$TMP/rustup-proxy
mkdir -p "$rp/toolchains/1.96.0/bin"
stub "$rp/toolchains/1.96.0/bin" rustc "$RUSTC_UP"
cat > "$rp/rustup" <<EOF
#!/bin/sh
case "\$1" in
toolchain) echo "1.96.0-x86_64-unknown-linux-gnu (default)" ;;
which) [ "\$3" = 1.96.0-x86_64-unknown-linux-gnu ] && echo "$rp/toolchains/1.96.0/bin/rustc" ;;
*) echo "rustc 9.9.9 (proxy)" ;;
esac
EOF
chmod +x "$rp/rustup"; ln -s rustup "$rp/rustc"
stub "$rp" clang-19 "$CLANG19"; stub "$rp" ld.lld-19 "$LLD19"; llvm_tools "$rp" -19
got=$(run "$rp" "$k"); rc=$?; err=$(cat "$TMP/err")
expect "rustup's 1.96.0 for a rustc-web kernel: exit 1" "$rc/$got" "1/"
has "rustup's 1.96.0 for a rustc-web kernel: another build, named" "$err" \
	"installed, but another build of 1.96.0, which the kernel's crates do not load with: $rp/toolchains/1.96.0/bin/rustc ($RUSTC_UP)"
has "rustup's 1.96.0 for a rustc-web kernel: names rustc-web" "$err" "Debian package rustc-web (1.96.0+dfsg1-1~deb12u2)"

# 2. A rustc that is not installed: named, with the package apt has for it.
k=$(kdir rustc197-missing)
got=$(run "$deb" "$k"); rc=$?; err=$(cat "$TMP/err")
expect "rustc 1.97 missing: exit 1, nothing on stdout" "$rc/$got" "1/"
has "rustc 1.97 missing: names the kernel's build" "$err" \
	"missing rustc 1.97.0, the kernel's build: rustc 1.97.0 (3f1b7e2c0 2026-07-06) (built from a source tarball)"
has "rustc 1.97 missing: names the Debian package apt has" "$err" "Debian package rustc-1.97 (1.97.0+dfsg1-2)"
has "rustc 1.97 missing: the way out" "$err" "install them, or give LLVM= / RUSTC= to make"
got=$(run "$deb" "$k" PEERMEM_APT_CACHE=none); err=$(cat "$TMP/err")
has "rustc 1.97 missing, no apt: names the packages to look for" "$err" \
	"Debian: rustc-web or rustc-1.97; apt-cache policy rustc-web rustc-1.97"
expect "rustc 1.97 missing: the compilers found are not the error" "$(grep -c "^kernel-toolchain:   missing " <<<"$err")" 1

# 3. GCC-built kernel without Rust: a clear refusal.
k=$(kdir gcc12-no-rust)
got=$(run "$deb" "$k"); rc=$?; err=$(cat "$TMP/err")
expect "GCC kernel without Rust: exit 1, nothing on stdout" "$rc/$got" "1/"
has "GCC kernel without Rust: says so" "$err" "has no Rust support (CONFIG_RUST is not set in its .config; built with gcc-12 (Debian 12.2.0-14) 12.2.0)"
has "GCC kernel without Rust: what is needed" "$err" "it needs a kernel built with CONFIG_RUST=y"

# 4. GCC-built kernel with Rust, rustc from rustup: gcc-12, rustup's toolchain.
k=$(kdir gcc12-rustup196)
cp -r "$rp" "$TMP/rp2"; sed -i "s|$rp|$TMP/rp2|g" "$TMP/rp2/rustup"; stub "$TMP/rp2" gcc-12 "gcc-12 (Debian 12.2.0-14) 12.2.0"
got=$(run "$TMP/rp2" "$k")
expect "GCC kernel with rustup's rustc: CC=gcc-12, the toolchain's rustc" "$got" \
	"CC=gcc-12 RUSTC=$TMP/rp2/toolchains/1.96.0/bin/rustc"
got=$(run "$deb" "$k"); rc=$?; err=$(cat "$TMP/err")
has "GCC kernel, rustup build missing: names the rustup toolchain" "$err" "rustup toolchain install 1.96.0"
has "GCC kernel, rustup build missing: rustc-web is another build" "$err" "another build of 1.96.0"
g=$TMP/gcc-other
stub "$g" gcc "gcc (Debian 10.2.1-6) 10.2.1"; stub "$g" rustc "$RUSTC_UP"
got=$(run "$g" "$k"); err=$(cat "$TMP/err")
has "GCC kernel, gcc 10 only: names gcc 12 and its package" "$err" "missing gcc 12: Debian package gcc-12"

# 4b. Debian 13's kernel: gcc-14 by the name it was built with (its --version is then
# CONFIG_CC_VERSION_TEXT to the letter), trixie's rustc 1.85.1.
k=$(kdir debian13-gcc14-rustc185)
d13=$TMP/debian13
stub "$d13" x86_64-linux-gnu-gcc-14 "x86_64-linux-gnu-gcc-14 (Debian 14.2.0-19) 14.2.0"
stub "$d13" gcc-14 "gcc-14 (Debian 14.2.0-19) 14.2.0"
stub "$d13" rustc "rustc 1.85.1 (4eb161250 2025-03-15) (built from a source tarball)"
got=$(run "$d13" "$k")
expect "Debian 13's kernel: x86_64-linux-gnu-gcc-14 as it was built, trixie's rustc" "$got" \
	"CC=x86_64-linux-gnu-gcc-14 RUSTC=$d13/rustc"
rm "$d13/x86_64-linux-gnu-gcc-14"
got=$(run "$d13" "$k")
expect "Debian 13's kernel without that name: gcc-14" "$got" "CC=gcc-14 RUSTC=$d13/rustc"

# 5. Not a build tree.
mkdir -p "$TMP/k/empty"
run "$deb" "$TMP/k/empty" >/dev/null; rc=$?
expect "no .config: exit 2" "$rc" 2
has "no .config: says so" "$(cat "$TMP/err")" "no .config (not a kernel build tree)"

# 6. The Makefile: the same variables for the kernel's make, a given LLVM= wins, a
# missing compiler stops the build with the script's message.
k=$TMP/k/clang19-rustc196
mk() { env PEERMEM_TOOLCHAIN_PATH="$1" make -s --no-print-directory -C "$ROOT" toolchain "${@:2}" 2>&1; }
expect "make toolchain KDIR=: the script's line" "$(mk "$deb" KDIR="$k")" \
	"LLVM=-19 CC=clang-19 LD=ld.lld-19 RUSTC=$deb/rustc RUSTDOC=$deb/rustdoc"
expect "make toolchain KDIR= LLVM=-18: the command line wins" "$(mk "$deb" KDIR="$k" LLVM=-18)" \
	"LLVM=-18 CC=clang-18 LD=ld.lld-18 RUSTC=$deb/rustc RUSTDOC=$deb/rustdoc"
expect "make toolchain KDIR= with LLVM in the environment: it wins" "$(LLVM=1 mk "$deb" KDIR="$k")" \
	"LLVM=1 CC=clang LD=ld.lld RUSTC=$deb/rustc RUSTDOC=$deb/rustdoc"
expect "make toolchain KDIR= RUSTC=: the command line wins" "$(mk "$deb" KDIR="$k" RUSTC=/opt/rustc)" \
	"LLVM=-19 CC=clang-19 LD=ld.lld-19 RUSTC=/opt/rustc"
out=$(mk "$deb" KDIR="$TMP/k/rustc197-missing"); rc=$?
check "make with a missing rustc: fails" test "$rc" -ne 0
has "make with a missing rustc: the script's message" "$out" "missing rustc 1.97.0"
has "make with a missing rustc: stops" "$out" "no toolchain for the kernel at $TMP/k/rustc197-missing, see above.  Stop."
out=$(mk "$deb" KDIR="$TMP/k/gcc12-no-rust"); rc=$?
check "make for a kernel without Rust: fails" test "$rc" -ne 0
has "make for a kernel without Rust: says so" "$out" "has no Rust support"
# Without KDIR: the running kernel's build tree (a host's default), here under a
# KVER whose tree does not exist, so the build stops naming the packages.
out=$(mk "$deb" KVER=7.0.0-99-generic); rc=$?
check "make toolchain without KDIR: fails when the running kernel has no build tree" test "$rc" -ne 0
has "make toolchain without KDIR: names the running kernel's tree and packages" "$out" \
	"no kernel build tree at /lib/modules/7.0.0-99-generic/build for the running kernel 7.0.0-99-generic: install its headers (Debian: linux-headers-7.0.0-99-generic; Ubuntu: linux-headers-7.0.0-99-generic and linux-lib-rust-7.0.0-99-generic), or give KDIR= a kernel build tree."
out=$(mk "$deb" KDIR="$TMP/k/absent"); rc=$?
check "make toolchain KDIR=absent: fails" test "$rc" -ne 0
has "make toolchain KDIR=absent: says so" "$out" "no kernel build tree at $TMP/k/absent: give KDIR= a kernel build tree."

# 7. The dev kernel's .config with the compilers installed here: what it was built with.
. "$ROOT/scripts/kernel-env"
dev=$(kernel_dir dev 2>/dev/null)
if [ -f "$dev/.config" ]; then
	unset PEERMEM_TOOLCHAIN_PATH
	expect "dev kernel: the installed rustc-web and LLVM 19" "$("$KT" "$dev" 2>&1)" \
		"LLVM=-19 CC=clang-19 LD=ld.lld-19 RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc RUSTFMT=/usr/bin/rustfmt CLIPPY_DRIVER=/usr/bin/clippy-driver"
	check "dev kernel: the fixture is its .config's compiler lines" bash -c \
		"grep '^CONFIG_' '$FIX/clang19-rustc196.config' | while IFS= read -r l; do grep -qxF -- \"\$l\" '$dev/.config' || exit 1; done"
else
	echo "skip dev kernel checks: no $dev/.config (scripts/build-kernel dev builds it)"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
