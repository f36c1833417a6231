/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The NVIDIA kernel P2P ABI exported by nvidia.ko (open kernel modules), as peermem
 * uses it. Written by the peermem project from its docs/abi.md, section 1
 * ("nvidia.ko's P2P API"); x86_64 LP64 layouts.
 */
#ifndef PEERMEM_NV_P2P_H
#define PEERMEM_NV_P2P_H

#include "peermem_types.h"

/* Struct versions: major in the upper 16 bits, minor in the lower 16 (docs/abi.md 1.2). */
#define NVIDIA_P2P_PAGE_TABLE_VERSION_R515 0x00010002u /* drivers 515 - 575 */
#define NVIDIA_P2P_PAGE_TABLE_VERSION_R580 0x00020000u /* drivers 580+, adds flags */
#define NVIDIA_P2P_DMA_MAPPING_VERSION 0x00020003u     /* 515 onward */

/* nvidia_p2p_page_table.flags bit 0 (page-table major 2 only). */
#define NVIDIA_P2P_PAGE_TABLE_FLAGS_CPU_CACHEABLE 0x1u

/* nvidia_p2p_get_pages_persistent flags (docs/abi.md 1.1). */
#define NVIDIA_P2P_FLAGS_DEFAULT 0u
#define NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING 1u

/* Page sizes (docs/abi.md 1.3); drivers today always report 64 KiB. */
enum nvidia_p2p_page_size_type {
	NVIDIA_P2P_PAGE_SIZE_4KB = 0,
	NVIDIA_P2P_PAGE_SIZE_64KB = 1,
	NVIDIA_P2P_PAGE_SIZE_128KB = 2,
	NVIDIA_P2P_PAGE_SIZE_COUNT = 3,
};

/* One GPU page (32 bytes); only physical_address is meaningful to a client. */
struct nvidia_p2p_page {
	u64 physical_address;
	union {
		struct {
			u32 request[3];
			u32 reserved[3];
		} registers;
	} u;
};

/*
 * A pinned range (40 bytes in major 2; major 1 ends after gpu_uuid). The fields a
 * client reads (version, page_size, pages, entries) sit at the same offsets in both.
 * Allocated and freed by nvidia.ko only.
 */
struct nvidia_p2p_page_table {
	u32 version;
	u32 page_size; /* enum nvidia_p2p_page_size_type */
	struct nvidia_p2p_page **pages;
	u32 entries;
	u8 *gpu_uuid; /* 16 bytes */
	u32 flags;    /* major 2 only */
};

/* DMA addresses of a page table for one peer device (40 bytes). */
struct nvidia_p2p_dma_mapping {
	u32 version;
	enum nvidia_p2p_page_size_type page_size_type;
	u32 entries;
	u64 *dma_addresses;
	void *private;
	struct pci_dev *pci_dev;
};

/* The free (invalidation) callback's type (docs/abi.md 1.4). */
typedef void (*nvidia_p2p_free_callback_t)(void *data);

int nvidia_p2p_get_pages(u64 p2p_token, u32 va_space_token, u64 virtual_address,
			 u64 length, struct nvidia_p2p_page_table **page_table,
			 nvidia_p2p_free_callback_t free_callback, void *data);
int nvidia_p2p_put_pages(u64 p2p_token, u32 va_space_token, u64 virtual_address,
			 struct nvidia_p2p_page_table *page_table);
int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table);
int nvidia_p2p_dma_map_pages(struct pci_dev *peer,
			     struct nvidia_p2p_page_table *page_table,
			     struct nvidia_p2p_dma_mapping **dma_mapping);
int nvidia_p2p_dma_unmap_pages(struct pci_dev *peer,
			       struct nvidia_p2p_page_table *page_table,
			       struct nvidia_p2p_dma_mapping *dma_mapping);
int nvidia_p2p_free_dma_mapping(struct nvidia_p2p_dma_mapping *dma_mapping);
/* Since 535.14 / 525.105.17. */
int nvidia_p2p_get_pages_persistent(u64 virtual_address, u64 length,
				    struct nvidia_p2p_page_table **page_table,
				    u32 flags);
int nvidia_p2p_put_pages_persistent(u64 virtual_address,
				    struct nvidia_p2p_page_table *page_table,
				    u32 flags);

#endif /* PEERMEM_NV_P2P_H */
