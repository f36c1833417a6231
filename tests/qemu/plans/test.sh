# The `make test` plan (run by the guest's init; helpers in tests/qemu/guest-lib.sh).
# Loads the fakes (their suites run at insertion), then peermem in each mode with the
# matching client suite, then the shell scenarios: module references, leaks, the
# drop-in name, and the load diagnostics. Suites and check counts: tests/manifest.
# On a kernel without KUnit (a distribution's: the debian-7.3 part) the suites and the
# checks that read their outcome are left out, and without DMA-API debugging the
# checks that read its mappings (counts: tests/qemu/plans/nokunit.manifest).
v=$(cat /peermem/VERSION)
nvctl=/sys/kernel/debug/fake_nvidia/control
corectl=/sys/kernel/debug/ib_core/control
S=peermem_scenarios

# --- the fakes, with their own suites ---
load ib_core
load nvidia
if have_kunit; then
    load peermem_bad_client
    unload peermem_bad_client
fi
# The deliberately wrong client's violations are the fake's proof; start clean.
echo reset > $nvctl

# --- peermem in each mode, with its client suite ---
load peermem
check $S version_file equals "$v" cat /sys/module/peermem/version
# The parameters show read-only in sysfs, as nvidia-peermem's do.
check $S parameters_in_sysfs equals 1 cat /sys/module/peermem/parameters/persistent_api_support
check $S parameters_read_only equals 444 stat -c %a /sys/module/peermem/parameters/persistent_api_support
# peermem's counters (debugfs stats).
pm_counter() { counter /sys/kernel/debug/peermem/stats "$1"; }
# pm_pinned: the pins peermem holds now and the bytes they pin ("PINS BYTES").
pm_pinned() { echo "$(pm_counter pins_now) $(pm_counter bytes_pinned_now)"; }
if have_kunit; then
    load peermem_test_persistent
    unload peermem_test_persistent
    # Every refusal is counted by reason (the suite made one of each of these, and three
    # BAR1 refusals: two by exhaustion, one injected ENOMEM).
    # peermem_model_persistent (same module) adds its own ENOMEM refusals and prints how many.
    model_refusals() { dmesg | sed -n "s/.*peermem_model_persistent refusals: .*$1=\([0-9]*\).*/\1/p" | tail -n 1; }
    check $S refusal_bar1_counted equals $((3 + $(model_refusals refused_bar1_exhausted))) pm_counter refused_bar1_exhausted
    check $S refusal_not_pci_counted equals 1 pm_counter refused_not_pci
    # ... with one rate-limited line, before any call into nvidia.ko (which would take the
    # software device as a pci_dev unchecked: the fake counts that as NOT_PCI_PEER).
    not_pci_lines() { dmesg | grep -c 'refused registration of .*: the RDMA device is not a PCI function'; }
    check $S refusal_not_pci_logged equals 1 not_pci_lines
    # Four dma_map failures: the peer that cannot reach the BAR, and three injected
    # errors (ENOMEM, EFAULT, EIO: each the driver's, none counted as peermem's own).
    check $S refusal_dma_map_counted equals 4 pm_counter refused_dma_map_failed
    check $S refusal_bad_range_counted equals 1 pm_counter refused_bad_range
    # A pin failure other than BAR1 exhaustion is counted under its own reason (the
    # suite injected one EIO, the model its own).
    check $S refusal_pin_failed_counted equals $((1 + $(model_refusals refused_pin_failed))) pm_counter refused_pin_failed
    check $S sg_lists_freed_persistent equals 0 pm_counter sg_lists_now
fi

# A live registration holds a module reference: rmmod fails at once (the kernel
# answers EWOULDBLOCK for a module in use) rather than blocking in the core's
# unregistration (docs/abi.md 3).
echo "alloc 1048576" > $nvctl
va=$(awk '{ print $2 }' $nvctl)
echo "reg $va 1048576" > $corectl
id=$(awk '$1 == "id" { print $2 }' $corectl)
check $S registration_from_a_process test -n "$id"
# No IOMMU here: nvidia.ko's DMA addresses are the BAR addresses (16 pages mapped for
# the HCA; the IOMMU run checks the other case, tests/qemu/plans/iommu.sh).
if have_dma_debug; then
    check $S registration_maps_bar_addresses equals 16 count_entries "$(hca_name)"
    check $S dma_addresses_are_bar_addresses dma_addresses same "$(hca_name)"
fi
check $S live_registration_holds_a_reference equals 1 cat /sys/module/peermem/refcnt
check $S debugfs_lists_the_pin grep -q "persistent $va .* 1048576 1 live" /sys/kernel/debug/peermem/pins
check $S status_tool_lists_the_pin expect_output "1 live pin" /peermem/peermem status
# The dev VM has every piece but an RDMA device (the HCA stand-in is a bare PCI
# function: no HCA driver registers it with ib_core), so doctor's verdict names that.
check $S doctor_ready_but_for_the_hca expect_output "verdict: not ready; fix first: hca:" /peermem/peermem doctor
check $S doctor_sees_no_iommu expect_output "no IOMMU: DMA addresses are bus addresses" /peermem/peermem doctor
check $S doctor_sees_persistent_mode expect_output "OK    pin-mode" /peermem/peermem doctor
# Registered: peermem holds the core's module (/sys/module/ib_core/holders/peermem).
check $S doctor_sees_the_client_registered expect_output "OK    client-registered    peermem is registered with ib_core" /peermem/peermem doctor
check $S rmmod_with_live_registration_fails expect_output "can't unload module 'peermem'" rmmod peermem
echo "dereg $id" > $corectl
echo exit > $nvctl
check $S released_registration_drops_it equals 0 cat /sys/module/peermem/refcnt
unload peermem
check $S nothing_leaked_persistent clean

load peermem persistent_api_support=0
# STRESS_ARGS: fewer stress rounds on slow kernels (scripts/test-debug sets it).
if have_kunit; then
    load peermem_test_callback ${STRESS_ARGS:-}
    unload peermem_test_callback
    check $S sg_lists_freed_callback equals 0 pm_counter sg_lists_now
fi
# doctor warns about the callback-mode hazard (pin-state-machine.md, "The hazard").
check $S doctor_warns_in_callback_mode expect_output "WARN  pin-mode" /peermem/peermem doctor
check $S callback_mode_in_sysfs equals 0 cat /sys/module/peermem/parameters/persistent_api_support
# An invalidated registration frees its SG list at release, although the core zeroed
# its sg_table when it was invalidated (docs/abi.md 2.5): peermem frees from its own
# record. sg_lists_now counts the SG lists peermem built and has not freed; pins_now
# and bytes_pinned_now the pins it holds, until the registration's release lets go of
# the pin its callback freed.
# invalidated_then_deregistered SUITE: a registration whose buffer is freed, then
# deregistered, with SUITE's checks of the invalidation, of the SG list and of the pin.
invalidated_then_deregistered() {
    pinned=$(pm_pinned)
    echo "alloc 2097152" > $nvctl
    va=$(awk '{ print $2 }' $nvctl)
    echo "reg $va 2097152" > $corectl
    id=$(awk '$1 == "id" { print $2 }' $corectl)
    check $1 sg_list_counted equals 1 pm_counter sg_lists_now
    check $1 pin_counted equals "$((${pinned% *} + 1)) $((${pinned#* } + 2097152))" pm_pinned
    inv=$(pm_counter invalidations)
    echo "free $va" > $nvctl
    check $1 freed_memory_invalidates_the_registration equals $((inv + 1)) pm_counter invalidations
    echo "dereg $id" > $corectl
    check $1 invalidated_registration_frees_its_sg_list equals 0 pm_counter sg_lists_now
    check $1 invalidated_registration_unpins equals "$pinned" pm_pinned
    echo exit > $nvctl
}
invalidated_then_deregistered $S
# A registration deregistered by another process (a child of the owner; a kworker
# after an HCA reset): nvidia.ko's put_pages does not find the callback pin from
# there, returns 0 and keeps it with its callback (docs/abi.md 1.4b). peermem does not
# put it from there: it leaves the pin to that callback, keeping its data and a module
# reference until it runs.
puts=$(nv_counter puts_not_owner)
echo "alloc 1048576" > $nvctl
va=$(awk '{ print $2 }' $nvctl)
echo "reg $va 1048576" > $corectl
id=$(awk '$1 == "id" { print $2 }' $corectl)
sh -c "echo 'dereg $id' > $corectl"
check $S orphaned_pin_not_put_from_another_process equals "$puts" nv_counter puts_not_owner
check $S orphaned_pin_stays_pinned equals 1 nv_counter pins_live
check $S orphaned_pin_holds_a_module_reference equals 1 cat /sys/module/peermem/refcnt
echo exit > $nvctl
check $S orphaned_pin_ends_with_its_callback equals 0 nv_counter pins_live
check $S orphaned_pin_reference_dropped equals 0 cat /sys/module/peermem/refcnt
unload peermem
check $S nothing_leaked_callback clean

load peermem persistent_api_support=0 peerdirect_support=1
if have_kunit; then
    load peermem_test_peerdirect
    unload peermem_test_peerdirect
fi
unload peermem
check $S nothing_leaked_peerdirect clean

# --- the in-box core (docs/abi.md 8) ---
# The core double as the kernel's own peer_mem.c of NV-Kernels and openEuler
# (inbox=1), exported from ib_uverbs over ib_core as there (and in MOFED from
# 25.04): its own suites run at its insertion against that form, then the client
# suites of both pin modes. Its stop of a non-invalidating client's MR takes no lock
# and unlocks the mutex it does not hold; of an invalidating client's MR whose HCA
# key cannot be created, it locks the mutex it holds. The double counts both (the
# real core would warn, and deadlock), and peermem is right either way: it takes no
# lock of its own in dma_unmap or put_pages.
I=peermem_inbox_core
unload ib_core
load ib_core-rdma
# ib_core without the peer-memory API: peermem refuses, naming where the API lives.
check $I refused_while_ib_uverbs_is_not_loaded expect_fail insmod /peermem/peermem.ko
check $I refusal_names_ib_uverbs logged "the RDMA peer-memory core is not loaded .*(modprobe ib_uverbs:"
load ib_uverbs inbox=1
check $I the_core_behaves_as_the_kernels logged "behaving as the in-box core"
check $I ib_uverbs_exports_the_api grep -q "ib_register_peer_memory_client.\[ib_uverbs\]" /proc/kallsyms
check $I ib_uverbs_holds_ib_core test -e /sys/module/ib_core/holders/ib_uverbs
check $I doctor_names_ib_uverbs expect_output "ib_register_peer_memory_client found (module [ib_uverbs])" /peermem/peermem doctor
load peermem
check $I doctor_sees_the_client_registered_with_ib_uverbs expect_output "peermem is registered with ib_uverbs" /peermem/peermem doctor
# (The model suites with fewer random operations and stress rounds than above. The
# debug kernel's run leaves these suites out: INBOX_SUITES=0, scripts/test-debug.)
if have_kunit && [ "${INBOX_SUITES:-1}" = 1 ]; then
    load peermem_test_persistent model_ops=1000
    unload peermem_test_persistent
fi
unbalanced=$(core_counter unbalanced_unlocks)
echo "alloc 1048576" > $nvctl
va=$(awk '{ print $2 }' $nvctl)
echo "reg $va 1048576" > $corectl
id=$(awk '$1 == "id" { print $2 }' $corectl)
check $I registration test -n "$id"
check $I registration_holds_a_reference equals 1 cat /sys/module/peermem/refcnt
echo "dereg $id" > $corectl
check $I deregistration_stopped_with_no_lock_held equals $((unbalanced + 1)) core_counter unbalanced_unlocks
check $I deregistration_drops_the_reference equals 0 cat /sys/module/peermem/refcnt
echo exit > $nvctl
unload peermem
check $I nothing_leaked_persistent clean
load peermem persistent_api_support=0
deadlocks=$(core_counter stop_deadlocks)
if have_kunit && [ "${INBOX_SUITES:-1}" = 1 ]; then
    load peermem_test_callback model_ops=1000 stress_rounds=200
    unload peermem_test_callback
    # Its HCA-failure cases stop an invalidating client's MR before activation.
    check ${I}_suites hca_failure_locks_the_held_mutex test "$(core_counter stop_deadlocks)" -gt "$deadlocks"
fi
invalidated_then_deregistered $I
unload peermem
check $I nothing_leaked_callback clean
unload ib_uverbs
unload ib_core
load ib_core-nosuites

# --- parameters are validated ---
check $S bad_parameter_refused expect_fail insmod /peermem/peermem.ko persistent_api_support=2
check $S bad_parameter_explained logged "persistent_api_support=2 is invalid"

# --- the drop-in name applications detect (docs/abi.md 4) ---
load nvidia-peermem
check $S dropin_version_file equals "$v" cat /sys/module/nvidia_peermem/version
check $S dropin_parameters_in_sysfs equals 1 cat /sys/module/nvidia_peermem/parameters/persistent_api_support
check $S doctor_sees_applications_detect_it expect_output "OK    app-detection" /peermem/peermem doctor
unload nvidia_peermem

# --- load diagnostics: what is missing is named, with the fix ---
unload ib_core
check $S missing_core_refused expect_fail insmod /peermem/peermem.ko
check $S missing_core_explained logged "the RDMA peer-memory core is not loaded"

# --- a MOFED upgrade without a rebuild, on a kernel with symbol versions ---
# Staged where CONFIG_MODVERSIONS=y (scripts/build-modules; the 7.0 dev kernel, as
# Ubuntu's): the core's next release, whose exports' CRCs differ, and peermem rebuilt
# against it. The module built against the first release is refused by the second as
# the kernel refuses nvidia-peermem (gpu-operator issue 2868), doctor's core-symbols
# fails on it (the module installed where dkms puts it, MOFED's Module.symvers where
# MOFED puts it), and the rebuild loads and registers. (Here, where ib_core is
# unloaded: the fake's suites run at each insertion of the first release.)
if [ -f /peermem/ib_core-25.10.ko ]; then
    M=peermem_modversions
    rel=$(uname -r)
    ofa=/usr/src/ofa_kernel/x86_64/$rel
    mkdir -p /boot "/lib/modules/$rel/updates/dkms" "$ofa"
    cp /peermem/kernel.config "/boot/config-$rel"
    cp /peermem/ib_core-25.10.symvers "$ofa/Module.symvers"
    cp /peermem/peermem.ko "/lib/modules/$rel/updates/dkms/peermem.ko"
    load ib_core-25.10
    check $M upgraded_core_loaded equals 25.10 cat /sys/module/ib_core/version
    check $M old_build_refused expect_output "Invalid argument" insmod /peermem/peermem.ko
    for sym in ib_register_peer_memory_client ib_unregister_peer_memory_client; do
        check $M "refusal_names_${sym}" logged "peermem: disagrees about version of symbol $sym"
    done
    check $M doctor_fails_the_old_build expect_output "FAIL  core-symbols" /peermem/peermem doctor
    check $M doctor_names_the_rebuild expect_output "dkms build --force -m peermem" /peermem/peermem doctor
    cp /peermem/peermem-25.10.ko "/lib/modules/$rel/updates/dkms/peermem.ko"
    check $M doctor_passes_the_rebuild expect_output "OK    core-symbols" /peermem/peermem doctor
    load peermem-25.10
    echo "alloc 1048576" > $nvctl
    va=$(awk '{ print $2 }' $nvctl)
    echo "reg $va 1048576" > $corectl
    id=$(awk '$1 == "id" { print $2 }' $corectl)
    check $M rebuilt_module_registers test -n "$id"
    echo "dereg $id" > $corectl
    echo exit > $nvctl
    unload peermem
    check $M nothing_leaked clean
    unload ib_core
    rm -rf "/boot/config-$rel" "/lib/modules/$rel/updates" /usr/src/ofa_kernel
fi

# --- the container entrypoint, peermem agent (docs/fleet.md) ---
# Run as the DaemonSet's pod runs it, with the host's kernel: started while the RDMA
# core is away (ib_core unloaded here; reloaded from a build without the fake's suites,
# which the first release's insertions run), it waits, and loads the drop-in once the
# core is there; the Network Operator's openibd restart (nvidia_peermem unloaded by
# name, then the core unloaded and loaded again) has it load the module again, not
# before the core is a new load;
# SIGTERM with a live registration: the unload is refused and retried, never forced,
# and done once the registration ends; beside a packaged peermem it refuses to start.
A=peermem_agent
# Ready within 30 s: on the debug kernel, beside part host's builds, the drop-in's
# insmod alone took 6 s, and 10 s were once not enough for a reload.
agent_ready() {
    i=0
    while [ $i -lt 300 ]; do
        /peermem/peermem agent probe >/dev/null && return 0
        sleep 0.1; i=$((i + 1))
    done
    echo "not ready after 30 s"; return 1
}
# A line of the agent's log, within 5 s (it logs a load once insmod returned, which
# may be after the probe saw the module).
agent_said() {
    i=0
    while [ $i -lt 50 ]; do grep -q "$1" /tmp/agent.log && return 0; sleep 0.1; i=$((i + 1)); done
    echo "the agent did not say '$1':"; cat /tmp/agent.log; return 1
}
/peermem/peermem agent run --module-file /peermem/nvidia-peermem-production.ko >/tmp/agent.log 2>&1 &
apid=$!
sleep 1.5
check $A waits_for_the_core agent_said "waiting for the RDMA peer-memory core"
check $A not_ready_before_the_core expect_fail /peermem/peermem agent probe
load ib_core-nosuites
check $A loads_once_the_core_is_there agent_ready
check $A says_what_it_found agent_said "loaded nvidia_peermem: nvidia is loaded; the RDMA peer-memory core is loaded (.ib_core.)"
unload nvidia_peermem
# Not loaded again while the core is the same load: it would hold the core and fail
# the restart's unload of it.
sleep 2.5
check $A holds_off_until_the_core_is_reloaded test ! -d /sys/module/nvidia_peermem
unload ib_core
check $A not_ready_while_the_core_is_away expect_fail /peermem/peermem agent probe
load ib_core-nosuites
check $A loads_again_after_openibd_restart agent_ready
check $A says_it_was_unloaded agent_said "nvidia_peermem was unloaded from the host"
echo "alloc 1048576" > $nvctl
va=$(awk '{ print $2 }' $nvctl)
echo "reg $va 1048576" > $corectl
id=$(awk '$1 == "id" { print $2 }' $corectl)
kill -TERM $apid
sleep 2
check $A stop_refused_while_registered /peermem/peermem agent probe
check $A says_why_it_waits agent_said "cannot unload nvidia_peermem yet: 1 live registration(s)"
echo "dereg $id" > $corectl
echo exit > $nvctl
i=0
while kill -0 $apid 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
kill -0 $apid 2>/dev/null && kill -KILL $apid
wait $apid
rc=$?
check $A unloaded_once_the_registration_ended test ! -d /sys/module/nvidia_peermem
check $A exits_0 test $rc -eq 0
check $A nothing_leaked clean
load peermem
check $A refuses_beside_a_packaged_module expect_output "refusing to start: the host already has peermem loaded" \
    /peermem/peermem agent run --module-file /peermem/nvidia-peermem-production.ko
unload peermem
unload ib_core

load ib_core
unload nvidia
check $S missing_provider_refused expect_fail insmod /peermem/peermem.ko
check $S missing_provider_explained logged "nvidia.ko is not loaded"

# --- a driver before 535.14: no persistent pair, NULL-callback pins ---
load nvidia-legacy
echo reset > $nvctl
load peermem
check $S pre535_explained logged "has no persistent pin API"
if have_kunit; then
    load peermem_test_pre535
    unload peermem_test_pre535
fi
unload peermem
check $S nothing_leaked_pre535 clean
unload nvidia

# --- the proprietary nvidia.ko (last: it taints the kernel and turns lockdep off) ---
load nvidia-proprietary
check $S proprietary_refused expect_fail insmod /peermem/peermem.ko
check $S proprietary_explained logged "proprietary"
check $S doctor_names_the_proprietary_driver expect_output "FAIL  nvidia-driver" /peermem/peermem doctor
unload nvidia
unload ib_core
