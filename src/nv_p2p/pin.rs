// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A GPU pin: how it is made, its handle, and the put by its last owner
//! (docs/pin-state-machine.md). Its shared record and phases are in `state`, the free
//! callback in `callback`, its DMA mappings in `mapping`.

use kernel::{
    ffi::c_void,
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc, //
    }, //
};

use super::{
    callback::free_callback,
    shared::{
        FreeHandler,
        PinContext,
        PinIdentity,
        PinRecord,
        PinShared, //
    },
    state::PinKind,
    NvP2p,
    PinError,
    ORPHAN_RATELIMIT, //
};
use crate::{
    bindings,
    compat,
    foreign::driver_result,
    range::GpuRange, //
};

impl NvP2p {
    /// Pins `range` for `ctx` with a free callback: `handler` runs if the owning process
    /// frees the memory before the pin is dropped. Must run in the owning process.
    pub(crate) fn pin<T: FreeHandler>(
        ctx: &Arc<T::Context>,
        range: GpuRange,
        handler: impl PinInit<T>,
    ) -> Result<GpuPin<T>, PinError> {
        let shared = Arc::pin_init(
            PinShared::new(ctx.clone(), range, PinKind::Callback, handler),
            GFP_KERNEL,
        )
        .map_err(|_| PinError::NoMemory)?;
        let get = ctx.nv().get_pages;
        // The driver's reference to `shared`, handed over as the callback's `data`:
        // kept in the pin's state before the callback can run (even before get_pages
        // returns), given back by whichever of put and callback ends last.
        let ptr = Arc::as_ptr(&shared).cast_mut().cast::<c_void>();
        shared.state.lock().hand_data(shared.clone());
        let mut table = core::ptr::null_mut();
        // SAFETY: `get` is nvidia_p2p_get_pages (type invariant). Tokens are 0 (abi.md
        // 1.1); `table` is a valid out-pointer; `ptr` stays valid until the driver can
        // no longer call `free_callback::<T>` with it: the state keeps the reference
        // until then (`PinState::finish_put`, `PinState::end_callback`).
        let ret = unsafe {
            get(
                0,
                0,
                range.start(),
                range.len(),
                &mut table,
                Some(free_callback::<T>),
                ptr,
            )
        };
        if let Err(e) = driver_result(ret) {
            // The driver kept no reference: take back its `data` reference (after the
            // lock).
            let data = shared.state.lock().data_back();
            drop(data);
            return Err(PinError::Driver(e));
        }
        shared.adopt_table(table)?;
        Ok(GpuPin::counted(shared))
    }

    /// Pins `range` for `ctx` persistently: the memory stays allocated until the pin is
    /// dropped, even if the process frees it. Uses the persistent pair where the driver
    /// has it, else `get_pages` with a NULL callback (drivers before 535.14, docs/abi.md
    /// 1.1). There is no free callback: `handler` is only kept in the record.
    pub(crate) fn pin_persistent<T: PinRecord>(
        ctx: &Arc<T::Context>,
        range: GpuRange,
        handler: impl PinInit<T>,
    ) -> Result<GpuPin<T>, PinError> {
        let nv = ctx.nv();
        let (kind, ret, table) = {
            let mut table = core::ptr::null_mut();
            if let Some(api) = nv.persistent {
                // SAFETY: `api.get` is nvidia_p2p_get_pages_persistent (type invariant);
                // `table` is a valid out-pointer; flags 0 is the default.
                let ret = unsafe { (api.get)(range.start(), range.len(), &mut table, 0) };
                (PinKind::Persistent, ret, table)
            } else {
                let get = nv.get_pages;
                // SAFETY: `get` is nvidia_p2p_get_pages (type invariant); without a
                // callback the driver never uses `data`.
                let ret = unsafe {
                    get(
                        0,
                        0,
                        range.start(),
                        range.len(),
                        &mut table,
                        None,
                        core::ptr::null_mut(),
                    )
                };
                (PinKind::LegacyPersistent, ret, table)
            }
        };
        driver_result(ret).map_err(PinError::Driver)?;
        let init = PinShared::new(ctx.clone(), range, kind, handler);
        let shared = match Arc::pin_init(init, GFP_KERNEL) {
            Ok(s) => s,
            Err(_) => {
                // SAFETY: `table` was just handed out for `range` by the call above and
                // nothing else refers to it.
                unsafe { nv.raw_put(kind, range, table) };
                return Err(PinError::NoMemory);
            }
        };
        shared.adopt_table(table)?;
        Ok(GpuPin::counted(shared))
    }

    /// Unpins `table` with the put function of its kind.
    ///
    /// # Safety
    ///
    /// `table` was handed out by this driver for `range` with a pin of `kind`, and was
    /// neither put nor torn down by a free callback.
    pub(super) unsafe fn raw_put(
        &self,
        kind: PinKind,
        range: GpuRange,
        table: *mut bindings::nvidia_p2p_page_table,
    ) {
        let ret = match kind {
            // A persistent pin is only made with the pair (`pin_persistent`), which the
            // driver table keeps: never `None` here.
            PinKind::Persistent => match self.persistent {
                // SAFETY: `table` is a live persistent pin of `range` (the caller's
                // guarantee), made by this driver's pair, whose `put` this is; flags
                // must be 0.
                Some(api) => unsafe { (api.put)(range.start(), table, 0) },
                None => EINVAL.to_errno(),
            },
            PinKind::Callback | PinKind::LegacyPersistent => {
                // SAFETY: `table` is a live pin of `range` made by get_pages (the
                // caller's guarantee); tokens are 0 as at get_pages.
                unsafe { (self.put_pages)(0, 0, range.start(), table) }
            }
        };
        if let Err(e) = driver_result(ret) {
            pr_warn!(
                "nvidia_p2p_put_pages of {:#x}+{:#x} failed: {:?}\n",
                range.start(),
                range.len(),
                e
            );
        }
    }
}

/// The pins made, those alive now (made and not yet let go of by their last owner),
/// the bytes they pin, and the peak of those bytes: counted by [`GpuPin`].
static PINS_MADE: Atomic<u64> = Atomic::new(0);
static PINS_NOW: Atomic<u64> = Atomic::new(0);
static BYTES_NOW: Atomic<u64> = Atomic::new(0);
static BYTES_PEAK: Atomic<u64> = Atomic::new(0);

/// A pinned range of GPU memory, owned by every clone of the handle.
///
/// Dropping the last clone unpins, unless a free callback already tore the pin down.
///
/// # Invariants
///
/// `shared.owners` counts the live handles of `shared`, this one included. A pin is
/// counted in `PINS_NOW` and `BYTES_NOW` from when it is made until its last handle is
/// dropped.
pub(crate) struct GpuPin<T: PinRecord> {
    pub(super) shared: Arc<PinShared<T>>,
}

/// The pin counters of this module: what the `stats` file shows of its pins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PinCounts {
    /// Pins made (one nvidia.ko pin each).
    pub(crate) made: u64,
    /// Pins alive now.
    pub(crate) now: u64,
    /// Bytes they pin now, and the peak of those.
    pub(crate) bytes_now: u64,
    pub(crate) bytes_peak: u64,
}

impl PinCounts {
    /// The counters now.
    pub(crate) fn read() -> Self {
        PinCounts {
            made: PINS_MADE.load(Relaxed),
            now: PINS_NOW.load(Relaxed),
            bytes_now: BYTES_NOW.load(Relaxed),
            bytes_peak: BYTES_PEAK.load(Relaxed),
        }
    }
}

impl<T: PinRecord> Clone for GpuPin<T> {
    fn clone(&self) -> Self {
        // The caller's handle keeps the pin owned meanwhile: never from zero.
        self.shared.owners.inc();
        // INVARIANT: counted above.
        GpuPin {
            shared: self.shared.clone(),
        }
    }
}

impl<T: PinRecord> GpuPin<T> {
    /// The first handle of a pin just made (its record counts one owner), counted.
    fn counted(shared: Arc<PinShared<T>>) -> Self {
        let bytes = shared.range.len();
        PINS_MADE.fetch_add(1, Relaxed);
        PINS_NOW.fetch_add(1, Relaxed);
        let now = BYTES_NOW.fetch_add(bytes, Relaxed) + bytes;
        let mut peak = BYTES_PEAK.load(Relaxed);
        while now > peak {
            match BYTES_PEAK.cmpxchg(peak, now, Relaxed) {
                Ok(_) => break,
                Err(seen) => peak = seen,
            }
        }
        // INVARIANT: one owner, this handle; counted above.
        GpuPin { shared }
    }

    /// The pinned range.
    pub(crate) fn range(&self) -> GpuRange {
        self.shared.range
    }

    /// The handler given at pin time.
    pub(crate) fn handler(&self) -> &T {
        &self.shared.handler
    }

    /// Whether a free callback has started: the memory is gone.
    pub(crate) fn is_freed(&self) -> bool {
        self.shared.state.lock().is_freed()
    }

    /// The pin's range and the process that pinned. The pin holds that process's
    /// `mm_struct` (mmgrab), so no other process gets its address while the pin lives.
    pub(crate) fn identity(&self) -> PinIdentity {
        self.shared.identity()
    }

    /// Unpins, as the last owner: puts the pin, or leaves it to its callback.
    fn put_last(&self) {
        let s = &self.shared;
        s.unmap_left();
        let (table, kind) = {
            let mut st = s.state.lock();
            if st.is_freed() {
                // The driver tore the pin down. A callback still running elsewhere may
                // use what the owner is about to free: wait for it, unless this is that
                // very callback dropping the last reference.
                while st.callback_elsewhere() {
                    s.wait_idle(&mut st);
                }
                return;
            }
            if st.kind() == PinKind::Callback && !s.owned_by_current() {
                // Outside the owning process nvidia.ko would not find the pin and
                // answer 0, keeping it and its callback (abi.md 1.4b). Leave it to
                // that callback: the driver keeps its `data` reference, and the module
                // stays loaded until the callback has run.
                if !st.orphan() {
                    return;
                }
                drop(st);
                if crate::glue::ratelimit(ORPHAN_RATELIMIT) {
                    pr_info!(
                        "GPU pin {:#x}+{:#x} released outside its process (tgid {}): it stays until that process frees the memory or exits\n",
                        s.range.start(),
                        s.range.len(),
                        s.space().tgid
                    );
                }
                return;
            }
            if !st.start_put() {
                return;
            }
            // Owners drop their DMA mappings before the pin (the driver wants every
            // mapping gone before put_pages); wait for unmaps still in flight.
            while st.busy() {
                s.wait_idle(&mut st);
            }
            (st.table_to_put(), st.kind())
        };
        // SAFETY: the table is a live pin of `s.range` of kind `kind`: the phase was
        // `Live` and is now `Putting`, so no callback started before and none will use
        // the table after put_pages returns.
        unsafe { s.nv().raw_put(kind, s.range, table) };
        s.finish_put();
    }
}

impl<T: PinRecord> Drop for GpuPin<T> {
    fn drop(&mut self) {
        // Release, and acquire for the last (`refcount_dec_and_test`), as an `Arc`'s
        // count: the last owner sees everything the others did with the pin.
        if !self.shared.owners.dec_and_test() {
            return;
        }
        self.put_last();
        // INVARIANT: the last handle is gone: so is the pin's count.
        compat::fetch_sub(&PINS_NOW, 1, Relaxed);
        compat::fetch_sub(&BYTES_NOW, self.shared.range.len(), Relaxed);
    }
}
