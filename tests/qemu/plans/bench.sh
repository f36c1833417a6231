# The `make bench` plan: the benchmark driver for one client in one mode. peermem and
# the baseline costed as nvidia-peermem run in callback mode (`peermem`, `reference`:
# persistent_api_support=0, where pins can be shared) and in persistent mode, the
# default of both (`peermem-persistent`, `reference-persistent`); the floor (the
# baseline's floor mode) in each mode too. scripts/bench boots one VM per strategy,
# each from the same fresh state, in one run; /peermem/bench.conf names the strategy
# and the largest number of live registrations.
strategy=peermem scale=2097152
. /peermem/bench.conf
# The reference is the baseline client (tests/bench/peermem_baseline.c), costed as
# nvidia-peermem, loaded in place of peermem.
# The floor is the baseline without its probe pin, with merged SG entries: the least
# a client that pins once can do (docs/bench, "The floor").
case $strategy in
    peermem) client=peermem; params=persistent_api_support=0 ;;
    reference) client=peermem_baseline; params=persistent_api_support=0 ;;
    floor) client=peermem_baseline; params="persistent_api_support=0 floor=1" ;;
    peermem-persistent) client=peermem; params= ;;
    reference-persistent) client=peermem_baseline; params= ;;
    floor-persistent) client=peermem_baseline; params=floor=1 ;;
    *) echo "PEERMEM-FAIL bad strategy $strategy"; client=peermem; params= ;;
esac
load ib_core
load nvidia
# shellcheck disable=SC2086
load $client $params
load peermem_bench strategy=$strategy scale_max=$scale
unload peermem_bench
unload $client
unload nvidia
unload ib_core
