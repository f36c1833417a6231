// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Seeded randomized suites of the peermem client against a reference model.
 *
 * Linked into the callback and persistent builds of the client test module (see
 * Kbuild) next to peermem_client_test.c. A xorshift64* generator, seeded by the
 * module parameter `seed` (default a fixed value, so that runs reproduce; 0: taken
 * from get_random_u64() and printed), picks thousands of operations on 2-3 fake
 * processes: registrations of random sub-ranges (exact repeats of a live
 * registration's range, partial overlaps, buffers that cannot be invalidated),
 * deregistrations, frees and reallocations, process exits, injected pin errors and
 * BAR1 exhaustion. After every step the model is compared with what the fakes
 * observe: live pins, pins made, BAR1 pages in use, DMA mappings, regions, free
 * callbacks, each live registration's DMA addresses and invalidation count, and no
 * contract violation in either fake. The first mismatch fails the case with the
 * seed, the step and the operation, and stops it.
 *
 *   peermem_model_callback    peermem with persistent_api_support=0 (callback pins,
 *                             INVALIDATE_UNMAPS "nv_mem", persistent "nv_mem_nc");
 *                             plus a two-thread register/free stress case
 *   peermem_model_persistent  peermem defaults (persistent pins, never shared)
 */
#include <kunit/test.h>
#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/cpumask.h>
#include <linux/delay.h>
#include <linux/err.h>
#include <linux/kthread.h>
#include <linux/moduleparam.h>
#include <linux/random.h>
#include <linux/sched.h>
#include <linux/sizes.h>
#include <linux/slab.h>

#include "fake_ib_core.h"
#include "fake_nvidia.h"

#if defined(PEERMEM_TEST_CALLBACK)
#define MODEL_CB 1
#define MODEL_SUITE "peermem_model_callback"
#elif defined(PEERMEM_TEST_PERSISTENT)
#define MODEL_CB 0
#define MODEL_SUITE "peermem_model_persistent"
#else
#error "peermem_model_test.c is built in the callback and persistent modes only"
#endif

static unsigned long long seed = 0x9e3779b97f4a7c15ULL;
module_param(seed, ullong, 0444);
MODULE_PARM_DESC(seed, "seed of the randomized model suites (0: random, printed)");

#define MP64K ((u64)SZ_64K)
#define M_OPS 5000
/* More for the stress runs (docs/testing.md, "Stress at real parallelism"). */
static uint model_ops = M_OPS;
module_param(model_ops, uint, 0444);
MODULE_PARM_DESC(model_ops, "operations of each randomized model case (default 5000)");
#define M_NPROC 3
#define M_NALLOC 3
#define M_MAXREG 40
#define M_MAXPIN 64
#define M_MAXCBPINS 12	/* linked callback pins per process: < peermem's scan of 16 */
#define M_NOFF 3

/* ---- PRNG: xorshift64* ------------------------------------------------------ */

static u64 rnd_next(u64 *s)
{
	u64 x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dULL;
}

/* Uniform enough in [0, n), n > 0. */
static u64 rnd(u64 *s, u64 n)
{
	return rnd_next(s) % n;
}

/* ---- the model --------------------------------------------------------------- */

struct m_alloc {
	bool live;
	u64 va, size;
	int id;			/* unique per allocation ever made */
};

struct m_proc {
	struct fake_nv_proc *p;
	int gen;		/* bumped at each exit + recreate */
	struct m_alloc a[M_NALLOC];
};

struct m_pin {
	bool used;		/* slot in use: the pin is live in the fake */
	int proc, gen;
	int alloc_id;
	u64 alloc_va;
	u64 start, end;		/* 64 KiB-rounded */
	bool cb;		/* callback pin (shared, freed by callback) */
	u64 id;			/* creation order */
	int users;
};

struct m_reg {
	bool live;
	struct fake_mr *mr;
	int proc, gen;
	int pin;		/* model pin index, or -1 once that pin died by callback */
	u64 addr, len;
	bool nc;		/* can_invalidate=false */
	bool invalidated;
	u64 off[M_NOFF], dma[M_NOFF];
};

enum m_op {
	OP_REG, OP_REG_EXACT, OP_REG_OVERLAP, OP_REG_INJECT_EIO, OP_REG_INJECT_ENOMEM,
	OP_REG_BAR, OP_DEREG, OP_FREE, OP_ALLOC, OP_EXIT, OP_COUNT
};

static const char *const op_names[OP_COUNT] = {
	"reg", "reg_exact", "reg_overlap", "reg_inject_eio", "reg_inject_enomem",
	"reg_bar_exhausted", "dereg", "free", "alloc", "exit",
};

struct model {
	struct kunit *test;
	u64 seed, rng;
	int step;
	char what[160];		/* the current operation, for failure reports */
	bool failed;
	int cur;		/* entered process, or -1 */
	int next_alloc_id;
	u64 next_pin_id;
	struct m_proc procs[M_NPROC];
	struct m_pin pins[M_MAXPIN];
	struct m_reg regs[M_MAXREG];
	/* expectations of the fakes' counters */
	u64 pins_total, callbacks;
	struct fake_nv_counters nv0;
	struct fake_core_counters core0;
	struct fake_nv_config cfg0;
	/* summary */
	u64 ops[OP_COUNT], skipped, invalidations, pins_made, pins_reused, reg_failed;
	u64 refused_enomem, refused_eio;	/* peermem's refusal counters they add */
};

#define M_CHECK(m, cond, fmt, ...)						\
	do {									\
		if (!(m)->failed && !(cond)) {					\
			(m)->failed = true;					\
			KUNIT_FAIL((m)->test,					\
				   "model mismatch: seed=%llu step=%d op=%s: " fmt,\
				   (m)->seed, (m)->step, (m)->what, ##__VA_ARGS__); \
		}								\
	} while (0)

static void m_enter(struct model *m, int i)
{
	if (m->cur == i)
		return;
	if (m->cur >= 0)
		fake_nv_proc_leave(m->procs[m->cur].p);
	m->cur = i;
	if (i >= 0)
		fake_nv_proc_enter(m->procs[i].p);
}

static u32 pages_mask(u64 alloc_va, u64 start, u64 end)
{
	u32 first = (start - alloc_va) / MP64K, n = (end - start) / MP64K;

	return (n >= 32 ? ~0u : ((1u << n) - 1)) << first;
}

/* BAR1 bytes in use: 64 KiB pages pinned at least once, per allocation. */
static u64 model_bar1(struct model *m)
{
	u64 total = 0;
	int i, j;

	for (i = 0; i < M_MAXPIN; i++) {
		u32 mask = 0;
		bool first = true;

		if (!m->pins[i].used)
			continue;
		for (j = 0; j < M_MAXPIN; j++) {
			if (!m->pins[j].used || m->pins[j].alloc_id != m->pins[i].alloc_id)
				continue;
			if (j < i) {
				first = false;
				break;
			}
			mask |= pages_mask(m->pins[j].alloc_va, m->pins[j].start, m->pins[j].end);
		}
		if (first)
			total += (u64)hweight32(mask) * MP64K;
	}
	return total;
}

static int count_pins(struct model *m)
{
	int i, n = 0;

	for (i = 0; i < M_MAXPIN; i++)
		n += m->pins[i].used;
	return n;
}

static int count_regs(struct model *m, bool mapped_only)
{
	int i, n = 0;

	for (i = 0; i < M_MAXREG; i++)
		n += m->regs[i].live && !(mapped_only && m->regs[i].invalidated);
	return n;
}

static int cb_pins_of(struct model *m, int proc)
{
	int i, n = 0;

	for (i = 0; i < M_MAXPIN; i++)
		n += m->pins[i].used && m->pins[i].cb && m->pins[i].proc == proc &&
		     m->pins[i].gen == m->procs[proc].gen;
	return n;
}

/* Everything observable, after every step. */
static void model_check(struct model *m)
{
	struct fake_nv_counters nv;
	struct fake_core_counters core;
	int i, k;

	fake_nv_get_counters(&nv);
	fake_core_get_counters(&core);
	M_CHECK(m, nv.violations_total == m->nv0.violations_total,
		"fake nvidia violations %llu, expected %llu", nv.violations_total,
		m->nv0.violations_total);
	M_CHECK(m, core.violations_total == m->core0.violations_total,
		"fake core violations %llu, expected %llu", core.violations_total,
		m->core0.violations_total);
	M_CHECK(m, nv.pins_live == count_pins(m), "pins_live %llu, model %d", nv.pins_live,
		count_pins(m));
	M_CHECK(m, nv.pins_total - m->nv0.pins_total == m->pins_total,
		"pins_total delta %llu, model %llu", nv.pins_total - m->nv0.pins_total,
		m->pins_total);
	M_CHECK(m, nv.bar1_bytes_in_use == model_bar1(m), "bar1_bytes_in_use %llu, model %llu",
		nv.bar1_bytes_in_use, model_bar1(m));
	M_CHECK(m, nv.dma_mappings_live == count_regs(m, true),
		"dma_mappings_live %llu, model %d", nv.dma_mappings_live, count_regs(m, true));
	M_CHECK(m, nv.callbacks_run - m->nv0.callbacks_run == m->callbacks,
		"callbacks_run delta %llu, model %llu", nv.callbacks_run - m->nv0.callbacks_run,
		m->callbacks);
	M_CHECK(m, core.mrs_live == m->core0.mrs_live + count_regs(m, false),
		"core mrs_live %llu, model %llu", core.mrs_live,
		m->core0.mrs_live + count_regs(m, false));
	for (i = 0; i < M_MAXREG && !m->failed; i++) {
		struct m_reg *r = &m->regs[i];
		int inv;

		if (!r->live)
			continue;
		inv = fake_core_mr_invalidations(r->mr);
		M_CHECK(m, inv == (r->invalidated ? 1 : 0),
			"registration %d [%llx+%llx] invalidated %d times, model %d", i, r->addr,
			r->len, inv, r->invalidated);
		for (k = 0; k < M_NOFF; k++) {
			u64 got = fake_core_mr_dma_addr(r->mr, r->off[k]);
			u64 want = r->invalidated ? 0 : r->dma[k];

			M_CHECK(m, got == want,
				"registration %d [%llx+%llx]%s: DMA address of offset %llx is %llx, model %llx",
				i, r->addr, r->len, r->nc ? " nc" : "", r->off[k], got, want);
		}
	}
}

/* The covering pin peermem's registry returns: among linked callback pins of the
 * address space that cover the range, the last in (start, id) order. */
static int find_covering(struct model *m, int proc, u64 start, u64 end)
{
	int i, best = -1;

	for (i = 0; i < M_MAXPIN; i++) {
		struct m_pin *p = &m->pins[i];

		if (!p->used || !p->cb || p->proc != proc || p->gen != m->procs[proc].gen)
			continue;
		if (p->start > start || p->end < end)
			continue;
		if (best < 0 || p->start > m->pins[best].start ||
		    (p->start == m->pins[best].start && p->id > m->pins[best].id))
			best = i;
	}
	return best;
}

/* Pages of [start, end) of allocation @id not pinned by any live pin. */
static int new_pages(struct model *m, int id, u64 alloc_va, u64 start, u64 end)
{
	u32 mask = pages_mask(alloc_va, start, end), have = 0;
	int i;

	for (i = 0; i < M_MAXPIN; i++)
		if (m->pins[i].used && m->pins[i].alloc_id == id)
			have |= pages_mask(m->pins[i].alloc_va, m->pins[i].start, m->pins[i].end);
	return hweight32(mask & ~have);
}

static int free_slot_reg(struct model *m)
{
	int i;

	for (i = 0; i < M_MAXREG; i++)
		if (!m->regs[i].live)
			return i;
	return -1;
}

static int free_slot_pin(struct model *m)
{
	int i;

	for (i = 0; i < M_MAXPIN; i++)
		if (!m->pins[i].used)
			return i;
	return -1;
}

/* A pin's user went away: the last one unpins. */
static void pin_unuse(struct model *m, int pi)
{
	if (pi < 0)
		return;
	if (--m->pins[pi].users == 0)
		m->pins[pi].used = false;
}

/* cuMemFree of the model's allocation: callback pins die, each of their
 * registrations is invalidated once; persistent pins keep the memory. */
static void model_free(struct model *m, int pr, int ai)
{
	struct m_alloc *a = &m->procs[pr].a[ai];
	int i, j;

	for (i = 0; i < M_MAXPIN; i++) {
		struct m_pin *p = &m->pins[i];

		if (!p->used || p->alloc_id != a->id || !p->cb)
			continue;
		m->callbacks++;
		for (j = 0; j < M_MAXREG; j++) {
			if (m->regs[j].live && m->regs[j].pin == i) {
				m->regs[j].invalidated = true;
				m->regs[j].pin = -1;
				m->invalidations++;
			}
		}
		p->used = false;
	}
	a->live = false;
}

static void do_alloc(struct model *m, int pr, int ai)
{
	struct m_alloc *a = &m->procs[pr].a[ai];
	u64 size = (1 + rnd(&m->rng, 16)) * MP64K, va;

	/* Half the time the address of the freed allocation, if there was one. */
	if (a->va && rnd(&m->rng, 2)) {
		va = fake_nv_alloc_at(m->procs[pr].p, a->va, a->size, true);
		M_CHECK(m, va == a->va, "alloc_at %llx (%llx bytes) returned %llx", a->va,
			a->size, va);
		size = a->size;
	} else {
		va = fake_nv_alloc(m->procs[pr].p, size, true);
		M_CHECK(m, va != 0, "alloc of %llx bytes failed", size);
	}
	a->va = va;
	a->size = size;
	a->live = true;
	a->id = m->next_alloc_id++;
}

static void proc_start(struct model *m, int pr)
{
	int j;

	m->procs[pr].p = fake_nv_proc_create();
	M_CHECK(m, m->procs[pr].p != NULL, "fake_nv_proc_create failed");
	if (!m->procs[pr].p)
		return;
	m->procs[pr].gen++;
	for (j = 0; j < M_NALLOC; j++) {
		m->procs[pr].a[j].va = 0;
		do_alloc(m, pr, j);
	}
}

static void m_dereg(struct model *m, int ri)
{
	struct m_reg *r = &m->regs[ri];

	/* The owner puts a callback pin: enter its process while it lives. */
	if (m->procs[r->proc].gen == r->gen)
		m_enter(m, r->proc);
	fake_core_dereg_mr(r->mr);
	r->live = false;
	pin_unuse(m, r->pin);
}

/* A random live allocation of process @pr, or -1. */
static int pick_alloc(struct model *m, int pr)
{
	int j, k = rnd(&m->rng, M_NALLOC);

	for (j = 0; j < M_NALLOC; j++, k = (k + 1) % M_NALLOC)
		if (m->procs[pr].a[k].live)
			return k;
	return -1;
}

/* A random live registration (of process @pr on allocation @ai if pr >= 0, with
 * memory not freed), or -1. */
static int pick_reg(struct model *m, int pr, int ai)
{
	int j, k = rnd(&m->rng, M_MAXREG);

	for (j = 0; j < M_MAXREG; j++, k = (k + 1) % M_MAXREG) {
		struct m_reg *r = &m->regs[k];

		if (!r->live)
			continue;
		if (pr < 0)
			return k;
		if (r->proc == pr && r->gen == m->procs[pr].gen && !r->invalidated &&
		    r->addr >= m->procs[pr].a[ai].va &&
		    r->addr + r->len <= m->procs[pr].a[ai].va + m->procs[pr].a[ai].size &&
		    (r->pin < 0 || m->pins[r->pin].alloc_id == m->procs[pr].a[ai].id))
			return k;
	}
	return -1;
}

/* One registration; returns false if the operation was not applicable. */
static bool op_register(struct model *m, enum m_op op)
{
	struct m_proc *P;
	struct m_alloc *a;
	struct fake_nv_config cfg;
	struct fake_reg_opts o = { .writable = true };
	struct fake_mr *mr;
	u64 addr, len, rs, re;
	int pr = rnd(&m->rng, M_NPROC), ai, ri, pi = -1, cover = -1, want_err = 0, k;
	int eio_tries = 0;
	bool cbpin;

	P = &m->procs[pr];
	ai = pick_alloc(m, pr);
	ri = free_slot_reg(m);
	if (ai < 0 || ri < 0)
		return false;
	a = &P->a[ai];
	o.can_invalidate = rnd(&m->rng, 5) != 0;

	if (op == OP_REG_EXACT || op == OP_REG_OVERLAP) {
		int e = pick_reg(m, pr, ai);

		if (e < 0)
			return false;
		addr = m->regs[e].addr;
		len = m->regs[e].len;
		if (op == OP_REG_OVERLAP) {
			/* From inside it to past its rounded end (within the allocation). */
			u64 end = round_up(addr + len, MP64K);

			if (end >= a->va + a->size)
				return false;
			addr += rnd(&m->rng, len);
			len = end - addr + 1 + rnd(&m->rng, a->va + a->size - end);
		}
	} else {
		addr = a->va + rnd(&m->rng, a->size);
		switch (rnd(&m->rng, 4)) {
		case 0:
			len = 1 + rnd(&m->rng, 256);
			break;
		case 1:
			len = 1 + rnd(&m->rng, 2 * MP64K);
			break;
		default:
			len = 1 + rnd(&m->rng, a->va + a->size - addr);
			break;
		}
		if (len > a->va + a->size - addr)
			len = a->va + a->size - addr;
	}
	rs = round_down(addr, MP64K);
	re = round_up(addr + len, MP64K);
	cbpin = MODEL_CB && o.can_invalidate;
	if (cbpin)
		cover = find_covering(m, pr, rs, re);
	if (cover < 0) {
		pi = free_slot_pin(m);
		if (pi < 0 || (cbpin && cb_pins_of(m, pr) >= M_MAXCBPINS))
			return false;
	}
	if (op == OP_REG_INJECT_EIO || op == OP_REG_INJECT_ENOMEM || op == OP_REG_BAR) {
		if (cover >= 0)
			return false;	/* no pin is made: nothing to fail */
	}
	snprintf(m->what, sizeof(m->what), "%s proc %d [%llx+%llx]%s", op_names[op], pr, addr,
		 len, o.can_invalidate ? "" : " can_invalidate=false");

	m_enter(m, pr);
	if (op == OP_REG_INJECT_EIO) {
		/*
		 * A pin failure other than BAR1 exhaustion is "not mine" (docs/refusals.md):
		 * the core offers the range to the next client. Every client it tries
		 * (nv_mem, then nv_mem_nc for an invalidatable buffer in callback mode)
		 * fails, and the application gets the core's EFAULT.
		 */
		eio_tries = MODEL_CB && o.can_invalidate ? 2 : 1;
		fake_nv_inject_pin_errors(eio_tries, EIO);
		want_err = -EFAULT;
	} else if (op == OP_REG_INJECT_ENOMEM) {
		fake_nv_inject_pin_errors(1, ENOMEM);
		want_err = -ENOMEM;
	} else if (op == OP_REG_BAR) {
		struct fake_nv_counters c;

		fake_nv_get_counters(&c);
		cfg = m->cfg0;
		cfg.bar1_size = cfg.bar1_reserve + c.bar1_bytes_in_use;	/* no headroom */
		M_CHECK(m, fake_nv_set_config(&cfg) == 0, "set_config bar1_size %llx",
			cfg.bar1_size);
		if (new_pages(m, a->id, a->va, rs, re))
			want_err = -ENOMEM;
	}
	mr = fake_core_reg_mr(addr, len, &o);
	if (op == OP_REG_INJECT_EIO || op == OP_REG_INJECT_ENOMEM)
		fake_nv_inject_pin_errors(0, 0);
	if (op == OP_REG_BAR)
		M_CHECK(m, fake_nv_set_config(&m->cfg0) == 0, "restoring the config");

	M_CHECK(m, PTR_ERR_OR_ZERO(mr) == want_err, "registration returned %d, model %d",
		(int)PTR_ERR_OR_ZERO(mr), want_err);
	if (IS_ERR(mr)) {
		m->reg_failed++;
		m->refused_enomem += PTR_ERR(mr) == -ENOMEM;
		m->refused_eio += eio_tries;
		return true;
	}
	if (want_err) {		/* mismatch reported: do not leak it */
		fake_core_dereg_mr(mr);
		return true;
	}
	M_CHECK(m, !strcmp(fake_core_mr_client(mr), cbpin || !MODEL_CB ? "nv_mem" : "nv_mem_nc"),
		"client %s", fake_core_mr_client(mr));

	if (cover >= 0) {
		pi = cover;
		m->pins_reused++;
	} else {
		m->pins[pi] = (struct m_pin){
			.used = true, .proc = pr, .gen = P->gen, .alloc_id = a->id,
			.alloc_va = a->va, .start = rs, .end = re, .cb = cbpin,
			.id = m->next_pin_id++,
		};
		m->pins_total++;
		m->pins_made++;
	}
	m->pins[pi].users++;
	m->regs[ri] = (struct m_reg){
		.live = true, .mr = mr, .proc = pr, .gen = P->gen, .pin = pi,
		.addr = addr, .len = len, .nc = !o.can_invalidate,
	};
	m->regs[ri].off[0] = 0;
	m->regs[ri].off[1] = len - 1;
	m->regs[ri].off[2] = rnd(&m->rng, len);
	for (k = 0; k < M_NOFF; k++) {
		u64 va = addr + m->regs[ri].off[k];

		m->regs[ri].dma[k] = fake_nv_phys(P->p, va) + (va & (MP64K - 1));
	}
	return true;
}

static bool model_step(struct model *m)
{
	u64 r = rnd(&m->rng, 100);
	enum m_op op;
	int pr, ai, ri;

	if (r < 30)
		op = OP_REG;
	else if (r < 38)
		op = OP_REG_EXACT;
	else if (r < 44)
		op = OP_REG_OVERLAP;
	else if (r < 46)
		op = OP_REG_INJECT_EIO;
	else if (r < 48)
		op = OP_REG_INJECT_ENOMEM;
	else if (r < 51)
		op = OP_REG_BAR;
	else if (r < 80)
		op = OP_DEREG;
	else if (r < 88)
		op = OP_FREE;
	else if (r < 98)
		op = OP_ALLOC;
	else
		op = OP_EXIT;

	switch (op) {
	case OP_DEREG:
		ri = pick_reg(m, -1, 0);
		if (ri < 0)
			return false;
		snprintf(m->what, sizeof(m->what), "dereg %d [%llx+%llx] of proc %d%s", ri,
			 m->regs[ri].addr, m->regs[ri].len, m->regs[ri].proc,
			 m->procs[m->regs[ri].proc].gen == m->regs[ri].gen ? "" : " (exited)");
		m_dereg(m, ri);
		break;
	case OP_FREE:
		pr = rnd(&m->rng, M_NPROC);
		ai = pick_alloc(m, pr);
		if (ai < 0)
			return false;
		snprintf(m->what, sizeof(m->what), "free proc %d allocation %llx (%llx bytes)", pr,
			 m->procs[pr].a[ai].va, m->procs[pr].a[ai].size);
		M_CHECK(m, fake_nv_free(m->procs[pr].p, m->procs[pr].a[ai].va) == 0,
			"fake_nv_free failed");
		model_free(m, pr, ai);
		break;
	case OP_ALLOC:
		pr = rnd(&m->rng, M_NPROC);
		for (ai = 0; ai < M_NALLOC && m->procs[pr].a[ai].live; ai++)
			;
		if (ai == M_NALLOC)
			return false;
		snprintf(m->what, sizeof(m->what), "alloc proc %d slot %d", pr, ai);
		do_alloc(m, pr, ai);
		break;
	case OP_EXIT:
		pr = rnd(&m->rng, M_NPROC);
		snprintf(m->what, sizeof(m->what), "exit proc %d", pr);
		if (m->cur == pr)
			m_enter(m, -1);
		for (ai = 0; ai < M_NALLOC; ai++)
			if (m->procs[pr].a[ai].live)
				model_free(m, pr, ai);
		fake_nv_proc_exit(m->procs[pr].p);
		m->procs[pr].p = NULL;
		proc_start(m, pr);
		break;
	default:
		if (!op_register(m, op))
			return false;
		break;
	}
	m->ops[op]++;
	return true;
}

static void model_run(struct kunit *test)
{
	struct model *m;
	struct fake_nv_counters nv;
	struct fake_core_counters core;
	int i;
	ktime_t t0 = ktime_get();

	m = kzalloc(sizeof(*m), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, m);
	m->test = test;
	m->seed = seed ? seed : get_random_u64();
	if (!m->seed)
		m->seed = 1;
	m->rng = m->seed;
	m->cur = -1;
	kunit_info(test, "seed=%llu (reproduce with seed=%llu)\n", m->seed, m->seed);
	fake_nv_get_config(&m->cfg0);
	fake_nv_get_counters(&m->nv0);
	fake_core_get_counters(&m->core0);
	snprintf(m->what, sizeof(m->what), "setup");
	for (i = 0; i < M_NPROC; i++)
		proc_start(m, i);

	for (m->step = 0; m->step < model_ops && !m->failed; ) {
		if (!model_step(m)) {
			m->skipped++;
			continue;
		}
		model_check(m);
		m->step++;
	}

	/* Teardown: everything released, in the model and in the fakes. */
	snprintf(m->what, sizeof(m->what), "teardown");
	for (i = 0; i < M_MAXREG; i++)
		if (m->regs[i].live)
			m_dereg(m, i);
	m_enter(m, -1);
	for (i = 0; i < M_NPROC; i++) {
		int ai;

		for (ai = 0; ai < M_NALLOC; ai++)
			if (m->procs[i].a[ai].live)
				model_free(m, i, ai);
		fake_nv_proc_exit(m->procs[i].p);
	}
	if (!m->failed)
		model_check(m);
	fake_nv_set_config(&m->cfg0);
	fake_nv_get_counters(&nv);
	fake_core_get_counters(&core);
	KUNIT_EXPECT_EQ(test, nv.pins_live, 0);
	KUNIT_EXPECT_EQ(test, nv.dma_mappings_live, 0);
	KUNIT_EXPECT_EQ(test, nv.bar1_bytes_in_use, 0);
	KUNIT_EXPECT_EQ(test, core.mrs_live, 0);
	KUNIT_EXPECT_EQ(test, nv.violations_total, m->nv0.violations_total);
	KUNIT_EXPECT_EQ(test, core.violations_total, m->core0.violations_total);

	kunit_info(test, "seed=%llu: %d operations in %lld ms (%llu not applicable, redrawn)\n",
		   m->seed, m->step, ktime_ms_delta(ktime_get(), t0), m->skipped);
	kunit_info(test,
		   "  reg %llu, reg_exact %llu, reg_overlap %llu, inject_eio %llu, inject_enomem %llu, bar_exhausted %llu\n",
		   m->ops[OP_REG], m->ops[OP_REG_EXACT], m->ops[OP_REG_OVERLAP],
		   m->ops[OP_REG_INJECT_EIO], m->ops[OP_REG_INJECT_ENOMEM], m->ops[OP_REG_BAR]);
	kunit_info(test, "  dereg %llu, free %llu, alloc %llu, exit %llu\n", m->ops[OP_DEREG],
		   m->ops[OP_FREE], m->ops[OP_ALLOC], m->ops[OP_EXIT]);
	kunit_info(test,
		   "  registrations failed as modelled %llu, invalidations %llu, pins made %llu, pins reused %llu, callbacks %llu\n",
		   m->reg_failed, m->invalidations, m->pins_made, m->pins_reused, m->callbacks);
	/* For the plan's checks of peermem's refusal counters (debugfs stats). */
	kunit_info(test, "%s refusals: refused_bar1_exhausted=%llu refused_pin_failed=%llu\n",
		   MODEL_SUITE, m->refused_enomem, m->refused_eio);
	kfree(m);
}

#if MODEL_CB
/* ---- two threads: the owner registers, another thread frees ---------------- */

#define STRESS_ROUNDS 2000
/* Fewer on slow kernels (the debug kernel passes stress_rounds=200). */
static uint stress_rounds = STRESS_ROUNDS;
module_param(stress_rounds, uint, 0444);
MODULE_PARM_DESC(stress_rounds, "rounds of the register-against-free stress (default 2000)");
/* Owner and freer pairs running at once, each on two CPUs of its own where there are
 * enough (the stress runs: one pair per two CPUs), each with its process and buffer. */
static uint stress_pairs = 1;
module_param(stress_pairs, uint, 0444);
MODULE_PARM_DESC(stress_pairs, "owner/freer thread pairs of the register-against-free stress (default 1)");
#define STRESS_SIZE (4 * MP64K)

struct stress {
	struct fake_nv_proc *p;
	u64 va;
	atomic_t arrive;
	atomic_t ready;		/* the owner created the process */
	u64 seed;
	int rounds_done;
	u64 regs, invalidated, failed_efault, other_err, free_won, free_err, alloc_err;
	struct completion owner_done, freer_done;
};

/* Both threads arrive, then go (a spinning barrier: with two CPUs a pair they overlap
 * for real; with fewer the spinner yields to the thread it waits for). */
static void stress_barrier(struct stress *s, int round)
{
	atomic_inc(&s->arrive);
	while (atomic_read(&s->arrive) < 2 * (round + 1)) {
		if (num_online_cpus() >= 2 * stress_pairs)
			cpu_relax();
		else
			yield();
	}
}

/*
 * A seeded jitter point: sometimes lets the other thread run here. With one CPU this
 * is what interleaves the two threads' steps (besides tick preemption); with two it
 * shifts their relative timing from round to round.
 */
static void stress_jitter(u64 *rng)
{
	switch (rnd(rng, 4)) {
	case 0:
		yield();
		break;
	case 1:
		ndelay(rnd(rng, 2000));
		break;
	default:
		break;
	}
}

static int stress_owner(void *data)
{
	struct stress *s = data;
	u64 rng = s->seed ^ 0x6f776e6572ULL;
	int i;

	s->p = fake_nv_proc_create();
	if (s->p) {
		fake_nv_proc_enter(s->p);
		s->va = fake_nv_alloc(s->p, STRESS_SIZE, true);
	}
	atomic_set(&s->ready, 1);
	if (!s->p)
		goto out;
	if (!s->va)
		goto leave;
	for (i = 0; i < stress_rounds; i++) {
		struct fake_reg_opts o = { .can_invalidate = true, .writable = true };
		struct fake_mr *a, *b;
		bool won = false;

		stress_barrier(s, i);
		stress_jitter(&rng);
		a = fake_core_reg_mr(s->va + 100, STRESS_SIZE - 200, &o);
		stress_jitter(&rng);
		b = fake_core_reg_mr(s->va + MP64K + 7, MP64K, &o);	/* covered by a */
		stress_jitter(&rng);
		for (; ; ) {
			struct fake_mr *mr = a;

			if (!mr)
				break;
			a = b;
			b = NULL;
			if (IS_ERR(mr)) {
				won |= PTR_ERR(mr) == -EFAULT;
				if (PTR_ERR(mr) == -EFAULT)
					s->failed_efault++;
				else
					s->other_err++;
				continue;
			}
			s->regs++;
			if (fake_core_mr_invalidations(mr)) {
				s->invalidated += fake_core_mr_invalidations(mr);
				won = true;
			}
			fake_core_dereg_mr(mr);
			stress_jitter(&rng);
		}
		s->free_won += won;
		s->rounds_done++;
	}
leave:
	fake_nv_proc_leave(s->p);
out:
	complete(&s->owner_done);
	return 0;
}

static int stress_freer(void *data)
{
	struct stress *s = data;
	u64 rng = s->seed ^ 0x6672656572ULL;
	int i;

	while (!atomic_read(&s->ready))
		schedule_timeout_uninterruptible(1);
	if (!s->p || !s->va)
		goto out;
	for (i = 0; i < stress_rounds; i++) {
		stress_barrier(s, i);
		stress_jitter(&rng);
		stress_jitter(&rng);
		if (fake_nv_free(s->p, s->va))
			s->free_err++;
		/* Overlapping: half the time the same range, else a shifted one. */
		if (i & 1) {
			if (fake_nv_alloc_at(s->p, s->va, STRESS_SIZE, true) != s->va)
				s->alloc_err++;
		} else {
			if (fake_nv_alloc_at(s->p, s->va + MP64K, STRESS_SIZE - MP64K, true) !=
			    s->va + MP64K)
				s->alloc_err++;
			/* the next round frees s->va: put an allocation there again */
			if (fake_nv_free(s->p, s->va + MP64K) ||
			    fake_nv_alloc_at(s->p, s->va, STRESS_SIZE, true) != s->va)
				s->alloc_err++;
		}
	}
out:
	complete(&s->freer_done);
	return 0;
}

/* Starts pair @k of the stress: its owner and freer, bound to CPUs 2k and 2k + 1
 * (modulo the CPUs online) where there is more than one. */
static int stress_start(struct stress *s, int k)
{
	struct task_struct *t1, *t2;
	unsigned int n = num_online_cpus();

	init_completion(&s->owner_done);
	init_completion(&s->freer_done);
	t1 = kthread_create(stress_owner, s, "peermem_model_owner/%d", k);
	if (IS_ERR(t1))
		return PTR_ERR(t1);
	t2 = kthread_create(stress_freer, s, "peermem_model_freer/%d", k);
	if (IS_ERR(t2)) {
		kthread_stop(t1);
		return PTR_ERR(t2);
	}
	if (n > 1) {
		kthread_bind(t1, cpumask_nth((2 * k) % n, cpu_online_mask));
		kthread_bind(t2, cpumask_nth((2 * k + 1) % n, cpu_online_mask));
	}
	wake_up_process(t1);
	wake_up_process(t2);
	return 0;
}

static void model_stress_register_against_free(struct kunit *test)
{
	struct fake_nv_counters nv0, nv;
	struct fake_core_counters core0, core;
	struct stress *s;
	u64 base, regs = 0, invalidated = 0, failed_efault = 0, free_won = 0;
	int k, started, rounds_done = 0;
	ktime_t t0 = ktime_get();

	KUNIT_ASSERT_GT(test, stress_pairs, 0);
	s = kcalloc(stress_pairs, sizeof(*s), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, s);
	base = seed ? seed : get_random_u64();
	kunit_info(test, "seed=%llu, %u pair(s) of threads, %u CPU(s)\n", base, stress_pairs,
		   num_online_cpus());
	fake_nv_get_counters(&nv0);
	fake_core_get_counters(&core0);
	for (started = 0; started < stress_pairs; started++) {
		s[started].seed = base + started;
		if (stress_start(&s[started], started)) {
			KUNIT_FAIL(test, "kthread_create failed");
			break;
		}
	}
	/* No timeout: the threads run module code, so the case must not end before they
	 * do (a hang is caught by the runner's timeout instead). */
	for (k = 0; k < started; k++) {
		wait_for_completion(&s[k].owner_done);
		wait_for_completion(&s[k].freer_done);
	}
	for (k = 0; k < started; k++) {
		KUNIT_EXPECT_NOT_NULL(test, s[k].p);
		KUNIT_EXPECT_NE(test, s[k].va, 0);
		if (s[k].p)
			fake_nv_proc_exit(s[k].p);
		KUNIT_EXPECT_EQ(test, s[k].rounds_done, stress_rounds);
		KUNIT_EXPECT_EQ(test, s[k].other_err, 0);
		KUNIT_EXPECT_EQ(test, s[k].free_err, 0);
		KUNIT_EXPECT_EQ(test, s[k].alloc_err, 0);
		KUNIT_EXPECT_LE(test, s[k].invalidated, s[k].regs);
		rounds_done += s[k].rounds_done;
		regs += s[k].regs;
		invalidated += s[k].invalidated;
		failed_efault += s[k].failed_efault;
		free_won += s[k].free_won;
	}

	fake_nv_get_counters(&nv);
	fake_core_get_counters(&core);
	KUNIT_EXPECT_EQ(test, nv.pins_live, 0);
	KUNIT_EXPECT_EQ(test, nv.dma_mappings_live, 0);
	KUNIT_EXPECT_EQ(test, nv.bar1_bytes_in_use, 0);
	KUNIT_EXPECT_EQ(test, core.mrs_live, 0);
	KUNIT_EXPECT_EQ(test, nv.violations_total, nv0.violations_total);
	KUNIT_EXPECT_EQ(test, core.violations_total, core0.violations_total);
	kunit_info(test,
		   "%d rounds in %lld ms on %u CPUs: the free won %llu (%llu registrations failed EFAULT, %llu of %llu registrations invalidated), %llu pins, %llu callbacks\n",
		   rounds_done, ktime_ms_delta(ktime_get(), t0), num_online_cpus(), free_won,
		   failed_efault, invalidated, regs, nv.pins_total - nv0.pins_total,
		   nv.callbacks_run - nv0.callbacks_run);
	kfree(s);
}
#endif

static struct kunit_case peermem_model_cases[] = {
	KUNIT_CASE_SLOW(model_run),
#if MODEL_CB
	KUNIT_CASE_SLOW(model_stress_register_against_free),
#endif
	{}
};

static struct kunit_suite peermem_model_suite = {
	.name = MODEL_SUITE,
	.test_cases = peermem_model_cases,
};
kunit_test_suite(peermem_model_suite);
