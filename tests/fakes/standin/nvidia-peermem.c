// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * A stand-in for NVIDIA's own nvidia-peermem.ko, as a driver package installs it
 * (module nvidia_peermem, in updates/ where dkms puts it). Like NVIDIA's it links to
 * nvidia.ko and to the peer-memory core directly (depmod records both as hard
 * dependencies), and it has a version. It registers nothing: the modprobe run
 * (scripts/test-modprobe) only checks which of the two nvidia_peermem files modprobe
 * loads, and this one says so in dmesg.
 */
#include <linux/module.h>

#include "nv-p2p.h"
#include "peer_mem.h"

/* The symbols NVIDIA's module links against, referenced so that depmod sees them. */
static void *const links[] __used = {
	nvidia_p2p_get_pages,
	ib_register_peer_memory_client,
};

static int __init standin_init(void)
{
	pr_info("nvidia_peermem stand-in loaded (not peermem's drop-in)\n");
	return 0;
}

static void __exit standin_exit(void)
{
}

module_init(standin_init);
module_exit(standin_exit);
MODULE_LICENSE("Dual MIT/GPL");
MODULE_VERSION("0.0-standin");
MODULE_DESCRIPTION("Stand-in for NVIDIA's nvidia-peermem.ko (peermem test bed)");
