// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * peermem_leak_selftest: a leak planted for the kmemleak self-test of `make
 * test-debug` (tests/qemu/plans/kmemleak.sh, check planted_leaks_reported). It shows
 * that the debug VM's kmemleak really reports a module's unreferenced memory, so that
 * the plan's "nothing leaked" checks can fail.
 *
 * At load it allocates PLANTED_LEAKED objects and keeps their addresses only
 * complemented (~address, which points nowhere: kmemleak sees no reference, the
 * objects are leaks), and PLANTED_KEPT objects whose addresses it keeps as they are
 * (referenced from this module's data: never reported).
 *
 * The objects are kmalloc()'d, of six sizes, as peermem's own objects are (KBox,
 * Arc, KVec). kmemleak finds such leaks only on a kernel booted with slab_debug
 * (scripts/test-debug boots with slab_debug=FZ): a kmalloc cache otherwise keeps the
 * addresses of objects it handed out in its per-CPU sheaves (arrays of free objects,
 * themselves kmalloc'd and scanned; a slot is not cleared when its object is
 * allocated), and those stale copies hide most fresh leaks until the slots are
 * reused (seen: 3 to 6 of these 32 reported). A debugging cache has no sheaves
 * (mm/slub.c). With it, and the decoys below, all 32 are reported in the runs seen;
 * the self-test demands 28 (a conservative scanner may still meet a stale copy of
 * an address somewhere), far above what a blinded detector finds.
 *
 * It prints both sets complemented ("leaked ~ADDR" / "kept ~ADDR"): a pointer handed
 * to printk would leave copies on the stack, and a stale copy on a task stack is a
 * reference to a conservative scanner (vmap stacks are ordinary kmemleak objects,
 * scanned with stack=off too, and an exited task's stack is cached with its
 * contents). For the same reason every address is complemented as soon as it is
 * returned, and the part of the stack that the allocations used is cleared before
 * init returns: once insmod exits, its stack is cached for a later task with its
 * contents, and scanned.
 *
 * At unload it frees both sets: the plan's later "nothing leaked" checks start clean.
 */
#include <linux/init.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/string.h>

#define PLANTED_LEAKED 32
#define PLANTED_KEPT 8
/* Per size: taken first, so that no planted object reuses a recently freed slot. */
#define DECOYS 64
#define SIZES 6

/* Sizes from 32 to 1024 bytes: SIZES kmalloc caches. */
static size_t planted_size(unsigned int i)
{
	return 32UL << (i % SIZES);
}

/* ~address of each leaked object: no pointer to it anywhere kmemleak scans. */
static unsigned long hidden[PLANTED_LEAKED];
/* The kept objects: real pointers in this module's .bss, scanned by kmemleak. */
static void *kept[PLANTED_KEPT];
/*
 * Objects that only drain each cache's most recently freed slots: a long-lived
 * structure may still hold the address of an object it freed (harmless to it, but a
 * reference to kmemleak), and a planted object reusing that slot would go unseen.
 * Seen: 3 of the 6 planted 64-byte objects hidden so, at insmod time. Real pointers.
 */
static void *decoys[DECOYS * SIZES];

/*
 * Allocates both sets; returns how many leaked objects were planted. The address of
 * a leaked object lives only in a register between its allocation and its complement.
 */
static noinline unsigned int plant(void)
{
	unsigned int i, n = 0;

	for (i = 0; i < DECOYS * SIZES; i++) {
		decoys[i] = kzalloc(planted_size(i), GFP_KERNEL);
		if (!decoys[i])
			return 0;
	}
	for (i = 0; i < PLANTED_KEPT; i++) {
		kept[i] = kzalloc(planted_size(i), GFP_KERNEL);
		if (!kept[i])
			return 0;
	}
	for (i = 0; i < PLANTED_LEAKED; i++) {
		unsigned long p = (unsigned long)kzalloc(planted_size(i), GFP_KERNEL);

		if (!p)
			break;
		WRITE_ONCE(hidden[i], ~p);
		n++;
	}
	return n;
}

/*
 * Overwrites SCRUB_FRAMES KiB of the stack below the caller's frame, where plant()
 * and the allocator ran. That is where an interrupt that came in between a
 * kzalloc() and the complement saved its registers, the address among them (under
 * TCG: seen 3 of 32 objects hidden so). One KiB per frame keeps each under
 * FRAME_WARN; the recursion is bounded and not a tail call (the pad is used after).
 */
#define SCRUB_FRAMES 12

static noinline void scrub_stack(unsigned int frames)
{
	char pad[1024];

	memzero_explicit(pad, sizeof(pad));
	if (frames > 1)
		scrub_stack(frames - 1);
	barrier_data(pad);
}

static void release(void)
{
	unsigned int i;

	/* kfree(NULL) does nothing: unplanted slots hold ~NULL, or NULL. */
	for (i = 0; i < PLANTED_LEAKED; i++) {
		kfree((void *)~READ_ONCE(hidden[i]));
		WRITE_ONCE(hidden[i], ~0UL);
	}
	for (i = 0; i < PLANTED_KEPT; i++) {
		kfree(kept[i]);
		kept[i] = NULL;
	}
	for (i = 0; i < DECOYS * SIZES; i++) {
		kfree(decoys[i]);
		decoys[i] = NULL;
	}
}

static int __init leak_selftest_init(void)
{
	unsigned int i, n;

	for (i = 0; i < PLANTED_LEAKED; i++)
		hidden[i] = ~0UL;
	n = plant();
	scrub_stack(SCRUB_FRAMES);
	if (n < PLANTED_LEAKED) {
		release();
		pr_err("peermem_leak_selftest: out of memory after %u objects\n", n);
		return -ENOMEM;
	}
	for (i = 0; i < PLANTED_LEAKED; i++)
		pr_info("peermem_leak_selftest: leaked ~%lx\n", READ_ONCE(hidden[i]));
	for (i = 0; i < PLANTED_KEPT; i++)
		pr_info("peermem_leak_selftest: kept ~%lx\n", ~(unsigned long)kept[i]);
	return 0;
}

static void __exit leak_selftest_exit(void)
{
	release();
}

module_init(leak_selftest_init);
module_exit(leak_selftest_exit);
MODULE_DESCRIPTION("peermem test bed: a planted leak for the kmemleak self-test");
MODULE_LICENSE("Dual MIT/GPL");
