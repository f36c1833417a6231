#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR MIT
#
# packaging/test-deb.sh KDIR STAGE: the Debian packages of `make deb` installed and
# removed for real with dpkg, against the kernel build tree KDIR presented as
# /lib/modules/<release>/build:
#   - peermem-dropin-dkms and peermem-tools install; dkms status lists the module as
#     installed for the kernel (its postinst built it, with the kernel's compilers);
#     the module, the boot entry, the modprobe.d/depmod.d files, the tool, its manual
#     pages and completions are where the packages say;
#   - peermem-dkms is refused beside it (the two names conflict);
#   - the installed /lib/modules tree and /etc files boot in the dev VM, where Debian's
#     kmod loads the module from the boot entry as systemd-modules-load does, with its
#     providers (tests/qemu/plans/deb.sh);
#   - a package installing under /usr/src (as MOFED's dkms package does) triggers the
#     dkms package, which keeps the module on this kernel without symbol versions and
#     says so;
#   - purging both removes the module from dkms and leaves no file of theirs;
#   - with NVIDIA's nvidia-peermem.ko (a higher version) in the kernel's tree, from a
#     prebuilt package or from NVIDIA's dkms package (the nvidia.ko double's), the
#     drop-in is what modprobe loads after its install; purging gives NVIDIA's back.
# dpkg and dkms run in a mount namespace of their own (unshare --mount) where /usr,
# /etc and /var are overlays whose upper layers are in a temporary directory and
# /usr/lib/modules and /var/lib/dkms are empty directories of it: the host's package
# database and files do not change, which the last check verifies. STAGE: the
# modules of scripts/build-modules (the fakes' Module.symvers are beside it, in
# build/fakes). Needs root, dkms, dpkg-deb, unshare. Last line: "N passed, N failed".
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VERSION=$(tr -d '[:space:]' < "$ROOT/VERSION")
. "$ROOT/packaging/check-lib.sh"

# ---------------------------------------------------------------- outside
if [ -z "${PEERMEM_DEB_SCRATCH:-}" ]; then
	kdir=$(cd "$1" && pwd -P) stage=$(cd "$2" && pwd -P)
	build=$(dirname "$stage")
	why=
	[ "$(id -u)" = 0 ] || why="$why; not root"
	for c in dkms dpkg-deb unshare; do command -v $c >/dev/null || why="$why; no $c"; done
	[ -f "$build/fakes/ib_core/Module.symvers" ] || why="$why; no fakes in $build (scripts/build-modules)"
	[ -z "$why" ] || { bad "prerequisites: ${why#; }"; finish; }
	S=$(mktemp -d "${TMPDIR:-/tmp}/peermem-deb.XXXXXX")
	trap 'rm -rf "$S"' EXIT
	"$ROOT/scripts/deb" "$S/debs" >"$S/deb.log" 2>&1
	"$ROOT/tests/node/double-debs" "$S/doubles" >"$S/doubles.log" 2>&1
	# The tool's Depends are what Debian's dpkg-shlibdeps derives from its binary.
	mkdir -p "$S/shl/debian" "$S/shl/tool"
	printf 'Source: peermem\n\nPackage: peermem-tools\nArchitecture: any\n' > "$S/shl/debian/control"
	dpkg-deb -x "$S/debs/peermem-tools_${VERSION}_amd64.deb" "$S/shl/tool"
	want=$(cd "$S/shl" && dpkg-shlibdeps -O tool/usr/sbin/peermem 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
	expect "peermem-tools: Depends is what dpkg-shlibdeps derives from the binary" \
		"$(dpkg-deb -f "$S/debs/peermem-tools_${VERSION}_amd64.deb" Depends)" "$want"
	check "make deb builds the three packages" test -f "$S/debs/peermem-dkms_${VERSION}_amd64.deb" \
		-a -f "$S/debs/peermem-dropin-dkms_${VERSION}_amd64.deb" -a -f "$S/debs/peermem-tools_${VERSION}_amd64.deb"
	host_state() {
		local d
		for d in /usr/lib/modules /usr/src /usr/sbin /usr/share/man/man1 /etc /var/lib/dkms /var/lib/dpkg/info; do
			if [ -e "$d" ]; then find "$d" -maxdepth 2 -printf '%p %y %s %T@\n' 2>/dev/null | sort
			else echo "$d absent"; fi
		done
		md5sum /var/lib/dpkg/status
	}
	before=$(host_state)
	PEERMEM_DEB_SCRATCH=$S PEERMEM_OFA_SYMVERS=$build/fakes/ib_core/Module.symvers \
		PEERMEM_NVIDIA_SYMVERS=$build/fakes/nvidia-default/Module.symvers \
		unshare --mount --propagation private "$0" "$kdir" "$stage" | tee "$S/inner.out" |
		grep -vE '^[0-9]+ passed, [0-9]+ failed$'
	last=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$S/inner.out" | tail -n 1)
	if [ -n "$last" ]; then
		passed=$((passed + ${last%% *})); f=${last#*passed, }; failed=$((failed + ${f%% *}))
	else
		bad "the test in its mount namespace ended early"
	fi
	after=$(host_state)
	if [ "$before" = "$after" ]; then ok "host: package database, /usr, /etc, dkms unchanged"
	else bad "host: package database, /usr, /etc, dkms unchanged"; diff <(echo "$before") <(echo "$after") | head -20; fi

	# The installed tree in the dev VM: kmod loads the module from the boot entry.
	if [ -d "$S/installed/lib" ]; then
		r=$S/rootfs
		"$ROOT/scripts/kmod-rootfs" "$r" "$kdir" "$stage" >"$S/rootfs.log" 2>&1
		cp -a "$S/installed/." "$r/"
		"$ROOT/scripts/qemu-run" --kernel "$kdir" --plan "$ROOT/tests/qemu/plans/deb.sh" \
			--log "$S/vm.log" --timeout "${PEERMEM_VM_TIMEOUT:-600}" --kunit-filter none \
			--rootfs "$r" --file "$ROOT/VERSION" >/dev/null 2>&1
		vm_summary deb tests/qemu/plans/deb.manifest "$S/vm.log"
	else
		bad "no installed tree to boot"
	fi
	finish
fi

# ---------------------------------------------------------------- in the namespace
S=$PEERMEM_DEB_SCRATCH
kdir=$1 stage=$2
kver=$(cat "$kdir/include/config/kernel.release")
arch=$(uname -m)
fatal() { bad "$1"; finish; }
ns_scratch "$S" "$kdir" /usr /etc /var
export DEBIAN_FRONTEND=noninteractive

D=$S/debs
dpkg -i "$D/peermem-tools_${VERSION}_amd64.deb" "$D/peermem-dropin-dkms_${VERSION}_amd64.deb" >"$S/dpkg-i.log" 2>&1
rc=$?
check "dpkg -i peermem-tools peermem-dropin-dkms exits 0" test "$rc" -eq 0
[ "$rc" -eq 0 ] || tail -n 20 "$S/dpkg-i.log"
check "no other nvidia-peermem.ko: the postinst says nothing of one" bash -c "! grep -q 'not this drop-in' '$S/dpkg-i.log'"
check "dpkg: both installed" bash -c "dpkg-query -W -f='\${Status}\n' peermem-tools peermem-dropin-dkms | grep -c 'install ok installed' | grep -qx 2"
st=$(dkms status "peermem-dropin/$VERSION" -k "$kver" 2>/dev/null)
check "dkms status: installed for the kernel ($st)" test "$st" = "peermem-dropin/$VERSION, $kver, $arch: installed"
ko=$(find "/lib/modules/$kver" -name 'nvidia-peermem.ko*' | head -n 1)
check "the module is under /lib/modules/<release> ($ko)" test -n "$ko"
check "it is the drop-in name" test "$(modinfo -F name "$ko" 2>/dev/null)" = nvidia_peermem
check "its vermagic is the kernel's" test "$(modinfo -F vermagic "$ko" 2>/dev/null | awk '{print $1}')" = "$kver"
mlog=$(find /var/lib/dkms/peermem-dropin -name make.log | head -n 1)
check "dkms built it with the kernel's compilers ($mlog)" grep -qF -- "$("$ROOT/scripts/kernel-toolchain" "$kdir")" "$mlog"
check "peermem.service loads nvidia_peermem" \
	grep -qx 'ExecStart=/sbin/modprobe nvidia_peermem' /usr/lib/systemd/system/peermem.service
check "peermem.service is enabled (multi-user.target and openibd.service want it)" test \
	/etc/systemd/system/multi-user.target.wants/peermem.service -ef /usr/lib/systemd/system/peermem.service \
	-a /etc/systemd/system/openibd.service.wants/peermem.service -ef /usr/lib/systemd/system/peermem.service
check "no modules-load.d entry (the unit loads it, after openibd)" test ! -e /etc/modules-load.d/peermem.conf
check "peermem-metrics.timer is enabled" test -L /etc/systemd/system/timers.target.wants/peermem-metrics.timer
check "modprobe.d and depmod.d files" test -f /etc/modprobe.d/peermem.conf -a -f /etc/depmod.d/peermem.conf
check "the tool: /usr/sbin/peermem runs" /usr/sbin/peermem --version
check "the manual pages" test -f /usr/share/man/man1/peermem.1.gz -a -f /usr/share/man/man1/peermem-doctor.1.gz
check "bash, zsh and fish completions" test -f /usr/share/bash-completion/completions/peermem \
	-a -f /usr/share/zsh/vendor-completions/_peermem -a -f /usr/share/fish/vendor_completions.d/peermem.fish
# A MOFED/DOCA-OFED upgrade as dpkg sees it: a package installing under /usr/src
# triggers the dkms package, whose packaging/dkms-core-upgrade finds the core's
# Module.symvers newer than the module; this kernel checks no symbol versions, so it
# keeps the module and says so (the rebuild on one that does: packaging/test-dkms.sh).
cp "$PEERMEM_OFA_SYMVERS" "$S/ofa-upgraded.symvers"
mkdir -p "$S/core-pkg/DEBIAN" "$S/core-pkg/usr/src/peermem-test-core-2"
echo "the core's next release" > "$S/core-pkg/usr/src/peermem-test-core-2/README"
printf 'Package: peermem-test-core\nVersion: 2\nArchitecture: all\nMaintainer: peermem <peermem@localhost>\nDescription: a package with files under /usr/src\n' \
	> "$S/core-pkg/DEBIAN/control"
dpkg-deb --root-owner-group --build "$S/core-pkg" "$S/core.deb" >/dev/null
sum=$(sha256sum < "$ko")
PEERMEM_OFA_SYMVERS=$S/ofa-upgraded.symvers dpkg -i "$S/core.deb" >"$S/dpkg-trigger.log" 2>&1
check "a package under /usr/src: dpkg -i exits 0" test $? -eq 0
check "a package under /usr/src: it triggers peermem-dropin-dkms" \
	grep -q "Processing triggers for peermem-dropin-dkms" "$S/dpkg-trigger.log"
check "a package under /usr/src: the trigger finds the core's new Module.symvers, no rebuild without symbol versions" \
	grep -qF "peermem-dropin: $S/ofa-upgraded.symvers changed since $ko was built; $kver checks no symbol versions: no rebuild needed" "$S/dpkg-trigger.log"
expect "a package under /usr/src: the module kept" "$(sha256sum < "$ko")" "$sum"
dpkg --purge peermem-test-core >>"$S/dpkg-trigger.log" 2>&1
dpkg -i "$D/peermem-dkms_${VERSION}_amd64.deb" >"$S/dpkg-conflict.log" 2>&1
check "peermem-dkms beside peermem-dropin-dkms: refused" test $? -ne 0
check "the refusal is the conflict" grep -q "conflicting packages" "$S/dpkg-conflict.log"
# What the VM boots: the module tree and the /etc files, as installed.
mkdir -p "$S/installed/etc"
(cd / && cp -a --parents "lib/modules/$kver/updates" "$S/installed/") 2>/dev/null ||
	(cd / && cp -a --parents "$(dirname "${ko#/}")" "$S/installed/")
cp -a /etc/systemd /etc/modprobe.d /etc/depmod.d "$S/installed/etc/"
mkdir -p "$S/installed/usr/lib/systemd/system"
cp /usr/lib/systemd/system/peermem.service "$S/installed/usr/lib/systemd/system/"

# What the packages' work left behind: the textfile the metrics timer wrote, and the
# Rust build files dkms-pre-build made for a Debian headers tree (scripts/lib-rust's
# list beside them).
mkdir -p /var/lib/prometheus/node-exporter /usr/src/linux-headers-9.9.9-test/rust /usr/src/linux-headers-9.9.9-test/scripts
echo 'peermem_up{module="nvidia_peermem"} 1' > /var/lib/prometheus/node-exporter/peermem.prom
: > /usr/src/linux-headers-9.9.9-test/rust/libkernel.rmeta
: > /usr/src/linux-headers-9.9.9-test/scripts/target.json
printf 'rust/libkernel.rmeta\nscripts/target.json\n' > /usr/src/linux-headers-9.9.9-test/rust/.peermem-lib-rust
dpkg --purge peermem-dropin-dkms peermem-tools >"$S/dpkg-purge.log" 2>&1
check "dpkg --purge exits 0" test $? -eq 0
check "purge: the metrics textfile is gone (node_exporter would export peermem_up 1)" \
	test ! -e /var/lib/prometheus/node-exporter/peermem.prom
check "purge: the Rust build files made for a headers tree are gone, the tree stays" bash -c \
	"[ ! -e /usr/src/linux-headers-9.9.9-test/rust ] && [ ! -e /usr/src/linux-headers-9.9.9-test/scripts/target.json ] && [ -d /usr/src/linux-headers-9.9.9-test/scripts ]"
rm -rf /usr/src/linux-headers-9.9.9-test
check "dkms knows the package no more" test -z "$(dkms status peermem-dropin 2>/dev/null)"
left=$(find /lib/modules/"$kver" /usr/src /var/lib/dkms -name '*peermem*' 2>/dev/null)
check "no module, source or dkms tree left ($left)" test -z "$left"
check "no file of the packages left in /etc, /usr/sbin, /usr/share" bash -c \
	"! ls /etc/systemd/system/*/peermem.service /etc/systemd/system/peermem.service /usr/lib/systemd/system/peermem*.* /etc/systemd/system/*/peermem-metrics.timer /etc/modprobe.d/peermem.conf /etc/depmod.d/peermem.conf /usr/sbin/peermem /usr/share/man/man1/peermem.1.gz /usr/share/doc/peermem-tools /usr/share/dkms/modules_to_force_install/peermem-dropin 2>/dev/null | grep -q ."

# NVIDIA's nvidia-peermem.ko in the kernel's tree, with the driver's version (higher
# than the drop-in's), as a prebuilt driver package installs it: dkms installs the
# drop-in over it without its version check (modules_to_force_install), into
# updates/dkms, which modprobe takes over kernel/; the postinst has nothing to warn
# about; purging gives NVIDIA's back.
high=$(tr 0-8 9 <<<"$VERSION")
nvidia_ko=/lib/modules/$kver/kernel/drivers/video/nvidia-peermem.ko
versioned_copy "$stage/nvidia-peermem.ko" "$nvidia_ko" "$VERSION" "$high"
depmod -a "$kver"
dpkg -i "$D/peermem-dropin-dkms_${VERSION}_amd64.deb" >"$S/dpkg-nvidia.log" 2>&1
check "NVIDIA's prebuilt nvidia-peermem.ko present: dpkg -i exits 0" test $? -eq 0
expect "NVIDIA's prebuilt nvidia-peermem.ko present: modprobe loads the drop-in at once" \
	"$(modinfo -k "$kver" -F version nvidia_peermem 2>&1)" "$VERSION"
check "NVIDIA's prebuilt nvidia-peermem.ko present: the postinst has nothing to warn about" \
	bash -c "! grep -q 'not this drop-in' '$S/dpkg-nvidia.log'"
check "NVIDIA's prebuilt nvidia-peermem.ko present: its file stays where its package put it" test -f "$nvidia_ko"
dpkg --purge peermem-dropin-dkms >>"$S/dpkg-nvidia.log" 2>&1
check "NVIDIA's prebuilt nvidia-peermem.ko present: dpkg --purge exits 0" test $? -eq 0
expect "NVIDIA's prebuilt nvidia-peermem.ko present: purged, modprobe loads NVIDIA's again" \
	"$(modinfo -k "$kver" -F filename nvidia_peermem 2>&1)" "$nvidia_ko"
rm "$nvidia_ko"
depmod -a "$kver"

# NVIDIA's dkms driver package (the nvidia.ko double's, tests/node/double-debs, whose
# dkms module "nvidia" builds its own nvidia-peermem.ko into updates/dkms, where dkms
# puts the drop-in): the drop-in is installed over it; this dkms (before 3.1) keeps
# no copy of the file it replaced, so the drop-in's removal installs the driver's dkms
# module again, whose nvidia-peermem.ko modprobe then loads.
nv=$S/doubles/peermem-test-nvidia-dkms_580.95.05_amd64.deb
dpkg -i "$nv" >"$S/dpkg-nvidia-dkms.log" 2>&1
rc=$?
check "NVIDIA's dkms package: dpkg -i of the driver exits 0" test "$rc" -eq 0
[ "$rc" -eq 0 ] || { tail -n 20 "$S/dpkg-nvidia-dkms.log"; cat /var/lib/dkms/nvidia/580.95.05/build/make.log 2>/dev/null | tail -n 20; }
nv_ko=$(modinfo -k "$kver" -F filename nvidia_peermem 2>&1)
expect "NVIDIA's dkms package: modprobe nvidia-peermem loads NVIDIA's (580.95.05)" \
	"$(modinfo -F version "$nv_ko" 2>&1)" 580.95.05
dpkg -i "$D/peermem-dropin-dkms_${VERSION}_amd64.deb" >>"$S/dpkg-nvidia-dkms.log" 2>&1
check "NVIDIA's dkms package: dpkg -i of the drop-in exits 0" test $? -eq 0
expect "NVIDIA's dkms package: modprobe nvidia-peermem loads the drop-in" \
	"$(modinfo -k "$kver" -F version nvidia_peermem 2>&1)" "$VERSION"
dpkg --purge peermem-dropin-dkms >>"$S/dpkg-nvidia-dkms.log" 2>&1
check "NVIDIA's dkms package: dpkg --purge of the drop-in exits 0" test $? -eq 0
check "NVIDIA's dkms package: ... the prerm installs the driver's dkms module again, saying so" \
	grep -qF "peermem-dropin-dkms: for $kver, installed nvidia/580.95.05 again" "$S/dpkg-nvidia-dkms.log"
expect "NVIDIA's dkms package: purged, modprobe loads NVIDIA's again" \
	"$(modinfo -k "$kver" -F version nvidia_peermem 2>&1)" 580.95.05
dpkg --purge peermem-test-nvidia-dkms >>"$S/dpkg-nvidia-dkms.log" 2>&1
left=$(find /lib/modules/"$kver" /usr/src /var/lib/dkms -name '*peermem*' 2>/dev/null)
check "NVIDIA's nvidia-peermem.ko present: nothing of the drop-in left ($left)" test -z "$left"
finish
