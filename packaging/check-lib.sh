# SPDX-License-Identifier: GPL-2.0 OR MIT
# Sourced by packaging/test-*.sh: counters and the ok / bad / check helpers. Each
# script ends with: echo "$passed passed, $failed failed".
# shellcheck shell=bash
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }
check() { # check NAME COMMAND...
	local name=$1; shift
	if "$@" >/dev/null 2>&1; then ok "$name"; else bad "$name"; fi
}

# ns_scratch SCRATCH KDIR DIR...: inside a mount namespace of the caller's (unshare
# --mount), an overlay over each DIR whose upper layer is under SCRATCH (writes land
# there), empty directories of SCRATCH over /usr/lib/modules and /var/lib/dkms,
# TMPDIR in SCRATCH, and KDIR presented as /lib/modules/<its release>/build. Calls
# fatal (the caller's) on a mount that fails.
ns_scratch() {
	local s=$1 k=$2 d kver
	shift 2
	kver=$(cat "$k/include/config/kernel.release")
	for d in "$@"; do
		mkdir -p "$s/ovl$d/up" "$s/ovl$d/work"
		mount -t overlay overlay -o "lowerdir=$d,upperdir=$s/ovl$d/up,workdir=$s/ovl$d/work" "$d" ||
			fatal "namespace: overlay over $d"
	done
	mkdir -p "$s/modules" "$s/dkms" "$s/tmp" /usr/lib/modules /var/lib/dkms
	mount --bind "$s/modules" /usr/lib/modules && mount --bind "$s/dkms" /var/lib/dkms ||
		fatal "namespace: bind mounts"
	export TMPDIR=$s/tmp
	mkdir -p "/lib/modules/$kver"
	ln -s "$k" "/lib/modules/$kver/build"
}
