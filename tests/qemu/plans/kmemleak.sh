# kmemleak checks for the debug kernel (scripts/test-debug; CONFIG_DEBUG_KMEMLEAK in
# scripts/kconfig/debug.config). Not a plan of its own: scripts/test-debug builds the
# guest's plan as this file, then `kmemleak_baseline`, then tests/qemu/plans/test.sh,
# then `kmemleak_after_all_unloaded` and `kmemleak_selftest`.
#
# Checks (suite peermem_debug_leaks, 5 cases):
#   kmemleak_active                 the detector is on and scans on demand
#   nothing_leaked                  after every module of the plan is unloaded, two
#                                   scans report no unreferenced object
#   no_dma_mappings_left            CONFIG_DMA_API_DEBUG tracks no more mappings than
#                                   at boot (a peer-BAR mapping that was never
#                                   unmapped; the fakes' pci-testdev has no driver, so
#                                   dma-debug's own unbind-time check never runs)
#   no_dma_api_errors               dma-debug counted no error (each one also WARNs:
#                                   all_errors is set, not only the first)
#   planted_leaks_reported          of the 18 objects samples/kmemleak/kmemleak-test.ko
#                                   leaks (8 orphan kmalloc()s at init, a 10-element
#                                   list orphaned at exit), at least one is reported:
#                                   the detector really finds a module's leak in this
#                                   VM. Seen: 3 to 4 of the 8, 0 to 5 of the 10.
#
# The report itself is never printed on success: its "unreferenced object 0x" lines
# are a kernel report to scripts/ktap-summary. A failed nothing_leaked check prints it
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

# Of the COUNT addresses ADDR... that kmemleak-test printed, at least one is reported
# as an unreferenced object (all of them would be ideal, but stale copies of the
# pointers, on stacks and in freed-but-cached memory, hide some of them from a
# conservative scanner; seen: 4 of 18 with stack scanning on). Prints how many were.
# reported WHAT COUNT ADDR...
reported() {
    what=$1 want=$2; shift 2
    rep=$(cat $KL)
    n=0 found=0
    for a in "$@"; do
        n=$((n + 1))
        case "$rep" in
            *"unreferenced object $a "*) found=$((found + 1)) ;;
        esac
    done
    echo "kmemleak-test: $found of $n $what reported"
    [ "$n" -eq "$want" ] || { echo "kmemleak-test printed $n addresses, expected $want"; return 1; }
    [ "$found" -gt 0 ]
}

# The planted leak: load kmemleak-test (it leaks at init, and orphans a list at exit),
# unload it, scan, and look for the addresses it printed.
kmemleak_selftest() {
    dmesg -c >/dev/null
    load kmemleak-test
    log=$(dmesg)
    # Every object kmemleak-test leaks: kmalloc'd, vmalloc'd and per-cpu ones.
    orphans=$(printf '%s\n' "$log" | sed -nE 's/.*kmemleak: (kmalloc|vmalloc|__alloc_percpu)\([0-9, ]+\) = (0x[0-9a-f]+).*/\2/p')
    elems=$(printf '%s\n' "$log" | sed -nE 's/.*kmemleak: kzalloc\(sizeof\(\*elem\)\) = (0x[0-9a-f]+).*/\1/p')
    unload kmemleak_test
    # Task stacks hold stale copies of the pointers (insmod's init ran on one): the
    # planted objects are looked for with stack scanning off.
    echo stack=off > $KL
    kmemleak_scan
    echo stack=on > $KL
    # shellcheck disable=SC2086
    check $KLS planted_leaks_reported reported "planted objects" "$(echo $orphans $elems | wc -w)" $orphans $elems
    # How many, for the log (check prints its output only on failure).
    # shellcheck disable=SC2086
    { reported orphans "$(echo $orphans | wc -w)" $orphans; reported "list elements" 10 $elems; } | grep '^kmemleak-test:'
    echo clear > $KL
}
