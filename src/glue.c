// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The C side of peermem: only what Rust cannot declare.
 *
 * - MODULE_VERSION: /sys/module/<name>/version, which applications read to detect
 *   GPUDirect RDMA (docs/abi.md 4); Rust's module! has no version key.
 * - Weak references to nvidia.ko's and ib_core's exports: the module loads without
 *   them, and its init names what is missing instead of the loader's bare
 *   "Unknown symbol" (docs/architecture.md, "Symbols").
 * - Small helpers for what Rust reaches only through inline C: the PCI function of a
 *   DMA device, SG table allocation and entries, module references.
 * - The module parameters, readable in /sys/module/<name>/parameters/ (the kernel
 *   crate's parameters are not shown in sysfs), validated by the Rust side at init.
 * - Per-reason rate limits for refusal messages (the kernel crate has none).
 * - Test builds only (PEERMEM_KUNIT): the module's own pause points.
 */
#include <linux/dma-mapping.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/ratelimit.h>
#include <linux/scatterlist.h>

#include "peermem_glue.h"

#ifndef PEERMEM_VERSION
#error "PEERMEM_VERSION must be defined by the build (Kbuild reads the VERSION file)"
#endif

MODULE_VERSION(PEERMEM_VERSION);
/*
 * No MODULE_SOFTDEP: kmod ignores a module's modprobe.d install command when the module
 * has soft dependencies, and the install lines keep peermem and nvidia_peermem apart
 * (packaging/modprobe.d). The providers load first anyway: depmod records the weak
 * references below as dependencies on the modules that export them.
 */

const char peermem_version[] = PEERMEM_VERSION;

extern __typeof__(nvidia_p2p_get_pages) nvidia_p2p_get_pages __weak;
extern __typeof__(nvidia_p2p_put_pages) nvidia_p2p_put_pages __weak;
extern __typeof__(nvidia_p2p_free_page_table) nvidia_p2p_free_page_table __weak;
extern __typeof__(nvidia_p2p_dma_map_pages) nvidia_p2p_dma_map_pages __weak;
extern __typeof__(nvidia_p2p_dma_unmap_pages) nvidia_p2p_dma_unmap_pages __weak;
extern __typeof__(nvidia_p2p_free_dma_mapping) nvidia_p2p_free_dma_mapping __weak;
extern __typeof__(nvidia_p2p_get_pages_persistent) nvidia_p2p_get_pages_persistent __weak;
extern __typeof__(nvidia_p2p_put_pages_persistent) nvidia_p2p_put_pages_persistent __weak;
extern __typeof__(ib_register_peer_memory_client) ib_register_peer_memory_client __weak;
extern __typeof__(ib_unregister_peer_memory_client) ib_unregister_peer_memory_client __weak;

void peermem_resolve_symbols(struct peermem_symbols *syms)
{
	syms->nv_get_pages = nvidia_p2p_get_pages;
	syms->nv_put_pages = nvidia_p2p_put_pages;
	syms->nv_free_page_table = nvidia_p2p_free_page_table;
	syms->nv_dma_map_pages = nvidia_p2p_dma_map_pages;
	syms->nv_dma_unmap_pages = nvidia_p2p_dma_unmap_pages;
	syms->nv_free_dma_mapping = nvidia_p2p_free_dma_mapping;
	syms->nv_get_pages_persistent = nvidia_p2p_get_pages_persistent;
	syms->nv_put_pages_persistent = nvidia_p2p_put_pages_persistent;
	syms->ib_register_client = ib_register_peer_memory_client;
	syms->ib_unregister_client = ib_unregister_peer_memory_client;
}

static int persistent_api_support = 1;
module_param(persistent_api_support, int, 0444);
MODULE_PARM_DESC(persistent_api_support,
		 "1: persistent pins (default); 0: pins with a free callback (legacy)");

static int peerdirect_support;
module_param(peerdirect_support, int, 0444);
MODULE_PARM_DESC(peerdirect_support,
		 "1: register nv_mem as a plain invalidating client (MLNX_OFED 4.9 LTS)");

void peermem_get_params(struct peermem_params *params)
{
	params->persistent_api_support = persistent_api_support;
	params->peerdirect_support = peerdirect_support;
}

static struct ratelimit_state peermem_limits[PEERMEM_RATELIMITS] = {
	[0 ... PEERMEM_RATELIMITS - 1] = RATELIMIT_STATE_INIT(peermem_limits, 5 * HZ, 10),
};

int peermem_ratelimit(unsigned int which)
{
	if (which >= PEERMEM_RATELIMITS)
		which = PEERMEM_RATELIMITS - 1;
	return __ratelimit(&peermem_limits[which]);
}

unsigned int peermem_pci_max_seg_size(struct pci_dev *pdev)
{
	return dma_get_max_seg_size(&pdev->dev);
}

int peermem_sg_alloc(struct sg_table *sgt, unsigned int n)
{
	int ret = sg_alloc_table(sgt, n, GFP_KERNEL);

	if (ret)
		return ret;
	sgt->nents = n;
	return 0;
}

struct scatterlist *peermem_sg_set(struct scatterlist *sg, u64 dma, u32 len)
{
	/* Peer memory has no struct page: only the DMA side is meaningful. */
	sg_set_page(sg, NULL, len, 0);
	sg_dma_address(sg) = dma;
	sg_dma_len(sg) = len;
	return sg_next(sg);
}

unsigned int peermem_sg_count(struct scatterlist *sgl)
{
	return sg_nents(sgl);
}

void peermem_sg_free(struct scatterlist *sgl)
{
	/* sg_alloc_table marked the end after the n entries it made: the table is whole. */
	unsigned int n = sg_nents(sgl);
	struct sg_table sgt = { .sgl = sgl, .nents = n, .orig_nents = n };

	sg_free_table(&sgt);
}

void peermem_module_get(void)
{
	__module_get(THIS_MODULE);
}

void peermem_module_put(void)
{
	module_put(THIS_MODULE);
}

#ifdef PEERMEM_KUNIT
/*
 * Test builds only (PEERMEM_KUNIT, the test bed's scripts/build-modules): pause points
 * inside peermem, kept in the fake nvidia.ko's table of points
 * (tests/fakes/include/fake_nvidia.h) so that the client suites arm, wait for and
 * release them like the driver's. A weak reference: over another nvidia.ko the point
 * is a no-op. A production build has neither the reference nor the calls.
 */
#include "fake_nvidia.h"

extern __typeof__(fake_nv_client_pause) fake_nv_client_pause __weak;

void peermem_test_pause_before_link(void);
void peermem_test_pause_before_link(void)
{
	if (fake_nv_client_pause)
		fake_nv_client_pause(FAKE_NV_PAUSE_CLIENT_BEFORE_LINK);
}
#endif
