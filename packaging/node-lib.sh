# SPDX-License-Identifier: GPL-2.0 OR MIT
# Sourced by the parts that boot the test node (packaging/test-host.sh,
# packaging/test-fleet.sh), after check-lib.sh, with S (the scratch directory: the
# node's disk.img, the packages in debs/) and out (the part's log directory) set.
# shellcheck shell=bash

# in_node SCRIPT [HOST]: SCRIPT (bash) in the node's root, the disk mounted here in a
# mount namespace of its own, the packages under /var/cache/peermem-test; its output.
# HOST (bash) runs after it outside the root, with the root at $m and the scratch
# directory at $S.
in_node() {
	unshare -m --propagation private bash -s "$S" "$1" "${2:-}" <<'NS'
set -u
S=$1 m=$1/mnt
mkdir -p "$m"
mount -o loop "$S/disk.img" "$m" || exit 90
mount -t proc proc "$m/proc" && mount --rbind /dev "$m/dev" && mount -t sysfs sys "$m/sys" &&
	mount -t tmpfs tmpfs "$m/tmp" && mkdir -p "$m/var/cache/peermem-test" &&
	mount --bind "$S/debs" "$m/var/cache/peermem-test" || exit 90
cp /etc/resolv.conf "$m/etc/resolv.conf"
chroot "$m" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
	DEBIAN_FRONTEND=noninteractive bash -c "$2"
rc=$?
[ -z "$3" ] || eval "$3"
rm -f "$m/etc/resolv.conf"
sync
umount -R -l "$m"
exit $rc
NS
	local rc=$? i
	# The disk is free (its loop device released) before anything else opens it.
	for i in $(seq 60); do [ -z "$(losetup -j "$S/disk.img")" ] && return $rc; sleep 0.5; done
	echo "node: the disk is still attached: $(losetup -j "$S/disk.img")" >&2
	return 91
}

# node_checks_unit: tests/node/checks installed in the root as the unit
# peermem-node-test.service, run once multi-user.target is reached (AFTER: more units
# it runs after).
node_checks_unit() {
	cp "$ROOT/tests/node/checks" "$S/debs/checks"
	cat > "$S/debs/peermem-node-test.service" <<UNIT
[Unit]
Description=peermem test node: the checks of this boot
After=multi-user.target ${AFTER:-}
[Service]
Type=oneshot
ExecStart=/usr/local/lib/peermem-node-test/checks
[Install]
WantedBy=multi-user.target
UNIT
	in_node "mkdir -p /var/lib/peermem-node-test /usr/local/lib/peermem-node-test
		install -m 755 /var/cache/peermem-test/checks /usr/local/lib/peermem-node-test/checks
		install -m 644 /var/cache/peermem-test/peermem-node-test.service /etc/systemd/system/
		systemctl enable peermem-node-test.service" >/dev/null 2>&1
}

# node_boot NAME KERNEL: boots the node with KERNEL's vmlinuz and initramfs (from the
# node's /boot); its checks (tests/node/checks) run NAME and power it off. Adds the
# checks' lines to the counts, keeps the boot's journal in $out/boot-NAME.journal and
# what follows the checks' marker (the shutdown) in $out/boot-NAME.shutdown, and checks
# that shutdown: no kernel report, the power-off reached.
node_boot() {
	local name=$1 k=$2 t=$SECONDS rc res
	rm -f "$S/vmlinuz" "$S/initrd"
	in_node "echo $name > /var/lib/peermem-node-test/next; echo $k > /var/lib/peermem-node-test/kernel" \
		"cp -L \$m/boot/vmlinuz-$k \$S/vmlinuz; cp -L \$m/boot/initrd.img-$k \$S/initrd"
	timeout -k 5 "${PEERMEM_HOST_BOOT_TIMEOUT:-900}" qemu-system-x86_64 -accel tcg,thread=single \
		-m 2G -smp 2 -nographic -no-reboot -net none \
		-kernel "$S/vmlinuz" -initrd "$S/initrd" \
		-drive "file=$S/disk.img,if=virtio,format=raw" \
		-object memory-backend-ram,id=gpubar,size=256M -device ivshmem-plain,memdev=gpubar \
		-device pci-testdev -device pci-testdev \
		-append "root=LABEL=gpu-node ro console=ttyS0 panic=-1 systemd.show_status=1" \
		</dev/null >"$out/boot-$name.console" 2>&1
	rc=$?
	echo "node: boot $name ($k): QEMU exited $rc after $((SECONDS - t)) s"
	res=$(in_node "cat /var/lib/peermem-node-test/$name.out 2>/dev/null")
	echo "$res" > "$out/boot-$name.out"
	grep -E '^(ok|FAIL) |^     ' <<<"$res"
	passed=$((passed + $(grep -c '^ok ' <<<"$res"))); failed=$((failed + $(grep -c '^FAIL ' <<<"$res")))
	if ! grep -qx "done $name" <<<"$res"; then
		bad "boot $name: its checks ran to the end (console: ${out#"$ROOT"/}/boot-$name.console)"
		tail -n 30 "$out/boot-$name.console" | sed 's/^/     | /'
	fi
	in_node "b=\$(journalctl -D /var/log/journal --list-boots -q | tail -n 1 | awk '{print \$2}');
		journalctl -D /var/log/journal -b \"\$b\" -o short-monotonic --no-pager" > "$out/boot-$name.journal" 2>&1
	sed -n "/peermem-node-test: $name: powering off/,\$p" "$out/boot-$name.journal" > "$out/boot-$name.shutdown"
	check "shutdown ($name): the journal has the shutdown (after the checks' marker)" test -s "$out/boot-$name.shutdown"
	check "shutdown ($name): no kernel report (Oops, BUG, WARNING, hung task)" bash -c \
		"! grep -E 'kernel: .*(Call Trace|Oops|BUG:|WARNING:|blocked for more than)' '$out/boot-$name.journal' | grep -q ."
	check "shutdown ($name): the node powered off (QEMU exited 0)" test "$rc" = 0
}
