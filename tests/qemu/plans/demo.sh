# The `make run` plan: peermem on the dev kernel with the fake nvidia.ko and the fake
# peer-memory core, one registration made by a process through the core's control
# file (the stand-in for ibv_reg_mr), inspected with `peermem status` and
# `peermem doctor`, then released.
nvctl=/sys/kernel/debug/fake_nvidia/control
corectl=/sys/kernel/debug/ib_core/control
say() { printf '\n### %s\n' "$*"; }

say "Loading the fake peer-memory core (ib_core), the fake nvidia.ko, then peermem"
load ib_core
load nvidia
load peermem
echo "/sys/module/peermem/version: $(cat /sys/module/peermem/version)"

say "peermem doctor"
/peermem/peermem doctor

say "A process allocates 2 MiB of GPU memory and registers 1 MiB + 100 bytes of it"
echo "alloc 2097152" > $nvctl
va=$(awk '{ print $2 }' $nvctl)
echo "GPU buffer at $va"
echo "reg $((va + 4096)) 1048676" > $corectl
id=$(awk '$1 == "id" { print $2 }' $corectl)
echo "registration: $(cat $corectl)"

say "peermem status"
/peermem/peermem status

say "The registration is released, the memory freed"
echo "dereg $id" > $corectl
echo exit > $nvctl
/peermem/peermem status

say "Unloading"
unload peermem
unload nvidia
unload ib_core
