// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A persistent pin: one owner and no free callback, so no state to share
//! (docs/pin-state-machine.md, "Persistent pins").

use core::ptr::NonNull;

use kernel::{
    prelude::*,
    sync::Arc, //
};

use super::{
    driver::NvP2p,
    error::{
        check_page_table,
        PinError, //
    },
    pin::PinContext,
};
use crate::{
    bindings,
    glue::driver_result,
    range::Span, //
};

/// A persistent pin of the bytes `span` covers: the driver's table, valid until the pin
/// is dropped (which puts it), whatever the process does with the memory meanwhile.
///
/// It has one owner and no free callback, so nothing else uses or frees the table: no
/// lock, no count of calls in flight, no record of its DMA mappings. Its owner keeps
/// the mappings it makes ([`PersistentPin::dma_map`]) and unmaps them before dropping
/// it.
///
/// # Invariants
///
/// `table` was handed out by `ctx`'s driver for `span.range()` with a pin of kind
/// `ctx.nv().persistent_kind()`, and its header checked; it is put once, when the pin
/// is dropped. The pin is counted by `ctx` ([`PinContext::pinned`]) until then.
pub(crate) struct PersistentPin<C: PinContext> {
    ctx: Arc<C>,
    table: NonNull<bindings::nvidia_p2p_page_table>,
    span: Span,
}

// SAFETY: the table is the driver's, used from any thread by the pin's one owner; the
// context is `Send + Sync`.
unsafe impl<C: PinContext> Send for PersistentPin<C> {}
// SAFETY: `&PersistentPin` only maps and unmaps through the driver, which allows
// concurrent calls on one table.
unsafe impl<C: PinContext> Sync for PersistentPin<C> {}

impl NvP2p {
    /// Pins the range covering `span` for `ctx` persistently: the memory stays
    /// allocated until the pin is dropped, even if the process frees it. Uses the
    /// persistent pair where the driver has it, else `get_pages` with a NULL callback
    /// (drivers before 535.14, docs/abi.md 1.1).
    pub(crate) fn pin_persistent<C: PinContext>(
        ctx: &Arc<C>,
        span: Span,
    ) -> Result<PersistentPin<C>, PinError> {
        let nv = ctx.nv();
        let range = span.range();
        let mut table = core::ptr::null_mut();
        let ret = match nv.persistent {
            // SAFETY: `api.get` is nvidia_p2p_get_pages_persistent (type invariant of
            // `NvP2p`); `table` is a valid out-pointer; flags 0 is the default.
            Some(api) => unsafe { (api.get)(range.start(), range.len(), &mut table, 0) },
            // SAFETY: `get_pages` is nvidia_p2p_get_pages (type invariant); without a
            // callback the driver never uses `data`.
            None => unsafe {
                (nv.get_pages)(
                    0,
                    0,
                    range.start(),
                    range.len(),
                    &mut table,
                    None,
                    core::ptr::null_mut(),
                )
            },
        };
        driver_result(ret).map_err(PinError::Driver)?;
        // SAFETY: the driver just handed `table` out, and nothing else knows it.
        if let Err(bad) = unsafe { check_page_table(table, range.pages()) } {
            pr_err!(
                "nvidia.ko returned an unusable page table ({:?}); unpinning\n",
                bad
            );
            if !table.is_null() {
                // SAFETY: handed out just above for `range` with a pin of this
                // driver's persistent kind, and not used since.
                unsafe { nv.raw_put(nv.persistent_kind(), range, table) };
            }
            return Err(PinError::BadAnswer);
        }
        let table = NonNull::new(table).ok_or(PinError::BadAnswer)?;
        ctx.pinned(range.len());
        // INVARIANT: handed out for `span.range()` with a pin of the driver's
        // persistent kind, checked; counted just above.
        Ok(PersistentPin {
            ctx: ctx.clone(),
            table,
            span,
        })
    }
}

impl<C: PinContext> PersistentPin<C> {
    /// The bytes the pin was made for (it pins the 64 KiB pages covering them).
    pub(crate) fn span(&self) -> Span {
        self.span
    }

    /// The driver the pin was made with.
    pub(super) fn nv(&self) -> &NvP2p {
        self.ctx.nv()
    }

    /// The pin's table, live while the pin is.
    pub(super) fn table(&self) -> *mut bindings::nvidia_p2p_page_table {
        self.table.as_ptr()
    }
}

impl<C: PinContext> Drop for PersistentPin<C> {
    fn drop(&mut self) {
        let range = self.span.range();
        let nv = self.ctx.nv();
        // SAFETY: the table was handed out for `range` with a pin of the driver's
        // persistent kind, and is put once, here (type invariant); its owner unmapped
        // what it mapped.
        unsafe { nv.raw_put(nv.persistent_kind(), range, self.table.as_ptr()) };
        // INVARIANT: put: no longer counted.
        self.ctx.unpinned(range.len());
    }
}
