/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/* Between the fake nvidia.ko and its own KUnit suites (not exported). */
#ifndef PEERMEM_FAKE_NVIDIA_INTERNAL_H
#define PEERMEM_FAKE_NVIDIA_INTERNAL_H

#include <linux/types.h>

/* Whether the calling task holds the driver-wide lock. */
bool fake_nv_driver_lock_held(void);
/* Puts every live pin (after a failed test); returns how many. */
int fake_nv_test_reap(void);

#endif
