#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR MIT
#
# packaging/test-debian.sh: part debian-7.3 of make test. peermem on the kernel a
# distribution ships, as an admin meets it: Debian 13 (trixie) with the newest 7.3
# kernel of trixie-backports, built by Debian with gcc-14 and rustc 1.85.1, no KUnit,
# no Rust build files packaged. In a Debian 13 root (scripts/debian-root: debootstrap,
# Debian's own linux-headers, linux-binary and linux-source packages, trixie's gcc-14
# and rustc):
#   - the Rust build files made by `make lib-rust` (scripts/lib-rust) from
#     linux-source-7.3 and installed into the headers tree; it refuses, saying why,
#     another rustc (none installed), a source of another version, a linux-source
#     package of another version, and tools that change the kernel's .config (no pahole);
#   - without them, the build names each missing file and the command that makes them;
#   - a bare `make` (the running kernel's: the root's uname -r answers Debian's
#     release, as on a host booted from it) and `make dropin`, warnings as errors;
#   - both dkms packages of `make deb` installed with dpkg: dkms builds the module
#     with the kernel's compilers, without a warning;
#   - Debian's vmlinuz, exactly as linux-binary ships it, booted in QEMU with the fakes
#     and peermem built there (production build), and the dev-VM plan's checks that
#     need neither KUnit nor DMA-API debugging run (tests/qemu/plans/nokunit.manifest),
#     the peermem tool's doctor and status among them.
# What is installed or changed for a check lands in an overlay over the cached root
# (in a mount namespace of its own), except the Rust build files, which are kept there
# (rebuilt when scripts/lib-rust changes). Needs root, debootstrap, unshare, QEMU and
# Debian's archive. Last line: "N passed, N failed".
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VERSION=$(tr -d '[:space:]' < "$ROOT/VERSION")
. "$ROOT/packaging/check-lib.sh"

[ "$(id -u)" = 0 ] || { bad "prerequisites: not root"; finish; }
for c in debootstrap unshare chroot qemu-system-x86_64; do
	command -v $c >/dev/null || { bad "prerequisites: no $c (scripts/setup)"; finish; }
done
S=$(mktemp -d "${TMPDIR:-/var/tmp}/peermem-debian.XXXXXX")
trap 'rm -rf "$S"' EXIT
out=$ROOT/build/debian-7.3
mkdir -p "$out"

if ! droot=$("$ROOT/scripts/debian-root" 2>"$S/root.log"); then
	bad "a Debian 13 root (scripts/debian-root)"; tail -n 20 "$S/root.log"; finish
fi
read -r abi ver < <("$ROOT/scripts/debian-root" --versions)
kdir=/usr/src/linux-headers-$abi
echo "debian-7.3: Debian 13 root $droot"
sed 's/^/debian-7.3:   /' "$droot/.peermem-packages"

# in_root [--overlay] COMMAND...: COMMAND in the root, the clone at the same path, in
# a mount namespace of its own. --overlay: writes land in a fresh overlay ($S/ovl).
in_root() {
	local top=$droot
	if [ "$1" = --overlay ]; then
		shift
		rm -rf "$S/ovl"; mkdir -p "$S/ovl/up" "$S/ovl/work" "$S/ovl/merged"
		top=$S/ovl/merged
	fi
	unshare -m --propagation private bash -c '
		d=$1 top=$2 ovl=$3 repo=$4; shift 4
		if [ "$top" != "$d" ]; then
			mount -t overlay overlay -o "lowerdir=$d,upperdir=$ovl/up,workdir=$ovl/work" "$top" || exit 90
		fi
		mount -t proc proc "$top/proc" && mount --rbind /dev "$top/dev" &&
			mount -t tmpfs tmpfs "$top/tmp" && mkdir -p "$top$repo" && mount --bind "$repo" "$top$repo" || exit 90
		[ -z "${PEERMEM_IN_ROOT_SETUP:-}" ] || chroot "$top" /bin/sh -c "$PEERMEM_IN_ROOT_SETUP" || exit 90
		exec chroot "$top" /usr/bin/env -i PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
			DEBIAN_FRONTEND=noninteractive "$@"' in_root "$droot" "$top" "$S/ovl" "$ROOT" "$@"
}

# root_path PATH: PATH in the root with every link resolved there.
root_path() { chroot "$droot" realpath -m "$1"; }

# ---------------------------------------------------------------- make lib-rust
# Kept in the cached root (the files an admin's host keeps); made again when the
# script that makes them changes.
stamp=$(sha256sum "$ROOT/scripts/lib-rust" | cut -c1-16)
if [ "$(cat "$droot$kdir/rust/.peermem-lib-rust-stamp" 2>/dev/null)" != "$stamp" ]; then
	[ ! -f "$droot$kdir/rust/.peermem-lib-rust" ] || in_root "$ROOT/scripts/lib-rust" --kdir "$kdir" --uninstall >/dev/null
	t0=$(date +%s)
	in_root make -C "$ROOT" lib-rust KDIR="$kdir" >"$out/lib-rust.log" 2>&1
	rc=$?
	check "make lib-rust builds Debian's Rust build files ($(( $(date +%s) - t0 )) s)" test "$rc" -eq 0
	[ "$rc" -eq 0 ] && echo "$stamp" > "$droot$kdir/rust/.peermem-lib-rust-stamp" || tail -n 20 "$out/lib-rust.log"
else
	ok "make lib-rust: Debian's Rust build files are in the cached root (made by this scripts/lib-rust)"
fi
for f in rust/libkernel.rmeta rust/libcore.rmeta rust/libpin_init.rmeta rust/libzerocopy.rmeta \
	rust/libmacros.so rust/libzerocopy_derive.so scripts/target.json; do
	check "lib-rust installed $f" test -f "$droot$(root_path "$kdir/$f")"
done

# ---------------------------------------------------------------- refusals
# Each in an overlay whose change makes the case: what is asked for is named.
refusal() { # refusal NAME SETUP WANT... (SETUP: shell run in the overlay first)
	local name=$1 setup=$2 log; shift 2
	log=$(PEERMEM_IN_ROOT_SETUP=$setup in_root --overlay make -s -C "$ROOT" lib-rust KDIR="$kdir" 2>&1)
	local rc=$?
	check "lib-rust refuses: $name (exit $rc)" test "$rc" -ne 0 -a "$rc" -ne 90
	for w in "$@"; do has "lib-rust refuses: $name: says '$w'" "$log" "$w"; done
}
refusal "no rustc 1.85.1" "rm -f /usr/bin/rustc" \
	"missing rustc 1.85.1" "Debian package rustc (1.85.1"
# A source of another version (a tarball whose kernel is 7.3.3), handed in through the
# clone's bind mount.
mkdir -p "$S/src/linux-7.3.3"
printf 'kernelversion:\n\t@echo 7.3.3\n' > "$S/src/linux-7.3.3/Makefile"
tar -cJf "$out/linux-source-7.3.3.tar.xz" -C "$S/src" linux-7.3.3
log=$(in_root --overlay "$ROOT/scripts/lib-rust" --kdir "$kdir" --source "$out/linux-source-7.3.3.tar.xz" 2>&1)
rc=$?
rm -f "$out/linux-source-7.3.3.tar.xz"
check "lib-rust refuses: a source of another version (exit $rc)" test "$rc" -ne 0
has "lib-rust refuses: a source of another version: says which" "$log" "is Linux 7.3.3, the kernel of $kdir is 7.3.4"
refusal "a linux-source package of another version" \
	"sed -i '/^Package: linux-source-7.3\$/,/^\$/ s/^Version: .*/Version: 7.3.4-0/' /var/lib/dpkg/status" \
	"linux-source-7.3 is version 7.3.4-0, linux-headers-$abi is $ver: install linux-source-7.3=$ver"
refusal "no pahole: the kernel's .config does not hold" "rm -f /usr/bin/pahole" \
	"CONFIG_DEBUG_INFO_BTF" "the kernel's .config does not hold with these tools"

# ---------------------------------------------------------------- the build names what is missing
# The module's source as an admin has it (a copy: build outputs stay apart).
src=$out/src
# (cargo's objects, target/, are kept between runs.)
mkdir -p "$src"; find "$src" -mindepth 1 -maxdepth 1 ! -name target -exec rm -rf {} +
(cd "$ROOT" && tar --exclude=./build --exclude=./target --exclude=./.git -cf - .) |
	tar -xf - -C "$src"
k=$(root_path "$kdir")
tj=$(root_path "$kdir/scripts/target.json")
log=$(PEERMEM_IN_ROOT_SETUP="rm -f $k/rust/*.rmeta $k/rust/*.so $tj" in_root --overlay make -C "$src" KDIR="$kdir" 2>&1)
rc=$?
check "without the Rust build files the build fails (exit $rc)" test "$rc" -ne 0 -a "$rc" -ne 90
for w in rust/libkernel.rmeta rust/libmacros.so rust/libzerocopy_derive.so scripts/target.json "Debian: sudo make lib-rust"; do
	has "without the Rust build files the build names $w" "$log" "$w"
done
check "... and compiles nothing" bash -c "! ls '$src'/build/peermem/src/*.o >/dev/null 2>&1"

# ---------------------------------------------------------------- make, make dropin, dkms
# The crates the tool builds with, fetched by Debian's cargo into the cached root once
# per Cargo.lock: the builds below run offline from there, so that no run reaches the
# registry but the first after a change of Cargo.lock. (The root trusts the host's
# certificate authorities: scripts/debian-root.)
chome=/var/cache/peermem-cargo
cstamp=$(sha256sum "$ROOT/Cargo.lock" | cut -c1-16)
if [ "$(cat "$droot$chome/.peermem-stamp" 2>/dev/null)" != "$cstamp" ]; then
	cainfo=/etc/ssl/certs/peermem-host-ca.crt
	[ -f "$droot$cainfo" ] || cainfo=""
	in_root env CARGO_HOME=$chome ${cainfo:+CARGO_HTTP_CAINFO=$cainfo} \
		cargo fetch --locked --manifest-path "$src/Cargo.toml" >"$out/cargo-fetch.log" 2>&1
	# (Without them the offline make deb below fails, and its check with it.)
	if [ $? -eq 0 ]; then echo "$cstamp" > "$droot$chome/.peermem-stamp"
	else echo "debian-7.3: cargo fetch failed:"; tail -n 20 "$out/cargo-fetch.log"; fi
fi
# The running kernel of the root is Debian's: uname -r answers its release.
uname_setup="printf '#!/bin/sh\ncase \"\$1\" in -r) echo $abi ;; *) exec /usr/bin/uname \"\$@\" ;; esac\n' > /usr/local/bin/uname && chmod 755 /usr/local/bin/uname"
cat > "$out/builds.sh" <<EOF
set -u
cd "$src"
echo "== uname -r: \$(uname -r)"
make W=e >"$out/make.log" 2>&1; echo "== make: \$?"
make dropin W=e >"$out/make-dropin.log" 2>&1; echo "== make dropin: \$?"
# Debian's cargo (1.85) builds the tool, offline, from the crates of the cached root;
# its objects (target/) are kept between runs.
export CARGO_HOME=$chome CARGO_NET_OFFLINE=true
make deb >"$out/make-deb.log" 2>&1
echo "== make deb: \$?"
# The README's path without packages: make && sudo make install (the tool built by
# cargo again, its objects there already), with a Machine Owner Key set up, then make
# uninstall. Debian's Kbuild compresses the module (.ko.xz) and skips depmod (no
# System.map in the headers).
PEERMEM_SIGN_KEY=$out/mok.key PEERMEM_SIGN_CERT=$out/mok.der \
	make install >"$out/make-install.log" 2>&1; echo "== make install: \$?"
for f in /lib/modules/$abi/extra/peermem.ko.xz /etc/systemd/system/peermem.service /usr/local/sbin/peermem; do
	[ -e "\$f" ] && echo "== installed: \$f"
done
xz -dc /lib/modules/$abi/extra/peermem.ko.xz | tail -c 28 | grep -q "Module signature appended" && echo "== signed"
grep -q '^extra/peermem.ko.xz:' /lib/modules/$abi/modules.dep && echo "== depmod knows it"
make uninstall >>"$out/make-install.log" 2>&1; echo "== make uninstall: \$?"
[ -e /lib/modules/$abi/extra/peermem.ko.xz ] || echo "== uninstalled"
for p in peermem-dkms peermem-dropin-dkms; do
	dpkg -i "$src/build/deb/\${p}_${VERSION}_amd64.deb" >"$out/dpkg-\$p.log" 2>&1; echo "== dpkg -i \$p: \$?"
	dkms status >>"$out/dpkg-\$p.log" 2>&1
	find /var/lib/dkms -name make.log -exec cat {} + >"$out/dkms-\$p-make.log" 2>&1
	find /lib/modules/$abi -name '*peermem*.ko*' >>"$out/dpkg-\$p.log"
	dpkg --purge "\$p" >>"$out/dpkg-\$p.log" 2>&1; echo "== dpkg --purge \$p: \$?"
done
EOF
openssl req -new -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=peermem-test-mok \
	-keyout "$out/mok.key" -outform DER -out "$out/mok.der" >/dev/null 2>&1 || bad "a test Machine Owner Key (openssl)"
res=$(PEERMEM_IN_ROOT_SETUP=$uname_setup in_root --overlay bash "$out/builds.sh" 2>&1)
echo "$res" > "$out/builds.out"
expect "the root's running kernel is Debian's" "$(sed -n 's/^== uname -r: //p' <<<"$res")" "$abi"
expect "make deb with Debian's cargo $(sed 's/^/ /' "$droot/.peermem-packages" | awk '$1 == "cargo" {print $2}') exits 0" \
	"$(sed -n 's/^== make deb: //p' <<<"$res")" 0
[ "$(sed -n 's/^== make deb: //p' <<<"$res")" = 0 ] || tail -n 20 "$out/make-deb.log"
for step in "make" "make dropin"; do
	expect "$step W=e (warnings as errors) exits 0" "$(sed -n "s/^== $step: //p" <<<"$res")" 0
done
[ "$(sed -n 's/^== make: //p' <<<"$res")" = 0 ] || tail -n 20 "$out/make.log"
expect "sudo make install exits 0" "$(sed -n 's/^== make install: //p' <<<"$res")" 0
for f in /lib/modules/$abi/extra/peermem.ko.xz /etc/systemd/system/peermem.service /usr/local/sbin/peermem; do
	has "make install installed $f" "$res" "== installed: $f"
done
has "make install signed the compressed module with the Machine Owner Key" "$res" "== signed"
has "make install ran depmod (modules.dep lists the module)" "$res" "== depmod knows it"
expect "sudo make uninstall exits 0" "$(sed -n 's/^== make uninstall: //p' <<<"$res")" 0
has "make uninstall removed the module" "$res" "== uninstalled"
check "a bare make built peermem.ko" test -f "$src/build/peermem/peermem.ko"
check "make dropin built nvidia-peermem.ko" test -f "$src/build/nvidia-peermem/nvidia-peermem.ko"
expect "its vermagic is Debian's kernel's" "$(modinfo -F vermagic "$src/build/peermem/peermem.ko" 2>/dev/null | awk '{print $1}')" "$abi"
has "make built with Debian's gcc-14 and rustc" "$(cat "$out/make.log")" "CC=x86_64-linux-gnu-gcc-14 RUSTC=/usr/bin/rustc"
for p in peermem-dkms peermem-dropin-dkms; do
	expect "dpkg -i $p exits 0" "$(sed -n "s/^== dpkg -i $p: //p" <<<"$res")" 0
	mod=peermem; [ "$p" = peermem-dkms ] || mod=nvidia-peermem
	has "$p: dkms installed $mod.ko for $abi" "$(cat "$out/dpkg-$p.log")" "/lib/modules/$abi/updates/dkms/$mod.ko"
	has "$p: dkms built with the kernel's compilers" "$(cat "$out/dkms-$p-make.log")" "CC=x86_64-linux-gnu-gcc-14 RUSTC=/usr/bin/rustc"
	check "$p: the dkms build has no warning" bash -c "! grep -qiE 'warning:' '$out/dkms-$p-make.log'"
	expect "dpkg --purge $p exits 0" "$(sed -n "s/^== dpkg --purge $p: //p" <<<"$res")" 0
done

# ---------------------------------------------------------------- Debian's kernel booted
# The fakes and peermem built in the root for Debian's kernel (no KUnit: the fakes
# without their suites, peermem's production build), the tool from the host.
rm -rf "$out/stage"
if in_root env PEERMEM_BUILD="$out" "$ROOT/scripts/build-modules" --no-tool "$kdir" >"$out/build.log" 2>&1; then
	ok "the fakes and peermem build for Debian's kernel"
else
	bad "the fakes and peermem build for Debian's kernel"; tail -n 20 "$out/build.log"; finish
fi
tool=$ROOT/build/stage/peermem
[ -x "$tool" ] || (cd "$ROOT" && RUSTFLAGS="-C target-feature=+crt-static" \
	cargo build --quiet --release -p peermem --target x86_64-unknown-linux-gnu) && tool=${CARGO_TARGET_DIR:-$ROOT/target}/x86_64-unknown-linux-gnu/release/peermem
cp "$tool" "$out/stage/peermem"
files=()
for f in "$out"/stage/*; do files+=(--file "$f"); done
# Both vCPUs in one host thread: Debian's kernel live-patches its code at boot while its
# kdamond runs, and a vCPU in a host thread of its own may run the stale code
# (scripts/qemu-run).
"$ROOT/scripts/qemu-run" --image "$droot/usr/lib/modules/$abi/vmlinuz" --mem 2G --tcg-one-thread \
	--plan "$ROOT/tests/qemu/plans/test.sh" --log "$out/vm.log" \
	--timeout "${PEERMEM_VM_TIMEOUT:-900}" "${files[@]}" >/dev/null 2>&1
booted=$(grep -m 1 -o 'Linux version [^ ]*.*' "$out/vm.log" | tr -d '\r')
echo "debian-7.3: booted $booted"
has "QEMU booted Debian's kernel $abi, package version $ver" "$booted" "Linux version $abi"
has "... built by Debian with gcc-14" "$booted" "gcc-14"
has "... of package version $ver" "$booted" "Debian $ver"
vm_summary debian-7.3 tests/qemu/plans/nokunit.manifest "$out/vm.log"
finish
