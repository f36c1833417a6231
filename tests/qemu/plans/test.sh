# The `make test` plan: load every module in dependency order (their KUnit suites run
# at insertion), run the scenario checks, unload everything.
v=$(cat /peermem/VERSION)

load peermem
check peermem_load version_file_default expect_output "$v" cat /sys/module/peermem/version
unload peermem
check peermem_load unloaded_default expect_fail test -e /sys/module/peermem

load nvidia-peermem
check peermem_load version_file_dropin expect_output "$v" cat /sys/module/nvidia_peermem/version
unload nvidia_peermem
check peermem_load unloaded_dropin expect_fail test -e /sys/module/nvidia_peermem
