/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The fake nvidia.ko's device node, /dev/fake-nvidia-gpu: GPU memory that a real
 * process owns, for the RDMA chain of part rdma (docs/testing.md, "The RDMA chain").
 * Shared by the fake (kernel) and the project's test program (userspace): only
 * <linux/ioctl.h> and <linux/types.h> types.
 *
 * - open(): the process's CUDA context on the GPU. One per address space: a second
 *   open by the same process shares it. The context's owner is the opening task's
 *   address space and thread group (docs/abi.md 1.4b: only the owner may pin).
 * - mmap(len, MAP_SHARED, offset 0): cuMemAlloc of round_up(len, 64 KiB) bytes at
 *   the mapping's address, which the node aligns to 64 KiB (its get_unmapped_area;
 *   a MAP_FIXED address must be aligned): the GPU VA is the CPU VA, as with CUDA's
 *   unified addressing. The memory is RAM in 64 KiB physically contiguous chunks
 *   (the bed's GPU pages), zeroed, mapped with remap_pfn_range (VM_IO | VM_PFNMAP),
 *   so that ordinary pinning (GUP) refuses it, as it refuses a real GPU BAR mapping,
 *   and a registration reaches the peer path. The CPU view is not inherited by fork
 *   (VM_DONTCOPY) and cannot be split, grown or moved (partial munmap, mprotect of a
 *   part, mremap: EINVAL). EINVAL also for MAP_PRIVATE, an offset, an unaligned
 *   address, or another address space than the owner's; EBUSY where the address
 *   overlaps an allocation of the context that was unmapped but not freed; ENOMEM
 *   beyond the RAM the machine has (or 64 GiB in one mapping). munmap without
 *   FAKE_NV_IOC_FREE leaves the allocation live (the context's teardown frees it).
 *   The file may be closed once mapped: the mapping holds it.
 * - ioctl(FAKE_NV_IOC_FREE, &va): cudaFree, by the owner only (else EINVAL): the
 *   free callbacks of the allocation's callback pins run now; persistent pins keep
 *   the memory alive until they are put (docs/abi.md 1.1, 1.4). The CPU view stays
 *   readable until munmap, so that a test can check that no byte landed in freed
 *   memory.
 * - ioctl(FAKE_NV_IOC_INFO): by any process holding the file (a forked child).
 * - the last close of the context (process exit included; a mapping holds the file,
 *   so after the last munmap): every allocation still live is freed as by
 *   FAKE_NV_IOC_FREE (the CUDA context's teardown).
 */
#ifndef PEERMEM_FAKE_NVIDIA_UAPI_H
#define PEERMEM_FAKE_NVIDIA_UAPI_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define FAKE_NV_GPU_NODE "/dev/fake-nvidia-gpu"
/* The GPU page size: allocations and pins are multiples of it. */
#define FAKE_NV_GPU_PAGE 0x10000ULL

struct fake_nv_gpu_info {
	__u64 va;		/* in: an address inside an allocation */
	__u64 alloc_va;		/* out: the allocation's GPU VA */
	__u64 alloc_size;	/* out: its size (a multiple of 64 KiB) */
	__u64 phys;		/* out: the physical address of the 64 KiB page holding va */
	__u32 pins;		/* out: live pins on the allocation (both kinds) */
	__u32 flags;		/* out: FAKE_NV_GPU_FREED once freed (persistent pins
				 * keep it alive) */
};
#define FAKE_NV_GPU_FREED 1u

#define FAKE_NV_IOC_MAGIC 'F'
/* cudaFree of the allocation at *va (its first byte): 0, or -1 with errno ENOENT
 * (EINVAL from another address space than the owner's). */
#define FAKE_NV_IOC_FREE _IOW(FAKE_NV_IOC_MAGIC, 1, __u64)
/* What the driver knows of the allocation holding info.va: 0, or -1 with ENOENT. */
#define FAKE_NV_IOC_INFO _IOWR(FAKE_NV_IOC_MAGIC, 2, struct fake_nv_gpu_info)

#endif /* PEERMEM_FAKE_NVIDIA_UAPI_H */
