/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The RDMA peer-memory client ABI of the MOFED / DOCA-OFED ib_core, as peermem uses
 * it. Written by the peermem project from its docs/abi.md, section 2 ("The MOFED
 * peer-memory core"); x86_64 LP64 layouts.
 */
#ifndef PEERMEM_PEER_MEM_H
#define PEERMEM_PEER_MEM_H

#include "peermem_types.h"

#define IB_PEER_MEMORY_NAME_MAX 64
#define IB_PEER_MEMORY_VER_MAX 16

/* Extended-client flag: after invalidate returns, the client unmaps by itself. */
#define PEER_MEM_INVALIDATE_UNMAPS (1u << 0)

/* The core's invalidate entry, handed back by ib_register_peer_memory_client. */
typedef int (*invalidate_peer_memory)(void *reg_handle, u64 core_context);

/* The client's callbacks (136 bytes; the first callback at offset 80). */
struct peer_memory_client {
	char name[IB_PEER_MEMORY_NAME_MAX];
	char version[IB_PEER_MEMORY_VER_MAX];
	int (*acquire)(unsigned long addr, size_t size, void *peer_mem_private_data,
		       char *peer_mem_name, void **client_context);
	int (*get_pages)(unsigned long addr, size_t size, int write, int force,
			 struct sg_table *sg_head, void *client_context,
			 u64 core_context);
	int (*dma_map)(struct sg_table *sg_head, void *client_context,
		       struct device *dma_device, int dmasync, int *nmap);
	int (*dma_unmap)(struct sg_table *sg_head, void *client_context,
			 struct device *dma_device);
	void (*put_pages)(struct sg_table *sg_head, void *client_context);
	unsigned long (*get_page_size)(void *client_context);
	void (*release)(void *client_context);
};

/*
 * The extended client (152 bytes). The core treats a client as extended only when
 * version[IB_PEER_MEMORY_VER_MAX - 1] != 0 and ex_size >= 148.
 */
struct peer_memory_client_ex {
	struct peer_memory_client client;
	size_t ex_size;
	u32 flags;
};

void *ib_register_peer_memory_client(const struct peer_memory_client *peer_client,
				     invalidate_peer_memory *invalidate_callback);
void ib_unregister_peer_memory_client(void *reg_handle);

#endif /* PEERMEM_PEER_MEM_H */
