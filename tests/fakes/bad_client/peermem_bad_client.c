// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * peermem_bad_client.ko: a P2P client that breaks the free-callback rules of ABI
 * docs/abi.md 1.1 / 1.4 on purpose, and hands nvidia_p2p_dma_map_pages a peer that is
 * not a PCI function, to prove the fake nvidia.ko catches such bugs. Its KUnit cases
 * pass when the fake counted exactly the expected violation, by name.
 */
#include <kunit/test.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/device.h>
#include <linux/dma-mapping.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "fake_pci.h"
#include "fake_nvidia.h"
#include "nv_p2p_abi.h"

struct bad_ctx {
	struct kunit *test;
	u64 va;
	struct nvidia_p2p_page_table *table;
	int calls;
	bool put_inside;
	int put_ret;
};

static void bad_free_callback(void *data)
{
	struct bad_ctx *c = data;

	c->calls++;
	if (c->put_inside)	/* BUG: put_pages from inside the free callback */
		c->put_ret = nvidia_p2p_put_pages(0, 0, c->va, c->table);
	/* BUG (second case): the table and mapping are not forgotten here */
}

static int violation_index(const char *name)
{
	int v;

	for (v = 0; v < FAKE_NV_V_COUNT; v++)
		if (!strcmp(fake_nv_violation_name(v), name))
			return v;
	return -1;
}

static void counts(const char *name, u64 *named, u64 *total)
{
	struct fake_nv_counters c;
	int v = violation_index(name);

	fake_nv_get_counters(&c);
	*named = v >= 0 ? c.violations[v] : 0;
	*total = c.violations_total;
}

static void put_in_callback(struct kunit *test)
{
	struct bad_ctx *c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	struct fake_nv_proc *p;
	u64 n0, t0, n1, t1;

	KUNIT_ASSERT_NOT_NULL(test, c);
	KUNIT_ASSERT_GE(test, violation_index("PUT_IN_CALLBACK"), 0);
	p = fake_nv_proc_create();
	KUNIT_ASSERT_NOT_NULL(test, p);
	fake_nv_proc_enter(p);
	c->va = fake_nv_alloc(p, SZ_128K, false);
	c->put_inside = true;
	KUNIT_EXPECT_EQ(test, nvidia_p2p_get_pages(0, 0, c->va, SZ_128K, &c->table,
						   bad_free_callback, c), 0);
	counts("PUT_IN_CALLBACK", &n0, &t0);
	KUNIT_EXPECT_EQ(test, fake_nv_free(p, c->va), 0);	/* cuMemFree */
	counts("PUT_IN_CALLBACK", &n1, &t1);
	KUNIT_EXPECT_EQ(test, c->calls, 1);
	KUNIT_EXPECT_EQ(test, c->put_ret, -EIO);	/* as nvidia.ko, its API lock held */
	KUNIT_EXPECT_EQ(test, n1 - n0, 1);
	KUNIT_EXPECT_EQ(test, t1 - t0, 1);
	fake_nv_proc_leave(p);
	fake_nv_proc_exit(p);
}

static void unmap_after_callback(struct kunit *test)
{
	struct bad_ctx *c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	struct nvidia_p2p_dma_mapping *m = NULL;
	struct pci_dev *hca = fake_pci_hca(0);
	struct fake_nv_proc *p;
	u64 n0, t0, n1, t1;

	KUNIT_ASSERT_NOT_NULL(test, c);
	KUNIT_ASSERT_NOT_NULL(test, hca);
	KUNIT_ASSERT_GE(test, violation_index("UNMAP_AFTER_FREE"), 0);
	KUNIT_EXPECT_EQ(test, dma_set_mask_and_coherent(&hca->dev, DMA_BIT_MASK(64)), 0);
	p = fake_nv_proc_create();
	KUNIT_ASSERT_NOT_NULL(test, p);
	fake_nv_proc_enter(p);
	c->va = fake_nv_alloc(p, SZ_128K, true);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_get_pages(0, 0, c->va, SZ_128K, &c->table,
						   bad_free_callback, c), 0);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_dma_map_pages(hca, c->table, &m), 0);
	KUNIT_EXPECT_EQ(test, fake_nv_free(p, c->va), 0);
	KUNIT_EXPECT_EQ(test, c->calls, 1);
	counts("UNMAP_AFTER_FREE", &n0, &t0);
	/* BUG: the callback returned, the driver freed both: use-after-free */
	KUNIT_EXPECT_EQ(test, nvidia_p2p_dma_unmap_pages(hca, c->table, m), -EINVAL);
	counts("UNMAP_AFTER_FREE", &n1, &t1);
	KUNIT_EXPECT_EQ(test, n1 - n0, 1);
	KUNIT_EXPECT_EQ(test, t1 - t0, 1);
	fake_nv_proc_leave(p);
	fake_nv_proc_exit(p);
	pci_dev_put(hca);
}

/*
 * The RDMA device of a software HCA (rxe, siw) is not a PCI function. nvidia-peermem
 * hands the core's DMA device to nvidia_p2p_dma_map_pages through an unchecked
 * to_pci_dev(), and nvidia.ko reads the pci_dev's fields from whatever follows the
 * struct device (docs/abi.md 1.1). The fake counts it and reads nothing.
 */
static void non_pci_peer(struct kunit *test)
{
	struct bad_ctx *c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	struct nvidia_p2p_dma_mapping *m = NULL;
	struct device *soft = root_device_register("peermem_bad_soft_hca");
	struct fake_nv_counters cnt;
	struct fake_nv_proc *p;
	u64 n0, t0, n1, t1;

	KUNIT_ASSERT_NOT_NULL(test, c);
	KUNIT_ASSERT_FALSE(test, IS_ERR(soft));
	KUNIT_EXPECT_FALSE(test, dev_is_pci(soft));
	if (violation_index("NOT_PCI_PEER") < 0) {
		root_device_unregister(soft);
		KUNIT_FAIL(test, "the fake names no NOT_PCI_PEER violation");
		return;
	}
	p = fake_nv_proc_create();
	KUNIT_ASSERT_NOT_NULL(test, p);
	fake_nv_proc_enter(p);
	c->va = fake_nv_alloc(p, SZ_128K, true);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_get_pages(0, 0, c->va, SZ_128K, &c->table,
						   bad_free_callback, c), 0);
	counts("NOT_PCI_PEER", &n0, &t0);
	/* BUG: the DMA device is not a PCI function */
	KUNIT_EXPECT_EQ(test, nvidia_p2p_dma_map_pages(to_pci_dev(soft), c->table, &m), -EINVAL);
	counts("NOT_PCI_PEER", &n1, &t1);
	KUNIT_EXPECT_EQ(test, n1 - n0, 1);
	KUNIT_EXPECT_EQ(test, t1 - t0, 1);
	KUNIT_EXPECT_NULL(test, m);
	fake_nv_get_counters(&cnt);
	KUNIT_EXPECT_EQ(test, cnt.dma_mappings_live, 0);
	KUNIT_EXPECT_EQ(test, nvidia_p2p_put_pages(0, 0, c->va, c->table), 0);
	KUNIT_EXPECT_EQ(test, c->calls, 0);
	fake_nv_proc_leave(p);
	fake_nv_proc_exit(p);
	root_device_unregister(soft);
}

static struct kunit_case bad_client_cases[] = {
	KUNIT_CASE(put_in_callback),
	KUNIT_CASE(unmap_after_callback),
	KUNIT_CASE(non_pci_peer),
	{}
};

static struct kunit_suite bad_client_suite = {
	.name = "peermem_fake_nvidia_bad_client",
	.test_cases = bad_client_cases,
};
kunit_test_suite(bad_client_suite);

MODULE_DESCRIPTION("Deliberately wrong P2P client of the fake nvidia.ko");
MODULE_LICENSE("Dual MIT/GPL");
