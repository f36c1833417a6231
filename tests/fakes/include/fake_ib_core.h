/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Test-control API of the fake MOFED peer-memory core (tests/fakes/ib_core).
 *
 * The fake exports ib_register_peer_memory_client / ib_unregister_peer_memory_client
 * (plain exports, as MOFED's ib_core) and drives registered clients exactly as ABI
 * docs/abi.md section 2.4 describes, checking every rule a client must follow. This header
 * is the extra surface (EXPORT_SYMBOL_GPL) test suites use: a stand-in for
 * ibv_reg_mr / ibv_dereg_mr, the HCA's DMA device, and counters.
 *
 * The fake never includes the project's include/ headers: it carries its own
 * definitions of the ABI structs with compile-time checks of every size and offset.
 */
#ifndef PEERMEM_FAKE_IB_CORE_H
#define PEERMEM_FAKE_IB_CORE_H

#include <linux/types.h>

struct device;
struct fake_mr;

/* Options of a registration. */
struct fake_reg_opts {
	/* The DMA device handed to dma_map; NULL: the HCA stand-in (the first pci-testdev
	 * function, its DMA mask raised to 64 bits as an HCA driver does). */
	struct device *dma_device;
	/* false: a buffer whose user cannot handle invalidation (CQ, QP, SRQ, doorbell):
	 * clients that may invalidate are skipped in the acquire walk. */
	bool can_invalidate;
	/* Writable memory (write=1, force=0) or read-only (force=1). Default true. */
	bool writable;
	/* A negative errno: the HCA cannot create the key once the region is mapped
	 * (mlx5's reg_create failing, e.g. -ENOMEM): the registration is torn down as the
	 * HCA driver does (docs/abi.md 2.5) and fails with it. 0: the key is made. */
	int hca_error;
};

/*
 * ibv_reg_mr stand-in, run in the calling thread's process context (current->mm):
 * the acquire walk, core_context allocation, get_pages, dma_map, get_page_size,
 * trimming, "key live". Returns the region, or ERR_PTR(-errno) with the errno the
 * application would see (-EFAULT when no client accepted the range).
 */
struct fake_mr *fake_core_reg_mr(u64 addr, u64 len, const struct fake_reg_opts *opts);
/* ibv_dereg_mr stand-in: deregistration per region and client kind, then release
 * (docs/abi.md 2.5). */
void fake_core_dereg_mr(struct fake_mr *mr);

/* The client that accepted the region ("nv_mem", ...). */
const char *fake_core_mr_client(struct fake_mr *mr);
/* Number of SG entries of the region, as the HCA sees them (after trimming). */
int fake_core_mr_nents(struct fake_mr *mr);
/* The i-th entry's DMA address and length (after trimming). 0 or -EINVAL. */
int fake_core_mr_entry(struct fake_mr *mr, int i, u64 *dma_addr, u32 *len);
/* The DMA address the HCA would use for byte @offset of the registration, or 0. */
u64 fake_core_mr_dma_addr(struct fake_mr *mr, u64 offset);
/* Times the region was invalidated (0 or 1 for a correct client). */
int fake_core_mr_invalidations(struct fake_mr *mr);
/* The core_context id the core allocated for the region. */
u64 fake_core_mr_core_context(struct fake_mr *mr);

/* How many regions' mapping locks are held right now, by any thread. */
int fake_core_map_locks_held(void);

/* The HCA stand-in's DMA device and a second PCI function left at a 32-bit mask. */
struct device *fake_core_hca_device(void);
struct device *fake_core_dma32_device(void);

/*
 * Pause points (see fake_pause.h): a thread that reaches an armed point parks there
 * until released; each point counts its hits.
 */
enum fake_core_pause_point {
	FAKE_CORE_PAUSE_AFTER_ACQUIRE,	/* reg_mr: acquire accepted, before get_pages */
	FAKE_CORE_PAUSE_IN_INVALIDATE,	/* invalidate entered, before the mapping lock */
	FAKE_CORE_PAUSE_MAP_FAILED,	/* reg_mr: dma_map failed; mapping lock held, id live,
					 * before put_pages (ABI doc 2.5) */
	FAKE_CORE_PAUSE_HCA_FAILED,	/* reg_mr: mapped, the HCA failed (hca_error); the
					 * mapping lock held, id live, before the unmap */
	FAKE_CORE_PAUSE_BEFORE_ACTIVATE, /* reg_mr, invalidating client: mapped, key live,
					 * mapping lock still held until activation */
	FAKE_CORE_PAUSE_COUNT,
};
void fake_core_pause_arm(enum fake_core_pause_point pt);
int fake_core_pause_wait(enum fake_core_pause_point pt, unsigned int timeout_ms);
void fake_core_pause_release(enum fake_core_pause_point pt);
u64 fake_core_pause_hits(enum fake_core_pause_point pt);

/* Rules the fake checks on clients; each breach is counted and printed by name. */
enum fake_core_violation {
	FAKE_CORE_V_ACQUIRE_NO_CONTEXT,		/* acquire returned > 0 without a context */
	FAKE_CORE_V_SG_NOT_MAPPED,		/* dma_map returned 0 with no / unmapped entries */
	FAKE_CORE_V_SG_MISALIGNED,		/* an entry not PAGE_SIZE aligned */
	FAKE_CORE_V_SG_WRONG_COVERAGE,		/* entries do not cover exactly the rounded range */
	FAKE_CORE_V_SG_TOUCHED_ON_FAILURE,	/* dma_map failed but changed sg_head */
	FAKE_CORE_V_BAD_PAGE_SIZE,		/* get_page_size not a power of two >= PAGE_SIZE */
	FAKE_CORE_V_UNMAP_NONZERO,		/* dma_unmap returned non-zero */
	FAKE_CORE_V_DOUBLE_INVALIDATE,		/* invalidate of a region already invalidated */
	FAKE_CORE_V_UNREGISTER_BUSY,		/* unregister while regions were live (blocked) */
	FAKE_CORE_V_COUNT,
};
const char *fake_core_violation_name(enum fake_core_violation v);

/* The client callbacks the core times (for the benchmark's per-phase split). */
enum fake_core_phase {
	FAKE_CORE_PHASE_ACQUIRE,
	FAKE_CORE_PHASE_GET_PAGES,
	FAKE_CORE_PHASE_DMA_MAP,
	FAKE_CORE_PHASE_DMA_UNMAP,
	FAKE_CORE_PHASE_PUT_PAGES,
	FAKE_CORE_PHASE_RELEASE,
	FAKE_CORE_PHASE_COUNT,
};
const char *fake_core_phase_name(enum fake_core_phase ph);

/* Per-client counters, as MOFED exposes them under memory_peers/<name>/. */
struct fake_core_client_stats {
	u64 num_alloc_mrs;
	u64 num_dealloc_mrs;
	u64 num_reg_pages;	/* PAGE_SIZE pages mapped */
	u64 num_dereg_pages;
	u64 num_reg_bytes;
	u64 num_dereg_bytes;
	u64 num_free_callbacks;	/* invalidations received */
	u64 acquires, acquire_hits, get_pages, dma_maps, dma_unmaps, put_pages, releases;
	u64 phase_ns[FAKE_CORE_PHASE_COUNT];	/* time spent in each callback, summed */
};
/* 0, or -ENOENT when no client of that name is registered. */
int fake_core_client_stats(const char *name, struct fake_core_client_stats *out);

struct fake_core_counters {
	u64 clients_registered;
	u64 mrs_live;
	u64 invalidations_stale;	/* invalidate with an unknown or stale core_context */
	u64 unbalanced_unlocks;	/* in-box core: a stop's unlock of a mutex not held */
	u64 stop_deadlocks;	/* in-box core: a stop that locks the mutex it holds */
	u64 violations[FAKE_CORE_V_COUNT];
	u64 violations_total;
};
void fake_core_get_counters(struct fake_core_counters *out);
void fake_core_reset_counters(void);

#endif /* PEERMEM_FAKE_IB_CORE_H */
