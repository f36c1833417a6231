// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The driver's structure versions, and checks of what it hands out (docs/abi.md 1.2,
//! 1.3).

use kernel::prelude::*;

use crate::bindings;

/// Page-table versions this module reads: majors 1 (minor >= 2) and 2 (docs/abi.md 1.2).
/// The fields read (version, page_size, pages, entries) sit at the same offsets in
/// both.
pub(crate) const fn page_table_version_ok(version: u32) -> bool {
    let (major, minor) = (version >> 16, version & 0xffff);
    // Major 2 started at minor 0 (0x00020000): every minor of it is readable.
    match major {
        1 => minor >= (bindings::NVIDIA_P2P_PAGE_TABLE_VERSION_R515 & 0xffff),
        2 => true,
        _ => false,
    }
}

/// DMA-mapping versions this module reads: major 2, minor >= 3 (docs/abi.md 1.2).
pub(crate) const fn dma_mapping_version_ok(version: u32) -> bool {
    let built = bindings::NVIDIA_P2P_DMA_MAPPING_VERSION;
    version >> 16 == built >> 16 && (version & 0xffff) >= (built & 0xffff)
}

/// Why the driver's answer could not be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BadAnswer {
    /// Success, but no structure.
    Null,
    /// A structure version this module does not read.
    Version(u32),
    /// A page size other than 64 KiB.
    PageSize(u32),
    /// Another number of entries than pages asked for.
    Entries(u32),
    /// A null page array or entry, or null DMA addresses.
    NullEntry,
}

/// Checks a page table the driver returned for a pin of `pages` pages.
///
/// # Safety
///
/// `table` is null or points to a page table the driver handed out and has not freed,
/// for the duration of the call.
pub(crate) unsafe fn check_page_table(
    table: *const bindings::nvidia_p2p_page_table,
    pages: u64,
) -> Result<(), BadAnswer> {
    if table.is_null() {
        return Err(BadAnswer::Null);
    }
    // SAFETY: `table` is valid for reads (the caller's guarantee); only fields whose
    // offsets agree between majors 1 and 2 are read.
    let t = unsafe { &*table };
    if !page_table_version_ok(t.version) {
        return Err(BadAnswer::Version(t.version));
    }
    if t.page_size != bindings::nvidia_p2p_page_size_type_NVIDIA_P2P_PAGE_SIZE_64KB {
        return Err(BadAnswer::PageSize(t.page_size));
    }
    if u64::from(t.entries) != pages {
        return Err(BadAnswer::Entries(t.entries));
    }
    if t.pages.is_null() {
        return Err(BadAnswer::NullEntry);
    }
    for i in 0..t.entries as usize {
        // SAFETY: `pages` points to `entries` page pointers (the driver's contract).
        if unsafe { *t.pages.add(i) }.is_null() {
            return Err(BadAnswer::NullEntry);
        }
    }
    Ok(())
}

/// Checks a DMA mapping of a table of `pages` pages; its addresses, read in place.
///
/// # Safety
///
/// `mapping` is null or points to a DMA mapping the driver handed out, which it neither
/// frees nor changes during `'a`.
pub(crate) unsafe fn dma_addresses<'a>(
    mapping: *const bindings::nvidia_p2p_dma_mapping,
    pages: u64,
) -> Result<&'a [u64], BadAnswer> {
    if mapping.is_null() {
        return Err(BadAnswer::Null);
    }
    // SAFETY: `mapping` is valid for reads (the caller's guarantee).
    let m = unsafe { &*mapping };
    if !dma_mapping_version_ok(m.version) {
        return Err(BadAnswer::Version(m.version));
    }
    if m.page_size_type != bindings::nvidia_p2p_page_size_type_NVIDIA_P2P_PAGE_SIZE_64KB {
        return Err(BadAnswer::PageSize(m.page_size_type));
    }
    if u64::from(m.entries) != pages {
        return Err(BadAnswer::Entries(m.entries));
    }
    if m.dma_addresses.is_null() {
        return Err(BadAnswer::NullEntry);
    }
    // SAFETY: `dma_addresses` points to `entries` addresses (the driver's contract),
    // which stay as they are during `'a` (the caller's guarantee).
    Ok(unsafe { core::slice::from_raw_parts(m.dma_addresses, m.entries as usize) })
}
