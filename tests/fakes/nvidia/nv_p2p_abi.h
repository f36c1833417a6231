/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The fake nvidia.ko's own definitions of the NVIDIA P2P ABI (docs/abi.md 1.2, 1.3),
 * written from docs/abi.md, with a compile-time check of every size and offset. The
 * fake never includes the project's include/ headers. Shared with
 * tests/fakes/bad_client.
 */
#ifndef PEERMEM_FAKE_NV_P2P_ABI_H
#define PEERMEM_FAKE_NV_P2P_ABI_H

#include <linux/types.h>
#include <linux/stddef.h>
#include <linux/build_bug.h>

struct pci_dev;

#define NVIDIA_P2P_PAGE_TABLE_VERSION_V1	0x00010002u	/* drivers 515 - 575 */
#define NVIDIA_P2P_PAGE_TABLE_VERSION_V2	0x00020000u	/* drivers 580+ */
#define NVIDIA_P2P_DMA_MAPPING_VERSION		0x00020003u

enum nvidia_p2p_page_size_type {
	NVIDIA_P2P_PAGE_SIZE_4KB = 0,
	NVIDIA_P2P_PAGE_SIZE_64KB = 1,
	NVIDIA_P2P_PAGE_SIZE_128KB = 2,
	NVIDIA_P2P_PAGE_SIZE_COUNT = 3,
};

struct nvidia_p2p_page {
	u64 physical_address;
	union {
		struct {
			u32 fermi_bar1_reg;
			u32 fermi_bar2_reg;
			u32 fermi_bar3_reg;
		} fermi;
		u32 reserved[6];
	} registers;
};

/* Major 1 ends after gpu_uuid (32 bytes); major 2 appends flags (40 bytes). */
struct nvidia_p2p_page_table {
	u32 version;
	u32 page_size;
	struct nvidia_p2p_page **pages;
	u32 entries;
	u8 *gpu_uuid;
	u32 flags;
};
#define NVIDIA_P2P_PAGE_TABLE_V1_SIZE	32

struct nvidia_p2p_dma_mapping {
	u32 version;
	enum nvidia_p2p_page_size_type page_size_type;
	u32 entries;
	u64 *dma_addresses;
	void *private;
	struct pci_dev *pci_dev;
};

static_assert(sizeof(enum nvidia_p2p_page_size_type) == 4);
static_assert(sizeof(struct nvidia_p2p_page) == 32);
static_assert(offsetof(struct nvidia_p2p_page, physical_address) == 0);
static_assert(offsetof(struct nvidia_p2p_page, registers) == 8);
static_assert(sizeof(((struct nvidia_p2p_page *)0)->registers) == 24);

static_assert(sizeof(struct nvidia_p2p_page_table) == 40);
static_assert(offsetof(struct nvidia_p2p_page_table, version) == 0);
static_assert(offsetof(struct nvidia_p2p_page_table, page_size) == 4);
static_assert(offsetof(struct nvidia_p2p_page_table, pages) == 8);
static_assert(offsetof(struct nvidia_p2p_page_table, entries) == 16);
static_assert(offsetof(struct nvidia_p2p_page_table, gpu_uuid) == 24);
static_assert(offsetof(struct nvidia_p2p_page_table, flags) == 32);
static_assert(offsetof(struct nvidia_p2p_page_table, gpu_uuid) + sizeof(u8 *) ==
	      NVIDIA_P2P_PAGE_TABLE_V1_SIZE);

static_assert(sizeof(struct nvidia_p2p_dma_mapping) == 40);
static_assert(offsetof(struct nvidia_p2p_dma_mapping, version) == 0);
static_assert(offsetof(struct nvidia_p2p_dma_mapping, page_size_type) == 4);
static_assert(offsetof(struct nvidia_p2p_dma_mapping, entries) == 8);
static_assert(offsetof(struct nvidia_p2p_dma_mapping, dma_addresses) == 16);
static_assert(offsetof(struct nvidia_p2p_dma_mapping, private) == 24);
static_assert(offsetof(struct nvidia_p2p_dma_mapping, pci_dev) == 32);

/* The exported P2P API (docs/abi.md 1.1). */
int nvidia_p2p_get_pages(u64 p2p_token, u32 va_space_token, u64 virtual_address,
			 u64 length, struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data);
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
#ifndef FAKE_NV_LEGACY
int nvidia_p2p_get_pages_persistent(u64 virtual_address, u64 length,
				    struct nvidia_p2p_page_table **page_table,
				    u32 flags);
int nvidia_p2p_put_pages_persistent(u64 virtual_address,
				    struct nvidia_p2p_page_table *page_table,
				    u32 flags);
#endif

#endif /* PEERMEM_FAKE_NV_P2P_ABI_H */
