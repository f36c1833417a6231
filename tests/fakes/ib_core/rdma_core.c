// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Fake RDMA device core (ib_core.ko) under the fake peer-memory core built as
 * ib_uverbs.ko (Kbuild: FAKE_CORE_EXPORTER=ib_uverbs), as MOFED from 25.04 and the
 * in-box cores have it (docs/abi.md 8): the peer-memory API is ib_uverbs', which
 * depends on ib_core, where the HCA drivers' devices are. This module holds the HCA
 * stand-ins from its load to its unload and hands them out, referenced; ib_uverbs
 * imports that, so the modules load, hold and unload in the real stack's order
 * (ib_core first in, last out; /sys/module/ib_core/holders/ib_uverbs).
 */
#define pr_fmt(fmt) "fake-" KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/pci.h>

#include "fake_pci.h"
#include "internal.h"

static struct pci_dev *hcas[2];

struct pci_dev *fake_rdma_core_hca(int idx)
{
	if (idx < 0 || idx >= ARRAY_SIZE(hcas))
		return NULL;
	return pci_dev_get(hcas[idx]);
}
EXPORT_SYMBOL_GPL(fake_rdma_core_hca);

static int __init fake_rdma_core_init(void)
{
	int i;

	for (i = 0; i < ARRAY_SIZE(hcas); i++)
		hcas[i] = fake_pci_hca(i);
	pr_info("loaded (%s HCA stand-ins)\n", hcas[1] ? "two" : hcas[0] ? "one" : "no");
	return 0;
}

static void __exit fake_rdma_core_exit(void)
{
	int i;

	for (i = 0; i < ARRAY_SIZE(hcas); i++)
		pci_dev_put(hcas[i]);
}

module_init(fake_rdma_core_init);
module_exit(fake_rdma_core_exit);
MODULE_LICENSE("Dual MIT/GPL");
MODULE_DESCRIPTION("Fake RDMA device core under the fake peer-memory core (ib_uverbs) for the peermem test bed");
#ifdef FAKE_CORE_VERSION
MODULE_VERSION(FAKE_CORE_VERSION);
#endif
