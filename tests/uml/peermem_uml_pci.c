// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The test bed's PCI functions under User-Mode Linux: built into the UML kernel
 * (scripts/build-kernel uml, which copies this file into arch/um/drivers/), never
 * into a module of the project.
 *
 * UML has no PCI bus of its own; arch/um/drivers/virt-pci.c gives it one whose
 * functions answer config space and BAR accesses through a struct um_pci_ops. This
 * file registers the three functions QEMU's command line gives the dev VM
 * (docs/testing.md, "The UML run"), under the IDs of the hardware they stand for:
 *
 *   00.0  GPU  10de:2330 (an H100), class 0302, BAR 1: 256 MiB of 32-bit memory,
 *              the GPU's BAR1 stand-in (QEMU: ivshmem's BAR 2). UML's PCI memory
 *              window is 256 MiB (0xf0000000-0xffffffff), so the BAR fills it.
 *   01.0  HCA  15b3:1021 (a ConnectX-7), class 0207, no BAR
 *   02.0  HCA  15b3:1021, the peer the client suites leave at a 32-bit DMA mask
 *
 * The functions have config space and nothing else: no capability, no interrupt,
 * no MMIO register. Nothing of the test bed touches the GPU BAR with the CPU (the
 * fakes hand its bus addresses to dma_map_resource); a read answers all ones, as a
 * BAR with nothing decoding behind it does, and a write is dropped.
 */
#include <linux/init.h>
#include <linux/kernel.h>
#include <linux/pci.h>
#include <linux/sizes.h>
#include <linux/string.h>

#include "virt-pci.h"

struct tb_function {
	struct um_pci_device dev;
	u16 vendor, device;
	u32 class_rev;		/* class code << 8 | revision */
	int bar;		/* the one memory BAR, or -1 */
	u32 bar_size;
	u32 bar_value;		/* what the kernel last wrote to it */
	u16 command;
};

static struct tb_function tb_functions[] = {
	{ .vendor = 0x10de, .device = 0x2330, .class_rev = 0x030200a1, .bar = 1,
	  .bar_size = SZ_256M },
	{ .vendor = 0x15b3, .device = 0x1021, .class_rev = 0x02070000, .bar = -1 },
	{ .vendor = 0x15b3, .device = 0x1021, .class_rev = 0x02070000, .bar = -1 },
};

static struct tb_function *tb_of(struct um_pci_device *dev)
{
	return container_of(dev, struct tb_function, dev);
}

/* The 32-bit dword of config space at @reg (dword aligned). */
static u32 tb_cfg_dword(struct tb_function *f, unsigned int reg)
{
	switch (reg) {
	case PCI_VENDOR_ID:
		return f->vendor | (u32)f->device << 16;
	case PCI_COMMAND:
		return f->command;	/* status 0: no capability list */
	case PCI_CLASS_REVISION:
		return f->class_rev;
	case PCI_CACHE_LINE_SIZE:
		return 0;		/* header type 0, single function */
	case PCI_SUBSYSTEM_VENDOR_ID:
		return f->vendor | (u32)f->device << 16;
	}
	if (reg >= PCI_BASE_ADDRESS_0 && reg <= PCI_BASE_ADDRESS_5 &&
	    f->bar == (reg - PCI_BASE_ADDRESS_0) / 4)
		/* 32-bit, non-prefetchable memory: the size in the bits that stick. */
		return f->bar_value & ~(f->bar_size - 1);
	return 0;
}

static unsigned long tb_cfgspace_read(struct um_pci_device *dev, unsigned int offset, int size)
{
	u64 v = tb_cfg_dword(tb_of(dev), offset & ~3u);

	if (size == 8)
		v |= (u64)tb_cfg_dword(tb_of(dev), (offset & ~3u) + 4) << 32;
	v >>= 8 * (offset & 3);
	return size == 8 ? v : v & GENMASK_ULL(8 * size - 1, 0);
}

static void tb_cfgspace_write(struct um_pci_device *dev, unsigned int offset, int size,
			      unsigned long val)
{
	struct tb_function *f = tb_of(dev);

	if (offset == PCI_COMMAND && size >= 2)
		f->command = val & (PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
	else if (size == 4 && f->bar >= 0 && offset == PCI_BASE_ADDRESS_0 + 4 * f->bar)
		f->bar_value = val;
}

static unsigned long tb_bar_read(struct um_pci_device *dev, int bar, unsigned int offset,
				 int size)
{
	return size == 8 ? ULONG_MAX : GENMASK_ULL(8 * size - 1, 0);
}

static void tb_bar_write(struct um_pci_device *dev, int bar, unsigned int offset, int size,
			 unsigned long val)
{
}

static void tb_bar_copy_from(struct um_pci_device *dev, int bar, void *buffer,
			     unsigned int offset, int size)
{
	memset(buffer, 0xff, size);
}

static void tb_bar_copy_to(struct um_pci_device *dev, int bar, unsigned int offset,
			   const void *buffer, int size)
{
}

static void tb_bar_set(struct um_pci_device *dev, int bar, unsigned int offset, u8 value,
		       int size)
{
}

static const struct um_pci_ops tb_ops = {
	.cfgspace_read = tb_cfgspace_read,
	.cfgspace_write = tb_cfgspace_write,
	.bar_read = tb_bar_read,
	.bar_write = tb_bar_write,
	.bar_copy_from = tb_bar_copy_from,
	.bar_copy_to = tb_bar_copy_to,
	.bar_set = tb_bar_set,
};

/* After virt-pci's host bridge (a device_initcall), before init runs. */
static int __init tb_pci_init(void)
{
	int i, err;

	for (i = 0; i < ARRAY_SIZE(tb_functions); i++) {
		tb_functions[i].dev.ops = &tb_ops;
		err = um_pci_device_register(&tb_functions[i].dev);
		if (err) {
			pr_err("peermem test bed: PCI function %d not registered: %d\n", i, err);
			return err;
		}
	}
	pr_info("peermem test bed: GPU 10de:2330 (BAR 1, 256 MiB) and two HCAs 15b3:1021\n");
	return 0;
}
late_initcall(tb_pci_init);
