# The `make bench` plan: the benchmark driver for clients in one mode. peermem and the
# baseline costed as nvidia-peermem run in callback mode (`peermem`, `reference`:
# persistent_api_support=0, where pins can be shared) and in persistent mode, the
# default of both (`peermem-persistent`, `reference-persistent`); the floor (the
# baseline's floor mode) in each mode too. scripts/bench boots the runs of a round,
# each from the same fresh state; /peermem/bench.conf says what one boot runs:
#   strategy=S[,S...]  the strategies, each loaded in turn (its client, then the driver)
#   series=all|latency|rest  the driver's series (tests/bench/peermem_bench.c)
#   repeat=N           the turns: every strategy N times, the order rotated each turn
#                      (so that none always comes first), in one boot
#   scale=N            the largest number of live registrations
strategy=peermem scale=2097152 series=all repeat=1
. /peermem/bench.conf
# The reference is the baseline client (tests/bench/peermem_baseline.c), costed as
# nvidia-peermem, loaded in place of peermem.
# The floor is the baseline without its probe pin, with merged SG entries: the least
# a client that pins once can do (docs/bench, "The floor").
client_of() {
    case $1 in
        peermem) client=peermem; params=persistent_api_support=0 ;;
        reference) client=peermem_baseline; params=persistent_api_support=0 ;;
        floor) client=peermem_baseline; params="persistent_api_support=0 floor=1" ;;
        peermem-persistent) client=peermem; params= ;;
        reference-persistent) client=peermem_baseline; params= ;;
        floor-persistent) client=peermem_baseline; params=floor=1 ;;
        *) echo "PEERMEM-FAIL bad strategy $1"; return 1 ;;
    esac
}
load ib_core
load nvidia
# rotate WORD...: the words, the first moved last.
rotate() {
    first=$1
    shift
    echo "$* $first"
}
# The TSC's rate, calibrated (2 s asleep) by a load of its own and given to the timed
# ones, so that none of them starts just after that sleep.
load peermem_bench strategy=calibrate series=calibrate
unload peermem_bench
tsc=$(dmesg | sed -n 's/.*peermem_bench: TSC at \([0-9]*\) kHz.*/\1/p' | tail -n 1)
[ -n "$tsc" ] || { echo "PEERMEM-FAIL no TSC rate"; tsc=0; }
turn=0
order=$(echo "$strategy" | tr , ' ')
while [ "$turn" -lt "$repeat" ]; do
    for s in $order; do
        client_of "$s" || break 2
        # shellcheck disable=SC2086
        load $client $params
        load peermem_bench strategy="$s" scale_max="$scale" series="$series" tsc_khz="$tsc"
        unload peermem_bench
        unload $client
    done
    # The next turn starts with the second of this one.
    # shellcheck disable=SC2086
    order=$(rotate $order)
    turn=$((turn + 1))
done
unload nvidia
unload ib_core
