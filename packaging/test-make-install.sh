#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR MIT
#
# packaging/test-make-install.sh KDIR [SYMVERS...]: `make install` and `make uninstall`
# as an admin runs them, against the built kernel tree KDIR, into a temporary DESTDIR:
# the module through Kbuild's modules_install (extra/, vermagic of KDIR's kernel,
# depmod's index naming it), the modprobe.d and depmod.d files, peermem.service, the
# tool with its manual pages and completions under PREFIX; then uninstall leaves
# nothing of peermem's (depmod's index files stay, as depmod leaves them). SYMVERS:
# the providers' Module.symvers (the test bed's fakes). Last line: "N passed, N failed".
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/packaging/check-lib.sh"
kdir=$1; shift
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
D=$TMP/dest
kver=$(cat "$kdir/include/config/kernel.release")
make -s -C "$ROOT" install KDIR="$kdir" DESTDIR="$D" BUILD="$TMP/build" \
	KBUILD_EXTRA_SYMBOLS="$*" >"$TMP/install.log" 2>&1
rc=$?; check "make install exits 0" test $rc -eq 0; [ $rc -eq 0 ] || tail -n 20 "$TMP/install.log"
ko=$D/lib/modules/$kver/extra/peermem.ko
check "module in extra/ of KDIR's kernel" test -f "$ko"
check "its vermagic is KDIR's kernel" test "$(modinfo -F vermagic "$ko" | awk '{print $1}')" = "$kver"
check "Kbuild's depmod indexed it" grep -q "^extra/peermem.ko:" "$D/lib/modules/$kver/modules.dep"
check "peermem.service: loads peermem at boot, enabled" bash -c \
	"grep -qx 'ExecStart=/sbin/modprobe peermem' '$D/etc/systemd/system/peermem.service' && test -L '$D/etc/systemd/system/multi-user.target.wants/peermem.service'"
check "modprobe.d and depmod.d files" test -f "$D/etc/modprobe.d/peermem.conf" -a -f "$D/etc/depmod.d/peermem.conf"
check "the tool in PREFIX/sbin runs" "$D/usr/local/sbin/peermem" --version
for f in share/man/man1/peermem.1 share/man/man1/peermem-doctor.1 share/man/man1/peermem-status.1 \
	share/bash-completion/completions/peermem share/zsh/site-functions/_peermem \
	share/fish/vendor_completions.d/peermem.fish; do
	check "installed /usr/local/$f" test -s "$D/usr/local/$f"
done
make -s -C "$ROOT" install KDIR="$kdir" KVER=0.0.0-other DESTDIR="$TMP/dest2" BUILD="$TMP/build" \
	KBUILD_EXTRA_SYMBOLS="$*" >"$TMP/install2.log" 2>&1
check "make install KVER= another kernel than KDIR's: refused" test $? -ne 0
check "the refusal names both" grep -qF "KVER 0.0.0-other but the kernel at $kdir is $kver" "$TMP/install2.log"
make -s -C "$ROOT" uninstall KDIR="$kdir" DESTDIR="$D" >"$TMP/uninstall.log" 2>&1
check "make uninstall exits 0" test $? -eq 0
left=$(cd "$D" && find . -type f ! -name 'modules.*' | sort | tr '\n' ' ')
check "uninstall leaves nothing but depmod's index" test -z "$left" || echo "     left: $left"
# The drop-in, as the README installs it without packages: make dropin && make
# install-dropin.
D3=$TMP/dest3
make -s -C "$ROOT" dropin KDIR="$kdir" BUILD="$TMP/build" KBUILD_EXTRA_SYMBOLS="$*" >"$TMP/dropin.log" 2>&1 &&
	make -s -C "$ROOT" install-dropin KDIR="$kdir" DESTDIR="$D3" BUILD="$TMP/build" \
		KBUILD_EXTRA_SYMBOLS="$*" >>"$TMP/dropin.log" 2>&1
rc=$?; check "make dropin && make install-dropin exits 0" test $rc -eq 0; [ $rc -eq 0 ] || tail -n 20 "$TMP/dropin.log"
ko=$D3/lib/modules/$kver/extra/nvidia-peermem.ko
check "install-dropin: nvidia-peermem.ko (module nvidia_peermem) in extra/" \
	test "$(modinfo -F name "$ko" 2>&1)" = nvidia_peermem
check "install-dropin: peermem.service loads nvidia_peermem at boot, enabled" bash -c \
	"grep -qx 'ExecStart=/sbin/modprobe nvidia_peermem' '$D3/etc/systemd/system/peermem.service' && test -L '$D3/etc/systemd/system/multi-user.target.wants/peermem.service'"
make -s -C "$ROOT" uninstall KDIR="$kdir" DESTDIR="$D3" >"$TMP/uninstall3.log" 2>&1
left=$(cd "$D3" && find . -type f ! -name 'modules.*' | sort | tr '\n' ' ')
check "install-dropin: make uninstall leaves nothing but depmod's index" test -z "$left" || echo "     left: $left"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
