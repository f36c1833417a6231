// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * peermem's benchmark, run in the dev VM by `make bench` (tests/qemu/plans/bench.sh).
 *
 * Loaded once per client (peermem in callback mode, then the baseline client costed as
 * nvidia-peermem, tests/bench/peermem_baseline.c, in callback mode too, each in a
 * fresh VM), it drives registrations through the fake peer-memory core, as a
 * fake process, and prints one CSV row per figure on the console:
 *
 *   PEERMEM-BENCH,<strategy>,<group>,<metric>,<size>,<pin_cost_us>,<live>,<value>
 *
 * tools/bench-report turns the rows into the table, the ratios, the PASS/FAIL lines
 * of the targets and the plots (docs/bench/README.md). The fake nvidia.ko charges
 * pin_cost_us per pin and per unpin under its driver lock, the same for both
 * strategies.
 */
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/math64.h>
#include <linux/timex.h>
#include <linux/err.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/vmalloc.h>
#include <linux/vmstat.h>

#include "fake_ib_core.h"
#include "fake_nvidia.h"

static char *strategy = "peermem";
module_param(strategy, charp, 0444);
MODULE_PARM_DESC(strategy, "label of the rows: peermem, or reference (the baseline client)");
static uint scale_max = 2097152;
module_param(scale_max, uint, 0444);
MODULE_PARM_DESC(scale_max, "largest number of live registrations in the scaling run");

#define K64 ((u64)SZ_64K)

/* The P2P entry points, for the fake driver's own share of the memory figures. */
struct nvidia_p2p_page_table;
struct nvidia_p2p_dma_mapping;
int nvidia_p2p_get_pages(u64 p2p_token, u32 va_space_token, u64 virtual_address,
			 u64 length, struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data);
int nvidia_p2p_put_pages(u64 p2p_token, u32 va_space_token, u64 virtual_address,
			 struct nvidia_p2p_page_table *page_table);
int nvidia_p2p_dma_map_pages(struct pci_dev *peer, struct nvidia_p2p_page_table *page_table,
			     struct nvidia_p2p_dma_mapping **dma_mapping);
int nvidia_p2p_dma_unmap_pages(struct pci_dev *peer, struct nvidia_p2p_page_table *page_table,
			       struct nvidia_p2p_dma_mapping *dma_mapping);

static struct fake_nv_proc *proc;
static int failures;

/*
 * Time. The dev kernel's clocksource is jiffies (4 ms: no HPET or PM timer to
 * calibrate the TSC against), too coarse for one registration; the TSC itself ticks
 * steadily under QEMU. It is calibrated against the jiffies clock over two seconds
 * (error below 0.5 %), then read directly.
 */
static u64 tsc_per_ms;

static void calibrate_tsc(void)
{
	u64 t0 = ktime_get_ns(), c0 = get_cycles();

	msleep(2000);
	tsc_per_ms = div64_u64((get_cycles() - c0) * NSEC_PER_MSEC, ktime_get_ns() - t0);
	pr_info("peermem_bench: TSC at %llu kHz\n", tsc_per_ms);
}

static u64 now_ns(void)
{
	return mul_u64_u64_div_u64(get_cycles(), NSEC_PER_MSEC, tsc_per_ms);
}

static void row(const char *group, const char *metric, u64 size, u32 cost, u64 live,
		u64 milli)
{
	pr_info("PEERMEM-BENCH,%s,%s,%s,%llu,%u,%llu,%llu.%03llu\n", strategy, group, metric,
		size, cost, live, milli / 1000, milli % 1000);
}

static struct fake_mr *reg(u64 addr, u64 len)
{
	struct fake_reg_opts o = { .can_invalidate = true, .writable = true };

	return fake_core_reg_mr(addr, len, &o);
}

static u64 pins_total(void)
{
	struct fake_nv_counters c;

	fake_nv_get_counters(&c);
	return c.pins_total;
}

/* Memory in use: everything not free, slab and page allocations alike. */
static u64 used_bytes(void)
{
	return (totalram_pages() - global_zone_page_state(NR_FREE_PAGES)) * PAGE_SIZE;
}

static int cmp_u64(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

static void fail(const char *what, long err)
{
	pr_err("peermem_bench: %s failed: %ld\n", what, err);
	failures++;
}

static void set_cost(u32 cost, bool huge_bar)
{
	struct fake_nv_config cfg;

	fake_nv_get_config(&cfg);
	cfg.pin_cost_us = cost;
	cfg.unpin_cost_us = cost;
	if (huge_bar) {
		/* Unbacked windows for scale: BAR1 is not what is measured here. */
		cfg.bar1_size = 1ULL << 42;
		cfg.bar1_reserve = 0;
	}
	if (fake_nv_set_config(&cfg))
		fail("fake_nv_set_config", -EINVAL);
}

/* Untimed registrations before each latency series. */
#define WARMUP 50

/* Register + deregister latency, throughput, pins and SG entries per registration. */
static void bench_latency(u64 size, u32 cost, int n)
{
	u64 *lat, *op, sum = 0, dsum = 0, t0, t1, t2, start, pins, va;
	struct fake_core_client_stats ph0, ph1;
	int i, nents = 0;

	lat = kvcalloc(n, sizeof(*lat), GFP_KERNEL);
	op = kvcalloc(n, sizeof(*op), GFP_KERNEL);
	va = fake_nv_alloc(proc, size, true);
	if (!lat || !op || !va) {
		fail("latency setup", -ENOMEM);
		goto out;
	}
	/*
	 * Warm-up, not timed: the first registrations of a size run code and touch slab
	 * caches that no later one does (under emulation, also the translation of the
	 * code itself), for both clients alike.
	 */
	for (i = 0; i < WARMUP; i++) {
		struct fake_mr *mr = reg(va, size);

		if (IS_ERR(mr)) {
			fail("warm-up registration", PTR_ERR(mr));
			goto out;
		}
		fake_core_dereg_mr(mr);
	}
	pins = pins_total();
	if (fake_core_client_stats("nv_mem", &ph0))
		memset(&ph0, 0, sizeof(ph0));
	start = now_ns();
	for (i = 0; i < n; i++) {
		struct fake_mr *mr;

		t0 = now_ns();
		mr = reg(va, size);
		t1 = now_ns();
		if (IS_ERR(mr)) {
			fail("registration", PTR_ERR(mr));
			goto out;
		}
		if (!i)
			nents = fake_core_mr_nents(mr);
		fake_core_dereg_mr(mr);
		t2 = now_ns();
		lat[i] = t1 - t0;
		op[i] = t2 - t0;
		sum += t1 - t0;
		dsum += t2 - t1;
	}
	t0 = now_ns() - start;
	pins = pins_total() - pins;
	sort(lat, n, sizeof(*lat), cmp_u64, NULL);
	sort(op, n, sizeof(*op), cmp_u64, NULL);
	row("latency", "reg_mean_ns", size, cost, 0, div_u64(sum * 1000, n));
	row("latency", "reg_p50_ns", size, cost, 0, lat[n / 2] * 1000);
	row("latency", "reg_p99_ns", size, cost, 0, lat[(n * 99) / 100] * 1000);
	row("latency", "dereg_mean_ns", size, cost, 0, div_u64(dsum * 1000, n));
	/* One register + deregister pair. */
	row("latency", "op_mean_ns", size, cost, 0, div_u64((sum + dsum) * 1000, n));
	row("latency", "op_p99_ns", size, cost, 0, op[(n * 99) / 100] * 1000);
	row("latency", "ops_per_s", size, cost, 0, div64_u64((u64)n * NSEC_PER_SEC * 1000, t0));
	row("latency", "pins_per_reg", size, cost, 0, div_u64(pins * 1000, n));
	row("latency", "sg_entries", size, cost, 0, (u64)nents * 1000);
	/* Where a registration's time goes: each callback, as the fake core timed it. */
	if (!fake_core_client_stats("nv_mem", &ph1)) {
		for (i = 0; i < FAKE_CORE_PHASE_COUNT; i++) {
			char metric[32];

			snprintf(metric, sizeof(metric), "%s_ns", fake_core_phase_name(i));
			row("phase", metric, size, cost, 0,
			    div_u64((ph1.phase_ns[i] - ph0.phase_ns[i]) * 1000, n));
		}
	}
out:
	if (va)
		fake_nv_free(proc, va);
	kvfree(op);
	kvfree(lat);
}

/* Re-registering a sub-range of a registered buffer. */
static void bench_reuse(int n)
{
	struct fake_mr *hold;
	u64 va, pins;
	int i;

	va = fake_nv_alloc(proc, SZ_2M, true);
	if (!va) {
		fail("reuse alloc", -ENOMEM);
		return;
	}
	hold = reg(va, SZ_2M);
	if (IS_ERR(hold)) {
		fail("reuse hold", PTR_ERR(hold));
		goto out;
	}
	pins = pins_total();
	for (i = 0; i < n; i++) {
		struct fake_mr *mr = reg(va + (i % 32) * K64 + 100, 1000);

		if (IS_ERR(mr)) {
			fail("reuse registration", PTR_ERR(mr));
			break;
		}
		fake_core_dereg_mr(mr);
	}
	row("reuse", "pins_per_reg", K64, 0, 1, div_u64((pins_total() - pins) * 1000, n));
	fake_core_dereg_mr(hold);
out:
	fake_nv_free(proc, va);
}

/*
 * Unbacked allocations of up to 16 GiB (262,144 pages) each, covering @pages pages in
 * all: few enough that the fake driver's walk of a process's allocations stays short
 * at two million live registrations (an H100's BAR1 is eight of them).
 */
#define WINDOW SZ_16G

static u64 *alloc_windows(u64 pages, int *count)
{
	int n = div64_u64(pages * K64 + WINDOW - 1, WINDOW), i;
	u64 *va = kvcalloc(n, sizeof(*va), GFP_KERNEL);

	for (i = 0; va && i < n; i++) {
		u64 left = pages * K64 - (u64)i * WINDOW;

		va[i] = fake_nv_alloc(proc, min_t(u64, left, WINDOW), false);
		if (!va[i]) {
			fail("window alloc", -ENOMEM);
			break;
		}
	}
	*count = va ? i : 0;
	return va;
}

/* The address of the @i-th range of @size in the windows (@size divides WINDOW). */
static u64 window_at(const u64 *win, u64 i, u64 size)
{
	u64 per = div64_u64(WINDOW, size);

	return win[div64_u64(i, per)] + (i % per) * size;
}

static void free_windows(u64 *va, int count)
{
	int i;

	for (i = 0; i < count; i++)
		fake_nv_free(proc, va[i]);
	kvfree(va);
}

/*
 * Per-operation cost with @live registrations alive (64 KiB each, one pin each), and
 * the memory each live registration holds (client, core and fake driver together).
 */
static void bench_scaling(u32 live, int n)
{
	struct fake_mr **mrs;
	u64 *win, t0, va, s0;
	int nwin, i, made = 0;

	mrs = kvcalloc(live, sizeof(*mrs), GFP_KERNEL);
	win = alloc_windows(live, &nwin);
	va = fake_nv_alloc(proc, SZ_1M, false);
	if (!mrs || !win || !va || (u64)nwin * WINDOW < (u64)live * K64) {
		fail("scaling setup", -ENOMEM);
		goto out;
	}
	s0 = used_bytes();
	for (made = 0; made < live; made++) {
		mrs[made] = reg(window_at(win, made, K64), K64);
		if (IS_ERR(mrs[made])) {
			fail("scaling registration", PTR_ERR(mrs[made]));
			goto out;
		}
		if (!(made % 4096))
			cond_resched();
	}
	row("scaling", "bytes_per_reg_total", K64, 0, live,
	    div_u64((used_bytes() - s0) * 1000, live));
	t0 = now_ns();
	for (i = 0; i < n; i++) {
		struct fake_mr *mr = reg(va + (i % 16) * K64, K64);

		if (IS_ERR(mr)) {
			fail("scaling op", PTR_ERR(mr));
			goto out;
		}
		fake_core_dereg_mr(mr);
	}
	row("scaling", "op_ns", K64, 0, live, div_u64((now_ns() - t0) * 1000, n));
out:
	while (made-- > 0) {
		fake_core_dereg_mr(mrs[made]);
		if (!(made % 4096))
			cond_resched();
	}
	if (va)
		fake_nv_free(proc, va);
	if (win)
		free_windows(win, nwin);
	kvfree(mrs);
}

static void dummy_free_callback(void *data)
{
}

/*
 * A pin made directly, as the client's driver calls make it, for the fake driver's
 * share of a memory figure: the reference pins twice (a probe pin and unpin in
 * acquire, then the pin it keeps), and the fake keeps a put pin's record and table
 * header (quarantine), which the client's own objects must not be credited with.
 */
static int direct_pin(u64 va, u64 size, struct nvidia_p2p_page_table **table)
{
	if (!strcmp(strategy, "reference")) {
		struct nvidia_p2p_page_table *probe;

		if (nvidia_p2p_get_pages(0, 0, va, size, &probe, dummy_free_callback, NULL))
			return -EIO;
		nvidia_p2p_put_pages(0, 0, va, probe);
	}
	return nvidia_p2p_get_pages(0, 0, va, size, table, dummy_free_callback, NULL) ? -EIO : 0;
}

/*
 * Memory per live registration, and the fake driver's own share of it, from the
 * pages in use (slab pages and page allocations: an SG list of 128 entries or more
 * comes straight from the page allocator). Freed objects are reused, so this runs
 * first in a fresh VM, both sets are made while the other is kept alive, nothing is
 * freed while measuring, and each figure is the growth of its own phase. The fake
 * driver's share is measured with the same driver calls the client makes, made
 * directly through the P2P API (direct_pin, then a DMA mapping).
 */
static void bench_memory(u64 size, u32 live)
{
	struct pci_dev *hca = to_pci_dev(fake_core_hca_device());
	struct nvidia_p2p_dma_mapping **maps;
	struct nvidia_p2p_page_table **tables;
	struct fake_mr **mrs;
	u64 *win, s0, s1, s2, pages = div_u64(size, K64) * live * 2;
	int nwin, pinned = 0, made = 0;

	mrs = kvcalloc(live, sizeof(*mrs), GFP_KERNEL);
	tables = kvcalloc(live, sizeof(*tables), GFP_KERNEL);
	maps = kvcalloc(live, sizeof(*maps), GFP_KERNEL);
	win = alloc_windows(pages, &nwin);
	if (!mrs || !tables || !maps || !win || (u64)nwin * WINDOW < pages * K64) {
		fail("memory setup", -ENOMEM);
		goto out;
	}
	s0 = used_bytes();
	for (pinned = 0; pinned < live; pinned++) {
		u64 a = window_at(win, pinned, size);

		if (direct_pin(a, size, &tables[pinned])) {
			fail("direct pin", -EIO);
			goto out;
		}
		if (nvidia_p2p_dma_map_pages(hca, tables[pinned], &maps[pinned])) {
			nvidia_p2p_put_pages(0, 0, a, tables[pinned]);
			fail("direct map", -EIO);
			goto out;
		}
	}
	s1 = used_bytes();
	for (made = 0; made < live; made++) {
		mrs[made] = reg(window_at(win, live + made, size), size);
		if (IS_ERR(mrs[made])) {
			fail("memory registration", PTR_ERR(mrs[made]));
			goto out;
		}
	}
	s2 = used_bytes();
	row("memory", "bytes_per_reg_total", size, 0, live, div_u64((s2 - s1) * 1000, live));
	row("memory", "bytes_per_reg_fake", size, 0, live, div_u64((s1 - s0) * 1000, live));
	row("memory", "bytes_per_reg_module", size, 0, live,
	    s2 - s1 > s1 - s0 ? div_u64(((s2 - s1) - (s1 - s0)) * 1000, live) : 0);
out:
	while (made-- > 0)
		fake_core_dereg_mr(mrs[made]);
	while (pinned-- > 0) {
		u64 a = window_at(win, pinned, size);

		nvidia_p2p_dma_unmap_pages(hca, tables[pinned], maps[pinned]);
		nvidia_p2p_put_pages(0, 0, a, tables[pinned]);
	}
	if (win)
		free_windows(win, nwin);
	kvfree(maps);
	kvfree(tables);
	kvfree(mrs);
}

/*
 * One registration as large as half an H100's BAR1 (64 GiB, 1,048,576 pages of
 * 64 KiB): its latency, SG entries and module memory, whose fake-driver share is
 * measured as in bench_memory, with the same pin and mapping made directly. The
 * windows are unbacked (synthetic bus addresses: nothing DMAs into them), and BAR1 is
 * set large enough for both pins at once.
 */
static void bench_huge(u64 size)
{
	struct pci_dev *hca = to_pci_dev(fake_core_hca_device());
	struct nvidia_p2p_dma_mapping *map = NULL;
	struct nvidia_p2p_page_table *table = NULL;
	struct fake_mr *mr;
	u64 direct, va, s0, s1, s2, t0, t1, t2;
	int nents;

	direct = fake_nv_alloc(proc, size, false);
	va = fake_nv_alloc(proc, size, false);
	if (!direct || !va) {
		fail("huge setup", -ENOMEM);
		goto out;
	}
	s0 = used_bytes();
	if (direct_pin(direct, size, &table)) {
		table = NULL;
		fail("huge direct pin", -EIO);
		goto out;
	}
	if (nvidia_p2p_dma_map_pages(hca, table, &map)) {
		map = NULL;
		fail("huge direct map", -EIO);
		goto out;
	}
	s1 = used_bytes();
	t0 = now_ns();
	mr = reg(va, size);
	t1 = now_ns();
	if (IS_ERR(mr)) {
		fail("huge registration", PTR_ERR(mr));
		goto out;
	}
	s2 = used_bytes();
	nents = fake_core_mr_nents(mr);
	fake_core_dereg_mr(mr);
	t2 = now_ns();
	row("huge", "reg_ns", size, 0, 1, (t1 - t0) * 1000);
	row("huge", "dereg_ns", size, 0, 1, (t2 - t1) * 1000);
	row("huge", "sg_entries", size, 0, 1, (u64)nents * 1000);
	row("huge", "bytes_total", size, 0, 1, (s2 - s1) * 1000);
	row("huge", "bytes_fake", size, 0, 1, (s1 - s0) * 1000);
	row("huge", "bytes_module", size, 0, 1,
	    s2 - s1 > s1 - s0 ? ((s2 - s1) - (s1 - s0)) * 1000 : 0);
out:
	if (map)
		nvidia_p2p_dma_unmap_pages(hca, table, map);
	if (table)
		nvidia_p2p_put_pages(0, 0, direct, table);
	if (va)
		fake_nv_free(proc, va);
	if (direct)
		fake_nv_free(proc, direct);
}

static struct completion done;

static int bench_main(void *unused)
{
	static const u64 sizes[] = { SZ_64K, SZ_2M, SZ_64M };
	static const int iters[] = { 2000, 1000, 200 };
	static const u32 costs[] = { 0, 50 };
	/* Up to every 64 KiB page of an H100's 128 GiB BAR1 held by its own registration. */
	static const u32 scale_points[] = { 1000, 10000, 100000, 1000000, 2097152 };
	struct fake_nv_config saved;
	int c, s;

	calibrate_tsc();
	fake_nv_get_config(&saved);
	proc = fake_nv_proc_create();
	if (!proc) {
		fail("fake process", -ENOMEM);
		goto out;
	}
	fake_nv_proc_enter(proc);
	set_cost(0, true);
	bench_memory(SZ_64K, 20000);
	bench_memory(SZ_64M, 1000);
	for (c = 0; c < ARRAY_SIZE(costs); c++) {
		set_cost(costs[c], false);
		for (s = 0; s < ARRAY_SIZE(sizes); s++)
			bench_latency(sizes[s], costs[c], iters[s]);
	}
	set_cost(0, false);
	bench_reuse(300);
	set_cost(0, true);
	for (s = 0; s < ARRAY_SIZE(scale_points) && scale_points[s] <= scale_max; s++)
		bench_scaling(scale_points[s], 300);
	/* Last: its gigabytes of per-page arrays would disturb the timings above. */
	bench_huge(64 * (u64)SZ_1G);
	fake_nv_proc_leave(proc);
	fake_nv_proc_exit(proc);
out:
	if (fake_nv_set_config(&saved))
		fail("restore config", -EINVAL);
	complete(&done);
	return 0;
}

static int __init peermem_bench_init(void)
{
	struct task_struct *t;

	init_completion(&done);
	t = kthread_run(bench_main, NULL, "peermem_bench");
	if (IS_ERR(t))
		return PTR_ERR(t);
	wait_for_completion(&done);
	pr_info("PEERMEM-BENCH-DONE,%s,%d\n", strategy, failures);
	return failures ? -EIO : 0;
}

static void __exit peermem_bench_exit(void)
{
}

module_init(peermem_bench_init);
module_exit(peermem_bench_exit);
MODULE_LICENSE("Dual MIT/GPL");
MODULE_DESCRIPTION("peermem benchmark against the fake drivers");
