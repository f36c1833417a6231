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
#   drop-in wins    over NVIDIA's own nvidia-peermem.ko (the GPU driver double's
#                   package builds one): modprobe loads the drop-in after apt install
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
#   driver upgrade  the driver's package upgraded (580.95.05 -> 580.105.08): the
#                   drop-in still wins (in the root); nvidia unloaded after peermem's
#                   unit stops, k8s-driver-manager's order, a live registration
#                   refusing the stop (boot 1)
#   purge           the drop-in purged after the boot: NVIDIA's nvidia-peermem.ko is
#                   what modprobe loads again
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

# modprobe_version: "== modprobe FILE VERSION", the nvidia_peermem `modprobe
# nvidia-peermem` loads on the node's 7.3 kernel, for in_node.
modprobe_version="f=\$(modinfo -k $abi -F filename nvidia_peermem); echo \"== modprobe \$f \$(modinfo -F version \$f)\""
# The file dkms keeps of the module it replaced with the drop-in: "== kept VERSION".
# (dkms writes FILE.origin beside it, naming where it came from.)
kept_version="echo \"== kept \$(modinfo -F version \$(ls /var/lib/dkms/peermem-dropin/original_module/$abi/x86_64/nvidia-peermem.ko* | grep -v '\.origin\$') 2>&1)\""

# ---------------------------------------------------------------- packages
# MOFED first, then the GPU driver (whose nvidia-peermem.ko is then built against
# MOFED's core, as NVIDIA's instructions order it), then peermem's packages.
res=$(in_node "set -e
	cd /var/cache/peermem-test
	dpkg -i peermem-test-mofed-dkms_25.07_amd64.deb
	dpkg -i peermem-test-nvidia-dkms_580.95.05_amd64.deb
	echo '== before'; $modprobe_version
	dpkg -i peermem-dropin-dkms_${VERSION}_amd64.deb peermem-tools_${VERSION}_amd64.deb
	# node_exporter's textfile directory, as prometheus-node-exporter's package makes it.
	mkdir -p /var/lib/prometheus/node-exporter
	echo '== dkms status'; dkms status
	echo '== enabled'; systemctl is-enabled peermem.service openibd.service peermem-metrics.timer
	md5sum /lib/modules/$abi/updates/dkms/nvidia-peermem.ko* | sed 's/^/== module /'
	$modprobe_version; $kept_version" 2>&1)
echo "$res" > "$out/packages.log"
for m in "nvidia/580.95.05" "mlnx-ofed-kernel/25.07" "peermem-dropin/$VERSION"; do
	has "packages: dkms built and installed $m for $abi" "$res" "$m, $abi, x86_64: installed"
done
# The drop-in wins over NVIDIA's own nvidia-peermem.ko (the driver's version, higher
# than the drop-in's; the same updates/dkms path): dkms installs it over NVIDIA's
# (modules_to_force_install) and keeps NVIDIA's file for the drop-in's removal.
has "drop-in wins: before it, modprobe nvidia-peermem loads NVIDIA's (580.95.05, dkms-built)" "$res" \
	"== modprobe /lib/modules/$abi/updates/dkms/nvidia-peermem.ko.xz 580.95.05"
has "drop-in wins: after apt install, modprobe nvidia-peermem loads the drop-in ($VERSION)" "$res" \
	"== modprobe /lib/modules/$abi/updates/dkms/nvidia-peermem.ko.xz $VERSION"
has "drop-in wins: ... dkms kept NVIDIA's file (580.95.05) to put back" "$res" "== kept 580.95.05"
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
# Driver upgrade (the package): NVIDIA's next release. Its dkms removes the previous
# release's modules (the drop-in's file, where NVIDIA's was) and installs its own
# nvidia-peermem.ko; peermem's trigger installs the drop-in over it again.
res=$(in_node "dpkg -i /var/cache/peermem-test/peermem-test-nvidia-dkms_580.105.08_amd64.deb; echo \"== dpkg \$?\"
	dkms status nvidia; $modprobe_version; $kept_version" 2>&1)
echo "$res" > "$out/driver-package-upgrade.log"
has "driver upgrade: dpkg -i of NVIDIA's 580.105.08 exits 0" "$res" "== dpkg 0"
has "driver upgrade: dkms built nvidia 580.105.08 for $abi" "$res" "nvidia/580.105.08, $abi, x86_64: installed"
has "driver upgrade: peermem's trigger installed the drop-in over NVIDIA's new nvidia-peermem.ko, saying so" "$res" \
	"peermem-dropin: for $abi, modprobe nvidia-peermem would have loaded /lib/modules/$abi/updates/dkms/nvidia-peermem.ko.xz (version 580.105.08, not the drop-in's $VERSION): installed the drop-in over it again"
has "driver upgrade: ... modprobe nvidia-peermem loads the drop-in" "$res" \
	"== modprobe /lib/modules/$abi/updates/dkms/nvidia-peermem.ko.xz $VERSION"
has "driver upgrade: ... dkms keeps NVIDIA's new file (580.105.08), not the old one" "$res" "== kept 580.105.08"

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

# ---------------------------------------------------------------- purge
# Purging the drop-in gives NVIDIA's own nvidia-peermem.ko back (dkms puts back the
# file it kept), for every kernel, and leaves the driver's dkms module alone.
res=$(in_node "apt-get purge -y peermem-dropin-dkms 2>&1; echo \"== apt \$?\"
	dkms status nvidia; $modprobe_version
	ls /usr/share/dkms/modules_to_force_install/ 2>&1 | sed 's/^/== force /'" 2>&1)
echo "$res" > "$out/purge.log"
has "purge: apt purge peermem-dropin-dkms exits 0" "$res" "== apt 0"
has "purge: modprobe nvidia-peermem loads NVIDIA's again (580.105.08)" "$res" \
	"== modprobe /lib/modules/$abi/updates/dkms/nvidia-peermem.ko.xz 580.105.08"
has "purge: NVIDIA's dkms module untouched" "$res" "nvidia/580.105.08, $abi, x86_64: installed"
if grep -q '^== force .*peermem' <<<"$res"; then bad "purge: no dkms version override left"
else ok "purge: no dkms version override left"; fi

echo "host: $((SECONDS - t0)) s"
finish
