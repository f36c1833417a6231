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
# has NAME TEXT WANT: TEXT contains WANT (a fixed string); else its last lines.
has() { if grep -qF -- "$3" <<<"$2"; then ok "$1"; else bad "$1"; echo "     wanted '$3' in:"; tail -n 8 <<<"$2" | sed 's/^/     | /'; fi; }
# finish: the last line, "N passed, N failed", and the exit status.
finish() { echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }
expect() { # expect NAME GOT WANT
	if [ "$2" = "$3" ]; then ok "$1"; else bad "$1"; echo "     got:  $2"; echo "     want: $3"; fi
}

# versioned_copy SRC DST OLD NEW: a copy of module SRC whose `version=OLD` modinfo
# string reads NEW (same length): a stand-in for NVIDIA's nvidia-peermem.ko, which
# carries the driver's version.
versioned_copy() {
	mkdir -p "$(dirname "$2")"
	python3 - "$@" <<'PY'
import sys
src, dst, old, new = sys.argv[1:]
data = open(src, 'rb').read()
old, new = ('version=' + old + '\0').encode(), ('version=' + new + '\0').encode()
assert data.count(old) == 1 and len(old) == len(new)
open(dst, 'wb').write(data.replace(old, new))
PY
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

# vm_summary LABEL MANIFEST LOG [MANIFEST...]: tools/ktap-summary's verdict on the
# console LOG of a VM run against the MANIFESTs: its lines printed, its counts added to
# the script's; a run it cannot read is a failure. Needs ROOT (the clone).
vm_summary() {
	local label=$1 manifest=$2 vmlog=$3 sum l p f m more=()
	shift 3
	for m in "$@"; do more+=(--manifest "$m"); done
	sum=$(cd "$ROOT" && cargo run --quiet -p ktap-summary -- --manifest "$manifest" "${more[@]}" --label "$label" "$vmlog" 2>&1)
	grep -E '^(ok|not ok|FAIL) ' <<<"$sum"
	l=$(tail -n 1 <<<"$sum")
	p=$(sed -nE "s/^$label: ([0-9]+) passed, ([0-9]+) failed.*/\1/p" <<<"$l")
	f=$(sed -nE "s/^$label: ([0-9]+) passed, ([0-9]+) failed.*/\2/p" <<<"$l")
	if [ -n "$p" ]; then passed=$((passed + p)); failed=$((failed + f))
	else bad "the VM run ($label)"; tail -n 20 "$vmlog"; fi
}
