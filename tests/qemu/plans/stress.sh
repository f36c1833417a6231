# The stress plan (docs/testing.md, "Stress at real parallelism"): the seeded model
# suites with many operations and the register-against-free stress with one pair of
# threads per two CPUs, on the UML kernel with SMP and lockdep (the bench kit's
# run-stress; scripts/uml-run locally). The sizes come from the kernel command line:
#   peermem_stress.ops=N     operations of each model case (callback, persistent)
#   peermem_stress.rounds=N  rounds of each pair of the register-against-free stress
#   peermem_stress.pairs=N   pairs of threads (default: one per two CPUs)
#   peermem_stress.seed=N    the suites' seed (default theirs; 0: random, printed)
# KUnit filter peermem_model_*: only the model suites run (tests/qemu/plans/stress.manifest).
#   peermem_stress.kasan=1   the kernel is the one with KASAN (run-stress --kasan:
#                            scripts/kconfig/uml-kasan.config): the plan checks that
#                            KASAN is on (tests/qemu/plans/stress-kasan.manifest)
ops=5000 rounds=2000 pairs=$(( ($(nproc) + 1) / 2 )) seed= kasan=
for w in $(cat /proc/cmdline); do
    case $w in
        peermem_stress.ops=*) ops=${w#*=} ;;
        peermem_stress.rounds=*) rounds=${w#*=} ;;
        peermem_stress.pairs=*) pairs=${w#*=} ;;
        peermem_stress.seed=*) seed=seed=${w#*=} ;;
        peermem_stress.kasan=1) kasan=1 ;;
    esac
done
S=peermem_stress
echo "peermem stress: $(nproc) CPUs, $ops operations per model case, $pairs pairs x $rounds rounds"
[ -z "$kasan" ] || check $S kasan_is_on logged "KernelAddressSanitizer initialized"
load ib_core
load nvidia
load peermem persistent_api_support=0
load peermem_test_callback model_ops=$ops stress_rounds=$rounds stress_pairs=$pairs $seed
unload peermem_test_callback
unload peermem
check $S nothing_held_callback clean
load peermem
load peermem_test_persistent model_ops=$ops $seed
unload peermem_test_persistent
unload peermem
check $S nothing_held_persistent clean
unload nvidia
unload ib_core
