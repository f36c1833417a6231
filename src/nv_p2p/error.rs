// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Why a pin or a DMA mapping failed, and the check of the header the driver's page
//! tables and DMA mappings share. A leaf: it imports nothing of the crate's but the
//! bindings.

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
pub(super) struct Header {
    /// The structure's version.
    pub(super) version: u32,
    /// Whether this module reads that version of the structure.
    pub(super) version_ok: bool,
    /// The page size (an `nvidia_p2p_page_size_type`).
    pub(super) page_size: u32,
    /// The number of entries.
    pub(super) entries: u32,
    /// Whether the array of entries is null.
    pub(super) no_array: bool,
}

impl Header {
    /// Checks the header of a structure for `pages` pages: a version this module reads,
    /// 64 KiB pages, as many entries as pages, an array of them.
    pub(super) fn check(&self, pages: u64) -> Result<(), BadAnswer> {
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
