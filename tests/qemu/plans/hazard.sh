# The callback-mode lock hazard (docs/abi.md 1.4b and 2.5; docs/pin-state-machine.md,
# "The hazard between the two drivers"), shown in a VM of its own by scripts/test-hazard.
# Lockdep reports a lock cycle once per boot, and then turns itself off: the hazard
# has its own boots, and every other run keeps lockdep on.
#
# /peermem/hazard.conf says which client runs:
#   client=peermem    peermem's pinning (one pin in acquire, unpin at release)
#   client=reference  peermem_baseline.ko (tests/bench), nvidia-peermem's pinning (a
#                     probe pin in acquire, the registration's pin in get_pages)
#
# Each step registers a buffer through the fake core, then ends the owning process
# (nvidia.ko runs the free callback under its API lock, the callback invalidates
# through the core, which takes the region's mapping lock), then deregisters. Nothing
# runs concurrently: lockdep reports a cycle from the lock orders it has seen, before
# any thread actually waits on one.
#
# Checks (suite peermem_hazard_<client>):
#   peermem:
#     no_cycle_without_api_lock_model   with the fake nvidia.ko taking only its per-table
#                                       lock in dma_map (its default), peermem's callback
#                                       mode has no lock cycle: it never pins or unpins
#                                       under the core's mapping lock
#     no_cycle_in_persistent_mode       with the API-lock model on, persistent mode (no
#                                       callbacks) has none either
#     cycle_in_callback_mode            with the model on, callback mode has the cycle:
#     cycle_names_the_api_lock          the report names the driver lock (drv_lock)
#     cycle_names_the_mapping_lock      and the core's region mapping lock
#   reference:
#     cycle_without_api_lock_model      even without the model, the reference
#     cycle_names_the_api_lock          has a cycle: its get_pages pins, taking the
#     cycle_names_the_mapping_lock      driver lock, under the mapping lock
#     pins_under_the_mapping_lock       and that is where the report says it took it
nvctl=/sys/kernel/debug/fake_nvidia/control
corectl=/sys/kernel/debug/ib_core/control
client=$(sed -n 's/^client=//p' /peermem/hazard.conf)
S=peermem_hazard_$client

# A registration of 1 MiB by a fresh fake process, the process's exit, the
# deregistration: register_exit_dereg
register_exit_dereg() {
    echo "alloc 1048576" > $nvctl
    va=$(awk '{ print $2 }' $nvctl)
    echo "reg $va 1048576" > $corectl
    id=$(awk '$1 == "id" { print $2 }' $corectl)
    [ -n "$id" ] || echo "PEERMEM-FAIL registration: $(cat $corectl)"
    echo exit > $nvctl
    [ -n "$id" ] && echo "dereg $id" > $corectl
    return 0
}
cycle() { dmesg | grep -q "possible circular locking dependency detected"; }
no_cycle() { ! cycle || { dmesg | sed -n '/possible circular locking/,/^.*stack backtrace/p'; return 1; }; }
# The report's text between its banner and the backtrace names LOCK.
report_names() { dmesg | sed -n '/possible circular locking/,/stack backtrace/p' | grep -q -- "$1"; }

load ib_core
if [ "$client" = peermem ]; then
    load nvidia
    load peermem persistent_api_support=0
    register_exit_dereg
    unload peermem
    check $S no_cycle_without_api_lock_model no_cycle
    unload nvidia

    load nvidia dma_takes_api_lock=1
    load peermem
    register_exit_dereg
    unload peermem
    check $S no_cycle_in_persistent_mode no_cycle

    load peermem persistent_api_support=0
    register_exit_dereg
    unload peermem
    check $S cycle_in_callback_mode cycle
    check $S cycle_names_the_api_lock report_names drv_lock
    check $S cycle_names_the_mapping_lock report_names map_lock
    unload nvidia
else
    load nvidia
    load peermem_baseline persistent_api_support=0
    register_exit_dereg
    unload peermem_baseline
    check $S cycle_without_api_lock_model cycle
    check $S cycle_names_the_api_lock report_names drv_lock
    check $S cycle_names_the_mapping_lock report_names map_lock
    check $S pins_under_the_mapping_lock report_names do_get_pages
    unload nvidia
fi
unload ib_core
