/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The test bed's PCI functions, as the doubles find them: in the QEMU VM, QEMU's
 * devices (scripts/qemu-run); under User-Mode Linux, the functions the UML kernel
 * registers itself (tests/uml/peermem_uml_pci.c), under the IDs of the hardware
 * they stand for. docs/testing.md, "The UML run".
 *
 *   GPU (its BAR1 stand-in)   QEMU: ivshmem 1af4:1110, BAR 2
 *                             UML:  10de:2330 (an H100), BAR 1
 *   HCA, then the 32-bit peer QEMU: two pci-testdev 1b36:0005
 *                             UML:  two 15b3:1021 (ConnectX-7)
 */
#ifndef FAKE_PCI_H
#define FAKE_PCI_H

#include <linux/pci.h>

/* The idx-th HCA stand-in (0: the HCA, 1: the peer kept at 32 bits), referenced
 * (pci_dev_put); NULL if absent. */
static inline struct pci_dev *fake_pci_hca(int idx)
{
	static const struct pci_device_id ids[] = {
		{ PCI_DEVICE(0x1b36, 0x0005) },
		{ PCI_DEVICE(0x15b3, 0x1021) },
	};
	struct pci_dev *d;
	int i, n;

	for (i = 0; i < ARRAY_SIZE(ids); i++) {
		d = NULL;
		for (n = 0; (d = pci_get_device(ids[i].vendor, ids[i].device, d)); n++)
			if (n == idx)
				return d;
	}
	return NULL;
}

/* The GPU's BAR1 stand-in: the function, referenced (pci_dev_put), and in @bar the
 * index of its BAR; NULL if absent. */
static inline struct pci_dev *fake_pci_gpu(int *bar)
{
	struct pci_dev *d = pci_get_device(0x1af4, 0x1110, NULL);

	if (d) {
		*bar = 2;
		return d;
	}
	*bar = 1;
	return pci_get_device(0x10de, 0x2330, NULL);
}

#endif /* FAKE_PCI_H */
