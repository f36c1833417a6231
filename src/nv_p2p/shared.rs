// SPDX-License-Identifier: GPL-2.0 OR MIT

//! What a pin's handles, its DMA mappings and the driver's free callback share: the
//! pin's record, its handler, and the guard of a driver call on its table.

use core::mem::ManuallyDrop;

use kernel::{
    new_mutex,
    prelude::*,
    sync::{
        Arc,
        Mutex,
        MutexGuard,
        Refcount, //
    }, //
};

use super::{
    abi::check_page_table,
    state::{
        Phase,
        PinState,
        Raw, //
    },
    NvP2p,
    Owner,
    PinError,
    PutPagesPersistentFn, //
};
use crate::{
    bindings,
    range::GpuRange, //
};

/// Which pin a handler is called for: its range and the process that pinned.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PinIdentity {
    pub(crate) range: GpuRange,
    /// The `mm_struct`'s address (compared, never dereferenced; 0 for a kernel thread).
    pub(crate) mm: usize,
    pub(crate) tgid: i32,
}

/// What a pin's owners keep in its record, told when the last owner lets go of it.
pub(crate) trait PinRecord: Send + Sync + 'static {
    /// Called once, when the last [`GpuPin`] of `pin` is dropped, after the pin was put
    /// (or left to its callback, or found freed by one).
    fn released(&self, _pin: PinIdentity) {}
}

/// The record of a callback pin: also what runs when the owning process frees the
/// pinned memory.
pub(crate) trait FreeHandler: PinRecord {
    /// Called from the driver's free callback of callback pin `pin`, before the page
    /// table and its DMA mappings are freed. It may sleep briefly; it must not wait for
    /// the GPU, and it must not allocate. Every DMA mapping of the pin is dead once
    /// this returns.
    fn on_free(&self, pin: PinIdentity);
}

/// How a pin was made, and so how it is put.
#[derive(Clone, Copy)]
pub(super) enum PinKind {
    /// `get_pages` with a free callback; unpinned with `put_pages`.
    Callback,
    /// The persistent pair; unpinned with the pair's `put`, which it carries (there is
    /// no persistent pin without it).
    Persistent(PutPagesPersistentFn),
    /// `get_pages` with a NULL callback (drivers before 535.14); unpinned with
    /// `put_pages`.
    LegacyPersistent,
}

/// What a pin handle and the driver's callback share.
#[pin_data]
pub(super) struct PinShared<T: PinRecord> {
    /// The driver's functions, shared by every pin (a copy would be 64 bytes a pin).
    pub(super) nv: Arc<NvP2p>,
    pub(super) range: GpuRange,
    pub(super) kind: PinKind,
    /// The process that pinned (the caller of `NvP2p::pin`).
    pub(super) owner: Owner,
    /// How many [`GpuPin`] handles own the pin: the last one dropped unpins. The
    /// `Arc` count is more, with the driver's `data` reference and DMA mappings.
    pub(super) owners: Refcount,
    #[pin]
    pub(super) state: Mutex<PinState>,
    #[pin]
    pub(super) handler: T,
}

impl<T: PinRecord> PinShared<T> {
    pub(super) fn new(
        nv: Arc<NvP2p>,
        range: GpuRange,
        kind: PinKind,
        handler: impl PinInit<T>,
    ) -> impl PinInit<Self> {
        pin_init!(Self {
            nv,
            range,
            kind,
            owner: Owner::current(),
            owners: Refcount::new(1),
            state <- new_mutex!(PinState::new(Phase::Live), "peermem_pin_state"),
            handler <- handler,
        })
    }

    /// The pin's range and owner.
    pub(super) fn identity(&self) -> PinIdentity {
        PinIdentity {
            range: self.range,
            mm: self.owner.mm_addr(),
            tgid: self.owner.tgid,
        }
    }

    /// Takes the table `get_pages` returned, after checking it.
    pub(super) fn adopt_table(
        self: &Arc<Self>,
        table: *mut bindings::nvidia_p2p_page_table,
    ) -> Result<(), PinError> {
        let mut st = self.state.lock();
        if st.phase == Phase::Freed {
            // A callback ran since the driver armed it, maybe before get_pages
            // returned (docs/abi.md 1.4): the table is gone, and not to be read.
            return Err(PinError::Freed);
        }
        // SAFETY: the driver just handed `table` out and cannot free it before a
        // callback, which has not started (phase is `Live`, and callbacks change it
        // under this lock before anything else).
        let check = unsafe { check_page_table(table, self.range.pages()) };
        if let Err(bad) = check {
            st.phase = Phase::Putting;
            drop(st);
            pr_err!(
                "nvidia.ko returned an unusable page table ({:?}); unpinning\n",
                bad
            );
            if !table.is_null() {
                // SAFETY: the table was handed out by this driver for `self.range` with
                // a pin of `self.kind`, and no callback has started.
                unsafe { self.nv.raw_put(self.kind, self.range, table) };
            }
            self.finish_put();
            return Err(PinError::BadAnswer);
        }
        st.table = Raw(table);
        Ok(())
    }

    /// Marks the put done and gives back the driver's reference if it is the last use.
    pub(super) fn finish_put(&self) {
        let data = {
            let mut st = self.state.lock();
            st.phase = Phase::Put;
            st.table = Raw(core::ptr::null_mut());
            st.take_data()
        };
        if let Some(data) = data {
            // SAFETY: the pin's data reference was made of an `Arc<PinShared<T>>`.
            unsafe { data.give_back::<Self>() };
        }
    }

    /// Waits for a change of the state (a call ending, a callback finishing): the lock
    /// is dropped while asleep and held again on return.
    pub(super) fn wait_idle(&self, st: &mut MutexGuard<'_, PinState>) {
        // Counted under the lock, and queued before the lock is dropped: a waker, which
        // holds the lock, sees the count whenever a waiter could miss its wake-up.
        st.waiters += 1;
        self.nv.idle.wait(st);
        st.waiters -= 1;
    }

    /// Wakes the tasks in [`PinShared::wait_idle`], if any (with the state lock held).
    pub(super) fn wake_idle(&self, st: &PinState) {
        if st.waiters > 0 {
            self.nv.idle.notify_all();
        }
    }
}

/// A driver call on a pin's table (a DMA map or unmap), counted in flight while the
/// guard lives: a free callback waits for the count to reach zero before it returns
/// (the driver frees the table then), so the table stays live until the guard goes.
///
/// # Invariants
///
/// `pin`'s `in_flight` counts this guard, and `table` is `pin`'s table.
pub(super) struct DriverCall<'a, T: PinRecord> {
    pin: &'a PinShared<T>,
    table: *mut bindings::nvidia_p2p_page_table,
}

impl<'a, T: PinRecord> DriverCall<'a, T> {
    /// A map call on `pin`'s live table, with room reserved to record its mapping
    /// (`PinState::begin_call`); [`PinError::Freed`] once the pin is freed or put.
    pub(super) fn map(pin: &'a PinShared<T>) -> Result<Self, PinError> {
        let table = pin.state.lock().begin_call()?;
        // INVARIANT: counted in flight by `begin_call`, on the pin's table.
        Ok(DriverCall { pin, table })
    }

    /// An unmap call of `raw` on `pin`'s table (`PinState::begin_unmap`): `None` when
    /// the free callback frees the mapping instead, or `raw` is not recorded.
    pub(super) fn unmap(
        pin: &'a PinShared<T>,
        raw: *mut bindings::nvidia_p2p_dma_mapping,
    ) -> Option<Self> {
        let table = pin.state.lock().begin_unmap(raw)?;
        // INVARIANT: counted in flight by `begin_unmap`, on the pin's table.
        Some(DriverCall { pin, table })
    }

    /// The table, live while the guard lives.
    pub(super) fn table(&self) -> *mut bindings::nvidia_p2p_page_table {
        self.table
    }

    /// Ends the call after `f` ran under the pin's lock, in the same lock round.
    pub(super) fn end_with<R>(self, f: impl FnOnce(&mut PinState) -> R) -> R {
        let this = ManuallyDrop::new(self);
        let mut st = this.pin.state.lock();
        let r = f(&mut st);
        this.pin.end_call(&mut st);
        r
    }
}

impl<T: PinRecord> Drop for DriverCall<'_, T> {
    fn drop(&mut self) {
        let mut st = self.pin.state.lock();
        self.pin.end_call(&mut st);
    }
}

impl<T: PinRecord> PinShared<T> {
    /// Ends a driver call (its guard's end); wakes a callback waiting for calls to
    /// drain.
    fn end_call(&self, st: &mut PinState) {
        st.in_flight -= 1;
        if st.in_flight == 0 {
            self.wake_idle(st);
        }
    }
}
