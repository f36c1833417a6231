// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Fake MOFED peer-memory core for the peermem test bed: ib_core.ko as MOFED through
 * 24.04, or ib_uverbs.ko over rdma_core.c's ib_core.ko as MOFED from 25.04 and the
 * in-box cores (Kbuild's FAKE_CORE_EXPORTER; docs/abi.md 8).
 *
 * Exports ib_register_peer_memory_client / ib_unregister_peer_memory_client with the
 * real signatures and drives registered clients as docs/abi.md sections 2.4 and 2.5
 * describe, step for step with the real core's locks: the client-list mutex only
 * around the acquire walk; a kref on each region; the mapping lock taken before the
 * id is allocated and held across get_pages and dma_map; put_pages after a failed
 * dma_map under that lock with the id still findable; for invalidating clients the
 * lock held until activation; invalidate finding the id under the xarray lock with a
 * reference, never the client-list mutex; deregistration per region and client kind
 * (an MR stopped under the mapping lock as MLNX_OFED 25.04 and later do); the
 * sg_table zeroed after every unmap and invalidation. It checks every rule a client
 * must follow. A broken rule is a "violation": counted,
 * printed with pr_err by name, and (where it happens during a registration) the
 * registration fails with -EINVAL after a proper teardown. The fake never WARNs.
 *
 * The test-control API (tests/fakes/include/fake_ib_core.h) stands in for
 * ibv_reg_mr / ibv_dereg_mr and the HCA.
 */
#define pr_fmt(fmt) "fake-" KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/list.h>
#include <linux/slab.h>
#include <linux/xarray.h>
#include <linux/scatterlist.h>
#include <linux/dma-mapping.h>
#include <linux/pci.h>
#include <linux/debugfs.h>
#include <linux/seq_file.h>
#include <linux/wait.h>
#include <linux/kref.h>
#include <linux/log2.h>
#include <linux/uaccess.h>
#include <linux/string.h>
#include <linux/err.h>
#include <linux/sched.h>
#include <linux/align.h>
#include <linux/timekeeping.h>

#include "fake_pause.h"
#include "fake_pci.h"
#include "internal.h"


/* A registered client (the opaque registration handle). */
struct fake_client {
	struct list_head node;
	const struct peer_memory_client *ops;
	char name[IB_PEER_MEMORY_NAME_MAX + 1];
	char version[IB_PEER_MEMORY_VER_MAX + 1];
	bool invalidating;	/* registered with invalidate_out */
	bool unmaps;		/* extended, PEER_MEM_INVALIDATE_UNMAPS */
	atomic_t refs;		/* regions using the client */
	struct fake_core_client_stats stats;	/* under stats_lock */
	struct dentry *dir;
};

enum mr_state {
	MR_MAPPING,	/* inside reg_mr */
	MR_MAPPED,	/* key live */
	MR_INVALIDATED,	/* invalidated, region not yet deregistered */
	MR_DEAD,	/* deregistered or failed */
};

struct fake_mr {
	struct list_head node;	/* all_mrs, under mrs_lock */
	struct kref kref;
	struct fake_client *client;
	void *ctx;
	u64 addr, len;
	u64 core_context;
	bool has_id;
	bool is_mr;		/* an MR; false: a CQ/QP/SRQ/doorbell buffer (can_invalidate) */
	struct device *dma_device;
	struct mutex map_lock;
	struct task_struct *lock_owner;
	enum mr_state state;
	bool armed;		/* invalidation armed (invalidating clients) */
	bool hca_stopped;	/* the HCA no longer DMAs to the region */
	int invalidations;
	struct sg_table sgt;
	int nmap;
	unsigned long page_size;
	/* Trimming (docs/abi.md 2.4 step 5) and what it replaced. */
	bool trimmed;
	struct scatterlist *first, *last;
	dma_addr_t first_dma;
	unsigned int first_dma_len, first_len;
	unsigned int last_dma_len, last_len;
	/*
	 * An HCA driver's own revoke of its key, called by an invalidation under the
	 * mapping lock before the core unmaps (the in-box umem interface: umem.c's
	 * notifier, docs/abi.md 8.1). NULL for the test-control API's regions, whose
	 * HCA stand-in only records hca_stopped.
	 */
	void (*hca_revoke)(struct fake_mr *mr);
	void *hca_priv;
};

static struct fake_pause pauses[FAKE_CORE_PAUSE_COUNT];

void fake_core_pause_arm(enum fake_core_pause_point pt)
{
	if ((unsigned int)pt < FAKE_CORE_PAUSE_COUNT)
		fake_pause_arm(&pauses[pt]);
}
EXPORT_SYMBOL_GPL(fake_core_pause_arm);

int fake_core_pause_wait(enum fake_core_pause_point pt, unsigned int timeout_ms)
{
	if ((unsigned int)pt >= FAKE_CORE_PAUSE_COUNT)
		return -EINVAL;
	return fake_pause_wait(&pauses[pt], timeout_ms);
}
EXPORT_SYMBOL_GPL(fake_core_pause_wait);

void fake_core_pause_release(enum fake_core_pause_point pt)
{
	if ((unsigned int)pt < FAKE_CORE_PAUSE_COUNT)
		fake_pause_release(&pauses[pt]);
}
EXPORT_SYMBOL_GPL(fake_core_pause_release);

u64 fake_core_pause_hits(enum fake_core_pause_point pt)
{
	if ((unsigned int)pt >= FAKE_CORE_PAUSE_COUNT)
		return 0;
	return fake_pause_hits(&pauses[pt]);
}
EXPORT_SYMBOL_GPL(fake_core_pause_hits);

/*
 * The in-box core (drivers/infiniband/core/peer_mem.c of NV-Kernels and openEuler,
 * docs/abi.md 8) rather than MOFED 25.x's: its ib_umem_stop_invalidation_notifier
 * tests `xa_id != PEER_NO_INVALIDATION_ID`. A non-invalidating client's MR is then
 * stopped with no lock taken (unmapped with none held, then the real core unlocks
 * the mutex it does not hold: counted in unbalanced_unlocks, not done), and an
 * invalidating client's MR whose HCA key cannot be created locks the mutex it still
 * holds (the real core deadlocks there: counted in stop_deadlocks, the fake goes on
 * with the lock it holds).
 */
static bool inbox;
module_param(inbox, bool, 0444);
MODULE_PARM_DESC(inbox, "behave as the in-box peer-memory core (NV-Kernels, openEuler), not MOFED 25.x's");

bool fake_core_test_inbox(void)
{
	return inbox;
}

static DEFINE_MUTEX(clients_lock);
static LIST_HEAD(clients);
static DEFINE_SPINLOCK(stats_lock);
static struct fake_core_counters counters;
static DEFINE_XARRAY_ALLOC(mr_ids);
static u32 mr_next_id;
static DEFINE_SPINLOCK(mrs_lock);
static LIST_HEAD(all_mrs);
static DECLARE_WAIT_QUEUE_HEAD(unreg_wq);
static struct lock_class_key map_lock_key;
static struct pci_dev *hca_pdev, *dma32_pdev;
static struct dentry *dbg_root, *dbg_peers;

static const char *const violation_names[FAKE_CORE_V_COUNT] = {
	[FAKE_CORE_V_ACQUIRE_NO_CONTEXT] = "ACQUIRE_NO_CONTEXT",
	[FAKE_CORE_V_SG_NOT_MAPPED] = "SG_NOT_MAPPED",
	[FAKE_CORE_V_SG_MISALIGNED] = "SG_MISALIGNED",
	[FAKE_CORE_V_SG_WRONG_COVERAGE] = "SG_WRONG_COVERAGE",
	[FAKE_CORE_V_SG_TOUCHED_ON_FAILURE] = "SG_TOUCHED_ON_FAILURE",
	[FAKE_CORE_V_BAD_PAGE_SIZE] = "BAD_PAGE_SIZE",
	[FAKE_CORE_V_UNMAP_NONZERO] = "UNMAP_NONZERO",
	[FAKE_CORE_V_DOUBLE_INVALIDATE] = "DOUBLE_INVALIDATE",
	[FAKE_CORE_V_UNREGISTER_BUSY] = "UNREGISTER_BUSY",
};

const char *fake_core_violation_name(enum fake_core_violation v)
{
	if ((unsigned int)v >= FAKE_CORE_V_COUNT)
		return "UNKNOWN";
	return violation_names[v];
}
EXPORT_SYMBOL_GPL(fake_core_violation_name);

#define STAT_ADD(c, field, n)					\
	do {							\
		spin_lock(&stats_lock);				\
		(c)->stats.field += (n);			\
		spin_unlock(&stats_lock);			\
	} while (0)
#define STAT_INC(c, field) STAT_ADD(c, field, 1)

static const char *const phase_names[FAKE_CORE_PHASE_COUNT] = {
	[FAKE_CORE_PHASE_ACQUIRE] = "acquire",
	[FAKE_CORE_PHASE_GET_PAGES] = "get_pages",
	[FAKE_CORE_PHASE_DMA_MAP] = "dma_map",
	[FAKE_CORE_PHASE_DMA_UNMAP] = "dma_unmap",
	[FAKE_CORE_PHASE_PUT_PAGES] = "put_pages",
	[FAKE_CORE_PHASE_RELEASE] = "release",
};

const char *fake_core_phase_name(enum fake_core_phase ph)
{
	return (unsigned int)ph < FAKE_CORE_PHASE_COUNT ? phase_names[ph] : "unknown";
}
EXPORT_SYMBOL_GPL(fake_core_phase_name);

/* Runs the client callback @call, adding its duration to phase @ph of client @c. */
#define TIMED(c, ph, call)						\
	({								\
		u64 __t0 = ktime_get_ns();				\
		typeof(call) __r = (call);				\
		STAT_ADD(c, phase_ns[ph], ktime_get_ns() - __t0);	\
		__r;							\
	})
#define TIMED_VOID(c, ph, call)						\
	do {								\
		u64 __t0 = ktime_get_ns();				\
		call;							\
		STAT_ADD(c, phase_ns[ph], ktime_get_ns() - __t0);	\
	} while (0)

static __printf(3, 4) void violation(enum fake_core_violation v, struct fake_client *c,
				     const char *fmt, ...)
{
	struct va_format vaf;
	va_list args;

	spin_lock(&stats_lock);
	counters.violations[v]++;
	counters.violations_total++;
	spin_unlock(&stats_lock);

	va_start(args, fmt);
	vaf.fmt = fmt;
	vaf.va = &args;
	pr_err("VIOLATION %s by client %s: %pV\n", fake_core_violation_name(v),
	       c ? c->name : "?", &vaf);
	va_end(args);
}

static void mr_lock(struct fake_mr *mr)
{
	mutex_lock(&mr->map_lock);
	mr->lock_owner = current;
}

static void mr_unlock(struct fake_mr *mr)
{
	mr->lock_owner = NULL;
	mutex_unlock(&mr->map_lock);
}

static void mr_free(struct kref *kref)
{
	struct fake_mr *mr = container_of(kref, struct fake_mr, kref);

	mutex_destroy(&mr->map_lock);
	kfree(mr);
}

static void client_put(struct fake_client *c)
{
	if (atomic_dec_and_test(&c->refs))
		wake_up_all(&unreg_wq);
}

/* Takes the region out of reach of invalidate (under the mapping lock). */
static void mr_kill_locked(struct fake_mr *mr)
{
	mr->state = MR_DEAD;
	mr->armed = false;
	mr->hca_stopped = true;
	if (mr->has_id) {
		xa_erase(&mr_ids, mr->core_context);
		mr->has_id = false;
	}
}

static void mr_untrim(struct fake_mr *mr)
{
	if (!mr->trimmed)
		return;
	sg_dma_address(mr->first) = mr->first_dma;
	sg_dma_len(mr->first) = mr->first_dma_len;
	mr->first->length = mr->first_len;
	if (mr->last != mr->first) {
		sg_dma_len(mr->last) = mr->last_dma_len;
		mr->last->length = mr->last_len;
	}
	mr->trimmed = false;
}

/* dma_unmap and put_pages, called by the core (trimming undone first). */
static void mr_core_unmap(struct fake_mr *mr)
{
	struct fake_client *c = mr->client;
	int ret;

	mr_untrim(mr);
	STAT_INC(c, dma_unmaps);
	ret = TIMED(c, FAKE_CORE_PHASE_DMA_UNMAP, c->ops->dma_unmap(&mr->sgt, mr->ctx, mr->dma_device));
	if (ret)
		violation(FAKE_CORE_V_UNMAP_NONZERO, c, "dma_unmap returned %d", ret);
	STAT_INC(c, put_pages);
	TIMED_VOID(c, FAKE_CORE_PHASE_PUT_PAGES, c->ops->put_pages(&mr->sgt, mr->ctx));
	memset(&mr->sgt, 0, sizeof(mr->sgt));
}

/*
 * The client's counters at a region's unmapping, as the real core keeps them
 * (ib_unmap_peer_client): a mapped region leaving "mapped" (unmapped or invalidated)
 * counts one dealloc; reaching "unmapped" from mapped or invalidated adds its length,
 * and its table's entry count read after the table was zeroed, so 0 (a quirk of the
 * real core, kept). A plain client's invalidated region is "unmapped" there already.
 */
static void mr_count_unmap(struct fake_mr *mr, bool was_mapped, bool to_unmapped)
{
	spin_lock(&stats_lock);
	if (was_mapped)
		mr->client->stats.num_dealloc_mrs++;
	if (to_unmapped) {
		mr->client->stats.num_dereg_pages += mr->sgt.nents;
		mr->client->stats.num_dereg_bytes += mr->len;
	}
	spin_unlock(&stats_lock);
}

/*
 * Called with the mapping lock held when @held, which it drops: the region stops
 * (DEAD: no invalidation after it), and a mapped region is unmapped under the lock
 * when @under_lock, after it otherwise. This is ib_umem_stop_invalidation_notifier
 * (an MR at deregistration or after an HCA failure; under the lock for a client
 * without INVALIDATE_UNMAPS), and the unlocked unmap of ib_peer_umem_release for a
 * buffer that is no MR (docs/abi.md 2.5). Not @held: the in-box core's stop of a
 * non-invalidating client's MR, the same steps with no lock, then its unlock of the
 * mutex it does not hold (counted). The counters move as the real core's.
 */
static void mr_stop(struct fake_mr *mr, bool held, bool under_lock)
{
	bool mapped = mr->state == MR_MAPPED;
	/* An INVALIDATE_UNMAPS client's invalidated region reaches "unmapped" only now. */
	bool invalidated = mr->state == MR_INVALIDATED && mr->client->unmaps;

	mr->state = MR_DEAD;
	mr->armed = false;
	mr->hca_stopped = true;
	if (mapped && under_lock)
		mr_core_unmap(mr);
	if (held) {
		mr_unlock(mr);
	} else {
		spin_lock(&stats_lock);
		counters.unbalanced_unlocks++;
		spin_unlock(&stats_lock);
	}
	if (mapped && !under_lock)
		mr_core_unmap(mr);
	if (mapped || invalidated)
		mr_count_unmap(mr, mapped, true);
}

/* Checks of the mapping after dma_map (docs/abi.md 2.2, 2.4), then trimming. */
static int mr_check_and_trim(struct fake_mr *mr)
{
	struct fake_client *c = mr->client;
	unsigned long ps = mr->page_size;
	u64 total = 0, start, end, head, tail;
	struct scatterlist *sg;
	int i;

	if (mr->nmap <= 0 || !mr->sgt.sgl || mr->nmap > mr->sgt.orig_nents) {
		violation(FAKE_CORE_V_SG_NOT_MAPPED, c,
			  "dma_map returned 0 with nmap %d and a table of %u entries",
			  mr->nmap, mr->sgt.sgl ? mr->sgt.orig_nents : 0);
		return -EINVAL;
	}
	for_each_sg(mr->sgt.sgl, sg, mr->nmap, i) {
		dma_addr_t a = sg_dma_address(sg);
		unsigned int l = sg_dma_len(sg);

		if (!l || a == DMA_MAPPING_ERROR) {
			violation(FAKE_CORE_V_SG_NOT_MAPPED, c,
				  "entry %d not DMA-mapped (address %pad, length %u)", i, &a, l);
			return -EINVAL;
		}
		if (!PAGE_ALIGNED(a) || !PAGE_ALIGNED(l)) {
			violation(FAKE_CORE_V_SG_MISALIGNED, c,
				  "entry %d: DMA address %pad length %u", i, &a, l);
			return -EINVAL;
		}
		total += l;
		mr->last = sg;
	}
	mr->first = mr->sgt.sgl;

	if (ps < PAGE_SIZE || !is_power_of_2(ps)) {
		violation(FAKE_CORE_V_BAD_PAGE_SIZE, c, "get_page_size returned %lu", ps);
		return -EINVAL;
	}
	start = ALIGN_DOWN(mr->addr, ps);
	end = ALIGN(mr->addr + mr->len, ps);
	if (total != end - start) {
		violation(FAKE_CORE_V_SG_WRONG_COVERAGE, c,
			  "entries cover %llu bytes, the range rounded to %lu is %llu bytes",
			  total, ps, end - start);
		return -EINVAL;
	}
	if (ps == PAGE_SIZE)
		return 0;

	head = ALIGN_DOWN(mr->addr, PAGE_SIZE) - start;
	tail = end - ALIGN(mr->addr + mr->len, PAGE_SIZE);
	if (mr->first == mr->last ? sg_dma_len(mr->first) <= head + tail :
	    (sg_dma_len(mr->first) <= head || sg_dma_len(mr->last) <= tail)) {
		violation(FAKE_CORE_V_SG_WRONG_COVERAGE, c,
			  "first/last entry shorter than the trim (%llu/%llu bytes)", head, tail);
		return -EINVAL;
	}

	mr->first_dma = sg_dma_address(mr->first);
	mr->first_dma_len = sg_dma_len(mr->first);
	mr->first_len = mr->first->length;
	mr->last_dma_len = sg_dma_len(mr->last);
	mr->last_len = mr->last->length;

	sg_dma_address(mr->first) += head;
	sg_dma_len(mr->first) -= head;
	mr->first->length = mr->first->length > head ? mr->first->length - head : 0;
	sg_dma_len(mr->last) -= tail;
	mr->last->length = mr->last->length > tail ? mr->last->length - tail : 0;
	mr->trimmed = true;
	return 0;
}

/* The end of every registration, failed or deregistered: the client's release
 * (exactly once), the client reference, the list, the core's reference. */
static void mr_release(struct fake_mr *mr)
{
	struct fake_client *c = mr->client;

	/* release is optional: the core skips a NULL one (ib_put_peer_client). */
	if (c->ops->release) {
		STAT_INC(c, releases);
		TIMED_VOID(c, FAKE_CORE_PHASE_RELEASE, c->ops->release(mr->ctx));
	}
	client_put(c);
	memset(&mr->sgt, 0, sizeof(mr->sgt));
	spin_lock(&mrs_lock);
	list_del(&mr->node);
	spin_unlock(&mrs_lock);
	kref_put(&mr->kref, mr_free);
}

/*
 * ibv_reg_mr up to the HCA's key (docs/abi.md 2.4 steps 1 to 6, 2.5): the acquire walk,
 * core_context, get_pages, dma_map, get_page_size, the checks and trimming. An
 * invalidating client's region comes back with its mapping lock held (until
 * core_mr_activate, or core_mr_stop_unkeyed when the key cannot be made); every
 * failure is torn down and released here.
 */
struct fake_mr *core_mr_register(u64 addr, u64 len, const struct fake_reg_opts *opts)
{
	static const struct fake_reg_opts defaults = {
		.can_invalidate = true,
		.writable = true,
	};
	struct fake_client *c, *winner = NULL;
	struct device *dev;
	struct fake_mr *mr;
	int ret;

	if (!opts)
		opts = &defaults;
	dev = opts->dma_device ?: fake_core_hca_device();
	if (!dev)
		return ERR_PTR(-ENODEV);
	if (!len || addr + len < addr || addr + len > ULONG_MAX)
		return ERR_PTR(-EINVAL);

	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	kref_init(&mr->kref);
	__mutex_init(&mr->map_lock, "fake_mr->map_lock", &map_lock_key);
	mr->addr = addr;
	mr->len = len;
	mr->dma_device = dev;
	mr->is_mr = opts->can_invalidate;
	mr->state = MR_MAPPING;

	/* Step 1: the acquire walk, in registration order, under the global mutex. */
	mutex_lock(&clients_lock);
	list_for_each_entry(c, &clients, node) {
		void *ctx = NULL;

		if (c->invalidating && !opts->can_invalidate)
			continue;
		STAT_INC(c, acquires);
		ret = TIMED(c, FAKE_CORE_PHASE_ACQUIRE, c->ops->acquire(addr, len, NULL, NULL, &ctx));
		if (ret > 0) {
			STAT_INC(c, acquire_hits);
			atomic_inc(&c->refs);
			mr->ctx = ctx;
			winner = c;
			break;
		}
	}
	mutex_unlock(&clients_lock);
	if (!winner) {
		mr_free(&mr->kref);
		return ERR_PTR(-EFAULT);
	}
	c = winner;
	mr->client = c;

	spin_lock(&mrs_lock);
	list_add_tail(&mr->node, &all_mrs);
	spin_unlock(&mrs_lock);

	if (!mr->ctx) {
		violation(FAKE_CORE_V_ACQUIRE_NO_CONTEXT, c,
			  "acquire returned > 0 without setting client_context");
		ret = -EINVAL;
		goto err_release;
	}

	fake_pause_here(&pauses[FAKE_CORE_PAUSE_AFTER_ACQUIRE]);

	/* Step 2: core_context and the mapping lock. */
	mr_lock(mr);
	if (c->invalidating) {
		u32 id;

		ret = xa_alloc_cyclic(&mr_ids, &id, mr, XA_LIMIT(0, U32_MAX - 1),
				      &mr_next_id, GFP_KERNEL);
		if (ret < 0)
			goto err_unlock_release;
		mr->core_context = id;
		mr->has_id = true;
	} else {
		mr->core_context = U32_MAX;
	}

	/* Step 3: get_pages, dma_map, get_page_size. */
	STAT_INC(c, get_pages);
	ret = TIMED(c, FAKE_CORE_PHASE_GET_PAGES,
		    c->ops->get_pages(addr, len, 1, !opts->writable, NULL, mr->ctx,
				      mr->core_context));
	if (ret) {
		if (ret > 0)
			ret = -EINVAL;
		goto err_unlock_release;
	}
	STAT_INC(c, dma_maps);
	/* nmap is the table's own nents, as the real core passes it (umem's sgt). */
	ret = TIMED(c, FAKE_CORE_PHASE_DMA_MAP,
		    c->ops->dma_map(&mr->sgt, mr->ctx, dev, 0, (int *)&mr->sgt.nents));
	if (ret) {
		if (memchr_inv(&mr->sgt, 0, sizeof(mr->sgt)))
			violation(FAKE_CORE_V_SG_TOUCHED_ON_FAILURE, c,
				  "dma_map returned %d but changed sg_head", ret);
		if (ret > 0)
			ret = -EINVAL;
		goto err_unlock_put;
	}
	mr->nmap = mr->sgt.nents;
	if (!c->ops->get_page_size) {
		/* Not checked at registration, but called here unconditionally (2.2). */
		violation(FAKE_CORE_V_BAD_PAGE_SIZE, c,
			  "no get_page_size: the real core calls it after every dma_map, and faults on a NULL one");
		ret = -EINVAL;
		goto err_unlock_unmap;
	}
	mr->page_size = c->ops->get_page_size(mr->ctx);

	/* Checks, then step 5: trimming. */
	ret = mr_check_and_trim(mr);
	if (ret)
		goto err_unlock_unmap;

	mr->state = MR_MAPPED;
	/* Counted as the real core does, once mapped: entries, not pages. */
	spin_lock(&stats_lock);
	c->stats.num_alloc_mrs++;
	c->stats.num_reg_pages += mr->sgt.nents;
	c->stats.num_reg_bytes += len;
	spin_unlock(&stats_lock);
	/* Step 6: a non-invalidating client's region is unlocked at once. */
	if (!c->invalidating)
		mr_unlock(mr);
	return mr;

err_unlock_unmap:
	mr_kill_locked(mr);
	mr_unlock(mr);
	mr_core_unmap(mr);
	goto err_release;
err_unlock_put:
	/*
	 * As the real core (2.5): put_pages under the mapping lock, with the id still in
	 * the xarray, so that an invalidation of this region finds it and waits on the
	 * lock meanwhile. Only then is the id erased and the lock dropped.
	 */
	fake_pause_here(&pauses[FAKE_CORE_PAUSE_MAP_FAILED]);
	STAT_INC(c, put_pages);
	TIMED_VOID(c, FAKE_CORE_PHASE_PUT_PAGES, c->ops->put_pages(&mr->sgt, mr->ctx));
	memset(&mr->sgt, 0, sizeof(mr->sgt));
	mr_kill_locked(mr);
	mr_unlock(mr);
	goto err_release;
err_unlock_release:
	mr_kill_locked(mr);
	mr_unlock(mr);
err_release:
	mr->state = MR_DEAD;
	mr_release(mr);
	return ERR_PTR(ret);
}

/* The HCA's key is live: the region counts as an MR, and an invalidating client's
 * invalidation is armed, its mapping lock dropped only now (activation). */
void core_mr_activate(struct fake_mr *mr)
{
	spin_lock(&stats_lock);
	counters.mrs_live++;
	spin_unlock(&stats_lock);

	if (mr->client->invalidating) {
		fake_pause_here(&pauses[FAKE_CORE_PAUSE_BEFORE_ACTIVATE]);
		mr->armed = true;
		mr_unlock(mr);
	}
}

/*
 * Mapped, but the HCA could not create the key: as mlx5's create_real_mr when
 * reg_create fails (docs/abi.md 2.5), invalidation is stopped; the caller then releases
 * the region. An invalidating client's mapping lock is still held from mapping and its
 * id live; a non-invalidating client's lock is taken again. A client without
 * INVALIDATE_UNMAPS is unmapped under the lock, an INVALIDATE_UNMAPS client after it,
 * its id still live; only then is the id erased.
 */
void core_mr_stop_unkeyed(struct fake_mr *mr)
{
	struct fake_client *c = mr->client;

	if (!c->invalidating && !inbox) {
		mr_lock(mr);
	} else if (c->invalidating && inbox) {
		/* The in-box core locks the mutex it holds here, and deadlocks. */
		spin_lock(&stats_lock);
		counters.stop_deadlocks++;
		spin_unlock(&stats_lock);
	}
	fake_pause_here(&pauses[FAKE_CORE_PAUSE_HCA_FAILED]);
	mr_stop(mr, c->invalidating || !inbox, !c->unmaps);
	mr_kill_locked(mr);
}

/*
 * Deregistration's stop (docs/abi.md 2.5), per region and client kind. Under the
 * mapping lock the state becomes DEAD, which blocks later invalidations; the id stays
 * in the xarray until the region is unmapped, so an invalidation may still find it and
 * take the lock meanwhile. An MR's deregistration stops invalidation first (the HCA
 * driver calls ib_umem_stop_invalidation_notifier, MLNX_OFED 25.04 and later): a client
 * without INVALIDATE_UNMAPS, invalidating or not, is unmapped under the lock. A
 * CQ/QP/SRQ buffer is released without that step, unmapped with no lock held
 * (ib_peer_umem_release), as is an INVALIDATE_UNMAPS client's MR after the lock. Then
 * the id is erased (no mapping lock held).
 */
void core_mr_stop(struct fake_mr *mr)
{
	struct fake_client *c = mr->client;

	if (inbox && mr->is_mr && !c->invalidating) {
		/* The in-box core's stop takes no lock for a non-invalidating client. */
		mr_stop(mr, false, true);
	} else {
		mr_lock(mr);
		mr_stop(mr, true, mr->is_mr && !c->unmaps);
	}
	if (mr->has_id) {
		xa_erase(&mr_ids, mr->core_context);
		mr->has_id = false;
	}

	spin_lock(&stats_lock);
	counters.mrs_live--;
	spin_unlock(&stats_lock);
}

/* The end of a stopped region: the client's release, the references. */
void core_mr_release(struct fake_mr *mr)
{
	mr_release(mr);
}

/* The HCA driver's revoke, run by an invalidation under the mapping lock (before the
 * region is armed: nothing can invalidate it yet). */
void core_mr_set_revoke(struct fake_mr *mr, void (*revoke)(struct fake_mr *mr), void *priv)
{
	mr->hca_revoke = revoke;
	mr->hca_priv = priv;
}

void *core_mr_revoke_priv(struct fake_mr *mr)
{
	return mr->hca_priv;
}

/* The table the client filled (DMA addresses, trimmed), as the HCA reads it. */
const struct sg_table *core_mr_sgt(struct fake_mr *mr)
{
	return &mr->sgt;
}

struct fake_mr *fake_core_reg_mr(u64 addr, u64 len, const struct fake_reg_opts *opts)
{
	struct fake_mr *mr = core_mr_register(addr, len, opts);

	if (IS_ERR(mr))
		return mr;
	if (opts && opts->hca_error < 0) {
		core_mr_stop_unkeyed(mr);
		mr->state = MR_DEAD;
		mr_release(mr);
		return ERR_PTR(opts->hca_error);
	}
	core_mr_activate(mr);
	return mr;
}
EXPORT_SYMBOL_GPL(fake_core_reg_mr);

void fake_core_dereg_mr(struct fake_mr *mr)
{
	if (IS_ERR_OR_NULL(mr))
		return;
	core_mr_stop(mr);
	mr_release(mr);
}
EXPORT_SYMBOL_GPL(fake_core_dereg_mr);

/* The core's invalidate function, handed out through invalidate_out. */
static int fake_core_invalidate(void *reg_handle, u64 core_context)
{
	struct fake_client *c = reg_handle;
	struct fake_mr *mr = NULL;

	fake_pause_here(&pauses[FAKE_CORE_PAUSE_IN_INVALIDATE]);
	STAT_INC(c, num_free_callbacks);	/* every call, found or not, as the real core */
	if (core_context < U32_MAX) {
		xa_lock(&mr_ids);
		mr = xa_load(&mr_ids, core_context);
		if (mr && mr->client == c)
			kref_get(&mr->kref);
		else
			mr = NULL;
		xa_unlock(&mr_ids);
	}
	if (!mr)
		goto stale;

	/* Waits for an in-flight get_pages/dma_map (reg_mr holds the lock). */
	mr_lock(mr);
	if (mr->state == MR_INVALIDATED) {
		mr->invalidations++;
		mr_unlock(mr);
		kref_put(&mr->kref, mr_free);
		violation(FAKE_CORE_V_DOUBLE_INVALIDATE, c,
			  "core_context %llu invalidated twice", core_context);
		return 0;
	}
	if (mr->state != MR_MAPPED || !mr->armed) {
		mr_unlock(mr);
		kref_put(&mr->kref, mr_free);
		goto stale;
	}
	/* The HCA stops its access first: the driver revokes its key (umem.c). */
	if (mr->hca_revoke)
		mr->hca_revoke(mr);
	mr->hca_stopped = true;
	mr->invalidations++;
	if (!c->unmaps) {
		mr_core_unmap(mr);	/* nested inside the client's free callback */
	} else {
		/* The client unmaps by itself; the core forgets its table (2.5). */
		mr_untrim(mr);
		memset(&mr->sgt, 0, sizeof(mr->sgt));
	}
	mr_count_unmap(mr, true, !c->unmaps);
	mr->state = MR_INVALIDATED;
	mr_unlock(mr);
	kref_put(&mr->kref, mr_free);
	return 0;

stale:
	spin_lock(&stats_lock);
	counters.invalidations_stale++;
	spin_unlock(&stats_lock);
	return 0;
}

const char *fake_core_mr_client(struct fake_mr *mr)
{
	return mr->client->name;
}
EXPORT_SYMBOL_GPL(fake_core_mr_client);

int fake_core_mr_nents(struct fake_mr *mr)
{
	int n;

	mr_lock(mr);
	n = mr->state == MR_MAPPED ? mr->nmap : 0;
	mr_unlock(mr);
	return n;
}
EXPORT_SYMBOL_GPL(fake_core_mr_nents);

int fake_core_mr_entry(struct fake_mr *mr, int i, u64 *dma_addr, u32 *len)
{
	struct scatterlist *sg;
	int j, ret = -EINVAL;

	mr_lock(mr);
	if (mr->state == MR_MAPPED && i >= 0 && i < mr->nmap) {
		for_each_sg(mr->sgt.sgl, sg, mr->nmap, j) {
			if (j == i) {
				*dma_addr = sg_dma_address(sg);
				*len = sg_dma_len(sg);
				ret = 0;
				break;
			}
		}
	}
	mr_unlock(mr);
	return ret;
}
EXPORT_SYMBOL_GPL(fake_core_mr_entry);

u64 fake_core_mr_dma_addr(struct fake_mr *mr, u64 offset)
{
	struct scatterlist *sg;
	u64 pos, ret = 0;
	int j;

	mr_lock(mr);
	if (mr->state == MR_MAPPED && offset < mr->len) {
		pos = offset_in_page(mr->addr) + offset;
		for_each_sg(mr->sgt.sgl, sg, mr->nmap, j) {
			if (pos < sg_dma_len(sg)) {
				ret = sg_dma_address(sg) + pos;
				break;
			}
			pos -= sg_dma_len(sg);
		}
	}
	mr_unlock(mr);
	return ret;
}
EXPORT_SYMBOL_GPL(fake_core_mr_dma_addr);

int fake_core_mr_invalidations(struct fake_mr *mr)
{
	int n;

	mr_lock(mr);
	n = mr->invalidations;
	mr_unlock(mr);
	return n;
}
EXPORT_SYMBOL_GPL(fake_core_mr_invalidations);

u64 fake_core_mr_core_context(struct fake_mr *mr)
{
	return mr->core_context;
}
EXPORT_SYMBOL_GPL(fake_core_mr_core_context);

struct device *fake_core_hca_device(void)
{
	return hca_pdev ? &hca_pdev->dev : NULL;
}
EXPORT_SYMBOL_GPL(fake_core_hca_device);

struct device *fake_core_dma32_device(void)
{
	return dma32_pdev ? &dma32_pdev->dev : NULL;
}
EXPORT_SYMBOL_GPL(fake_core_dma32_device);

int fake_core_client_stats(const char *name, struct fake_core_client_stats *out)
{
	struct fake_client *c;
	int ret = -ENOENT;

	mutex_lock(&clients_lock);
	list_for_each_entry(c, &clients, node) {
		if (!strcmp(c->name, name)) {
			spin_lock(&stats_lock);
			*out = c->stats;
			spin_unlock(&stats_lock);
			ret = 0;
			break;
		}
	}
	mutex_unlock(&clients_lock);
	return ret;
}
EXPORT_SYMBOL_GPL(fake_core_client_stats);

void fake_core_get_counters(struct fake_core_counters *out)
{
	spin_lock(&stats_lock);
	*out = counters;
	spin_unlock(&stats_lock);
}
EXPORT_SYMBOL_GPL(fake_core_get_counters);

/* Resets the event counters (violations, stale invalidations), not the state ones. */
void fake_core_reset_counters(void)
{
	spin_lock(&stats_lock);
	memset(counters.violations, 0, sizeof(counters.violations));
	counters.violations_total = 0;
	counters.invalidations_stale = 0;
	spin_unlock(&stats_lock);
}
EXPORT_SYMBOL_GPL(fake_core_reset_counters);

/* debugfs: ib_core/memory_peers/<client>/{version,num_*} */
static int version_show(struct seq_file *m, void *unused)
{
	struct fake_client *c = m->private;

	seq_printf(m, "%s\n", c->version);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(version);

static void client_debugfs(struct fake_client *c)
{
	struct dentry *d;

	if (IS_ERR_OR_NULL(dbg_peers))
		return;
	d = debugfs_create_dir(c->name, dbg_peers);
	if (IS_ERR(d)) {
		pr_err("no debugfs directory for client %s (duplicate name?)\n", c->name);
		return;
	}
	c->dir = d;
	debugfs_create_file("version", 0444, d, c, &version_fops);
	debugfs_create_u64("num_alloc_mrs", 0444, d, &c->stats.num_alloc_mrs);
	debugfs_create_u64("num_dealloc_mrs", 0444, d, &c->stats.num_dealloc_mrs);
	debugfs_create_u64("num_reg_pages", 0444, d, &c->stats.num_reg_pages);
	debugfs_create_u64("num_dereg_pages", 0444, d, &c->stats.num_dereg_pages);
	debugfs_create_u64("num_reg_bytes", 0444, d, &c->stats.num_reg_bytes);
	debugfs_create_u64("num_dereg_bytes", 0444, d, &c->stats.num_dereg_bytes);
	debugfs_create_u64("num_free_callbacks", 0444, d, &c->stats.num_free_callbacks);
}

static void *register_client(const struct peer_memory_client *client,
			     invalidate_peer_memory *invalidate_out)
{
	const struct peer_memory_client_ex *ex = (const void *)client;
	struct fake_client *c;

	if (!client || !client->acquire || !client->get_pages || !client->put_pages ||
	    !client->dma_map || !client->dma_unmap)
		return NULL;
	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		return NULL;
	c->ops = client;
	memcpy(c->name, client->name, IB_PEER_MEMORY_NAME_MAX);
	memcpy(c->version, client->version, IB_PEER_MEMORY_VER_MAX);
	atomic_set(&c->refs, 0);
	if (invalidate_out) {
		*invalidate_out = fake_core_invalidate;
		c->invalidating = true;
	}
	/*
	 * Extended only if version[15] != 0 and ex_size >= 148 (docs/abi.md 2.2); the
	 * flag is read whether the client invalidates or not, as the real core does.
	 */
	if (client->version[IB_PEER_MEMORY_VER_MAX - 1] && ex->ex_size >= PEER_MEM_EX_MIN_SIZE)
		c->unmaps = ex->flags & PEER_MEM_INVALIDATE_UNMAPS;

	mutex_lock(&clients_lock);
	client_debugfs(c);
	list_add_tail(&c->node, &clients);
	spin_lock(&stats_lock);
	counters.clients_registered++;
	spin_unlock(&stats_lock);
	mutex_unlock(&clients_lock);
	return c;
}

static void unregister_client(void *reg_handle)
{
	struct fake_client *c = reg_handle, *it;
	bool found = false;

	mutex_lock(&clients_lock);
	list_for_each_entry(it, &clients, node) {
		if (it == c) {
			found = true;
			break;
		}
	}
	if (found) {
		list_del(&c->node);
		debugfs_remove_recursive(c->dir);
		c->dir = NULL;
		spin_lock(&stats_lock);
		counters.clients_registered--;
		spin_unlock(&stats_lock);
	}
	mutex_unlock(&clients_lock);
	if (!found) {
		pr_err("unregister of an unknown handle %p ignored\n", reg_handle);
		return;
	}
	if (atomic_read(&c->refs))
		violation(FAKE_CORE_V_UNREGISTER_BUSY, c,
			  "unregistered with %d live regions: blocking until released",
			  atomic_read(&c->refs));
	wait_event(unreg_wq, atomic_read(&c->refs) == 0);
	kfree(c);
}

/*
 * The exports. A later release (FAKE_CORE_RELEASE=2) is built from other sources, as
 * each MOFED release's ib_core is: the same functions and layouts, the parameters
 * named otherwise. On a kernel whose symbol versions come from DWARF (gendwarfksyms,
 * as Ubuntu builds its kernels) a parameter's name is part of the symbol's CRC: both
 * exports change theirs, and a client built against the first release's
 * Module.symvers is refused by the second ("disagrees about version of symbol"), as
 * after a MOFED/DOCA upgrade without a rebuild (docs/abi.md 6).
 */
#if FAKE_CORE_RELEASE >= 2
void *ib_register_peer_memory_client(const struct peer_memory_client *peer_client,
				     invalidate_peer_memory *invalidate_callback)
{
	return register_client(peer_client, invalidate_callback);
}

void ib_unregister_peer_memory_client(void *client_handle)
{
	unregister_client(client_handle);
}
#else
void *ib_register_peer_memory_client(const struct peer_memory_client *client,
				     invalidate_peer_memory *invalidate_out)
{
	return register_client(client, invalidate_out);
}

void ib_unregister_peer_memory_client(void *reg_handle)
{
	unregister_client(reg_handle);
}
#endif
EXPORT_SYMBOL(ib_register_peer_memory_client);
EXPORT_SYMBOL(ib_unregister_peer_memory_client);

int fake_core_map_locks_held(void)
{
	struct fake_mr *mr;
	int n = 0;

	spin_lock(&mrs_lock);
	list_for_each_entry(mr, &all_mrs, node)
		n += READ_ONCE(mr->lock_owner) != NULL;
	spin_unlock(&mrs_lock);
	return n;
}
EXPORT_SYMBOL_GPL(fake_core_map_locks_held);

/* Hooks for the KUnit suites. */
bool fake_core_test_map_lock_held(void)
{
	struct fake_mr *mr;
	bool held = false;

	spin_lock(&mrs_lock);
	list_for_each_entry(mr, &all_mrs, node) {
		if (READ_ONCE(mr->lock_owner) == current) {
			held = true;
			break;
		}
	}
	spin_unlock(&mrs_lock);
	return held;
}

bool fake_core_test_client_unmaps(void *reg_handle)
{
	return ((struct fake_client *)reg_handle)->unmaps;
}

struct dentry *fake_core_test_peers_dir(void)
{
	return IS_ERR_OR_NULL(dbg_peers) ? NULL : dbg_peers;
}

/*
 * debugfs control file for shell scenarios:
 *   echo "reg ADDR LEN [ro] [noinv]" > control; cat control   -> "id N" or "error E"
 *   echo "dereg N" > control
 * The registration runs in the writing process's context.
 */
static DEFINE_MUTEX(ctl_lock);
static DEFINE_XARRAY_ALLOC(ctl_mrs);
static char ctl_result[64] = "none\n";

static ssize_t control_write(struct file *f, const char __user *ubuf, size_t n, loff_t *pos)
{
	struct fake_reg_opts opts = { .can_invalidate = true, .writable = true };
	char buf[96], *p;
	unsigned long long addr, len;
	struct fake_mr *mr;
	unsigned int id;
	int ret;

	if (n >= sizeof(buf))
		return -EINVAL;
	if (copy_from_user(buf, ubuf, n))
		return -EFAULT;
	buf[n] = 0;

	mutex_lock(&ctl_lock);
	if (sscanf(buf, "reg %lli %lli", &addr, &len) == 2) {
		p = strchr(buf, '\n');
		if (p)
			*p = 0;
		if (strstr(buf, " ro"))
			opts.writable = false;
		if (strstr(buf, " noinv"))
			opts.can_invalidate = false;
		mr = fake_core_reg_mr(addr, len, &opts);
		if (IS_ERR(mr)) {
			ret = PTR_ERR(mr);
		} else {
			ret = xa_alloc(&ctl_mrs, &id, mr, xa_limit_31b, GFP_KERNEL);
			if (ret)
				fake_core_dereg_mr(mr);
		}
		if (ret)
			snprintf(ctl_result, sizeof(ctl_result), "error %d\n", ret);
		else
			snprintf(ctl_result, sizeof(ctl_result), "id %u\n", id);
	} else if (sscanf(buf, "dereg %u", &id) == 1) {
		mr = xa_erase(&ctl_mrs, id);
		if (mr) {
			fake_core_dereg_mr(mr);
			ret = 0;
			snprintf(ctl_result, sizeof(ctl_result), "ok\n");
		} else {
			ret = -ENOENT;
			snprintf(ctl_result, sizeof(ctl_result), "error %d\n", ret);
		}
	} else {
		ret = -EINVAL;
	}
	mutex_unlock(&ctl_lock);
	return ret ? ret : n;
}

static ssize_t control_read(struct file *f, char __user *ubuf, size_t n, loff_t *pos)
{
	char buf[sizeof(ctl_result)];

	mutex_lock(&ctl_lock);
	strscpy(buf, ctl_result, sizeof(buf));
	mutex_unlock(&ctl_lock);
	return simple_read_from_buffer(ubuf, n, pos, buf, strlen(buf));
}

static const struct file_operations control_fops = {
	.owner = THIS_MODULE,
	.write = control_write,
	.read = control_read,
	.llseek = default_llseek,
};

static int counters_show(struct seq_file *m, void *unused)
{
	struct fake_core_counters k;
	int i;

	fake_core_get_counters(&k);
	seq_printf(m, "clients_registered %llu\nmrs_live %llu\ninvalidations_stale %llu\n"
		   "unbalanced_unlocks %llu\nstop_deadlocks %llu\nviolations_total %llu\n",
		   k.clients_registered, k.mrs_live, k.invalidations_stale,
		   k.unbalanced_unlocks, k.stop_deadlocks, k.violations_total);
	for (i = 0; i < FAKE_CORE_V_COUNT; i++)
		seq_printf(m, "%s %llu\n", violation_names[i], k.violations[i]);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(counters);

static int __init fake_core_init(void)
{
	int ret;

	for (ret = 0; ret < FAKE_CORE_PAUSE_COUNT; ret++)
		fake_pause_init(&pauses[ret]);
#ifdef FAKE_CORE_SPLIT
	/* The RDMA device core's devices (ib_core), as the real ib_uverbs finds them. */
	hca_pdev = fake_rdma_core_hca(0);
#else
	hca_pdev = fake_pci_hca(0);
#endif
	if (hca_pdev) {
		ret = dma_set_mask_and_coherent(&hca_pdev->dev, DMA_BIT_MASK(64));
		/* HCA drivers raise the segment limit too (2 GiB is common). */
		dma_set_max_seg_size(&hca_pdev->dev, SZ_2G);
		if (ret)
			pr_err("cannot raise the HCA stand-in's DMA mask: %d\n", ret);
#ifdef FAKE_CORE_SPLIT
		dma32_pdev = fake_rdma_core_hca(1);
#else
		dma32_pdev = fake_pci_hca(1);
#endif
	}
	if (!hca_pdev || !dma32_pdev)
		pr_err("missing HCA stand-ins (HCA %s, 32-bit %s)\n",
		       hca_pdev ? "found" : "missing", dma32_pdev ? "found" : "missing");

	/* The test bed's control directory: ib_core/ whichever module exports the API. */
	dbg_root = debugfs_create_dir("ib_core", NULL);
	if (!IS_ERR(dbg_root)) {
		dbg_peers = debugfs_create_dir("memory_peers", dbg_root);
		debugfs_create_file("control", 0600, dbg_root, NULL, &control_fops);
		debugfs_create_file("counters", 0444, dbg_root, NULL, &counters_fops);
	}
	if (inbox)
		pr_info("behaving as the in-box core (peer_mem.c of NV-Kernels, openEuler)\n");
	pr_info("loaded (HCA %s, 32-bit device %s)\n",
		hca_pdev ? pci_name(hca_pdev) : "none",
		dma32_pdev ? pci_name(dma32_pdev) : "none");
	return 0;
}

static void __exit fake_core_exit(void)
{
	struct fake_client *c;
	struct fake_mr *mr;
	unsigned long id;
	int i;

	for (i = 0; i < FAKE_CORE_PAUSE_COUNT; i++)
		fake_pause_release(&pauses[i]);
	xa_for_each(&ctl_mrs, id, mr) {
		pr_err("LEAK: control region %lu still registered; deregistering\n", id);
		xa_erase(&ctl_mrs, id);
		fake_core_dereg_mr(mr);
	}
	mutex_lock(&clients_lock);
	list_for_each_entry(c, &clients, node)
		pr_err("LEAK: client %s still registered at exit\n", c->name);
	mutex_unlock(&clients_lock);
	spin_lock(&mrs_lock);
	list_for_each_entry(mr, &all_mrs, node)
		pr_err("LEAK: region %#llx+%llu of client %s still live at exit\n",
		       mr->addr, mr->len, mr->client->name);
	spin_unlock(&mrs_lock);

	debugfs_remove_recursive(dbg_root);
	xa_destroy(&mr_ids);
	xa_destroy(&ctl_mrs);
	pci_dev_put(dma32_pdev);
	pci_dev_put(hca_pdev);
}

module_init(fake_core_init);
module_exit(fake_core_exit);
MODULE_LICENSE("Dual MIT/GPL");
#ifdef FAKE_CORE_BESIDE_STACK
MODULE_DESCRIPTION("Peer-memory core beside the kernel's RDMA stack, with the in-box umem interface, for the peermem test bed");
#else
MODULE_DESCRIPTION("Fake MOFED peer-memory core for the peermem test bed");
#endif

/*
 * Packaged as a node has MOFED's ib_core (tests/node/double-debs: a dkms package
 * installing into updates/dkms, with its Module.symvers under /usr/src/ofa_kernel):
 * the package's version, as MOFED's modules carry theirs, and for a later release
 * (FAKE_CORE_RELEASE=2) one export more, as a MOFED upgrade changes ib_core's exports
 * without a kernel change.
 */
#ifdef FAKE_CORE_VERSION
MODULE_VERSION(FAKE_CORE_VERSION);
#endif
#if FAKE_CORE_RELEASE >= 2
int ib_peer_memory_core_release(void)
{
	return FAKE_CORE_RELEASE;
}
EXPORT_SYMBOL(ib_peer_memory_core_release);
#endif
