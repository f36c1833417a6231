# The IOMMU run (docs/testing.md, "The IOMMU run"; scripts/test-iommu): the dev kernel
# on QEMU's q35 machine with an emulated Intel IOMMU translating every DMA (strict).
# nvidia.ko's dma_map_pages hands out IOVAs; peermem must give the core those, not the
# BAR addresses, and every mapping must be unmapped at teardown. The client suites
# (persistent and callback mode; KUnit filter peermem_client_*, the BAR1-sized slow
# case left out) assert IOVA = nvidia.ko's mapping != BAR address on every
# registration, and that a 32-bit peer reaches GPU memory above 4 GiB. The scenario
# checks below look at the IOMMU, dma-debug's live entries and doctor.
# Suites and check counts: tests/qemu/plans/iommu.manifest.
nvctl=/sys/kernel/debug/fake_nvidia/control
corectl=/sys/kernel/debug/ib_core/control
S=peermem_iommu

load ib_core
load nvidia
hca=$(hca_name)
dev32=$(dma32_name)
# The type of the IOMMU group of PCI device $1.
group_type() { cat "/sys/bus/pci/devices/$1/iommu_group/type"; }

check $S iommu_present test -n "$(ls /sys/class/iommu)"
check $S hca_translated equals DMA group_type "$hca"
check $S dma32_peer_translated equals DMA group_type "$dev32"
check $S doctor_reports_translation expect_output "and translating: DMA addresses are IOVAs" /peermem/peermem doctor
errs=$(cat /sys/kernel/debug/dma-api/error_count)

load peermem
load peermem_test_persistent
unload peermem_test_persistent
# A registration from a process: 16 pages of the ivshmem BAR, each mapped for the HCA
# by nvidia.ko through the IOMMU while the registration lives.
before=$(count_entries "$hca")
echo "alloc 1048576" > $nvctl
va=$(awk '{ print $2 }' $nvctl)
echo "reg $va 1048576" > $corectl
id=$(awk '$1 == "id" { print $2 }' $corectl)
check $S registration_maps_each_page equals $((before + 16)) count_entries "$hca"
check $S registration_has_iovas dma_addresses differ "$hca"
echo "dereg $id" > $corectl
check $S deregistration_unmaps_each_page equals "$before" count_entries "$hca"
echo exit > $nvctl
unload peermem
check $S nothing_leaked_persistent clean

load peermem persistent_api_support=0
load peermem_test_callback ${STRESS_ARGS:-}
unload peermem_test_callback
# An invalidated registration: nvidia.ko unmaps in its free path (docs/abi.md 1.4).
echo "alloc 1048576" > $nvctl
va=$(awk '{ print $2 }' $nvctl)
echo "reg $va 1048576" > $corectl
id=$(awk '$1 == "id" { print $2 }' $corectl)
check $S callback_registration_has_iovas dma_addresses differ "$hca"
echo "free $va" > $nvctl
check $S invalidation_unmaps_each_page equals 0 count_entries "$hca"
echo "dereg $id" > $corectl
echo exit > $nvctl
unload peermem
check $S nothing_leaked_callback clean

unload nvidia
unload ib_core
check $S no_mapping_left_hca equals 0 count_entries "$hca"
check $S no_mapping_left_dma32 equals 0 count_entries "$dev32"
check $S dma_debug_saw_no_error equals "$errs" cat /sys/kernel/debug/dma-api/error_count
check $S dma_debug_enabled equals N cat /sys/kernel/debug/dma-api/disabled
