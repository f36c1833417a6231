# The `make bench` plan: the benchmark driver for one pin strategy, with peermem in
# callback mode (where pins can be shared). scripts/bench boots one VM per strategy,
# each from the same fresh state, in one run; /peermem/bench.conf names the strategy
# and the largest number of live registrations.
strategy=peermem scale=100000
. /peermem/bench.conf
case $strategy in peermem) n=0 ;; reference) n=1 ;; *) echo "PEERMEM-FAIL bad strategy $strategy"; n=0 ;; esac
load ib_core
load nvidia
load peermem persistent_api_support=0 pin_strategy=$n
load peermem_bench strategy=$strategy scale_max=$scale
unload peermem_bench
unload peermem
unload nvidia
unload ib_core
