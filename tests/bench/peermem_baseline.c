// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The benchmark's baseline: a peer-memory client that behaves and costs as the
 * reference, nvidia-peermem, does (docs/abi.md section 3), loaded in place of peermem
 * on the same fakes by `make bench` (tests/qemu/plans/bench.sh) and by the hazard run
 * (tests/qemu/plans/hazard.sh). Not shipped. persistent_api_support=1 (the default, as
 * the reference's) registers "nv_mem" with persistent pins, without invalidation; 0
 * registers "nv_mem", extended with PEER_MEM_INVALIDATE_UNMAPS, and "nv_mem_nc":
 *   acquire    a probe: a callback pin and unpin of the 64 KiB-rounded range; a small
 *              context with a magic number; a module reference
 *   get_pages  the registration's own pin (a callback pin for nv_mem in callback
 *              mode, persistent otherwise)
 *   dma_map    nvidia_p2p_dma_map_pages, one SG entry per 64 KiB page
 *   dma_unmap, put_pages
 *              unmap, unpin, free the SG table; nothing from the task running this
 *              context's free callback, or after it
 *   free callback
 *              invalidates through the core, frees the DMA mapping and the table
 * No locks of its own. With floor=1 it is the benchmark's floor: the least a client
 * that pins once can do on these fakes. No probe (acquire claims every range), and
 * dma_map merges contiguous pages up to the peer's maximum segment, as peermem does.
 * Not a usable client: it claims memory that is not GPU memory.
 */
#define pr_fmt(fmt) "peermem_baseline: " fmt

#include <linux/dma-mapping.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/scatterlist.h>
#include <linux/sched.h>
#include <linux/slab.h>

#include "nv-p2p.h"
#include "peer_mem.h"

#define BASELINE_PAGE SZ_64K
#define BASELINE_MAGIC 0x6e766d656d636f6eULL	/* a live context */
#define BASELINE_FREED 0x6465616463747821ULL	/* a released one */

struct baseline_ctx {
	u64 magic;
	u64 va, len;			/* the 64 KiB-rounded range */
	bool persistent;		/* nv_mem_nc */
	u64 core_context;
	struct nvidia_p2p_page_table *table;
	struct nvidia_p2p_dma_mapping *mapping;
	struct pci_dev *peer;
	struct task_struct *cb_task;	/* the task running the free callback */
	bool freed;			/* the free callback ran */
	struct sg_table sgt;		/* what dma_map built (the core may zero its copy) */
};

/* A probe pin: freed by its callback if the memory goes away meanwhile. */
struct baseline_probe {
	struct nvidia_p2p_page_table *table;
	bool freed;
};

static void probe_free_callback(void *data)
{
	struct baseline_probe *p = data;

	nvidia_p2p_free_page_table(p->table);
	p->freed = true;
}

static bool floor_mode;
module_param_named(floor, floor_mode, bool, 0444);
MODULE_PARM_DESC(floor, "the benchmark's floor: no probe pin, merged SG entries");

static int persistent_api_support = 1;
module_param(persistent_api_support, int, 0444);
MODULE_PARM_DESC(persistent_api_support,
		 "1 (default): nv_mem with persistent pins; 0: callback pins and nv_mem_nc");

static struct peer_memory_client_ex nv_mem, nv_mem_nc;
static void *nv_mem_handle, *nv_mem_nc_handle;
static invalidate_peer_memory invalidate;

static struct baseline_ctx *ctx_of(void *client_context)
{
	struct baseline_ctx *c = client_context;

	if (!c || c->magic != BASELINE_MAGIC) {
		pr_err("stale or corrupt context %p\n", c);
		return NULL;
	}
	return c;
}

static void baseline_free_callback(void *data)
{
	struct baseline_ctx *c = data;

	__module_get(THIS_MODULE);
	WRITE_ONCE(c->cb_task, current);
	if (invalidate)
		invalidate(nv_mem_handle, c->core_context);
	if (c->mapping)
		nvidia_p2p_free_dma_mapping(c->mapping);
	nvidia_p2p_free_page_table(c->table);
	c->mapping = NULL;
	c->table = NULL;
	c->freed = true;
	WRITE_ONCE(c->cb_task, NULL);
	module_put(THIS_MODULE);
}

static int acquire_common(unsigned long addr, size_t size, void **client_context,
			  bool persistent)
{
	struct baseline_probe probe = { };
	u64 start = ALIGN_DOWN((u64)addr, BASELINE_PAGE);
	u64 end = ALIGN((u64)addr + size, BASELINE_PAGE);
	struct baseline_ctx *c;
	int ret;

	if (!size || end <= start)
		return 0;
	if (floor_mode)
		goto claim;
	/* Is this the calling process's GPU memory? A callback pin in both modes. */
	ret = nvidia_p2p_get_pages(0, 0, start, end - start, &probe.table,
				   probe_free_callback, &probe);
	if (ret)
		return 0;
	if (!probe.freed)
		nvidia_p2p_put_pages(0, 0, start, probe.table);
claim:
	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		return 0;
	c->magic = BASELINE_MAGIC;
	c->va = start;
	c->len = end - start;
	c->persistent = persistent;
	__module_get(THIS_MODULE);
	*client_context = c;
	return 1;
}

static int acquire_nv_mem(unsigned long addr, size_t size, void *priv, char *name,
			  void **client_context)
{
	return acquire_common(addr, size, client_context, false);
}

static int acquire_nv_mem_nc(unsigned long addr, size_t size, void *priv, char *name,
			     void **client_context)
{
	return acquire_common(addr, size, client_context, true);
}

static int baseline_get_pages(unsigned long addr, size_t size, int write, int force,
			      struct sg_table *sg_head, void *client_context, u64 core_context)
{
	struct baseline_ctx *c = ctx_of(client_context);
	int ret;

	if (!c)
		return -EINVAL;
	c->core_context = core_context;
	if (c->persistent)
		ret = nvidia_p2p_get_pages_persistent(c->va, c->len, &c->table, 0);
	else
		ret = nvidia_p2p_get_pages(0, 0, c->va, c->len, &c->table,
					   baseline_free_callback, c);
	if (ret)
		c->table = NULL;	/* a failed get_pages may leave a freed table there */
	return ret;
}

/* The end of the run of pages from page i that one floor SG entry covers. */
static u32 floor_run_end(const u64 *addr, u32 i, u32 n, u64 max_seg)
{
	u64 len = BASELINE_PAGE;
	u32 j = i + 1;

	while (j < n && addr[j] == addr[j - 1] + BASELINE_PAGE &&
	       len + BASELINE_PAGE <= max_seg) {
		len += BASELINE_PAGE;
		j++;
	}
	return j;
}

/* The floor's SG table: contiguous pages merged up to max_seg; its entry count. */
static int floor_sg(struct sg_table *sg_head, const struct nvidia_p2p_dma_mapping *m,
		    u64 max_seg)
{
	struct scatterlist *sg;
	u32 i, j, nents = 0;
	int ret;

	for (i = 0; i < m->entries; i = floor_run_end(m->dma_addresses, i, m->entries, max_seg))
		nents++;
	ret = sg_alloc_table(sg_head, nents, GFP_KERNEL);
	if (ret)
		return ret;
	sg = sg_head->sgl;
	for (i = 0; i < m->entries; i = j) {
		j = floor_run_end(m->dma_addresses, i, m->entries, max_seg);
		sg_set_page(sg, NULL, (j - i) * BASELINE_PAGE, 0);
		sg_dma_address(sg) = m->dma_addresses[i];
		sg_dma_len(sg) = (j - i) * BASELINE_PAGE;
		sg = sg_next(sg);
	}
	return nents;
}

static int baseline_dma_map(struct sg_table *sg_head, void *client_context,
			    struct device *dma_device, int dmasync, int *nmap)
{
	struct baseline_ctx *c = ctx_of(client_context);
	struct scatterlist *sg;
	u32 i;
	int ret;

	if (!c || !c->table || !dev_is_pci(dma_device))
		return -EINVAL;
	if (c->table->page_size != NVIDIA_P2P_PAGE_SIZE_64KB)
		return -EINVAL;
	c->peer = to_pci_dev(dma_device);
	ret = nvidia_p2p_dma_map_pages(c->peer, c->table, &c->mapping);
	if (ret)
		return ret;
	if (c->mapping->version >> 16 != NVIDIA_P2P_DMA_MAPPING_VERSION >> 16) {
		ret = -EINVAL;
		goto unmap;
	}
	if (floor_mode) {
		ret = floor_sg(sg_head, c->mapping, dma_get_max_seg_size(dma_device));
		if (ret < 0)
			goto unmap;
		*nmap = ret;
		c->sgt = *sg_head;
		return 0;
	}
	/* One entry per 64 KiB page, no merging. */
	ret = sg_alloc_table(sg_head, c->mapping->entries, GFP_KERNEL);
	if (ret)
		goto unmap;
	for_each_sg(sg_head->sgl, sg, c->mapping->entries, i) {
		sg_set_page(sg, NULL, BASELINE_PAGE, 0);
		sg_dma_address(sg) = c->mapping->dma_addresses[i];
		sg_dma_len(sg) = BASELINE_PAGE;
	}
	*nmap = c->mapping->entries;
	c->sgt = *sg_head;
	return 0;
unmap:
	nvidia_p2p_dma_unmap_pages(c->peer, c->table, c->mapping);
	c->mapping = NULL;
	return ret;
}

static int baseline_dma_unmap(struct sg_table *sg_head, void *client_context,
			      struct device *dma_device)
{
	struct baseline_ctx *c = ctx_of(client_context);

	if (!c || READ_ONCE(c->cb_task) == current || c->freed)
		return 0;
	if (c->mapping) {
		nvidia_p2p_dma_unmap_pages(c->peer, c->table, c->mapping);
		c->mapping = NULL;
	}
	return 0;
}

static void baseline_put_pages(struct sg_table *sg_head, void *client_context)
{
	struct baseline_ctx *c = ctx_of(client_context);

	if (!c)
		return;
	if (sg_head && sg_head->sgl) {
		sg_free_table(sg_head);
		memset(&c->sgt, 0, sizeof(c->sgt));
	}
	if (READ_ONCE(c->cb_task) == current || c->freed || !c->table)
		return;
	if (c->mapping) {
		nvidia_p2p_dma_unmap_pages(c->peer, c->table, c->mapping);
		c->mapping = NULL;
	}
	if (c->persistent)
		nvidia_p2p_put_pages_persistent(c->va, c->table, 0);
	else
		nvidia_p2p_put_pages(0, 0, c->va, c->table);
	c->table = NULL;
}

static unsigned long baseline_get_page_size(void *client_context)
{
	return BASELINE_PAGE;
}

static void baseline_release(void *client_context)
{
	struct baseline_ctx *c = ctx_of(client_context);

	if (!c)
		return;
	/* Invalidated: the core zeroed its table without calling put_pages. */
	if (c->sgt.sgl)
		sg_free_table(&c->sgt);
	c->magic = BASELINE_FREED;
	kfree(c);
	module_put(THIS_MODULE);
}

static void fill(struct peer_memory_client_ex *ex, const char *name,
		 int (*acquire)(unsigned long, size_t, void *, char *, void **))
{
	struct peer_memory_client *p = &ex->client;

	strscpy(p->name, name, sizeof(p->name));
	strscpy(p->version, "baseline", sizeof(p->version) - 1);
	p->acquire = acquire;
	p->get_pages = baseline_get_pages;
	p->dma_map = baseline_dma_map;
	p->dma_unmap = baseline_dma_unmap;
	p->put_pages = baseline_put_pages;
	p->get_page_size = baseline_get_page_size;
	p->release = baseline_release;
}

static int __init baseline_init(void)
{
	if (persistent_api_support != 0 && persistent_api_support != 1)
		return -EINVAL;
	if (persistent_api_support) {
		fill(&nv_mem, "nv_mem", acquire_nv_mem_nc);
		nv_mem_handle = ib_register_peer_memory_client(&nv_mem.client, NULL);
		if (!nv_mem_handle)
			return -EINVAL;
		pr_info("loaded: nv_mem (persistent pins)\n");
		return 0;
	}
	fill(&nv_mem, "nv_mem", acquire_nv_mem);
	/* Extended: a non-zero last version byte, the size and INVALIDATE_UNMAPS. */
	nv_mem.client.version[IB_PEER_MEMORY_VER_MAX - 1] = 1;
	nv_mem.ex_size = sizeof(nv_mem);
	nv_mem.flags = PEER_MEM_INVALIDATE_UNMAPS;
	fill(&nv_mem_nc, "nv_mem_nc", acquire_nv_mem_nc);

	nv_mem_handle = ib_register_peer_memory_client(&nv_mem.client, &invalidate);
	if (!nv_mem_handle)
		return -EINVAL;
	nv_mem_nc_handle = ib_register_peer_memory_client(&nv_mem_nc.client, NULL);
	if (!nv_mem_nc_handle) {
		ib_unregister_peer_memory_client(nv_mem_handle);
		return -EINVAL;
	}
	pr_info("loaded: nv_mem (callback pins, INVALIDATE_UNMAPS), nv_mem_nc\n");
	return 0;
}

static void __exit baseline_exit(void)
{
	if (nv_mem_nc_handle)
		ib_unregister_peer_memory_client(nv_mem_nc_handle);
	ib_unregister_peer_memory_client(nv_mem_handle);
}

module_init(baseline_init);
module_exit(baseline_exit);
MODULE_LICENSE("Dual MIT/GPL");
MODULE_DESCRIPTION("The benchmark's baseline peer-memory client, costed as nvidia-peermem");
