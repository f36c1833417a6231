# kmemleak checks for the debug kernel (scripts/test-debug; CONFIG_DEBUG_KMEMLEAK in
# scripts/kconfig/debug.config). Not a plan of its own: scripts/test-debug builds the
# guest's plan as this file, then `kmemleak_baseline`, then tests/qemu/plans/test.sh,
# then `kmemleak_after_all_unloaded` and `kmemleak_selftest`.
#
# Checks (suite peermem_debug_leaks, 6 cases):
#   kmemleak_active                 the detector is on and scans on demand
#   nothing_leaked                  after every module of the plan is unloaded, two
#                                   scans report no unreferenced object
#   no_dma_mappings_left            CONFIG_DMA_API_DEBUG tracks no more mappings than
#                                   at boot (a peer-BAR mapping that was never
#                                   unmapped; the fakes' pci-testdev has no driver, so
#                                   dma-debug's own unbind-time check never runs)
#   no_dma_api_errors               dma-debug counted no error (each one also WARNs:
#                                   all_errors is set, not only the first)
#   planted_orphans_reported        samples/kmemleak/kmemleak-test.ko's eight orphan
#                                   kmalloc() objects are each reported (the detector
#                                   really finds a module's leak in this VM)
#   planted_list_leaks_reported     its ten list elements, orphaned by the module's
#                                   exit, are reported too
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

dma_none_left() {
    n=$(dma_mappings)
    [ "$n" -le "$dma_base" ] && return 0
    echo "dma-debug tracks $n mappings, $dma_base at boot:"
    cat $DMAD/dump
    return 1
}

# Each of COUNT addresses ADDR... is reported as an unreferenced object:
# reported COUNT ADDR...
reported() {
    want=$1; shift
    rep=$(cat $KL)
    n=0 miss=""
    for a in "$@"; do
        n=$((n + 1))
        case "$rep" in
            *"unreferenced object $a "*) ;;
            *) miss="$miss $a" ;;
        esac
    done
    [ "$n" -eq "$want" ] || { echo "kmemleak-test printed $n addresses, expected $want"; return 1; }
    [ -z "$miss" ] || { echo "not reported:$miss ($(printf '%s\n' "$rep" | grep -c 'unreferenced object') reported in all)"; return 1; }
}

# The planted leak: load kmemleak-test (it leaks at init, and orphans a list at exit),
# unload it, scan, and find each of the addresses it printed.
kmemleak_selftest() {
    dmesg -c >/dev/null
    load kmemleak-test
    log=$(dmesg)
    orphans=$(printf '%s\n' "$log" | sed -nE 's/.*kmemleak: kmalloc\((32|1024|2048|4096)\) = (0x[0-9a-f]+).*/\2/p')
    elems=$(printf '%s\n' "$log" | sed -nE 's/.*kmemleak: kzalloc\(sizeof\(\*elem\)\) = (0x[0-9a-f]+).*/\1/p')
    unload kmemleak_test
    kmemleak_scan
    # shellcheck disable=SC2086
    check $KLS planted_orphans_reported reported 8 $orphans
    # shellcheck disable=SC2086
    check $KLS planted_list_leaks_reported reported 10 $elems
    echo clear > $KL
}
