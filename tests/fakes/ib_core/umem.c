// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The in-box peer-memory core's driver-facing umem interface (docs/abi.md 8.1), in
 * the fake core built as ib_peer_mem.ko (Kbuild: FAKE_CORE_EXPORTER=peer_mem), which
 * loads beside the kernel's own ib_core and ib_uverbs (part rdma, docs/testing.md,
 * "The RDMA chain"). An HCA driver (the test bed's patched rxe, tests/rdma) asks for
 * user memory with ib_umem_get_peer; ordinary pinning comes first, and only when it
 * fails does the region go through the core's peer path (core.c: the acquire walk,
 * get_pages, dma_map, get_page_size, the checks and trimming, the mapping lock held
 * for an invalidating client). Once the driver's key exists it activates the
 * invalidation notifier; an invalidation then calls the driver's function under the
 * mapping lock before the core unmaps; deregistration stops the notifier, then
 * releases. mlx5's order, as abi-facts 8.1 records it.
 *
 * Where this differs from the in-box trees (each a deviation of the test bed): the
 * functions live in a module of their own, not in ib_core, whose struct ib_umem has
 * no is_peer bit (the driver keeps which path gave the umem: ib_peer_umem.h); the DMA
 * device handed to the client is the HCA stand-in PCI function, since rxe has none
 * and the GPU driver maps for a PCI peer (docs/abi.md 1.1).
 */
#define pr_fmt(fmt) "fake-" KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/slab.h>
#include <linux/sched/mm.h>
#include <linux/scatterlist.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_verbs.h>

#include "ib_peer_umem.h"
#include "internal.h"

/* A peer umem: what the driver holds, and the core's region behind it. */
struct peer_umem {
	struct ib_umem umem;
	struct fake_mr *mr;
	umem_invalidate_func_t invalidate;
	void *priv;
	enum {
		PEER_UMEM_MAPPED,	/* got; an invalidating client's mapping lock held */
		PEER_UMEM_ACTIVE,	/* key live, invalidation armed */
		PEER_UMEM_STOPPED,	/* no invalidation any more; release is next */
	} state;
};

static struct peer_umem *to_peer(struct ib_umem *umem)
{
	return container_of(umem, struct peer_umem, umem);
}

/* The core's hook in an invalidation, under the mapping lock: the driver revokes its
 * key; the table the umem showed it is gone once the core has unmapped. */
static void peer_umem_revoke(struct fake_mr *mr)
{
	struct peer_umem *pu = core_mr_revoke_priv(mr);

	if (pu->invalidate)
		pu->invalidate(&pu->umem, pu->priv);
	memset(&pu->umem.sgt_append, 0, sizeof(pu->umem.sgt_append));
}

struct ib_umem *ib_umem_get_peer(struct ib_device *device, unsigned long addr,
				 size_t size, int access, unsigned long peer_mem_flags,
				 bool *is_peer)
{
	struct fake_reg_opts opts = {
		.can_invalidate = peer_mem_flags & IB_PEER_MEM_INVAL_SUPP,
		.writable = ib_access_writable(access),
	};
	struct ib_umem *umem;
	struct peer_umem *pu;
	struct fake_mr *mr;

	*is_peer = false;
	umem = ib_umem_get_va(device, addr, size, access);
	if (!IS_ERR(umem) || !(peer_mem_flags & IB_PEER_MEM_ALLOW))
		return umem;

	pu = kzalloc(sizeof(*pu), GFP_KERNEL);
	if (!pu)
		return ERR_PTR(-ENOMEM);
	mr = core_mr_register(addr, size, &opts);
	if (IS_ERR(mr)) {
		kfree(pu);
		/* No client took the range (-EFAULT): the ordinary path's error stands. */
		pr_debug("peer path for %#lx+%zu: %ld (ordinary pinning: %ld)\n", addr, size,
			 PTR_ERR(mr), PTR_ERR(umem));
		return PTR_ERR(mr) == -EFAULT ? umem : ERR_CAST(mr);
	}
	pu->mr = mr;
	pu->state = PEER_UMEM_MAPPED;
	pu->umem.ibdev = device;
	pu->umem.owning_mm = current->mm;
	mmgrab(current->mm);
	pu->umem.iova = addr;
	pu->umem.address = addr;
	pu->umem.length = size;
	pu->umem.writable = opts.writable;
	/* The client's table as the core trimmed it: DMA addresses, no pages. */
	pu->umem.sgt_append.sgt = *core_mr_sgt(mr);
	core_mr_set_revoke(mr, peer_umem_revoke, pu);
	*is_peer = true;
	return &pu->umem;
}
EXPORT_SYMBOL(ib_umem_get_peer);

void ib_umem_activate_invalidation_notifier(struct ib_umem *umem,
					    umem_invalidate_func_t func, void *priv)
{
	struct peer_umem *pu = to_peer(umem);

	if (pu->state != PEER_UMEM_MAPPED) {
		pr_err("activation of a peer umem that is not freshly mapped (state %d): ignored\n",
		       pu->state);
		return;
	}
	pu->invalidate = func;
	pu->priv = priv;
	pu->state = PEER_UMEM_ACTIVE;
	core_mr_activate(pu->mr);
}
EXPORT_SYMBOL(ib_umem_activate_invalidation_notifier);

void ib_umem_stop_invalidation_notifier(struct ib_umem *umem)
{
	struct peer_umem *pu = to_peer(umem);

	switch (pu->state) {
	case PEER_UMEM_ACTIVE:
		core_mr_stop(pu->mr);
		break;
	case PEER_UMEM_MAPPED:
		/* The driver's key could not be made. */
		core_mr_stop_unkeyed(pu->mr);
		break;
	case PEER_UMEM_STOPPED:
		pr_err("peer umem %#lx+%zu stopped twice: ignored\n", umem->address,
		       umem->length);
		return;
	}
	pu->state = PEER_UMEM_STOPPED;
}
EXPORT_SYMBOL(ib_umem_stop_invalidation_notifier);

void ib_peer_umem_release(struct ib_umem *umem)
{
	struct peer_umem *pu = to_peer(umem);

	/* A driver that did not stop first (a CQ or QP buffer): stopped here. */
	if (pu->state != PEER_UMEM_STOPPED)
		ib_umem_stop_invalidation_notifier(umem);
	core_mr_release(pu->mr);
	mmdrop(umem->owning_mm);
	kfree(pu);
}
EXPORT_SYMBOL(ib_peer_umem_release);
