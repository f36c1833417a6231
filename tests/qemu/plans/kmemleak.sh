# kmemleak checks for the debug kernel (scripts/test-debug; CONFIG_DEBUG_KMEMLEAK in
# scripts/kconfig/debug.config). Not a plan of its own: scripts/test-debug builds the
# guest's plan as this file, then `kmemleak_baseline` and `kmemleak_selftest`, then
# tests/qemu/plans/test.sh, then `kmemleak_after_all_unloaded`, the fault injection
# of tests/qemu/plans/faults.sh and `kmemleak_after_faults`.
#
# Checks (suite peermem_debug_leaks, 7 cases):
#   kmemleak_active                 the detector is on and scans on demand
#   planted_leaks_reported          at least 28 of the 32 kmalloc'd objects that
#                                   tests/debug/peermem_leak_selftest.ko leaks (their
#                                   addresses kept only complemented) are reported: the
#                                   detector really finds a module's leak in this VM
#   kept_objects_not_reported       none of the 8 objects it keeps real pointers to
#                                   is reported: a report means unreferenced
#   nothing_leaked                  after every module of the plan is unloaded, two
#                                   scans report no unreferenced object
#   no_dma_mappings_left            CONFIG_DMA_API_DEBUG tracks no more mappings than
#                                   at boot (a peer-BAR mapping that was never
#                                   unmapped; the fakes' pci-testdev has no driver, so
#                                   dma-debug's own unbind-time check never runs)
#   no_dma_api_errors               dma-debug counted no error (each one also WARNs:
#                                   all_errors is set, not only the first)
#   nothing_leaked_after_faults     the same two scans after the fault-injection suite
#
# The report itself is never printed on success: its "unreferenced object 0x" lines
# are a kernel report to tools/ktap-summary. A failed nothing_leaked check prints it
# (as check's "    # " lines), which also fails the run as a report.
KL=/sys/kernel/debug/kmemleak
KLS=peermem_debug_leaks

# kmemleak reports only objects older than 5 s (mm/kmemleak.c, jiffies_min_age) and
# advises two scans to drop transient references from stacks and registers.
kmemleak_scan() {
    sleep 6
    echo scan > $KL && echo scan > $KL
}

# Report is empty: kmemleak_empty
kmemleak_empty() {
    rep=$(cat $KL)
    [ -z "$rep" ] && return 0
    echo "kmemleak reports $(printf '%s\n' "$rep" | grep -c 'unreferenced object') object(s):"
    printf '%s\n' "$rep"
    return 1
}

DMAD=/sys/kernel/debug/dma-api
dma_mappings() { wc -l < $DMAD/dump; }

# Before the plan: what boot leaked (the kernel's own early allocations) is not the
# modules' doing; scan once and mark it as seen. Same for boot's DMA mappings.
kmemleak_baseline() {
    check $KLS kmemleak_active kmemleak_scan
    echo clear > $KL
    echo 1 > $DMAD/all_errors
    dma_base=$(dma_mappings)
    dma_err_base=$(cat $DMAD/error_count)
}

# After the plan, every module unloaded.
kmemleak_after_all_unloaded() {
    kmemleak_scan
    check $KLS nothing_leaked kmemleak_empty
    echo clear > $KL
    check $KLS no_dma_mappings_left dma_none_left
    check $KLS no_dma_api_errors equals "$dma_err_base" cat $DMAD/error_count
}

# After the fault-injection suite: kmemleak only (dma-debug may have disabled itself
# when an injected failure hit its own bookkeeping).
kmemleak_after_faults() {
    kmemleak_scan
    check $KLS nothing_leaked_after_faults kmemleak_empty
    echo clear > $KL
}

dma_none_left() {
    n=$(dma_mappings)
    [ "$n" -le "$dma_base" ] && return 0
    echo "dma-debug tracks $n mappings, $dma_base at boot:"
    cat $DMAD/dump
    return 1
}

# The addresses peermem_leak_selftest printed for KIND (leaked or kept), as
# kmemleak prints them: it prints them complemented (~address), see the module.
# planted KIND
planted() {
    dmesg | sed -nE "s/.*peermem_leak_selftest: $1 ~([0-9a-f]+)\$/\1/p" |
        while read -r h; do printf '0x%x\n' $(( ~0x$h )); done
}

# How many of the addresses ADDR... kmemleak reports: reported_count ADDR...
reported_count() {
    rep=$(cat $KL)
    n=0
    for a in "$@"; do
        case "$rep" in *"unreferenced object $a "*) n=$((n + 1)) ;; esac
    done
    echo "$n"
}

# All WANT leaked objects were planted and at least MIN of them are reported:
# leaks_reported WANT MIN ADDR...
leaks_reported() {
    want=$1 min=$2; shift 2
    [ "$#" -eq "$want" ] || { echo "peermem_leak_selftest printed $# leaked objects, expected $want"; return 1; }
    n=$(reported_count "$@")
    echo "peermem_leak_selftest: $n of $# leaked objects reported"
    i=0
    for a in "$@"; do
        [ "$(reported_count "$a")" = 1 ] || echo "peermem_leak_selftest: not reported: leaked object $i at $a"
        i=$((i + 1))
    done
    [ "$n" -ge "$min" ]
}

# None of the WANT kept objects (referenced from the module's data) is reported:
# kept_not_reported WANT ADDR...
kept_not_reported() {
    want=$1; shift
    [ "$#" -eq "$want" ] || { echo "peermem_leak_selftest printed $# kept objects, expected $want"; return 1; }
    n=$(reported_count "$@")
    [ "$n" -eq 0 ] || { echo "$n of $# referenced objects reported as leaks:"; cat $KL; return 1; }
}

# The planted leak (tests/debug/peermem_leak_selftest.c): 32 kmalloc'd objects whose
# only trace is their complemented address, 8 kept by real pointers. At least 28 of
# the 32 must be reported (all are, in the runs seen since the module drains recently
# freed slots first; a conservative scanner can still meet a stale copy of an address).
# That holds because the VM boots with slab_debug (scripts/test-debug): without it,
# stale copies of fresh addresses in the kmalloc caches' per-CPU sheaves hide most of
# them (3 to 6 of 32 reported), and would hide a leak of peermem's as well. Run before the plan, and freed by the module's
# unload: the plan's nothing_leaked checks start from a clean state.
kmemleak_selftest() {
    dmesg -c >/dev/null
    load peermem_leak_selftest
    leaked=$(planted leaked)
    kept=$(planted kept)
    kmemleak_scan
    # shellcheck disable=SC2086
    check $KLS planted_leaks_reported leaks_reported 32 28 $leaked
    # shellcheck disable=SC2086
    check $KLS kept_objects_not_reported kept_not_reported 8 $kept
    # How many, for the log (check prints its output only on failure).
    # shellcheck disable=SC2086
    leaks_reported 32 0 $leaked
    unload peermem_leak_selftest
    echo clear > $KL
}
