// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The core's `sg_table` of a region, and the SG lists peermem installs in it.

use core::ptr::NonNull;

use kernel::{
    prelude::*,
    sync::atomic::{
        Atomic,
        Relaxed, //
    }, //
};

use crate::{
    bindings,
    compat,
    foreign::driver_result, //
};

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

    /// Hands `list`'s entries to the core: its table describes them from now on.
    pub(crate) fn install(&mut self, list: &SgList) {
        // SAFETY: `ptr` is the core's live table (type invariant); the core expects it
        // filled with DMA-mapped entries once dma_map returns 0.
        unsafe { self.ptr.as_ptr().write(list.table) };
    }

    /// Empties the core's table if it still describes `list` (it does not once the
    /// core zeroed it after an invalidation, abi.md 2.5).
    pub(crate) fn uninstall(&mut self, list: &SgList) {
        // SAFETY: `ptr` is the core's live table (type invariant).
        let t = unsafe { &mut *self.ptr.as_ptr() };
        if t.sgl == list.table.sgl {
            t.sgl = core::ptr::null_mut();
            t.nents = 0;
            t.orig_nents = 0;
        }
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

/// How many [`SgList`]s are live: the `sg_lists_now` counter.
static LIVE: Atomic<u64> = Atomic::new(0);

/// An SG list this module built for the core: its own record of what it allocated.
///
/// The core is handed a copy of the table header ([`SgHead::install`]) and may zero
/// its copy (it does after an invalidation); the entries are freed from this record.
///
/// # Invariants
///
/// `table` was allocated by `peermem_sg_alloc` and is freed only by `Drop`. `LIVE`
/// counts every `SgList`.
pub(crate) struct SgList {
    table: bindings::sg_table,
}

// SAFETY: the list is owned memory, freed once, from any thread.
unsafe impl Send for SgList {}
// SAFETY: `&SgList` only reads the header.
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
        driver_result(ret).map_err(|_| SgError::NoMemory)?;
        LIVE.fetch_add(1, Relaxed);
        // INVARIANT: allocated by `peermem_sg_alloc` just above, and counted.
        let list = SgList { table };
        let mut sg = list.table.sgl;
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

    /// How many SG lists are live (built and not yet dropped).
    pub(crate) fn live() -> u64 {
        LIVE.load(Relaxed)
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> u32 {
        self.table.nents
    }
}

impl Drop for SgList {
    fn drop(&mut self) {
        // SAFETY: `table` was allocated by `peermem_sg_alloc` and is freed only here
        // (type invariant).
        unsafe { bindings::peermem_sg_free(&mut self.table) };
        // INVARIANT: the list is gone.
        compat::fetch_sub(&LIVE, 1, Relaxed);
    }
}

/// Turns the core's `sg_head` into an [`SgHead`]; `None` if null.
pub(super) fn sg(ptr: *mut bindings::sg_table) -> Option<SgHead> {
    // INVARIANT: the core passes the region's own table, alive until release.
    NonNull::new(ptr).map(|ptr| SgHead { ptr })
}
