# Allocation-failure injection (debug kernel only: CONFIG_FAULT_INJECTION, FAILSLAB,
# FAIL_PAGE_ALLOC; scripts/kconfig/debug.config). Not a plan of its own:
# scripts/test-debug appends it after tests/qemu/plans/test.sh (every module
# unloaded; its helpers, e.g. `clean`, are used here) and before the kmemleak
# checks, which then also catch what an injected failure leaked.
#
# peermem_test_faults.ko (tests/client/peermem_faults_test.c, suite peermem_faults)
# runs each scenario in a fail-nth loop; this plan lets failslab / fail_page_alloc
# fail GFP_KERNEL allocations (ignore-gfp-wait N), captures /dev/kmsg while the
# suite runs, and attributes every injected failure to the peermem function that
# made the failing allocation, from the stack of its "FAULT_INJECTION: forcing a
# failure" dump (verbose=2: the stack is printed only with verbose > 1,
# lib/fault-inject.c fail_dump(); no rate limit by default).
#
# Checks (suite peermem_faults_sites):
#   no_module_reference_left  peermem's refcnt is 0 once the suite is unloaded (a
#                         registration context never released keeps its reference)
#   nothing_left          the fakes hold nothing and saw no violation afterwards
#   capture_complete      the kmsg reader ran to the end and lost no record, and
#                         saw at least one and at most as many dumps as the
#                         suite injected failures (failures of __GFP_NOWARN
#                         allocations print none)
#   every_site_hit        each allocation site of a registration in FAULT_SITES
#                         failed at least once; the table `site hits` is printed
FI=/sys/kernel/debug
FSS=peermem_faults_sites
FKMSG=/tmp/peermem-faults.kmsg

# The allocation sites of a registration, "label pattern". Each failure whose
# innermost module frame is peermem's is classified by the patterns (awk regexes)
# matching "ALLOC|OWNER": ALLOC is that innermost peermem frame (often a kernel-crate
# generic instantiated for peermem's type, whose mangled name says what is
# allocated: UniqueArc<...>::new_uninit, RBTreeNode<PinKey, ...>::new), OWNER the
# innermost frame of peermem's own code (a Rust path of the peermem crate, or a glue.c
# function). The suite registers in both modes. A callback registration allocates its
# record (the core carries it as its context), a new pin's record (PinShared, with the
# client's PinUsers; the registry and the users hold handles of it) and its registry
# node; a persistent registration allocates one record, itself with its pin; both
# build their SG list from the driver's addresses in place, in one allocation. The two
# registrations' records are the same size, so their UniqueArc::new_uninit may be one
# function under either name: they are told apart by their owner. A pin's users are
# linked through the users (kernel::list), and a pin's first DMA mapping is recorded
# in place (only a second one, of concurrent maps, allocates). Module init and debugfs
# allocate too, but only at load, outside the suite; the reference strategy (the
# drop-in's probe pin) is not run either.
FAULT_SITES='
client::user::User::new(ListArc<User>)          ^[^|]*9UniqueArc[^|]*[|][^|]*4User3new
client::persistent::PersistentUser::new(ListArc) ^[^|]*9UniqueArc[^|]*[|][^|]*14PersistentUser3new
registry::Registry::insert(RBTreeNode)          ^[^|]*10RBTreeNode
nv_p2p::NvP2p::pin(Arc<PinShared<PinUsers>>)    ^[^|]*9PinShared[^|]*8PinUsers
glue.c:peermem_sg_alloc(sg_alloc_table)         [|]peermem_sg_alloc$
'

fault_inject_arm() {
    for d in failslab fail_page_alloc; do
        echo N > $FI/$d/ignore-gfp-wait
        echo 2 > $FI/$d/verbose
        echo 0 > $FI/$d/verbose_ratelimit_interval_ms
    done
    echo N > $FI/fail_page_alloc/ignore-gfp-highmem
}

fault_inject_disarm() {
    for d in failslab fail_page_alloc; do
        echo Y > $FI/$d/ignore-gfp-wait
    done
    echo Y > $FI/fail_page_alloc/ignore-gfp-highmem
}

# Per-failure attribution from the kmsg capture. Prints, per failure whose
# innermost module frame is peermem's, "peermem ALLOC|OWNER" and "callsite
# FRAME+OFF" (innermost peermem frame, return offset); per failure elsewhere,
# "elsewhere MODULE" (a fake, also when peermem called it) or "elsewhere kernel";
# then "kmsg_lost N" and "dumps N". Records are deduplicated and checked for gaps
# by sequence number (a reader that fell behind loses records: the check fails).
fault_attribute() {
    awk -F';' '
    function flush() {
        if (infault) {
            if (mod == "peermem") {
                print "peermem", alloc "|" (owner == "" ? alloc : owner)
                print "callsite", cs
            } else {
                print "elsewhere", (mod == "" ? "kernel" : mod)
            }
        }
        infault = 0
    }
    /^ / { next }
    {
        split($1, h, ","); seq = h[2] + 0
        if (seq in seen) next
        seen[seq] = 1
        if (last != "" && seq != last + 1) lost += seq - last - 1
        last = seq
        msg = substr($0, length($1) + 2)
        if (msg ~ /peermem_faults: capture start/) started = 1
        if (!started) next
        if (msg ~ /FAULT_INJECTION: forcing a failure/) {
            flush(); infault = 1; mod = ""; alloc = ""; owner = ""; cs = ""; dumps++
            next
        }
        if (!infault) next
        if (msg ~ /<\/TASK>/) { flush(); next }
        sub(/^ +/, "", msg)
        if (msg ~ /^\?/ || msg !~ /\+0x[0-9a-f]+\/0x[0-9a-f]+/) next
        if (msg !~ /\[[A-Za-z0-9_]+\]$/) next
        m = msg; sub(/.*\[/, "", m); sub(/\]$/, "", m)
        if (mod == "") mod = m
        if (mod != "peermem" || m != "peermem" || owner != "") next
        fn = msg; sub(/\+0x.*/, "", fn)
        if (alloc == "") { alloc = fn; cs = msg; sub(/\/0x.*/, "", cs) }
        # peermem code proper: a C function, or a Rust path whose crate is peermem.
        if (fn !~ /^_R/) owner = fn
        else if (match(fn, /Cs[0-9A-Za-z]+_[0-9]+[A-Za-z_]+/) && substr(fn, RSTART, RLENGTH) ~ /_7peermem$/) owner = fn
    }
    END {
        flush()
        print "kmsg_lost", lost + 0
        print "dumps", dumps + 0
    }' "$FKMSG"
}

# A readable form of mangled Rust (v0) names, field by field: their identifiers,
# "::"-joined (generic arguments included, the leading "peermem::" dropped); C
# names unchanged.
fault_demangle() {
    awk '{
        out = ""
        for (f = 1; f <= NF; f++) {
            s = $f; r = ""; off = ""
            if (match(s, /\+0x[0-9a-f]+$/)) { off = substr(s, RSTART); s = substr(s, 1, RSTART - 1) }
            if (s ~ /^_R/) {
                s = substr(s, 3); i = 1; n = length(s)
                while (i <= n) {
                    c = substr(s, i, 1)
                    if (c ~ /[0-9]/) {
                        L = 0
                        while (i <= n && substr(s, i, 1) ~ /[0-9]/) { L = L * 10 + substr(s, i, 1); i++ }
                        if (L > 0) { r = r (r == "" ? "" : "::") substr(s, i, L); i += L }
                    } else if (c == "B" || c == "s" || (c == "C" && substr(s, i + 1, 1) == "s")) {
                        j = index(substr(s, i), "_"); i += (j > 0 ? j : n)
                    } else i++
                }
                sub(/^peermem::/, "", r)
            } else r = s
            r = r off
            out = out (f > 1 ? " " : "") r
        }
        print out
    }'
}

# The suite's own count of injected failures (its summary line).
fault_injected_by_suite() {
    dmesg | sed -n 's/.*peermem_faults total: .* injected=\([0-9]*\).*/\1/p' | tail -n 1
}

fault_capture_complete() {
    att=$(fault_attribute)
    lost=$(printf '%s\n' "$att" | awk '$1 == "kmsg_lost" { print $2 }')
    dumps=$(printf '%s\n' "$att" | awk '$1 == "dumps" { print $2 }')
    want=$(fault_injected_by_suite)
    echo "kmsg capture: $dumps failure dumps, $lost records lost; the suite injected ${want:-?}"
    [ "$fkmsg_alive" = 1 ] || { echo "the kmsg reader stopped before the suite ended (it fell behind the ring buffer)"; return 1; }
    [ "$lost" = 0 ] && [ -n "$want" ] && [ "$dumps" -gt 0 ] && [ "$dumps" -le "$want" ]
}

# Prints the table `site hits` and more; fails if a site of FAULT_SITES has no hit.
fault_sites_hit() {
    att=$(fault_attribute)
    peer=$(printf '%s\n' "$att" | awk '$1 == "peermem" { print $2 }')
    ret=0
    all=""
    echo "site hits"
    while read -r label pat; do
        [ -n "$label" ] || continue
        hits=$(printf '%s\n' "$peer" | awk -v p="$pat" '$0 ~ p { n++ } END { print n + 0 }')
        echo "$label $hits"
        [ "$hits" -gt 0 ] || ret=1
        all="$all|($pat)"
    done <<SITES
$FAULT_SITES
SITES
    echo "peermem failures $(printf '%s\n' "$peer" | grep -c .)"
    other=$(printf '%s\n' "$peer" | awk -v p="${all#|}" 'NF && $0 !~ p' | sort | uniq -c)
    if [ -n "$other" ]; then
        echo "-- peermem failures matching no site (allocating frame, owner), hits"
        printf '%s\n' "$other" | awk '{ print $2, $1 }' | tr '|' ' ' | fault_demangle
    fi
    echo "-- peermem call sites (innermost peermem frame + return offset), hits"
    printf '%s\n' "$att" | awk '$1 == "callsite" { print $2 }' | sort | uniq -c |
        awk '{ print $2, $1 }' | fault_demangle
    echo "-- failures whose innermost module frame is not peermem's, hits"
    printf '%s\n' "$att" | awk '$1 == "elsewhere" { print $2 }' | sort | uniq -c |
        awk '{ print $2, $1 }'
    return $ret
}

load ib_core
load nvidia
echo reset > $nvctl
load peermem persistent_api_support=0
fault_inject_arm
cat /dev/kmsg > $FKMSG &
fkmsg_pid=$!
echo "peermem_faults: capture start" > /dev/kmsg
load peermem_test_faults
sleep 1
# A reader that falls behind the ring buffer gets EPIPE and cat stops: the debug VM
# boots with log_buf_len=16M (scripts/test-debug), room for every dump of the suite.
if kill $fkmsg_pid 2>/dev/null; then fkmsg_alive=1; else fkmsg_alive=0; fi
wait $fkmsg_pid 2>/dev/null
fault_inject_disarm
unload peermem_test_faults
check $FSS no_module_reference_left equals 0 cat /sys/module/peermem/refcnt
unload peermem
check $FSS nothing_left clean
check $FSS capture_complete fault_capture_complete
check $FSS every_site_hit fault_sites_hit
# The table, for the log (check prints its output only on failure).
fault_sites_hit | sed 's/^/peermem_faults: /'
unload nvidia
unload ib_core
rm -f $FKMSG
