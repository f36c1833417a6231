# Helpers for the plans the guest runs (tests/qemu/plans/*.sh), sourced by init.
# A failure is printed as a PEERMEM-FAIL line, a scenario assertion as a
# PEERMEM-CHECK line; tools/ktap-summary reads both.

# load MODULE [PARAM=VALUE]...: insmod /peermem/MODULE.ko; a failure is a test failure.
load() {
    m=$1; shift
    if ! out=$(insmod "/peermem/$m.ko" "$@" 2>&1); then
        echo "PEERMEM-FAIL insmod $m: $out"
        return 1
    fi
}

# unload MODULE: rmmod; a failure is a test failure.
unload() {
    if ! out=$(rmmod "$1" 2>&1); then
        echo "PEERMEM-FAIL rmmod $1: $out"
        return 1
    fi
}

# check SUITE NAME COMMAND...: runs COMMAND, records ok / not ok for NAME in SUITE.
check() {
    suite=$1 name=$2; shift 2
    if out=$("$@" 2>&1); then
        echo "PEERMEM-CHECK $suite ok $name"
    else
        echo "PEERMEM-CHECK $suite not ok $name"
        printf '%s\n' "$out" | sed 's/^/    # /'
    fi
}

# A command's output must contain TEXT: expect_output TEXT COMMAND...
expect_output() {
    text=$1; shift
    out=$("$@" 2>&1) || true
    case "$out" in
        *"$text"*) return 0 ;;
        *) echo "expected '$text' in output of '$*', got: $out"; return 1 ;;
    esac
}

# A command must fail: expect_fail COMMAND...
expect_fail() {
    if "$@" >/dev/null 2>&1; then echo "'$*' succeeded, expected a failure"; return 1; fi
}

# The kernel has KUnit (the test bed's kernels; no distribution kernel does): the
# suites can run.
have_kunit() { [ -d /sys/module/kunit ]; }
# The kernel has DMA-API debugging (its debugfs lists every live mapping).
have_dma_debug() { [ -f /sys/kernel/debug/dma-api/dump ]; }

# --- the fakes' and peermem's counters (debugfs) ---
# Fields of "name value" counter files: counter FILE NAME
counter() { awk -v k="$2" '$1 == k { print $2 }' "$1"; }
nv_counter() { counter /sys/kernel/debug/fake_nvidia/counters "$1"; }
core_counter() { counter /sys/kernel/debug/ib_core/counters "$1"; }
equals() { want=$1; shift; got=$("$@"); [ "$got" = "$want" ] || { echo "expected '$want', got '$got' from '$*'"; return 1; }; }
# The fakes saw no contract violation and hold nothing.
clean() {
    equals 0 nv_counter pins_live && equals 0 nv_counter dma_mappings_live &&
    equals 0 nv_counter violations_total && equals 0 core_counter mrs_live &&
    equals 0 core_counter violations_total
}
# dmesg has a line containing TEXT: logged TEXT
logged() { dmesg | grep -q -- "$1" || { echo "no dmesg line with '$1'"; return 1; }; }

# --- dma-debug (CONFIG_DMA_API_DEBUG): the DMA mappings that are live ---
# dma_entries DEV: "PHYS DMA" per live mapping of PCI device DEV (e.g. 0000:00:03.0),
# both as lower-case hex without 0x and leading zeros.
dma_entries() {
    awk -v d="$1" 'function norm(x) { x = tolower(x); sub(/^0x/, "", x); sub(/^0+/, "", x); return x == "" ? "0" : x }
        $2 == d { p = ""; x = ""
            for (i = 3; i <= NF; i++) { if ($i ~ /^P=/) p = substr($i, 3); if ($i ~ /^D=/) x = substr($i, 3) }
            print norm(p), norm(x) }' /sys/kernel/debug/dma-api/dump
}
count_entries() { dma_entries "$1" | wc -l | tr -d ' '; }
# dma_addresses same|differ DEV: DEV has live mappings, and in every one the DMA
# address equals (no IOMMU) or differs from (an IOMMU translating) the bus address.
dma_addresses() {
    dma_entries "$2" | awk -v want="$1" '{ n++; if (($1 == $2) != (want == "same")) { print "P=" $1 " D=" $2 ": not " want; bad = 1 } }
        END { if (!n) { print "no live mapping"; bad = 1 } exit bad }'
}
# The PCI names of the HCA stand-in and of the 32-bit peer, from the fake core's log.
hca_name() { dmesg | sed -n 's/.*loaded (HCA \([^,]*\), 32-bit device \([^)]*\)).*/\1/p' | tail -n 1; }
dma32_name() { dmesg | sed -n 's/.*loaded (HCA \([^,]*\), 32-bit device \([^)]*\)).*/\2/p' | tail -n 1; }
