// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * KUnit suites of the fake peer-memory core: small test clients (good and
 * deliberately wrong) prove each rule of docs/abi.md 2.4 the fake enforces.
 */
#include <kunit/test.h>
#include <linux/scatterlist.h>
#include <linux/dma-mapping.h>
#include <linux/kthread.h>
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/debugfs.h>
#include <linux/slab.h>
#include <linux/align.h>

#include "internal.h"

#define T_SLOTS 4
#define T_PHYS_BASE 0x4000000000ULL	/* synthetic "BAR" addresses, never touched */
#define T_PHYS_BASE32 0x80000000ULL	/* the same below 4 GiB, for 32-bit devices */
#define SZ64K 0x10000UL

enum tmode { M_GOOD, M_MISALIGNED, M_SHORT, M_NOT_MAPPED, M_TOUCH_FAIL };

struct tclient;

struct tctx {
	struct tclient *tc;
	u64 addr, len;
	bool mapped;
	struct sg_table table;	/* what dma_map built */
	int nents;
	dma_addr_t dma0;
	unsigned int dlen0, len0, off0, dlenN, lenN;
};

struct tclient {
	struct peer_memory_client_ex ex;
	void *handle;
	invalidate_peer_memory invalidate;
	/* behaviour */
	int acquire_ret;
	bool no_ctx;
	int get_pages_ret, dma_map_ret, unmap_ret;
	enum tmode mode;
	unsigned long page_size, chunk, reported_page_size;
	struct completion *gp_entered, *gp_proceed;
	/* records */
	char log[64];
	int n_acq;
	u64 gp_addr, gp_len, gp_cc;
	int gp_write, gp_force, map_dmasync;
	struct sg_table *gp_sg;
	struct device *map_dev;
	bool lock_in_gp, lock_in_map, lock_in_unmap, lock_in_put;
	int restore_errors;
	struct tctx *last;
};

static struct tclient tslots[T_SLOTS];
static char acquire_order[32];
static int null_releases;
static DEFINE_SPINLOCK(tlog_lock);

#define MAX_TMRS 8
static struct fake_mr *tmrs[MAX_TMRS];

static void tlog(struct tclient *tc, char ch)
{
	size_t n;

	spin_lock(&tlog_lock);
	n = strlen(tc->log);
	if (n + 1 < sizeof(tc->log))
		tc->log[n] = ch;
	spin_unlock(&tlog_lock);
}

static int t_acquire(int slot, unsigned long addr, size_t size, void *priv, char *name,
		     void **ctx)
{
	struct tclient *tc = &tslots[slot];
	size_t n = strlen(acquire_order);
	struct tctx *t;

	tc->n_acq++;
	tlog(tc, 'A');
	if (n + 1 < sizeof(acquire_order))
		acquire_order[n] = '0' + slot;
	if (priv || name || tc->acquire_ret <= 0)
		return priv || name ? -EINVAL : tc->acquire_ret;
	if (tc->no_ctx)
		return tc->acquire_ret;
	t = kzalloc(sizeof(*t), GFP_KERNEL);
	if (!t)
		return -ENOMEM;
	t->tc = tc;
	t->addr = addr;
	t->len = size;
	tc->last = t;
	*ctx = t;
	return tc->acquire_ret;
}

#define T_ACQ(n)								\
	static int t_acquire##n(unsigned long a, size_t s, void *p, char *nm, void **c) \
	{ return t_acquire(n, a, s, p, nm, c); }
T_ACQ(0)
T_ACQ(1)
T_ACQ(2)
T_ACQ(3)
static int (*const t_acquires[T_SLOTS])(unsigned long, size_t, void *, char *, void **) = {
	t_acquire0, t_acquire1, t_acquire2, t_acquire3,
};

static int t_get_pages(unsigned long addr, size_t size, int write, int force,
		       struct sg_table *sg, void *ctx, u64 cc)
{
	struct tctx *t = ctx;
	struct tclient *tc = t->tc;

	tlog(tc, 'G');
	tc->gp_addr = addr;
	tc->gp_len = size;
	tc->gp_write = write;
	tc->gp_force = force;
	tc->gp_sg = sg;
	tc->gp_cc = cc;
	tc->lock_in_gp = fake_core_test_map_lock_held();
	if (tc->gp_entered) {
		complete(tc->gp_entered);
		wait_for_completion(tc->gp_proceed);
	}
	return tc->get_pages_ret;
}

static void t_unmap_table(struct sg_table *table, struct device *dev, int n)
{
	struct scatterlist *sg;
	int i;

	for_each_sg(table->sgl, sg, n, i)
		if (sg_dma_len(sg))
			dma_unmap_resource(dev, ALIGN_DOWN(sg_dma_address(sg), PAGE_SIZE),
					   sg_dma_len(sg), DMA_BIDIRECTIONAL, 0);
}

static int t_dma_map(struct sg_table *sg_head, void *ctx, struct device *dev, int dmasync,
		     int *nmap)
{
	struct tctx *t = ctx;
	struct tclient *tc = t->tc;
	unsigned long ps = tc->page_size, chunk = tc->chunk ?: tc->page_size;
	u64 start = ALIGN_DOWN(t->addr, ps), end = ALIGN(t->addr + t->len, ps);
	u64 base = dma_get_mask(dev) > DMA_BIT_MASK(32) ? T_PHYS_BASE : T_PHYS_BASE32;
	struct sg_table table;
	struct scatterlist *sg;
	int i, n;

	tlog(tc, 'M');
	tc->map_dev = dev;
	tc->map_dmasync = dmasync;
	tc->lock_in_map = fake_core_test_map_lock_held();
	if (tc->dma_map_ret) {
		if (tc->mode == M_TOUCH_FAIL && !sg_alloc_table(sg_head, 1, GFP_KERNEL))
			t->mapped = true;	/* left for put_pages to free */
		t->table = *sg_head;
		return tc->dma_map_ret;
	}
	if (tc->mode == M_SHORT)
		end -= PAGE_SIZE;
	n = DIV_ROUND_UP(end - start, chunk);
	if (sg_alloc_table(&table, n, GFP_KERNEL))
		return -ENOMEM;
	for_each_sg(table.sgl, sg, n, i) {
		u64 va = start + (u64)i * chunk;
		unsigned int l = min_t(u64, chunk, end - va);
		dma_addr_t dma;

		if (tc->mode == M_NOT_MAPPED) {
			/* An entry that was never DMA-mapped: nothing to unmap later. */
			sg->length = l;
			sg->offset = 0;
			sg_dma_address(sg) = base + va;
			sg_dma_len(sg) = 0;
			continue;
		}
		dma = dma_map_resource(dev, base + va, l, DMA_BIDIRECTIONAL, 0);
		if (dma_mapping_error(dev, dma)) {
			t_unmap_table(&table, dev, i);
			sg_free_table(&table);
			return -EIO;
		}
		if (tc->mode == M_MISALIGNED && i == 0)
			dma += 0x100;
		sg->length = l;
		sg->offset = 0;
		sg_dma_address(sg) = dma;
		sg_dma_len(sg) = l;
	}
	t->nents = n;
	t->dma0 = sg_dma_address(table.sgl);
	t->dlen0 = sg_dma_len(table.sgl);
	t->len0 = table.sgl->length;
	t->off0 = table.sgl->offset;
	t->dlenN = sg_dma_len(sg_last(table.sgl, n));
	t->lenN = sg_last(table.sgl, n)->length;
	t->table = table;
	t->mapped = true;
	*sg_head = table;
	*nmap = n;
	return 0;
}

static int t_dma_unmap(struct sg_table *sg_head, void *ctx, struct device *dev)
{
	struct tctx *t = ctx;
	struct tclient *tc = t->tc;
	struct scatterlist *last;

	tlog(tc, 'U');
	tc->lock_in_unmap = fake_core_test_map_lock_held();
	if (!t->mapped || !t->nents)
		return tc->unmap_ret;
	last = sg_last(sg_head->sgl, t->nents);
	if (sg_head->sgl != t->table.sgl || sg_dma_address(sg_head->sgl) != t->dma0 ||
	    sg_dma_len(sg_head->sgl) != t->dlen0 || sg_head->sgl->length != t->len0 ||
	    sg_head->sgl->offset != t->off0 || sg_dma_len(last) != t->dlenN ||
	    last->length != t->lenN)
		tc->restore_errors++;
	t_unmap_table(&t->table, dev, t->nents);
	return tc->unmap_ret;
}

static void t_put_pages(struct sg_table *sg_head, void *ctx)
{
	struct tctx *t = ctx;
	struct tclient *tc = t->tc;

	tlog(tc, 'P');
	tc->lock_in_put = fake_core_test_map_lock_held();
	if (t->mapped)
		sg_free_table(&t->table);
	t->mapped = false;
}

static unsigned long t_get_page_size(void *ctx)
{
	struct tctx *t = ctx;
	struct tclient *tc = t->tc;

	tlog(tc, 'S');
	return tc->reported_page_size ?: tc->page_size;
}

static void t_release(void *ctx)
{
	struct tctx *t = ctx;

	if (!t) {
		null_releases++;
		return;
	}
	tlog(t->tc, 'R');
	if (t->tc->last == t)
		t->tc->last = NULL;
	kfree(t);
}

/* An INVALIDATE_UNMAPS client's own unmap, after the core's invalidate returned. */
static void t_self_unmap(struct tctx *t, struct device *dev)
{
	if (t->mapped) {
		t_unmap_table(&t->table, dev, t->nents);
		sg_free_table(&t->table);
		t->mapped = false;
	}
}

enum tkind { K_PLAIN, K_INVAL, K_UNMAPS };

static struct tclient *t_client(int slot, const char *name, enum tkind kind)
{
	struct tclient *tc = &tslots[slot];
	struct peer_memory_client *cl = &tc->ex.client;

	strscpy(cl->name, name, sizeof(cl->name));
	if (kind == K_UNMAPS) {
		memcpy(cl->version, "1.2.3-extended-x", IB_PEER_MEMORY_VER_MAX);
		tc->ex.ex_size = sizeof(tc->ex);
		tc->ex.flags = PEER_MEM_INVALIDATE_UNMAPS;
	} else {
		strscpy(cl->version, "1.2.3", sizeof(cl->version));
	}
	cl->acquire = t_acquires[slot];
	cl->get_pages = t_get_pages;
	cl->dma_map = t_dma_map;
	cl->dma_unmap = t_dma_unmap;
	cl->put_pages = t_put_pages;
	cl->get_page_size = t_get_page_size;
	cl->release = t_release;
	tc->acquire_ret = 1;
	tc->page_size = PAGE_SIZE;
	return tc;
}

static struct tclient *t_register(struct kunit *test, int slot, const char *name,
				  enum tkind kind)
{
	struct tclient *tc = t_client(slot, name, kind);

	tc->handle = ib_register_peer_memory_client(&tc->ex.client,
						    kind == K_PLAIN ? NULL : &tc->invalidate);
	KUNIT_ASSERT_NOT_NULL(test, tc->handle);
	return tc;
}

static struct fake_mr *t_reg(u64 addr, u64 len, const struct fake_reg_opts *opts)
{
	struct fake_mr *mr = fake_core_reg_mr(addr, len, opts);
	int i;

	if (!IS_ERR(mr))
		for (i = 0; i < MAX_TMRS; i++)
			if (!tmrs[i]) {
				tmrs[i] = mr;
				break;
			}
	return mr;
}

static void t_dereg(struct fake_mr *mr)
{
	int i;

	for (i = 0; i < MAX_TMRS; i++)
		if (tmrs[i] == mr)
			tmrs[i] = NULL;
	fake_core_dereg_mr(mr);
}

static u64 t_violations(enum fake_core_violation v)
{
	struct fake_core_counters k;

	fake_core_get_counters(&k);
	return (int)v < 0 ? k.violations_total : k.violations[v];
}

#define V_TOTAL ((enum fake_core_violation)-1)

static int t_init(struct kunit *test)
{
	memset(tslots, 0, sizeof(tslots));
	memset(acquire_order, 0, sizeof(acquire_order));
	memset(tmrs, 0, sizeof(tmrs));
	null_releases = 0;
	fake_core_reset_counters();
	if (!fake_core_hca_device() || !fake_core_dma32_device())
		kunit_skip(test, "no pci-testdev functions");
	return 0;
}

static void t_exit(struct kunit *test)
{
	struct fake_core_counters k;
	int i;

	for (i = 0; i < MAX_TMRS; i++)
		if (tmrs[i])
			t_dereg(tmrs[i]);
	for (i = 0; i < T_SLOTS; i++)
		if (tslots[i].handle)
			ib_unregister_peer_memory_client(tslots[i].handle);
	fake_core_get_counters(&k);
	if (k.mrs_live || k.clients_registered)
		kunit_err(test, "left %llu regions, %llu clients", k.mrs_live,
			  k.clients_registered);
	fake_core_reset_counters();
}

static void t_unregister(struct tclient *tc)
{
	ib_unregister_peer_memory_client(tc->handle);
	tc->handle = NULL;
}

/* ---- registration ---- */

static void register_requires_mandatory_callbacks(struct kunit *test)
{
	static const size_t offs[] = {
		offsetof(struct peer_memory_client, acquire),
		offsetof(struct peer_memory_client, get_pages),
		offsetof(struct peer_memory_client, put_pages),
		offsetof(struct peer_memory_client, dma_map),
		offsetof(struct peer_memory_client, dma_unmap),
	};
	struct tclient *tc = t_client(0, "t_missing", K_PLAIN);
	struct peer_memory_client copy;
	void *h;
	int i;

	for (i = 0; i < ARRAY_SIZE(offs); i++) {
		copy = tc->ex.client;
		*(void **)((char *)&copy + offs[i]) = NULL;
		h = ib_register_peer_memory_client(&copy, NULL);
		KUNIT_EXPECT_NULL_MSG(test, h, "callback at offset %zu missing", offs[i]);
		if (h)
			ib_unregister_peer_memory_client(h);
	}
	/*
	 * get_page_size and release are optional to registration, but the core calls
	 * get_page_size after every dma_map (a NULL one faults there): the registration
	 * fails with the violation counted, after a whole teardown.
	 */
	copy = tc->ex.client;
	copy.get_page_size = NULL;
	h = ib_register_peer_memory_client(&copy, NULL);
	KUNIT_ASSERT_NOT_NULL(test, h);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(t_reg(0x380000, PAGE_SIZE, NULL)), -EINVAL);
	KUNIT_EXPECT_STREQ(test, tc->log, "AGMUPR");
	KUNIT_EXPECT_EQ(test, t_violations(FAKE_CORE_V_BAD_PAGE_SIZE), 1);
	ib_unregister_peer_memory_client(h);
	fake_core_reset_counters();
	memset(tc->log, 0, sizeof(tc->log));
	/* A NULL release is skipped: a region's whole life calls everything else. */
	copy = tc->ex.client;
	copy.release = NULL;
	h = ib_register_peer_memory_client(&copy, NULL);
	KUNIT_ASSERT_NOT_NULL(test, h);
	t_dereg(t_reg(0x380000, PAGE_SIZE, NULL));
	KUNIT_EXPECT_STREQ(test, tc->log, "AGMSUP");
	kfree(tc->last);	/* what t_release would have freed */
	tc->last = NULL;
	ib_unregister_peer_memory_client(h);
	KUNIT_EXPECT_EQ(test, t_violations(V_TOTAL), 0);
}

static void register_extended_detection(struct kunit *test)
{
	struct tclient *tc = t_client(0, "t_ext", K_UNMAPS);
	void *h;

	h = ib_register_peer_memory_client(&tc->ex.client, &tc->invalidate);
	KUNIT_ASSERT_NOT_NULL(test, h);
	KUNIT_EXPECT_PTR_NE(test, (void *)tc->invalidate, NULL);
	KUNIT_EXPECT_TRUE(test, fake_core_test_client_unmaps(h));
	ib_unregister_peer_memory_client(h);

	tc->ex.ex_size = PEER_MEM_EX_MIN_SIZE - 1;	/* too small: not extended */
	h = ib_register_peer_memory_client(&tc->ex.client, &tc->invalidate);
	KUNIT_ASSERT_NOT_NULL(test, h);
	KUNIT_EXPECT_FALSE(test, fake_core_test_client_unmaps(h));
	ib_unregister_peer_memory_client(h);

	tc->ex.ex_size = sizeof(tc->ex);
	tc->ex.client.version[IB_PEER_MEMORY_VER_MAX - 1] = 0;	/* not extended */
	h = ib_register_peer_memory_client(&tc->ex.client, &tc->invalidate);
	KUNIT_ASSERT_NOT_NULL(test, h);
	KUNIT_EXPECT_FALSE(test, fake_core_test_client_unmaps(h));
	ib_unregister_peer_memory_client(h);
}

static void register_stats_and_debugfs(struct kunit *test)
{
	struct fake_core_client_stats st;
	struct fake_core_counters k;
	struct tclient *tc = t_register(test, 0, "t_stats", K_PLAIN);
	struct dentry *peers = fake_core_test_peers_dir(), *d, *f;
	struct fake_mr *mr;

	fake_core_get_counters(&k);
	KUNIT_EXPECT_EQ(test, k.clients_registered, 1);
	KUNIT_ASSERT_NOT_NULL(test, peers);
	d = debugfs_lookup("t_stats", peers);
	KUNIT_ASSERT_NOT_NULL(test, d);
	f = debugfs_lookup("version", d);
	KUNIT_EXPECT_NOT_NULL(test, f);
	dput(f);
	f = debugfs_lookup("num_free_callbacks", d);
	KUNIT_EXPECT_NOT_NULL(test, f);
	dput(f);
	dput(d);

	mr = t_reg(0x100000 + 0x10, 3 * PAGE_SIZE, NULL);
	KUNIT_ASSERT_FALSE(test, IS_ERR(mr));
	KUNIT_EXPECT_STREQ(test, fake_core_mr_client(mr), "t_stats");
	KUNIT_ASSERT_EQ(test, fake_core_client_stats("t_stats", &st), 0);
	/* As the real core counts: "pages" are the table's entries. */
	KUNIT_EXPECT_EQ(test, st.num_alloc_mrs, 1);
	KUNIT_EXPECT_EQ(test, st.num_reg_pages, fake_core_mr_nents(mr));
	KUNIT_EXPECT_EQ(test, st.num_reg_bytes, 3 * PAGE_SIZE);
	KUNIT_EXPECT_EQ(test, st.acquires, 1);
	KUNIT_EXPECT_EQ(test, st.acquire_hits, 1);
	fake_core_get_counters(&k);
	KUNIT_EXPECT_EQ(test, k.mrs_live, 1);
	t_dereg(mr);
	KUNIT_ASSERT_EQ(test, fake_core_client_stats("t_stats", &st), 0);
	/* The real core reads the entry count after zeroing the table: it adds 0. */
	KUNIT_EXPECT_EQ(test, st.num_dealloc_mrs, 1);
	KUNIT_EXPECT_EQ(test, st.num_dereg_pages, 0);
	KUNIT_EXPECT_EQ(test, st.num_dereg_bytes, 3 * PAGE_SIZE);
	KUNIT_EXPECT_EQ(test, st.get_pages, 1);
	KUNIT_EXPECT_EQ(test, st.dma_maps, 1);
	KUNIT_EXPECT_EQ(test, st.dma_unmaps, 1);
	KUNIT_EXPECT_EQ(test, st.put_pages, 1);
	KUNIT_EXPECT_EQ(test, st.releases, 1);
	fake_core_get_counters(&k);
	KUNIT_EXPECT_EQ(test, k.mrs_live, 0);

	t_unregister(tc);
	KUNIT_EXPECT_EQ(test, fake_core_client_stats("t_stats", &st), -ENOENT);
	d = debugfs_lookup("t_stats", peers);
	KUNIT_EXPECT_NULL(test, d);
	dput(d);
	KUNIT_EXPECT_EQ(test, t_violations(V_TOTAL), 0);
}

struct unreg_arg {
	void *handle;
	struct completion done;
};

static int unreg_thread(void *p)
{
	struct unreg_arg *a = p;

	ib_unregister_peer_memory_client(a->handle);
	complete(&a->done);
	return 0;
}

static void register_unregister_waits_for_regions(struct kunit *test)
{
	struct tclient *tc = t_register(test, 0, "t_busy", K_PLAIN);
	struct unreg_arg a = { .handle = tc->handle };
	struct task_struct *k;
	struct fake_mr *mr;

	mr = t_reg(0x200000, PAGE_SIZE, NULL);
	KUNIT_ASSERT_FALSE(test, IS_ERR(mr));
	init_completion(&a.done);
	tc->handle = NULL;	/* the thread unregisters */
	k = kthread_run(unreg_thread, &a, "t_unreg");
	KUNIT_ASSERT_FALSE(test, IS_ERR(k));
	msleep(100);
	KUNIT_EXPECT_FALSE(test, completion_done(&a.done));
	KUNIT_EXPECT_STREQ(test, tc->log, "AGMS");
	t_dereg(mr);
	KUNIT_EXPECT_TRUE(test, wait_for_completion_timeout(&a.done, 10 * HZ) > 0);
	KUNIT_EXPECT_STREQ(test, tc->log, "AGMSUPR");
	KUNIT_EXPECT_EQ(test, t_violations(FAKE_CORE_V_UNREGISTER_BUSY), 1);
	fake_core_reset_counters();
}

/* ---- the acquire walk ---- */

static void acquire_walk_order_and_next(struct kunit *test)
{
	struct tclient *a = t_register(test, 0, "t_a", K_PLAIN);
	struct tclient *b = t_register(test, 1, "t_b", K_PLAIN);
	struct tclient *c = t_register(test, 2, "t_c", K_PLAIN);
	struct tclient *d = t_register(test, 3, "t_d", K_PLAIN);
	struct fake_mr *mr;

	a->acquire_ret = 0;
	b->acquire_ret = -EIO;	/* negative: next, not reported */
	mr = t_reg(0x300000, PAGE_SIZE, NULL);
	KUNIT_ASSERT_FALSE(test, IS_ERR(mr));
	KUNIT_EXPECT_STREQ(test, acquire_order, "012");
	KUNIT_EXPECT_STREQ(test, fake_core_mr_client(mr), "t_c");
	KUNIT_EXPECT_EQ(test, d->n_acq, 0);
	KUNIT_EXPECT_STREQ(test, a->log, "A");
	KUNIT_EXPECT_STREQ(test, b->log, "A");
	t_dereg(mr);
	KUNIT_EXPECT_STREQ(test, c->log, "AGMSUPR");
	KUNIT_EXPECT_EQ(test, t_violations(V_TOTAL), 0);
}

static void acquire_skips_invalidating_clients(struct kunit *test)
{
	struct fake_reg_opts noinv = { .can_invalidate = false, .writable = true };
	struct tclient *inv = t_register(test, 0, "t_inv", K_INVAL);
	struct tclient *plain = t_register(test, 1, "t_plain", K_PLAIN);
	struct fake_mr *mr;

	mr = t_reg(0x400000, PAGE_SIZE, &noinv);
	KUNIT_ASSERT_FALSE(test, IS_ERR(mr));
	KUNIT_EXPECT_STREQ(test, fake_core_mr_client(mr), "t_plain");
	KUNIT_EXPECT_EQ(test, inv->n_acq, 0);
	t_dereg(mr);

	mr = t_reg(0x400000, PAGE_SIZE, NULL);
	KUNIT_ASSERT_FALSE(test, IS_ERR(mr));
	KUNIT_EXPECT_STREQ(test, fake_core_mr_client(mr), "t_inv");
	KUNIT_EXPECT_EQ(test, plain->n_acq, 1);
	t_dereg(mr);
	KUNIT_EXPECT_EQ(test, t_violations(V_TOTAL), 0);
}

static void acquire_nobody_efault(struct kunit *test)
{
	struct tclient *a = t_register(test, 0, "t_no1", K_PLAIN);
	struct tclient *b = t_register(test, 1, "t_no2", K_INVAL);
	struct fake_mr *mr;

	a->acquire_ret = 0;
	b->acquire_ret = -ENOMEM;
	mr = t_reg(0x500000, PAGE_SIZE, NULL);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(mr), -EFAULT);
	KUNIT_EXPECT_STREQ(test, acquire_order, "01");
	/* With no client at all, too. */
	t_unregister(a);
	t_unregister(b);
	mr = t_reg(0x500000, PAGE_SIZE, NULL);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(mr), -EFAULT);
}

static void acquire_without_context(struct kunit *test)
{
	struct tclient *tc = t_register(test, 0, "t_noctx", K_PLAIN);
	struct fake_mr *mr;

	tc->no_ctx = true;
	mr = t_reg(0x600000, PAGE_SIZE, NULL);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(mr), -EINVAL);
	KUNIT_EXPECT_EQ(test, t_violations(FAKE_CORE_V_ACQUIRE_NO_CONTEXT), 1);
	KUNIT_EXPECT_EQ(test, null_releases, 1);	/* release exactly once */
	KUNIT_EXPECT_STREQ(test, tc->log, "A");
	fake_core_reset_counters();
}

/* ---- the registration sequence, release exactly once ---- */

static void lifecycle_success(struct kunit *test)
{
	struct tclient *tc = t_register(test, 0, "t_ok", K_PLAIN);
	u64 addr = 0x700000 + 123, len = 2 * PAGE_SIZE;
	struct fake_mr *mr;

	mr = t_reg(addr, len, NULL);
	KUNIT_ASSERT_FALSE(test, IS_ERR(mr));
	KUNIT_EXPECT_STREQ(test, tc->log, "AGMS");
	KUNIT_EXPECT_EQ(test, tc->gp_addr, addr);	/* raw, unaligned */
	KUNIT_EXPECT_EQ(test, tc->gp_len, len);
	KUNIT_EXPECT_EQ(test, tc->gp_write, 1);
	KUNIT_EXPECT_EQ(test, tc->gp_force, 0);
	KUNIT_EXPECT_NULL(test, tc->gp_sg);
	KUNIT_EXPECT_EQ(test, tc->gp_cc, (u64)U32_MAX);
	KUNIT_EXPECT_EQ(test, fake_core_mr_core_context(mr), (u64)U32_MAX);
	KUNIT_EXPECT_PTR_EQ(test, tc->map_dev, fake_core_hca_device());
	KUNIT_EXPECT_EQ(test, tc->map_dmasync, 0);
	KUNIT_EXPECT_TRUE(test, tc->lock_in_gp);
	KUNIT_EXPECT_TRUE(test, tc->lock_in_map);
	KUNIT_EXPECT_FALSE(test, fake_core_test_map_lock_held());
	KUNIT_EXPECT_EQ(test, fake_core_mr_nents(mr), 3);
	KUNIT_EXPECT_EQ(test, fake_core_mr_dma_addr(mr, 0), T_PHYS_BASE + addr);
	KUNIT_EXPECT_EQ(test, fake_core_mr_dma_addr(mr, len - 1), T_PHYS_BASE + addr + len - 1);
	KUNIT_EXPECT_EQ(test, fake_core_mr_dma_addr(mr, len), 0);
	t_dereg(mr);
	KUNIT_EXPECT_STREQ(test, tc->log, "AGMSUPR");
	KUNIT_EXPECT_EQ(test, t_violations(V_TOTAL), 0);
}

/*
 * Registers a page at @addr with @opts and deregisters it: the client's whole
 * sequence, dma_unmap and put_pages under the mapping lock exactly when @locked.
 */
static void t_reg_dereg_locked(struct kunit *test, struct tclient *tc, u64 addr,
			       const struct fake_reg_opts *opts, bool locked)
{
	struct fake_mr *mr;

	memset(tc->log, 0, sizeof(tc->log));
	tc->lock_in_unmap = !locked;
	tc->lock_in_put = !locked;
	mr = t_reg(addr, PAGE_SIZE, opts);
	KUNIT_ASSERT_FALSE(test, IS_ERR(mr));
	t_dereg(mr);
	KUNIT_EXPECT_STREQ(test, tc->log, "AGMSUPR");
	KUNIT_EXPECT_EQ(test, tc->lock_in_unmap, locked);
	KUNIT_EXPECT_EQ(test, tc->lock_in_put, locked);
}

/*
 * Where deregistration unmaps (docs/abi.md 2.5): an MR's under the mapping lock for
 * a client without INVALIDATE_UNMAPS, invalidating or not (the HCA driver stops
 * invalidation first); a CQ/QP buffer's, and an INVALIDATE_UNMAPS client's MR, with
 * no lock held. The flag counts for a non-invalidating extended client too. The
 * in-box core (docs/abi.md 8) stops a non-invalidating client's MR with no lock
 * held, then unlocks the mutex it does not hold (counted in unbalanced_unlocks).
 */
static void lifecycle_dereg_locks_by_region_and_client(struct kunit *test)
{
	struct fake_reg_opts buffer = { .can_invalidate = false, .writable = true };
	struct tclient *plain = t_register(test, 0, "t_dplain", K_PLAIN);
	struct tclient *ext = t_client(1, "t_dext", K_UNMAPS);
	bool inbox = fake_core_test_inbox();
	struct fake_core_counters k0, k;

	fake_core_get_counters(&k0);
	t_reg_dereg_locked(test, plain, 0x700000, NULL, !inbox);	/* an MR: stopped first */
	fake_core_get_counters(&k);
	KUNIT_EXPECT_EQ(test, k.unbalanced_unlocks - k0.unbalanced_unlocks, inbox ? 1 : 0);
	t_reg_dereg_locked(test, plain, 0x700000, &buffer, false);	/* a CQ/QP buffer */
	fake_core_get_counters(&k0);
	KUNIT_EXPECT_EQ(test, k0.unbalanced_unlocks, k.unbalanced_unlocks);
	t_unregister(plain);

	/* Extended with INVALIDATE_UNMAPS, registered without invalidation. */
	ext->handle = ib_register_peer_memory_client(&ext->ex.client, NULL);
	KUNIT_ASSERT_NOT_NULL(test, ext->handle);
	KUNIT_EXPECT_TRUE(test, fake_core_test_client_unmaps(ext->handle));
	t_reg_dereg_locked(test, ext, 0x700000, NULL, false);
	KUNIT_EXPECT_EQ(test, t_violations(V_TOTAL), 0);
}

/*
 * The HCA cannot create the key once @tc's region is mapped: the registration fails
 * with the HCA's error after dma_unmap, put_pages and release, the first two under
 * the mapping lock exactly when @locked.
 */
static void t_hca_failure(struct kunit *test, struct tclient *tc, bool locked)
{
	struct fake_reg_opts o = { .can_invalidate = true, .writable = true, .hca_error = -ENOMEM };
	u64 hits = fake_core_pause_hits(FAKE_CORE_PAUSE_HCA_FAILED);

	memset(tc->log, 0, sizeof(tc->log));
	tc->lock_in_unmap = !locked;
	tc->lock_in_put = !locked;
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(t_reg(0x780000, PAGE_SIZE, &o)), -ENOMEM);
	KUNIT_EXPECT_STREQ(test, tc->log, "AGMSUPR");
	KUNIT_EXPECT_EQ(test, tc->lock_in_unmap, locked);
	KUNIT_EXPECT_EQ(test, tc->lock_in_put, locked);
	KUNIT_EXPECT_EQ(test, fake_core_pause_hits(FAKE_CORE_PAUSE_HCA_FAILED), hits + 1);
	t_unregister(tc);
}

/*
 * As mlx5 when reg_create fails after mapping (docs/abi.md 2.5), per client kind.
 * The in-box core (docs/abi.md 8) stops a non-invalidating client's MR with no lock
 * held (one unbalanced unlock), and locks the mutex an invalidating client's region
 * still holds (one deadlock of the real core each, counted; the double goes on).
 */
static void lifecycle_hca_failure_after_mapping(struct kunit *test)
{
	bool inbox = fake_core_test_inbox();
	struct fake_core_counters k0, k;

	fake_core_get_counters(&k0);
	t_hca_failure(test, t_register(test, 0, "t_hplain", K_PLAIN), !inbox);
	t_hca_failure(test, t_register(test, 1, "t_hinval", K_INVAL), true);
	t_hca_failure(test, t_register(test, 2, "t_hunmaps", K_UNMAPS), false);
	fake_core_get_counters(&k);
	KUNIT_EXPECT_EQ(test, k.mrs_live, 0);
	KUNIT_EXPECT_EQ(test, k.unbalanced_unlocks - k0.unbalanced_unlocks, inbox ? 1 : 0);
	KUNIT_EXPECT_EQ(test, k.stop_deadlocks - k0.stop_deadlocks, inbox ? 2 : 0);
	KUNIT_EXPECT_EQ(test, t_violations(V_TOTAL), 0);
}

static void lifecycle_get_pages_failure(struct kunit *test)
{
	struct tclient *tc = t_register(test, 0, "t_gpfail", K_PLAIN);
	struct fake_mr *mr;

	tc->get_pages_ret = -ENOSPC;
	mr = t_reg(0x800000, PAGE_SIZE, NULL);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(mr), -ENOSPC);
	KUNIT_EXPECT_STREQ(test, tc->log, "AGR");	/* release only, no put_pages */
	KUNIT_EXPECT_EQ(test, t_violations(V_TOTAL), 0);
}

static void lifecycle_dma_map_failure(struct kunit *test)
{
	struct tclient *tc = t_register(test, 0, "t_mapfail", K_INVAL);
	struct fake_mr *mr;

	tc->dma_map_ret = -ENOMEM;
	mr = t_reg(0x900000, PAGE_SIZE, NULL);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(mr), -ENOMEM);
	KUNIT_EXPECT_STREQ(test, tc->log, "AGMPR");	/* put_pages, then release */
	KUNIT_EXPECT_EQ(test, t_violations(V_TOTAL), 0);
}

static void lifecycle_core_context_and_options(struct kunit *test)
{
	struct fake_reg_opts ro32 = {
		.dma_device = fake_core_dma32_device(), .can_invalidate = true, .writable = false,
	};
	struct tclient *tc = t_register(test, 0, "t_ids", K_INVAL);
	struct fake_mr *m1, *m2;
	u64 c1, c2;

	m1 = t_reg(0xa00000, PAGE_SIZE, NULL);
	KUNIT_ASSERT_FALSE(test, IS_ERR(m1));
	c1 = fake_core_mr_core_context(m1);
	KUNIT_EXPECT_EQ(test, tc->gp_cc, c1);
	KUNIT_EXPECT_EQ(test, tc->gp_force, 0);
	m2 = t_reg(0xb00000, PAGE_SIZE, &ro32);
	KUNIT_ASSERT_FALSE(test, IS_ERR(m2));
	c2 = fake_core_mr_core_context(m2);
	KUNIT_EXPECT_LT(test, c1, (u64)U32_MAX);
	KUNIT_EXPECT_LT(test, c2, (u64)U32_MAX);
	KUNIT_EXPECT_NE(test, c1, c2);
	KUNIT_EXPECT_EQ(test, tc->gp_force, 1);
	KUNIT_EXPECT_EQ(test, tc->gp_write, 1);
	KUNIT_EXPECT_PTR_EQ(test, tc->map_dev, fake_core_dma32_device());
	KUNIT_EXPECT_EQ(test, fake_core_mr_dma_addr(m2, 0), T_PHYS_BASE32 + 0xb00000);
	KUNIT_EXPECT_EQ(test, dma_get_mask(fake_core_hca_device()), DMA_BIT_MASK(64));
	KUNIT_EXPECT_EQ(test, dma_get_mask(fake_core_dma32_device()), DMA_BIT_MASK(32));
	t_dereg(m1);
	t_dereg(m2);
	/* Cyclic: a freed id is not reused at once. */
	m1 = t_reg(0xa00000, PAGE_SIZE, NULL);
	KUNIT_ASSERT_FALSE(test, IS_ERR(m1));
	KUNIT_EXPECT_NE(test, fake_core_mr_core_context(m1), c1);
	KUNIT_EXPECT_NE(test, fake_core_mr_core_context(m1), c2);
	t_dereg(m1);
	KUNIT_EXPECT_EQ(test, t_violations(V_TOTAL), 0);
}

/* ---- trimming with 64 KiB client pages ---- */

static void trim_check(struct kunit *test, struct tclient *tc, u64 addr, u64 len,
		       unsigned long chunk)
{
	u64 s64 = ALIGN_DOWN(addr, SZ64K), e64 = ALIGN(addr + len, SZ64K);
	u64 s4 = ALIGN_DOWN(addr, PAGE_SIZE), e4 = ALIGN(addr + len, PAGE_SIZE);
	u64 total = 0, dma;
	struct fake_mr *mr;
	int i, n;
	u32 l;

	tc->page_size = SZ64K;
	tc->chunk = chunk;
	mr = t_reg(addr, len, NULL);
	KUNIT_ASSERT_FALSE(test, IS_ERR(mr));
	n = fake_core_mr_nents(mr);
	KUNIT_EXPECT_EQ(test, n, (int)DIV_ROUND_UP(e64 - s64, chunk));
	KUNIT_ASSERT_EQ(test, fake_core_mr_entry(mr, 0, &dma, &l), 0);
	/* The first entry starts at the user's first PAGE_SIZE page. */
	KUNIT_EXPECT_EQ(test, dma, T_PHYS_BASE + s4);
	for (i = 0; i < n; i++) {
		KUNIT_ASSERT_EQ(test, fake_core_mr_entry(mr, i, &dma, &l), 0);
		total += l;
	}
	KUNIT_EXPECT_EQ(test, total, e4 - s4);
	/* The last entry ends at the user's last PAGE_SIZE page. */
	KUNIT_EXPECT_EQ(test, dma + l, T_PHYS_BASE + e4);
	KUNIT_EXPECT_EQ(test, fake_core_mr_entry(mr, n, &dma, &l), -EINVAL);
	KUNIT_EXPECT_EQ(test, fake_core_mr_dma_addr(mr, 0), T_PHYS_BASE + addr);
	KUNIT_EXPECT_EQ(test, fake_core_mr_dma_addr(mr, len - 1), T_PHYS_BASE + addr + len - 1);
	t_dereg(mr);
	KUNIT_EXPECT_EQ(test, tc->restore_errors, 0);	/* restored before unmap */
	KUNIT_EXPECT_STREQ(test, tc->log, "AGMSUPR");
}

static void trim_64k_both_ends(struct kunit *test)
{
	struct tclient *tc = t_register(test, 0, "t_trim", K_PLAIN);

	/* Starts 3 pages + 0x123 into a 64 KiB page, ends 5 pages before the next. */
	trim_check(test, tc, 0x1000000 + 3 * PAGE_SIZE + 0x123,
		   2 * SZ64K - 8 * PAGE_SIZE - 0x123 + 0x10, SZ64K);
	KUNIT_EXPECT_EQ(test, t_violations(V_TOTAL), 0);
}

static void trim_single_and_long_entries(struct kunit *test)
{
	struct tclient *tc = t_register(test, 0, "t_trim1", K_INVAL);

	/* One 64 KiB entry trimmed at both ends. */
	trim_check(test, tc, 0x2000000 + 2 * PAGE_SIZE + 5, 3 * PAGE_SIZE, SZ64K);
	memset(tc->log, 0, sizeof(tc->log));
	/* Entries longer than the page size (256 KiB). */
	trim_check(test, tc, 0x2000000 + SZ64K + PAGE_SIZE, 6 * SZ64K, 4 * SZ64K);
	KUNIT_EXPECT_EQ(test, t_violations(V_TOTAL), 0);
}

static void trim_none_at_page_size(struct kunit *test)
{
	struct tclient *tc = t_register(test, 0, "t_notrim", K_PLAIN);
	struct fake_mr *mr;
	u64 dma;
	u32 l;

	mr = t_reg(0x3000000 + 0x800, PAGE_SIZE, NULL);
	KUNIT_ASSERT_FALSE(test, IS_ERR(mr));
	KUNIT_EXPECT_EQ(test, fake_core_mr_nents(mr), 2);
	KUNIT_ASSERT_EQ(test, fake_core_mr_entry(mr, 0, &dma, &l), 0);
	KUNIT_EXPECT_EQ(test, dma, T_PHYS_BASE + 0x3000000);
	KUNIT_EXPECT_EQ(test, l, (u32)PAGE_SIZE);
	KUNIT_EXPECT_EQ(test, fake_core_mr_dma_addr(mr, PAGE_SIZE - 0x800),
			T_PHYS_BASE + 0x3000000 + PAGE_SIZE);
	t_dereg(mr);
	KUNIT_EXPECT_EQ(test, tc->restore_errors, 0);
	KUNIT_EXPECT_EQ(test, t_violations(V_TOTAL), 0);
}

/* ---- invalidation ---- */

static void invalidate_plain_core_unmaps_nested(struct kunit *test)
{
	struct fake_core_client_stats st;
	struct tclient *tc = t_register(test, 0, "t_plaininv", K_INVAL);
	struct fake_mr *mr;

	tc->page_size = SZ64K;
	mr = t_reg(0x4000000 + 0x1000, 0x3000, NULL);
	KUNIT_ASSERT_FALSE(test, IS_ERR(mr));
	KUNIT_EXPECT_TRUE(test, tc->lock_in_gp);
	/* The client's free callback calls invalidate: the core unmaps inside it. */
	KUNIT_EXPECT_EQ(test, tc->invalidate(tc->handle, fake_core_mr_core_context(mr)), 0);
	KUNIT_EXPECT_STREQ(test, tc->log, "AGMSUP");
	KUNIT_EXPECT_TRUE(test, tc->lock_in_unmap);
	KUNIT_EXPECT_EQ(test, tc->restore_errors, 0);
	KUNIT_EXPECT_EQ(test, fake_core_mr_invalidations(mr), 1);
	KUNIT_EXPECT_EQ(test, fake_core_mr_nents(mr), 0);
	KUNIT_EXPECT_EQ(test, fake_core_mr_dma_addr(mr, 0), 0);
	t_dereg(mr);
	KUNIT_EXPECT_STREQ(test, tc->log, "AGMSUPR");	/* no second unmap */
	KUNIT_ASSERT_EQ(test, fake_core_client_stats("t_plaininv", &st), 0);
	KUNIT_EXPECT_EQ(test, st.num_free_callbacks, 1);
	KUNIT_EXPECT_EQ(test, st.releases, 1);

	/* Without invalidation, dereg unmaps under the mapping lock. */
	t_reg_dereg_locked(test, tc, 0x4000000, NULL, true);
	KUNIT_EXPECT_EQ(test, t_violations(V_TOTAL), 0);
}

static void invalidate_unmaps_client(struct kunit *test)
{
	struct tclient *tc = t_register(test, 0, "t_unmaps", K_UNMAPS);
	struct fake_core_client_stats st;
	struct fake_mr *mr;
	struct tctx *t;

	KUNIT_ASSERT_TRUE(test, fake_core_test_client_unmaps(tc->handle));
	mr = t_reg(0x5000000, 2 * PAGE_SIZE, NULL);
	KUNIT_ASSERT_FALSE(test, IS_ERR(mr));
	t = tc->last;
	KUNIT_ASSERT_NOT_NULL(test, t);
	KUNIT_EXPECT_EQ(test, tc->invalidate(tc->handle, fake_core_mr_core_context(mr)), 0);
	KUNIT_EXPECT_STREQ(test, tc->log, "AGMS");	/* the core did not unmap */
	KUNIT_EXPECT_EQ(test, fake_core_mr_invalidations(mr), 1);
	/* Invalidated, not yet "unmapped": dealloc counted, the bytes only at dereg. */
	KUNIT_ASSERT_EQ(test, fake_core_client_stats("t_unmaps", &st), 0);
	KUNIT_EXPECT_EQ(test, st.num_dealloc_mrs, 1);
	KUNIT_EXPECT_EQ(test, st.num_dereg_bytes, 0);
	t_self_unmap(t, fake_core_hca_device());
	t_dereg(mr);
	KUNIT_EXPECT_STREQ(test, tc->log, "AGMSR");	/* nor at dereg */
	KUNIT_ASSERT_EQ(test, fake_core_client_stats("t_unmaps", &st), 0);
	KUNIT_EXPECT_EQ(test, st.num_dealloc_mrs, 1);
	KUNIT_EXPECT_EQ(test, st.num_dereg_bytes, 2 * PAGE_SIZE);

	/* Not invalidated: dereg unmaps, after dropping the mapping lock. */
	memset(tc->log, 0, sizeof(tc->log));
	tc->lock_in_unmap = true;
	mr = t_reg(0x5000000, 2 * PAGE_SIZE, NULL);
	KUNIT_ASSERT_FALSE(test, IS_ERR(mr));
	t_dereg(mr);
	KUNIT_EXPECT_STREQ(test, tc->log, "AGMSUPR");
	KUNIT_EXPECT_FALSE(test, tc->lock_in_unmap);
	KUNIT_EXPECT_FALSE(test, tc->lock_in_put);
	KUNIT_EXPECT_EQ(test, t_violations(V_TOTAL), 0);
}

static u64 t_stat_free_callbacks(const char *name)
{
	struct fake_core_client_stats st;

	return fake_core_client_stats(name, &st) ? U64_MAX : st.num_free_callbacks;
}

static void invalidate_stale_and_unknown(struct kunit *test)
{
	struct fake_core_counters k;
	struct tclient *tc = t_register(test, 0, "t_stale", K_INVAL);
	struct tclient *other = t_register(test, 1, "t_other", K_INVAL);
	struct fake_mr *mr;
	u64 cc;

	mr = t_reg(0x6000000, PAGE_SIZE, NULL);
	KUNIT_ASSERT_FALSE(test, IS_ERR(mr));
	cc = fake_core_mr_core_context(mr);
	KUNIT_EXPECT_EQ(test, tc->invalidate(tc->handle, cc + 1000), 0);
	KUNIT_EXPECT_EQ(test, tc->invalidate(tc->handle, U32_MAX), 0);
	KUNIT_EXPECT_EQ(test, tc->invalidate(tc->handle, 1ULL << 40), 0);
	KUNIT_EXPECT_EQ(test, other->invalidate(other->handle, cc), 0);	/* not its region */
	KUNIT_EXPECT_EQ(test, fake_core_mr_invalidations(mr), 0);
	KUNIT_EXPECT_STREQ(test, tc->log, "AGMS");
	t_dereg(mr);
	KUNIT_EXPECT_EQ(test, tc->invalidate(tc->handle, cc), 0);	/* after dereg */
	KUNIT_EXPECT_STREQ(test, tc->log, "AGMSUPR");
	fake_core_get_counters(&k);
	KUNIT_EXPECT_EQ(test, k.invalidations_stale, 5);
	KUNIT_EXPECT_EQ(test, k.violations_total, 0);
	/* The client's counter counts every call, found or not, as the real core's. */
	KUNIT_EXPECT_EQ(test, t_stat_free_callbacks("t_stale"), 4);
	KUNIT_EXPECT_EQ(test, t_stat_free_callbacks("t_other"), 1);
}

static void invalidate_double(struct kunit *test)
{
	struct tclient *tc = t_register(test, 0, "t_double", K_INVAL);
	struct fake_mr *mr;
	u64 cc;

	mr = t_reg(0x7000000, PAGE_SIZE, NULL);
	KUNIT_ASSERT_FALSE(test, IS_ERR(mr));
	cc = fake_core_mr_core_context(mr);
	KUNIT_EXPECT_EQ(test, tc->invalidate(tc->handle, cc), 0);
	KUNIT_EXPECT_EQ(test, t_violations(FAKE_CORE_V_DOUBLE_INVALIDATE), 0);
	KUNIT_EXPECT_EQ(test, tc->invalidate(tc->handle, cc), 0);
	KUNIT_EXPECT_EQ(test, t_violations(FAKE_CORE_V_DOUBLE_INVALIDATE), 1);
	KUNIT_EXPECT_EQ(test, fake_core_mr_invalidations(mr), 2);
	KUNIT_EXPECT_STREQ(test, tc->log, "AGMSUP");
	t_dereg(mr);
	KUNIT_EXPECT_STREQ(test, tc->log, "AGMSUPR");
	fake_core_reset_counters();
}

struct order_arg {
	struct tclient *tc;
	u64 cc;
	struct fake_mr *mr;
	struct completion done;
	char log_at_end[64];
};

static int reg_thread(void *p)
{
	struct order_arg *a = p;

	a->mr = fake_core_reg_mr(0x8000000, PAGE_SIZE, NULL);
	complete(&a->done);
	return 0;
}

static int inv_thread(void *p)
{
	struct order_arg *a = p;

	a->tc->invalidate(a->tc->handle, a->cc);
	strscpy(a->log_at_end, a->tc->log, sizeof(a->log_at_end));
	complete(&a->done);
	return 0;
}

static void invalidate_waits_for_mapping_lock(struct kunit *test)
{
	struct tclient *tc = t_register(test, 0, "t_order", K_INVAL);
	struct order_arg r = { .tc = tc }, v = { .tc = tc };
	DECLARE_COMPLETION_ONSTACK(entered);
	DECLARE_COMPLETION_ONSTACK(proceed);
	struct task_struct *k;

	init_completion(&r.done);
	init_completion(&v.done);
	tc->gp_entered = &entered;
	tc->gp_proceed = &proceed;
	k = kthread_run(reg_thread, &r, "t_reg");
	KUNIT_ASSERT_FALSE(test, IS_ERR(k));
	KUNIT_ASSERT_TRUE(test, wait_for_completion_timeout(&entered, 10 * HZ) > 0);
	/* get_pages is running with the mapping lock held; invalidate must wait. */
	v.cc = tc->gp_cc;
	k = kthread_run(inv_thread, &v, "t_inv");
	if (IS_ERR(k)) {
		complete(&proceed);
		wait_for_completion(&r.done);
		if (!IS_ERR(r.mr))
			fake_core_dereg_mr(r.mr);
		KUNIT_FAIL(test, "kthread_run failed");
		return;
	}
	msleep(200);
	KUNIT_EXPECT_FALSE(test, completion_done(&v.done));
	KUNIT_EXPECT_STREQ(test, tc->log, "AG");
	complete(&proceed);
	KUNIT_EXPECT_TRUE(test, wait_for_completion_timeout(&r.done, 10 * HZ) > 0);
	KUNIT_EXPECT_TRUE(test, wait_for_completion_timeout(&v.done, 10 * HZ) > 0);
	KUNIT_ASSERT_FALSE(test, IS_ERR_OR_NULL(r.mr));
	tmrs[0] = r.mr;
	/* The invalidation ran after the whole registration, and unmapped. */
	KUNIT_EXPECT_STREQ(test, v.log_at_end, "AGMSUP");
	KUNIT_EXPECT_EQ(test, fake_core_mr_invalidations(r.mr), 1);
	t_dereg(r.mr);
	KUNIT_EXPECT_STREQ(test, tc->log, "AGMSUPR");
	KUNIT_EXPECT_EQ(test, t_violations(V_TOTAL), 0);
}

/* ---- violations by deliberately wrong clients ---- */

static void violation_case(struct kunit *test, enum tkind kind, enum tmode mode,
			   unsigned long page_size, int map_ret, int unmap_ret,
			   enum fake_core_violation v, int want_err, const char *want_log)
{
	struct tclient *tc = t_register(test, 0, "t_wrong", kind);
	struct fake_mr *mr;

	tc->mode = mode;
	tc->reported_page_size = page_size;
	tc->dma_map_ret = map_ret;
	tc->unmap_ret = unmap_ret;
	mr = t_reg(0x9000000 + 0x40, 3 * PAGE_SIZE, NULL);
	if (!want_err) {
		KUNIT_ASSERT_FALSE(test, IS_ERR(mr));
		t_dereg(mr);
	} else {
		KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(mr), want_err);
	}
	KUNIT_EXPECT_STREQ(test, tc->log, want_log);
	KUNIT_EXPECT_EQ_MSG(test, t_violations(v), 1, "violation %s",
			    fake_core_violation_name(v));
	KUNIT_EXPECT_EQ(test, t_violations(V_TOTAL), 1);
	fake_core_reset_counters();
}

static void violation_sg_misaligned(struct kunit *test)
{
	violation_case(test, K_PLAIN, M_MISALIGNED, 0, 0, 0, FAKE_CORE_V_SG_MISALIGNED,
		       -EINVAL, "AGMSUPR");
}

static void violation_sg_wrong_coverage(struct kunit *test)
{
	violation_case(test, K_INVAL, M_SHORT, 0, 0, 0, FAKE_CORE_V_SG_WRONG_COVERAGE,
		       -EINVAL, "AGMSUPR");
}

static void violation_sg_not_mapped(struct kunit *test)
{
	violation_case(test, K_PLAIN, M_NOT_MAPPED, 0, 0, 0, FAKE_CORE_V_SG_NOT_MAPPED,
		       -EINVAL, "AGMSUPR");
}

static void violation_sg_touched_on_failure(struct kunit *test)
{
	violation_case(test, K_UNMAPS, M_TOUCH_FAIL, 0, -EIO, 0,
		       FAKE_CORE_V_SG_TOUCHED_ON_FAILURE, -EIO, "AGMPR");
}

static void violation_bad_page_size(struct kunit *test)
{
	violation_case(test, K_PLAIN, M_GOOD, 3 * PAGE_SIZE, 0, 0, FAKE_CORE_V_BAD_PAGE_SIZE,
		       -EINVAL, "AGMSUPR");
	t_unregister(&tslots[0]);
	memset(&tslots[0], 0, sizeof(tslots[0]));
	violation_case(test, K_PLAIN, M_GOOD, PAGE_SIZE / 2, 0, 0, FAKE_CORE_V_BAD_PAGE_SIZE,
		       -EINVAL, "AGMSUPR");
}

static void violation_unmap_nonzero(struct kunit *test)
{
	violation_case(test, K_PLAIN, M_GOOD, 0, 0, -EBUSY, FAKE_CORE_V_UNMAP_NONZERO, 0,
		       "AGMSUPR");
}

static void violation_names_distinct(struct kunit *test)
{
	int i, j;

	for (i = 0; i < FAKE_CORE_V_COUNT; i++) {
		KUNIT_EXPECT_STRNEQ(test, fake_core_violation_name(i), "UNKNOWN");
		for (j = 0; j < i; j++)
			KUNIT_EXPECT_STRNEQ(test, fake_core_violation_name(i),
					    fake_core_violation_name(j));
	}
	KUNIT_EXPECT_STREQ(test, fake_core_violation_name(FAKE_CORE_V_SG_MISALIGNED),
			   "SG_MISALIGNED");
	KUNIT_EXPECT_STREQ(test, fake_core_violation_name(FAKE_CORE_V_COUNT), "UNKNOWN");
}

static struct kunit_case register_cases[] = {
	KUNIT_CASE(register_requires_mandatory_callbacks),
	KUNIT_CASE(register_extended_detection),
	KUNIT_CASE(register_stats_and_debugfs),
	KUNIT_CASE(register_unregister_waits_for_regions),
	{}
};

static struct kunit_case acquire_cases[] = {
	KUNIT_CASE(acquire_walk_order_and_next),
	KUNIT_CASE(acquire_skips_invalidating_clients),
	KUNIT_CASE(acquire_nobody_efault),
	KUNIT_CASE(acquire_without_context),
	{}
};

static struct kunit_case lifecycle_cases[] = {
	KUNIT_CASE(lifecycle_success),
	KUNIT_CASE(lifecycle_dereg_locks_by_region_and_client),
	KUNIT_CASE(lifecycle_hca_failure_after_mapping),
	KUNIT_CASE(lifecycle_get_pages_failure),
	KUNIT_CASE(lifecycle_dma_map_failure),
	KUNIT_CASE(lifecycle_core_context_and_options),
	{}
};

static struct kunit_case trim_cases[] = {
	KUNIT_CASE(trim_64k_both_ends),
	KUNIT_CASE(trim_single_and_long_entries),
	KUNIT_CASE(trim_none_at_page_size),
	{}
};

static struct kunit_case invalidate_cases[] = {
	KUNIT_CASE(invalidate_plain_core_unmaps_nested),
	KUNIT_CASE(invalidate_unmaps_client),
	KUNIT_CASE(invalidate_stale_and_unknown),
	KUNIT_CASE(invalidate_double),
	KUNIT_CASE(invalidate_waits_for_mapping_lock),
	{}
};

static struct kunit_case violation_cases[] = {
	KUNIT_CASE(violation_sg_misaligned),
	KUNIT_CASE(violation_sg_wrong_coverage),
	KUNIT_CASE(violation_sg_not_mapped),
	KUNIT_CASE(violation_sg_touched_on_failure),
	KUNIT_CASE(violation_bad_page_size),
	KUNIT_CASE(violation_unmap_nonzero),
	KUNIT_CASE(violation_names_distinct),
	{}
};

#define T_SUITE(var, sname, cases_)			\
	static struct kunit_suite var = {		\
		.name = sname,				\
		.init = t_init,				\
		.exit = t_exit,				\
		.test_cases = cases_,			\
	}

T_SUITE(register_suite, "peermem_fake_core_register", register_cases);
T_SUITE(acquire_suite, "peermem_fake_core_acquire", acquire_cases);
T_SUITE(lifecycle_suite, "peermem_fake_core_lifecycle", lifecycle_cases);
T_SUITE(trim_suite, "peermem_fake_core_trim", trim_cases);
T_SUITE(invalidate_suite, "peermem_fake_core_invalidate", invalidate_cases);
T_SUITE(violation_suite, "peermem_fake_core_violations", violation_cases);

kunit_test_suites(&register_suite, &acquire_suite, &lifecycle_suite, &trim_suite,
		  &invalidate_suite, &violation_suite);
