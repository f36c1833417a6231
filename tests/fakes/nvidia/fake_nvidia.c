// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * A fake nvidia.ko: the NVIDIA kernel P2P API (docs/abi.md section 1) over fake GPU
 * memory, enforcing the real driver's contracts strictly so that client bugs show
 * up as counted, printed violations (never WARN/BUG: the test runner fails a run on
 * any WARN). Test-control API: tests/fakes/include/fake_nvidia.h.
 *
 * Build variants (FAKE_NV_VARIANT, see Kbuild):
 *   default      a 535.14+ open driver ("Dual MIT/GPL")
 *   legacy       a pre-535.14 driver: no persistent pair, NULL callback = persistent
 *   proprietary  licence "NVIDIA"; the parts that need GPL-only kernel symbols
 *                (processes, debugfs, KUnit, lockdep-checked mutexes, the device
 *                node) are left out
 *
 * GPU memory comes in three kinds: pages of the ivshmem BAR (backed), a synthetic
 * address window nothing touches (unbacked), and RAM, which only the device node
 * /dev/fake-nvidia-gpu hands out, to real processes (gpu_node.c): the soft-RoCE
 * driver copies into GPU memory through the struct pages behind its DMA addresses,
 * which a BAR has none of.
 *
 * Locking: drv_lock (the driver-wide lock) serialises get_pages, put_pages
 * (both kinds) and the free path; free callbacks are called with it held. Each page
 * table has its own lock, taken by dma_map/dma_unmap (and by the free path, under
 * drv_lock). reg_lock (spinlock, innermost) protects the pointer registry,
 * cnt_lock the counters. The device node takes drv_lock under a process's mmap_lock
 * (its mmap makes the allocation) and under no lock of its own (gpu_node.c): a free
 * callback must not take an mmap_lock. RAM backing is refcounted (struct fnv_ram)
 * and takes no lock.
 *
 * By default nothing handed out is kfree'd while the module is loaded: put or freed
 * page tables and mappings are poisoned and kept (quarantine), so that a stale pointer
 * is recognised instead of aliasing a new object. With config.free_on_release (the
 * benchmark's setting) a table put and a mapping unmapped are freed there and then,
 * as nvidia.ko frees them, so that what a registration costs does not grow with every
 * pin made before it.
 */
#define pr_fmt(fmt) "fake-nvidia: " fmt

#include <linux/module.h>
#include <linux/kernel.h>
#include <linux/slab.h>
#include <linux/mm.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/kthread.h>
#include <linux/pci.h>
#include <linux/dma-mapping.h>
#include <linux/device.h>
#include <linux/iommu.h>
#include <linux/delay.h>
#include <linux/ktime.h>
#include <linux/hashtable.h>
#include <linux/bitmap.h>
#include <linux/wait.h>
#include <linux/spinlock.h>
#include <linux/semaphore.h>
#include <linux/mutex.h>
#include <linux/debugfs.h>
#include <linux/seq_file.h>
#include <linux/uaccess.h>

#include "fake_pause.h"
#include "fake_pci.h"
#include "fake_nvidia.h"
#include "nv_p2p_abi.h"
#include "fake_nvidia_internal.h"

#ifdef FAKE_NV_LEGACY
#define FNV_LEGACY 1
#else
#define FNV_LEGACY 0
#endif
#ifdef FAKE_NV_PROPRIETARY
#define FNV_PROPRIETARY 1
#else
#define FNV_PROPRIETARY 0
#endif

#define FNV_PAGE	SZ_64K
#define FNV_VA_BASE	0x7f0000000000ULL
#define FNV_UNBACKED_BASE 0x4000000000ULL
#define FNV_POISON_TABLE	0xDEAD0001u	/* version of a put page table */
#define FNV_POISON_TABLE_CB	0xDEAD0002u	/* version of a table freed by a callback */
#define FNV_POISON_MAP		0xDEAD0003u	/* version of an unmapped mapping */
#define FNV_POISON_MAP_CB	0xDEAD0004u	/* version of a mapping freed by the driver */

/* ------------------------------------------------------------------------- */
/* Locks (a semaphore in the proprietary build: mutex_lock is GPL-only with lockdep) */

#ifdef FAKE_NV_PROPRIETARY
struct fnv_lock { struct semaphore s; };
/* sema_init() calls the GPL-only lockdep_init_map_type(); lockdep is off anyway once
 * a proprietary module taints the kernel. */
#define fnv_lock_init(l)	((l)->s = (struct semaphore)__SEMAPHORE_INITIALIZER((l)->s, 1))
#define fnv_lock(l)		down(&(l)->s)
#define fnv_unlock(l)		up(&(l)->s)
#else
struct fnv_lock { struct mutex m; };
#define fnv_lock_init(l)	mutex_init(&(l)->m)
#define fnv_lock(l)		mutex_lock(&(l)->m)
#define fnv_unlock(l)		mutex_unlock(&(l)->m)
#endif

static struct fnv_lock drv_lock;	/* the driver-wide lock */

/*
 * The real driver's nvidia_p2p_dma_map_pages takes its global API lock, the lock the
 * free callback runs under (ABI doc 1.4b); its dma_unmap_pages takes none (only the
 * table's mapping-list semaphore while it unlinks the mapping). With this parameter
 * the fake takes drv_lock in dma_map too, so that lockdep sees the driver's real graph;
 * off by default, because that graph has a cycle through the peer-memory core's
 * mapping lock in callback mode for every client (the hazard run shows it,
 * tests/qemu/plans/hazard.sh), and lockdep stops at its first report.
 */
static bool dma_takes_api_lock;
module_param(dma_takes_api_lock, bool, 0444);
MODULE_PARM_DESC(dma_takes_api_lock, "dma_map_pages takes the driver lock, as the real driver's API lock (default 0)");
static DEFINE_SPINLOCK(reg_lock);
static DEFINE_SPINLOCK(cnt_lock);

bool fake_nv_driver_lock_held(void)
{
#if defined(FAKE_NV_PROPRIETARY)
	return false;
#elif defined(CONFIG_LOCKDEP)
	return mutex_is_locked(&drv_lock.m) && lockdep_is_held(&drv_lock.m);
#else
	return mutex_is_locked(&drv_lock.m);
#endif
}

/* ------------------------------------------------------------------------- */
/* Objects */

/* Which reference on its mm a process holds (proc_put_mm drops it). */
enum fnv_mm_ref {
	FNV_MM_USERS,	/* mm_users (mm_alloc, mmget): a KUnit or control-file process */
	FNV_MM_COUNT,	/* mm_count (mmgrab): a process of the device node. Its
			 * mappings of the node hold the node's file: an mm_users
			 * reference would keep the address space, so the file, so
			 * the reference, alive forever. Only the identity is needed
			 * (caller_proc compares current->mm), and mm_count keeps the
			 * mm_struct from being reused by another process. */
};

struct fake_nv_proc {
	struct mm_struct *mm;
	enum fnv_mm_ref mm_ref;
	pid_t tgid;
	u64 id;				/* never reused: a freed allocation's owner */
	u64 next_va;
	struct list_head allocs;	/* live (not freed) allocations */
	struct list_head node;		/* procs */
};

enum fnv_kind {
	FNV_K_UNBACKED,			/* synthetic addresses, never touched */
	FNV_K_BAR,			/* 64 KiB pages of the ivshmem BAR pool */
	FNV_K_RAM,			/* RAM chunks (the device node's) */
};

struct fnv_alloc {
	struct fake_nv_proc *proc;	/* NULL once freed */
	u64 owner_id;			/* proc->id, kept once freed (FAKE_NV_IOC_INFO) */
	u64 va, size;
	u32 npages;
	enum fnv_kind kind;
	struct fnv_ram *ram;		/* FNV_K_RAM: the allocation's reference */
	bool freed;
	u64 *phys;			/* per 64 KiB page */
	u32 *pincount;			/* pins covering each page (BAR1 sharing) */
	struct list_head pins;		/* live pins on it */
	struct list_head node;		/* proc->allocs, or orphans once freed */
};

enum fnv_state { FNV_LIVE, FNV_PUT, FNV_FREED_BY_CB };

struct fnv_pin {
	struct nvidia_p2p_page_table *table;
	struct nvidia_p2p_page *pagebuf;
	struct fnv_alloc *alloc;
	u64 va, len;
	u32 first, npages;		/* page range in alloc */
	bool persistent;
	void (*cb)(void *data);
	void *data;
	struct mm_struct *mm;		/* caller identity at get_pages */
	pid_t tgid;
	enum fnv_state state;		/* under drv_lock and pin->lock */
	struct fnv_lock lock;		/* the per-page-table lock */
	struct list_head maps;		/* live mappings */
	atomic_t in_flight;		/* dma_map/dma_unmap calls on it */
	struct list_head alloc_node;
	struct hlist_node hnode;
	struct list_head all_node;
};

struct fnv_map {
	struct nvidia_p2p_dma_mapping *m;
	struct fnv_pin *pin;
	struct pci_dev *peer;		/* the peer mapped for: no reference, as nvidia.ko */
	bool dma_api;			/* mapped through the DMA API (synthetic pages are not) */
	enum { FNV_M_LIVE, FNV_M_UNMAPPED, FNV_M_FREED_BY_CB } state;
	struct list_head pin_node;
	struct hlist_node hnode;
	struct list_head all_node;
};

static LIST_HEAD(procs);
static LIST_HEAD(orphans);		/* freed allocations kept by persistent pins */
static LIST_HEAD(all_pins);		/* every pin handed out and not freed */
static LIST_HEAD(all_maps);
/*
 * Every table and mapping handed out stays registered until freed (never, under
 * quarantine, so these grow with every pin made while loaded): sized for the
 * benchmark's millions of live pins (every 64 KiB page of a 128 GiB BAR1 pinned
 * alone), 1 MiB each.
 */
static DEFINE_HASHTABLE(pin_hash, 17);
static DEFINE_HASHTABLE(map_hash, 17);

static struct task_struct *cb_task;	/* task running a free callback, if any */

static struct fake_nv_config config;
static struct fake_nv_counters counters;
static u32 inject_count;
static int inject_err;
/* dma_map_pages failures to inject (fake_nv_inject_map_errors). */
static atomic_t map_inject_count = ATOMIC_INIT(0);
static int map_inject_err;

static u8 fake_gpu_uuid[16] = {
	'F', 'A', 'K', 'E', '-', 'G', 'P', 'U', 0x10, 0xde, 0x23, 0x30, 0, 0, 0, 1 };

/* BAR pool (ivshmem BAR 2) */
static struct pci_dev *ivshmem;
static resource_size_t pool_start, pool_len;
static unsigned long *pool_bitmap;
static u32 pool_pages;
static u64 unbacked_next = FNV_UNBACKED_BASE;

/*
 * RAM backing alive (held by an allocation or a mapping), and the device node's
 * processes: atomics, which debugfs reads while a thread may be parked under drv_lock.
 */
static atomic64_t ram_bytes_live = ATOMIC64_INIT(0);
#ifndef FAKE_NV_PROPRIETARY
static atomic_t node_procs_live = ATOMIC_INIT(0);
/* Processes ever created (their ids); under drv_lock. */
static u64 procs_created;
#endif

/* ------------------------------------------------------------------------- */
/* Counters and violations */

static const char *const violation_names[FAKE_NV_V_COUNT] = {
	[FAKE_NV_V_PUT_IN_CALLBACK] = "PUT_IN_CALLBACK",
	[FAKE_NV_V_UNMAP_IN_CALLBACK] = "UNMAP_IN_CALLBACK",
	[FAKE_NV_V_UNMAP_AFTER_FREE] = "UNMAP_AFTER_FREE",
	[FAKE_NV_V_MAP_AFTER_FREE] = "MAP_AFTER_FREE",
	[FAKE_NV_V_CALL_IN_FLIGHT_AT_FREE] = "CALL_IN_FLIGHT_AT_FREE",
	[FAKE_NV_V_UNMAP_WRONG_PEER] = "UNMAP_WRONG_PEER",
	[FAKE_NV_V_DOUBLE_PUT] = "DOUBLE_PUT",
	[FAKE_NV_V_UNKNOWN_TABLE] = "UNKNOWN_TABLE",
	[FAKE_NV_V_WRONG_PUT_KIND] = "WRONG_PUT_KIND",
	[FAKE_NV_V_PUT_WRONG_PROCESS] = "PUT_WRONG_PROCESS",
	[FAKE_NV_V_UNMAPPED_AT_PUT] = "UNMAPPED_AT_PUT",
	[FAKE_NV_V_DOUBLE_UNMAP] = "DOUBLE_UNMAP",
	[FAKE_NV_V_PUT_AFTER_FREE] = "PUT_AFTER_FREE",
	[FAKE_NV_V_CALL_IN_CALLBACK] = "CALL_IN_CALLBACK",
	[FAKE_NV_V_NOT_PCI_PEER] = "NOT_PCI_PEER",
};

const char *fake_nv_violation_name(enum fake_nv_violation v)
{
	if ((unsigned int)v >= FAKE_NV_V_COUNT || !violation_names[v])
		return "?";
	return violation_names[v];
}
EXPORT_SYMBOL_GPL(fake_nv_violation_name);

#define CNT_ADD(field, n) do {				\
	spin_lock(&cnt_lock);				\
	counters.field += (n);				\
	spin_unlock(&cnt_lock);				\
} while (0)
#define CNT_INC(field) CNT_ADD(field, 1)
#define CNT_DEC(field) CNT_ADD(field, -1)

static void violation(enum fake_nv_violation v, unsigned long caller, const char *fmt, ...)
{
	struct va_format vaf;
	va_list args;

	spin_lock(&cnt_lock);
	counters.violations[v]++;
	counters.violations_total++;
	spin_unlock(&cnt_lock);

	va_start(args, fmt);
	vaf.fmt = fmt;
	vaf.va = &args;
	pr_err("VIOLATION %s: %pV (caller %pS, task %s/%d)\n", violation_names[v], &vaf,
	       (void *)caller, current->comm, task_pid_nr(current));
	va_end(args);
}

void fake_nv_get_counters(struct fake_nv_counters *out)
{
	spin_lock(&cnt_lock);
	*out = counters;
	spin_unlock(&cnt_lock);
}
EXPORT_SYMBOL_GPL(fake_nv_get_counters);

void fake_nv_reset_counters(void)
{
	spin_lock(&cnt_lock);
	counters.pins_total = 0;
	counters.callbacks_run = 0;
	counters.refused_unaligned = 0;
	counters.refused_null_callback = 0;
	counters.refused_not_owner = 0;
	counters.refused_no_memory = 0;
	counters.refused_bar1 = 0;
	counters.refused_injected = 0;
	counters.refused_dma_mask = 0;
	counters.puts_not_owner = 0;
	memset(counters.violations, 0, sizeof(counters.violations));
	counters.violations_total = 0;
	spin_unlock(&cnt_lock);
}
EXPORT_SYMBOL_GPL(fake_nv_reset_counters);

/* ------------------------------------------------------------------------- */
/* Pause points */

static struct fake_pause pauses[FAKE_NV_PAUSE_COUNT];

static void pause_point(enum fake_nv_pause_point pt)
{
	fake_pause_here(&pauses[pt]);
}

void fake_nv_pause_arm(enum fake_nv_pause_point pt)
{
	if ((unsigned int)pt < FAKE_NV_PAUSE_COUNT)
		fake_pause_arm(&pauses[pt]);
}
EXPORT_SYMBOL_GPL(fake_nv_pause_arm);

int fake_nv_pause_wait(enum fake_nv_pause_point pt, unsigned int timeout_ms)
{
	if ((unsigned int)pt >= FAKE_NV_PAUSE_COUNT)
		return -EINVAL;
	return fake_pause_wait(&pauses[pt], timeout_ms);
}
EXPORT_SYMBOL_GPL(fake_nv_pause_wait);

void fake_nv_pause_release(enum fake_nv_pause_point pt)
{
	if ((unsigned int)pt < FAKE_NV_PAUSE_COUNT)
		fake_pause_release(&pauses[pt]);
}
EXPORT_SYMBOL_GPL(fake_nv_pause_release);

u64 fake_nv_pause_hits(enum fake_nv_pause_point pt)
{
	if ((unsigned int)pt >= FAKE_NV_PAUSE_COUNT)
		return 0;
	return fake_pause_hits(&pauses[pt]);
}
EXPORT_SYMBOL_GPL(fake_nv_pause_hits);

void fake_nv_client_pause(enum fake_nv_pause_point pt)
{
	if (pt >= FAKE_NV_PAUSE_CLIENT_BEFORE_LINK && pt < FAKE_NV_PAUSE_COUNT)
		pause_point(pt);
}
EXPORT_SYMBOL_GPL(fake_nv_client_pause);

/* ------------------------------------------------------------------------- */
/* Config, injection */

void fake_nv_get_config(struct fake_nv_config *cfg)
{
	spin_lock(&cnt_lock);
	*cfg = config;
	spin_unlock(&cnt_lock);
}
EXPORT_SYMBOL_GPL(fake_nv_get_config);

int fake_nv_set_config(const struct fake_nv_config *cfg)
{
	if (!cfg || (cfg->page_table_major != 1 && cfg->page_table_major != 2) ||
	    !cfg->bar1_size || cfg->bar1_reserve > cfg->bar1_size ||
	    cfg->pin_cost_us > 1000000 || cfg->unpin_cost_us > 1000000)
		return -EINVAL;
	fnv_lock(&drv_lock);
	spin_lock(&cnt_lock);
	config = *cfg;
	spin_unlock(&cnt_lock);
	fnv_unlock(&drv_lock);
	return 0;
}
EXPORT_SYMBOL_GPL(fake_nv_set_config);

bool fake_nv_is_pre_535(void)
{
	return FNV_LEGACY;
}
EXPORT_SYMBOL_GPL(fake_nv_is_pre_535);

void fake_nv_inject_pin_errors(u32 count, int err)
{
	fnv_lock(&drv_lock);
	inject_count = err > 0 ? count : 0;
	inject_err = err;
	fnv_unlock(&drv_lock);
}
EXPORT_SYMBOL_GPL(fake_nv_inject_pin_errors);

void fake_nv_inject_map_errors(u32 count, int err)
{
	WRITE_ONCE(map_inject_err, err);
	atomic_set(&map_inject_count, err > 0 ? count : 0);
}
EXPORT_SYMBOL_GPL(fake_nv_inject_map_errors);

/*
 * The configured cost of a pin or unpin, spent under the driver lock as the real
 * driver's global lock serialises pins. Short costs busy-wait: the dev kernel has no
 * high-resolution timers, so a 50 us sleep would last a whole jiffy. Under
 * User-Mode Linux the wait is on the clock (host time in steps of 256 ns): udelay()
 * is a loop calibrated at boot against 10 ms jiffies, which came out between 3254
 * and 5076 BogoMIPS in boots of one run, so that a 50 us cost lasted 66 us in one
 * client's boot and less in another's.
 */
static void charge_us(u32 us)
{
	if (!us)
		return;
	if (us > 2000) {
		usleep_range(us, us + us / 8 + 1);
		return;
	}
#if defined(CONFIG_UML) && !defined(FAKE_NV_PROPRIETARY)	/* ktime_get: GPL only */
	{
		u64 end = ktime_get_ns() + (u64)us * NSEC_PER_USEC;

		while (ktime_get_ns() < end)
			cpu_relax();
	}
#else
	udelay(us);
#endif
}

/* ------------------------------------------------------------------------- */
/* Registry */

/* The entry of HASH (pins or mappings) whose FIELD is KEY, or NULL. */
#define find_registered(hash, type, field, key)				\
({									\
	type *__e, *__found = NULL;					\
									\
	if (key) {							\
		spin_lock(&reg_lock);					\
		hash_for_each_possible(hash, __e, hnode, (unsigned long)(key)) \
			if (__e->field == (key)) {			\
				__found = __e;				\
				break;					\
			}						\
		spin_unlock(&reg_lock);					\
	}								\
	__found;							\
})

static struct fnv_pin *find_pin(const void *table)
{
	return find_registered(pin_hash, struct fnv_pin, table, table);
}

static struct fnv_map *find_map(const void *m)
{
	return find_registered(map_hash, struct fnv_map, m, m);
}

/* ------------------------------------------------------------------------- */
/* Physical memory */

/* The order of a 64 KiB GPU page in CPU pages. */
#define FNV_RAM_ORDER	get_order(FNV_PAGE)

void fnv_ram_get(struct fnv_ram *ram)
{
	kref_get(&ram->ref);
}

/*
 * A chunk is marked reserved while it stands for GPU memory: it is mapped for DMA as
 * MMIO, as a BAR page is (map_gpu_page), and dma-debug accepts an MMIO mapping of
 * RAM only for reserved pages (memory the page allocator does not manage, such as a
 * device's carve-out); the page allocator wants the mark gone before the free.
 */
static void fnv_ram_mark(struct page *chunk, bool reserved)
{
	u32 i;

	for (i = 0; i < (1u << FNV_RAM_ORDER); i++) {
		if (reserved)
			SetPageReserved(chunk + i);
		else
			ClearPageReserved(chunk + i);
	}
}

static void fnv_ram_release(struct kref *ref)
{
	struct fnv_ram *ram = container_of(ref, struct fnv_ram, ref);
	u32 i;

	for (i = 0; i < ram->nchunks; i++) {
		if (!ram->chunk[i])
			continue;
		fnv_ram_mark(ram->chunk[i], false);
		__free_pages(ram->chunk[i], FNV_RAM_ORDER);
	}
	atomic64_sub((u64)ram->nchunks * FNV_PAGE, &ram_bytes_live);
	kvfree(ram);
}

/*
 * Drops a reference on RAM backing: the allocation's (at its destruction, under
 * drv_lock) or a mapping's (vm close, under mmap_lock). The last one frees the pages:
 * then neither the driver (no pin, no DMA mapping) nor a CPU page table (no vma) can
 * reach them any more.
 */
void fnv_ram_put(struct fnv_ram *ram)
{
	if (ram)
		kref_put(&ram->ref, fnv_ram_release);
}

static void release_phys(struct fnv_alloc *a)
{
	u32 i;

	if (a->kind == FNV_K_BAR && pool_bitmap) {
		for (i = 0; i < a->npages; i++)
			clear_bit((a->phys[i] - pool_start) / FNV_PAGE, pool_bitmap);
	}
	if (a->kind == FNV_K_RAM) {
		fnv_ram_put(a->ram);
		a->ram = NULL;
	}
}

/* Under drv_lock. Frees the allocation's memory when it is freed and unpinned. */
static void maybe_destroy_alloc(struct fnv_alloc *a)
{
	if (!a->freed || !list_empty(&a->pins))
		return;
	list_del(&a->node);
	release_phys(a);
	kvfree(a->phys);
	kvfree(a->pincount);
	kfree(a);
}

/*
 * Under drv_lock. @ram (FNV_K_RAM only): backing of size / 64 KiB chunks, whose
 * reference the allocation takes over on success (on failure it stays the caller's).
 */
static struct fnv_alloc *new_alloc(struct fake_nv_proc *p, u64 va, u64 size,
				   enum fnv_kind kind, struct fnv_ram *ram)
{
	struct fnv_alloc *a;
	u32 i, n = size / FNV_PAGE;

	if (kind == FNV_K_BAR && !pool_bitmap) {
		pr_info("no ivshmem BAR: backed allocation of %llu bytes refused\n", size);
		return NULL;
	}
	if ((u64)n * FNV_PAGE != size || (kind == FNV_K_RAM && (!ram || ram->nchunks != n)))
		return NULL;
	a = kzalloc_obj(*a, GFP_KERNEL);
	if (!a)
		return NULL;
	a->phys = kvcalloc(n, sizeof(u64), GFP_KERNEL);
	a->pincount = kvcalloc(n, sizeof(u32), GFP_KERNEL);
	if (!a->phys || !a->pincount)
		goto fail;
	a->proc = p;
	a->owner_id = p->id;
	a->va = va;
	a->size = size;
	a->npages = n;
	a->kind = kind;
	INIT_LIST_HEAD(&a->pins);
	if (kind == FNV_K_RAM) {
		for (i = 0; i < n; i++)
			a->phys[i] = page_to_phys(ram->chunk[i]);
		a->ram = ram;
	} else if (kind == FNV_K_BAR) {
		if (bitmap_weight(pool_bitmap, pool_pages) + n > pool_pages) {
			pr_info("ivshmem pool exhausted: backed allocation of %llu bytes refused\n",
				size);
			goto fail;
		}
		for (i = 0; i < n; i++) {
			unsigned long bit = find_first_zero_bit(pool_bitmap, pool_pages);

			set_bit(bit, pool_bitmap);
			a->phys[i] = pool_start + (u64)bit * FNV_PAGE;
		}
	} else {
		for (i = 0; i < n; i++)
			a->phys[i] = unbacked_next + (u64)i * FNV_PAGE;
		unbacked_next += size;
	}
	list_add_tail(&a->node, &p->allocs);
	return a;
fail:
	kvfree(a->phys);
	kvfree(a->pincount);
	kfree(a);
	return NULL;
}

static bool overlaps(struct fake_nv_proc *p, u64 va, u64 size)
{
	struct fnv_alloc *a;

	list_for_each_entry(a, &p->allocs, node)
		if (va < a->va + a->size && a->va < va + size)
			return true;
	return false;
}

u64 fake_nv_alloc(struct fake_nv_proc *p, u64 size, bool backed)
{
	u64 va = 0;

	if (!p || !size || size > (1ULL << 40))
		return 0;
	size = round_up(size, FNV_PAGE);
	fnv_lock(&drv_lock);
	while (overlaps(p, p->next_va, size))
		p->next_va += FNV_PAGE;
	if (new_alloc(p, p->next_va, size, backed ? FNV_K_BAR : FNV_K_UNBACKED, NULL)) {
		va = p->next_va;
		p->next_va += size;
	}
	fnv_unlock(&drv_lock);
	return va;
}
EXPORT_SYMBOL_GPL(fake_nv_alloc);

u64 fake_nv_alloc_at(struct fake_nv_proc *p, u64 va, u64 size, bool backed)
{
	u64 ret = 0;

	if (!p || !size || size > (1ULL << 40) || !IS_ALIGNED(va, FNV_PAGE) || !va)
		return 0;
	size = round_up(size, FNV_PAGE);
	fnv_lock(&drv_lock);
	if (!overlaps(p, va, size) &&
	    new_alloc(p, va, size, backed ? FNV_K_BAR : FNV_K_UNBACKED, NULL)) {
		ret = va;
		if (va + size > p->next_va)
			p->next_va = va + size;
	}
	fnv_unlock(&drv_lock);
	return ret;
}
EXPORT_SYMBOL_GPL(fake_nv_alloc_at);

u64 fake_nv_phys(struct fake_nv_proc *p, u64 va)
{
	struct fnv_alloc *a;
	u64 ret = 0;

	if (!p)
		return 0;
	fnv_lock(&drv_lock);
	list_for_each_entry(a, &p->allocs, node) {
		if (va >= a->va && va < a->va + a->size) {
			ret = a->phys[(va - a->va) / FNV_PAGE];
			break;
		}
	}
	fnv_unlock(&drv_lock);
	return ret;
}
EXPORT_SYMBOL_GPL(fake_nv_phys);

bool fake_nv_maps(struct device *peer, u64 phys, u64 dma)
{
	struct fnv_map *map;
	bool found = false;
	u32 i;

	/* Mappings are never freed before module exit (quarantine), so the walk is safe
	 * under reg_lock; a mapping's state is read as of now. */
	spin_lock(&reg_lock);
	list_for_each_entry(map, &all_maps, all_node) {
		struct fnv_pin *pin = map->pin;

		if (READ_ONCE(map->state) != FNV_M_LIVE || &map->peer->dev != peer)
			continue;
		for (i = 0; i < map->m->entries && !found; i++)
			found = pin->alloc->phys[pin->first + i] == phys &&
				map->m->dma_addresses[i] == dma;
		if (found)
			break;
	}
	spin_unlock(&reg_lock);
	return found;
}
EXPORT_SYMBOL_GPL(fake_nv_maps);

/* ------------------------------------------------------------------------- */
/* Pins */

/* Under pin->lock: the driver unmaps a live mapping itself (free path, put). */
static void map_teardown(struct fnv_map *map, int new_state, u32 poison)
{
	struct nvidia_p2p_dma_mapping *m = map->m;
	u32 i;

	for (i = 0; map->dma_api && i < m->entries; i++)
		dma_unmap_resource(&map->peer->dev, m->dma_addresses[i], FNV_PAGE,
				   DMA_BIDIRECTIONAL, DMA_ATTR_DEBUGGING_IGNORE_CACHELINES);
	list_del(&map->pin_node);
	map->state = new_state;
	m->version = poison;
	CNT_DEC(dma_mappings_live);
}

/* Frees a mapping no lookup can reach any more (out of map_hash and all_maps). */
static void map_free(struct fnv_map *map)
{
	kvfree(map->m->dma_addresses);
	kfree(map->m);
	kfree(map);
}

/* Under drv_lock: unpin, poison, account. Mappings must be torn down already. */
static void pin_release(struct fnv_pin *pin, enum fnv_state st)
{
	struct fnv_alloc *a = pin->alloc;
	u32 i, released = 0;

	for (i = pin->first; i < pin->first + pin->npages; i++)
		if (--a->pincount[i] == 0)
			released++;
	list_del(&pin->alloc_node);
	pin->state = st;
	if (st == FNV_PUT) {
		/* A put table is gone for good: keep only the poisoned header. */
		pin->table->version = FNV_POISON_TABLE;
		kvfree(pin->table->pages);
		pin->table->pages = NULL;
		pin->table->entries = 0;
		kvfree(pin->pagebuf);
		pin->pagebuf = NULL;
	} else {
		/* Freed by a callback: a racing reader still finds the arrays. */
		pin->table->version = FNV_POISON_TABLE_CB;
	}
	spin_lock(&cnt_lock);
	counters.pins_live--;
	if (pin->persistent)
		counters.persistent_live--;
	counters.bar1_bytes_in_use -= (u64)released * FNV_PAGE;
	spin_unlock(&cnt_lock);
}

/*
 * Under drv_lock: frees a pin put with no mapping left (config.free_on_release), as
 * nvidia.ko frees a table at its put; a stale pointer to it is then unknown.
 */
static void pin_free(struct fnv_pin *pin)
{
	spin_lock(&reg_lock);
	hash_del(&pin->hnode);
	spin_unlock(&reg_lock);
	list_del(&pin->all_node);
	kfree(pin->table);
	kfree(pin);
}

/* Under drv_lock: caller identity. */
static struct fake_nv_proc *caller_proc(void)
{
	struct fake_nv_proc *p;

	if (!current->mm)
		return NULL;
	list_for_each_entry(p, &procs, node)
		if (p->mm == current->mm)
			return p;
	return NULL;
}

static int do_get_pages(u64 va, u64 len, struct nvidia_p2p_page_table **out,
			void (*cb)(void *), void *data, bool persistent, bool force_bar1,
			unsigned long caller)
{
	struct fake_nv_proc *p;
	struct fnv_alloc *a = NULL, *it;
	struct fnv_pin *pin = NULL;
	struct nvidia_p2p_page_table *t = NULL;
	struct nvidia_p2p_page **ptrs = NULL;
	struct nvidia_p2p_page *pagebuf = NULL;
	u32 i, first, n, newpages = 0;
	int ret;

	might_sleep();
	if (!out)
		return -EINVAL;
	if (READ_ONCE(cb_task) == current) {
		/* nvidia.ko cannot take its API lock again there: -EIO (docs/abi.md 1.4). */
		violation(FAKE_NV_V_CALL_IN_CALLBACK, caller, "get_pages inside free callback");
		return -EIO;
	}
	if (!len || !IS_ALIGNED(va, FNV_PAGE) || !IS_ALIGNED(len, FNV_PAGE) ||
	    va + len < va) {
		CNT_INC(refused_unaligned);
		return -EINVAL;
	}

	fnv_lock(&drv_lock);
	pause_point(FAKE_NV_PAUSE_GET_PAGES);
	p = caller_proc();
	if (!p || p->tgid != current->tgid) {
		CNT_INC(refused_not_owner);
		ret = -EINVAL;
		goto out_unlock;
	}
	list_for_each_entry(it, &p->allocs, node) {
		if (va >= it->va && va + len <= it->va + it->size) {
			a = it;
			break;
		}
	}
	if (!a) {
		CNT_INC(refused_no_memory);
		ret = -EINVAL;
		goto out_unlock;
	}
	if (force_bar1) {
		/* Forcing BAR1 is for coherent platforms: refused once the range is known. */
		ret = -ENOTSUPP;
		goto out_unlock;
	}
	if (inject_count) {
		inject_count--;
		CNT_INC(refused_injected);
		ret = -inject_err;
		goto out_unlock;
	}
	first = (va - a->va) / FNV_PAGE;
	n = len / FNV_PAGE;
	for (i = first; i < first + n; i++)
		if (!a->pincount[i])
			newpages++;
	if (counters.bar1_bytes_in_use + (u64)newpages * FNV_PAGE >
	    config.bar1_size - config.bar1_reserve) {
		CNT_INC(refused_bar1);
		ret = -ENOMEM;
		goto out_unlock;
	}

	ret = -ENOMEM;
	pin = kzalloc_obj(*pin, GFP_KERNEL);
	t = kzalloc(config.page_table_major == 1 ? NVIDIA_P2P_PAGE_TABLE_V1_SIZE :
		    sizeof(*t), GFP_KERNEL);
	ptrs = kvcalloc(n, sizeof(*ptrs), GFP_KERNEL);
	pagebuf = kvcalloc(n, sizeof(*pagebuf), GFP_KERNEL);
	if (!pin || !t || !ptrs || !pagebuf)
		goto out_free;

	charge_us(config.pin_cost_us);

	for (i = 0; i < n; i++) {
		pagebuf[i].physical_address = a->phys[first + i];
		ptrs[i] = &pagebuf[i];
		a->pincount[first + i]++;
	}
	if (config.page_table_major == 1) {
		t->version = NVIDIA_P2P_PAGE_TABLE_VERSION_V1;
	} else {
		t->version = NVIDIA_P2P_PAGE_TABLE_VERSION_V2;
		t->flags = 0;
	}
	t->page_size = NVIDIA_P2P_PAGE_SIZE_64KB;
	t->pages = ptrs;
	t->entries = n;
	t->gpu_uuid = fake_gpu_uuid;

	pin->table = t;
	pin->pagebuf = pagebuf;
	pin->alloc = a;
	pin->va = va;
	pin->len = len;
	pin->first = first;
	pin->npages = n;
	pin->persistent = persistent;
	pin->cb = cb;
	pin->data = data;
	pin->mm = current->mm;
	pin->tgid = current->tgid;
	pin->state = FNV_LIVE;
	fnv_lock_init(&pin->lock);
	INIT_LIST_HEAD(&pin->maps);
	atomic_set(&pin->in_flight, 0);
	list_add_tail(&pin->alloc_node, &a->pins);
	list_add_tail(&pin->all_node, &all_pins);
	spin_lock(&reg_lock);
	hash_add(pin_hash, &pin->hnode, (unsigned long)t);
	spin_unlock(&reg_lock);

	spin_lock(&cnt_lock);
	counters.pins_live++;
	counters.pins_total++;
	if (persistent)
		counters.persistent_live++;
	counters.bar1_bytes_in_use += (u64)newpages * FNV_PAGE;
	spin_unlock(&cnt_lock);
	*out = t;
	fnv_unlock(&drv_lock);
	/*
	 * nvidia.ko registers the free callback as the last step of get_pages, with no
	 * lock held from then on (docs/abi.md 1.4): a free from another thread may run
	 * the callback, and the driver free the table, before the caller has it.
	 */
	pause_point(FAKE_NV_PAUSE_GET_PAGES_DONE);
	return 0;

out_free:
	kvfree(pagebuf);
	kvfree(ptrs);
	kfree(t);
	kfree(pin);
out_unlock:
	fnv_unlock(&drv_lock);
	/*
	 * nvidia.ko hands its table out before RM pins, and a failure after that frees
	 * the table without clearing the out-pointer (docs/abi.md 1.6): the caller is
	 * left a pointer to freed memory. The fake leaves an address that faults.
	 */
	*out = FAKE_NV_DANGLING_TABLE;
	return ret;
}

int nvidia_p2p_get_pages(u64 p2p_token, u32 va_space_token, u64 virtual_address,
			 u64 length, struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data)
{
	if (p2p_token || va_space_token)
		return -EINVAL;
	if (!free_callback) {
#ifdef FAKE_NV_LEGACY
		/* Before 535.14 a NULL callback is the persistent mode. */
		return do_get_pages(virtual_address, length, page_table, NULL, NULL, true,
				    false, _RET_IP_);
#else
		CNT_INC(refused_null_callback);
		return -EINVAL;
#endif
	}
	return do_get_pages(virtual_address, length, page_table, free_callback, data,
			    false, false, _RET_IP_);
}
EXPORT_SYMBOL_GPL(nvidia_p2p_get_pages);

/*
 * What nvidia.ko answers when it looks an object up and misses (a table never handed
 * out or already put, a mapping no longer in its table's list): 0 from 535.14 on
 * (docs/abi.md 1.1); the fake still counts the client's mistake. A call that reads
 * the object instead (@reads: the persistent put), and the drivers before 535.14,
 * have no safe answer: -EINVAL.
 */
static int not_found(bool reads)
{
	return FNV_LEGACY || reads ? -EINVAL : 0;
}

/* Common put path; @persistent_api: called as put_pages_persistent. */
static int do_put_pages(u64 va, struct nvidia_p2p_page_table *table, bool persistent_api,
			unsigned long caller)
{
	struct fnv_pin *pin;
	struct fnv_map *map, *tmp;
	const char *fn = persistent_api ? "put_pages_persistent" : "put_pages";
	bool kept;
	int ret = 0;

	if (!table)
		return 0;	/* both puts answer 0 to a NULL table, first thing */
	pin = find_pin(table);
	if (!pin) {
		violation(FAKE_NV_V_UNKNOWN_TABLE, caller, "%s of table %px never handed out",
			  fn, table);
		return not_found(persistent_api);
	}
	if (READ_ONCE(cb_task) == current) {
		/* nvidia.ko cannot take its API lock again there: -EIO and a WARN. */
		violation(FAKE_NV_V_PUT_IN_CALLBACK, caller,
			  "%s inside free callback (table %px)", fn, table);
		return -EIO;
	}

	fnv_lock(&drv_lock);
	pause_point(FAKE_NV_PAUSE_PUT_PAGES);
	/*
	 * A callback pin is looked up in the calling process's address space (ABI doc
	 * 1.4b): from another process (a kworker, a child after the owner exited) the
	 * driver finds nothing and maps "not found" to success. The pin, its BAR1 space
	 * and its free callback stay registered; the callback still fires, with its data
	 * pointer, when the owner frees the memory or exits.
	 */
	if (!pin->persistent && !persistent_api &&
	    (current->mm != pin->mm || current->tgid != pin->tgid)) {
		CNT_INC(puts_not_owner);
		pr_info("%s of table %px from tgid %d, pinned by tgid %d: not found, returns 0\n",
			fn, table, current->tgid, pin->tgid);
		goto out;
	}
	if (pin->state == FNV_FREED_BY_CB && !pin->persistent && !persistent_api) {
#ifdef FAKE_NV_LEGACY
		violation(FAKE_NV_V_PUT_AFTER_FREE, caller,
			  "put_pages of table %px freed by its callback (use-after-free before 535.14)",
			  table);
		ret = -EINVAL;
#endif
		goto out;	/* 535.14+: returns 0 */
	}
	if (pin->state == FNV_PUT) {
		violation(FAKE_NV_V_DOUBLE_PUT, caller, "%s of table %px already put", fn, table);
		ret = not_found(persistent_api);
		goto out;
	}
	if (!FNV_LEGACY && pin->persistent != persistent_api) {
		/*
		 * put_pages does not find a persistent pin among the caller's objects: 0,
		 * and the pin stays; put_pages_persistent of a callback table dereferences
		 * NULL in nvidia.ko (docs/abi.md 1.1): no answer.
		 */
		violation(FAKE_NV_V_WRONG_PUT_KIND, caller, "%s of a %s table %px", fn,
			  pin->persistent ? "persistent" : "callback", table);
		ret = persistent_api ? -EINVAL : 0;
		goto out;
	}
	if (pin->state != FNV_LIVE) {
		/* A callback table freed by its callback, put as persistent: caught above. */
		ret = -EINVAL;
		goto out;
	}
	/*
	 * From 535.14 on the address is not looked at: RM finds the pin by its table
	 * among the caller's objects, and the persistent put never passes it on
	 * (docs/abi.md 1.1), so a put with another address unpins all the same. The
	 * pre-535.14 build keeps refusing it.
	 */
	if (va != pin->va) {
		pr_info("%s of table %px with address %llx, pinned at %llx%s\n", fn, table, va,
			pin->va, FNV_LEGACY ? ": -EINVAL" : ": the address is not looked at");
		if (FNV_LEGACY) {
			ret = -EINVAL;
			goto out;
		}
	}
	charge_us(config.unpin_cost_us);
	fnv_lock(&pin->lock);
	/* A pin whose mappings the driver tears down here stays: they point to it. */
	kept = !list_empty(&pin->maps) || !config.free_on_release;
	if (!list_empty(&pin->maps)) {
		violation(FAKE_NV_V_UNMAPPED_AT_PUT, caller,
			  "%s of table %px with DMA mappings still live (the driver frees them)",
			  fn, table);
		list_for_each_entry_safe(map, tmp, &pin->maps, pin_node)
			map_teardown(map, FNV_M_FREED_BY_CB, FNV_POISON_MAP_CB);
	}
	pin_release(pin, FNV_PUT);
	fnv_unlock(&pin->lock);
	maybe_destroy_alloc(pin->alloc);
	if (!kept)
		pin_free(pin);
out:
	fnv_unlock(&drv_lock);
	return ret;
}

int nvidia_p2p_put_pages(u64 p2p_token, u32 va_space_token, u64 virtual_address,
			 struct nvidia_p2p_page_table *page_table)
{
	if (p2p_token || va_space_token)
		return -EINVAL;
	return do_put_pages(virtual_address, page_table, false, _RET_IP_);
}
EXPORT_SYMBOL_GPL(nvidia_p2p_put_pages);

#ifndef FAKE_NV_LEGACY
int nvidia_p2p_get_pages_persistent(u64 virtual_address, u64 length,
				    struct nvidia_p2p_page_table **page_table, u32 flags)
{
	/*
	 * From 570 the flags are narrowed to 8 bits, of which only bit 0 (force BAR1) is
	 * read: the others are ignored (docs/abi.md 1.1).
	 */
	return do_get_pages(virtual_address, length, page_table, NULL, NULL, true,
			    (u8)flags & 1, _RET_IP_);
}
EXPORT_SYMBOL_GPL(nvidia_p2p_get_pages_persistent);

int nvidia_p2p_put_pages_persistent(u64 virtual_address,
				    struct nvidia_p2p_page_table *page_table, u32 flags)
{
	if (flags)
		return -EINVAL;
	return do_put_pages(virtual_address, page_table, true, _RET_IP_);
}
EXPORT_SYMBOL_GPL(nvidia_p2p_put_pages_persistent);
#endif

/*
 * free_page_table and free_dma_mapping are no-ops answering 0 in the open driver
 * (docs/abi.md 1.1); the fake counts an object it never handed out, and keeps -EINVAL
 * for it in the pre-535.14 build, whose answer is not known.
 */
int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table)
{
	if (!find_pin(page_table)) {
		violation(FAKE_NV_V_UNKNOWN_TABLE, _RET_IP_,
			  "free_page_table of table %px never handed out", page_table);
		return not_found(false);
	}
	return 0;	/* the driver frees it itself after the callback */
}
EXPORT_SYMBOL_GPL(nvidia_p2p_free_page_table);

int nvidia_p2p_free_dma_mapping(struct nvidia_p2p_dma_mapping *dma_mapping)
{
	if (!find_map(dma_mapping)) {
		violation(FAKE_NV_V_UNKNOWN_TABLE, _RET_IP_,
			  "free_dma_mapping of mapping %px never handed out", dma_mapping);
		return not_found(false);
	}
	return 0;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_free_dma_mapping);

/* ------------------------------------------------------------------------- */
/* DMA */

/* Whether @dev can reach [addr, addr + len) without an IOMMU (checked before
 * dma_map_resource, whose own overflow path WARNs). */
static bool peer_reaches(struct device *dev, u64 addr, u64 len)
{
	u64 limit;

	if (device_iommu_mapped(dev))
		return true;	/* the IOMMU translates; dma_map_resource decides */
	if (!dev->dma_mask)
		return false;
	limit = min_not_zero(*dev->dma_mask, dev->bus_dma_limit);
	return addr + len - 1 <= limit;
}

/*
 * The DMA mapping of one 64 KiB GPU page for @dev. BAR pages are MMIO:
 * dma_map_resource. RAM pages (the device node's) are mapped the same way, as MMIO
 * (no CPU cache maintenance, never bounced through swiotlb), so that without an
 * IOMMU their DMA address is their physical address, as a BAR page's is, and the
 * soft-RoCE driver finds the struct pages behind it. dma_map_phys with DMA_ATTR_MMIO
 * is what dma_map_resource does on 7.3, where dma-debug accepts it for RAM because
 * the pages are reserved (fnv_ram_mark); on 7.0, with CONFIG_DMA_API_DEBUG (the test
 * bed's dev and debug kernels), dma_map_resource itself refuses any RAM, with a WARN.
 * The unmap is dma_unmap_resource for both (dma_unmap_phys with DMA_ATTR_MMIO, the
 * attributes dma-debug wants to match).
 */
static dma_addr_t map_gpu_page(struct device *dev, const struct fnv_alloc *a, u64 phys)
{
#ifndef FAKE_NV_PROPRIETARY	/* dma_map_phys is GPL only; no RAM there anyway */
	if (a->kind == FNV_K_RAM)
		return dma_map_phys(dev, phys, FNV_PAGE, DMA_BIDIRECTIONAL,
				    DMA_ATTR_MMIO | DMA_ATTR_DEBUGGING_IGNORE_CACHELINES);
#endif
	return dma_map_resource(dev, phys, FNV_PAGE, DMA_BIDIRECTIONAL,
				DMA_ATTR_DEBUGGING_IGNORE_CACHELINES);
}

/*
 * The DMA API's own bookkeeping (dma-debug's entries and cacheline tree) stands for
 * the real driver's IOMMU machinery, not for anything a client does: allocation-failure
 * injection (fail-nth, the debug kernel's peermem_faults suite) must not reach it, or
 * dma-debug turns itself off ("cacheline tracking ENOMEM") for the rest of the run.
 * The fake's own allocations in dma_map stay under injection.
 */
static unsigned int dma_api_no_inject_begin(void)
{
#ifdef CONFIG_FAULT_INJECTION
	unsigned int n = READ_ONCE(current->fail_nth);

	WRITE_ONCE(current->fail_nth, 0);
	return n;
#else
	return 0;
#endif
}

static void dma_api_no_inject_end(unsigned int n)
{
#ifdef CONFIG_FAULT_INJECTION
	WRITE_ONCE(current->fail_nth, n);
#endif
}

int nvidia_p2p_dma_map_pages(struct pci_dev *peer, struct nvidia_p2p_page_table *page_table,
			     struct nvidia_p2p_dma_mapping **dma_mapping)
{
	struct fnv_pin *pin;
	struct fnv_map *map = NULL;
	struct nvidia_p2p_dma_mapping *m = NULL;
	u64 *addrs = NULL;
	unsigned int nth;
	bool dma_api = false;
	u32 i = 0, n;
	int ret;

	if (!peer || !page_table || !dma_mapping)
		return -EINVAL;	/* checked first, as nvidia.ko does */
	if (!dev_is_pci(&peer->dev)) {
		/*
		 * A client's to_pci_dev() of a device that is not a PCI function (a software
		 * RDMA device): nvidia.ko takes the peer as a pci_dev unchecked and reads its
		 * DMA mask from the bytes after the struct device (docs/abi.md 1.1, 1.6). The
		 * fake reads nothing of it: counted, -EINVAL.
		 */
		violation(FAKE_NV_V_NOT_PCI_PEER, _RET_IP_,
			  "dma_map_pages with a peer that is not a PCI function (%s, table %px)",
			  dev_name(&peer->dev), page_table);
		return -EINVAL;
	}
	if (READ_ONCE(cb_task) == current) {
		/* nvidia.ko cannot take its API lock again there: -EIO (docs/abi.md 1.4). */
		violation(FAKE_NV_V_CALL_IN_CALLBACK, _RET_IP_,
			  "dma_map_pages inside free callback (table %px)", page_table);
		return -EIO;
	}
	pin = find_pin(page_table);
	if (!pin) {
		violation(FAKE_NV_V_UNKNOWN_TABLE, _RET_IP_,
			  "dma_map_pages of table %px never handed out", page_table);
		return -EINVAL;
	}
	atomic_inc(&pin->in_flight);
	if (dma_takes_api_lock)
		fnv_lock(&drv_lock);
	fnv_lock(&pin->lock);
	pause_point(FAKE_NV_PAUSE_DMA_MAP);
	if (pin->state != FNV_LIVE) {
		violation(FAKE_NV_V_MAP_AFTER_FREE, _RET_IP_, "dma_map_pages of table %px %s",
			  page_table, pin->state == FNV_PUT ? "already put" :
			  "freed by its free callback");
		ret = -EINVAL;
		goto out;
	}
	if (atomic_dec_if_positive(&map_inject_count) >= 0) {
		CNT_INC(refused_injected);
		ret = -READ_ONCE(map_inject_err);
		goto out;
	}
	n = pin->npages;
	ret = -ENOMEM;
	map = kzalloc_obj(*map, GFP_KERNEL);
	m = kzalloc_obj(*m, GFP_KERNEL);
	addrs = kvcalloc(n, sizeof(u64), GFP_KERNEL);
	if (!map || !m || !addrs)
		goto fail;
	/*
	 * Pages of the real (ivshmem) BAR, and RAM pages, go through the DMA API, as the
	 * real driver's do. Synthetic pages (unbacked allocations: BAR1 beyond the 256 MiB
	 * the VM has, up to an H100's 128 GiB) have no memory behind them and nothing DMAs
	 * into them: without an IOMMU their bus address is used as is, so that millions of
	 * them do not fill dma-debug's tables.
	 */
	dma_api = pin->alloc->kind != FNV_K_UNBACKED || device_iommu_mapped(&peer->dev);
	for (i = 0; i < n; i++) {
		u64 phys = pin->alloc->phys[pin->first + i];
		dma_addr_t d;

		if (!peer_reaches(&peer->dev, phys, FNV_PAGE))
			break;
		if (!dma_api) {
			addrs[i] = phys;
			continue;
		}
		/*
		 * A peer BAR is MMIO: no CPU cache line is involved, and every registration
		 * of the same GPU page has its own mapping, legitimately overlapping. Tell
		 * dma-debug not to count those overlaps as a leak.
		 */
		nth = dma_api_no_inject_begin();
		d = map_gpu_page(&peer->dev, pin->alloc, phys);
		dma_api_no_inject_end(nth);
		if (dma_mapping_error(&peer->dev, d))
			break;
		addrs[i] = d;
	}
	if (i < n) {
		CNT_INC(refused_dma_mask);
		pr_info("dma_map_pages: %s cannot reach page %u at %llx (dma mask %llx): -EIO\n",
			pci_name(peer), i, pin->alloc->phys[pin->first + i],
			peer->dev.dma_mask ? *peer->dev.dma_mask : 0);
		ret = -EIO;
		goto fail;
	}
	m->version = NVIDIA_P2P_DMA_MAPPING_VERSION;
	m->page_size_type = NVIDIA_P2P_PAGE_SIZE_64KB;
	m->entries = n;
	m->dma_addresses = addrs;
	m->private = pin;
	m->pci_dev = peer;
	map->m = m;
	map->pin = pin;
	map->dma_api = dma_api;
	/* A bare pointer, as nvidia.ko keeps it: no reference (docs/abi.md 1.1). */
	map->peer = peer;
	map->state = FNV_M_LIVE;
	list_add_tail(&map->pin_node, &pin->maps);
	spin_lock(&reg_lock);
	hash_add(map_hash, &map->hnode, (unsigned long)m);
	list_add_tail(&map->all_node, &all_maps);
	spin_unlock(&reg_lock);
	CNT_INC(dma_mappings_live);
	*dma_mapping = m;
	ret = 0;
	goto out;
fail:
	while (dma_api && i-- > 0)
		dma_unmap_resource(&peer->dev, addrs[i], FNV_PAGE, DMA_BIDIRECTIONAL,
				   DMA_ATTR_DEBUGGING_IGNORE_CACHELINES);
	kvfree(addrs);
	kfree(m);
	kfree(map);
out:
	fnv_unlock(&pin->lock);
	if (dma_takes_api_lock)
		fnv_unlock(&drv_lock);
	atomic_dec(&pin->in_flight);
	return ret;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_dma_map_pages);

int nvidia_p2p_dma_unmap_pages(struct pci_dev *peer, struct nvidia_p2p_page_table *page_table,
			       struct nvidia_p2p_dma_mapping *dma_mapping)
{
	struct fnv_pin *pin;
	struct fnv_map *map, *freed = NULL;
	int ret = 0;

	if (!peer || !page_table || !dma_mapping)
		return -EINVAL;	/* checked first, as nvidia.ko does */
	if (READ_ONCE(cb_task) == current) {
		/*
		 * A client rule (docs/abi.md 1.1), counted; nvidia.ko takes no RM lock here
		 * and unmaps all the same, answering 0, and so does the fake.
		 */
		violation(FAKE_NV_V_UNMAP_IN_CALLBACK, _RET_IP_,
			  "dma_unmap_pages inside free callback (table %px, mapping %px)",
			  page_table, dma_mapping);
	}
	pin = find_pin(page_table);
	map = find_map(dma_mapping);
	if (!pin || !map || map->pin != pin) {
		violation(FAKE_NV_V_UNKNOWN_TABLE, _RET_IP_,
			  "dma_unmap_pages of table %px / mapping %px: %s", page_table, dma_mapping,
			  !pin ? "table never handed out" : !map ?
			  "mapping never handed out" : "mapping belongs to another table");
		/*
		 * From 535.14 on the mapping is looked up in the live table's list, and
		 * one not there is answered 0 (docs/abi.md 1.1); an unknown or dead table
		 * is a use-after-free there, without an answer.
		 */
		return pin && READ_ONCE(pin->state) == FNV_LIVE ? not_found(false) : -EINVAL;
	}
	atomic_inc(&pin->in_flight);
	fnv_lock(&pin->lock);
	if (map->state == FNV_M_FREED_BY_CB || pin->state != FNV_LIVE) {
		violation(FAKE_NV_V_UNMAP_AFTER_FREE, _RET_IP_,
			  "dma_unmap_pages of mapping %px / table %px already freed by the driver",
			  dma_mapping, page_table);
		ret = -EINVAL;
		goto out;
	}
	if (map->state == FNV_M_UNMAPPED) {
		/* No longer in the table's list. */
		violation(FAKE_NV_V_DOUBLE_UNMAP, _RET_IP_,
			  "dma_unmap_pages of mapping %px already unmapped", dma_mapping);
		ret = not_found(false);
		goto out;
	}
	if (peer != map->peer) {
		/*
		 * nvidia.ko WARNs and unmaps anyway, for the peer it mapped for, and answers
		 * 0 (docs/abi.md 1.1; under panic_on_warn the WARN is fatal).
		 */
		violation(FAKE_NV_V_UNMAP_WRONG_PEER, _RET_IP_,
			  "dma_unmap_pages of mapping %px with peer %s, mapped for %s",
			  dma_mapping, peer ? pci_name(peer) : "(null)", pci_name(map->peer));
		if (FNV_LEGACY) {
			ret = -EINVAL;
			goto out;
		}
	}
	map_teardown(map, FNV_M_UNMAPPED, FNV_POISON_MAP);
	if (config.free_on_release) {
		/* Out of every lookup before the table's lock is dropped; freed after. */
		spin_lock(&reg_lock);
		hash_del(&map->hnode);
		list_del(&map->all_node);
		spin_unlock(&reg_lock);
		freed = map;
	}
out:
	fnv_unlock(&pin->lock);
	atomic_dec(&pin->in_flight);
	if (freed)
		map_free(freed);
	return ret;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_dma_unmap_pages);

/* ------------------------------------------------------------------------- */
/* The free path */

/* Under drv_lock: cuMemFree of @a (or the process's exit). */
static void free_alloc_locked(struct fnv_alloc *a)
{
	struct fnv_pin *pin, *tmp;
	struct fnv_map *map, *mtmp;

	a->freed = true;
	a->proc = NULL;
	list_move_tail(&a->node, &orphans);	/* its VA is reusable from now on */

	list_for_each_entry_safe(pin, tmp, &a->pins, alloc_node) {
		if (pin->persistent)
			continue;
		pr_info("callback running in task %s/%d for table %px\n", current->comm,
			task_pid_nr(current), pin->table);
		pause_point(FAKE_NV_PAUSE_CB_BEFORE_CLIENT);
		WRITE_ONCE(cb_task, current);
		CNT_INC(callbacks_run);
		pin->cb(pin->data);
		WRITE_ONCE(cb_task, NULL);
		pause_point(FAKE_NV_PAUSE_CB_AFTER_CLIENT);
		if (atomic_read(&pin->in_flight))
			violation(FAKE_NV_V_CALL_IN_FLIGHT_AT_FREE, (unsigned long)pin->cb,
				  "%d dma_map/dma_unmap call(s) on table %px in flight when its free callback returned",
				  atomic_read(&pin->in_flight), pin->table);
		fnv_lock(&pin->lock);
		list_for_each_entry_safe(map, mtmp, &pin->maps, pin_node)
			map_teardown(map, FNV_M_FREED_BY_CB, FNV_POISON_MAP_CB);
		pin_release(pin, FNV_FREED_BY_CB);
		fnv_unlock(&pin->lock);
	}
	/* Persistent pins keep the memory until put_pages_persistent. */
	maybe_destroy_alloc(a);
}

int fake_nv_free(struct fake_nv_proc *p, u64 va)
{
	struct fnv_alloc *a, *found = NULL;

	if (!p)
		return -ENOENT;
	fnv_lock(&drv_lock);
	list_for_each_entry(a, &p->allocs, node) {
		if (a->va == va) {
			found = a;
			break;
		}
	}
	if (found)
		free_alloc_locked(found);
	fnv_unlock(&drv_lock);
	return found ? 0 : -ENOENT;
}
EXPORT_SYMBOL_GPL(fake_nv_free);

/* ------------------------------------------------------------------------- */
/* Processes */

#ifndef FAKE_NV_PROPRIETARY

static void mm_ref_drop(struct mm_struct *mm, enum fnv_mm_ref ref)
{
	if (ref == FNV_MM_COUNT)
		mmdrop(mm);
	else
		mmput(mm);
}

/* A process on @mm (a reference of kind @ref the caller took, kept by the process),
 * owned by the current tgid, listed; NULL without memory (the reference is then
 * dropped). */
static struct fake_nv_proc *proc_new(struct mm_struct *mm, enum fnv_mm_ref ref)
{
	struct fake_nv_proc *p;

	if (!mm)
		return NULL;
	p = kzalloc_obj(*p, GFP_KERNEL);
	if (!p) {
		mm_ref_drop(mm, ref);
		return NULL;
	}
	p->mm = mm;
	p->mm_ref = ref;
	p->tgid = current->tgid;
	p->next_va = FNV_VA_BASE;
	INIT_LIST_HEAD(&p->allocs);
	if (ref == FNV_MM_COUNT)
		atomic_inc(&node_procs_live);
	fnv_lock(&drv_lock);
	p->id = ++procs_created;
	list_add_tail(&p->node, &procs);
	fnv_unlock(&drv_lock);
	return p;
}

/*
 * A process of its own for a KUnit suite's kernel thread. mm_alloc() is exported for
 * KUnit only: on a kernel without KUnit (a distribution's) there is no suite to ask.
 */
#if IS_ENABLED(CONFIG_KUNIT)
MODULE_IMPORT_NS("EXPORTED_FOR_KUNIT_TESTING");	/* mm_alloc */
struct fake_nv_proc *fake_nv_proc_create(void)
{
	return proc_new(mm_alloc(), FNV_MM_USERS);
}
#else
struct fake_nv_proc *fake_nv_proc_create(void)
{
	pr_err("fake_nv_proc_create: the kernel has no KUnit (mm_alloc is not exported)\n");
	return NULL;
}
#endif

void fake_nv_proc_enter(struct fake_nv_proc *p)
{
	kthread_use_mm(p->mm);
}

void fake_nv_proc_leave(struct fake_nv_proc *p)
{
	kthread_unuse_mm(p->mm);
}

static void proc_put_mm(struct fake_nv_proc *p)
{
	if (p->mm_ref == FNV_MM_COUNT)
		atomic_dec(&node_procs_live);
	mm_ref_drop(p->mm, p->mm_ref);
}

/* ------------------------------------------------------------------------- */
/* For the device node (gpu_node.c; docs in fake_nvidia_internal.h) */

struct fake_nv_proc *fake_nv_node_proc_create(struct mm_struct *mm)
{
	mmgrab(mm);
	return proc_new(mm, FNV_MM_COUNT);
}

/*
 * RAM backing of @nchunks zeroed 64 KiB chunks, each physically contiguous (a GPU
 * page is contiguous in BAR1 space), with one reference.
 */
static struct fnv_ram *fnv_ram_alloc(u32 nchunks)
{
	struct fnv_ram *ram;
	u32 i;

	ram = kvzalloc_flex(*ram, chunk, nchunks, GFP_KERNEL);
	if (!ram)
		return NULL;
	kref_init(&ram->ref);
	INIT_LIST_HEAD(&ram->stale);
	ram->nchunks = nchunks;
	atomic64_add((u64)nchunks * FNV_PAGE, &ram_bytes_live);
	for (i = 0; i < nchunks; i++) {
		/* No allocation-failure splat: a test asking for more than the VM has
		 * gets -ENOMEM. */
		ram->chunk[i] = alloc_pages(GFP_KERNEL | __GFP_ZERO | __GFP_NOWARN,
					    FNV_RAM_ORDER);
		if (!ram->chunk[i]) {
			fnv_ram_put(ram);
			return NULL;
		}
		fnv_ram_mark(ram->chunk[i], true);
		cond_resched();
	}
	return ram;
}

struct fnv_ram *fake_nv_node_ram_alloc(u64 size)
{
	if (!size || size > FAKE_NV_NODE_MAX_SIZE || !IS_ALIGNED(size, FNV_PAGE))
		return NULL;
	return fnv_ram_alloc(size / FNV_PAGE);
}

bool fake_nv_node_va_busy(struct fake_nv_proc *p, u64 va, u64 size)
{
	bool busy;

	fnv_lock(&drv_lock);
	busy = overlaps(p, va, size);
	fnv_unlock(&drv_lock);
	return busy;
}

int fake_nv_node_alloc(struct fake_nv_proc *p, u64 va, struct fnv_ram *ram)
{
	u64 size = (u64)ram->nchunks * FNV_PAGE;
	int ret = 0;

	if (!va || !IS_ALIGNED(va, FNV_PAGE) || va + size < va)
		return -EINVAL;
	fnv_lock(&drv_lock);
	if (overlaps(p, va, size))
		ret = -EBUSY;
	else if (!new_alloc(p, va, size, FNV_K_RAM, ram))
		ret = -ENOMEM;
	else
		fnv_ram_get(ram);	/* the allocation's, besides the caller's */
	fnv_unlock(&drv_lock);
	return ret;
}

static bool alloc_holds(const struct fnv_alloc *a, u64 va)
{
	return va >= a->va && va - a->va < a->size;
}

int fake_nv_node_info(struct fake_nv_proc *p, struct fake_nv_gpu_info *info)
{
	struct fnv_alloc *a, *found = NULL;
	struct fnv_pin *pin;
	u64 va = info->va;

	fnv_lock(&drv_lock);
	list_for_each_entry(a, &p->allocs, node) {
		if (alloc_holds(a, va)) {
			found = a;
			break;
		}
	}
	/*
	 * Then the freed ones that persistent pins keep, the last freed first: its VA is
	 * reusable once unmapped, so that several may hold @va.
	 */
	if (!found) {
		list_for_each_entry_reverse(a, &orphans, node) {
			if (a->owner_id == p->id && alloc_holds(a, va)) {
				found = a;
				break;
			}
		}
	}
	if (found) {
		memset(info, 0, sizeof(*info));
		info->va = va;
		info->alloc_va = found->va;
		info->alloc_size = found->size;
		info->phys = found->phys[(va - found->va) / FNV_PAGE];
		list_for_each_entry(pin, &found->pins, alloc_node)
			info->pins++;
		info->flags = found->freed ? FAKE_NV_GPU_FREED : 0;
	}
	fnv_unlock(&drv_lock);
	return found ? 0 : -ENOENT;
}
#else
struct fake_nv_proc *fake_nv_proc_create(void)
{
	pr_err("fake_nv_proc_create: not available in the proprietary build\n");
	return NULL;
}

void fake_nv_proc_enter(struct fake_nv_proc *p) { }
void fake_nv_proc_leave(struct fake_nv_proc *p) { }
static void proc_put_mm(struct fake_nv_proc *p) { }
#endif
EXPORT_SYMBOL_GPL(fake_nv_proc_create);
EXPORT_SYMBOL_GPL(fake_nv_proc_enter);
EXPORT_SYMBOL_GPL(fake_nv_proc_leave);

struct mm_struct *fake_nv_proc_mm(struct fake_nv_proc *p)
{
	return p->mm;
}
EXPORT_SYMBOL_GPL(fake_nv_proc_mm);

void fake_nv_proc_exit(struct fake_nv_proc *p)
{
	if (!p)
		return;
	fnv_lock(&drv_lock);
	while (!list_empty(&p->allocs))
		free_alloc_locked(list_first_entry(&p->allocs, struct fnv_alloc, node));
	list_del(&p->node);
	fnv_unlock(&drv_lock);
	proc_put_mm(p);
	kfree(p);
}
EXPORT_SYMBOL_GPL(fake_nv_proc_exit);

/*
 * For the fake's own KUnit suites only (not exported): after a test, put every pin
 * still live (no callbacks, no violations), so that a failed test does not leave
 * pins to the next one. Returns how many it put.
 */
int fake_nv_test_reap(void)
{
	struct fnv_pin *pin;
	struct fnv_map *map, *mtmp;
	int n = 0;

	fnv_lock(&drv_lock);
	list_for_each_entry(pin, &all_pins, all_node) {
		if (pin->state != FNV_LIVE)
			continue;
		fnv_lock(&pin->lock);
		list_for_each_entry_safe(map, mtmp, &pin->maps, pin_node)
			map_teardown(map, FNV_M_FREED_BY_CB, FNV_POISON_MAP_CB);
		pin_release(pin, FNV_PUT);
		fnv_unlock(&pin->lock);
		maybe_destroy_alloc(pin->alloc);
		n++;
	}
	fnv_unlock(&drv_lock);
	return n;
}

/* ------------------------------------------------------------------------- */
/* debugfs */

#ifndef FAKE_NV_PROPRIETARY
static struct dentry *dbg_dir;

static int counters_show(struct seq_file *s, void *unused)
{
	struct fake_nv_counters c;
	struct fake_nv_config cfg;
	int i;

	fake_nv_get_counters(&c);
	fake_nv_get_config(&cfg);
	seq_printf(s, "pins_live %llu\npins_total %llu\npersistent_live %llu\n",
		   c.pins_live, c.pins_total, c.persistent_live);
	seq_printf(s, "bar1_bytes_in_use %llu\ndma_mappings_live %llu\ncallbacks_run %llu\n",
		   c.bar1_bytes_in_use, c.dma_mappings_live, c.callbacks_run);
	seq_printf(s, "refused_unaligned %llu\nrefused_null_callback %llu\n",
		   c.refused_unaligned, c.refused_null_callback);
	seq_printf(s, "refused_not_owner %llu\nrefused_no_memory %llu\nrefused_bar1 %llu\n",
		   c.refused_not_owner, c.refused_no_memory, c.refused_bar1);
	seq_printf(s, "refused_injected %llu\nrefused_dma_mask %llu\nputs_not_owner %llu\n",
		   c.refused_injected, c.refused_dma_mask, c.puts_not_owner);
	for (i = 0; i < FAKE_NV_V_COUNT; i++)
		seq_printf(s, "%s %llu\n", fake_nv_violation_name(i), c.violations[i]);
	seq_printf(s, "violations_total %llu\n", c.violations_total);
	seq_printf(s, "config_page_table_major %u\nconfig_bar1_size %llu\n",
		   cfg.page_table_major, cfg.bar1_size);
	seq_printf(s, "config_bar1_reserve %llu\nconfig_pin_cost_us %u\nconfig_unpin_cost_us %u\n",
		   cfg.bar1_reserve, cfg.pin_cost_us, cfg.unpin_cost_us);
	seq_printf(s, "pre_535 %d\n", fake_nv_is_pre_535());
	/* The device node (gpu_node.c): its processes, and the RAM behind its memory
	 * (alive while an allocation or a CPU mapping holds it). */
	seq_printf(s, "gpu_node_procs %d\nram_bytes_live %lld\n",
		   atomic_read(&node_procs_live), (long long)atomic64_read(&ram_bytes_live));
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(counters);

/*
 * control: one command per write.
 *   config page_table_major|bar1_size|bar1_reserve|pin_cost_us|unpin_cost_us VALUE
 *   inject COUNT ERRNO        (the next COUNT pins fail with -ERRNO)
 *   reset                     (fake_nv_reset_counters)
 */
static char ctl_result[64] = "none\n";

/*
 * The writing process as a fake process (shell scenarios): its own mm and tgid, so
 * that a registration it makes through the fake core's control file passes the owner
 * check. Created on first use; "exit" closes it like the process's /dev/nvidia file.
 */
static struct fake_nv_proc *ctl_proc(bool create)
{
	struct fake_nv_proc *p;

	if (!current->mm)
		return NULL;
	fnv_lock(&drv_lock);
	list_for_each_entry(p, &procs, node) {
		/* Not the device node's process of this mm: gpu_node.c owns that one. */
		if (p->mm == current->mm && p->tgid == current->tgid &&
		    p->mm_ref == FNV_MM_USERS) {
			fnv_unlock(&drv_lock);
			return p;
		}
	}
	fnv_unlock(&drv_lock);
	if (!create)
		return NULL;
	mmget(current->mm);
	return proc_new(current->mm, FNV_MM_USERS);
}

static ssize_t control_read(struct file *f, char __user *ubuf, size_t n, loff_t *pos)
{
	return simple_read_from_buffer(ubuf, n, pos, ctl_result, strlen(ctl_result));
}

static ssize_t control_write(struct file *f, const char __user *ubuf, size_t len,
			     loff_t *ppos)
{
	char buf[96], key[32];
	unsigned long long v1, v2;
	struct fake_nv_config cfg;
	int ret;

	if (len >= sizeof(buf))
		return -EINVAL;
	if (copy_from_user(buf, ubuf, len))
		return -EFAULT;
	buf[len] = 0;
	if (sscanf(buf, "config %31s %llu", key, &v1) == 2) {
		fake_nv_get_config(&cfg);
		if (!strcmp(key, "page_table_major"))
			cfg.page_table_major = v1;
		else if (!strcmp(key, "bar1_size"))
			cfg.bar1_size = v1;
		else if (!strcmp(key, "bar1_reserve"))
			cfg.bar1_reserve = v1;
		else if (!strcmp(key, "pin_cost_us"))
			cfg.pin_cost_us = v1;
		else if (!strcmp(key, "unpin_cost_us"))
			cfg.unpin_cost_us = v1;
		else
			return -EINVAL;
		ret = fake_nv_set_config(&cfg);
		return ret ? ret : len;
	}
	if (sscanf(buf, "inject %llu %llu", &v1, &v2) == 2) {
		fake_nv_inject_pin_errors(v1, v2);
		return len;
	}
	if (!strncmp(buf, "reset", 5)) {
		fake_nv_reset_counters();
		return len;
	}
	if (sscanf(buf, "alloc %llu", &v1) == 1) {
		struct fake_nv_proc *p = ctl_proc(true);
		u64 va = p ? fake_nv_alloc(p, v1, true) : 0;

		if (!va)
			return -ENOMEM;
		snprintf(ctl_result, sizeof(ctl_result), "va %#llx\n", va);
		return len;
	}
	if (sscanf(buf, "free %llx", &v1) == 1) {
		struct fake_nv_proc *p = ctl_proc(false);

		ret = p ? fake_nv_free(p, v1) : -ESRCH;
		return ret ? ret : len;
	}
	if (!strncmp(buf, "exit", 4)) {
		struct fake_nv_proc *p = ctl_proc(false);

		if (!p)
			return -ESRCH;
		fake_nv_proc_exit(p);
		return len;
	}
	return -EINVAL;
}

static const struct file_operations control_fops = {
	.owner = THIS_MODULE,
	.read = control_read,
	.write = control_write,
};

static void dbg_init(void)
{
	dbg_dir = debugfs_create_dir("fake_nvidia", NULL);
	debugfs_create_file("counters", 0444, dbg_dir, NULL, &counters_fops);
	debugfs_create_file("control", 0600, dbg_dir, NULL, &control_fops);
}

static void dbg_exit(void)
{
	debugfs_remove_recursive(dbg_dir);
}
#else
static void dbg_init(void) { }
static void dbg_exit(void) { }
#endif

/* ------------------------------------------------------------------------- */
/* Module */

static int __init fake_nv_init(void)
{
	int i, bar, ret;

	fnv_lock_init(&drv_lock);
	for (i = 0; i < FAKE_NV_PAUSE_COUNT; i++) {
		fake_pause_init(&pauses[i]);
	}
	ivshmem = fake_pci_gpu(&bar);
	if (ivshmem && pci_resource_len(ivshmem, bar) >= FNV_PAGE) {
		pool_start = pci_resource_start(ivshmem, bar);
		pool_len = pci_resource_len(ivshmem, bar);
		pool_pages = pool_len / FNV_PAGE;
		pool_bitmap = bitmap_zalloc(pool_pages, GFP_KERNEL);
		if (!pool_bitmap) {
			pci_dev_put(ivshmem);
			return -ENOMEM;
		}
		pr_info("GPU memory: %s BAR %d at %pa, %u pages of 64 KiB\n",
			pci_name(ivshmem), bar, &pool_start, pool_pages);
	} else {
		pci_dev_put(ivshmem);
		ivshmem = NULL;
		pr_info("no GPU BAR (ivshmem 1af4:1110 BAR 2, or 10de:2330 BAR 1): backed allocations will fail\n");
	}
	config.page_table_major = FNV_LEGACY ? 1 : 2;
	config.bar1_size = pool_len ? pool_len : SZ_256M;
	config.bar1_reserve = 36 * SZ_1M;
	dbg_init();
	/* Last: from here on a process may open the node. */
	ret = fake_nv_node_init();
	if (ret) {
		dbg_exit();
		bitmap_free(pool_bitmap);
		pci_dev_put(ivshmem);
		return ret;
	}
	pr_info("loaded (%s build)\n", FNV_LEGACY ? "legacy pre-535.14" :
		FNV_PROPRIETARY ? "proprietary" : "default");
	return 0;
}

static void __exit fake_nv_exit(void)
{
	struct fake_nv_proc *p, *ptmp;
	struct fnv_pin *pin, *pintmp;
	struct fnv_map *map, *mtmp;
	struct fnv_alloc *a, *atmp;
	u64 leaked_pins = 0, leaked_maps = 0, leaked_procs = 0;
	int i;

	/*
	 * No process can open the node from here on. None has it open: an open file
	 * holds the module (its fops' owner), and a mapping holds its file.
	 */
	fake_nv_node_exit();
	dbg_exit();
	for (i = 0; i < FAKE_NV_PAUSE_COUNT; i++)
		fake_nv_pause_release(i);

	fnv_lock(&drv_lock);
	/* Live pins: no callbacks (their modules are gone); unmap and drop. */
	list_for_each_entry(pin, &all_pins, all_node) {
		if (pin->state != FNV_LIVE)
			continue;
		leaked_pins++;
		fnv_lock(&pin->lock);
		list_for_each_entry_safe(map, mtmp, &pin->maps, pin_node) {
			leaked_maps++;
			map_teardown(map, FNV_M_FREED_BY_CB, FNV_POISON_MAP_CB);
		}
		fnv_unlock(&pin->lock);
	}
	list_for_each_entry_safe(p, ptmp, &procs, node) {
		leaked_procs++;
		list_splice_init(&p->allocs, &orphans);
		list_del(&p->node);
		proc_put_mm(p);
		kfree(p);
	}
	list_for_each_entry_safe(a, atmp, &orphans, node) {
		list_del(&a->node);
		release_phys(a);
		kvfree(a->phys);
		kvfree(a->pincount);
		kfree(a);
	}
	list_for_each_entry_safe(map, mtmp, &all_maps, all_node)
		map_free(map);
	list_for_each_entry_safe(pin, pintmp, &all_pins, all_node) {
		if (pin->table->pages && pin->state != FNV_PUT)
			kvfree(pin->table->pages);
		kvfree(pin->pagebuf);
		kfree(pin->table);
		kfree(pin);
	}
	fnv_unlock(&drv_lock);

	if (leaked_pins || leaked_maps)
		pr_err("unloaded with leaks: %llu pin(s) (%llu persistent), %llu DMA mapping(s), %llu process(es)\n",
		       leaked_pins, counters.persistent_live, leaked_maps, leaked_procs);
	else
		pr_info("unloaded: no leaked pins or DMA mappings (%llu process(es) left open)\n",
			leaked_procs);
	/* Only a mapping still holding RAM can keep it now, and none can exist. */
	if (atomic64_read(&ram_bytes_live))
		pr_err("unloaded with %lld byte(s) of RAM-backed GPU memory still held\n",
		       (long long)atomic64_read(&ram_bytes_live));
	bitmap_free(pool_bitmap);
	pci_dev_put(ivshmem);
}

module_init(fake_nv_init);
module_exit(fake_nv_exit);
MODULE_DESCRIPTION("Fake NVIDIA P2P provider for peermem tests");
MODULE_AUTHOR("peermem test bed");
#ifdef FAKE_NV_PROPRIETARY
MODULE_LICENSE("NVIDIA");
#else
MODULE_LICENSE("Dual MIT/GPL");
#endif
/* A driver version of the branch each build emulates, for /sys/module/nvidia/version
 * (what `peermem doctor` reads on a real host); FAKE_NV_VERSION, the release a
 * packaged double is (tests/node/double-debs: its upgrade). */
#if defined(FAKE_NV_VERSION)
MODULE_VERSION(FAKE_NV_VERSION);
#elif defined(FAKE_NV_LEGACY)
MODULE_VERSION("525.60.13");
#else
MODULE_VERSION("580.95.05");
#endif
