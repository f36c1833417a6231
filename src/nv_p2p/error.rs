// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Why a pin or a DMA mapping failed, and the checks of the driver's answers: the
//! versions of its page tables and DMA mappings this module reads, and the header both
//! share. A leaf: it imports nothing of the crate's but the bindings.

use kernel::prelude::*;

use crate::bindings;

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
    /// A null page array, or null DMA addresses.
    NullArray,
}

/// The fields a page table and a DMA mapping both have, as the driver filled them in.
#[derive(Clone, Copy)]
struct Header {
    /// The structure's version.
    version: u32,
    /// Whether this module reads that version of the structure.
    version_ok: bool,
    /// The page size (an `nvidia_p2p_page_size_type`).
    page_size: u32,
    /// The number of entries.
    entries: u32,
    /// Whether the array of entries is null.
    no_array: bool,
}

impl Header {
    /// Checks the header of a structure for `pages` pages: a version this module reads,
    /// 64 KiB pages, as many entries as pages, an array of them.
    fn check(&self, pages: u64) -> Result<(), BadAnswer> {
        let Header {
            version,
            version_ok,
            page_size,
            entries,
            no_array,
        } = *self;
        if !version_ok {
            return Err(BadAnswer::Version(version));
        }
        if page_size != bindings::nvidia_p2p_page_size_type_NVIDIA_P2P_PAGE_SIZE_64KB {
            return Err(BadAnswer::PageSize(page_size));
        }
        if u64::from(entries) != pages {
            return Err(BadAnswer::Entries(entries));
        }
        if no_array {
            return Err(BadAnswer::NullArray);
        }
        Ok(())
    }
}

/// Page-table versions this module reads: majors 1 (minor >= 2) and 2 (docs/abi.md 1.2).
/// The fields read (version, page_size, pages, entries) sit at the same offsets in
/// both.
pub(super) const fn page_table_version_ok(version: u32) -> bool {
    let (major, minor) = (version >> 16, version & 0xffff);
    // Major 2 started at minor 0 (0x00020000): every minor of it is readable.
    match major {
        1 => minor >= (bindings::NVIDIA_P2P_PAGE_TABLE_VERSION_R515 & 0xffff),
        2 => true,
        _ => false,
    }
}

/// Checks a page table the driver returned for a pin of `pages` pages: its header. Its
/// page entries are not read (the DMA addresses come from the driver's DMA mapping,
/// which `dma_addresses` checks), so nothing walks them.
///
/// # Safety
///
/// `table` is null or points to a page table the driver handed out and has not freed,
/// for the duration of the call.
pub(super) unsafe fn check_page_table(
    table: *const bindings::nvidia_p2p_page_table,
    pages: u64,
) -> Result<(), BadAnswer> {
    // SAFETY: `table` is null or valid for reads during the call (the caller's
    // guarantee); only fields whose offsets agree between majors 1 and 2 are read.
    unsafe {
        checked(table, pages, |t| Header {
            version: t.version,
            version_ok: page_table_version_ok(t.version),
            page_size: t.page_size,
            entries: t.entries,
            no_array: t.pages.is_null(),
        })
    }
    .map(|_| ())
}

/// DMA-mapping versions this module reads: major 2, minor >= 3 (docs/abi.md 1.2).
pub(super) const fn dma_mapping_version_ok(version: u32) -> bool {
    let built = bindings::NVIDIA_P2P_DMA_MAPPING_VERSION;
    version >> 16 == built >> 16 && (version & 0xffff) >= (built & 0xffff)
}

/// Checks a DMA mapping of a table of `pages` pages; its addresses, read in place.
///
/// # Safety
///
/// `mapping` is null or points to a DMA mapping the driver handed out, which it neither
/// frees nor changes during `'a`.
pub(super) unsafe fn dma_addresses<'a>(
    mapping: *const bindings::nvidia_p2p_dma_mapping,
    pages: u64,
) -> Result<&'a [u64], BadAnswer> {
    // SAFETY: `mapping` is null or valid for reads during `'a` (the caller's guarantee).
    let m = unsafe {
        checked(mapping, pages, |m| Header {
            version: m.version,
            version_ok: dma_mapping_version_ok(m.version),
            page_size: m.page_size_type,
            entries: m.entries,
            no_array: m.dma_addresses.is_null(),
        })
    }?;
    // SAFETY: `dma_addresses` points to `entries` addresses (the driver's contract),
    // which stay as they are during `'a` (the caller's guarantee).
    Ok(unsafe { core::slice::from_raw_parts(m.dma_addresses, m.entries as usize) })
}

/// The structure at `p`, which the driver handed out for `pages` pages, if it is not
/// null and its header, as `header` reads it, checks.
///
/// # Safety
///
/// `p` is null or valid for reads during `'a`.
unsafe fn checked<'a, T>(
    p: *const T,
    pages: u64,
    header: impl FnOnce(&T) -> Header,
) -> Result<&'a T, BadAnswer> {
    // SAFETY: null or valid for reads during `'a` (the caller's guarantee).
    let s = unsafe { p.as_ref() }.ok_or(BadAnswer::Null)?;
    header(s).check(pages)?;
    Ok(s)
}

/// Why a pin, or a DMA mapping of one, failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PinError {
    /// nvidia.ko refused, with this errno (a pin's `ENOMEM`: BAR1 exhausted; its
    /// `EINVAL`: not this process's GPU memory).
    Driver(Error),
    /// nvidia.ko answered with a page table or DMA mapping this module cannot read (it
    /// was given back).
    BadAnswer,
    /// A free callback tore the pin down before it was taken over, or before the
    /// mapping was.
    Freed,
    /// This module could not allocate its own state for the pin or the mapping.
    NoMemory,
}

impl From<PinError> for Error {
    fn from(e: PinError) -> Error {
        match e {
            PinError::Driver(e) => e,
            PinError::BadAnswer => EIO,
            PinError::Freed => EFAULT,
            PinError::NoMemory => ENOMEM,
        }
    }
}
