/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * What peermem's C glue (src/glue.c) offers its Rust side.
 */
#ifndef PEERMEM_GLUE_H
#define PEERMEM_GLUE_H

#include "nv-p2p.h"
#include "peer_mem.h"

/*
 * The foreign functions peermem calls, each NULL when its exporter was not loaded
 * before peermem (they are weak references, resolved once, at load time). A missing
 * required one is reported by name at init; the persistent pair is optional (absent
 * before driver 535.14 / 525.105.17).
 */
struct peermem_symbols {
	__typeof__(nvidia_p2p_get_pages) *nv_get_pages;
	__typeof__(nvidia_p2p_put_pages) *nv_put_pages;
	__typeof__(nvidia_p2p_free_page_table) *nv_free_page_table;
	__typeof__(nvidia_p2p_dma_map_pages) *nv_dma_map_pages;
	__typeof__(nvidia_p2p_dma_unmap_pages) *nv_dma_unmap_pages;
	__typeof__(nvidia_p2p_free_dma_mapping) *nv_free_dma_mapping;
	__typeof__(nvidia_p2p_get_pages_persistent) *nv_get_pages_persistent;
	__typeof__(nvidia_p2p_put_pages_persistent) *nv_put_pages_persistent;
	__typeof__(ib_register_peer_memory_client) *ib_register_client;
	__typeof__(ib_unregister_peer_memory_client) *ib_unregister_client;
};

/* Fills *syms; see struct peermem_symbols. */
void peermem_resolve_symbols(struct peermem_symbols *syms);

/*
 * The module parameters, as given at load time. They are declared by the C glue so
 * that they show read-only in /sys/module/<name>/parameters/, as nvidia-peermem's do
 * (the kernel crate's parameters do not appear in sysfs).
 */
struct peermem_params {
	int persistent_api_support;
	int peerdirect_support;
};

/* Fills *params; see struct peermem_params. */
void peermem_get_params(struct peermem_params *params);

/* Number of independent rate limits peermem_ratelimit() keeps. */
#define PEERMEM_RATELIMITS 32

/*
 * Whether a message of kind @which (< PEERMEM_RATELIMITS) may be printed now: at most
 * 10 per 5 seconds for each kind, so one flood cannot hide another reason.
 */
int peermem_ratelimit(unsigned int which);

/* The PCI function's maximum DMA segment size. */
unsigned int peermem_pci_max_seg_size(struct pci_dev *pdev);

/*
 * Allocates @n entries in an empty (zeroed) sg_table, to be filled with
 * peermem_sg_set. 0 or -ENOMEM; on failure the table is left empty.
 */
int peermem_sg_alloc(struct sg_table *sgt, unsigned int n);
/*
 * Makes @sg a DMA-mapped entry of DMA address @dma and length @len (both as DMA length
 * and as length; no struct page). Returns the next entry, NULL after the last.
 */
struct scatterlist *peermem_sg_set(struct scatterlist *sg, u64 dma, u32 len);
/* The number of entries of the list at @sgl, to its end mark. */
unsigned int peermem_sg_count(struct scatterlist *sgl);
/* Frees the list at @sgl that peermem_sg_alloc allocated (its count is its own). */
void peermem_sg_free(struct scatterlist *sgl);

/* A reference on this module (held by each live registration context, an orphaned
 * callback pin and a running free callback), and its release. */
void peermem_module_get(void);
void peermem_module_put(void);

/* The module version (the VERSION file), NUL-terminated. */
extern const char peermem_version[];

#endif /* PEERMEM_GLUE_H */
