// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The core's `sg_table` of a region, and the SG lists peermem installs in it.

use core::ptr::NonNull;

use kernel::prelude::*;

use crate::bindings;

/// The core's `sg_table` of one region.
///
/// # Invariants
///
/// `ptr` points to the `sg_table` the core handed to `dma_map` for a region; the core
/// keeps it alive until the region's `release`. Holders use it only before then.
pub(crate) struct SgHead {
    ptr: NonNull<bindings::sg_table>,
}

// SAFETY: the table is plain memory of the core's region; `SgHead` only writes it
// through `&mut self`, from whichever thread the core calls in.
unsafe impl Send for SgHead {}

impl SgHead {
    /// Whether this is the table at `ptr` (the core passes it again at unmap).
    pub(crate) fn is(&self, other: &SgHead) -> bool {
        self.ptr == other.ptr
    }
}

/// An SG list installed in the core's table of a region: the table describes the list's
/// entries until the guard is dropped, which empties the table (if it still describes
/// the list: the core zeroes it after an invalidation, abi.md 2.5) and frees the list.
pub(crate) struct InstalledSg {
    head: SgHead,
    list: SgList,
}

impl InstalledSg {
    /// Hands `list`'s entries to the core's table `head`; with the number of entries.
    pub(crate) fn install(head: SgHead, list: SgList) -> (Self, u32) {
        let n = list.len();
        // SAFETY: `head.ptr` is the core's live table (type invariant of `SgHead`); the
        // core expects it filled with DMA-mapped entries once dma_map returns 0.
        unsafe {
            head.ptr.as_ptr().write(bindings::sg_table {
                sgl: list.sgl.as_ptr(),
                nents: n,
                orig_nents: n,
            })
        };
        (InstalledSg { head, list }, n)
    }

    /// Whether the list is installed in the table `head`.
    pub(crate) fn is_in(&self, head: &SgHead) -> bool {
        self.head.is(head)
    }
}

impl Drop for InstalledSg {
    fn drop(&mut self) {
        // SAFETY: `head.ptr` is the core's live table (type invariant of `SgHead`): the
        // guard is dropped at the latest at the region's release.
        let t = unsafe { &mut *self.head.ptr.as_ptr() };
        if t.sgl == self.list.sgl.as_ptr() {
            t.sgl = core::ptr::null_mut();
            t.nents = 0;
            t.orig_nents = 0;
        }
        // `list` is freed after: the core's table no longer names it.
    }
}

/// Why an SG list could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SgError {
    /// No entries, more than a table holds, or fewer than counted.
    Entries,
    /// No memory for the table.
    NoMemory,
}

/// An SG list this module built for the core: one pointer, its own record of what it
/// allocated (the entries count to their end mark).
///
/// The core is handed its entries ([`InstalledSg::install`]) and may zero its table (it
/// does after an invalidation); the entries are freed from this record.
///
/// # Invariants
///
/// `sgl` is the first entry of a list allocated by `peermem_sg_alloc`, freed only by
/// `Drop`.
pub(crate) struct SgList {
    sgl: NonNull<bindings::scatterlist>,
}

// SAFETY: the list is owned memory, freed once, from any thread.
unsafe impl Send for SgList {}
// SAFETY: `&SgList` only reads the entries.
unsafe impl Sync for SgList {}

impl SgList {
    /// Builds DMA-mapped entries `(address, length)` in a table sized once (one
    /// allocation up to a page of entries, `sg_alloc_table` chains more): `entries` is
    /// walked twice, to count and to fill, and must yield the same both times.
    pub(crate) fn new(entries: impl Iterator<Item = (u64, u32)> + Clone) -> Result<Self, SgError> {
        let n = u32::try_from(entries.clone().count()).map_err(|_| SgError::Entries)?;
        if n == 0 {
            return Err(SgError::Entries);
        }
        // SAFETY: an all-zero `sg_table` is the empty table.
        let mut table: bindings::sg_table = unsafe { core::mem::zeroed() };
        // SAFETY: `table` is a valid, empty table. On failure (`sg_alloc_table`'s
        // ENOMEM) the glue leaves nothing allocated.
        let ret = unsafe { bindings::peermem_sg_alloc(&mut table, n) };
        if ret != 0 {
            return Err(SgError::NoMemory);
        }
        let sgl = NonNull::new(table.sgl).ok_or(SgError::NoMemory)?;
        // INVARIANT: allocated by `peermem_sg_alloc` just above.
        let list = SgList { sgl };
        let mut sg = list.sgl.as_ptr();
        for (addr, len) in entries.take(n as usize) {
            if sg.is_null() {
                // Fewer entries than counted: `list` frees what was allocated.
                return Err(SgError::Entries);
            }
            // SAFETY: `sg` is an entry of the `n` entries of `list` (the first one, then
            // each `peermem_sg_set` returned the next), not yet handed to anyone.
            sg = unsafe { bindings::peermem_sg_set(sg, addr, len) };
        }
        Ok(list)
    }

    /// The number of entries, counted to the list's end mark (`sg_nents`): one per
    /// contiguous DMA range it was built from.
    pub(crate) fn len(&self) -> u32 {
        // SAFETY: `sgl` is a live list of this module's (type invariant).
        unsafe { bindings::peermem_sg_count(self.sgl.as_ptr()) }
    }
}

impl Drop for SgList {
    fn drop(&mut self) {
        // SAFETY: `sgl` was allocated by `peermem_sg_alloc` and is freed only here
        // (type invariant).
        unsafe { bindings::peermem_sg_free(self.sgl.as_ptr()) };
    }
}

/// Turns the core's `sg_head` into an [`SgHead`]; `None` if null.
pub(super) fn sg(ptr: *mut bindings::sg_table) -> Option<SgHead> {
    // INVARIANT: the core passes the region's own table, alive until release.
    NonNull::new(ptr).map(|ptr| SgHead { ptr })
}
