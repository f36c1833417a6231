// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * A stand-in for NVIDIA's own nvidia-peermem.ko, as a driver package installs it
 * (module nvidia_peermem, in updates/ where dkms puts it). Like NVIDIA's it links to
 * nvidia.ko and to the peer-memory core directly (depmod records both as hard
 * dependencies), and it has a version (the driver's, in NVIDIA's packages). It
 * registers nothing: the modprobe run (scripts/test-modprobe) and the host part
 * (packaging/test-host.sh) only check which nvidia_peermem file modprobe loads, and
 * this one says so in dmesg. Built without the peer-memory symbols (STANDIN_NO_CORE,
 * as NVIDIA's Kbuild builds it where it finds no MOFED tree under /usr/src/ofa_kernel),
 * it refuses to load with -EINVAL, as NVIDIA's does then.
 */
#include <linux/module.h>

#include "nv-p2p.h"
#include "peer_mem.h"

#ifndef STANDIN_VERSION
#define STANDIN_VERSION "0.0-standin"
#endif

/* The symbols NVIDIA's module links against, referenced so that depmod sees them. */
static void *const links[] __used = {
	nvidia_p2p_get_pages,
#ifndef STANDIN_NO_CORE
	ib_register_peer_memory_client,
#endif
};

static int __init standin_init(void)
{
#ifdef STANDIN_NO_CORE
	return -EINVAL;
#else
	pr_info("nvidia_peermem stand-in loaded (not peermem's drop-in)\n");
	return 0;
#endif
}

static void __exit standin_exit(void)
{
}

module_init(standin_init);
module_exit(standin_exit);
MODULE_LICENSE("Dual MIT/GPL");
MODULE_VERSION(STANDIN_VERSION);
MODULE_DESCRIPTION("Stand-in for NVIDIA's nvidia-peermem.ko (peermem test bed)");
