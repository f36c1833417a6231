/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Test-control API of the fake nvidia.ko P2P provider (tests/fakes/nvidia).
 *
 * The fake exports the real nvidia_p2p_* symbols with the real signatures and
 * enforces the real driver's contracts (docs/abi.md section 1). This header is the
 * extra surface that test suites (KUnit, in other modules) use to drive it: fake
 * processes and GPU allocations, knobs, error injection, pause points, counters.
 * All of it is EXPORT_SYMBOL_GPL from the fake.
 *
 * The fake never includes the project's include/ headers: it carries its own
 * definitions of the ABI structs with compile-time checks of every size and offset.
 */
#ifndef PEERMEM_FAKE_NVIDIA_H
#define PEERMEM_FAKE_NVIDIA_H

#include <linux/poison.h>
#include <linux/types.h>

struct device;

/*
 * A fake process: an mm (mm_alloc) and the tgid of the thread that created it. An
 * allocation belongs to one process; nvidia_p2p_get_pages(0, 0, ...) and
 * get_pages_persistent are only allowed from a thread whose current->mm AND
 * current->tgid are the owner's (else -EINVAL), as with deprecated tokens. A second
 * kthread that adopts the same mm is a CLONE_VM child: same mm, other tgid, not owner.
 *
 * Allocations live while the process's "/dev/nvidia file" is open; fake_nv_proc_exit
 * is the close at process exit: every allocation is freed (free callbacks run).
 */
struct fake_nv_proc;

/* Creates a process owned by the calling thread (its tgid) with a fresh mm. */
struct fake_nv_proc *fake_nv_proc_create(void);
/* The calling kthread adopts p's mm (kthread_use_mm); pair with fake_nv_proc_leave. */
void fake_nv_proc_enter(struct fake_nv_proc *p);
void fake_nv_proc_leave(struct fake_nv_proc *p);
/* The process's mm (for checks), never NULL while p exists. */
struct mm_struct *fake_nv_proc_mm(struct fake_nv_proc *p);
/* Closes the file: frees all allocations (callbacks run), then drops p and its mm. */
void fake_nv_proc_exit(struct fake_nv_proc *p);

/*
 * GPU memory. fake_nv_alloc returns a 64 KiB-aligned GPU VA of @size bytes (rounded
 * up to 64 KiB) in p's address space, or 0. Backed allocations use 64 KiB pages of
 * the ivshmem BAR 2 (real physical addresses of a PCI BAR); unbacked ones use an
 * address window above 4 GiB that is never touched (scale tests, 32-bit DMA masks).
 * fake_nv_alloc_at places it at @va (to reuse an address after a free); 0 if taken.
 */
u64 fake_nv_alloc(struct fake_nv_proc *p, u64 size, bool backed);
u64 fake_nv_alloc_at(struct fake_nv_proc *p, u64 va, u64 size, bool backed);
/*
 * cuMemFree: under the driver lock, runs the free callback of every callback pin on
 * the allocation, then frees their page tables and DMA mappings (poisoned and kept
 * in quarantine, so later use is detected, whatever free_on_release says). Persistent pins keep the memory alive
 * until put_pages_persistent. Returns 0, or -ENOENT for an unknown allocation.
 */
int fake_nv_free(struct fake_nv_proc *p, u64 va);
/* The physical address the fake reports for the 64 KiB page holding @va, or 0. */
u64 fake_nv_phys(struct fake_nv_proc *p, u64 va);
/*
 * Whether a live DMA mapping for @peer maps the 64 KiB GPU page at physical address
 * @phys to the DMA address @dma: what nvidia_p2p_dma_map_pages handed out (the BAR
 * address without an IOMMU, an IOVA through one).
 */
bool fake_nv_maps(struct device *peer, u64 phys, u64 dma);

/* Knobs. */
struct fake_nv_config {
	u32 page_table_major;	/* 1 (version 0x00010002) or 2 (0x00020000); default 2
				 * (1 in the legacy build: pre-535 drivers are major 1) */
	u64 bar1_size;		/* default: the ivshmem BAR size (256 MiB) */
	u64 bar1_reserve;	/* default 36 MiB: a pin fails -ENOMEM past size - reserve */
	u32 pin_cost_us;	/* time charged per get_pages under the driver lock; 0 */
	u32 unpin_cost_us;	/* time charged per put_pages; 0 */
	bool free_on_release;	/* a table put and a mapping unmapped are freed, as
				 * nvidia.ko frees them; default false: kept poisoned
				 * (quarantine), so that a stale pointer is recognised */
};
void fake_nv_get_config(struct fake_nv_config *cfg);
int fake_nv_set_config(const struct fake_nv_config *cfg);	/* -EINVAL if bad */
/* Whether this build emulates a driver older than 535.14 (no persistent pair; a NULL
 * callback then means a persistent pin). */
bool fake_nv_is_pre_535(void);

/* The next @count pins (get_pages or get_pages_persistent) fail with -@err. */
void fake_nv_inject_pin_errors(u32 count, int err);
/* The next @count dma_map_pages fail with -@err (as the real one does when the IOMMU or
 * the peer cannot map the pages), whatever the peer. */
void fake_nv_inject_map_errors(u32 count, int err);

/*
 * What a get_pages that failed past its argument checks leaves in the caller's
 * out-pointer: nvidia.ko leaves a pointer to the table it had allocated and freed; the
 * fake leaves this non-canonical address, which faults when read.
 */
#define FAKE_NV_DANGLING_TABLE \
	((struct nvidia_p2p_page_table *)(POISON_POINTER_DELTA + 0x7ab1e000UL))

/*
 * Pause points: a thread that reaches an armed point blocks there until released.
 * Each point counts its hits (armed or not), so race tests prove the window was hit.
 */
enum fake_nv_pause_point {
	FAKE_NV_PAUSE_CB_BEFORE_CLIENT,	/* in the free path, lock held, before the callback */
	FAKE_NV_PAUSE_CB_AFTER_CLIENT,	/* after the callback returned, before tables are freed */
	FAKE_NV_PAUSE_PUT_PAGES,	/* inside put_pages (and put_pages_persistent), lock held */
	FAKE_NV_PAUSE_DMA_MAP,		/* inside dma_map_pages, table lock held */
	FAKE_NV_PAUSE_GET_PAGES,	/* inside get_pages (both kinds), driver lock held */
	FAKE_NV_PAUSE_GET_PAGES_DONE,	/* get_pages pinned, callback armed, lock dropped,
					 * not returned: a free may run the callback first */
	/*
	 * Points inside a client, kept here so that tests arm them like the driver's: a
	 * client's test build calls fake_nv_client_pause(). peermem's KUnit build
	 * (PEERMEM_KUNIT) has one; its production build references none.
	 */
	FAKE_NV_PAUSE_CLIENT_BEFORE_LINK, /* peermem: a callback pin has its page table and
					   * is in the registry, its id not yet recorded (the
					   * window between adopting the table and the link) */
	FAKE_NV_PAUSE_COUNT,
};
void fake_nv_pause_arm(enum fake_nv_pause_point pt);
/* Waits up to @timeout_ms for a thread to be parked at @pt; 0 or -ETIMEDOUT. */
int fake_nv_pause_wait(enum fake_nv_pause_point pt, unsigned int timeout_ms);
/* Releases the parked thread (if any) and disarms the point. */
void fake_nv_pause_release(enum fake_nv_pause_point pt);
u64 fake_nv_pause_hits(enum fake_nv_pause_point pt);
/* A client's own pause point (FAKE_NV_PAUSE_CLIENT_*): counts the hit, parks if armed. */
void fake_nv_client_pause(enum fake_nv_pause_point pt);

/* Contract violations the fake detects; each is counted and printed by name. */
enum fake_nv_violation {
	FAKE_NV_V_PUT_IN_CALLBACK,		/* put_pages from inside the free callback */
	FAKE_NV_V_UNMAP_IN_CALLBACK,		/* dma_unmap_pages from inside the free callback */
	FAKE_NV_V_UNMAP_AFTER_FREE,		/* dma_unmap_pages on a table/mapping freed by a callback */
	FAKE_NV_V_MAP_AFTER_FREE,		/* dma_map_pages on a table freed by a callback */
	FAKE_NV_V_CALL_IN_FLIGHT_AT_FREE,	/* a call on the table was in flight when its callback returned */
	FAKE_NV_V_UNMAP_WRONG_PEER,		/* dma_unmap_pages with another peer than it was mapped for */
	FAKE_NV_V_DOUBLE_PUT,			/* put_pages of a table already put */
	FAKE_NV_V_UNKNOWN_TABLE,		/* a page table or mapping the fake never handed out */
	FAKE_NV_V_WRONG_PUT_KIND,		/* put_pages on a persistent table or the reverse */
	FAKE_NV_V_PUT_WRONG_PROCESS,		/* unused: a put from another process returns 0 and
						 * leaves the pin registered (counted in
						 * puts_not_owner), as the real driver does */
	FAKE_NV_V_UNMAPPED_AT_PUT,		/* put_pages while DMA mappings of the table are live */
	/* Added with the implementation (appended, the values above are unchanged): */
	FAKE_NV_V_DOUBLE_UNMAP,			/* dma_unmap_pages of a mapping already unmapped */
	FAKE_NV_V_PUT_AFTER_FREE,		/* legacy build only: put_pages on a table freed by a
						 * callback (a use-after-free before 535.14) */
	FAKE_NV_V_CALL_IN_CALLBACK,		/* get_pages or dma_map_pages from inside the free
						 * callback (nvidia.ko answers -EIO: its API lock is
						 * held there) */
	FAKE_NV_V_NOT_PCI_PEER,			/* dma_map_pages with a peer that is not a PCI
						 * function (to_pci_dev of another struct device):
						 * nvidia.ko reads the peer's pci_dev fields
						 * unchecked (docs/abi.md 1.1); the fake answers
						 * -EINVAL without reading them */
	FAKE_NV_V_COUNT,
};
/* The name printed and shown in debugfs, e.g. "PUT_IN_CALLBACK"; "?" if out of range. */
const char *fake_nv_violation_name(enum fake_nv_violation v);

struct fake_nv_counters {
	u64 pins_live;		/* page tables handed out and not yet put or freed */
	u64 pins_total;		/* successful get_pages + get_pages_persistent, ever */
	u64 persistent_live;
	u64 bar1_bytes_in_use;	/* 64 KiB pages pinned at least once, times 64 KiB */
	u64 dma_mappings_live;
	u64 callbacks_run;	/* free callbacks invoked */
	u64 refused_unaligned;	/* -EINVAL: address or length not 64 KiB aligned */
	u64 refused_null_callback; /* -EINVAL: NULL callback (535.14+) */
	u64 refused_not_owner;	/* -EINVAL: caller does not own the allocation */
	u64 refused_no_memory;	/* -EINVAL: no allocation covers the range */
	u64 refused_bar1;	/* -ENOMEM: BAR1 budget exhausted */
	u64 refused_injected;	/* failed by fake_nv_inject_{pin,map}_errors */
	u64 refused_dma_mask;	/* dma_map_pages: peer's DMA mask cannot reach the BAR */
	u64 puts_not_owner;	/* put_pages of a callback pin from another process: 0, and
				 * the pin and its callback stay (ABI doc 1.4b) */
	u64 violations[FAKE_NV_V_COUNT];
	u64 violations_total;
};
void fake_nv_get_counters(struct fake_nv_counters *out);
/* Zeroes the *_total/refused/violation counters (live counts are kept). */
void fake_nv_reset_counters(void);

#endif /* PEERMEM_FAKE_NVIDIA_H */
