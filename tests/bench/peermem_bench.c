// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * peermem's benchmark, run in the dev VM by `make bench` (tests/qemu/plans/bench.sh).
 *
 * Loaded for one client at a time (peermem, the baseline client costed as
 * nvidia-peermem, tests/bench/peermem_baseline.c, or the baseline in its floor mode,
 * in callback or persistent mode), it drives registrations through the fake
 * peer-memory core, as a fake process, and prints one CSV row per figure on the
 * console:
 *
 *   PEERMEM-BENCH,<strategy>,<group>,<metric>,<size>,<pin_cost_us>,<live>,<value>
 *
 * tools/bench-report turns the rows into the table, the ratios, the PASS/FAIL lines
 * of the targets and the plots (docs/bench/README.md). The fake nvidia.ko charges
 * pin_cost_us per pin and per unpin under its driver lock, the same for both
 * strategies.
 *
 * `series=rest` runs every series but the timed pairs, in a boot of its own per client
 * (the memory series from a fresh state); `series=latency` runs the timed pairs only,
 * loaded in turn for each client of a mode in one boot, several times over, so that
 * the clients' pairs are timed within a second of each other: the host's speed moves
 * over seconds (docs/bench, "Boot to boot"). `series=calibrate` only measures the
 * TSC's rate (two seconds asleep), in a load of its own before the timed ones, which
 * then all start alike, none of them just after that sleep.
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
 * Time. The dev kernel's clocksource is jiffies (4 ms: no HPET or PM timer to
 * calibrate the TSC against), too coarse for one registration; the TSC itself ticks
 * steadily under QEMU. It is calibrated against the jiffies clock over two seconds
 * (error below 0.5 %), then read directly.
 */
static u64 tsc_per_ms;

/*
 * The TSC. Under User-Mode Linux get_cycles() is the generic stub that returns 0 (and
 * ktime counts in steps of 256 ns there): the kernel runs as a host process, which
 * may read the TSC itself.
 */
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
		/* Measured by a load of its own in this boot (tests/qemu/plans/bench.sh). */
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
 * Memory held, to the byte, by owner: the kernel's allocation profiling
 * (/proc/allocinfo) counts what every allocation site holds, slab objects at their
 * cache's object size, pages and vmalloc areas at their size. Profiling is off at
 * boot (the timed series do not pay for it) and on only while the registrations
 * measured are made (the memory and huge series, the scaling series' fill).
 */
struct held {
	s64 total;	/* every site */
	s64 fake;	/* the fake nvidia.ko ([nvidia]) */
	s64 core;	/* the fake peer-memory core ([ib_core]) */
	s64 module;	/* the client module (client_site) */
	s64 bench;	/* this driver's own arrays ([peermem_bench]) */
};

static void held_sub(struct held *d, const struct held *a, const struct held *b)
{
	d->total = a->total - b->total;
	d->fake = a->fake - b->fake;
	d->core = a->core - b->core;
	d->module = a->module - b->module;
	d->bench = a->bench - b->bench;
}

/*
 * The client module's sites: its own (peermem, the drop-in build, or the baseline),
 * the kernel's Rust allocation helper (peermem's records: no other Rust code
 * allocates here) and the SG tables it builds for the core.
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
 * Reads @f (/proc/allocinfo, kept open so that its buffer is held alike by each read)
 * from the start into @h.
 */
static int held_read(struct file *f, char *buf, struct held *h)
{
	size_t have = 0;
	loff_t pos = 0;
	ssize_t n;

	memset(h, 0, sizeof(*h));
	while ((n = kernel_read(f, buf + have, HELD_BUF - have, &pos)) > 0) {
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

/*
 * /proc/allocinfo, opened by the loading process: the benchmark thread's root is the
 * kernel's initial one, which has no /proc.
 */
static struct file *allocinfo;

/* Memory accounting for a series: profiling on, a buffer for reading the file. */
struct accounting {
	char *buf;
};

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

static void accounting_start(struct accounting *acc)
{
	acc->buf = NULL;
	if (IS_ERR_OR_NULL(allocinfo)) {
		fail("opening /proc/allocinfo (CONFIG_MEM_ALLOC_PROFILING)",
		     allocinfo ? PTR_ERR(allocinfo) : -ENOENT);
		return;
	}
	acc->buf = kvmalloc(HELD_BUF + 1, GFP_KERNEL);
	if (!acc->buf) {
		fail("accounting buffer", -ENOMEM);
		return;
	}
	profiling(true);
}

static void accounting_stop(struct accounting *acc)
{
	if (!acc->buf)
		return;
	profiling(false);
	kvfree(acc->buf);
	acc->buf = NULL;
}

static int held_now(struct accounting *acc, struct held *h)
{
	int err = acc->buf ? held_read(allocinfo, acc->buf, h) : -ENOENT;

	if (err)
		fail("reading /proc/allocinfo", err);
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
	struct held d;
	s64 v[5];
	char metric[40];
	int i;

	held_sub(&d, after, before);
	v[0] = d.total - d.bench;
	v[1] = d.fake;
	v[2] = d.core;
	v[3] = d.module;
	v[4] = v[0] - d.fake - d.core - d.module;
	for (i = 0; i < ARRAY_SIZE(what); i++) {
		snprintf(metric, sizeof(metric), "%s%s", prefix, what[i]);
		row(group, metric, size, 0, live, div_u64(max_t(s64, v[i], 0) * 1000, live));
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
 * the memory each live registration holds, by owner (as bench_memory). Profiling is
 * on while the registrations are made and off while the operations are timed; their
 * frees, with profiling off, are not subtracted from the sites, which leaves later
 * differences exact (only what is allocated between two reads counts).
 *
 * The op cost is the median of SCALING_BATCHES batches of @n operations, each timed
 * as a whole: the points above 100000 live run in one boot per client, and a batch
 * of a few milliseconds that the host stalls (its vCPU descheduled) would otherwise
 * be that point's figure. Fifteen: under User-Mode Linux a batch takes about a
 * millisecond, which a host timer signal or a preempted host thread lengthens by half
 * (five batches left single points 2.2 times their neighbours on the GPU machine).
 */
#define SCALING_BATCHES 15

static void bench_scaling(u32 live, int n)
{
	struct accounting acc;
	struct held h0, h1;
	struct fake_core_client_stats ph0, ph1;
	struct fake_mr **mrs;
	u64 *win, t0, va, batch[SCALING_BATCHES];
	int nwin, i, b, made = 0, err;

	mrs = kvcalloc(live, sizeof(*mrs), GFP_KERNEL);
	win = alloc_windows(live, &nwin);
	va = fake_nv_alloc(proc, SZ_1M, false);
	if (!mrs || !win || !va || (u64)nwin * WINDOW < (u64)live * K64) {
		fail("scaling setup", -ENOMEM);
		goto out;
	}
	accounting_start(&acc);
	err = held_now(&acc, &h0);
	for (made = 0; made < live; made++) {
		mrs[made] = reg(window_at(win, made, K64), K64);
		if (IS_ERR(mrs[made])) {
			fail("scaling registration", PTR_ERR(mrs[made]));
			accounting_stop(&acc);
			goto out;
		}
		if (!(made % 4096))
			cond_resched();
	}
	if (!err)
		err = held_now(&acc, &h1);
	accounting_stop(&acc);
	if (!err)
		held_rows("scaling", "bytes_per_reg_", K64, live, &h0, &h1);
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
	if (!fake_core_client_stats("nv_mem", &ph1)) {
		for (i = 0; i < FAKE_CORE_PHASE_COUNT; i++) {
			char metric[32];

			snprintf(metric, sizeof(metric), "phase_%s_ns", fake_core_phase_name(i));
			row("scaling", metric, K64, 0, live,
			    div_u64((ph1.phase_ns[i] - ph0.phase_ns[i]) * 1000,
				    n * SCALING_BATCHES));
		}
	}
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

/*
 * Memory per live registration, by owner, from allocation profiling (struct held):
 * everything held by @live registrations of @size, the fake driver's share (its pins,
 * tables and mappings), the core's, and the rest, the client's (its records and SG
 * tables). The figure is the growth of what is held across making them, read to the
 * byte, so it does not depend on which slab pages were already partly used.
 */
static void bench_memory(struct accounting *acc, u64 size, u32 live)
{
	struct held h0, h1;
	struct fake_mr **mrs;
	int nwin, made = 0;
	u64 *win;

	mrs = kvcalloc(live, sizeof(*mrs), GFP_KERNEL);
	win = alloc_windows(div_u64(size, K64) * live, &nwin);
	if (!mrs || !win || (u64)nwin * WINDOW < size * live) {
		fail("memory setup", -ENOMEM);
		goto out;
	}
	if (held_now(acc, &h0))
		goto out;
	for (made = 0; made < live; made++) {
		mrs[made] = reg(window_at(win, made, size), size);
		if (IS_ERR(mrs[made])) {
			fail("memory registration", PTR_ERR(mrs[made]));
			goto out;
		}
	}
	if (held_now(acc, &h1))
		goto out;
	held_rows("memory", "bytes_per_reg_", size, live, &h0, &h1);
out:
	while (made-- > 0)
		fake_core_dereg_mr(mrs[made]);
	if (win)
		free_windows(win, nwin);
	kvfree(mrs);
}

/*
 * One registration as large as half an H100's BAR1 (64 GiB, 1,048,576 pages of
 * 64 KiB): its latency, SG entries and memory by owner (as bench_memory). The window
 * is unbacked (synthetic bus addresses: nothing DMAs into it).
 */
static void bench_huge(struct accounting *acc, u64 size)
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
	err = held_now(acc, &h0);
	t0 = now_ns();
	mr = reg(va, size);
	t1 = now_ns();
	if (IS_ERR(mr)) {
		fail("huge registration", PTR_ERR(mr));
		goto out;
	}
	if (!err)
		err = held_now(acc, &h1);
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
	/*
	 * Up to every 64 KiB page of an H100's 128 GiB BAR1 held by its own registration,
	 * and of an H200's 256 GiB (scale_max 4194304: the bench kit's KVM run, docs/bench).
	 */
	static const u32 scale_points[] = { 1000, 10000, 100000, 1000000, 2097152, 4194304 };
	struct accounting acc = {};
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
		set_cost(0, true);
		accounting_start(&acc);
		bench_memory(&acc, SZ_64K, 20000);
		bench_memory(&acc, SZ_64M, 1000);
		accounting_stop(&acc);
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
	accounting_start(&acc);
	bench_huge(&acc, 64 * (u64)SZ_1G);
	accounting_stop(&acc);
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
	t = kthread_run(bench_main, NULL, "peermem_bench");
	if (IS_ERR(t)) {
		if (!IS_ERR(allocinfo))
			filp_close(allocinfo, NULL);
		return PTR_ERR(t);
	}
	wait_for_completion(&done);
	if (!IS_ERR(allocinfo))
		filp_close(allocinfo, NULL);
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
