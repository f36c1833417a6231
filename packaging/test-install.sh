#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR MIT
#
# packaging/test-install.sh: runs scripts/install into temporary DESTDIRs with dummy
# .ko files and checks the layout, the packaging files (both dkms packages' dkms.conf
# evaluated as dkms does) and find-symvers. Needs no root and no kernel (the real dkms
# build is packaging/test-dkms.sh). Last line: "N passed, N failed"; exits non-zero on any failure.
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
VERSION=$(tr -d '[:space:]' < "$ROOT/VERSION")
KVER=6.14.0-peermem-test
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
. "$ROOT/packaging/check-lib.sh"

# Stand-in modules: ELF files whose .modinfo section is what modinfo reads (name,
# author, vermagic), as in a real .ko.
fake_ko() { # fake_ko FILE NAME AUTHOR VERMAGIC-RELEASE
	printf 'name=%s\0author=%s\0vermagic=%s SMP preempt mod_unload \0' "$2" "$3" "$4" > "$TMP/modinfo.bin"
	objcopy -I binary -O elf64-x86-64 --rename-section .data=.modinfo "$TMP/modinfo.bin" "$1"
}
mkdir -p "$TMP/build" "$TMP/other"
fake_ko "$TMP/build/peermem.ko" peermem "peermem developers" "$KVER"
fake_ko "$TMP/build/nvidia-peermem.ko" nvidia_peermem "peermem developers" "$KVER"
fake_ko "$TMP/build/other.ko" other "someone" "$KVER"
fake_ko "$TMP/other/peermem.ko" peermem "peermem developers" 7.0.0-34-generic

# 1. Native module plus the dkms package.
D=$TMP/dest1
out=$(DESTDIR=$D KVER=$KVER "$ROOT/scripts/install" --dkms "$TMP/build/peermem.ko" 2>&1)
check "install exits 0" test $? -eq 0
check "module in extra/" cmp "$TMP/build/peermem.ko" "$D/lib/modules/$KVER/extra/peermem.ko"
check "module mode 644" test "$(stat -c %a "$D/lib/modules/$KVER/extra/peermem.ko")" = 644
check "modprobe.d snippet" cmp "$ROOT/packaging/modprobe.d/peermem.conf" "$D/etc/modprobe.d/peermem.conf"
check "depmod.d override" cmp "$ROOT/packaging/depmod.d/peermem.conf" "$D/etc/depmod.d/peermem.conf"
S=$D/usr/src/peermem-$VERSION
check "dkms.conf installed" test -f "$S/dkms.conf"
check "dkms.conf version substituted" grep -qx "PACKAGE_VERSION=\"$VERSION\"" "$S/dkms.conf"
check "dkms.conf has no placeholder left" bash -c "! grep -q '@[A-Z]*@' '$S/dkms.conf'"
check "dkms sources: Kbuild, Makefile, VERSION, SUPPORTED_KERNELS" test -f "$S/Kbuild" -a -f "$S/Makefile" -a -f "$S/VERSION" -a -f "$S/SUPPORTED_KERNELS"
check "dkms sources: module root src/peermem.rs" test -f "$S/src/peermem.rs"
check "dkms sources: C glue and headers" test -f "$S/src/glue.c" -a -f "$S/include/nv-p2p.h"
check "dkms sources: find-symvers executable" test -x "$S/packaging/find-symvers"
check "dkms sources: kernel-toolchain executable (the Makefile runs it)" test -x "$S/scripts/kernel-toolchain"
check "dkms.conf: the native package (@DROPIN@ is 0)" grep -qx 'PEERMEM_DROPIN="0"' "$S/dkms.conf"
check "dkms sources: no build outputs" bash -c "! find '$S' -name '*.ko' -o -name '*.o' | grep -q ."
check "output names the module" grep -q "installed $D/lib/modules/$KVER/extra/peermem.ko" <<<"$out"
check "output names dkms.conf" grep -q "installed $S/dkms.conf" <<<"$out"
check "no depmod with DESTDIR" bash -c "! grep -q 'ran depmod' <<<'$out'"

# 2. The drop-in, without dkms; --destdir/--kver options.
D=$TMP/dest2
"$ROOT/scripts/install" --destdir "$D" --kver "$KVER" "$TMP/build/nvidia-peermem.ko" >/dev/null 2>&1
check "drop-in in extra/ as nvidia-peermem.ko" cmp "$TMP/build/nvidia-peermem.ko" "$D/lib/modules/$KVER/extra/nvidia-peermem.ko"
check "no dkms tree without --dkms" test ! -e "$D/usr/src"
check "snippets installed without --dkms" test -f "$D/etc/modprobe.d/peermem.conf" -a -f "$D/etc/depmod.d/peermem.conf"

check "peermem.service: loads nvidia_peermem at boot" grep -qx 'ExecStart=/sbin/modprobe nvidia_peermem' "$D/etc/systemd/system/peermem.service"
check "peermem.service: enabled (multi-user.target and openibd.service want it)" test \
	"$(readlink "$D/etc/systemd/system/multi-user.target.wants/peermem.service")" = /etc/systemd/system/peermem.service -a \
	"$(readlink "$D/etc/systemd/system/openibd.service.wants/peermem.service")" = /etc/systemd/system/peermem.service
check "no modules-load.d entry" test ! -e "$D/etc/modules-load.d/peermem.conf"
"$ROOT/scripts/install" --destdir "$TMP/dest2b" --kver "$KVER" --no-boot "$TMP/build/peermem.ko" >/dev/null 2>&1
check "--no-boot: no unit" test -f "$TMP/dest2b/lib/modules/$KVER/extra/peermem.ko" -a ! -e "$TMP/dest2b/etc/systemd/system/peermem.service"

# 3. Refusals.
out=$(DESTDIR="$TMP/dest3" KVER=$KVER "$ROOT/scripts/install" "$TMP/other/peermem.ko" 2>&1)
check "a module built for another kernel is refused" test $? -ne 0
check "the vermagic refusal names both kernels" grep -qF "was built for kernel 7.0.0-34-generic, not $KVER" <<<"$out"
mkdir -p "$TMP/bad"; printf 'not a module\n' > "$TMP/bad/peermem.ko"
out=$(DESTDIR="$TMP/dest3" KVER=$KVER "$ROOT/scripts/install" "$TMP/bad/peermem.ko" 2>&1)
check "a file that is no module is refused" test $? -ne 0
check "the refusal says it has no vermagic" grep -qF "no vermagic (not a kernel module)" <<<"$out"
check "missing module refused" bash -c "! DESTDIR='$TMP/dest3' KVER=$KVER '$ROOT/scripts/install' '$TMP/build/absent.ko'"
check "wrong module name refused" bash -c "! DESTDIR='$TMP/dest3' KVER=$KVER '$ROOT/scripts/install' '$TMP/build/other.ko'"
check "nothing to install refused" bash -c "! DESTDIR='$TMP/dest3' KVER=$KVER '$ROOT/scripts/install'"
check "--dropin without --dkms refused" bash -c "! DESTDIR='$TMP/dest3' KVER=$KVER '$ROOT/scripts/install' --dropin '$TMP/build/nvidia-peermem.ko'"
check "refusals installed nothing" test ! -e "$TMP/dest3"

# 4. The packaging files themselves.
M=$ROOT/packaging/modprobe.d/peermem.conf
check "modprobe: no softdep (kmod would skip the install lines)" bash -c "! grep -q '^softdep' '$M'"
check "modprobe: install peermem guard" grep -q '^install peermem if \[ -d /sys/module/nvidia_peermem \]' "$M"
check "modprobe: install nvidia_peermem guard" grep -q '^install nvidia_peermem if \[ -d /sys/module/peermem \]' "$M"
check "modprobe: --ignore-install passes options" bash -c "grep '^install ' '$M' | grep -v -q -- '--ignore-install [a-z_]* \$CMDLINE_OPTS\$' && exit 1 || exit 0"
# The install commands are valid sh, refuse when the other module is loaded (a fake
# /sys/module), and otherwise call modprobe --ignore-install (a fake modprobe).
mkdir -p "$TMP/sh/sys/module/nvidia_peermem" "$TMP/sh/sbin"
printf '#!/bin/sh\necho "modprobe $*"\n' > "$TMP/sh/sbin/modprobe"; chmod +x "$TMP/sh/sbin/modprobe"
cmd_of() { grep "^install $1 " "$M" | sed "s/^install $1 //; s|/sys/module|$TMP/sh/sys/module|g; s|/sbin/modprobe|$TMP/sh/sbin/modprobe|; s/\\\$CMDLINE_OPTS/persistent_api_support=0/"; }
check "modprobe: install peermem is valid sh" sh -n -c "$(cmd_of peermem)"
check "modprobe: peermem refused while nvidia_peermem loaded" bash -c "! sh -c '$(cmd_of peermem)'"
got=$(sh -c "$(cmd_of nvidia_peermem)" 2>&1)
check "modprobe: nvidia_peermem loads when peermem is not" test "$got" = "modprobe --ignore-install nvidia_peermem persistent_api_support=0"
check "depmod.d: override nvidia-peermem (spelled as the file)" grep -qx 'override nvidia-peermem \* extra' "$ROOT/packaging/depmod.d/peermem.conf"
check "depmod.d: override peermem" grep -qx 'override peermem \* extra' "$ROOT/packaging/depmod.d/peermem.conf"

# 5. find-symvers on a fake host, and dkms.conf evaluated as dkms would.
F=$TMP/host
mkdir -p "$F/usr/src/ofa_kernel/default" "$F/usr/src/nvidia-580.65.06" "$F/usr/src/nvidia-575.57.08" \
	"$F/sys/module/nvidia" "$F/lib/modules/$KVER/build"
touch "$F/usr/src/ofa_kernel/default/Module.symvers" "$F/usr/src/nvidia-580.65.06/Module.symvers" \
	"$F/usr/src/nvidia-575.57.08/Module.symvers"
printf '0x0\tprintk\tvmlinux\tEXPORT_SYMBOL\t\n' > "$F/lib/modules/$KVER/build/Module.symvers"
echo 575.57.08 > "$F/sys/module/nvidia/version"
got=$(FIND_SYMVERS_ROOT=$F ARCH=x86_64 "$ROOT/packaging/find-symvers" "$KVER" 2>/dev/null)
check "find-symvers: MOFED default + loaded driver's nvidia" test "$got" = "$F/usr/src/ofa_kernel/default/Module.symvers $F/usr/src/nvidia-575.57.08/Module.symvers"
mkdir -p "$F/usr/src/ofa_kernel/x86_64/$KVER"; touch "$F/usr/src/ofa_kernel/x86_64/$KVER/Module.symvers"
rm "$F/sys/module/nvidia/version"
got=$(FIND_SYMVERS_ROOT=$F ARCH=x86_64 "$ROOT/packaging/find-symvers" "$KVER" 2>/dev/null)
check "find-symvers: per-arch MOFED first, newest nvidia" test "$got" = "$F/usr/src/ofa_kernel/x86_64/$KVER/Module.symvers $F/usr/src/nvidia-580.65.06/Module.symvers"
# The kernel's own ib_core with the in-box peer-memory core (Ubuntu's, NV-Kernels'):
# its exports are the kernel's (no extra symbols), said on stderr; MOFED's, where it is
# installed too, wins (its ib_core is the one that loads, from updates/).
I=$TMP/inbox
mkdir -p "$I/lib/modules/$KVER/build" "$I/usr/src/nvidia-580.65.06"
touch "$I/usr/src/nvidia-580.65.06/Module.symvers"
printf '0x1\tib_register_peer_memory_client\tdrivers/infiniband/core/ib_uverbs\tEXPORT_SYMBOL\t\n' > "$I/lib/modules/$KVER/build/Module.symvers"
got=$(FIND_SYMVERS_ROOT=$I ARCH=x86_64 "$ROOT/packaging/find-symvers" "$KVER" 2>"$TMP/inbox.err")
check "find-symvers: in-box core: only nvidia's, exit 0" test "$got" = "$I/usr/src/nvidia-580.65.06/Module.symvers"
check "find-symvers: in-box core: says it is the kernel's own" grep -q "the kernel's own ib_uverbs exports the peer-memory core (in-box" "$TMP/inbox.err"
mkdir -p "$I/usr/src/ofa_kernel/default"; touch "$I/usr/src/ofa_kernel/default/Module.symvers"
got=$(FIND_SYMVERS_ROOT=$I ARCH=x86_64 "$ROOT/packaging/find-symvers" "$KVER" 2>/dev/null)
check "find-symvers: MOFED over the in-box core when both are installed" test "$got" = "$I/usr/src/ofa_kernel/default/Module.symvers $I/usr/src/nvidia-580.65.06/Module.symvers"
# dkms 3.2 (Debian 13): a module's Module.symvers beside the built module, its build
# tree removed.
D=$TMP/dkms32
mkdir -p "$D/lib/modules/$KVER/build" "$D/var/lib/dkms/nvidia/580.95.05/$KVER/x86_64/module" \
	"$D/var/lib/dkms/mlnx-ofed-kernel/25.07/$KVER/x86_64/module"
touch "$D/var/lib/dkms/nvidia/580.95.05/$KVER/x86_64/module/Module.symvers" \
	"$D/var/lib/dkms/mlnx-ofed-kernel/25.07/$KVER/x86_64/module/Module.symvers"
got=$(FIND_SYMVERS_ROOT=$D ARCH=x86_64 "$ROOT/packaging/find-symvers" "$KVER" 2>/dev/null)
check "find-symvers: dkms 3.2's layout (module/Module.symvers) for MOFED and nvidia" test "$got" = \
	"$D/var/lib/dkms/mlnx-ofed-kernel/25.07/$KVER/x86_64/module/Module.symvers $D/var/lib/dkms/nvidia/580.95.05/$KVER/x86_64/module/Module.symvers"
E=$TMP/empty; mkdir -p "$E"
check "find-symvers: fails when nothing is found" bash -c "! FIND_SYMVERS_ROOT='$E' '$ROOT/packaging/find-symvers' '$KVER' >/dev/null 2>&1"
conf=$(env -i PATH="$PATH" FIND_SYMVERS_ROOT="$F" ARCH=x86_64 bash -c '
	kernelver='"$KVER"'; kernel_source_dir=/lib/modules/'"$KVER"'/build; source_tree='"$TMP/dest1/usr/src"'
	. "'"$TMP/dest1/usr/src/peermem-$VERSION/dkms.conf"'"
	echo "$PACKAGE_NAME|$PACKAGE_VERSION|${BUILT_MODULE_NAME[0]}|${BUILT_MODULE_LOCATION[0]}|${DEST_MODULE_LOCATION[0]}|$AUTOINSTALL"
	echo "${MAKE[0]}"')
check "dkms.conf: names and locations" test "$(head -1 <<<"$conf")" = "peermem|$VERSION|peermem|build/peermem/|/extra|yes"
check "dkms.conf: MAKE carries KDIR and the found symvers" test "$(tail -1 <<<"$conf")" = "make KDIR=/lib/modules/$KVER/build KBUILD_EXTRA_SYMBOLS='$F/usr/src/ofa_kernel/x86_64/$KVER/Module.symvers $F/usr/src/nvidia-580.65.06/Module.symvers' modules"
check "dkms.conf: kernels without Rust are not built for" grep -qx 'BUILD_EXCLUSIVE_CONFIG="CONFIG_RUST"' "$S/dkms.conf"
# The releases dkms builds for are SUPPORTED_KERNELS' (written there only): each
# listed release's kernels match dkms's pattern (as dkms matches it: bash's =~), a
# release next to them does not.
excl=$(bash -c '. "$1" 2>/dev/null; echo "$BUILD_EXCLUSIVE_KERNEL"' _ "$S/dkms.conf")
rels=$(sed -e 's/#.*//' "$ROOT/SUPPORTED_KERNELS" | tr -s ' \n' ' ')
matches() { [[ $1 =~ $excl ]]; }
for r in $rels; do
	for k in "$r.0-34-generic" "$r.4+deb13-amd64" "$r.0"; do
		check "dkms.conf: a kernel of $r ($k) is built for (SUPPORTED_KERNELS)" matches "$k"
	done
done
for k in 7.2.12+deb13-amd64 7.1.0-rust 6.12.48+deb13-amd64 7.30.1-generic 17.0.1-generic; do
	check "dkms.conf: $k is skipped (not in SUPPORTED_KERNELS)" bash -c '! [[ $1 =~ $2 ]]' _ "$k" "$excl"
done

# 6. The drop-in's dkms package: its own name and source tree, nvidia-peermem.ko, no
# edits.
D=$TMP/dest4
out=$(DESTDIR=$D "$ROOT/scripts/install" --dkms --dropin 2>&1)
check "install --dkms --dropin exits 0" test $? -eq 0
SD=$D/usr/src/peermem-dropin-$VERSION
check "drop-in package: sources in /usr/src/peermem-dropin-<VERSION>" test -f "$SD/dkms.conf" -a -f "$SD/src/peermem.rs" -a -x "$SD/scripts/kernel-toolchain"
check "drop-in package: no native package laid out" test ! -e "$D/usr/src/peermem-$VERSION"
check "drop-in package: no placeholder left" bash -c "! grep -q '@[A-Z]*@' '$SD/dkms.conf'"
check "drop-in package: dkms.conf is the template with @DROPIN@ 1" \
	bash -c "diff <(sed 's/@VERSION@/$VERSION/g; s/@DROPIN@/1/g; /^BUILD_EXCLUSIVE_KERNEL=/d' '$ROOT/packaging/dkms.conf') <(grep -v '^BUILD_EXCLUSIVE_KERNEL=' '$SD/dkms.conf')"
check "drop-in package: ... with the native package's releases" \
	bash -c "[ \"\$(grep '^BUILD_EXCLUSIVE_KERNEL=' '$SD/dkms.conf')\" = \"\$(grep '^BUILD_EXCLUSIVE_KERNEL=' '$S/dkms.conf')\" ]"
check "drop-in package: output names it" grep -q "installed $SD/dkms.conf" <<<"$out"
# dkms's list of modules it installs without its version check: the drop-in over
# NVIDIA's nvidia-peermem.ko of the driver's (higher) version; not the native package.
check "drop-in package: dkms installs it over NVIDIA's nvidia-peermem.ko (modules_to_force_install)" \
	test "$(cat "$D/usr/share/dkms/modules_to_force_install/peermem-dropin" 2>&1)" = peermem-dropin_version-override
check "native package: no dkms version override" test ! -e "$S/../../share/dkms/modules_to_force_install/peermem-dropin"
conf=$(env -i PATH="$PATH" FIND_SYMVERS_ROOT="$F" ARCH=x86_64 bash -c '
	kernelver='"$KVER"'; kernel_source_dir=/lib/modules/'"$KVER"'/build; source_tree='"$D/usr/src"'
	. "'"$SD/dkms.conf"'"
	echo "$PACKAGE_NAME|$PACKAGE_VERSION|${BUILT_MODULE_NAME[0]}|${BUILT_MODULE_LOCATION[0]}|${DEST_MODULE_LOCATION[0]}|$AUTOINSTALL"
	echo "${MAKE[0]}"')
check "drop-in dkms.conf: names and locations" test "$(head -1 <<<"$conf")" = "peermem-dropin|$VERSION|nvidia-peermem|build/nvidia-peermem/|/extra|yes"
check "drop-in dkms.conf: MAKE builds the dropin target with the found symvers" test "$(tail -1 <<<"$conf")" = "make KDIR=/lib/modules/$KVER/build KBUILD_EXTRA_SYMBOLS='$F/usr/src/ofa_kernel/x86_64/$KVER/Module.symvers $F/usr/src/nvidia-580.65.06/Module.symvers' dropin"

# 7. Signing with a Machine Owner Key: the kernel's sign-file (a stand-in recording its
# arguments and appending the signature marker, as the real one appends a signature)
# with the kernel's hash, only where a key is configured.
D=$TMP/dest5
mkdir -p "$D/lib/modules/$KVER/build/scripts" "$D/var/lib/shim-signed/mok"
printf 'CONFIG_MODULE_SIG_HASH="sha256"\n' > "$D/lib/modules/$KVER/build/.config"
cat > "$D/lib/modules/$KVER/build/scripts/sign-file" <<'SIGN'
#!/bin/sh
echo "$@" > "$(dirname "$0")/sign-file.args"
printf '~Module signature appended~\n' >> "$4"
SIGN
chmod +x "$D/lib/modules/$KVER/build/scripts/sign-file"
: > "$D/var/lib/shim-signed/mok/MOK.priv"; : > "$D/var/lib/shim-signed/mok/MOK.der"
out=$("$ROOT/scripts/install" --destdir "$D" --kver "$KVER" "$TMP/build/peermem.ko" 2>&1)
check "MOK: install exits 0" test $? -eq 0
check "MOK: Ubuntu's MOK key signs the module with the kernel's hash" test \
	"$(cat "$D/lib/modules/$KVER/build/scripts/sign-file.args")" = \
	"sha256 $D/var/lib/shim-signed/mok/MOK.priv $D/var/lib/shim-signed/mok/MOK.der $D/lib/modules/$KVER/extra/peermem.ko"
check "MOK: the installed module carries a signature" bash -c "tail -c 28 '$D/lib/modules/$KVER/extra/peermem.ko' | grep -q 'Module signature appended'"
check "MOK: the build's own file is untouched" bash -c "! grep -q 'Module signature' '$TMP/build/peermem.ko'"
check "no MOK: nothing signed" bash -c "! tail -c 28 '$TMP/dest1/lib/modules/$KVER/extra/peermem.ko' | grep -q 'signature appended'"

# 8. Uninstall: everything install put there goes, a foreign nvidia-peermem.ko stays.
D=$TMP/dest6
"$ROOT/scripts/install" --destdir "$D" --kver "$KVER" --dkms "$TMP/build/peermem.ko" >/dev/null 2>&1
"$ROOT/scripts/install" --destdir "$D" --dkms --dropin >/dev/null 2>&1
fake_ko "$TMP/nvidia-own.ko" nvidia_peermem "NVIDIA" "$KVER"
install -D -m 644 "$TMP/nvidia-own.ko" "$D/lib/modules/$KVER/extra/nvidia-peermem.ko"
out=$("$ROOT/scripts/install" --uninstall --destdir "$D" --kver "$KVER" 2>&1)
check "uninstall exits 0" test $? -eq 0
left=$(cd "$D" && find . \( -type f -o -type l \) | sort | tr '\n' ' ')
check "uninstall leaves only the module that is not peermem's" test "$left" = "./lib/modules/$KVER/extra/nvidia-peermem.ko "
check "uninstall says what it kept" grep -qF "kept $D/lib/modules/$KVER/extra/nvidia-peermem.ko (not peermem's)" <<<"$out"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
