// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * KUnit suites of the peermem client, run in the dev VM against the fakes: every
 * registration goes through the fake peer-memory core (fake_core_reg_mr, standing in
 * for ibv_reg_mr) into peermem, which pins through the fake nvidia.ko. The suites
 * assert on what the fakes saw (pins made, DMA addresses, invalidations, contract
 * violations) and on the errno an application would get.
 *
 * One source, one build per peermem mode (PEERMEM_TEST_MODE, see Kbuild); each build
 * expects peermem loaded in that mode by the plan (tests/qemu/plans/test.sh):
 *   persistent  peermem defaults: "nv_mem", persistent pins (docs/abi.md 3)
 *   callback    persistent_api_support=0: "nv_mem" with callback pins and
 *               INVALIDATE_UNMAPS, plus "nv_mem_nc" with persistent pins
 *   peerdirect  persistent_api_support=0 peerdirect_support=1: "nv_mem" as a plain
 *               invalidating client (the core unmaps inside the invalidation)
 *   pre535      peermem defaults on the fake of a driver before 535.14 (no persistent
 *               pair: get_pages with a NULL callback, docs/abi.md 1.1)
 *
 * Every case ends by checking that neither fake saw a contract violation and that no
 * pin, DMA mapping or region is left.
 */
#include <kunit/test.h>
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/device.h>
#include <linux/err.h>
#include <linux/fs.h>
#include <linux/kthread.h>
#include <linux/seq_file.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/uio.h>

#include "fake_ib_core.h"
#include "fake_nvidia.h"

#if defined(PEERMEM_TEST_CALLBACK) || defined(PEERMEM_TEST_PEERDIRECT)
#define CALLBACK_PINS 1
#else
#define CALLBACK_PINS 0
#endif

#define P64K ((u64)SZ_64K)

/* ---- environment ---------------------------------------------------------- */

struct env {
	struct kunit *test;
	struct fake_nv_proc *p;
	struct fake_nv_counters nv0;
	struct fake_core_counters core0;
	struct fake_nv_config cfg0;
};

static void env_begin(struct kunit *test, struct env *e)
{
	e->test = test;
	fake_nv_get_config(&e->cfg0);
	fake_nv_get_counters(&e->nv0);
	fake_core_get_counters(&e->core0);
	e->p = fake_nv_proc_create();
	KUNIT_ASSERT_NOT_NULL(test, e->p);
	fake_nv_proc_enter(e->p);
}

static u64 pins_total(void)
{
	struct fake_nv_counters c;

	fake_nv_get_counters(&c);
	return c.pins_total;
}

/* No violation in either fake, nothing left pinned, mapped or registered. */
static void env_end(struct env *e)
{
	struct kunit *test = e->test;
	struct fake_nv_counters nv;
	struct fake_core_counters core;

	fake_nv_proc_leave(e->p);
	fake_nv_proc_exit(e->p);
	KUNIT_EXPECT_EQ(test, fake_nv_set_config(&e->cfg0), 0);
	fake_nv_get_counters(&nv);
	fake_core_get_counters(&core);
	KUNIT_EXPECT_EQ(test, nv.violations_total, e->nv0.violations_total);
	KUNIT_EXPECT_EQ(test, core.violations_total, e->core0.violations_total);
	KUNIT_EXPECT_EQ(test, nv.pins_live, 0);
	KUNIT_EXPECT_EQ(test, nv.dma_mappings_live, 0);
	KUNIT_EXPECT_EQ(test, nv.bar1_bytes_in_use, 0);
	KUNIT_EXPECT_EQ(test, core.mrs_live, 0);
}

/* A backed allocation of @size bytes of the environment's process. */
static u64 env_buffer(struct env *e, u64 size)
{
	u64 va = fake_nv_alloc(e->p, size, true);

	KUNIT_ASSERT_NE(e->test, va, 0);
	return va;
}

static struct fake_mr *reg_on(u64 addr, u64 len, struct device *dev, bool can_invalidate)
{
	struct fake_reg_opts o = {
		.dma_device = dev,
		.can_invalidate = can_invalidate,
		.writable = true,
	};

	return fake_core_reg_mr(addr, len, &o);
}

static struct fake_mr *reg(u64 addr, u64 len)
{
	return reg_on(addr, len, NULL, true);
}

/* A counter of the "nv_mem" client in the core, now (a function: small test frames). */
static noinline u64 nv_mem_stat(size_t off)
{
	struct fake_core_client_stats s;

	if (fake_core_client_stats("nv_mem", &s))
		return U64_MAX;
	return *(u64 *)((char *)&s + off);
}

#define NV_MEM_STAT(field) nv_mem_stat(offsetof(struct fake_core_client_stats, field))

/*
 * A counter of peermem's own, from its debugfs `stats` file ("name value" lines), or
 * U64_MAX if it cannot be read: what peermem still holds, where the fakes cannot see
 * it (a pin left in its registry after its callback ran holds nothing of the driver's).
 * The file is opened by suite_init, in the context of the insmod that loads the suite
 * (a test case runs in a kthread, whose root is not the guest's), and read from the
 * start each time through seq_read_iter (it has a plain .read, which kernel_read does
 * not take). peermem stays loaded while the suite runs.
 */
static struct file *peermem_stats;

static noinline u64 peermem_stat(const char *name)
{
	size_t len = strlen(name);
	struct iov_iter iter;
	struct kiocb kiocb;
	struct kvec kv;
	u64 v = U64_MAX;
	const char *l;
	ssize_t n;
	char *buf;

	if (!peermem_stats)
		return U64_MAX;
	buf = kzalloc(PAGE_SIZE, GFP_KERNEL);
	if (!buf)
		return U64_MAX;
	kv.iov_base = buf;
	kv.iov_len = PAGE_SIZE - 1;
	init_sync_kiocb(&kiocb, peermem_stats);
	kiocb.ki_pos = 0;
	iov_iter_kvec(&iter, ITER_DEST, &kv, 1, kv.iov_len);
	n = seq_read_iter(&kiocb, &iter);
	for (l = buf; n > 0 && l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		if (!strncmp(l, name, len) && l[len] == ' ') {
			if (sscanf(l + len + 1, "%llu", &v) != 1)
				v = U64_MAX;
			break;
		}
	}
	kfree(buf);
	return v;
}

/*
 * The DMA address of byte @off of @mr (a registration on the HCA) is what nvidia.ko's
 * dma_map_pages handed out for its GPU page, plus the offset in the page: the BAR
 * address without an IOMMU, an IOVA that differs from it behind one (docs/abi.md 1.3,
 * docs/testing.md "The IOMMU run").
 */
static void expect_dma_at(struct kunit *test, struct env *e, struct fake_mr *mr, u64 addr,
			  u64 off)
{
	struct device *hca = fake_core_hca_device();
	u64 in_page = (addr + off) & (P64K - 1);
	u64 phys = fake_nv_phys(e->p, addr + off);
	u64 dma = fake_core_mr_dma_addr(mr, off);

	KUNIT_EXPECT_EQ(test, dma & (P64K - 1), in_page);
	KUNIT_EXPECT_TRUE_MSG(test, fake_nv_maps(hca, phys, dma - in_page),
			      "offset %llu: DMA address %llx is not nvidia.ko's mapping of %llx",
			      off, dma, phys);
	if (device_iommu_mapped(hca))
		KUNIT_EXPECT_NE(test, dma - in_page, phys);
	else
		KUNIT_EXPECT_EQ(test, dma - in_page, phys);
}

/* Every byte offset at 64 KiB steps, and the last byte. */
static void expect_dma_matches(struct kunit *test, struct env *e, struct fake_mr *mr,
			       u64 addr, u64 len)
{
	u64 off;

	for (off = 0; off < len; off += P64K)
		expect_dma_at(test, e, mr, addr, off);
	expect_dma_at(test, e, mr, addr, len - 1);
}

/* ---- threads for the race cases -------------------------------------------- */

struct job {
	void (*fn)(struct job *j);
	struct fake_nv_proc *p;		/* adopted mm, if set (another thread: other tgid) */
	struct fake_nv_proc *owner;	/* whose allocation job_free frees */
	u64 va, len;
	struct fake_mr *mr;
	void *ctx;
	long ret;
	struct completion done;
};

static int job_main(void *data)
{
	struct job *j = data;

	if (j->p)
		fake_nv_proc_enter(j->p);
	j->fn(j);
	if (j->p)
		fake_nv_proc_leave(j->p);
	complete(&j->done);
	return 0;
}

static int job_start(struct job *j)
{
	struct task_struct *t;

	init_completion(&j->done);
	t = kthread_run(job_main, j, "peermem_test_job");
	return IS_ERR(t) ? PTR_ERR(t) : 0;
}

static bool job_wait(struct job *j)
{
	return wait_for_completion_timeout(&j->done, msecs_to_jiffies(20000)) != 0;
}

static void job_reg(struct job *j)
{
	j->mr = reg(j->va, j->len);
}

/* ---- cases for every mode ------------------------------------------------ */

static void reg_small_large_unaligned(struct kunit *test)
{
	struct env e;
	struct fake_mr *mr;
	u64 va, n;

	env_begin(test, &e);
	va = env_buffer(&e, 4 * SZ_1M);

	/* Small and unaligned: one page. */
	n = pins_total();
	mr = reg(va + 100, 10);
	KUNIT_ASSERT_FALSE(test, IS_ERR(mr));
	KUNIT_EXPECT_EQ(test, pins_total() - n, 1);
	expect_dma_matches(test, &e, mr, va + 100, 10);
	fake_core_dereg_mr(mr);

	/* Crossing a 64 KiB boundary by a byte: two pages, still one pin. */
	n = pins_total();
	mr = reg(va + P64K - 1, 2);
	KUNIT_ASSERT_FALSE(test, IS_ERR(mr));
	KUNIT_EXPECT_EQ(test, pins_total() - n, 1);
	expect_dma_matches(test, &e, mr, va + P64K - 1, 2);
	fake_core_dereg_mr(mr);

	/* Large: the whole allocation, contiguous BAR pages merge into few entries. */
	n = pins_total();
	mr = reg(va, 4 * SZ_1M);
	KUNIT_ASSERT_FALSE(test, IS_ERR(mr));
	KUNIT_EXPECT_EQ(test, pins_total() - n, 1);
	expect_dma_matches(test, &e, mr, va, 4 * SZ_1M);
	KUNIT_EXPECT_LT(test, fake_core_mr_nents(mr), 4 * SZ_1M / P64K);
	fake_core_dereg_mr(mr);
	env_end(&e);
}

static void zero_length_and_overflow_are_refused(struct kunit *test)
{
	struct env e;
	struct fake_mr *mr;
	u64 va, n;

	env_begin(test, &e);
	va = env_buffer(&e, SZ_1M);
	n = pins_total();
	mr = reg(va, 0);
	KUNIT_EXPECT_TRUE(test, IS_ERR(mr));
	mr = reg(U64_MAX - 100, 200);
	KUNIT_EXPECT_TRUE(test, IS_ERR(mr));
	mr = reg(U64_MAX - P64K + 1, 1);
	KUNIT_EXPECT_TRUE(test, IS_ERR(mr));
	KUNIT_EXPECT_EQ(test, pins_total(), n);
	env_end(&e);
}

static void disjoint_registrations_pin_once_each(struct kunit *test)
{
	struct fake_mr *mr[16];
	struct env e;
	u64 va, n, pins;
	int i;

	env_begin(test, &e);
	va = env_buffer(&e, ARRAY_SIZE(mr) * P64K);
	n = pins_total();
	for (i = 0; i < ARRAY_SIZE(mr); i++) {
		mr[i] = reg(va + i * P64K + 8, P64K - 16);
		KUNIT_ASSERT_FALSE(test, IS_ERR(mr[i]));
	}
	pins = pins_total() - n;
	KUNIT_EXPECT_EQ(test, pins, ARRAY_SIZE(mr));
	kunit_info(test, "pins per disjoint registration: %llu.%02llu (%llu pins, %zu registrations)\n",
		   pins / ARRAY_SIZE(mr), pins * 100 / ARRAY_SIZE(mr) % 100, pins, ARRAY_SIZE(mr));
	for (i = 0; i < ARRAY_SIZE(mr); i++)
		fake_core_dereg_mr(mr[i]);
	env_end(&e);
}

static void clone_vm_child_is_not_the_owner(struct kunit *test)
{
	struct job j = { .fn = job_reg, .len = SZ_64K };
	struct env e;
	u64 n;

	env_begin(test, &e);
	j.va = fake_nv_alloc(e.p, SZ_1M, true);
	KUNIT_ASSERT_NE(test, j.va, 0);
	j.p = e.p;	/* same mm, another thread group */
	n = pins_total();
	KUNIT_ASSERT_EQ(test, job_start(&j), 0);
	KUNIT_ASSERT_TRUE(test, job_wait(&j));
	/* Not this process's memory: no client claims it, the core answers EFAULT. */
	KUNIT_EXPECT_TRUE(test, IS_ERR(j.mr));
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(j.mr), -EFAULT);
	KUNIT_EXPECT_EQ(test, pins_total(), n);
	if (!IS_ERR(j.mr))
		fake_core_dereg_mr(j.mr);
	env_end(&e);
}

static void bar1_exhaustion_is_enomem(struct kunit *test)
{
	struct fake_nv_config cfg;
	struct fake_mr *mr;
	struct env e;
	u64 va;

	env_begin(test, &e);
	va = env_buffer(&e, 8 * SZ_1M);
	cfg = e.cfg0;
	cfg.bar1_size = 40 * SZ_1M;
	cfg.bar1_reserve = 36 * SZ_1M;	/* 4 MiB usable */
	KUNIT_ASSERT_EQ(test, fake_nv_set_config(&cfg), 0);
	mr = reg(va, 8 * SZ_1M);
	/* The application sees the real cause, not the core's EFAULT. */
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(mr), -ENOMEM);
	if (!IS_ERR(mr))
		fake_core_dereg_mr(mr);
	/* What fits still registers. */
	mr = reg(va, 2 * SZ_1M);
	KUNIT_EXPECT_FALSE(test, IS_ERR(mr));
	if (!IS_ERR(mr))
		fake_core_dereg_mr(mr);
	env_end(&e);
}

#define GIB (1ULL << 30)
/* An H100's BAR1 (docs/abi.md 1.4b, 1.5): 2,097,152 pages of 64 KiB. */
#define H100_BAR1 (128 * GIB)
#define BAR1_RESERVE (36ULL * SZ_1M)

/*
 * A registration of @len bytes of synthetic GPU memory (no backing: nothing DMAs into
 * it) under a BAR1 of an H100: it either succeeds with SG entries that cover it in
 * order, contiguous pages merged up to the HCA's 2 GiB segment and none longer, or
 * fails with @want.
 */
static void reg_whole_gpu(struct kunit *test, struct env *e, u64 len, int want)
{
	u64 va = fake_nv_alloc(e->p, len, false), at, phys;
	struct fake_mr *mr;
	int i, n;

	KUNIT_ASSERT_NE(test, va, 0);
	phys = fake_nv_phys(e->p, va);
	mr = reg(va, len);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(mr), want);
	if (IS_ERR(mr))
		goto out;
	n = fake_core_mr_nents(mr);
	KUNIT_EXPECT_EQ(test, n, (int)DIV_ROUND_UP(len, SZ_2G));
	for (i = 0, at = phys; i < n; i++) {
		u64 dma;
		u32 l;

		KUNIT_ASSERT_EQ(test, fake_core_mr_entry(mr, i, &dma, &l), 0);
		KUNIT_EXPECT_EQ(test, dma, at);
		KUNIT_EXPECT_LE(test, (u64)l, (u64)SZ_2G);
		at += l;
	}
	KUNIT_EXPECT_EQ(test, at - phys, len);
	fake_core_dereg_mr(mr);
out:
	KUNIT_EXPECT_EQ(test, fake_nv_free(e->p, va), 0);
}

/*
 * Registrations as large as a whole GPU's BAR1: 64 GiB; all of BAR1 less the driver's
 * 36 MiB reserve; one 64 KiB page more is BAR1 exhaustion (ENOMEM). Per-page arrays
 * are kvmalloc-class on both sides, so none of this meets the kmalloc limit (a page
 * allocator warning would fail the run).
 */
static void registrations_as_large_as_bar1(struct kunit *test)
{
	struct fake_nv_config cfg;
	struct env e;

	env_begin(test, &e);
	cfg = e.cfg0;
	cfg.bar1_size = H100_BAR1;
	cfg.bar1_reserve = BAR1_RESERVE;
	KUNIT_ASSERT_EQ(test, fake_nv_set_config(&cfg), 0);
	reg_whole_gpu(test, &e, 64 * GIB, 0);
	reg_whole_gpu(test, &e, H100_BAR1 - BAR1_RESERVE, 0);
	reg_whole_gpu(test, &e, H100_BAR1 - BAR1_RESERVE + P64K, -ENOMEM);
	env_end(&e);
}

static void software_rdma_device_is_refused(struct kunit *test)
{
	struct device *sw;
	struct fake_mr *mr;
	u64 refused = peermem_stat("refused_not_pci");
	struct env e;
	u64 va;

	KUNIT_ASSERT_NE_MSG(test, refused, U64_MAX, "peermem's debugfs stats unreadable");
	env_begin(test, &e);
	va = env_buffer(&e, SZ_1M);
	sw = root_device_register("peermem_test_rxe");
	KUNIT_ASSERT_FALSE(test, IS_ERR(sw));
	mr = reg_on(va, SZ_64K, sw, true);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(mr), -EOPNOTSUPP);
	if (!IS_ERR(mr))
		fake_core_dereg_mr(mr);
	root_device_unregister(sw);
	/*
	 * Refused before nvidia_p2p_dma_map_pages, which takes the peer as a pci_dev
	 * unchecked: the fake counts a non-PCI peer as NOT_PCI_PEER (env_end checks that
	 * no violation was counted).
	 */
	KUNIT_EXPECT_EQ(test, peermem_stat("refused_not_pci"), refused + 1);
	env_end(&e);
}

/*
 * Every error of nvidia_p2p_dma_map_pages is the driver's: counted as dma_map_failed
 * and handed on as it is, even the errnos of peermem's own refusals (ENOMEM: no memory
 * for peermem's bookkeeping; EFAULT: memory freed during the registration).
 */
static void dma_map_errors_are_the_drivers(struct kunit *test)
{
	static const int errs[] = { ENOMEM, EFAULT, EIO };
	u64 failed = peermem_stat("refused_dma_map_failed");
	u64 no_memory = peermem_stat("refused_no_memory");
	u64 freed = peermem_stat("refused_freed");
	struct fake_mr *mr;
	unsigned int i;
	struct env e;
	u64 va;

	KUNIT_ASSERT_NE_MSG(test, failed, U64_MAX, "peermem's debugfs stats unreadable");
	env_begin(test, &e);
	va = env_buffer(&e, SZ_1M);
	for (i = 0; i < ARRAY_SIZE(errs); i++) {
		fake_nv_inject_map_errors(1, errs[i]);
		mr = reg(va, SZ_64K);
		fake_nv_inject_map_errors(0, 0);
		KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(mr), -errs[i]);
		if (!IS_ERR(mr))
			fake_core_dereg_mr(mr);
	}
	KUNIT_EXPECT_EQ(test, peermem_stat("refused_dma_map_failed"), failed + ARRAY_SIZE(errs));
	KUNIT_EXPECT_EQ(test, peermem_stat("refused_no_memory"), no_memory);
	KUNIT_EXPECT_EQ(test, peermem_stat("refused_freed"), freed);
	env_end(&e);
}

/*
 * A peer with a 32-bit DMA mask and GPU memory above 4 GiB: without an IOMMU the peer
 * cannot reach it (EIO from dma_map_pages, passed on); behind an IOMMU it registers,
 * with IOVAs below 4 GiB. Either way it reaches the BAR below 4 GiB, and the 64-bit
 * HCA reaches both.
 */
static void dma32_peer_and_a_high_bar(struct kunit *test)
{
	struct device *dev32 = fake_core_dma32_device();
	struct fake_mr *mr;
	struct env e;
	u64 high, low, dma;

	env_begin(test, &e);
	KUNIT_ASSERT_NOT_NULL(test, dev32);
	high = fake_nv_alloc(e.p, SZ_1M, false);	/* above 4 GiB */
	low = fake_nv_alloc(e.p, SZ_1M, true);		/* ivshmem BAR, below 4 GiB */
	KUNIT_ASSERT_NE(test, high, 0);
	KUNIT_ASSERT_NE(test, low, 0);
	KUNIT_ASSERT_GT(test, fake_nv_phys(e.p, high), (u64)U32_MAX);
	mr = reg_on(high, SZ_1M, dev32, true);
	if (device_iommu_mapped(dev32)) {
		kunit_info(test, "32-bit peer behind an IOMMU\n");
		KUNIT_ASSERT_FALSE(test, IS_ERR(mr));
		KUNIT_EXPECT_EQ(test, fake_core_mr_nents(mr) > 0, true);
		for (u64 off = 0; off < SZ_1M; off += P64K) {
			dma = fake_core_mr_dma_addr(mr, off);
			KUNIT_EXPECT_LE(test, dma + P64K - 1, (u64)U32_MAX);
			KUNIT_EXPECT_TRUE(test, fake_nv_maps(dev32, fake_nv_phys(e.p, high + off), dma));
		}
	} else {
		KUNIT_EXPECT_TRUE(test, IS_ERR(mr));
		KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(mr), -EIO);
	}
	if (!IS_ERR(mr))
		fake_core_dereg_mr(mr);
	mr = reg_on(low, SZ_64K, dev32, true);
	KUNIT_EXPECT_FALSE(test, IS_ERR(mr));
	if (!IS_ERR(mr))
		fake_core_dereg_mr(mr);
	mr = reg(high, SZ_64K);
	KUNIT_EXPECT_FALSE(test, IS_ERR(mr));
	if (!IS_ERR(mr))
		fake_core_dereg_mr(mr);
	env_end(&e);
}

static void page_table_major_1_driver(struct kunit *test)
{
	struct fake_nv_config cfg;
	struct fake_mr *mr;
	struct env e;
	u64 va;

	env_begin(test, &e);
	cfg = e.cfg0;
	cfg.page_table_major = 1;
	KUNIT_ASSERT_EQ(test, fake_nv_set_config(&cfg), 0);
	va = env_buffer(&e, SZ_1M);
	mr = reg(va + 4096, SZ_256K);
	KUNIT_ASSERT_FALSE(test, IS_ERR(mr));
	expect_dma_matches(test, &e, mr, va + 4096, SZ_256K);
	fake_core_dereg_mr(mr);
	env_end(&e);
}

/* The file closed (process exit) before the registration is deregistered. */
static void process_exits_before_deregistration(struct kunit *test)
{
	struct fake_nv_proc *q;
	struct fake_nv_counters c;
	struct fake_mr *mr;
	struct env e;
	u64 va;

	env_begin(test, &e);
	/* A second process of this thread: it exits while registered. */
	fake_nv_proc_leave(e.p);
	q = fake_nv_proc_create();
	KUNIT_ASSERT_NOT_NULL(test, q);
	fake_nv_proc_enter(q);
	va = fake_nv_alloc(q, SZ_1M, true);
	KUNIT_ASSERT_NE(test, va, 0);
	mr = reg(va, SZ_1M);
	KUNIT_ASSERT_FALSE(test, IS_ERR(mr));
	fake_nv_proc_leave(q);
	fake_nv_proc_exit(q);
	fake_nv_get_counters(&c);
	if (CALLBACK_PINS) {
		/* The free callback tore the pin down and invalidated the region once. */
		KUNIT_EXPECT_EQ(test, fake_core_mr_invalidations(mr), 1);
		KUNIT_EXPECT_EQ(test, c.pins_live, 0);
	} else {
		/* A persistent pin keeps the memory until deregistration. */
		KUNIT_EXPECT_EQ(test, fake_core_mr_invalidations(mr), 0);
		KUNIT_EXPECT_EQ(test, c.pins_live, 1);
	}
	fake_core_dereg_mr(mr);
	fake_nv_proc_enter(e.p);
	env_end(&e);
}

/* The registration deregistered before the file is closed. */
static void process_exits_after_deregistration(struct kunit *test)
{
	struct fake_mr *mr;
	struct env e;
	u64 va;

	env_begin(test, &e);
	va = env_buffer(&e, SZ_1M);
	mr = reg(va, SZ_1M);
	KUNIT_ASSERT_FALSE(test, IS_ERR(mr));
	KUNIT_EXPECT_EQ(test, fake_core_mr_invalidations(mr), 0);
	fake_core_dereg_mr(mr);
	env_end(&e);	/* exits the process: nothing of it is pinned any more */
}

/* Records how many of the core's mapping locks are held while it is parked. */
static void orch_core_locks_at_pause(struct job *j)
{
	int pt = (int)j->len;
	int ret = fake_nv_pause_wait(pt, 5000);

	j->ret = ret ? ret : fake_core_map_locks_held();
	fake_nv_pause_release(pt);
}

static struct fake_mr *reg_job(u64 arg)
{
	return reg(arg, SZ_1M);
}

static struct fake_mr *dereg_job(u64 arg)
{
	fake_core_dereg_mr((struct fake_mr *)(uintptr_t)arg);
	return NULL;
}

/*
 * Runs @action(@arg) while a helper thread waits for it to park at the fake
 * nvidia.ko's pause point @pt and counts the core's mapping locks held then: none
 * may be. Returns what @action returned.
 */
static struct fake_mr *parked_at(struct kunit *test, int pt, struct fake_mr *(*action)(u64),
				 u64 arg)
{
	struct job f = { .fn = orch_core_locks_at_pause, .len = pt };
	u64 hits = fake_nv_pause_hits(pt);
	struct fake_mr *ret;

	fake_nv_pause_arm(pt);
	KUNIT_ASSERT_EQ(test, job_start(&f), 0);
	ret = action(arg);
	KUNIT_ASSERT_TRUE(test, job_wait(&f));
	KUNIT_EXPECT_EQ(test, f.ret, 0);
	KUNIT_EXPECT_EQ(test, fake_nv_pause_hits(pt), hits + 1);
	return ret;
}

/*
 * peermem pins in acquire and unpins at release, so nvidia.ko's pin lock is never
 * taken under a region's mapping lock (docs/pin-state-machine.md, lock order; the
 * reference pins in get_pages, under it).
 */
static void pins_and_unpins_outside_the_core_mapping_lock(struct kunit *test)
{
	struct env e;
	struct fake_mr *mr;

	env_begin(test, &e);
	/* Parks in acquire, then in release. */
	mr = parked_at(test, FAKE_NV_PAUSE_GET_PAGES, reg_job, env_buffer(&e, SZ_1M));
	KUNIT_ASSERT_FALSE(test, IS_ERR(mr));
	parked_at(test, FAKE_NV_PAUSE_PUT_PAGES, dereg_job, (u64)(uintptr_t)mr);
	env_end(&e);
}

/*
 * A pin failure other than BAR1 exhaustion (here EIO) is counted and logged (the
 * plan checks peermem's refused_pin_failed), then answered "not mine": the core
 * offers the range to the next client (nv_mem_nc in callback mode, which pins it
 * persistently), and with none left the application gets the core's EFAULT. Only
 * BAR1 exhaustion claims the range (ENOMEM).
 */
/* A registration of 1 MiB at @va whose pin fails with -@err. */
static struct fake_mr *reg_with_pin_error(u64 va, int err)
{
	struct fake_mr *mr;

	fake_nv_inject_pin_errors(1, err);
	mr = reg(va, SZ_1M);
	fake_nv_inject_pin_errors(0, 0);
	return mr;
}

static void pin_failure_other_than_bar1_is_not_mine(struct kunit *test)
{
	struct env e;
	struct fake_mr *eio, *enomem;

	env_begin(test, &e);
	eio = reg_with_pin_error(env_buffer(&e, SZ_1M), EIO);
	enomem = reg_with_pin_error(env_buffer(&e, SZ_1M), ENOMEM);
	if (CALLBACK_PINS) {
		KUNIT_EXPECT_FALSE(test, IS_ERR(eio));
		if (!IS_ERR(eio))
			KUNIT_EXPECT_STREQ(test, fake_core_mr_client(eio), "nv_mem_nc");
	} else {
		KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(eio), -EFAULT);
	}
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(enomem), -ENOMEM);
	if (!IS_ERR(eio))
		fake_core_dereg_mr(eio);
	if (!IS_ERR(enomem))
		fake_core_dereg_mr(enomem);
	env_end(&e);
}

/*
 * The HCA cannot create the key once the region is mapped (mlx5's reg_create failing
 * with ENOMEM): the core stops and releases the region as the HCA driver does
 * (docs/abi.md 2.5), dma_unmap and put_pages under the mapping lock for a client
 * without INVALIDATE_UNMAPS. The application gets the HCA's error and peermem keeps
 * nothing: no pin, no mapping, no SG list.
 */
static void hca_failure_after_mapping_leaves_nothing(struct kunit *test)
{
	struct fake_reg_opts o = {
		.can_invalidate = true, .writable = true, .hca_error = -ENOMEM,
	};
	u64 unmaps, puts, releases;
	struct env e;

	env_begin(test, &e);
	unmaps = NV_MEM_STAT(dma_unmaps);
	puts = NV_MEM_STAT(put_pages);
	releases = NV_MEM_STAT(releases);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(fake_core_reg_mr(env_buffer(&e, SZ_1M), SZ_1M, &o)),
			-ENOMEM);
	KUNIT_EXPECT_EQ(test, NV_MEM_STAT(dma_unmaps), unmaps + 1);
	KUNIT_EXPECT_EQ(test, NV_MEM_STAT(put_pages), puts + 1);
	KUNIT_EXPECT_EQ(test, NV_MEM_STAT(releases), releases + 1);
	env_end(&e);
}

#if CALLBACK_PINS
/* ---- callback mode ---------------------------------------------------------- */

/* Jobs of the races: the owner frees its allocation (the free callback runs), a
 * registration is deregistered. */
static void job_free(struct job *j)
{
	j->ret = fake_nv_free(j->owner, j->va);
}

static void job_dereg(struct job *j)
{
	fake_core_dereg_mr(j->mr);
}

static void covered_registration_reuses_the_pin(struct kunit *test)
{
	struct fake_nv_counters c;
	struct fake_mr *big, *small;
	struct env e;
	u64 va, n, reused, pins, reuses;

	env_begin(test, &e);
	va = env_buffer(&e, SZ_2M);
	n = pins_total();
	pins = peermem_stat("pins");
	reuses = peermem_stat("pin_reuses");
	KUNIT_ASSERT_NE_MSG(test, pins, U64_MAX, "peermem's debugfs stats unreadable");
	big = reg(va, SZ_2M);
	KUNIT_ASSERT_FALSE(test, IS_ERR(big));
	KUNIT_EXPECT_EQ(test, pins_total() - n, 1);
	/* peermem counts the pin it made, and no reuse. */
	KUNIT_EXPECT_EQ(test, peermem_stat("pins"), pins + 1);
	KUNIT_EXPECT_EQ(test, peermem_stat("pin_reuses"), reuses);
	n = pins_total();
	small = reg(va + SZ_1M + 123, 1000);
	KUNIT_ASSERT_FALSE(test, IS_ERR(small));
	reused = pins_total() - n;
	KUNIT_EXPECT_EQ(test, reused, 0);
	/* And the covered registration as a reuse, no pin. */
	KUNIT_EXPECT_EQ(test, peermem_stat("pins"), pins + 1);
	KUNIT_EXPECT_EQ(test, peermem_stat("pin_reuses"), reuses + 1);
	kunit_info(test, "pins for a covered callback-mode registration: %llu\n", reused);
	/* The covered registration's SG list covers its own range only. */
	expect_dma_matches(test, &e, small, va + SZ_1M + 123, 1000);
	KUNIT_EXPECT_EQ(test, fake_core_mr_nents(small), 1);
	/* Releasing the covering one leaves the other's mapping and pin alive. */
	fake_core_dereg_mr(big);
	fake_nv_get_counters(&c);
	KUNIT_EXPECT_EQ(test, c.pins_live, 1);
	KUNIT_EXPECT_EQ(test, c.dma_mappings_live, 1);
	expect_dma_matches(test, &e, small, va + SZ_1M + 123, 1000);
	fake_core_dereg_mr(small);
	env_end(&e);
}

static void these_must_pin_anew(struct kunit *test)
{
	struct fake_mr *a, *b;
	struct fake_nv_proc *q;
	struct env e;
	u64 va, va2, n;

	env_begin(test, &e);
	va = env_buffer(&e, SZ_1M);
	a = reg(va, 4 * P64K);
	KUNIT_ASSERT_FALSE(test, IS_ERR(a));

	/* A partial overlap. */
	n = pins_total();
	b = reg(va + 2 * P64K, 4 * P64K);
	KUNIT_ASSERT_FALSE(test, IS_ERR(b));
	KUNIT_EXPECT_EQ(test, pins_total() - n, 1);
	fake_core_dereg_mr(b);

	/* A different client mode: a buffer that cannot be invalidated goes to the
	 * persistent client, which never shares. */
	n = pins_total();
	b = reg_on(va, P64K, NULL, false);
	KUNIT_ASSERT_FALSE(test, IS_ERR(b));
	KUNIT_EXPECT_STREQ(test, fake_core_mr_client(b), "nv_mem_nc");
	KUNIT_EXPECT_EQ(test, pins_total() - n, 1);
	fake_core_dereg_mr(b);

	/* Another process with memory at the same address. */
	fake_nv_proc_leave(e.p);
	q = fake_nv_proc_create();
	KUNIT_ASSERT_NOT_NULL(test, q);
	fake_nv_proc_enter(q);
	va2 = fake_nv_alloc_at(q, va, SZ_1M, true);
	KUNIT_ASSERT_EQ(test, va2, va);
	n = pins_total();
	b = reg(va, P64K);
	KUNIT_ASSERT_FALSE(test, IS_ERR(b));
	KUNIT_EXPECT_EQ(test, pins_total() - n, 1);
	expect_dma_matches(test, &e, a, va, 4 * P64K);
	fake_core_dereg_mr(b);
	fake_nv_proc_leave(q);
	fake_nv_proc_exit(q);
	fake_nv_proc_enter(e.p);

	/* The same address after free and reallocation: the old pin died with the
	 * memory and is never reused. */
	KUNIT_EXPECT_EQ(test, fake_nv_free(e.p, va), 0);
	KUNIT_EXPECT_EQ(test, fake_core_mr_invalidations(a), 1);
	KUNIT_ASSERT_EQ(test, fake_nv_alloc_at(e.p, va, SZ_1M, true), va);
	n = pins_total();
	b = reg(va, P64K);
	KUNIT_ASSERT_FALSE(test, IS_ERR(b));
	KUNIT_EXPECT_EQ(test, pins_total() - n, 1);
	expect_dma_matches(test, &e, b, va, P64K);
	fake_core_dereg_mr(b);
	fake_core_dereg_mr(a);
	env_end(&e);
}

static void free_invalidates_each_registration_once(struct kunit *test)
{
	struct fake_mr *mr[4];
	struct env e;
	u64 va;
	int i;

	env_begin(test, &e);
	va = env_buffer(&e, SZ_1M);
	mr[0] = reg(va, SZ_1M);			/* a pin */
	mr[1] = reg(va + P64K, P64K);		/* covered: shares it */
	mr[2] = reg(va + 3 * P64K, 2 * P64K);	/* covered: shares it */
	mr[3] = reg(va + SZ_512K, SZ_1M - SZ_512K); /* covered too */
	for (i = 0; i < ARRAY_SIZE(mr); i++)
		KUNIT_ASSERT_FALSE(test, IS_ERR(mr[i]));
	KUNIT_EXPECT_EQ(test, fake_nv_free(e.p, va), 0);
	for (i = 0; i < ARRAY_SIZE(mr); i++)
		KUNIT_EXPECT_EQ(test, fake_core_mr_invalidations(mr[i]), 1);
	for (i = 0; i < ARRAY_SIZE(mr); i++)
		fake_core_dereg_mr(mr[i]);
	env_end(&e);
}


/* ---- races, made deterministic with the fakes' pause points ------------------- */

struct race {
	struct job g, h;	/* the concurrent actions */
	u64 old;		/* a hit counter before the race */
	const struct pause_at *at;	/* where a registration parks, if set */
	bool h_waited;		/* r->h had not returned while r->g was parked */
};

/* The environment of a race: a process owning 1 MiB that r->g frees. */
static void race_begin(struct kunit *test, struct env *e, struct race *r)
{
	env_begin(test, e);
	r->g.owner = e->p;
	r->g.va = fake_nv_alloc(e->p, SZ_1M, true);
	KUNIT_ASSERT_NE(test, r->g.va, 0);
}

/* Polls until a hit counter exceeds @old; false after 5 s. */
static bool reached(u64 (*get)(int), int pt, u64 old)
{
	int i;

	for (i = 0; i < 500; i++) {
		if (get(pt) > old)
			return true;
		msleep(10);
	}
	return false;
}

static u64 nv_hits(int pt)
{
	return fake_nv_pause_hits(pt);
}

static int finish(struct job *j, int ret)
{
	if (!ret && !job_wait(j))
		ret = -ETIMEDOUT;
	return ret;
}

/* Starts the free (r->g) once a pause point is reached: @parked is its wait's result. */
static int free_when_parked(int parked, struct race *r)
{
	return parked ? parked : job_start(&r->g);
}

/* The end of a race's orchestration @f: it and the free (r->g) succeeded. */
static void race_joined(struct kunit *test, struct job *f, struct race *r)
{
	KUNIT_ASSERT_TRUE(test, job_wait(f));
	KUNIT_EXPECT_EQ(test, f->ret, 0);
	KUNIT_EXPECT_EQ(test, r->g.ret, 0);
}

static void orch_free_in_put_pages(struct job *j)
{
	struct race *r = j->ctx;
	int ret = free_when_parked(fake_nv_pause_wait(FAKE_NV_PAUSE_PUT_PAGES, 5000), r);

	msleep(50);	/* the free now waits for the driver lock put_pages holds */
	fake_nv_pause_release(FAKE_NV_PAUSE_PUT_PAGES);
	j->ret = finish(&r->g, ret);
}

/*
 * The memory is freed while the owner's deregistration is inside put_pages: the free
 * waits for the driver lock, then finds the pin gone; no callback runs.
 */
static void race_free_while_deregistration_is_in_put_pages(struct kunit *test)
{
	struct race r = { .g = { .fn = job_free } };
	struct job f = { .fn = orch_free_in_put_pages, .ctx = &r };
	struct fake_nv_counters c;
	struct fake_mr *mr;
	struct env e;
	u64 hits;

	race_begin(test, &e, &r);
	mr = reg(r.g.va, SZ_1M);
	KUNIT_ASSERT_FALSE(test, IS_ERR(mr));
	hits = fake_nv_pause_hits(FAKE_NV_PAUSE_PUT_PAGES);
	fake_nv_pause_arm(FAKE_NV_PAUSE_PUT_PAGES);
	KUNIT_ASSERT_EQ(test, job_start(&f), 0);
	fake_core_dereg_mr(mr);		/* parks in put_pages until f releases it */
	race_joined(test, &f, &r);
	KUNIT_EXPECT_EQ(test, fake_nv_pause_hits(FAKE_NV_PAUSE_PUT_PAGES), hits + 1);
	fake_nv_get_counters(&c);
	KUNIT_EXPECT_EQ(test, c.callbacks_run, e.nv0.callbacks_run);
	env_end(&e);
}

static void orch_free_in_dma_map(struct job *j)
{
	struct race *r = j->ctx;
	int ret = free_when_parked(fake_nv_pause_wait(FAKE_NV_PAUSE_DMA_MAP, 5000), r);

	/* The free callback starts and blocks invalidating the registration whose
	 * dma_map is in flight (the core holds its mapping lock). */
	if (!ret && !reached(nv_hits, FAKE_NV_PAUSE_CB_BEFORE_CLIENT, r->old))
		ret = -ETIMEDOUT;
	msleep(20);
	fake_nv_pause_release(FAKE_NV_PAUSE_DMA_MAP);
	j->ret = finish(&r->g, ret);
}

/*
 * The memory is freed while a second registration sharing the pin is inside
 * nvidia_p2p_dma_map_pages: that registration fails with EFAULT, the first is
 * invalidated once, and the callback lets the in-flight call finish before the
 * driver frees the table (the fake counts a call in flight at free as a violation).
 */
static void race_free_while_another_registration_is_in_dma_map(struct kunit *test)
{
	struct race r = { .g = { .fn = job_free } };
	struct job f = { .fn = orch_free_in_dma_map, .ctx = &r };
	struct fake_mr *mr, *mr2;
	struct env e;
	u64 hits;

	race_begin(test, &e, &r);
	mr = reg(r.g.va, SZ_1M);
	KUNIT_ASSERT_FALSE(test, IS_ERR(mr));
	hits = fake_nv_pause_hits(FAKE_NV_PAUSE_DMA_MAP);
	r.old = fake_nv_pause_hits(FAKE_NV_PAUSE_CB_BEFORE_CLIENT);
	fake_nv_pause_arm(FAKE_NV_PAUSE_DMA_MAP);
	KUNIT_ASSERT_EQ(test, job_start(&f), 0);
	mr2 = reg(r.g.va + P64K, P64K);	/* shares the pin; parks in dma_map */
	race_joined(test, &f, &r);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(mr2), -EFAULT);
	if (!IS_ERR(mr2))
		fake_core_dereg_mr(mr2);
	KUNIT_EXPECT_EQ(test, fake_nv_pause_hits(FAKE_NV_PAUSE_DMA_MAP), hits + 1);
	KUNIT_EXPECT_EQ(test, fake_core_mr_invalidations(mr), 1);
	fake_core_dereg_mr(mr);
	env_end(&e);
}

/* A pause point of either fake, for a race that parks a registration there. */
struct pause_at {
	void (*arm)(int pt);
	int (*wait)(int pt, unsigned int timeout_ms);
	void (*release)(int pt);
	u64 (*hits)(int pt);
	int pt;
};

static void core_arm(int pt) { fake_core_pause_arm(pt); }
static int core_wait(int pt, unsigned int ms) { return fake_core_pause_wait(pt, ms); }
static void core_release(int pt) { fake_core_pause_release(pt); }
static u64 core_hits(int pt) { return fake_core_pause_hits(pt); }
static void nv_arm(int pt) { fake_nv_pause_arm(pt); }
static int nv_wait(int pt, unsigned int ms) { return fake_nv_pause_wait(pt, ms); }
static void nv_release(int pt) { fake_nv_pause_release(pt); }

/* Frees r->g's buffer once a registration is parked at r->at, and lets the
 * registration go on once the free, callback included, has returned. */
static void orch_free_while_parked(struct job *j)
{
	struct race *r = j->ctx;
	int ret = free_when_parked(r->at->wait(r->at->pt, 5000), r);

	ret = finish(&r->g, ret);
	r->at->release(r->at->pt);
	j->ret = ret;
}

/*
 * A registration parks at @at, after its pin was made, while its buffer is freed: the
 * callback runs once, peermem claims the range and its get_pages reports the free
 * (EFAULT), nothing is mapped and nothing is left. (A client that passed the range on
 * as not its own would give the application the same EFAULT, from the core, without
 * a get_pages.)
 */
static void race_free_while_parked(struct kunit *test, const struct pause_at *at)
{
	struct race r = { .g = { .fn = job_free }, .at = at };
	struct job f = { .fn = orch_free_while_parked, .ctx = &r };
	struct fake_nv_counters c;
	struct fake_mr *mr;
	u64 hits, claimed, got, mapped;
	struct env e;

	race_begin(test, &e, &r);
	claimed = NV_MEM_STAT(acquire_hits);
	got = NV_MEM_STAT(get_pages);
	mapped = NV_MEM_STAT(dma_maps);
	hits = at->hits(at->pt);
	at->arm(at->pt);
	KUNIT_ASSERT_EQ(test, job_start(&f), 0);
	mr = reg(r.g.va, SZ_1M);	/* parks until the free is done */
	race_joined(test, &f, &r);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(mr), -EFAULT);
	if (!IS_ERR(mr))
		fake_core_dereg_mr(mr);
	KUNIT_EXPECT_EQ(test, at->hits(at->pt), hits + 1);
	fake_nv_get_counters(&c);
	KUNIT_EXPECT_EQ(test, c.callbacks_run, e.nv0.callbacks_run + 1);
	KUNIT_EXPECT_EQ(test, c.pins_total, e.nv0.pins_total + 1);
	KUNIT_EXPECT_EQ(test, NV_MEM_STAT(acquire_hits), claimed + 1);
	KUNIT_EXPECT_EQ(test, NV_MEM_STAT(get_pages), got + 1);
	KUNIT_EXPECT_EQ(test, NV_MEM_STAT(dma_maps), mapped);
	env_end(&e);
}

/* The memory is freed between acquire (which pinned and linked) and get_pages: get_pages
 * finds the pin dead. */
static void race_free_between_acquire_and_get_pages(struct kunit *test)
{
	static const struct pause_at after_acquire = {
		core_arm, core_wait, core_release, core_hits, FAKE_CORE_PAUSE_AFTER_ACQUIRE,
	};

	race_free_while_parked(test, &after_acquire);
}

/*
 * The memory is freed after nvidia.ko armed the pin's callback and before get_pages
 * returned (the driver registers the callback last, docs/abi.md 1.4): the callback
 * runs and the driver tears the table down before peermem has it, which peermem must
 * not read.
 */
static void race_free_before_get_pages_returns(struct kunit *test)
{
	static const struct pause_at get_pages_done = {
		nv_arm, nv_wait, nv_release, nv_hits, FAKE_NV_PAUSE_GET_PAGES_DONE,
	};

	race_free_while_parked(test, &get_pages_done);
}

/*
 * The memory is freed while peermem has linked a new callback pin into its registry
 * and not yet recorded the link (peermem's test-build pause point in the window
 * between adopting the driver's table and the link, docs/pin-state-machine.md): the
 * callback finds no id to unlink, so the registering thread must unlink the freed
 * pin. The registration fails EFAULT and peermem holds no pin afterwards (the fakes
 * cannot see one left in the registry: the callback freed the driver's side).
 */
static void race_free_before_the_pin_is_linked(struct kunit *test)
{
	static const struct pause_at before_link = {
		nv_arm, nv_wait, nv_release, nv_hits, FAKE_NV_PAUSE_CLIENT_BEFORE_LINK,
	};
	u64 pins_now = peermem_stat("pins_now");

	KUNIT_ASSERT_NE_MSG(test, pins_now, U64_MAX, "peermem's debugfs stats unreadable");
	race_free_while_parked(test, &before_link);
	KUNIT_EXPECT_EQ_MSG(test, peermem_stat("pins_now"), pins_now,
			    "a freed pin is left in peermem's registry");
}

static void orch_dereg_in_invalidate(struct job *j)
{
	struct race *r = j->ctx;
	int ret;

	ret = job_start(&r->g);		/* free: the callback enters invalidate */
	if (!ret)
		ret = fake_core_pause_wait(FAKE_CORE_PAUSE_IN_INVALIDATE, 5000);
	if (!ret)
		ret = job_start(&r->h);	/* deregister meanwhile */
	/* Time enough for the deregistration to reach release, which must wait. */
	msleep(200);
	r->h_waited = !ret && !completion_done(&r->h.done);
	fake_core_pause_release(FAKE_CORE_PAUSE_IN_INVALIDATE);
	ret = finish(&r->g, ret);
	j->ret = finish(&r->h, ret);
}

/*
 * The application deregisters while the free callback is inside the core's
 * invalidate: release waits for the invalidation of that registration to finish, the
 * registration is invalidated at most once and torn down once.
 */
static void race_deregistration_while_callback_is_in_invalidate(struct kunit *test)
{
	struct race r = { .g = { .fn = job_free }, .h = { .fn = job_dereg } };
	struct job f = { .fn = orch_dereg_in_invalidate, .ctx = &r };
	struct env e;
	u64 hits;

	race_begin(test, &e, &r);
	r.h.mr = reg(r.g.va, SZ_1M);
	KUNIT_ASSERT_FALSE(test, IS_ERR(r.h.mr));
	hits = fake_core_pause_hits(FAKE_CORE_PAUSE_IN_INVALIDATE);
	fake_core_pause_arm(FAKE_CORE_PAUSE_IN_INVALIDATE);
	KUNIT_ASSERT_EQ(test, job_start(&f), 0);
	race_joined(test, &f, &r);
	KUNIT_EXPECT_EQ(test, fake_core_pause_hits(FAKE_CORE_PAUSE_IN_INVALIDATE), hits + 1);
	KUNIT_EXPECT_TRUE_MSG(test, r.h_waited,
			      "deregistration returned while the callback was in invalidate");
	env_end(&e);
}

/*
 * Defect: the core calls put_pages after a failed dma_map while it holds the region's
 * mapping lock with the id still findable (docs/abi.md 2.5), and a free callback for
 * the same memory is inside the core's invalidate, waiting for that lock. peermem's
 * put_pages must not wait for anything the callback holds there (it took the
 * registration gate, which the callback holds across invalidate: a deadlock inside
 * nvidia.ko's free path).
 */
static void orch_free_while_failing(struct job *j)
{
	struct race *r = j->ctx;
	int ret = free_when_parked(fake_core_pause_wait(r->at->pt, 5000), r);

	/* The callback reaches invalidate, finds the id and waits for the lock. */
	if (!ret)
		ret = fake_core_pause_wait(FAKE_CORE_PAUSE_IN_INVALIDATE, 5000);
	fake_core_pause_release(FAKE_CORE_PAUSE_IN_INVALIDATE);
	msleep(50);
	/* The core goes on: the client's teardown around the mapping lock, release. */
	fake_core_pause_release(r->at->pt);
	j->ret = finish(&r->g, ret);
}

/* Invalidations the core found nothing to do for (unknown, stale or dead region). */
static u64 stale_invalidations(void)
{
	struct fake_core_counters k;

	fake_core_get_counters(&k);
	return k.invalidations_stale;
}

/*
 * A registration fails after its pin, with the mapping lock held and the id live, at
 * the core's pause point @at->pt (@hca: the HCA fails after mapping, else nvidia.ko's
 * dma_map_pages fails), while the owner frees the memory: the callback's
 * invalidation finds the id and waits for the lock while the core tears the region
 * down; it then finds the region gone. The registration fails with the error, and
 * nothing is left.
 */
static void failure_racing_a_free(struct kunit *test, const struct pause_at *at, bool hca)
{
	struct fake_reg_opts o = {
		.can_invalidate = true, .writable = true, .hca_error = hca ? -ENOMEM : 0,
	};
	struct race r = { .g = { .fn = job_free, .len = SZ_1M }, .at = at };
	struct job f = { .fn = orch_free_while_failing, .ctx = &r };
	struct fake_mr *mr;
	struct env e;

	env_begin(test, &e);
	r.g.owner = e.p;
	r.g.va = fake_nv_alloc(e.p, r.g.len, false);
	KUNIT_ASSERT_NE(test, r.g.va, 0);
	fake_core_pause_arm(at->pt);
	fake_core_pause_arm(FAKE_CORE_PAUSE_IN_INVALIDATE);
	KUNIT_ASSERT_EQ(test, job_start(&f), 0);
	r.old = stale_invalidations();
	/* nvidia.ko's dma_map_pages fails (EIO), with or without an IOMMU. */
	fake_nv_inject_map_errors(hca ? 0 : 1, EIO);
	mr = fake_core_reg_mr(r.g.va, r.g.len, &o);
	fake_nv_inject_map_errors(0, 0);
	race_joined(test, &f, &r);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(mr), hca ? -ENOMEM : -EIO);
	if (!IS_ERR(mr))
		fake_core_dereg_mr(mr);
	/* The invalidation found the region gone once it had the lock. */
	KUNIT_EXPECT_EQ(test, stale_invalidations(), r.old + 1);
	env_end(&e);
}

static void dma_map_failure_racing_a_free(struct kunit *test)
{
	static const struct pause_at map_failed = {
		core_arm, core_wait, core_release, core_hits, FAKE_CORE_PAUSE_MAP_FAILED,
	};

	failure_racing_a_free(test, &map_failed, false);
}

/* The same when the HCA fails after mapping: dma_unmap and put_pages race the free. */
static void hca_failure_racing_a_free(struct kunit *test)
{
	static const struct pause_at hca_failed = {
		core_arm, core_wait, core_release, core_hits, FAKE_CORE_PAUSE_HCA_FAILED,
	};

	failure_racing_a_free(test, &hca_failed, true);
}

/*
 * Defect: put_pages of a callback pin from another process (a kworker tearing down
 * MRs, a child after the owner exited) returns 0 and leaves the pin and its callback
 * registered (docs/abi.md 1.4b). peermem must keep the callback's data until that
 * callback comes, instead of freeing it (a use-after-free when the owner later frees
 * the memory: KASAN reports it on the debug kernel). The plan's scenario
 * orphaned_pin_* checks the module reference it keeps meanwhile.
 */
static void deregistration_from_another_process_keeps_the_pin(struct kunit *test)
{
	struct job h = { .fn = job_dereg };	/* a kthread: no mm, another tgid */
	struct fake_nv_counters c;
	struct env e;
	u64 va;

	env_begin(test, &e);
	va = env_buffer(&e, SZ_1M);
	h.mr = reg(va, SZ_1M);
	KUNIT_ASSERT_FALSE(test, IS_ERR(h.mr));
	KUNIT_ASSERT_EQ(test, job_start(&h), 0);
	KUNIT_ASSERT_TRUE(test, job_wait(&h));
	fake_nv_get_counters(&c);
	/* nvidia.ko would not find the pin from there: peermem does not even try, and
	 * the pin and its callback stay. */
	KUNIT_EXPECT_EQ(test, c.puts_not_owner, e.nv0.puts_not_owner);
	KUNIT_EXPECT_EQ(test, c.pins_live, e.nv0.pins_live + 1);
	KUNIT_EXPECT_EQ(test, c.callbacks_run, e.nv0.callbacks_run);
	/* The owner frees the memory: the callback runs on live data and ends the pin. */
	KUNIT_EXPECT_EQ(test, fake_nv_free(e.p, va), 0);
	fake_nv_get_counters(&c);
	KUNIT_EXPECT_EQ(test, c.callbacks_run, e.nv0.callbacks_run + 1);
	KUNIT_EXPECT_EQ(test, c.pins_live, e.nv0.pins_live);
	env_end(&e);
}

#define STRESS_ROUNDS 1000

/* Free racing deregistration on two kthreads, many times. */
static void race_free_against_deregistration_rounds(struct kunit *test)
{
	struct fake_nv_counters c;
	struct env e;
	int i, invalidated = 0;

	env_begin(test, &e);
	for (i = 0; i < STRESS_ROUNDS; i++) {
		struct job g = { .fn = job_free, .owner = e.p };
		struct fake_mr *mr, *mr2;

		g.va = fake_nv_alloc(e.p, 2 * P64K, true);
		KUNIT_ASSERT_NE(test, g.va, 0);
		mr = reg(g.va, 2 * P64K);
		mr2 = reg(g.va + P64K, P64K);
		KUNIT_ASSERT_FALSE(test, IS_ERR(mr));
		KUNIT_ASSERT_FALSE(test, IS_ERR(mr2));
		KUNIT_ASSERT_EQ(test, job_start(&g), 0);
		fake_core_dereg_mr(mr);
		invalidated += fake_core_mr_invalidations(mr2);
		fake_core_dereg_mr(mr2);
		KUNIT_ASSERT_TRUE(test, job_wait(&g));
		KUNIT_ASSERT_EQ(test, g.ret, 0);
	}
	fake_nv_get_counters(&c);
	kunit_info(test, "%d rounds, %d registrations invalidated, %llu callbacks\n",
		   STRESS_ROUNDS, invalidated, c.callbacks_run - e.nv0.callbacks_run);
	env_end(&e);
}
#endif /* CALLBACK_PINS */

#if !CALLBACK_PINS
/* ---- persistent pins ---------------------------------------------------------- */

static void covered_registration_pins_anew(struct kunit *test)
{
	struct fake_mr *big, *small;
	struct env e;
	u64 va, n, pins, reuses;

	env_begin(test, &e);
	va = env_buffer(&e, SZ_2M);
	big = reg(va, SZ_2M);
	KUNIT_ASSERT_FALSE(test, IS_ERR(big));
	n = pins_total();
	pins = peermem_stat("pins");
	reuses = peermem_stat("pin_reuses");
	KUNIT_ASSERT_NE_MSG(test, pins, U64_MAX, "peermem's debugfs stats unreadable");
	small = reg(va + P64K, P64K);
	KUNIT_ASSERT_FALSE(test, IS_ERR(small));
	/* A persistent pin outlives a free while the address may be reused: never
	 * shared. peermem counts it as a pin, not a reuse. */
	KUNIT_EXPECT_EQ(test, pins_total() - n, 1);
	KUNIT_EXPECT_EQ(test, peermem_stat("pins"), pins + 1);
	KUNIT_EXPECT_EQ(test, peermem_stat("pin_reuses"), reuses);
	fake_core_dereg_mr(small);
	fake_core_dereg_mr(big);
	env_end(&e);
}

static void memory_outlives_free_until_deregistration(struct kunit *test)
{
	struct fake_nv_counters c;
	struct fake_mr *mr;
	struct env e;
	u64 va;

	env_begin(test, &e);
	va = env_buffer(&e, SZ_1M);
	mr = reg(va, SZ_1M);
	KUNIT_ASSERT_FALSE(test, IS_ERR(mr));
	fake_nv_get_counters(&c);
	KUNIT_EXPECT_EQ(test, c.persistent_live, 1);
	KUNIT_EXPECT_EQ(test, fake_nv_free(e.p, va), 0);
	fake_nv_get_counters(&c);
	KUNIT_EXPECT_EQ(test, c.pins_live, 1);
	KUNIT_EXPECT_EQ(test, c.callbacks_run, e.nv0.callbacks_run);
	KUNIT_EXPECT_EQ(test, fake_core_mr_invalidations(mr), 0);
	KUNIT_EXPECT_NE(test, fake_core_mr_dma_addr(mr, 0), 0);
	fake_core_dereg_mr(mr);
	fake_nv_get_counters(&c);
	KUNIT_EXPECT_EQ(test, c.pins_live, 0);
	env_end(&e);
}
#endif

#ifdef PEERMEM_TEST_PRE535
static void old_driver_takes_the_null_callback_path(struct kunit *test)
{
	struct fake_nv_counters c;
	struct fake_mr *mr;
	struct env e;
	u64 va;

	env_begin(test, &e);
	KUNIT_ASSERT_TRUE(test, fake_nv_is_pre_535());
	va = env_buffer(&e, SZ_1M);
	mr = reg(va, SZ_1M);
	KUNIT_ASSERT_FALSE(test, IS_ERR(mr));
	fake_nv_get_counters(&c);
	/* nvidia_p2p_get_pages with a NULL callback: a persistent pin there. */
	KUNIT_EXPECT_EQ(test, c.persistent_live, 1);
	KUNIT_EXPECT_EQ(test, c.refused_null_callback, e.nv0.refused_null_callback);
	fake_core_dereg_mr(mr);
	env_end(&e);
}
#endif

/* ---- suite ----------------------------------------------------------------- */

static struct kunit_case peermem_client_cases[] = {
	KUNIT_CASE(reg_small_large_unaligned),
	KUNIT_CASE(zero_length_and_overflow_are_refused),
	KUNIT_CASE(disjoint_registrations_pin_once_each),
	KUNIT_CASE(clone_vm_child_is_not_the_owner),
	KUNIT_CASE(bar1_exhaustion_is_enomem),
	KUNIT_CASE_SLOW(registrations_as_large_as_bar1),
	KUNIT_CASE(software_rdma_device_is_refused),
	KUNIT_CASE(dma_map_errors_are_the_drivers),
	KUNIT_CASE(dma32_peer_and_a_high_bar),
	KUNIT_CASE(page_table_major_1_driver),
	KUNIT_CASE(process_exits_before_deregistration),
	KUNIT_CASE(process_exits_after_deregistration),
	KUNIT_CASE(pins_and_unpins_outside_the_core_mapping_lock),
	KUNIT_CASE(pin_failure_other_than_bar1_is_not_mine),
	KUNIT_CASE(hca_failure_after_mapping_leaves_nothing),
#if CALLBACK_PINS
	KUNIT_CASE(covered_registration_reuses_the_pin),
	KUNIT_CASE(these_must_pin_anew),
	KUNIT_CASE(free_invalidates_each_registration_once),
	KUNIT_CASE(race_free_while_deregistration_is_in_put_pages),
	KUNIT_CASE(race_free_while_another_registration_is_in_dma_map),
	KUNIT_CASE(race_free_between_acquire_and_get_pages),
	KUNIT_CASE(race_free_before_get_pages_returns),
	KUNIT_CASE(race_free_before_the_pin_is_linked),
	KUNIT_CASE(race_deregistration_while_callback_is_in_invalidate),
	KUNIT_CASE_SLOW(race_free_against_deregistration_rounds),
	KUNIT_CASE(deregistration_from_another_process_keeps_the_pin),
	KUNIT_CASE(hca_failure_racing_a_free),
	/* Last: before its fix it deadlocked the suite. */
	KUNIT_CASE(dma_map_failure_racing_a_free),
#else
	KUNIT_CASE(covered_registration_pins_anew),
	KUNIT_CASE(memory_outlives_free_until_deregistration),
#endif
#ifdef PEERMEM_TEST_PRE535
	KUNIT_CASE(old_driver_takes_the_null_callback_path),
#endif
	{}
};

static int suite_init(struct kunit_suite *suite)
{
	struct file *f = filp_open("/sys/kernel/debug/peermem/stats", O_RDONLY, 0);

	peermem_stats = IS_ERR(f) ? NULL : f;
	return 0;
}

static void suite_exit(struct kunit_suite *suite)
{
	if (peermem_stats)
		filp_close(peermem_stats, NULL);
	peermem_stats = NULL;
}

static struct kunit_suite peermem_client_suite = {
	.name = PEERMEM_TEST_SUITE,
	.suite_init = suite_init,
	.suite_exit = suite_exit,
	.test_cases = peermem_client_cases,
};
kunit_test_suite(peermem_client_suite);

MODULE_LICENSE("Dual MIT/GPL");
MODULE_DESCRIPTION("KUnit suites of the peermem client, against the fake drivers");
