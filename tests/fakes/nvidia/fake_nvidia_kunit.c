// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * KUnit suite of the fake nvidia.ko itself: every contract rule it enforces (ABI
 * docs/abi.md section 1) is exercised here and asserted on real values, so that the fake
 * is known to catch what it claims to catch. Runs at insertion (CONFIG_KUNIT=y).
 * Suite name: peermem_fake_nvidia (peermem_fake_nvidia_legacy in the legacy build).
 */
#include <kunit/test.h>
#include <linux/kthread.h>
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/pci.h>
#include <linux/dma-mapping.h>
#include <linux/iommu.h>
#include <linux/slab.h>
#include <linux/sched.h>

#include "fake_pci.h"
#include "fake_nvidia.h"
#include "nv_p2p_abi.h"
#include "fake_nvidia_internal.h"

#ifdef FAKE_NV_LEGACY
#define LEGACY 1
#define SUITE_NAME "peermem_fake_nvidia_legacy"
#else
#define LEGACY 0
#define SUITE_NAME "peermem_fake_nvidia"
#endif

#define P64K SZ_64K

/* ---- helpers ------------------------------------------------------------ */

struct tctx {
	struct fake_nv_config cfg;	/* restored at exit */
	struct fake_nv_counters before;
	struct fake_nv_proc *procs[4];
	int nprocs;
};

/* Record of a free callback; always heap (kunit_kzalloc): it may run after a failed
 * test returned, from the exit hook. */
struct cbrec {
	int calls;
	bool lock_held;
	struct task_struct *task;
	/* actions inside the callback (forbidden ones: the fake must catch them) */
	bool do_put, do_unmap, do_frees, do_get, do_map;
	u64 va;
	struct nvidia_p2p_page_table *table;
	struct pci_dev *peer;
	struct nvidia_p2p_dma_mapping *map;
	int put_ret, unmap_ret, free_table_ret, free_map_ret, get_ret, map_ret;
};

static void test_cb(void *data)
{
	struct cbrec *r = data;

	r->calls++;
	r->lock_held = fake_nv_driver_lock_held();
	r->task = current;
	if (r->do_put)
		r->put_ret = nvidia_p2p_put_pages(0, 0, r->va, r->table);
	if (r->do_get) {
		struct nvidia_p2p_page_table *t;

		r->get_ret = nvidia_p2p_get_pages(0, 0, r->va, P64K, &t, test_cb, r);
	}
	if (r->do_map) {
		struct nvidia_p2p_dma_mapping *m;

		r->map_ret = nvidia_p2p_dma_map_pages(r->peer, r->table, &m);
	}
	if (r->do_unmap)
		r->unmap_ret = nvidia_p2p_dma_unmap_pages(r->peer, r->table, r->map);
	if (r->do_frees) {
		r->free_map_ret = nvidia_p2p_free_dma_mapping(r->map);
		r->free_table_ret = nvidia_p2p_free_page_table(r->table);
	}
}

static struct cbrec *newrec(struct kunit *test)
{
	return kunit_kzalloc(test, sizeof(struct cbrec), GFP_KERNEL);
}

static int pin_cb(u64 va, u64 len, struct nvidia_p2p_page_table **t, struct cbrec *r)
{
	r->va = va;
	return nvidia_p2p_get_pages(0, 0, va, len, t, test_cb, r);
}

static int pin_persist(u64 va, u64 len, struct nvidia_p2p_page_table **t)
{
#ifdef FAKE_NV_LEGACY
	return nvidia_p2p_get_pages(0, 0, va, len, t, NULL, NULL);
#else
	return nvidia_p2p_get_pages_persistent(va, len, t, 0);
#endif
}

static int put_persist(u64 va, struct nvidia_p2p_page_table *t)
{
#ifdef FAKE_NV_LEGACY
	return nvidia_p2p_put_pages(0, 0, va, t);
#else
	return nvidia_p2p_put_pages_persistent(va, t, 0);
#endif
}

/* One counter now (a function, to keep test frames small). */
static noinline u64 cnt_at(size_t off)
{
	struct fake_nv_counters c;

	fake_nv_get_counters(&c);
	return *(u64 *)((char *)&c + off);
}

static noinline u64 cnt_before(struct kunit *test, size_t off)
{
	return *(u64 *)((char *)&((struct tctx *)test->priv)->before + off);
}

#define OFF(field) offsetof(struct fake_nv_counters, field)
#define NOW(field) cnt_at(OFF(field))
#define D(test, field) (cnt_at(OFF(field)) - cnt_before(test, OFF(field)))
#define DV(test, v) (cnt_at(OFF(violations) + (v) * sizeof(u64)) - \
		     cnt_before(test, OFF(violations) + (v) * sizeof(u64)))

/* A process owned by the test thread, entered. Leave it with endproc. */
static struct fake_nv_proc *newproc(struct kunit *test)
{
	struct tctx *c = test->priv;
	struct fake_nv_proc *p = fake_nv_proc_create();

	KUNIT_ASSERT_NOT_NULL(test, p);
	c->procs[c->nprocs++] = p;
	fake_nv_proc_enter(p);
	return p;
}

static void endproc(struct kunit *test, struct fake_nv_proc *p, bool exit)
{
	struct tctx *c = test->priv;
	int i;

	fake_nv_proc_leave(p);
	if (!exit)
		return;
	for (i = 0; i < c->nprocs; i++)
		if (c->procs[i] == p)
			c->procs[i] = NULL;
	fake_nv_proc_exit(p);
}

/* The HCA stand-in (fake_pci.h), DMA mask raised to 64 bits. */
static struct pci_dev *hca(struct kunit *test)
{
	struct pci_dev *d = fake_pci_hca(0);

	if (!d)
		return NULL;
	KUNIT_EXPECT_EQ(test, dma_set_mask_and_coherent(&d->dev, DMA_BIT_MASK(64)), 0);
	return d;
}

/* Another thread (its own tgid) running fn. */
struct thr {
	struct completion done;
	int (*fn)(struct thr *t);
	struct fake_nv_proc *p;	/* the process to act on */
	bool enter;		/* the thread enters p's mm first */
	u64 va, len;
	struct nvidia_p2p_page_table *table;
	struct nvidia_p2p_dma_mapping *map;
	struct pci_dev *peer;
	int ret;
};

static int thr_main(void *arg)
{
	struct thr *t = arg;

	if (t->enter)
		fake_nv_proc_enter(t->p);
	t->ret = t->fn(t);
	if (t->enter)
		fake_nv_proc_leave(t->p);
	complete(&t->done);
	return 0;
}

static struct thr *thr_start(struct kunit *test, int (*fn)(struct thr *),
			     struct fake_nv_proc *p, bool enter, u64 va, u64 len,
			     struct nvidia_p2p_page_table *table, struct pci_dev *peer)
{
	struct thr *t = kunit_kzalloc(test, sizeof(*t), GFP_KERNEL);
	struct task_struct *k;

	KUNIT_ASSERT_NOT_NULL(test, t);
	init_completion(&t->done);
	t->fn = fn;
	t->p = p;
	t->enter = enter && p;
	t->peer = peer;
	t->va = va;
	t->len = len;
	t->table = table;
	k = kthread_run(thr_main, t, "fake_nv_thr");
	KUNIT_ASSERT_FALSE(test, IS_ERR(k));
	return t;
}

static int thr_wait(struct thr *t)
{
	if (!wait_for_completion_timeout(&t->done, 10 * HZ))
		return -ETIMEDOUT;
	return t->ret;
}

static int fn_pin(struct thr *t)
{
	struct cbrec *r = kzalloc(sizeof(*r), GFP_KERNEL);
	int ret;

	ret = nvidia_p2p_get_pages(0, 0, t->va, t->len, &t->table, test_cb, r);
	if (ret)
		kfree(r);
	return ret;	/* never succeeds in these tests (r leaks otherwise) */
}

static int fn_put(struct thr *t)
{
	return nvidia_p2p_put_pages(0, 0, t->va, t->table);
}

static int fn_free(struct thr *t)
{
	return fake_nv_free(t->p, t->va);
}

static int fn_map(struct thr *t)
{
	return nvidia_p2p_dma_map_pages(t->peer, t->table, &t->map);
}

static int suite_init(struct kunit *test)
{
	struct tctx *c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);

	if (!c)
		return -ENOMEM;
	fake_nv_get_config(&c->cfg);
	fake_nv_get_counters(&c->before);
	test->priv = c;
	if (c->before.pins_live || c->before.dma_mappings_live ||
	    c->before.bar1_bytes_in_use) {
		kunit_err(test, "not clean at start: %llu pins, %llu mappings live",
			  c->before.pins_live, c->before.dma_mappings_live);
		return -EBUSY;
	}
	return 0;
}

static void suite_exit(struct kunit *test)
{
	struct tctx *c = test->priv;
	int i;

	for (i = 0; i < FAKE_NV_PAUSE_COUNT; i++)
		fake_nv_pause_release(i);
	fake_nv_inject_pin_errors(0, 0);
	for (i = 0; i < c->nprocs; i++)
		if (c->procs[i])
			fake_nv_proc_exit(c->procs[i]);
	i = fake_nv_test_reap();
	if (i)
		kunit_err(test, "%d pin(s) left live by the test", i);
	fake_nv_set_config(&c->cfg);
}

/* Every test ends clean. */
static void expect_clean(struct kunit *test)
{
	struct fake_nv_counters c;

	fake_nv_get_counters(&c);

	KUNIT_EXPECT_EQ(test, c.pins_live, 0);
	KUNIT_EXPECT_EQ(test, c.persistent_live, 0);
	KUNIT_EXPECT_EQ(test, c.dma_mappings_live, 0);
	KUNIT_EXPECT_EQ(test, c.bar1_bytes_in_use, 0);
}

/* A process whose buffer is pinned with a callback and mapped for the HCA: how the
 * tests of the rules on mappings start. The test ends the process itself
 * (endproc: the exit is often the event under test), then calls mapped_end. */
struct mapped {
	struct fake_nv_proc *p;
	struct cbrec *r;
	struct nvidia_p2p_page_table *t;
	struct nvidia_p2p_dma_mapping *m;
	struct pci_dev *dev;
	u64 va;
};

static void mapped_start(struct kunit *test, struct mapped *x, u64 len)
{
	x->p = newproc(test);
	x->r = newrec(test);
	KUNIT_ASSERT_NOT_NULL(test, x->r);
	x->dev = hca(test);
	KUNIT_ASSERT_NOT_NULL(test, x->dev);
	x->va = fake_nv_alloc(x->p, len, true);
	KUNIT_ASSERT_NE(test, x->va, 0);
	KUNIT_EXPECT_EQ(test, pin_cb(x->va, len, &x->t, x->r), 0);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_dma_map_pages(x->dev, x->t, &x->m), 0);
}

/* After endproc: nothing may be left. */
static void mapped_end(struct kunit *test, struct mapped *x)
{
	pci_dev_put(x->dev);
	expect_clean(test);
}

/* ---- tests --------------------------------------------------------------- */

static void t_alignment(struct kunit *test)
{
	struct fake_nv_proc *p = newproc(test);
	struct cbrec *r = newrec(test);
	struct nvidia_p2p_page_table *t = NULL;
	u64 va = fake_nv_alloc(p, 4 * P64K, false);

	KUNIT_EXPECT_NE(test, va, 0);
	KUNIT_EXPECT_EQ(test, pin_cb(va + 4096, P64K, &t, r), -EINVAL);
	KUNIT_EXPECT_EQ(test, pin_cb(va, P64K + 4096, &t, r), -EINVAL);
	KUNIT_EXPECT_EQ(test, pin_cb(va, 0, &t, r), -EINVAL);
	KUNIT_EXPECT_EQ(test, pin_persist(va + P64K / 2, P64K, &t), -EINVAL);
	KUNIT_EXPECT_EQ(test, D(test, refused_unaligned), 4);
	/* deprecated tokens must be 0 */
	KUNIT_EXPECT_EQ(test, nvidia_p2p_get_pages(1, 0, va, P64K, &t, test_cb, r), -EINVAL);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_get_pages(0, 7, va, P64K, &t, test_cb, r), -EINVAL);
	KUNIT_EXPECT_NULL(test, t);
	KUNIT_EXPECT_EQ(test, D(test, pins_total), 0);
	/* the aligned pin goes through */
	KUNIT_EXPECT_EQ(test, pin_cb(va, 4 * P64K, &t, r), 0);
	KUNIT_EXPECT_EQ(test, D(test, pins_total), 1);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, va, t), 0);
	endproc(test, p, true);
	KUNIT_EXPECT_EQ(test, r->calls, 0);
	expect_clean(test);
}

static void t_null_callback(struct kunit *test)
{
	struct fake_nv_proc *p = newproc(test);
	struct nvidia_p2p_page_table *t = NULL;
	u64 va = fake_nv_alloc(p, 2 * P64K, false);

	KUNIT_EXPECT_EQ(test, fake_nv_is_pre_535(), (bool)LEGACY);
	if (LEGACY) {
		/* before 535.14 a NULL callback is a persistent pin */
		KUNIT_EXPECT_EQ(test, nvidia_p2p_get_pages(0, 0, va, P64K, &t, NULL, NULL), 0);
		KUNIT_EXPECT_EQ(test, D(test, persistent_live), 1);
		KUNIT_EXPECT_EQ(test, D(test, refused_null_callback), 0);
		KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, va, t), 0);
	} else {
		KUNIT_EXPECT_EQ(test, nvidia_p2p_get_pages(0, 0, va, P64K, &t, NULL, NULL),
				-EINVAL);
		KUNIT_EXPECT_EQ(test, D(test, refused_null_callback), 1);
		KUNIT_EXPECT_EQ(test, D(test, pins_total), 0);
	}
	endproc(test, p, true);
	expect_clean(test);
}

static void t_not_owner(struct kunit *test)
{
	struct fake_nv_proc *p = newproc(test), *q;
	struct cbrec *r = newrec(test);
	struct nvidia_p2p_page_table *t = NULL;
	u64 va = fake_nv_alloc(p, 2 * P64K, false);
	struct thr *th;

	/* a CLONE_VM-like child: same mm, other tgid */
	th = thr_start(test, fn_pin, p, true, va, P64K, NULL, NULL);
	KUNIT_EXPECT_EQ(test, thr_wait(th), -EINVAL);
	KUNIT_EXPECT_EQ(test, D(test, refused_not_owner), 1);
	/* a kthread without any mm */
	th = thr_start(test, fn_pin, NULL, false, va, P64K, NULL, NULL);
	KUNIT_EXPECT_EQ(test, thr_wait(th), -EINVAL);
	KUNIT_EXPECT_EQ(test, D(test, refused_not_owner), 2);
	KUNIT_EXPECT_EQ(test, D(test, pins_total), 0);
	/* the owner itself may */
	KUNIT_EXPECT_EQ(test, pin_cb(va, P64K, &t, r), 0);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, va, t), 0);
	endproc(test, p, false);

	/* q: a second process; a thread entering it is a CLONE_VM child, not the owner */
	q = fake_nv_proc_create();
	KUNIT_ASSERT_NOT_NULL(test, q);
	((struct tctx *)test->priv)->procs[((struct tctx *)test->priv)->nprocs++] = q;
	va = fake_nv_alloc(q, P64K, false);
	th = thr_start(test, fn_pin, q, true, va, P64K, NULL, NULL);	/* other tgid */
	KUNIT_EXPECT_EQ(test, thr_wait(th), -EINVAL);
	KUNIT_EXPECT_EQ(test, D(test, refused_not_owner), 3);
	KUNIT_EXPECT_EQ(test, D(test, pins_total), 1);
	expect_clean(test);
}

static void t_no_memory(struct kunit *test)
{
	struct fake_nv_proc *p = newproc(test);
	struct cbrec *r = newrec(test);
	struct nvidia_p2p_page_table *t = NULL;
	u64 a = fake_nv_alloc(p, 2 * P64K, false);
	u64 b = fake_nv_alloc(p, 2 * P64K, false);

	KUNIT_EXPECT_EQ(test, b, a + 2 * P64K);	/* adjacent */
	KUNIT_EXPECT_EQ(test, pin_cb(a + 8 * P64K, P64K, &t, r), -EINVAL);	/* nothing */
	KUNIT_EXPECT_EQ(test, pin_cb(a + P64K, 2 * P64K, &t, r), -EINVAL);	/* spans a, b */
	KUNIT_EXPECT_EQ(test, pin_cb(b, 3 * P64K, &t, r), -EINVAL);		/* past b */
	KUNIT_EXPECT_EQ(test, fake_nv_free(p, a), 0);
	KUNIT_EXPECT_EQ(test, pin_cb(a, P64K, &t, r), -EINVAL);		/* freed */
	/* Past the argument checks, a failure leaves a pointer that is not a table. */
	KUNIT_EXPECT_PTR_EQ(test, t, FAKE_NV_DANGLING_TABLE);
	KUNIT_EXPECT_EQ(test, D(test, refused_no_memory), 4);
	KUNIT_EXPECT_EQ(test, D(test, refused_not_owner), 0);
	KUNIT_EXPECT_EQ(test, D(test, pins_total), 0);
	endproc(test, p, true);
	expect_clean(test);
}

static void t_bar1(struct kunit *test)
{
	struct fake_nv_proc *p = newproc(test);
	struct cbrec *r = newrec(test);
	struct nvidia_p2p_page_table *t1 = NULL, *t2 = NULL, *t3 = NULL;
	struct fake_nv_config cfg;
	u64 va = fake_nv_alloc(p, 32 * P64K, false);

	fake_nv_get_config(&cfg);
	KUNIT_EXPECT_EQ(test, cfg.bar1_reserve, 36 * SZ_1M);
	cfg.bar1_size = cfg.bar1_reserve + SZ_1M;	/* 16 pages admitted */
	KUNIT_EXPECT_EQ(test, fake_nv_set_config(&cfg), 0);

	KUNIT_EXPECT_EQ(test, pin_cb(va, SZ_1M, &t1, r), 0);
	KUNIT_EXPECT_EQ(test, NOW(bar1_bytes_in_use), SZ_1M);
	/* an overlapping pin shares the BAR1 pages */
	KUNIT_EXPECT_EQ(test, pin_persist(va, SZ_512K, &t2), 0);
	KUNIT_EXPECT_EQ(test, NOW(bar1_bytes_in_use), SZ_1M);
	/* one page more does not fit */
	KUNIT_EXPECT_EQ(test, pin_cb(va + SZ_1M, P64K, &t3, r), -ENOMEM);
	KUNIT_EXPECT_EQ(test, pin_cb(va + SZ_512K, SZ_1M, &t3, r), -ENOMEM);
	KUNIT_EXPECT_EQ(test, D(test, refused_bar1), 2);
	KUNIT_EXPECT_EQ(test, NOW(pins_live), 2);
	/* still shared after one of them is gone */
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, va, t1), 0);
	KUNIT_EXPECT_EQ(test, NOW(bar1_bytes_in_use), SZ_512K);
	KUNIT_EXPECT_EQ(test, pin_cb(va + SZ_512K, SZ_512K, &t3, r), 0);
	KUNIT_EXPECT_EQ(test, NOW(bar1_bytes_in_use), SZ_1M);
	KUNIT_EXPECT_EQ(test, pin_cb(va + SZ_1M, P64K, &t1, r), -ENOMEM);
	KUNIT_EXPECT_EQ(test, D(test, refused_bar1), 3);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, va + SZ_512K, t3), 0);
	KUNIT_EXPECT_EQ(test, put_persist(va, t2), 0);
	KUNIT_EXPECT_EQ(test, r->calls, 0);
	endproc(test, p, true);
	expect_clean(test);
}

static void t_injected(struct kunit *test)
{
	struct fake_nv_proc *p = newproc(test);
	struct cbrec *r = newrec(test);
	struct nvidia_p2p_page_table *t = NULL;
	u64 va = fake_nv_alloc(p, P64K, false);

	fake_nv_inject_pin_errors(2, EIO);
	KUNIT_EXPECT_EQ(test, pin_cb(va, P64K, &t, r), -EIO);
	KUNIT_EXPECT_EQ(test, pin_persist(va, P64K, &t), -EIO);
	KUNIT_EXPECT_EQ(test, pin_cb(va, P64K, &t, r), 0);
	KUNIT_EXPECT_EQ(test, D(test, refused_injected), 2);
	KUNIT_EXPECT_EQ(test, D(test, pins_total), 1);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, va, t), 0);
	fake_nv_inject_pin_errors(1, EBUSY);
	KUNIT_EXPECT_EQ(test, pin_cb(va, P64K, &t, r), -EBUSY);
	endproc(test, p, true);
	expect_clean(test);
}

static void check_table(struct kunit *test, struct fake_nv_proc *p, u64 va, u32 n,
			struct nvidia_p2p_page_table *t)
{
	u32 i;

	KUNIT_EXPECT_EQ(test, t->page_size, NVIDIA_P2P_PAGE_SIZE_64KB);
	KUNIT_EXPECT_EQ(test, t->entries, n);
	KUNIT_EXPECT_NOT_NULL(test, t->gpu_uuid);
	KUNIT_ASSERT_NOT_NULL(test, t->pages);
	for (i = 0; i < n; i++) {
		KUNIT_EXPECT_EQ(test, t->pages[i]->physical_address,
				fake_nv_phys(p, va + (u64)i * P64K));
		KUNIT_EXPECT_NE(test, t->pages[i]->physical_address, 0);
	}
}

static void t_versions(struct kunit *test)
{
	struct fake_nv_proc *p = newproc(test);
	struct cbrec *r = newrec(test);
	struct nvidia_p2p_page_table *t = NULL;
	struct fake_nv_config cfg;
	u64 va = fake_nv_alloc(p, 3 * P64K, true);

	KUNIT_EXPECT_NE(test, va, 0);
	fake_nv_get_config(&cfg);
	KUNIT_EXPECT_EQ(test, cfg.page_table_major, LEGACY ? 1 : 2);

	cfg.page_table_major = 1;
	KUNIT_EXPECT_EQ(test, fake_nv_set_config(&cfg), 0);
	KUNIT_EXPECT_EQ(test, pin_cb(va, 3 * P64K, &t, r), 0);
	KUNIT_EXPECT_EQ(test, t->version, NVIDIA_P2P_PAGE_TABLE_VERSION_V1);
	KUNIT_EXPECT_LT(test, ksize(t), sizeof(struct nvidia_p2p_page_table)); /* no flags */
	check_table(test, p, va, 3, t);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, va, t), 0);

	cfg.page_table_major = 2;
	KUNIT_EXPECT_EQ(test, fake_nv_set_config(&cfg), 0);
	KUNIT_EXPECT_EQ(test, pin_cb(va + P64K, 2 * P64K, &t, r), 0);
	KUNIT_EXPECT_EQ(test, t->version, NVIDIA_P2P_PAGE_TABLE_VERSION_V2);
	KUNIT_EXPECT_GE(test, ksize(t), sizeof(struct nvidia_p2p_page_table));
	KUNIT_EXPECT_EQ(test, t->flags, 0);
	check_table(test, p, va + P64K, 2, t);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, va + P64K, t), 0);
	/* the put table is poisoned */
	KUNIT_EXPECT_EQ(test, t->version >> 16, 0xDEAD);

	cfg.page_table_major = 3;
	KUNIT_EXPECT_EQ(test, fake_nv_set_config(&cfg), -EINVAL);
	endproc(test, p, true);
	expect_clean(test);
}

static void t_persistent_outlives_free(struct kunit *test)
{
	struct fake_nv_proc *p = newproc(test);
	struct cbrec *r = newrec(test);
	struct nvidia_p2p_page_table *tp = NULL, *tc = NULL;
	u64 va = fake_nv_alloc(p, 4 * P64K, true), phys0;

	KUNIT_EXPECT_NE(test, va, 0);
	phys0 = fake_nv_phys(p, va);
	KUNIT_EXPECT_NE(test, phys0, 0);
#ifndef FAKE_NV_LEGACY
	/* 570+ reads bit 0 of the flags only; forcing BAR1 is ENOTSUPP here, after the
	 * range checks */
	KUNIT_EXPECT_EQ(test, nvidia_p2p_get_pages_persistent(va + 4096, P64K, &tp, 1), -EINVAL);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_get_pages_persistent(va, P64K, &tp, 1), -ENOTSUPP);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_get_pages_persistent(va, P64K, &tp, 0x100), 0);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages_persistent(va, tp, 0), 0);
	KUNIT_EXPECT_EQ(test, NOW(pins_live), 0);
#endif
	KUNIT_EXPECT_EQ(test, pin_persist(va, 4 * P64K, &tp), 0);
	KUNIT_EXPECT_EQ(test, pin_cb(va, 2 * P64K, &tc, r), 0);
	KUNIT_EXPECT_EQ(test, NOW(bar1_bytes_in_use), 4 * P64K);

	KUNIT_EXPECT_EQ(test, fake_nv_free(p, va), 0);
	KUNIT_EXPECT_EQ(test, r->calls, 1);		/* the callback pin is gone */
	KUNIT_EXPECT_EQ(test, NOW(pins_live), 1);	/* the persistent one stays */
	KUNIT_EXPECT_EQ(test, NOW(persistent_live), 1);
	KUNIT_EXPECT_EQ(test, NOW(bar1_bytes_in_use), 4 * P64K);
	KUNIT_EXPECT_EQ(test, tp->version & 0xffff0000, LEGACY ? 0x00010000u : 0x00020000u);
	KUNIT_EXPECT_EQ(test, tp->pages[0]->physical_address, phys0);
	KUNIT_EXPECT_EQ(test, fake_nv_phys(p, va), 0);	/* the VA is free again */
	KUNIT_EXPECT_EQ(test, fake_nv_free(p, va), -ENOENT);
	/* and reusable, with other memory: the old pages are still pinned */
	KUNIT_EXPECT_EQ(test, fake_nv_alloc_at(p, va, 4 * P64K, true), va);
	KUNIT_EXPECT_NE(test, fake_nv_phys(p, va), phys0);
	KUNIT_EXPECT_NE(test, fake_nv_phys(p, va), 0);

	KUNIT_EXPECT_EQ(test, put_persist(va, tp), 0);
	KUNIT_EXPECT_EQ(test, NOW(persistent_live), 0);
	KUNIT_EXPECT_EQ(test, NOW(bar1_bytes_in_use), 0);
	KUNIT_EXPECT_EQ(test, fake_nv_free(p, va), 0);
	KUNIT_EXPECT_EQ(test, r->calls, 1);
	KUNIT_EXPECT_EQ(test, D(test, violations_total), 0);
	endproc(test, p, true);
	expect_clean(test);
}

static void t_callback_once_locked(struct kunit *test)
{
	struct fake_nv_proc *p = newproc(test);
	struct cbrec *r1 = newrec(test), *r2 = newrec(test), *r3 = newrec(test);
	struct nvidia_p2p_page_table *t1, *t2, *t3;
	u64 a = fake_nv_alloc(p, 4 * P64K, false);
	u64 b = fake_nv_alloc(p, P64K, false);

	KUNIT_EXPECT_EQ(test, pin_cb(a, 2 * P64K, &t1, r1), 0);
	KUNIT_EXPECT_EQ(test, pin_cb(a + P64K, 3 * P64K, &t2, r2), 0);
	KUNIT_EXPECT_EQ(test, pin_cb(b, P64K, &t3, r3), 0);
	KUNIT_EXPECT_FALSE(test, fake_nv_driver_lock_held());
	KUNIT_EXPECT_EQ(test, fake_nv_free(p, a), 0);
	KUNIT_EXPECT_EQ(test, r1->calls, 1);
	KUNIT_EXPECT_EQ(test, r2->calls, 1);
	KUNIT_EXPECT_EQ(test, r3->calls, 0);
	KUNIT_EXPECT_TRUE(test, r1->lock_held);
	KUNIT_EXPECT_TRUE(test, r2->lock_held);
	KUNIT_EXPECT_PTR_EQ(test, r1->task, current);
	KUNIT_EXPECT_EQ(test, D(test, callbacks_run), 2);
	KUNIT_EXPECT_EQ(test, NOW(pins_live), 1);
	/* freed tables are poisoned */
	KUNIT_EXPECT_EQ(test, t1->version >> 16, 0xDEAD);
	KUNIT_EXPECT_EQ(test, t2->version >> 16, 0xDEAD);
	endproc(test, p, true);		/* process exit frees b */
	KUNIT_EXPECT_EQ(test, r3->calls, 1);
	KUNIT_EXPECT_TRUE(test, r3->lock_held);
	KUNIT_EXPECT_EQ(test, r1->calls, 1);
	KUNIT_EXPECT_EQ(test, D(test, callbacks_run), 3);
	KUNIT_EXPECT_EQ(test, D(test, violations_total), 0);
	expect_clean(test);
}

static void t_put_after_callback(struct kunit *test)
{
	struct fake_nv_proc *p = newproc(test);
	struct cbrec *r = newrec(test);
	struct nvidia_p2p_page_table *t;
	u64 va = fake_nv_alloc(p, P64K, false);

	KUNIT_EXPECT_EQ(test, pin_cb(va, P64K, &t, r), 0);
	KUNIT_EXPECT_EQ(test, fake_nv_free(p, va), 0);
	KUNIT_EXPECT_EQ(test, r->calls, 1);
	if (LEGACY) {
		/* before 535.14 this is a use-after-free: caught */
		KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, va, t), -EINVAL);
		KUNIT_EXPECT_EQ(test, DV(test, FAKE_NV_V_PUT_AFTER_FREE), 1);
		KUNIT_EXPECT_EQ(test, D(test, violations_total), 1);
	} else {
		KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, va, t), 0);
		KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, va, t), 0);
		KUNIT_EXPECT_EQ(test, D(test, violations_total), 0);
	}
	endproc(test, p, true);
	KUNIT_EXPECT_EQ(test, r->calls, 1);
	expect_clean(test);
}

static void t_pause_points(struct kunit *test)
{
	struct fake_nv_proc *p = newproc(test);
	struct cbrec *r = newrec(test), *r2 = newrec(test);
	struct nvidia_p2p_page_table *t, *t2;
	struct nvidia_p2p_dma_mapping *m;
	struct pci_dev *dev = hca(test);
	u64 h[FAKE_NV_PAUSE_COUNT];
	u64 va = fake_nv_alloc(p, 2 * P64K, true);
	struct thr *th;
	int i;

	KUNIT_ASSERT_NOT_NULL(test, dev);
	for (i = 0; i < FAKE_NV_PAUSE_COUNT; i++)
		h[i] = fake_nv_pause_hits(i);
	KUNIT_EXPECT_EQ(test, pin_cb(va, P64K, &t, r), 0);
	KUNIT_EXPECT_EQ(test, pin_cb(va + P64K, P64K, &t2, r2), 0);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_dma_map_pages(dev, t, &m), 0);
	KUNIT_EXPECT_EQ(test, fake_nv_pause_hits(FAKE_NV_PAUSE_DMA_MAP) - h[FAKE_NV_PAUSE_DMA_MAP], 1);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_dma_unmap_pages(dev, t, m), 0);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, va, t), 0);
	KUNIT_EXPECT_EQ(test, fake_nv_pause_hits(FAKE_NV_PAUSE_PUT_PAGES) - h[FAKE_NV_PAUSE_PUT_PAGES], 1);
	KUNIT_EXPECT_EQ(test, fake_nv_pause_hits(FAKE_NV_PAUSE_CB_BEFORE_CLIENT), h[0]);

	/* an unarmed point parks nobody */
	KUNIT_EXPECT_EQ(test, fake_nv_pause_wait(FAKE_NV_PAUSE_PUT_PAGES, 20), -ETIMEDOUT);

	/* park the free path before the callback, from another thread */
	fake_nv_pause_arm(FAKE_NV_PAUSE_CB_BEFORE_CLIENT);
	th = thr_start(test, fn_free, p, false, va, 0, NULL, NULL);
	KUNIT_EXPECT_EQ(test, fake_nv_pause_wait(FAKE_NV_PAUSE_CB_BEFORE_CLIENT, 5000), 0);
	KUNIT_EXPECT_EQ(test, r2->calls, 0);
	KUNIT_EXPECT_EQ(test, NOW(pins_live), 1);
	fake_nv_pause_release(FAKE_NV_PAUSE_CB_BEFORE_CLIENT);
	KUNIT_EXPECT_EQ(test, thr_wait(th), 0);
	KUNIT_EXPECT_EQ(test, r2->calls, 1);
	endproc(test, p, true);
	KUNIT_EXPECT_EQ(test, r2->calls, 1);
	KUNIT_EXPECT_EQ(test, fake_nv_pause_hits(FAKE_NV_PAUSE_CB_BEFORE_CLIENT) - h[0], 1);
	KUNIT_EXPECT_EQ(test, fake_nv_pause_hits(FAKE_NV_PAUSE_CB_AFTER_CLIENT) - h[1], 1);
	pci_dev_put(dev);
	expect_clean(test);
}

/* Frees t->va of t->p once a get_pages is parked before returning, then lets it return. */
static int fn_free_before_return(struct thr *t)
{
	int ret = fake_nv_pause_wait(FAKE_NV_PAUSE_GET_PAGES_DONE, 5000);

	if (!ret)
		ret = fake_nv_free(t->p, t->va);
	fake_nv_pause_release(FAKE_NV_PAUSE_GET_PAGES_DONE);
	return ret;
}

/*
 * As nvidia.ko, which registers the callback last: a free may run the callback, and
 * tear the table down, before get_pages returns it. get_pages still answers 0 with that
 * table, and a put of it afterwards finds it torn down (0 from 535.14 on).
 */
static void t_callback_before_get_pages_returns(struct kunit *test)
{
	struct fake_nv_proc *p = newproc(test);
	struct cbrec *r = newrec(test);
	struct nvidia_p2p_page_table *t = NULL;
	u64 h = fake_nv_pause_hits(FAKE_NV_PAUSE_GET_PAGES_DONE);
	u64 va = fake_nv_alloc(p, P64K, true);
	struct thr *th;

	fake_nv_pause_arm(FAKE_NV_PAUSE_GET_PAGES_DONE);
	th = thr_start(test, fn_free_before_return, p, false, va, 0, NULL, NULL);
	KUNIT_EXPECT_EQ(test, pin_cb(va, P64K, &t, r), 0);
	KUNIT_EXPECT_EQ(test, thr_wait(th), 0);
	KUNIT_EXPECT_EQ(test, fake_nv_pause_hits(FAKE_NV_PAUSE_GET_PAGES_DONE) - h, 1);
	/* The callback ran while get_pages had not returned; the pin is gone. */
	KUNIT_EXPECT_EQ(test, r->calls, 1);
	KUNIT_EXPECT_PTR_NE(test, r->task, current);
	KUNIT_EXPECT_EQ(test, NOW(pins_live), cnt_before(test, OFF(pins_live)));
	KUNIT_EXPECT_EQ(test, D(test, callbacks_run), 1);
	if (!LEGACY)
		KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, va, t), 0);
	KUNIT_EXPECT_EQ(test, D(test, violations_total), 0);
	endproc(test, p, true);
	KUNIT_EXPECT_EQ(test, r->calls, 1);
	expect_clean(test);
}

static void t_dma_map_hca(struct kunit *test)
{
	struct fake_nv_proc *p = newproc(test);
	struct cbrec *r = newrec(test);
	struct nvidia_p2p_page_table *t, *tu;
	struct nvidia_p2p_dma_mapping *m = NULL, *mu = NULL;
	struct pci_dev *dev = hca(test);
	u64 va = fake_nv_alloc(p, 4 * P64K, true);
	u64 vu = fake_nv_alloc(p, 2 * P64K, false);
	unsigned int refs;
	u32 i;

	KUNIT_ASSERT_NOT_NULL(test, dev);
	KUNIT_EXPECT_NE(test, va, 0);
	KUNIT_EXPECT_EQ(test, pin_cb(va, 4 * P64K, &t, r), 0);
	refs = kref_read(&dev->dev.kobj.kref);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_dma_map_pages(dev, t, &m), 0);
	KUNIT_ASSERT_NOT_NULL(test, m);
	/* The mapping names its peer without a reference on it (docs/abi.md 1.1). */
	KUNIT_EXPECT_EQ(test, kref_read(&dev->dev.kobj.kref), refs);
	KUNIT_EXPECT_EQ(test, m->version, NVIDIA_P2P_DMA_MAPPING_VERSION);
	KUNIT_EXPECT_EQ(test, m->page_size_type, NVIDIA_P2P_PAGE_SIZE_64KB);
	KUNIT_EXPECT_EQ(test, m->entries, 4);
	KUNIT_EXPECT_PTR_EQ(test, m->pci_dev, dev);
	for (i = 0; i < 4; i++) {
		KUNIT_EXPECT_NE(test, m->dma_addresses[i], 0);
		if (!device_iommu_mapped(&dev->dev))
			KUNIT_EXPECT_EQ(test, m->dma_addresses[i], fake_nv_phys(p, va + i * P64K));
	}
	KUNIT_EXPECT_EQ(test, NOW(dma_mappings_live), 1);
	/* unbacked memory above 4 GiB: reachable with a 64-bit mask */
	KUNIT_EXPECT_EQ(test, pin_cb(vu, 2 * P64K, &tu, r), 0);
	KUNIT_EXPECT_GE(test, tu->pages[0]->physical_address, 0x4000000000ULL);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_dma_map_pages(dev, tu, &mu), 0);
	KUNIT_EXPECT_EQ(test, NOW(dma_mappings_live), 2);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_dma_unmap_pages(dev, tu, mu), 0);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_dma_unmap_pages(dev, t, m), 0);
	KUNIT_EXPECT_EQ(test, m->version >> 16, 0xDEAD);
	KUNIT_EXPECT_EQ(test, NOW(dma_mappings_live), 0);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, va, t), 0);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, vu, tu), 0);
	KUNIT_EXPECT_EQ(test, D(test, violations_total), 0);
	KUNIT_EXPECT_EQ(test, D(test, refused_dma_mask), 0);
	endproc(test, p, true);
	pci_dev_put(dev);
	expect_clean(test);
}

static void t_dma_mask_refused(struct kunit *test)
{
	struct fake_nv_proc *p = newproc(test);
	struct cbrec *r = newrec(test);
	struct nvidia_p2p_page_table *t, *tb;
	struct nvidia_p2p_dma_mapping *m = NULL;
	struct pci_dev *dev32 = fake_pci_hca(1);
	u64 vu = fake_nv_alloc(p, 2 * P64K, false);
	u64 vb = fake_nv_alloc(p, P64K, true);

	KUNIT_ASSERT_NOT_NULL(test, dev32);
	KUNIT_EXPECT_EQ(test, dma_get_mask(&dev32->dev), DMA_BIT_MASK(32));
	KUNIT_EXPECT_EQ(test, pin_cb(vu, 2 * P64K, &t, r), 0);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_dma_map_pages(dev32, t, &m), -EIO);
	KUNIT_EXPECT_NULL(test, m);
	KUNIT_EXPECT_EQ(test, D(test, refused_dma_mask), 1);
	KUNIT_EXPECT_EQ(test, NOW(dma_mappings_live), 0);
	/* the ivshmem BAR below 4 GiB is reachable at 32 bits */
	KUNIT_EXPECT_EQ(test, pin_cb(vb, P64K, &tb, r), 0);
	if (fake_nv_phys(p, vb) + P64K <= SZ_4G) {
		KUNIT_EXPECT_EQ(test, nvidia_p2p_dma_map_pages(dev32, tb, &m), 0);
		KUNIT_EXPECT_EQ(test, nvidia_p2p_dma_unmap_pages(dev32, tb, m), 0);
	}
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, vu, t), 0);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, vb, tb), 0);
	KUNIT_EXPECT_EQ(test, D(test, violations_total), 0);
	endproc(test, p, true);
	pci_dev_put(dev32);
	expect_clean(test);
}

static void t_unmap_wrong_peer(struct kunit *test)
{
	struct pci_dev *other = fake_pci_hca(1);
	struct mapped x;

	KUNIT_ASSERT_NOT_NULL(test, other);
	mapped_start(test, &x, P64K);
	/* NULL arguments: -EINVAL before anything else, nothing counted */
	KUNIT_EXPECT_EQ(test, nvidia_p2p_dma_unmap_pages(NULL, x.t, x.m), -EINVAL);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_dma_unmap_pages(x.dev, NULL, x.m), -EINVAL);
	KUNIT_EXPECT_EQ(test, D(test, violations_total), 0);
	/* 535.14+ WARNs and unmaps for the peer it mapped for, answering 0 */
	KUNIT_EXPECT_EQ(test, nvidia_p2p_dma_unmap_pages(other, x.t, x.m), LEGACY ? -EINVAL : 0);
	pci_dev_put(other);
	KUNIT_EXPECT_EQ(test, DV(test, FAKE_NV_V_UNMAP_WRONG_PEER), 1);
	KUNIT_EXPECT_EQ(test, D(test, violations_total), 1);
	KUNIT_EXPECT_EQ(test, NOW(dma_mappings_live), LEGACY ? 1 : 0);
	if (LEGACY)
		KUNIT_EXPECT_EQ(test, nvidia_p2p_dma_unmap_pages(x.dev, x.t, x.m), 0);
	/* a second unmap of the same mapping: not in the table's list any more */
	KUNIT_EXPECT_EQ(test, nvidia_p2p_dma_unmap_pages(x.dev, x.t, x.m), LEGACY ? -EINVAL : 0);
	KUNIT_EXPECT_EQ(test, DV(test, FAKE_NV_V_DOUBLE_UNMAP), 1);
	KUNIT_EXPECT_EQ(test, NOW(dma_mappings_live), 0);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, x.va, x.t), 0);
	KUNIT_EXPECT_EQ(test, D(test, violations_total), 2);
	endproc(test, x.p, true);
	mapped_end(test, &x);
}

static void t_double_put(struct kunit *test)
{
	struct fake_nv_proc *p = newproc(test);
	struct cbrec *r = newrec(test);
	struct nvidia_p2p_page_table *t;
	u64 va = fake_nv_alloc(p, P64K, false);

	KUNIT_EXPECT_EQ(test, pin_cb(va, P64K, &t, r), 0);
	/* 535.14+ does not look at the address: another one unpins all the same */
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, va + P64K, t), LEGACY ? -EINVAL : 0);
	if (LEGACY)
		KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, va, t), 0);
	KUNIT_EXPECT_EQ(test, NOW(pins_live), cnt_before(test, OFF(pins_live)));
	KUNIT_EXPECT_EQ(test, D(test, violations_total), 0);
	/* 535.14+ does not find it ("not found" is 0); counted all the same */
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, va, t), LEGACY ? -EINVAL : 0);
	KUNIT_EXPECT_EQ(test, DV(test, FAKE_NV_V_DOUBLE_PUT), 1);
	KUNIT_EXPECT_EQ(test, D(test, violations_total), 1);
	/* a NULL table: 0, first thing, nothing counted */
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, va, NULL), 0);
	KUNIT_EXPECT_EQ(test, D(test, violations_total), 1);
	endproc(test, p, true);
	KUNIT_EXPECT_EQ(test, r->calls, 0);
	expect_clean(test);
}

static void t_unknown_table(struct kunit *test)
{
	struct fake_nv_proc *p = newproc(test);
	struct cbrec *r = newrec(test);
	struct nvidia_p2p_page_table *t, *bogus;
	struct nvidia_p2p_dma_mapping *m, *bogusm;
	struct pci_dev *dev = hca(test);
	u64 va = fake_nv_alloc(p, P64K, true);

	bogus = kunit_kzalloc(test, sizeof(*bogus), GFP_KERNEL);
	bogusm = kunit_kzalloc(test, sizeof(*bogusm), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, bogusm);
	KUNIT_EXPECT_EQ(test, pin_cb(va, P64K, &t, r), 0);
	/* What nvidia.ko 535.14+ answers (0 where it looks the object up and misses, or
	 * does nothing); the pre-535.14 build keeps -EINVAL. Each one is counted. */
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, va, bogus), LEGACY ? -EINVAL : 0);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_dma_map_pages(dev, bogus, &m), -EINVAL);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_dma_unmap_pages(dev, t, bogusm), LEGACY ? -EINVAL : 0);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_dma_unmap_pages(dev, bogus, bogusm), -EINVAL);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_free_page_table(bogus), LEGACY ? -EINVAL : 0);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_free_dma_mapping(bogusm), LEGACY ? -EINVAL : 0);
	KUNIT_EXPECT_EQ(test, DV(test, FAKE_NV_V_UNKNOWN_TABLE), 6);
	KUNIT_EXPECT_EQ(test, D(test, violations_total), 6);
	/* NULL arguments of dma_map: -EINVAL before anything else, nothing counted */
	KUNIT_EXPECT_EQ(test, nvidia_p2p_dma_map_pages(dev, NULL, &m), -EINVAL);
	KUNIT_EXPECT_EQ(test, D(test, violations_total), 6);
	KUNIT_EXPECT_EQ(test, NOW(pins_live), 1);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, va, t), 0);
	endproc(test, p, true);
	pci_dev_put(dev);
	expect_clean(test);
}

static void t_exit_put_first(struct kunit *test)
{
	struct mapped x;

	mapped_start(test, &x, 2 * P64K);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_dma_unmap_pages(x.dev, x.t, x.m), 0);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, x.va, x.t), 0);
	endproc(test, x.p, true);
	KUNIT_EXPECT_EQ(test, x.r->calls, 0);
	KUNIT_EXPECT_EQ(test, D(test, callbacks_run), 0);
	KUNIT_EXPECT_EQ(test, D(test, violations_total), 0);
	mapped_end(test, &x);
}

static void t_exit_before_put(struct kunit *test)
{
	struct mapped x;

	mapped_start(test, &x, 2 * P64K);
	x.r->do_frees = true;	/* allowed inside the callback */
	x.r->map = x.m;
	x.r->table = x.t;
	endproc(test, x.p, true);	/* process exit: the callback runs, the driver unmaps */
	KUNIT_EXPECT_EQ(test, x.r->calls, 1);
	KUNIT_EXPECT_TRUE(test, x.r->lock_held);
	KUNIT_EXPECT_EQ(test, x.r->free_map_ret, 0);
	KUNIT_EXPECT_EQ(test, x.r->free_table_ret, 0);
	KUNIT_EXPECT_EQ(test, NOW(dma_mappings_live), 0);
	KUNIT_EXPECT_EQ(test, NOW(pins_live), 0);
	KUNIT_EXPECT_EQ(test, D(test, violations_total), 0);
	/* the client's late unmap is a use-after-free: caught, nothing touched */
	KUNIT_EXPECT_EQ(test, nvidia_p2p_dma_unmap_pages(x.dev, x.t, x.m), -EINVAL);
	KUNIT_EXPECT_EQ(test, DV(test, FAKE_NV_V_UNMAP_AFTER_FREE), 1);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_dma_map_pages(x.dev, x.t, &x.m), -EINVAL);
	KUNIT_EXPECT_EQ(test, DV(test, FAKE_NV_V_MAP_AFTER_FREE), 1);
	KUNIT_EXPECT_EQ(test, D(test, violations_total), 2);
	mapped_end(test, &x);
}

static void t_wrong_put_kind(struct kunit *test)
{
	struct fake_nv_proc *p = newproc(test);
	struct cbrec *r = newrec(test);
	struct nvidia_p2p_page_table *tc, *tp;
	u64 va = fake_nv_alloc(p, P64K, false);

	KUNIT_EXPECT_EQ(test, pin_cb(va, P64K, &tc, r), 0);
	KUNIT_EXPECT_EQ(test, pin_persist(va, P64K, &tp), 0);
#ifndef FAKE_NV_LEGACY
	/* put_pages does not find a persistent pin: 0, the pin stays (counted) */
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, va, tp), 0);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages_persistent(va, tc, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, DV(test, FAKE_NV_V_WRONG_PUT_KIND), 2);
	KUNIT_EXPECT_EQ(test, D(test, violations_total), 2);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages_persistent(va, tp, 1), -EINVAL); /* flags */
	KUNIT_EXPECT_EQ(test, NOW(pins_live), 2);
#else
	KUNIT_EXPECT_EQ(test, D(test, violations_total), 0);
#endif
	KUNIT_EXPECT_EQ(test, put_persist(va, tp), 0);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, va, tc), 0);
	endproc(test, p, true);
	expect_clean(test);
}

/*
 * ABI doc 1.4b: put_pages of a callback pin from another process (same mm other
 * tgid, or no mm at all) does not find the pin and returns 0; the pin and its
 * callback stay registered, and the callback fires when the owner frees the memory.
 */
static void t_put_wrong_process(struct kunit *test)
{
	struct fake_nv_proc *p = newproc(test);
	struct cbrec *r = newrec(test);
	struct nvidia_p2p_page_table *t;
	u64 va = fake_nv_alloc(p, P64K, false);
	struct thr *th;

	KUNIT_EXPECT_EQ(test, pin_cb(va, P64K, &t, r), 0);
	th = thr_start(test, fn_put, p, true, va, 0, t, NULL);	/* same mm, other tgid */
	KUNIT_EXPECT_EQ(test, thr_wait(th), 0);
	th = thr_start(test, fn_put, NULL, false, va, 0, t, NULL);	/* no mm */
	KUNIT_EXPECT_EQ(test, thr_wait(th), 0);
	KUNIT_EXPECT_EQ(test, D(test, puts_not_owner), 2);
	KUNIT_EXPECT_EQ(test, D(test, violations_total), 0);
	KUNIT_EXPECT_EQ(test, NOW(pins_live), 1);
	KUNIT_EXPECT_EQ(test, r->calls, 0);
	/* Still registered: the owner's free runs the callback with its data. */
	KUNIT_EXPECT_EQ(test, fake_nv_free(p, va), 0);
	KUNIT_EXPECT_EQ(test, r->calls, 1);
	KUNIT_EXPECT_EQ(test, NOW(pins_live), 0);
	/* The owner's put after the callback: 0 on 535.14+, nothing to do. */
	if (!fake_nv_is_pre_535())
		KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, va, t), 0);
	endproc(test, p, true);
	expect_clean(test);
}

static void t_unmapped_at_put(struct kunit *test)
{
	struct mapped x;

	mapped_start(test, &x, P64K);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, x.va, x.t), 0);
	KUNIT_EXPECT_EQ(test, DV(test, FAKE_NV_V_UNMAPPED_AT_PUT), 1);
	KUNIT_EXPECT_EQ(test, NOW(dma_mappings_live), 0);	/* the driver unmapped */
	KUNIT_EXPECT_EQ(test, nvidia_p2p_dma_unmap_pages(x.dev, x.t, x.m), -EINVAL);
	KUNIT_EXPECT_EQ(test, DV(test, FAKE_NV_V_UNMAP_AFTER_FREE), 1);
	KUNIT_EXPECT_EQ(test, D(test, violations_total), 2);
	endproc(test, x.p, true);
	mapped_end(test, &x);
}

static void t_calls_in_callback(struct kunit *test)
{
	struct mapped x;

	mapped_start(test, &x, P64K);
	x.r->table = x.t;
	x.r->map = x.m;
	x.r->peer = x.dev;
	x.r->do_put = true;
	x.r->do_unmap = true;
	x.r->do_get = true;
	x.r->do_map = true;
	KUNIT_EXPECT_EQ(test, fake_nv_free(x.p, x.va), 0);
	KUNIT_EXPECT_EQ(test, x.r->calls, 1);
	/* As nvidia.ko, whose API lock the callback runs under: EIO, except the unmap,
	 * which takes no RM lock and is done (each counted all the same). */
	KUNIT_EXPECT_EQ(test, x.r->put_ret, -EIO);
	KUNIT_EXPECT_EQ(test, x.r->get_ret, -EIO);
	KUNIT_EXPECT_EQ(test, x.r->map_ret, -EIO);
	KUNIT_EXPECT_EQ(test, x.r->unmap_ret, 0);
	KUNIT_EXPECT_EQ(test, DV(test, FAKE_NV_V_PUT_IN_CALLBACK), 1);
	KUNIT_EXPECT_EQ(test, DV(test, FAKE_NV_V_UNMAP_IN_CALLBACK), 1);
	KUNIT_EXPECT_EQ(test, DV(test, FAKE_NV_V_CALL_IN_CALLBACK), 2);
	KUNIT_EXPECT_EQ(test, D(test, violations_total), 4);
	endproc(test, x.p, true);
	mapped_end(test, &x);
}

static void t_in_flight_at_free(struct kunit *test)
{
	struct fake_nv_proc *p = newproc(test);
	struct cbrec *r = newrec(test);
	struct nvidia_p2p_page_table *t;
	struct pci_dev *dev = hca(test);
	u64 va = fake_nv_alloc(p, 2 * P64K, true);
	struct thr *mapper, *freer;
	int i;

	KUNIT_EXPECT_EQ(test, pin_cb(va, 2 * P64K, &t, r), 0);
	fake_nv_pause_arm(FAKE_NV_PAUSE_DMA_MAP);
	mapper = thr_start(test, fn_map, NULL, false, 0, 0, t, dev);
	KUNIT_EXPECT_EQ(test, fake_nv_pause_wait(FAKE_NV_PAUSE_DMA_MAP, 5000), 0);
	freer = thr_start(test, fn_free, p, false, va, 0, NULL, NULL);
	for (i = 0; i < 500 && !DV(test, FAKE_NV_V_CALL_IN_FLIGHT_AT_FREE); i++)
		msleep(10);
	KUNIT_EXPECT_EQ(test, DV(test, FAKE_NV_V_CALL_IN_FLIGHT_AT_FREE), 1);
	KUNIT_EXPECT_EQ(test, r->calls, 1);
	fake_nv_pause_release(FAKE_NV_PAUSE_DMA_MAP);
	KUNIT_EXPECT_EQ(test, thr_wait(mapper), 0);	/* it mapped a live table */
	KUNIT_EXPECT_EQ(test, thr_wait(freer), 0);
	KUNIT_EXPECT_EQ(test, NOW(dma_mappings_live), 0);	/* the free path unmapped it */
	KUNIT_EXPECT_EQ(test, D(test, violations_total), 1);
	endproc(test, p, true);
	pci_dev_put(dev);
	expect_clean(test);
}

static void t_alloc_and_config(struct kunit *test)
{
	struct fake_nv_proc *p = newproc(test);
	struct fake_nv_config cfg, bad;
	u64 a, b, u;

	a = fake_nv_alloc(p, 100, true);		/* rounded up to 64 KiB */
	KUNIT_EXPECT_EQ(test, a, 0x7f0000000000ULL);
	b = fake_nv_alloc(p, P64K, true);
	KUNIT_EXPECT_EQ(test, b, a + P64K);
	KUNIT_EXPECT_EQ(test, fake_nv_alloc_at(p, a, P64K, false), 0);	/* taken */
	KUNIT_EXPECT_EQ(test, fake_nv_alloc_at(p, a + 4096, P64K, false), 0);
	KUNIT_EXPECT_EQ(test, fake_nv_alloc(p, 0, false), 0);
	u = fake_nv_alloc(p, P64K, false);
	KUNIT_EXPECT_GE(test, fake_nv_phys(p, u), 0x4000000000ULL);
	KUNIT_EXPECT_LT(test, fake_nv_phys(p, a), 0x4000000000ULL);
	KUNIT_EXPECT_NE(test, fake_nv_phys(p, a), fake_nv_phys(p, b));
	KUNIT_EXPECT_PTR_NE(test, fake_nv_proc_mm(p), NULL);
	KUNIT_EXPECT_PTR_EQ(test, fake_nv_proc_mm(p), current->mm);
	KUNIT_EXPECT_EQ(test, fake_nv_free(p, a + P64K * 100), -ENOENT);
	KUNIT_EXPECT_EQ(test, fake_nv_free(p, a), 0);
	KUNIT_EXPECT_EQ(test, fake_nv_alloc_at(p, a, P64K, false), a);

	fake_nv_get_config(&cfg);
	KUNIT_EXPECT_EQ(test, cfg.bar1_size, SZ_256M);
	KUNIT_EXPECT_EQ(test, cfg.pin_cost_us, 0);
	bad = cfg;
	bad.bar1_reserve = cfg.bar1_size + 1;
	KUNIT_EXPECT_EQ(test, fake_nv_set_config(&bad), -EINVAL);
	bad = cfg;
	bad.page_table_major = 0;
	KUNIT_EXPECT_EQ(test, fake_nv_set_config(&bad), -EINVAL);
	KUNIT_EXPECT_STREQ(test, fake_nv_violation_name(FAKE_NV_V_PUT_IN_CALLBACK),
			   "PUT_IN_CALLBACK");
	KUNIT_EXPECT_STREQ(test, fake_nv_violation_name(FAKE_NV_V_COUNT), "?");
	endproc(test, p, true);
	expect_clean(test);
}

/*
 * free_on_release (the benchmark's setting): a mapping unmapped and a table put are
 * freed, as nvidia.ko frees them, so a stale pointer to either is unknown afterwards
 * (under quarantine: a double unmap, a double put); a table put with mappings still
 * live is kept, since the mappings the driver tore down point to it.
 */
static void t_free_on_release(struct kunit *test)
{
	struct fake_nv_config cfg;
	struct mapped x;

	fake_nv_get_config(&cfg);
	cfg.free_on_release = true;
	KUNIT_ASSERT_EQ(test, fake_nv_set_config(&cfg), 0);
	mapped_start(test, &x, P64K);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_dma_unmap_pages(x.dev, x.t, x.m), 0);
	KUNIT_EXPECT_EQ(test, NOW(dma_mappings_live), 0);
	/* the mapping is gone: not a double unmap, a mapping never handed out */
	KUNIT_EXPECT_EQ(test, nvidia_p2p_dma_unmap_pages(x.dev, x.t, x.m), LEGACY ? -EINVAL : 0);
	KUNIT_EXPECT_EQ(test, DV(test, FAKE_NV_V_UNKNOWN_TABLE), 1);
	KUNIT_EXPECT_EQ(test, DV(test, FAKE_NV_V_DOUBLE_UNMAP), 0);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, x.va, x.t), 0);
	/* the table is gone too: a second put finds nothing it handed out */
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, x.va, x.t), LEGACY ? -EINVAL : 0);
	KUNIT_EXPECT_EQ(test, DV(test, FAKE_NV_V_UNKNOWN_TABLE), 2);
	KUNIT_EXPECT_EQ(test, DV(test, FAKE_NV_V_DOUBLE_PUT), 0);
	/* put with a mapping live: the driver tears it down, and keeps the pin */
	KUNIT_EXPECT_EQ(test, pin_cb(x.va, P64K, &x.t, x.r), 0);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_dma_map_pages(x.dev, x.t, &x.m), 0);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, x.va, x.t), 0);
	KUNIT_EXPECT_EQ(test, DV(test, FAKE_NV_V_UNMAPPED_AT_PUT), 1);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, x.va, x.t), LEGACY ? -EINVAL : 0);
	KUNIT_EXPECT_EQ(test, DV(test, FAKE_NV_V_DOUBLE_PUT), 1);
	KUNIT_EXPECT_EQ(test, DV(test, FAKE_NV_V_UNKNOWN_TABLE), 2);
	endproc(test, x.p, true);
	KUNIT_EXPECT_EQ(test, x.r->calls, 0);
	mapped_end(test, &x);
}

static void t_pin_cost(struct kunit *test)
{
	struct fake_nv_proc *p = newproc(test);
	struct cbrec *r = newrec(test);
	struct nvidia_p2p_page_table *t;
	struct fake_nv_config cfg;
	u64 va = fake_nv_alloc(p, P64K, false);
	ktime_t t0;

	fake_nv_get_config(&cfg);
	cfg.pin_cost_us = 20000;
	cfg.unpin_cost_us = 20000;
	KUNIT_EXPECT_EQ(test, fake_nv_set_config(&cfg), 0);
	t0 = ktime_get();
	KUNIT_EXPECT_EQ(test, pin_cb(va, P64K, &t, r), 0);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, va, t), 0);
	KUNIT_EXPECT_GE(test, ktime_us_delta(ktime_get(), t0), 40000);
	endproc(test, p, true);
	expect_clean(test);
}

static struct kunit_case fake_nv_cases[] = {
	KUNIT_CASE(t_alignment),
	KUNIT_CASE(t_null_callback),
	KUNIT_CASE(t_not_owner),
	KUNIT_CASE(t_no_memory),
	KUNIT_CASE(t_bar1),
	KUNIT_CASE(t_injected),
	KUNIT_CASE(t_versions),
	KUNIT_CASE(t_persistent_outlives_free),
	KUNIT_CASE(t_callback_once_locked),
	KUNIT_CASE(t_put_after_callback),
	KUNIT_CASE(t_pause_points),
	KUNIT_CASE(t_callback_before_get_pages_returns),
	KUNIT_CASE(t_dma_map_hca),
	KUNIT_CASE(t_dma_mask_refused),
	KUNIT_CASE(t_unmap_wrong_peer),
	KUNIT_CASE(t_double_put),
	KUNIT_CASE(t_unknown_table),
	KUNIT_CASE(t_exit_put_first),
	KUNIT_CASE(t_exit_before_put),
	KUNIT_CASE(t_wrong_put_kind),
	KUNIT_CASE(t_put_wrong_process),
	KUNIT_CASE(t_unmapped_at_put),
	KUNIT_CASE(t_calls_in_callback),
	KUNIT_CASE(t_in_flight_at_free),
	KUNIT_CASE(t_alloc_and_config),
	KUNIT_CASE(t_pin_cost),
	KUNIT_CASE(t_free_on_release),
	{}
};

static struct kunit_suite fake_nv_suite = {
	.name = SUITE_NAME,
	.init = suite_init,
	.exit = suite_exit,
	.test_cases = fake_nv_cases,
};
kunit_test_suite(fake_nv_suite);
