/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Between the fake nvidia.ko's own files (fake_nvidia.c, its device node gpu_node.c)
 * and its KUnit suites (not exported).
 */
#ifndef PEERMEM_FAKE_NVIDIA_INTERNAL_H
#define PEERMEM_FAKE_NVIDIA_INTERNAL_H

#include <linux/kref.h>
#include <linux/list.h>
#include <linux/types.h>

#include "fake_nvidia_uapi.h"

struct fake_nv_proc;
struct mm_struct;
struct page;

/* Whether the calling task holds the driver-wide lock. */
bool fake_nv_driver_lock_held(void);
/* Puts every live pin (after a failed test); returns how many. */
int fake_nv_test_reap(void);

/*
 * RAM behind an allocation of the device node: 64 KiB chunks, each physically
 * contiguous (alloc_pages of order get_order(SZ_64K), zeroed), marked reserved while
 * they stand for GPU memory (fake_nvidia.c, fnv_ram_mark). Held by the allocation
 * until it is destroyed (freed and unpinned), and by every vma that maps it, so that
 * no page is freed while a CPU page table still maps it (a freed allocation stays
 * readable until munmap). The last fnv_ram_put frees the pages.
 */
struct fnv_ram {
	struct kref ref;
	struct list_head stale;		/* gpu_node.c: a failed mmap's reference */
	u32 nchunks;
	struct page *chunk[] __counted_by(nchunks);
};
void fnv_ram_get(struct fnv_ram *ram);
void fnv_ram_put(struct fnv_ram *ram);	/* NULL: nothing */

/* The largest allocation the node makes (its per-page arrays stay a few MiB). */
#define FAKE_NV_NODE_MAX_SIZE	(1ULL << 36)

#ifndef FAKE_NV_PROPRIETARY
/*
 * The device node's side of the driver (fake_nvidia.c), for gpu_node.c.
 *
 * fake_nv_node_proc_create: a process on @mm (the opener's), owned by the current
 * tgid, holding an mm_count reference only (mmgrab): the identity caller_proc
 * compares, not the address space, which the node's own mappings would otherwise
 * keep alive. NULL without memory. Ends with fake_nv_proc_exit (mmdrop).
 *
 * fake_nv_node_ram_alloc: RAM backing of @size bytes (a multiple of 64 KiB, at most
 * FAKE_NV_NODE_MAX_SIZE), with one reference, the caller's; NULL if none. Takes no
 * lock: reclaim may take a while, and the driver lock serialises every pin.
 *
 * fake_nv_node_va_busy: whether [@va, @va + @size) overlaps a live allocation of @p.
 * Takes drv_lock.
 *
 * fake_nv_node_alloc: cuMemAlloc: makes @ram the allocation of @p at the 64 KiB-aligned
 * @va, which takes a reference of its own on @ram; 0, or -EBUSY (@va overlaps a live
 * allocation of @p), -ENOMEM, -EINVAL. From then on it can be pinned. Takes drv_lock.
 *
 * gpu_node.c calls these three under the mmap_lock of @p's mm, which serialises the
 * allocations of @p (only mmap by the owner makes them): an address found free stays
 * free until the allocation is made.
 *
 * fake_nv_node_info: FAKE_NV_IOC_INFO for @p: fills @info for the allocation of @p
 * holding info->va (a live one, else a freed one kept by persistent pins); -ENOENT
 * if none. Takes drv_lock.
 *
 * cudaFree is fake_nv_free (fake_nvidia.h), the context's teardown fake_nv_proc_exit.
 */
struct fake_nv_proc *fake_nv_node_proc_create(struct mm_struct *mm);
struct fnv_ram *fake_nv_node_ram_alloc(u64 size);
bool fake_nv_node_va_busy(struct fake_nv_proc *p, u64 va, u64 size);
int fake_nv_node_alloc(struct fake_nv_proc *p, u64 va, struct fnv_ram *ram);
int fake_nv_node_info(struct fake_nv_proc *p, struct fake_nv_gpu_info *info);

/*
 * gpu_node.c: registers /dev/fake-nvidia-gpu (module init, last; 0, or an error
 * that must fail the load), deregisters it (module exit, first).
 */
int fake_nv_node_init(void);
void fake_nv_node_exit(void);
#else
/* The proprietary build has no processes, so no node. */
static inline int fake_nv_node_init(void) { return 0; }
static inline void fake_nv_node_exit(void) { }
#endif

#endif
