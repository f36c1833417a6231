#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR MIT
#
# packaging/test-host.sh: part host of make test. A whole GPU node: the Debian 13 disk
# of scripts/node-image (Debian's 7.3 backports kernel installed from its packages,
# systemd as init), with the test doubles installed from packages of their own
# (tests/node/double-debs: the nvidia.ko double as NVIDIA's dkms package, the core
# double as MOFED's, with the openibd stand-in) and peermem's own packages of
# `make deb`, booted in QEMU with Debian's vmlinuz and initramfs. Package
# operations (dpkg, apt, dkms, the kernel's hooks) run in the node's root at native
# speed before and between the boots (the disk mounted here); what happens at boot and
# among the services is checked inside the booted node (tests/node/checks). Each check
# is named with its scenario:
#   packages        the doubles and peermem installed with dpkg, built by dkms
#   MOFED upgrade   the core double's package upgraded (25.07 -> 25.10, one export
#                   more): peermem not rebuilt (in the root), and loaded with it at
#                   boot 1, doctor saying no rebuild is needed
#   unsupported kernel  a second kernel of a release peermem does not support
#                   (Debian's 7.2 backports kernel, with its headers) installed with apt:
#                   dkms builds the doubles for it and skips peermem with one line, apt
#                   exits 0 with every package configured (in the root); doctor warns,
#                   advising a supported kernel, not dkms (boot 1)
#   boot            in order at boot, registered, doctor, metrics (boot 1)
#   openibd restart with peermem loaded, and without its unit, failing (boot 1)
#   driver upgrade  nvidia unloaded after peermem's unit stops, k8s-driver-manager's
#                   order, a live registration refusing the stop (boot 1)
#   shutdown        the boot's shutdown read back from the journal: peermem stopped,
#                   no kernel report
# Needs root, loop devices, QEMU, Debian's archive (first run). Last line:
# "N passed, N failed".
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VERSION=$(tr -d '[:space:]' < "$ROOT/VERSION")
. "$ROOT/packaging/check-lib.sh"

[ "$(id -u)" = 0 ] || { bad "prerequisites: not root"; finish; }
for c in qemu-system-x86_64 unshare chroot dpkg-deb; do
	command -v $c >/dev/null || { bad "prerequisites: no $c (scripts/setup)"; finish; }
done
out=$ROOT/build/host
rm -rf "$out"; mkdir -p "$out"
S=$(mktemp -d "${TMPDIR:-/var/tmp}/peermem-host.XXXXXX")
trap 'rm -rf "$S"' EXIT

t0=$SECONDS
if ! img=$("$ROOT/scripts/node-image" 2>"$out/node-image.log"); then
	bad "the node's disk (scripts/node-image)"; tail -n 20 "$out/node-image.log"; finish
fi
read -r abi ver abi2 ver2 < <("$ROOT/scripts/node-image" --versions)
echo "host: the node's disk $img (kernels $abi $ver, $abi2 $ver2), $((SECONDS - t0)) s"
mkdir -p "$S/debs"
if ! { "$ROOT/scripts/deb" "$S/debs" && "$ROOT/tests/node/double-debs" "$S/debs"; } >"$out/debs.log" 2>&1; then
	bad "the packages (make deb, tests/node/double-debs)"; tail -n 20 "$out/debs.log"; finish
fi
cp --sparse=always "$img" "$S/disk.img"

. "$ROOT/packaging/node-lib.sh"

# boot NAME KERNEL: node_boot, then what peermem.service did at the shutdown.
boot() {
	node_boot "$1" "$2"
	check "shutdown ($1): peermem.service stopped, the module unloaded" bash -c \
		"grep -q 'Stopping peermem.service' '$out/boot-$1.shutdown' &&
		grep -q 'nvidia_peermem: peermem unloaded' '$out/boot-$1.shutdown' && grep -q 'Stopped peermem.service' '$out/boot-$1.shutdown' &&
		! grep -qE 'peermem.service: (Control process exited|Failed)' '$out/boot-$1.shutdown'"
}

# ---------------------------------------------------------------- packages
res=$(in_node "set -e
	cd /var/cache/peermem-test
	dpkg -i peermem-test-nvidia-dkms_580.95.05_amd64.deb peermem-test-mofed-dkms_25.07_amd64.deb
	dpkg -i peermem-dropin-dkms_${VERSION}_amd64.deb peermem-tools_${VERSION}_amd64.deb
	echo '== dkms status'; dkms status
	echo '== enabled'; systemctl is-enabled peermem.service openibd.service peermem-metrics.timer
	md5sum /lib/modules/$abi/updates/dkms/nvidia-peermem.ko* | sed 's/^/== module /'" 2>&1)
echo "$res" > "$out/packages.log"
for m in "nvidia/580.95.05" "mlnx-ofed-kernel/25.07" "peermem-dropin/$VERSION"; do
	has "packages: dkms built and installed $m for $abi" "$res" "$m, $abi, x86_64: installed"
done
expect "packages: peermem.service, openibd.service and peermem-metrics.timer enabled" \
	"$(sed -n '/^== enabled$/,/^== module/p' <<<"$res" | sed '1d;$d' | tr '\n' ' ')" "enabled enabled enabled "
sum1=$(sed -n 's/^== module \([0-9a-f]*\) .*/\1/p' <<<"$res")
AFTER="peermem.service openibd.service peermem-metrics.timer" node_checks_unit

# ---------------------------------------------------------------- before the first boot
# MOFED upgrade: the core double's next release, without a kernel change.
res=$(in_node "dpkg -i /var/cache/peermem-test/peermem-test-mofed-dkms_25.10_amd64.deb; echo \"== dpkg \$?\"
	dkms status mlnx-ofed-kernel
	grep -c ib_peer_memory_core_release /usr/src/ofa_kernel/x86_64/$abi/Module.symvers | sed 's/^/== symvers /'
	md5sum /lib/modules/$abi/updates/dkms/nvidia-peermem.ko* | sed 's/^/== module /'" 2>&1)
echo "$res" > "$out/mofed-upgrade.log"
has "MOFED upgrade: dpkg -i of 25.10 exits 0" "$res" "== dpkg 0"
has "MOFED upgrade: dkms built 25.10 for $abi" "$res" "mlnx-ofed-kernel/25.10, $abi, x86_64: installed"
has "MOFED upgrade: its Module.symvers (/usr/src/ofa_kernel) has the new export" "$res" "== symvers 1"
# dpkg triggers peermem's dkms package (its interest in /usr/src); its
# packaging/dkms-core-upgrade sees MOFED's new Module.symvers and keeps the module.
has "MOFED upgrade: peermem's trigger ran and says no rebuild is needed (no symbol versions)" "$res" \
	"peermem-dropin: /usr/src/ofa_kernel/x86_64/$abi/Module.symvers changed since /lib/modules/$abi/updates/dkms/nvidia-peermem.ko.xz was built; $abi checks no symbol versions: no rebuild needed"
expect "MOFED upgrade: peermem's module was not rebuilt (no symbol versions on Debian's kernel)" \
	"$(sed -n 's/^== module \([0-9a-f]*\) .*/\1/p' <<<"$res")" "$sum1"
# Unsupported kernel: the second kernel's image and headers (the packages
# scripts/node-image downloaded, installed with apt as from the archive), a release
# outside SUPPORTED_KERNELS. The kernel's postinst runs dkms, which builds the doubles
# for it and skips peermem (dkms.conf's BUILD_EXCLUSIVE_KERNEL, from SUPPORTED_KERNELS):
# apt exits 0 and dpkg leaves no package unconfigured.
res=$(in_node "apt-get install -y --no-install-recommends /var/cache/peermem-node/debs/*.deb 2>&1; echo \"== apt \$?\"
	echo '== audit'; dpkg --audit 2>&1
	echo '== status'; dkms status -k $abi2
	[ ! -f /boot/initrd.img-$abi2 ] || echo '== initramfs made'" 2>&1)
echo "$res" > "$out/kernel-install.log"
has "unsupported kernel: apt install of $abi2's image and headers exits 0" "$res" "== apt 0"
expect "unsupported kernel: ... no package left unconfigured (dpkg --audit)" \
	"$(sed -n '/^== audit$/,/^== status$/p' <<<"$res" | sed '1d;$d')" ""
has "unsupported kernel: ... the kernel's initramfs made" "$res" "== initramfs made"
has "unsupported kernel: dkms built the doubles for $abi2" "$res" "mlnx-ofed-kernel/25.10, $abi2, x86_64: installed"
has "unsupported kernel: dkms skipped peermem for it, in one line" "$res" \
	"Autoinstall on $abi2 was skipped for module(s) peermem-dropin"
if grep -q "peermem-dropin/$VERSION, $abi2" <<<"$res"; then
	bad "unsupported kernel: no peermem build for $abi2"
else ok "unsupported kernel: no peermem build for $abi2"; fi
if grep -q "Autoinstall on $abi2 failed\|Error! Bad return status" <<<"$res"; then
	bad "unsupported kernel: no failed dkms build"
else ok "unsupported kernel: no failed dkms build"; fi

# ---------------------------------------------------------------- boot 1
boot first "$abi"

echo "host: $((SECONDS - t0)) s"
finish
