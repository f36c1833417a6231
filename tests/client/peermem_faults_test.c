// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * KUnit suite peermem_faults: allocation-failure injection at every allocation a
 * registration makes, on the debug kernel only (CONFIG_FAULT_INJECTION, FAILSLAB,
 * FAIL_PAGE_ALLOC; scripts/kconfig/debug.config). Built as peermem_test_faults.ko
 * by `make M=tests/client PEERMEM_TEST_FAULTS=1` (scripts/test-debug), never for the
 * dev kernel. Expects peermem loaded in callback mode (persistent_api_support=0):
 * "nv_mem" with callback pins and INVALIDATE_UNMAPS, "nv_mem_nc" with persistent pins.
 *
 * Each case runs one whole scenario in a fail-nth loop: for n = 1, 2, 3, ... the
 * n-th fault-injectable allocation (every should_fail() call of this thread: slab
 * and page allocations of peermem, of the fakes, of the kernel underneath) fails
 * (current->fail_nth = n, lib/fault-inject.c should_fail_ex()), the scenario runs,
 * and fail_nth read back tells whether the failure fired (0) or the scenario made
 * fewer than n allocations (> 0): the loop stops there, every allocation having
 * failed once. For each n:
 *   - every registration succeeds or fails with -ENOMEM, -EFAULT or -EIO;
 *   - a successful registration maps the GPU memory, and is invalidated once when
 *     the memory is freed (callback pins);
 *   - neither fake counted a contract violation;
 *   - once the fake process has exited, nothing is pinned, mapped or registered.
 * Leaks are left to kmemleak (tests/qemu/plans/kmemleak.sh, after every module is
 * unloaded). Which peermem function each failure hit is read from the failslab /
 * fail_page_alloc stack dumps by tests/qemu/plans/faults.sh.
 *
 * Only the scenario itself runs armed: the fake process is created and exits
 * outside the window, and no KUNIT_* assertion runs inside it (their own allocations
 * would be counted).
 */
#include <kunit/test.h>
#include <linux/delay.h>
#include <linux/err.h>
#include <linux/sched.h>
#include <linux/sizes.h>
#include <linux/string.h>

#include "fake_ib_core.h"
#include "fake_nvidia.h"

#ifndef CONFIG_FAULT_INJECTION
#error "peermem_faults needs CONFIG_FAULT_INJECTION (the debug kernel)"
#endif

#define P64K ((u64)SZ_64K)
/* A scenario makes a few hundred injectable calls at most; far beyond that, the
 * loop is not converging. */
#define MAX_N 3000

/* What one armed run of a scenario saw. */
struct outcome {
	int err[2];		/* per registration: 0 ok, -errno, or 1 not attempted */
	bool setup_failed;	/* the fake's GPU allocation itself failed */
	int bad_invalidations;	/* invalidated other than once ("nv_mem") / never ("nv_mem_nc") */
	int bad_dma;		/* successful registrations without a DMA address */
	int fallbacks;		/* invalidatable buffers that landed on "nv_mem_nc" */
};

/* Totals, per case and for the suite. */
struct tally {
	u64 runs, injected;
	u64 ok, enomem, efault, eio, other, setup_failed, fallbacks, bad_runs;
};

static struct tally suite_tally;

static void tally_err(struct tally *t, int err)
{
	switch (err) {
	case 1:
		break;
	case 0:
		t->ok++;
		break;
	case -ENOMEM:
		t->enomem++;
		break;
	case -EFAULT:
		t->efault++;
		break;
	case -EIO:
		t->eio++;
		break;
	default:
		t->other++;
	}
}

static void tally_add(struct tally *dst, const struct tally *src)
{
	dst->runs += src->runs;
	dst->injected += src->injected;
	dst->ok += src->ok;
	dst->enomem += src->enomem;
	dst->efault += src->efault;
	dst->eio += src->eio;
	dst->other += src->other;
	dst->setup_failed += src->setup_failed;
	dst->fallbacks += src->fallbacks;
	dst->bad_runs += src->bad_runs;
}

static struct fake_mr *reg_on(u64 addr, u64 len, bool can_invalidate)
{
	struct fake_reg_opts o = {
		.dma_device = NULL,
		.can_invalidate = can_invalidate,
		.writable = true,
	};

	return fake_core_reg_mr(addr, len, &o);
}

static int mr_err(struct fake_mr *mr)
{
	return IS_ERR(mr) ? (int)PTR_ERR(mr) : 0;
}

/*
 * An invalidatable buffer normally goes to "nv_mem" (callback pin). When peermem's
 * acquire fails (an allocation failure before it could claim the range), the core
 * takes the error as "not mine", as MOFED does, and offers the buffer to the next
 * client, "nv_mem_nc": a persistent pin, never invalidated. Counted, not an error.
 */
static bool on_nc(struct fake_mr *mr, struct outcome *o)
{
	if (strcmp(fake_core_mr_client(mr), "nv_mem_nc"))
		return false;
	o->fallbacks++;
	return true;
}

/* ---- scenarios (run armed; no KUNIT_* inside) ------------------------------- */

/* GPU memory for a scenario; 0 (the run counted as setup_failed) if the injected
 * failure hit the fake's own allocation. */
static u64 scenario_alloc(struct fake_nv_proc *p, u64 size, struct outcome *o)
{
	u64 va = fake_nv_alloc(p, size, true);

	if (!va)
		o->setup_failed = true;
	return va;
}

/* A registration, its DMA mapping, invalidation by cuMemFree, deregistration. */
static void sc_reg_map_free_dereg(struct fake_nv_proc *p, struct outcome *o)
{
	struct fake_mr *mr;
	u64 va;

	va = scenario_alloc(p, SZ_1M, o);
	if (!va)
		return;
	/* Unaligned, three 64 KiB pages and a bit: several SG entries' worth. */
	mr = reg_on(va + 100, 3 * P64K, true);
	o->err[0] = mr_err(mr);
	if (!IS_ERR(mr) && !fake_core_mr_dma_addr(mr, 0))
		o->bad_dma++;
	fake_nv_free(p, va);
	if (!IS_ERR(mr)) {
		if (fake_core_mr_invalidations(mr) != (on_nc(mr, o) ? 0 : 1))
			o->bad_invalidations++;
		fake_core_dereg_mr(mr);
	}
}

/* A registration, then a covered one reusing its pin (callback mode), released in
 * the order that leaves the covered one last. */
static void sc_covered_reregistration(struct fake_nv_proc *p, struct outcome *o)
{
	struct fake_mr *big, *small = ERR_PTR(-ENOENT);
	u64 va;

	va = scenario_alloc(p, SZ_2M, o);
	if (!va)
		return;
	big = reg_on(va, SZ_2M, true);
	o->err[0] = mr_err(big);
	if (!IS_ERR(big)) {
		if (!fake_core_mr_dma_addr(big, 0))
			o->bad_dma++;
		small = reg_on(va + SZ_1M + 123, 1000, true);
		o->err[1] = mr_err(small);
		if (!IS_ERR(small) && !fake_core_mr_dma_addr(small, 0))
			o->bad_dma++;
		on_nc(big, o);
		fake_core_dereg_mr(big);
	}
	if (!IS_ERR(small)) {
		on_nc(small, o);
		fake_core_dereg_mr(small);
	}
	fake_nv_free(p, va);
}

/* A buffer that cannot be invalidated: "nv_mem_nc", a persistent pin that outlives
 * cuMemFree until deregistration. */
static void sc_persistent_nc(struct fake_nv_proc *p, struct outcome *o)
{
	struct fake_mr *mr;
	u64 va;

	va = scenario_alloc(p, SZ_1M, o);
	if (!va)
		return;
	mr = reg_on(va + P64K, 2 * P64K + 1, false);
	o->err[0] = mr_err(mr);
	if (!IS_ERR(mr) && !fake_core_mr_dma_addr(mr, 0))
		o->bad_dma++;
	fake_nv_free(p, va);
	if (!IS_ERR(mr)) {
		if (fake_core_mr_invalidations(mr) != 0 ||
		    strcmp(fake_core_mr_client(mr), "nv_mem_nc"))
			o->bad_invalidations++;
		fake_core_dereg_mr(mr);
	}
}

/* ---- the fail-nth loop --------------------------------------------------------- */

static bool clean_errno(int err)
{
	return err == 1 || err == 0 || err == -ENOMEM || err == -EFAULT || err == -EIO;
}

/* Live counts of the fakes: what one run must leave as it found it. */
struct live {
	u64 pins, dma, bar1, mrs, nv_viol, core_viol;
};

static void live_now(struct live *l)
{
	struct fake_nv_counters nv;
	struct fake_core_counters core;

	fake_nv_get_counters(&nv);
	fake_core_get_counters(&core);
	l->pins = nv.pins_live;
	l->dma = nv.dma_mappings_live;
	l->bar1 = nv.bar1_bytes_in_use;
	l->nv_viol = nv.violations_total;
	l->mrs = core.mrs_live;
	l->core_viol = core.violations_total;
}

/* After this many broken runs the case stops: later ones only repeat the report. */
#define MAX_BAD_RUNS 8

static void fail_nth_loop(struct kunit *test, const char *name,
			  void (*scenario)(struct fake_nv_proc *p, struct outcome *o))
{
	struct tally t = {};
	unsigned int n, left = 0;

	KUNIT_ASSERT_EQ(test, current->fail_nth, 0);
	for (n = 1; n <= MAX_N; n++) {
		struct outcome o = { .err = { 1, 1 } };
		struct fake_nv_proc *p;
		struct live before, after;
		bool bad = false;
		int i;

		live_now(&before);
		p = fake_nv_proc_create();
		KUNIT_ASSERT_NOT_NULL(test, p);
		fake_nv_proc_enter(p);

		WRITE_ONCE(current->fail_nth, n);
		scenario(p, &o);
		left = READ_ONCE(current->fail_nth);
		WRITE_ONCE(current->fail_nth, 0);

		fake_nv_proc_leave(p);
		fake_nv_proc_exit(p);
		live_now(&after);

		t.runs++;
		if (left == 0)
			t.injected++;
		if (o.setup_failed)
			t.setup_failed++;
		t.fallbacks += o.fallbacks;
		for (i = 0; i < 2; i++) {
			tally_err(&t, o.err[i]);
			if (!clean_errno(o.err[i])) {
				KUNIT_FAIL(test, "%s n=%u: registration %d failed with %d",
					   name, n, i, o.err[i]);
				bad = true;
			}
		}
		if (o.bad_dma) {
			KUNIT_FAIL(test, "%s n=%u: a registration without DMA address", name, n);
			bad = true;
		}
		if (o.bad_invalidations) {
			KUNIT_FAIL(test, "%s n=%u: a registration invalidated the wrong number of times",
				   name, n);
			bad = true;
		}
		if (after.nv_viol != before.nv_viol || after.core_viol != before.core_viol) {
			KUNIT_FAIL(test, "%s n=%u: contract violations: nvidia +%llu, core +%llu",
				   name, n, after.nv_viol - before.nv_viol,
				   after.core_viol - before.core_viol);
			bad = true;
		}
		if (after.pins != before.pins || after.dma != before.dma ||
		    after.bar1 != before.bar1 || after.mrs != before.mrs) {
			KUNIT_FAIL(test,
				   "%s n=%u: left after the process exited: pins %llu->%llu, dma mappings %llu->%llu, bar1 bytes %llu->%llu, core mrs %llu->%llu",
				   name, n, before.pins, after.pins, before.dma, after.dma,
				   before.bar1, after.bar1, before.mrs, after.mrs);
			bad = true;
		}
		if (bad && ++t.bad_runs >= MAX_BAD_RUNS) {
			kunit_err(test, "%s: %d broken runs, stopping at n=%u", name,
				  MAX_BAD_RUNS, n);
			break;
		}
		if (left > 0) {
			/* Fewer than n injectable calls: every one has failed once. This run
			 * injected nothing, so it must have succeeded throughout. */
			KUNIT_EXPECT_FALSE_MSG(test, o.setup_failed || o.err[0] || o.fallbacks ||
					       (o.err[1] != 0 && o.err[1] != 1),
					       "%s n=%u: failed without an injected failure (%d, %d)",
					       name, n, o.err[0], o.err[1]);
			break;
		}
		/* Let the plan's /dev/kmsg reader keep up with the stack dumps. */
		msleep(5);
	}
	KUNIT_EXPECT_TRUE_MSG(test, left > 0 || t.bad_runs >= MAX_BAD_RUNS,
			      "%s: no end to the injectable calls after %u runs", name, MAX_N);
	/* Machine-readable for tests/qemu/plans/faults.sh. */
	kunit_info(test,
		   "peermem_faults %s: runs=%llu injected=%llu ok=%llu enomem=%llu efault=%llu eio=%llu other=%llu setup_failed=%llu fallbacks_to_nc=%llu broken_runs=%llu\n",
		   name, t.runs, t.injected, t.ok, t.enomem, t.efault, t.eio, t.other,
		   t.setup_failed, t.fallbacks, t.bad_runs);
	tally_add(&suite_tally, &t);
}

/*
 * The kernel's own allocations under the scenario are not all deterministic (KASAN's
 * stack depot, kmemleak's and debugobjects' pools refill when they run low), so the
 * n-th call of one pass is not always the n-th of the next and a site can be
 * stepped over once: each loop runs PASSES times.
 */
#define PASSES 3

static void reg_map_free_dereg(struct kunit *test)
{
	int i;

	for (i = 0; i < PASSES; i++)
		fail_nth_loop(test, "reg_map_free_dereg", sc_reg_map_free_dereg);
}

static void covered_reregistration(struct kunit *test)
{
	int i;

	for (i = 0; i < PASSES; i++)
		fail_nth_loop(test, "covered_reregistration", sc_covered_reregistration);
}

static void persistent_nc(struct kunit *test)
{
	int i;

	for (i = 0; i < PASSES; i++)
		fail_nth_loop(test, "persistent_nc", sc_persistent_nc);
}

static int faults_suite_init(struct kunit_suite *suite)
{
	memset(&suite_tally, 0, sizeof(suite_tally));
	return 0;
}

static void faults_suite_exit(struct kunit_suite *suite)
{
	struct tally *t = &suite_tally;

	pr_info("peermem_faults total: scenarios=3 passes=%d runs=%llu injected=%llu ok=%llu enomem=%llu efault=%llu eio=%llu other=%llu setup_failed=%llu fallbacks_to_nc=%llu broken_runs=%llu\n",
		PASSES, t->runs, t->injected, t->ok, t->enomem, t->efault, t->eio, t->other,
		t->setup_failed, t->fallbacks, t->bad_runs);
}

static struct kunit_case peermem_faults_cases[] = {
	KUNIT_CASE(reg_map_free_dereg),
	KUNIT_CASE(covered_reregistration),
	KUNIT_CASE(persistent_nc),
	{}
};

static struct kunit_suite peermem_faults_suite = {
	.name = "peermem_faults",
	.suite_init = faults_suite_init,
	.suite_exit = faults_suite_exit,
	.test_cases = peermem_faults_cases,
};
kunit_test_suite(peermem_faults_suite);

MODULE_LICENSE("Dual MIT/GPL");
MODULE_DESCRIPTION("peermem_faults: allocation-failure injection at every allocation of a registration");
