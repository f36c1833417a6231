/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Base types for peermem's ABI headers.
 *
 * In the kernel (src/glue.c) they come from <linux/types.h>. For bindgen
 * (PEERMEM_BINDGEN, scripts/gen-bindings) they are spelled as the C types the
 * x86_64 LP64 kernel uses, so that the generated Rust uses the kernel crate's
 * C types (kernel::ffi) and nothing is regenerated from kernel headers.
 */
#ifndef PEERMEM_TYPES_H
#define PEERMEM_TYPES_H

#ifdef PEERMEM_BINDGEN
#define u8 unsigned char
#define u32 unsigned int
#define u64 unsigned long long
#define size_t unsigned long
#else
#include <linux/types.h>
#endif

/* Kernel types the ABI passes by pointer only; Rust takes them from kernel::bindings. */
struct device;
struct pci_dev;
struct sg_table;
struct scatterlist;

#endif /* PEERMEM_TYPES_H */
