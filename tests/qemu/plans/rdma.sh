# Part rdma's plan (scripts/test-rdma; docs/testing.md, "The RDMA chain"): a real RDMA
# application's ibv_reg_mr on GPU memory, through the kernel's own ib_uverbs and
# soft-RoCE (rxe on a dummy netdev, RoCE loopback to its own GID), the test bed's
# peer-memory core beside the stack (ib_peer_mem), peermem and the nvidia.ko double,
# whose /dev/fake-nvidia-gpu gives each process GPU memory of its own. The programs
# are Debian's (rdma-core, perftest, iproute2) and the project's test program
# (/peermem/gpu_rdma, tests/rdma/gpu_rdma.c). Suites and check counts:
# tests/qemu/plans/rdma.manifest; one suite per scenario of the part.
export PATH=/usr/bin:/usr/sbin:/bin
P=/peermem
G=$P/gpu_rdma
transfer_sizes=
. $P/rdma.conf
pm_counter() { counter /sys/kernel/debug/peermem/stats "$1"; }

# gr SUITE ARGS...: gpu_rdma ARGS, each of its "ok - NAME" / "not ok - NAME: WHY" lines
# one check of SUITE (NAME made a check name; a detail in parentheses after an ok
# name, such as an errno, is printed below it); a non-zero exit without a failed line
# is a failed check of its own.
gr() {
    suite=$1; shift
    "$G" "$@" > /tmp/gr.out 2>&1
    rc=$?
    nf=0
    while IFS= read -r line; do
        case $line in
            "ok - "*|"not ok - "*)
                verdict=ok; rest=${line#ok - }
                case $line in "not ok - "*) verdict="not ok"; rest=${line#not ok - }; nf=$((nf + 1)) ;; esac
                name=${rest%%: *}; name=${name%% (*}
                name=$(printf '%s' "$name" | tr 'A-Z ' 'a-z_' | tr -cd 'a-z0-9_+.-')
                echo "PEERMEM-CHECK $suite $verdict $name"
                [ "$name" = "$rest" ] || echo "    # $rest"
                ;;
            *) echo "    # $line" ;;
        esac
    done < /tmp/gr.out
    if [ "$rc" -ne 0 ] && [ "$nf" -eq 0 ]; then
        echo "PEERMEM-CHECK $suite not ok gpu_rdma_$1_exit_status"
        echo "    # exit status $rc"
    fi
}
# held_nothing: peermem holds no pin and no SG list, and the doubles no pin, no DMA
# mapping, no region, and saw no contract violation.
held_nothing() {
    i=0
    # (uverbs' teardown at a process's exit may still be finishing.)
    while [ "$(pm_counter pins_now)" != 0 ] && [ $i -lt 50 ]; do sleep 0.2; i=$((i + 1)); done
    equals 0 pm_counter pins_now && equals 0 pm_counter sg_lists_now && clean
}
# unload_when_idle MODULE: rmmod once its last reference is gone (10 s at most).
unload_when_idle() {
    i=0
    while [ "$(cat "/sys/module/$1/refcnt")" != 0 ] && [ $i -lt 50 ]; do sleep 0.2; i=$((i + 1)); done
    rmmod "$1"
}
# wait_ready FILE: a background gpu_rdma printed "ready" into FILE (30 s at most).
wait_ready() {
    i=0
    while ! grep -q '^ready' "$1" 2>/dev/null; do
        [ $i -lt 150 ] || { echo "not ready: $(cat "$1")"; return 1; }
        sleep 0.2; i=$((i + 1))
    done
}

# --- the stack: the kernel's modules, the doubles, the patched rxe, a RoCE link ---
S=peermem_rdma_stack
for m in $(cat $P/kmods.list); do
    out=$(insmod "$P/kmod/$m.ko" 2>&1) || echo "PEERMEM-FAIL insmod $m: $out"
done
load nvidia
# (On the dev kernel the double's own suites ran at its load; their violations are
# theirs, counted from here on.)
echo reset > /sys/kernel/debug/fake_nvidia/control
load ib_peer_mem
load rdma_rxe
check $S rxe_takes_peer_memory logged "peer-memory path (ib_peer_mem) enabled"
ip link set lo up
ip link add dummy0 type dummy
# A documentation address on a device of the VM's own: nothing leaves the VM (-net none).
ip addr add 192.0.2.1/24 dev dummy0
ip link set dummy0 up
check $S rdma_link_add rdma link add rxe0 type rxe netdev dummy0
check $S ibv_devinfo_lists_rxe0 expect_output "rxe0" ibv_devinfo -l
check $S port_active expect_output "PORT_ACTIVE" ibv_devinfo -d rxe0
check $S uverbs_device test -c /dev/infiniband/uverbs0
check $S gpu_node test -c /dev/fake-nvidia-gpu
# The RoCE v2 GID of the IPv4 address (perftest's -x).
gidx=
for t in /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/*; do
    n=${t##*/}
    if [ "$(cat "$t" 2>/dev/null)" = "RoCE v2" ] &&
        grep -q '^0000:0000:0000:0000:0000:ffff:' "/sys/class/infiniband/rxe0/ports/1/gids/$n"; then
        gidx=$n; break
    fi
done
check $S roce_v2_ipv4_gid test -n "$gidx"

# --- 1: ibv_reg_mr on GPU memory takes the peer path ---
S=peermem_rdma_registration
gr $S reg --expect fail
gr $S reg --host --expect ok
load peermem
regs=$(pm_counter registrations)
gr $S reg --expect ok
check $S peermem_counts_the_registration equals $((regs + 1)) pm_counter registrations
check $S peermem_counts_its_release equals $((regs + 1)) pm_counter releases
check $S held_nothing_after held_nothing

# --- 2 and 6, in each mode: transfers, then the GPU memory freed under a live MR ---
for mode in persistent callback; do
    if [ $mode = callback ]; then
        unload peermem
        load peermem persistent_api_support=0
    fi
    S=peermem_rdma_transfer_$mode
    # /peermem/rdma.conf (scripts/test-rdma): the dev kernel's run leaves out the
    # 64 MiB transfers, which Debian's kernel runs (lockdep's kernel copies slowly).
    gr $S transfer ${transfer_sizes:+--sizes "$transfer_sizes"}
    check $S held_nothing_after held_nothing
    S=peermem_rdma_free_$mode
    inv=$(pm_counter invalidations)
    gr $S revoke --mode $mode
    if [ $mode = callback ]; then
        check $S the_free_invalidated_the_registration equals $((inv + 1)) pm_counter invalidations
    else
        check $S persistent_pins_are_not_invalidated equals "$inv" pm_counter invalidations
    fi
    check $S held_nothing_after held_nothing
    # --- 4: a process killed with live MRs in the middle of transfers ---
    S=peermem_rdma_kill_$mode
    "$G" hold --mrs 4 --seconds 120 > /tmp/hold.out 2>&1 &
    pid=$!
    check $S holder_ready wait_ready /tmp/hold.out
    check $S four_live_registrations equals 4 pm_counter pins_now
    sleep 1
    kill -9 $pid
    wait $pid
    check $S killed_process_releases_every_pin held_nothing
    check $S no_module_reference_left equals 0 cat /sys/module/peermem/refcnt
done

# --- 5: fork: the child does not own the parent's GPU memory ---
S=peermem_rdma_fork
gr $S fork
check $S the_child_was_answered_efault grep -q "errno 14" /tmp/gr.out
check $S held_nothing_after held_nothing

# --- 7: rmmod with live MRs ---
S=peermem_rdma_rmmod
"$G" hold --mrs 2 --seconds 120 > /tmp/hold.out 2>&1 &
pid=$!
check $S holder_ready wait_ready /tmp/hold.out
check $S rmmod_with_live_registrations_fails expect_output "can't unload module 'peermem'" rmmod peermem
kill -TERM $pid
wait $pid
check $S rmmod_after_the_application_exits unload_when_idle peermem
load peermem

# --- 8: two processes, each with GPU memory of its own ---
S=peermem_rdma_isolation
gr $S isolate
check $S held_nothing_after held_nothing

# --- 3: perftest, unmodified, on GPU memory (--mmap) ---
S=peermem_rdma_perftest
for t in write read send; do
    regs=$(pm_counter registrations)
    ib_${t}_bw -d rxe0 -x "$gidx" -s 65536 -n 64 -F --mmap=/dev/fake-nvidia-gpu > /tmp/srv.out 2>&1 &
    srv=$!
    sleep 2
    ib_${t}_bw -d rxe0 -x "$gidx" -s 65536 -n 64 -F --mmap=/dev/fake-nvidia-gpu 127.0.0.1 > /tmp/cli.out 2>&1
    wait $srv
    src=$?
    sed 's/^/    # client: /' /tmp/cli.out | tail -n 4
    check $S ib_${t}_bw_client_result grep -Eq '^ *65536 +64 ' /tmp/cli.out
    check $S ib_${t}_bw_server_ran sh -c "[ $src = 0 ] && grep -q 'BW Test' /tmp/srv.out"
    check $S ib_${t}_bw_registered_gpu_memory test "$(pm_counter registrations)" -ge $((regs + 2))
    check $S ib_${t}_bw_held_nothing_after held_nothing
done

# --- 9: the kernel said nothing bad on the way: no WARN, BUG or oops (each also fails
# the run: tools/ktap-summary), and on a kernel with lockdep (the dev kernel) no lock
# report, lockdep still on at the end (it turns itself off at its first report) ---
S=peermem_rdma_kernel_log
unload peermem
check $S doubles_clean_at_the_end clean
rdma link delete rxe0
unload rdma_rxe
unload ib_peer_mem
check $S no_warning_bug_or_lock_report sh -c '! dmesg | grep -E "WARNING:|BUG:|Oops|circular locking|possible recursive locking|inconsistent lock state"'
if [ -f /proc/lockdep_stats ]; then
    check peermem_rdma_lockdep lockdep_still_on grep -Eq 'debug_locks: +1' /proc/lockdep_stats
fi
unload nvidia
