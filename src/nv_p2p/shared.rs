// SPDX-License-Identifier: GPL-2.0 OR MIT

//! What a pin's handles, its DMA mappings and the driver's free callback share: the
//! pin's record, its handler, and the guard of a driver call on its table.

use core::mem::ManuallyDrop;

use kernel::{
    mm::Mm,
    new_spinlock,
    prelude::*,
    sync::{
        aref::ARef,
        atomic::Relaxed,
        Arc,
        Refcount,
        SpinLock,
        SpinLockGuard, //
    }, //
};

use super::{
    abi::check_page_table,
    state::{
        PinKind,
        PinState, //
    },
    NvP2p,
    PinError,
    SpaceId, //
};
use crate::{
    bindings,
    compat,
    foreign::driver_result,
    range::GpuRange, //
};

/// Which pin a handler is called for: its range and the address space that pinned.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PinIdentity {
    pub(crate) range: GpuRange,
    pub(crate) space: SpaceId,
}

/// Who pins: what every pin of theirs refers to, the driver its pins are made with
/// included (one reference a pin, shared with the record's own needs).
pub(crate) trait PinContext: Send + Sync + 'static {
    /// The driver the pins are made with.
    fn nv(&self) -> &NvP2p;
}

impl PinContext for NvP2p {
    fn nv(&self) -> &NvP2p {
        self
    }
}

/// What a pin's owners keep in its record.
pub(crate) trait PinRecord: Send + Sync + 'static {
    /// Who pins: the record's pin refers to it.
    type Context: PinContext;
}

/// The record of a callback pin: also what runs when the owning process frees the
/// pinned memory.
pub(crate) trait FreeHandler: PinRecord {
    /// Called from the driver's free callback of callback pin `pin`, made by `ctx`,
    /// before the page table and its DMA mappings are freed. It may sleep briefly; it
    /// must not wait for the GPU, and it must not allocate. Every DMA mapping of the pin
    /// is dead once this returns.
    fn on_free(&self, ctx: &Self::Context, pin: PinIdentity);
}

/// What a pin handle and the driver's callback share: the pin's record (named outside
/// this module only for its size).
#[pin_data]
pub(crate) struct PinShared<T: PinRecord> {
    /// Who pinned: the driver's functions and wait queue are reached through it (one
    /// reference a pin, which the record's handler shares).
    pub(super) ctx: Arc<T::Context>,
    pub(super) range: GpuRange,
    /// The process that pinned (the caller of `NvP2p::pin`): its `mm_struct` (`None`
    /// for a kernel thread), held (mmgrab) so that its address is not handed to another
    /// process while the pin lives, and its thread-group id, the identity nvidia.ko
    /// looks callback pins up by.
    mm: Option<ARef<Mm>>,
    tgid: i32,
    /// How many [`GpuPin`] handles own the pin: the last one dropped unpins. The
    /// `Arc` count is more, with the driver's `data` reference and DMA mappings.
    pub(super) owners: Refcount,
    /// A spinlock: nothing sleeps under it but the waits for the pin to go idle, which
    /// drop it (driver calls and frees are made outside it).
    #[pin]
    pub(super) state: SpinLock<PinState<Self>>,
    #[pin]
    pub(super) handler: T,
}

impl<T: PinRecord> PinShared<T> {
    pub(super) fn new(
        ctx: Arc<T::Context>,
        range: GpuRange,
        kind: PinKind,
        handler: impl PinInit<T>,
    ) -> impl PinInit<Self> {
        let (mm, tgid) = {
            let task = kernel::current!();
            (
                task.mm().map(|mm| ARef::<Mm>::from(&**mm)),
                crate::compat::tgid(task),
            )
        };
        pin_init!(Self {
            ctx,
            range,
            mm,
            tgid,
            owners: Refcount::new(1),
            state <- new_spinlock!(PinState::new(kind), "peermem_pin_state"),
            handler <- handler,
        })
    }

    /// The driver the pin was made with.
    pub(super) fn nv(&self) -> &NvP2p {
        self.ctx.nv()
    }

    /// The address space that pinned (its mm address 0 for a kernel thread).
    pub(super) fn space(&self) -> SpaceId {
        SpaceId {
            mm: self.mm.as_ref().map_or(0, |mm| mm.as_raw() as usize),
            tgid: self.tgid,
        }
    }

    /// Whether the calling process is the one that pinned.
    pub(super) fn owned_by_current(&self) -> bool {
        SpaceId::current() == Some(self.space())
    }

    /// The pin's range and owner.
    pub(super) fn identity(&self) -> PinIdentity {
        PinIdentity {
            range: self.range,
            space: self.space(),
        }
    }

    /// Takes the table `get_pages` returned, after checking it.
    pub(super) fn adopt_table(
        self: &Arc<Self>,
        table: *mut bindings::nvidia_p2p_page_table,
    ) -> Result<(), PinError> {
        let mut st = self.state.lock();
        if st.is_freed() {
            // A callback ran since the driver armed it, maybe before get_pages
            // returned (docs/abi.md 1.4): the table is gone, and not to be read.
            return Err(PinError::Freed);
        }
        // SAFETY: the driver just handed `table` out and cannot free it before a
        // callback, which has not started (the pin is not freed, and callbacks mark it
        // so under this lock before anything else).
        let check = unsafe { check_page_table(table, self.range.pages()) };
        if let Err(bad) = check {
            st.start_put();
            let kind = st.kind();
            drop(st);
            pr_err!(
                "nvidia.ko returned an unusable page table ({:?}); unpinning\n",
                bad
            );
            if !table.is_null() {
                // SAFETY: the table was handed out by this driver for `self.range` with
                // a pin of `kind`, and no callback has started.
                unsafe { self.nv().raw_put(kind, self.range, table) };
            }
            self.finish_put();
            return Err(PinError::BadAnswer);
        }
        st.adopt(table)
    }

    /// Marks the put done, and gives the driver's reference back if it is the last use
    /// (after the lock: it may be the record's last reference).
    pub(super) fn finish_put(&self) {
        let data = self.state.lock().finish_put();
        drop(data);
    }

    /// Waits for a change of the state (a call ending, a callback finishing): the lock
    /// is dropped while asleep and held again on return.
    pub(super) fn wait_idle(&self, st: &mut SpinLockGuard<'_, PinState<Self>>) {
        let nv = self.nv();
        // Counted under the pin's lock, and queued before the lock is dropped: a waker
        // of this pin, which holds the lock, sees the count whenever a waiter could
        // miss its wake-up (waiters of other pins only cost it a wake-up more).
        nv.idle_waiters.fetch_add(1, Relaxed);
        nv.idle.wait(st);
        compat::fetch_sub(&nv.idle_waiters, 1, Relaxed);
    }

    /// Wakes the tasks in [`PinShared::wait_idle`], if any (with the state lock held,
    /// which `_st` proves).
    pub(super) fn wake_idle(&self, _st: &PinState<Self>) {
        let nv = self.nv();
        if nv.idle_waiters.load(Relaxed) > 0 {
            nv.idle.notify_all();
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
    pub(super) fn end_with<R>(self, f: impl FnOnce(&mut PinState<PinShared<T>>) -> R) -> R {
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
    /// Unmaps `raw` unless a callback took over its freeing (then the callback frees it)
    /// or the pin does not record it; whether it did.
    pub(super) fn unmap(&self, raw: *mut bindings::nvidia_p2p_dma_mapping) -> bool {
        let Some(call) = DriverCall::unmap(self, raw) else {
            // The callback frees it (it may be this very thread, nested in it).
            return false;
        };
        // SAFETY: `raw` is a live mapping of the pin's table (recorded by the pin, and
        // taken out of its record by `call`): its `pci_dev` is the peer it was made for
        // (docs/abi.md 1.1), which outlives it (the core unmaps before its device goes).
        let peer = unsafe { (*raw).pci_dev };
        // SAFETY: `dma_unmap_pages` is nvidia_p2p_dma_unmap_pages (type invariant of
        // `NvP2p`); `raw` is a live mapping of the table for `peer`, forgotten by the pin
        // so nobody else frees it; the table stays live while `call` is counted in
        // flight.
        let ret = unsafe { (self.nv().dma_unmap_pages)(peer, call.table(), raw) };
        if let Err(e) = driver_result(ret) {
            pr_warn!("nvidia_p2p_dma_unmap_pages failed: {:?}\n", e);
        }
        drop(call);
        true
    }

    /// Unmaps every mapping still recorded, as the last owner (no map starts any more):
    /// the driver wants them gone before the put. None is left in this module's use
    /// (each registration unmaps its own), unless a free callback frees them.
    pub(super) fn unmap_left(&self) {
        loop {
            // The guard goes with this statement: `unmap` locks again.
            let left = self.state.lock().mapping_left();
            match left {
                Some(raw) if self.unmap(raw) => {}
                _ => return,
            }
        }
    }

    /// Ends a driver call (its guard's end); wakes a callback waiting for calls to
    /// drain.
    fn end_call(&self, st: &mut PinState<Self>) {
        if st.end_call() {
            self.wake_idle(st);
        }
    }
}
