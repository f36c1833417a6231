/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Private definitions of the fake peer-memory core: its own copy of the MOFED ABI
 * (docs/abi.md 2.1 and 2.2, checked at compile time) and hooks for its KUnit suites.
 * Written from docs/abi.md; never includes the project's include/ headers.
 */
#ifndef PEERMEM_FAKE_IB_CORE_INTERNAL_H
#define PEERMEM_FAKE_IB_CORE_INTERNAL_H

#include <linux/types.h>
#include <linux/stddef.h>
#include <linux/build_bug.h>
#include <linux/bits.h>

#include "fake_ib_core.h"

struct sg_table;
struct device;

/* docs/abi.md 2.1 */
#define IB_PEER_MEMORY_NAME_MAX 64
#define IB_PEER_MEMORY_VER_MAX 16
#define PEER_MEM_INVALIDATE_UNMAPS BIT(0)
/* The smallest ex_size of an extended client: up to and including flags. */
#define PEER_MEM_EX_MIN_SIZE 148

typedef int (*invalidate_peer_memory)(void *reg_handle, u64 core_context);

/* docs/abi.md 2.2 */
struct peer_memory_client {
	char name[IB_PEER_MEMORY_NAME_MAX];
	char version[IB_PEER_MEMORY_VER_MAX];
	int (*acquire)(unsigned long addr, size_t size, void *peer_mem_private_data,
		       char *peer_mem_name, void **client_context);
	int (*get_pages)(unsigned long addr, size_t size, int write, int force,
			 struct sg_table *sg_head, void *client_context, u64 core_context);
	int (*dma_map)(struct sg_table *sg_head, void *client_context,
		       struct device *dma_device, int dmasync, int *nmap);
	int (*dma_unmap)(struct sg_table *sg_head, void *client_context,
			 struct device *dma_device);
	void (*put_pages)(struct sg_table *sg_head, void *client_context);
	unsigned long (*get_page_size)(void *client_context);
	void (*release)(void *client_context);
};

struct peer_memory_client_ex {
	struct peer_memory_client client;
	size_t ex_size;
	u32 flags;
};

static_assert(sizeof(struct peer_memory_client) == 136);
static_assert(offsetof(struct peer_memory_client, name) == 0);
static_assert(offsetof(struct peer_memory_client, version) == 64);
static_assert(offsetof(struct peer_memory_client, acquire) == 80);
static_assert(offsetof(struct peer_memory_client, get_pages) == 88);
static_assert(offsetof(struct peer_memory_client, dma_map) == 96);
static_assert(offsetof(struct peer_memory_client, dma_unmap) == 104);
static_assert(offsetof(struct peer_memory_client, put_pages) == 112);
static_assert(offsetof(struct peer_memory_client, get_page_size) == 120);
static_assert(offsetof(struct peer_memory_client, release) == 128);
static_assert(sizeof(struct peer_memory_client_ex) == 152);
static_assert(offsetof(struct peer_memory_client_ex, client) == 0);
static_assert(offsetof(struct peer_memory_client_ex, ex_size) == 136);
static_assert(offsetof(struct peer_memory_client_ex, flags) == 144);
static_assert(offsetofend(struct peer_memory_client_ex, flags) == PEER_MEM_EX_MIN_SIZE);

/* The exports (plain EXPORT_SYMBOL, as MOFED). */
void *ib_register_peer_memory_client(const struct peer_memory_client *client,
				     invalidate_peer_memory *invalidate_out);
void ib_unregister_peer_memory_client(void *reg_handle);

/* rdma_core.c (the split build's ib_core): the idx-th HCA stand-in, referenced. */
struct pci_dev;
struct pci_dev *fake_rdma_core_hca(int idx);

/*
 * A region's phases, for the umem interface (umem.c; docs/abi.md 8.1), which splits
 * fake_core_reg_mr and fake_core_dereg_mr where an HCA driver's own steps go between
 * them: core_mr_register (mapped; an invalidating client's mapping lock held), then
 * core_mr_activate once the key exists, or core_mr_stop_unkeyed when it cannot be
 * made; core_mr_stop at deregistration; core_mr_release last, after either stop.
 */
struct fake_mr *core_mr_register(u64 addr, u64 len, const struct fake_reg_opts *opts);
void core_mr_activate(struct fake_mr *mr);
void core_mr_stop_unkeyed(struct fake_mr *mr);
void core_mr_stop(struct fake_mr *mr);
void core_mr_release(struct fake_mr *mr);
void core_mr_set_revoke(struct fake_mr *mr, void (*revoke)(struct fake_mr *mr), void *priv);
void *core_mr_revoke_priv(struct fake_mr *mr);
const struct sg_table *core_mr_sgt(struct fake_mr *mr);

/* For the KUnit suites (core_test.c). */
/* True when the core behaves as the in-box core (its parameter inbox=1). */
bool fake_core_test_inbox(void);
/* True when the calling thread holds the mapping lock of some live region. */
bool fake_core_test_map_lock_held(void);
/* Whether the registered client (handle) is extended with INVALIDATE_UNMAPS. */
bool fake_core_test_client_unmaps(void *reg_handle);
/* The debugfs directory memory_peers/ (NULL when debugfs is unavailable). */
struct dentry *fake_core_test_peers_dir(void);

#endif /* PEERMEM_FAKE_IB_CORE_INTERNAL_H */
