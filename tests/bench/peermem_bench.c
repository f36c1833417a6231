// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * peermem's benchmark (`make bench`, tests/qemu/plans/bench.sh). Loaded for one client
 * at a time (peermem, the baseline costed as nvidia-peermem or the baseline's floor,
 * tests/bench/peermem_baseline.c), it registers through the fake peer-memory core as
 * a fake process and prints a row per figure, which tools/bench-report judges
 * (docs/bench/README.md):
 *
 *   PEERMEM-BENCH,<strategy>,<group>,<metric>,<size>,<pin_cost_us>,<live>,<value>
 *
 * and, last, PEERMEM-BENCH-DONE,<strategy>,<failures>. `series=rest` runs every series
 * but the timed pairs, in a boot of its own per client; `series=latency` the timed
 * pairs, loaded in turn for each client of a mode in one boot; `series=calibrate`
 * only measures the TSC's rate, in a load of its own before the timed ones.
 */
#include <linux/alloc_tag.h>
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/math64.h>
#include <linux/mm.h>
#include <linux/timex.h>
#include <linux/err.h>
#include <linux/fs.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/string.h>
#include <linux/vmalloc.h>

#include "fake_ib_core.h"
#include "fake_nvidia.h"

static char *strategy = "peermem";
module_param(strategy, charp, 0444);
MODULE_PARM_DESC(strategy,
		 "label of the rows: peermem, reference (the baseline client) or floor (its floor mode)");
static uint scale_max = 2097152;
module_param(scale_max, uint, 0444);
MODULE_PARM_DESC(scale_max, "largest number of live registrations in the scaling run");
static char *series = "all";
module_param(series, charp, 0444);
MODULE_PARM_DESC(series,
		 "the series to run: all, latency (the timed pairs only), rest (all but those) or calibrate (none)");
static ulong tsc_given;	/* not tsc_khz: x86's own variable */
module_param_named(tsc_khz, tsc_given, ulong, 0444);
MODULE_PARM_DESC(tsc_khz,
		 "the TSC's rate as an earlier load in this boot printed it (0: calibrate, 2 s)");

#define K64 ((u64)SZ_64K)

static struct fake_nv_proc *proc;
static int failures;

/*
 * Time: the TSC, calibrated against the kernel's clock over two seconds (the dev
 * kernel's clocksource is jiffies, too coarse for one registration). Under UML
 * get_cycles() is a stub that returns 0: the kernel, a host process, reads the TSC.
 */
static u64 tsc_per_ms;

static u64 cycles(void)
{
#ifdef CONFIG_UML
	u32 lo, hi;

	asm volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (u64)hi << 32 | lo;
#else
	return get_cycles();
#endif
}

static void calibrate_tsc(void)
{
	u64 t0, c0;

	if (tsc_given) {
		tsc_per_ms = tsc_given;
		return;
	}
	t0 = ktime_get_ns();
	c0 = cycles();
	msleep(2000);
	tsc_per_ms = div64_u64((cycles() - c0) * NSEC_PER_MSEC, ktime_get_ns() - t0);
	pr_info("peermem_bench: TSC at %llu kHz\n", tsc_per_ms);
}

static u64 now_ns(void)
{
	return mul_u64_u64_div_u64(cycles(), NSEC_PER_MSEC, tsc_per_ms);
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

/*
 * Memory held, to the byte, by owner, from the kernel's allocation profiling
 * (/proc/allocinfo: what every allocation site holds). Profiling is off at boot and
 * on only while the registrations measured are made.
 */
struct held {
	s64 total;	/* every site */
	s64 fake;	/* the fake nvidia.ko ([nvidia]) */
	s64 core;	/* the fake peer-memory core ([ib_core]) */
	s64 module;	/* the client module (client_site) */
	s64 bench;	/* this driver's own arrays ([peermem_bench]) */
};

/*
 * The client module's sites: its own, the kernel's Rust allocation helper (peermem's
 * records: no other Rust code allocates here) and the SG tables it builds.
 */
static bool client_site(const char *line, const char *mod)
{
	if (mod)
		return !strncmp(mod, "peermem]", 8) || !strncmp(mod, "nvidia_peermem]", 15) ||
		       !strncmp(mod, "peermem_baseline]", 17);
	return strstr(line, " rust/helpers/") || strstr(line, " lib/scatterlist.c:");
}

/* One line of /proc/allocinfo: "<bytes> <calls> <file>:<line> [<module>] func:<f>". */
static void held_tally(struct held *h, const char *line)
{
	const char *m, *p = skip_spaces(line);
	char num[24] = "";
	s64 bytes;

	strscpy(num, p, min_t(size_t, sizeof(num), strcspn(p, " ") + 1));
	if (kstrtos64(num, 10, &bytes))
		return;	/* the header lines */
	/*
	 * Slab pages are tagged as page allocations of the allocator itself, and each
	 * object in them again at its caller's site: count the objects only.
	 */
	if (strstr(line, " func:alloc_slab_page"))
		return;
	h->total += bytes;
	m = strstr(line, " [");
	if (m)
		m += 2;
	if (client_site(line, m))
		h->module += bytes;
	else if (!m)
		return;	/* the kernel's own (the core's id xarray, for one) */
	else if (!strncmp(m, "nvidia]", 7))
		h->fake += bytes;
	else if (!strncmp(m, "ib_core]", 8))
		h->core += bytes;
	else if (!strncmp(m, "peermem_bench]", 14))
		h->bench += bytes;
}

#define HELD_BUF SZ_64K

/*
 * /proc/allocinfo, opened by the loading process (the benchmark thread's root has no
 * /proc) and kept open, so that its buffer is held alike by each read; and the buffer
 * its lines are read into.
 */
static struct file *allocinfo;
static char *held_buf;

/* Allocation profiling on or off (the bench kernel has it; others cannot measure). */
static void profiling(bool on)
{
#ifdef CONFIG_MEM_ALLOC_PROFILING
	if (on)
		static_branch_enable(&mem_alloc_profiling_key);
	else
		static_branch_disable(&mem_alloc_profiling_key);
#endif
}

/* Reads what is held now into @h. */
static int held_read(struct held *h)
{
	char *buf = held_buf;
	size_t have = 0;
	loff_t pos = 0;
	ssize_t n;

	memset(h, 0, sizeof(*h));
	while ((n = kernel_read(allocinfo, buf + have, HELD_BUF - have, &pos)) > 0) {
		char *line = buf, *nl;

		have += n;
		buf[have] = '\0';
		while ((nl = strchr(line, '\n'))) {
			*nl = '\0';
			held_tally(h, line);
			line = nl + 1;
		}
		have = buf + have - line;
		memmove(buf, line, have);
		if (have == HELD_BUF)
			return -E2BIG;
	}
	return n < 0 ? n : 0;
}

static int held_now(struct held *h)
{
	int err = held_buf ? held_read(h) : -ENOENT;

	if (err)
		fail("reading /proc/allocinfo (CONFIG_MEM_ALLOC_PROFILING)", err);
	return err;
}

/*
 * The rows of a memory figure: what @live registrations added between the reads
 * @before and @after, per registration.
 */
static void held_rows(const char *group, const char *prefix, u64 size, u64 live,
		      const struct held *before, const struct held *after)
{
	static const char *const what[] = { "total", "fake", "core", "module", "other" };
	s64 v[5];
	char metric[40];
	int i;

	v[0] = after->total - before->total - (after->bench - before->bench);
	v[1] = after->fake - before->fake;
	v[2] = after->core - before->core;
	v[3] = after->module - before->module;
	v[4] = v[0] - v[1] - v[2] - v[3];
	for (i = 0; i < ARRAY_SIZE(what); i++) {
		snprintf(metric, sizeof(metric), "%s%s", prefix, what[i]);
		row(group, metric, size, 0, live, div_u64(max_t(s64, v[i], 0) * 1000, live));
	}
}

/* Where the time of @ops operations went: each callback, as the fake core timed it. */
static void phase_rows(const char *group, const char *prefix, u64 size, u32 cost, u64 live,
		       const struct fake_core_client_stats *ph0, u64 ops)
{
	struct fake_core_client_stats ph1;
	char metric[40];
	int i;

	if (fake_core_client_stats("nv_mem", &ph1))
		return;
	for (i = 0; i < FAKE_CORE_PHASE_COUNT; i++) {
		snprintf(metric, sizeof(metric), "%s%s_ns", prefix, fake_core_phase_name(i));
		row(group, metric, size, cost, live,
		    div64_u64((ph1.phase_ns[i] - ph0->phase_ns[i]) * 1000, ops));
	}
}

static void set_cost(u32 cost, bool huge_bar)
{
	struct fake_nv_config cfg;

	fake_nv_get_config(&cfg);
	cfg.pin_cost_us = cost;
	cfg.unpin_cost_us = cost;
	/* As nvidia.ko: what a put or an unmap gives back is freed, not kept. */
	cfg.free_on_release = true;
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
	struct fake_core_client_stats ph0;
	int i, nents = 0;

	lat = kvcalloc(n, sizeof(*lat), GFP_KERNEL);
	op = kvcalloc(n, sizeof(*op), GFP_KERNEL);
	va = fake_nv_alloc(proc, size, true);
	if (!lat || !op || !va) {
		fail("latency setup", -ENOMEM);
		goto out;
	}
	/* Warm-up, not timed: code and slab caches the first registrations touch. */
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
	phase_rows("phase", "", size, cost, 0, &ph0, n);
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

/* Registrations kept alive, each in a range of its own of unbacked windows. */
struct live {
	struct fake_mr **mrs;
	u64 *win;
	int nwin, made;
};

/*
 * Makes @n registrations of @size alive, and prints what each holds, by owner, as
 * the rows of @group: the growth of what is held across making them, read to the
 * byte, so that it does not depend on which slab pages were already partly used
 * (the caller turns profiling on around it).
 */
static int live_make(struct live *l, const char *group, u64 size, u32 n)
{
	struct held h0, h1;
	int err;

	l->made = 0;
	l->mrs = kvcalloc(n, sizeof(*l->mrs), GFP_KERNEL);
	l->win = alloc_windows(div_u64(size, K64) * n, &l->nwin);
	if (!l->mrs || !l->win || (u64)l->nwin * WINDOW < size * n) {
		fail("live registrations setup", -ENOMEM);
		return -ENOMEM;
	}
	err = held_now(&h0);
	for (; l->made < n; l->made++) {
		struct fake_mr *mr = reg(window_at(l->win, l->made, size), size);

		if (IS_ERR(mr)) {
			fail("live registration", PTR_ERR(mr));
			return PTR_ERR(mr);
		}
		l->mrs[l->made] = mr;
		if (!(l->made % 4096))
			cond_resched();
	}
	if (!err && !held_now(&h1))
		held_rows(group, "bytes_per_reg_", size, n, &h0, &h1);
	return 0;
}

static void live_free(struct live *l)
{
	while (l->made-- > 0) {
		fake_core_dereg_mr(l->mrs[l->made]);
		if (!(l->made % 4096))
			cond_resched();
	}
	if (l->win)
		free_windows(l->win, l->nwin);
	kvfree(l->mrs);
}

/*
 * Per-operation cost with @live registrations alive (64 KiB, one pin each), and the
 * memory each holds (profiling on while they are made, off while the operations are
 * timed). The op cost is the median of SCALING_BATCHES batches of @n operations,
 * each timed as a whole, so that a batch the host stalls (a timer signal, a
 * preempted host thread) does not set the figure.
 */
#define SCALING_BATCHES 15

static void bench_scaling(u32 live, int n)
{
	struct fake_core_client_stats ph0;
	u64 t0, va = 0, batch[SCALING_BATCHES];
	struct live l;
	int i, b, err;

	profiling(true);
	err = live_make(&l, "scaling", K64, live);
	profiling(false);
	if (err)
		goto out;
	va = fake_nv_alloc(proc, SZ_1M, false);
	if (!va) {
		fail("scaling setup", -ENOMEM);
		goto out;
	}
	fake_core_client_stats("nv_mem", &ph0);
	for (b = 0; b < SCALING_BATCHES; b++) {
		t0 = now_ns();
		for (i = 0; i < n; i++) {
			struct fake_mr *mr = reg(va + (i % 16) * K64, K64);

			if (IS_ERR(mr)) {
				fail("scaling op", PTR_ERR(mr));
				goto out;
			}
			fake_core_dereg_mr(mr);
		}
		batch[b] = div_u64((now_ns() - t0) * 1000, n);
	}
	sort(batch, SCALING_BATCHES, sizeof(*batch), cmp_u64, NULL);
	row("scaling", "op_ns", K64, 0, live, batch[SCALING_BATCHES / 2]);
	phase_rows("scaling", "phase_", K64, 0, live, &ph0, n * SCALING_BATCHES);
out:
	live_free(&l);
	if (va)
		fake_nv_free(proc, va);
}

/*
 * One registration as large as half an H100's BAR1 (64 GiB, 1,048,576 pages of
 * 64 KiB): its latency, SG entries and memory by owner (as live_make). The window
 * is unbacked (synthetic bus addresses: nothing DMAs into it).
 */
static void bench_huge(u64 size)
{
	struct held h0, h1;
	struct fake_mr *mr;
	u64 va, t0, t1, t2;
	int nents, err;

	va = fake_nv_alloc(proc, size, false);
	if (!va) {
		fail("huge setup", -ENOMEM);
		return;
	}
	err = held_now(&h0);
	t0 = now_ns();
	mr = reg(va, size);
	t1 = now_ns();
	if (IS_ERR(mr)) {
		fail("huge registration", PTR_ERR(mr));
		goto out;
	}
	if (!err)
		err = held_now(&h1);
	nents = fake_core_mr_nents(mr);
	t2 = now_ns();
	fake_core_dereg_mr(mr);
	t2 = now_ns() - t2;
	row("huge", "reg_ns", size, 0, 1, (t1 - t0) * 1000);
	row("huge", "dereg_ns", size, 0, 1, t2 * 1000);
	row("huge", "sg_entries", size, 0, 1, (u64)nents * 1000);
	if (!err)
		held_rows("huge", "bytes_", size, 1, &h0, &h1);
out:
	fake_nv_free(proc, va);
}

static struct completion done;

static int bench_main(void *unused)
{
	static const u64 sizes[] = { SZ_64K, SZ_2M, SZ_64M };
	static const int iters[] = { 2000, 1000, 200 };
	static const u32 costs[] = { 0, 50 };
	/* Up to every 64 KiB page of an H100's 128 GiB BAR1, and of an H200's 256 GiB. */
	static const u32 scale_points[] = { 1000, 10000, 100000, 1000000, 2097152, 4194304 };
	struct fake_nv_config saved;
	bool latency = !strcmp(series, "all") || !strcmp(series, "latency");
	bool rest = !strcmp(series, "all") || !strcmp(series, "rest");
	int c, s;

	calibrate_tsc();
	if (!latency && !rest) {
		complete(&done);
		return 0;
	}
	fake_nv_get_config(&saved);
	proc = fake_nv_proc_create();
	if (!proc) {
		fail("fake process", -ENOMEM);
		goto out;
	}
	fake_nv_proc_enter(proc);
	if (rest) {
		struct live l;

		set_cost(0, true);
		profiling(true);
		live_make(&l, "memory", SZ_64K, 20000);
		live_free(&l);
		live_make(&l, "memory", SZ_64M, 1000);
		live_free(&l);
		profiling(false);
	}
	for (c = 0; latency && c < ARRAY_SIZE(costs); c++) {
		set_cost(costs[c], false);
		for (s = 0; s < ARRAY_SIZE(sizes); s++)
			bench_latency(sizes[s], costs[c], iters[s]);
	}
	if (!rest)
		goto leave;
	set_cost(0, false);
	bench_reuse(300);
	set_cost(0, true);
	for (s = 0; s < ARRAY_SIZE(scale_points) && scale_points[s] <= scale_max; s++)
		bench_scaling(scale_points[s], 300);
	/* Last: its gigabytes of per-page arrays would disturb the timings above. */
	profiling(true);
	bench_huge(64 * (u64)SZ_1G);
	profiling(false);
leave:
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

	if (strcmp(series, "all") && strcmp(series, "latency") && strcmp(series, "rest") &&
	    strcmp(series, "calibrate")) {
		pr_err("peermem_bench: series=%s: all, latency, rest or calibrate\n", series);
		return -EINVAL;
	}
	init_completion(&done);
	allocinfo = filp_open("/proc/allocinfo", O_RDONLY, 0);
	if (!IS_ERR(allocinfo))
		held_buf = kvmalloc(HELD_BUF + 1, GFP_KERNEL);
	t = kthread_run(bench_main, NULL, "peermem_bench");
	if (!IS_ERR(t))
		wait_for_completion(&done);
	kvfree(held_buf);
	if (!IS_ERR(allocinfo))
		filp_close(allocinfo, NULL);
	if (IS_ERR(t))
		return PTR_ERR(t);
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
