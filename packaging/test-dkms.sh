#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR MIT
#
# packaging/test-dkms.sh [KDIR]: the dkms packages, peermem (peermem.ko) and
# peermem-dropin (nvidia-peermem.ko), through Debian's real dkms: scripts/install
# --dkms [--dropin], then dkms add, build, install, status and remove, against the
# kernel build tree KDIR (default: the dev kernel, which must be built) presented as
# /lib/modules/<release>/build. Checks that the modules are built with the compilers
# the kernel's .config names (scripts/kernel-toolchain; dkms's own CC=clang LD=ld.lld
# are overridden), land where dkms installs them under the right module name with the
# kernel's vermagic, that depmod resolves them, that a kernel without Rust is skipped,
# and that a missing compiler fails the build naming it.
#
# It runs in a mount namespace of its own (unshare --mount) where /usr/lib and /usr/src
# are overlays whose upper layers are in a temporary directory and /lib/modules and
# /var/lib/dkms empty directories of it: nothing outside that directory changes on the
# host, which the last check verifies. Needs root, dkms (scripts/setup installs it) and util-linux's
# unshare. The modules link against the test bed's fakes' Module.symvers
# (build/fakes/, scripts/build-modules) unless PEERMEM_OFA_SYMVERS /
# PEERMEM_NVIDIA_SYMVERS name others. Last line: "N passed, N failed".
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
VERSION=$(tr -d '[:space:]' < "$ROOT/VERSION")
. "$ROOT/packaging/check-lib.sh"

# ---------------------------------------------------------------- outside
if [ -z "${PEERMEM_DKMS_SCRATCH:-}" ]; then
	if [ $# -ge 1 ]; then
		kdir=$1
	else
		. "$ROOT/scripts/kernel-env"
		kdir=$(kernel_dir dev)
	fi
	kdir=$(cd "$kdir" 2>/dev/null && pwd -P) || kdir=$1
	ofa=${PEERMEM_OFA_SYMVERS:-$ROOT/build/fakes/ib_core/Module.symvers}
	nv=${PEERMEM_NVIDIA_SYMVERS:-$ROOT/build/fakes/nvidia-default/Module.symvers}
	why=
	[ "$(id -u)" = 0 ] || why="$why; not root (dkms and the mount namespace need it)"
	command -v dkms >/dev/null || why="$why; no dkms (scripts/setup installs it)"
	command -v unshare >/dev/null || why="$why; no unshare (util-linux)"
	[ -f "$kdir/.config" ] && [ -f "$kdir/include/config/kernel.release" ] ||
		why="$why; $kdir is not a built kernel tree (scripts/build-kernel dev)"
	[ -f "$ofa" ] && [ -f "$nv" ] || why="$why; no $ofa or $nv (scripts/build-modules)"
	if [ -n "$why" ]; then
		bad "prerequisites: ${why#; }"
		finish
	fi
	scratch=$(mktemp -d "${TMPDIR:-/tmp}/peermem-dkms.XXXXXX")
	trap 'rm -rf "$scratch"' EXIT
	# What the host has where dkms and depmod write, before and after.
	host_state() {
		local d
		for d in /lib/modules /usr/lib/modules /var/lib/dkms /usr/src /usr/lib/depmod.d \
			/etc/depmod.d /etc/modprobe.d /etc/dkms; do
			if [ -e "$d" ]; then find "$d" -maxdepth 3 -printf '%p %y %s %T@\n' 2>/dev/null | sort
			else echo "$d absent"; fi
		done
	}
	before=$(host_state)
	PEERMEM_DKMS_SCRATCH=$scratch PEERMEM_OFA_SYMVERS=$ofa PEERMEM_NVIDIA_SYMVERS=$nv \
		unshare --mount --propagation private "$0" "$kdir" | tee "$scratch/inner.out" |
		grep -vE '^[0-9]+ passed, [0-9]+ failed$'
	last=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$scratch/inner.out" | tail -n 1)
	if [ -n "$last" ]; then
		passed=${last%% *}; f=${last#*passed, }; failed=${f%% *}
	else
		bad "the test in its mount namespace ended early"
	fi
	after=$(host_state)
	if [ "$before" = "$after" ]; then ok "host: /lib/modules, /var/lib/dkms, /usr/src, depmod.d, modprobe.d unchanged"
	else bad "host: /lib/modules, /var/lib/dkms, /usr/src, depmod.d, modprobe.d unchanged"; diff <(echo "$before") <(echo "$after") | head -20; fi
	finish
fi

# ---------------------------------------------------------------- in the namespace
S=$PEERMEM_DKMS_SCRATCH
kdir=$1
kver=$(cat "$kdir/include/config/kernel.release")
arch=$(uname -m)
set -o pipefail
fatal() { bad "$1"; finish; }

# A kernel tree under /lib/modules stays reachable under the empty one below.
case $kdir in
/lib/modules/* | /usr/lib/modules/*)
	mkdir -p "$S/kernel"; mount --bind "$kdir" "$S/kernel" || fatal "namespace: bind $kdir"
	kdir=$S/kernel ;;
esac
# /usr/lib and /usr/src as overlays whose upper layers are here (writes land here;
# headers packages' trees under /usr/src stay visible), then empty directories over
# /lib/modules and /var/lib/dkms.
ns_scratch "$S" "$kdir" /usr/lib /usr/src
# depmod's configuration as scripts/install puts it in /etc/depmod.d (here the
# overlay's /usr/lib/depmod.d, which depmod reads too).
install -D -m 644 "$ROOT/packaging/depmod.d/peermem.conf" /usr/lib/depmod.d/peermem.conf

# Where dkms puts modules: Debian's and Ubuntu's (and Arch's) dkms ignore
# DEST_MODULE_LOCATION for /updates/dkms.
case " $(. /etc/os-release && echo "${ID:-} ${ID_LIKE:-}") " in
*" debian "* | *" ubuntu "* | *" arch "*) dest=/updates/dkms ;;
*" fedora "* | *" rhel "*) dest=/extra ;;
*" suse "* | *" opensuse "*) dest=/updates ;;
*) dest=/extra ;;
esac
toolchain=$("$ROOT/scripts/kernel-toolchain" "/lib/modules/$kver/build") ||
	fatal "kernel-toolchain finds the compilers of $kdir"
# The kernel's strings, its vermagic among them (read whole: grep -q closing a pipe
# early would fail it under pipefail).
[ -f "$kdir/vmlinux" ] && strings -n 8 "$kdir/vmlinux" > "$S/vmlinux.strings"
vermagic_ok() { # the module's vermagic is the kernel's: its release, and in vmlinux
	local vm
	vm=$(modinfo -F vermagic "$1") || return 1
	[ "${vm%% *}" = "$kver" ] || return 1
	[ -f "$S/vmlinux.strings" ] || return 0
	grep -qxF -- "$vm" "$S/vmlinux.strings"
}

# package NAME MODULE-FILE MODULE-NAME INSTALL-ARGS...: add, build, install one package.
package() {
	local pkg=$1 ko=$2 name=$3; shift 3
	local log=$S/$pkg.log tree=/var/lib/dkms/$pkg/$VERSION
	# Staged (the modprobe.d and depmod.d snippets must not reach the host's /etc),
	# then the package where scripts/install puts it.
	"$ROOT/scripts/install" --dkms "$@" --destdir "$S/stage-$pkg" >"$log" 2>&1
	check "$pkg: scripts/install --dkms${*:+ $*} lays out /usr/src/$pkg-$VERSION" \
		test -f "$S/stage-$pkg/usr/src/$pkg-$VERSION/dkms.conf"
	rm -rf "/usr/src/$pkg-$VERSION"
	cp -a "$S/stage-$pkg/usr/src/$pkg-$VERSION" /usr/src/
	check "$pkg: dkms add" dkms add "$pkg/$VERSION"
	dkms build "$pkg/$VERSION" -k "$kver" >>"$log" 2>&1
	local rc=$?
	expect "$pkg: dkms build exits 0" "$rc" 0
	[ "$rc" = 0 ] || { sed 's/^/     /' "$log" | tail -n 15; tail -n 30 "$tree/build/make.log" 2>/dev/null | sed 's/^/     /'; }
	expect "$pkg: dkms status: built" "$(dkms status "$pkg/$VERSION" -k "$kver")" "$pkg/$VERSION, $kver, $arch: built"
	local mlog=$tree/$kver/$arch/log/make.log
	check "$pkg: make.log: the kernel's make got the kernel's compilers ($toolchain)" grep -qF -- "$toolchain" "$mlog"
	check "$pkg: make.log: dkms's make command carried CC=clang LD=ld.lld (overridden)" \
		grep -q -- 'CC=clang LD=ld.lld' "$log"
	check "$pkg: make.log: no \"compiler differs from the one used to build the kernel\"" \
		bash -c "! grep -q 'compiler differs' '$mlog'"
	dkms install "$pkg/$VERSION" -k "$kver" >>"$log" 2>&1
	expect "$pkg: dkms install exits 0" "$?" 0
	expect "$pkg: dkms status: installed" "$(dkms status "$pkg/$VERSION" -k "$kver")" "$pkg/$VERSION, $kver, $arch: installed"
	local f=/lib/modules/$kver$dest/$ko.ko
	check "$pkg: $ko.ko in /lib/modules/$kver$dest/" test -f "$f"
	expect "$pkg: modinfo -F name" "$(modinfo -F name "$f" 2>&1)" "$name"
	check "$pkg: vermagic is the kernel's ($kver, as in its vmlinux)" vermagic_ok "$f"
	check "$pkg: the module links against the fakes' exports (depends: ib_core, nvidia)" \
		bash -c "modinfo -F depends '$f' | tr , '\n' | sort | tr '\n' ' ' | grep -qx 'ib_core nvidia '"
	expect "$pkg: depmod ran: modinfo -k $kver $name finds it" \
		"$(modinfo -k "$kver" -F filename "$name" 2>&1)" "$f"
}

# remove NAME MODULE-FILE MODULE-NAME
remove() {
	local pkg=$1 ko=$2 name=$3
	dkms remove "$pkg/$VERSION" --all >>"$S/$pkg.log" 2>&1
	expect "$pkg: dkms remove --all exits 0" "$?" 0
	expect "$pkg: dkms status: nothing" "$(dkms status "$pkg" 2>&1)" ""
	check "$pkg: $ko.ko removed" test ! -e "/lib/modules/$kver$dest/$ko.ko"
	check "$pkg: depmod ran: $name no longer in modules.dep" \
		bash -c "! grep -q '/$ko.ko:' '/lib/modules/$kver/modules.dep'"
}

package peermem peermem peermem
package peermem-dropin nvidia-peermem nvidia_peermem --dropin
check "both packages side by side: dkms status lists both, installed" bash -c \
	"[ \$(dkms status -k '$kver' | grep -c ': installed\$') = 2 ]"

# A MOFED/DOCA-OFED upgrade: the core's Module.symvers rewritten after the build, and
# packaging/dkms-core-upgrade run as the packages' dpkg trigger runs it. On a kernel
# with symbol versions the core's next release (other CRCs: PEERMEM_OFA_NEXT_SYMVERS,
# tests/fakes/ib_core FAKE_CORE_RELEASE=2) replaces it, and peermem.ko is rebuilt
# against it; on one without, it is kept.
f=/lib/modules/$kver$dest/peermem.ko
crc_of() { awk -v s=ib_register_peer_memory_client '$2 == s { print $1 }' "$@"; }
if grep -qx 'CONFIG_MODVERSIONS=y' "$kdir/.config"; then
	next=${PEERMEM_OFA_NEXT_SYMVERS:-}
	[ -f "$next" ] || fatal "core upgrade: no next release's Module.symvers (PEERMEM_OFA_NEXT_SYMVERS)"
	cp "$next" "$S/ofa.symvers"
	old=$(modprobe --dump-modversions "$f" | crc_of)
	check "core upgrade: the next release's CRC differs from the one peermem.ko records" \
		test "$old" != "$(crc_of "$next")"
	out=$(PEERMEM_OFA_SYMVERS=$S/ofa.symvers "/usr/src/peermem-$VERSION/packaging/dkms-core-upgrade" \
		peermem "$VERSION" peermem 2>&1)
	has "core upgrade: symbol versions: the trigger says it rebuilds" "$out" "$kver checks symbol versions: rebuilding"
	has "core upgrade: symbol versions: rebuilt" "$out" "rebuilt peermem.ko for $kver"
	expect "core upgrade: symbol versions: peermem.ko records the new core's CRC" \
		"$(modprobe --dump-modversions "$f" | crc_of)" "$(crc_of "$next")"
	out=$(PEERMEM_OFA_SYMVERS=$S/ofa.symvers "/usr/src/peermem-$VERSION/packaging/dkms-core-upgrade" \
		peermem "$VERSION" peermem 2>&1)
	expect "core upgrade: symbol versions: run again, the module newer than the core's: nothing said" "$out" ""
else
	cp "$PEERMEM_OFA_SYMVERS" "$S/ofa.symvers"
	sum=$(sha256sum < "$f")
	out=$(PEERMEM_OFA_SYMVERS=$S/ofa.symvers "/usr/src/peermem-$VERSION/packaging/dkms-core-upgrade" \
		peermem "$VERSION" peermem 2>&1)
	has "core upgrade: no symbol versions: the trigger says no rebuild is needed" "$out" \
		"$kver checks no symbol versions: no rebuild needed"
	expect "core upgrade: no symbol versions: peermem.ko kept" "$(sha256sum < "$f")" "$sum"
fi

# NVIDIA's own nvidia-peermem.ko in the kernel's tree (driver packages ship one, with
# the driver's version, higher than peermem's): Debian's dkms does not replace it
# (install exits 0; status warns), --force installs the drop-in, which depmod then
# prefers (updates/ before kernel/).
if [ "$dest" = /updates/dkms ]; then
	built=/var/lib/dkms/peermem-dropin/$VERSION/$kver/$arch/module/nvidia-peermem.ko
	high=$(tr 0-8 9 <<<"$VERSION")
	nvidia_ko=$S/nvidia-peermem-$high.ko
	versioned_copy "$built" "$nvidia_ko" "$VERSION" "$high"
	check "NVIDIA's module stand-in has version $high" test "$(modinfo -F version "$nvidia_ko")" = "$high"
	dkms uninstall "peermem-dropin/$VERSION" -k "$kver" >>"$S/nvidia.log" 2>&1
	install -D -m 644 "$nvidia_ko" "/lib/modules/$kver/kernel/drivers/video/nvidia-peermem.ko"
	depmod -a "$kver"
	out=$(dkms install "peermem-dropin/$VERSION" -k "$kver" 2>&1)
	echo "$out" >>"$S/nvidia.log"
	check "NVIDIA's nvidia-peermem.ko present: dkms install does not replace it" \
		test ! -e "/lib/modules/$kver$dest/nvidia-peermem.ko"
	check "NVIDIA's nvidia-peermem.ko present: dkms says why" grep -q "is not newer than what is already found" <<<"$out"
	dkms install --force "peermem-dropin/$VERSION" -k "$kver" >>"$S/nvidia.log" 2>&1
	check "NVIDIA's nvidia-peermem.ko present: dkms install --force installs the drop-in" \
		test -f "/lib/modules/$kver$dest/nvidia-peermem.ko"
	expect "NVIDIA's nvidia-peermem.ko present: after --force, modprobe's nvidia_peermem is the drop-in" \
		"$(modinfo -k "$kver" -F version nvidia_peermem 2>&1)" "$VERSION"
	rm "/lib/modules/$kver/kernel/drivers/video/nvidia-peermem.ko"
	depmod -a "$kver"

	# scripts/install's drop-in in extra/ against NVIDIA's dkms-built one in
	# updates/dkms/: the depmod.d override makes depmod take extra/ (a module tree of
	# its own, for depmod only).
	dk=$kver-depmod
	install -D -m 644 "$built" "/lib/modules/$dk/extra/nvidia-peermem.ko"
	install -D -m 644 "$nvidia_ko" "/lib/modules/$dk/updates/dkms/nvidia-peermem.ko"
	depmod -a "$dk" 2>/dev/null
	expect "depmod.d override: extra/nvidia-peermem.ko wins over updates/dkms/" \
		"$(modinfo -k "$dk" -F filename nvidia_peermem 2>&1)" "/lib/modules/$dk/extra/nvidia-peermem.ko"
	rm /usr/lib/depmod.d/peermem.conf
	depmod -a "$dk" 2>/dev/null
	expect "without the override, updates/dkms/ would win (the override is what decides)" \
		"$(modinfo -k "$dk" -F filename nvidia_peermem 2>&1)" "/lib/modules/$dk/updates/dkms/nvidia-peermem.ko"
	install -D -m 644 "$ROOT/packaging/depmod.d/peermem.conf" /usr/lib/depmod.d/peermem.conf
fi

# A kernel without Rust (a GCC-built one's .config) of a supported release: dkms
# skips the package.
nr=7.3.99-norust
mkdir -p "/lib/modules/$nr/build/include"
cp "$ROOT/tests/toolchain/gcc12-no-rust.config" "/lib/modules/$nr/build/.config"
out=$(dkms build "peermem/$VERSION" -k "$nr" 2>&1)
expect "kernel without Rust: dkms build exits 77 (BUILD_EXCLUSIVE_CONFIG)" "$?" 77
check "kernel without Rust: dkms says the package is not for it" grep -q "BUILD_EXCLUSIVE directive which does not match" <<<"$out"
# A kernel with Rust of a release outside SUPPORTED_KERNELS (Debian's former 7.2):
# skipped the same way, before any build (Kbuild would refuse it, failing the kernel
# package's configuration with the build).
ur=7.2.99+deb13-amd64
mkdir -p "/lib/modules/$ur/build/include"
cp "$ROOT/tests/toolchain/rustc197-missing.config" "/lib/modules/$ur/build/.config"
out=$(dkms build "peermem/$VERSION" -k "$ur" 2>&1)
expect "unsupported release: dkms build exits 77 (BUILD_EXCLUSIVE_KERNEL)" "$?" 77
check "unsupported release: dkms says the package is not for it" grep -q "BUILD_EXCLUSIVE directive which does not match" <<<"$out"
check "unsupported release: nothing was built" test ! -e "/var/lib/dkms/peermem/$VERSION/$ur/x86_64/log/make.log"

# A kernel whose rustc is not installed: the build fails, make.log names it.
mr=7.3.99-otherrustc
mkdir -p "/lib/modules/$mr/build/include"
cp "$ROOT/tests/toolchain/rustc197-missing.config" "/lib/modules/$mr/build/.config"
out=$(dkms build "peermem/$VERSION" -k "$mr" 2>&1)
check "missing rustc: dkms build fails" test $? -ne 0
mlog=/var/lib/dkms/peermem/$VERSION/build/make.log
check "missing rustc: make.log names it" grep -qF "missing rustc 1.97.0, the kernel's build: rustc 1.97.0" "$mlog"
check "missing rustc: make.log says the build stopped for it" grep -qF "no toolchain for the kernel at /lib/modules/$mr/build" "$mlog"
[ -f "$mlog" ] && sed -n '/kernel-toolchain:/p' "$mlog" | sed 's/^/     /'
expect "missing rustc: dkms status for that kernel: nothing built" \
	"$(dkms status "peermem/$VERSION" -k "$mr" 2>&1)" "peermem/$VERSION: added"

remove peermem peermem peermem
remove peermem-dropin nvidia-peermem nvidia_peermem
finish
