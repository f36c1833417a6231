// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The fake nvidia.ko's device node, /dev/fake-nvidia-gpu (its ABI:
 * tests/fakes/include/fake_nvidia_uapi.h): GPU memory that a real userspace process
 * owns, for the RDMA chain (docs/testing.md, "The RDMA chain"), where perftest and
 * the project's test program register it through soft-RoCE, a peer-memory core and
 * peermem. The KUnit suites' fake processes (fake_nv_proc_create) are kernel
 * threads; this is the same driver seen from a process of its own.
 *
 * What it stands for:
 * - an open file is the process's CUDA context: one per address space (a second
 *   open, by any thread, shares it), owned by the opener's address space and thread
 *   group, the identity nvidia_p2p_get_pages checks (docs/abi.md 1.4b). Its last
 *   close, at process exit included, is the context's teardown: every allocation
 *   still live is freed, the free callbacks of its callback pins run (docs/abi.md
 *   1.4), persistent pins keep theirs (docs/abi.md 1.1);
 * - mmap is cuMemAlloc at the mapping's address: the GPU VA is the CPU VA, as with
 *   CUDA's unified addressing (UVA), so that the application hands ibv_reg_mr the
 *   pointer it reads and writes. The mapping is VM_IO | VM_PFNMAP, which ordinary
 *   pinning (GUP) refuses, as it refuses a real GPU mapping: a registration reaches
 *   the peer path;
 * - FAKE_NV_IOC_FREE is cudaFree: the driver's free path (fake_nv_free), callbacks
 *   included, in the caller's task.
 *
 * Deviations from a GPU:
 * - the memory is RAM, not BAR memory: zeroed 64 KiB chunks, each physically
 *   contiguous (the bed's GPU pages). Soft-RoCE copies into it through the struct
 *   pages behind the DMA addresses that nvidia_p2p_dma_map_pages hands out (without
 *   an IOMMU, the physical addresses), and a BAR has no struct pages;
 * - the CPU view of a freed allocation stays until munmap (on a GPU the VA is gone
 *   at cudaFree), so that a test can check that no byte landed in freed memory. The
 *   pages then belong to nothing else: each vma holds a reference on the RAM, which
 *   is freed once the allocation is destroyed (freed and unpinned) and the last vma
 *   mapping it is gone;
 * - a process that inherits the file (fork) or receives it shares the context but
 *   does not own it: it may ask FAKE_NV_IOC_INFO, not map or free. The context lives
 *   until the last of them closes it.
 *
 * Locks: node_lock (the list of contexts) is taken before drv_lock (open creates the
 * context's process), never under it. mmap and get_unmapped_area run under the mm's
 * mmap_lock, held for writing by the mm core; mmap takes drv_lock inside it, briefly,
 * to check and make the allocation, and never runs the free path there. The order is
 * mmap_lock before drv_lock: nothing under drv_lock may take an mmap_lock or fault on
 * user memory, so the ioctls copy from and to user memory with no lock held and then
 * take drv_lock alone (FREE runs the callbacks in the caller's task). release takes
 * node_lock, drops it, then takes drv_lock (the teardown, callbacks included). vm
 * open/close take no lock. release never reads current->mm: at process exit it runs
 * from task work, after exit_mm.
 */
#define pr_fmt(fmt) "fake-nvidia: " fmt

#include <linux/module.h>
#include <linux/kernel.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/mman.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/uaccess.h>

#include "fake_nvidia.h"
#include "fake_nvidia_uapi.h"
#include "fake_nvidia_internal.h"

#define NODE_PAGE	SZ_64K

static_assert(FAKE_NV_GPU_PAGE == SZ_64K);
/* The same layout for 32-bit processes: compat_ptr_ioctl passes it through as is. */
static_assert(sizeof(struct fake_nv_gpu_info) == 40);
static_assert(offsetof(struct fake_nv_gpu_info, pins) == 32);

/* A CUDA context: the open files of one address space. */
struct node_ctx {
	struct kref ref;		/* open files (struct file) on it */
	struct fake_nv_proc *proc;	/* the driver's process (allocations, owner) */
	struct mm_struct *mm;		/* the owner's address space: identity only (the
					 * proc's mm_count reference keeps it from reuse) */
	struct list_head link;		/* ctxs */
	spinlock_t stale_lock;
	struct list_head stale;		/* RAM of mmaps that failed half-way */
};

static DEFINE_MUTEX(node_lock);		/* ctxs, and the lookup-or-create of open */
static LIST_HEAD(ctxs);

static int node_open(struct inode *inode, struct file *f)
{
	struct mm_struct *mm = current->mm;
	struct node_ctx *ctx;
	int ret = 0;

	if (!mm)
		return -EINVAL;	/* a kernel thread has no address space for a context */
	mutex_lock(&node_lock);
	list_for_each_entry(ctx, &ctxs, link) {
		if (ctx->mm == mm) {
			kref_get(&ctx->ref);
			goto out;
		}
	}
	ctx = kzalloc_obj(*ctx, GFP_KERNEL);
	if (!ctx) {
		ret = -ENOMEM;
		goto out;
	}
	ctx->proc = fake_nv_node_proc_create(mm);
	if (!ctx->proc) {
		kfree(ctx);
		ret = -ENOMEM;
		goto out;
	}
	kref_init(&ctx->ref);
	ctx->mm = mm;
	spin_lock_init(&ctx->stale_lock);
	INIT_LIST_HEAD(&ctx->stale);
	list_add_tail(&ctx->link, &ctxs);
out:
	mutex_unlock(&node_lock);
	if (!ret)
		f->private_data = ctx;
	return ret;
}

/* kref_put_mutex's release: called with node_lock held, drops it. */
static void ctx_release(struct kref *ref)
	__releases(&node_lock)
{
	struct node_ctx *ctx = container_of(ref, struct node_ctx, ref);
	struct fnv_ram *ram, *tmp;

	list_del(&ctx->link);
	mutex_unlock(&node_lock);
	/*
	 * The context's teardown: every allocation still live is freed as by cudaFree,
	 * under the driver lock, callbacks included; then the mm_count reference goes.
	 * No vma maps the node any more (each holds the file), so the RAM of freed
	 * allocations goes with them, unless persistent pins keep it.
	 */
	fake_nv_proc_exit(ctx->proc);
	/* A failed mmap's mapping was undone when that mmap returned, long before. */
	list_for_each_entry_safe(ram, tmp, &ctx->stale, stale) {
		list_del(&ram->stale);
		fnv_ram_put(ram);
	}
	kfree(ctx);
}

static int node_release(struct inode *inode, struct file *f)
{
	struct node_ctx *ctx = f->private_data;

	kref_put_mutex(&ctx->ref, ctx_release, &node_lock);
	return 0;
}

/*
 * A vma's reference on the RAM it maps. open runs for the copy a vma move makes
 * (mremap, refused below, then undone); fork copies nothing (VM_DONTCOPY) and
 * nothing splits the vma (may_split).
 */
static void node_vm_open(struct vm_area_struct *vma)
{
	fnv_ram_get(vma->vm_private_data);
}

static void node_vm_close(struct vm_area_struct *vma)
{
	fnv_ram_put(vma->vm_private_data);
}

/* An allocation's CPU view is whole: no partial munmap or mprotect. */
static int node_vm_may_split(struct vm_area_struct *vma, unsigned long addr)
{
	return -EINVAL;
}

/* The GPU VA is the CPU VA: the view cannot move (mremap undoes the move). */
static int node_vm_mremap(struct vm_area_struct *vma)
{
	return -EINVAL;
}

static const struct vm_operations_struct node_vm_ops = {
	.open = node_vm_open,
	.close = node_vm_close,
	.may_split = node_vm_may_split,
	.mremap = node_vm_mremap,
};

/*
 * cuMemAlloc of round_up(len, 64 KiB) bytes at the mapping's address, mapped there.
 * Shared mappings only: a private one would copy written pages on write (and
 * remap_pfn_range refuses a private writable vma it does not cover whole).
 *
 * The memory is mapped first and made an allocation last, so that nothing can pin
 * it before the mapping is whole and a failure never runs the free path (callbacks,
 * under the mmap_lock). The vma holds the initial reference on the RAM; the
 * allocation takes its own.
 */
static int node_mmap(struct file *f, struct vm_area_struct *vma)
{
	struct node_ctx *ctx = f->private_data;
	unsigned long len = vma->vm_end - vma->vm_start, off;
	u64 size = round_up((u64)len, NODE_PAGE);
	struct fnv_ram *ram;
	u32 i;
	int ret;

	if (current->mm != ctx->mm || vma->vm_pgoff ||
	    !IS_ALIGNED(vma->vm_start, NODE_PAGE) || !(vma->vm_flags & VM_MAYSHARE))
		return -EINVAL;
	/* Exact: this mm's mmap_lock, held, serialises the context's allocations. */
	if (fake_nv_node_va_busy(ctx->proc, vma->vm_start, size))
		return -EBUSY;
	ram = fake_nv_node_ram_alloc(size);
	if (!ram)
		return -ENOMEM;
	vm_flags_set(vma, VM_IO | VM_PFNMAP | VM_DONTEXPAND | VM_DONTDUMP | VM_DONTCOPY);
	vma->vm_ops = &node_vm_ops;
	vma->vm_private_data = ram;
	/* RAM: the vma's own (cacheable) protection. The last chunk may be mapped in part. */
	for (i = 0, off = 0; off < len; i++, off += NODE_PAGE) {
		ret = remap_pfn_range(vma, vma->vm_start + off, page_to_pfn(ram->chunk[i]),
				      min_t(unsigned long, len - off, NODE_PAGE),
				      vma->vm_page_prot);
		if (ret)
			goto fail;
	}
	ret = fake_nv_node_alloc(ctx->proc, vma->vm_start, ram);
	if (ret)
		goto fail;
	return 0;

fail:
	/*
	 * The mm core undoes the chunks mapped so far once this returns, and does not
	 * call close: until then the pages must stay. The vma's reference is kept to the
	 * context's last close.
	 */
	spin_lock(&ctx->stale_lock);
	list_add_tail(&ram->stale, &ctx->stale);
	spin_unlock(&ctx->stale_lock);
	return ret;
}

/*
 * A 64 KiB-aligned address for a mapping of @len bytes (a GPU page is aligned in the
 * GPU VA space): the hint where it is aligned and free, else the start of a free
 * range of @len + 64 KiB, rounded up. A fixed address is the caller's (mmap refuses
 * it unaligned). The mm core has checked that @len is at most TASK_SIZE, so that
 * @len + 64 KiB does not overflow.
 */
static unsigned long node_get_unmapped_area(struct file *f, unsigned long addr,
					    unsigned long len, unsigned long pgoff,
					    unsigned long flags)
{
	unsigned long ret;

	if (flags & MAP_FIXED)
		return addr;
	if (addr && IS_ALIGNED(addr, NODE_PAGE)) {
		ret = mm_get_unmapped_area(NULL, addr, len, 0, flags);
		if (!IS_ERR_VALUE(ret) && IS_ALIGNED(ret, NODE_PAGE))
			return ret;
	}
	ret = mm_get_unmapped_area(NULL, 0, len + NODE_PAGE, 0, flags);
	if (IS_ERR_VALUE(ret))
		return ret;
	return ALIGN(ret, NODE_PAGE);
}

static long node_ioctl(struct file *f, unsigned int cmd, unsigned long arg)
{
	struct node_ctx *ctx = f->private_data;
	void __user *uarg = (void __user *)arg;
	struct fake_nv_gpu_info info;
	u64 va;
	int ret;

	switch (cmd) {
	case FAKE_NV_IOC_FREE:
		if (copy_from_user(&va, uarg, sizeof(va)))
			return -EFAULT;
		/* cudaFree from another process cannot name this context's memory. */
		if (current->mm != ctx->mm)
			return -EINVAL;
		return fake_nv_free(ctx->proc, va);	/* 0 or -ENOENT */
	case FAKE_NV_IOC_INFO:
		if (copy_from_user(&info, uarg, sizeof(info)))
			return -EFAULT;
		ret = fake_nv_node_info(ctx->proc, &info);
		if (ret)
			return ret;
		if (copy_to_user(uarg, &info, sizeof(info)))
			return -EFAULT;
		return 0;
	default:
		return -ENOTTY;
	}
}

static const struct file_operations node_fops = {
	.owner = THIS_MODULE,	/* an open file holds the module */
	.open = node_open,
	.release = node_release,
	.mmap = node_mmap,
	.get_unmapped_area = node_get_unmapped_area,
	.unlocked_ioctl = node_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.llseek = noop_llseek,
};

static struct miscdevice node_dev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "fake-nvidia-gpu",	/* FAKE_NV_GPU_NODE */
	.fops = &node_fops,
	.mode = 0666,		/* any test program, as /dev/nvidia* are */
};
static bool node_registered;

int fake_nv_node_init(void)
{
	int ret = misc_register(&node_dev);

	if (ret == -ENOMEM)
		return ret;
	if (ret) {
		/* The driver works without it; only the RDMA chain needs the node. */
		pr_info("no device node %s (misc_register: %d)\n", FAKE_NV_GPU_NODE, ret);
		return 0;
	}
	node_registered = true;
	pr_info("device node %s\n", FAKE_NV_GPU_NODE);
	return 0;
}

void fake_nv_node_exit(void)
{
	if (node_registered)
		misc_deregister(&node_dev);
	node_registered = false;
}
