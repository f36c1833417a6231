/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The driver side of the test bed's peer-memory core beside the kernel's own RDMA
 * stack: the module ib_peer_mem (tests/fakes/ib_core, FAKE_CORE_EXPORTER=peer_mem)
 * offers an HCA driver the in-box core's umem interface (docs/abi.md 8.1), as mlx5
 * uses it, and the patched soft-RoCE driver of part rdma (tests/rdma/rxe-peer.patch)
 * takes GPU memory through it. The in-box trees carry these functions in ib_core
 * (ib_umem_get_peer) and tell a peer umem by a bit of struct ib_umem; the kernel's
 * own ib_core has neither, so here they live in ib_peer_mem and the driver keeps
 * which umem came from the peer path (docs/testing.md, "The RDMA chain": the
 * deviations).
 */
#ifndef PEERMEM_IB_PEER_UMEM_H
#define PEERMEM_IB_PEER_UMEM_H

#include <linux/bits.h>
#include <linux/types.h>

struct ib_device;
struct ib_umem;

/* peer_mem_flags of ib_umem_get_peer (docs/abi.md 8.1). */
#define IB_PEER_MEM_ALLOW BIT(0)	/* the peer path may take the range */
#define IB_PEER_MEM_INVAL_SUPP BIT(1)	/* the driver can be invalidated */

typedef void (*umem_invalidate_func_t)(struct ib_umem *umem, void *priv);

/*
 * User memory for @device: ordinary pinning first (the kernel's ib_umem_get_va);
 * when that fails and IB_PEER_MEM_ALLOW is set, the peer path: the acquire walk over
 * the registered clients, get_pages, dma_map for the DMA device the core hands the
 * client, get_page_size, the first and last SG entries trimmed to the range. The SG
 * table then holds DMA addresses only (no pages). *@is_peer says which path gave it.
 * For an invalidating client the region's mapping lock stays held until
 * ib_umem_activate_invalidation_notifier. ERR_PTR on failure: the ordinary path's
 * error when no client took the range, else the client's.
 */
struct ib_umem *ib_umem_get_peer(struct ib_device *device, unsigned long addr,
				 size_t size, int access, unsigned long peer_mem_flags,
				 bool *is_peer);
/*
 * Called by the driver once its key for the peer umem exists: from now on an
 * invalidation calls @func(umem, @priv) under the region's mapping lock, before the
 * core unmaps the pages; @func must stop the HCA's access (revoke the key) and wait
 * for accesses in flight. Drops the mapping lock taken in ib_umem_get_peer.
 */
void ib_umem_activate_invalidation_notifier(struct ib_umem *umem,
					    umem_invalidate_func_t func, void *priv);
/* On deregistration, before ib_peer_umem_release: no invalidation after it returns.
 * Also for a key that could not be made (then without an activation first). */
void ib_umem_stop_invalidation_notifier(struct ib_umem *umem);
/* The end of a peer umem: unmap (unless invalidated), put_pages, release. Never
 * ib_umem_release on a peer umem: its SG table has no pages to unpin. */
void ib_peer_umem_release(struct ib_umem *umem);

#endif /* PEERMEM_IB_PEER_UMEM_H */
