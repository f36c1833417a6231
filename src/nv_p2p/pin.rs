// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A GPU pin (docs/pin-state-machine.md): its record, which its handles, its DMA
//! mappings and the driver's free callback share (`PinShared`, with the guard of a
//! driver call on its table); how it is made; its handle, `CallbackPin`, whose last owner
//! puts it; and the driver's free callback. Its phases are in `state`, its DMA mappings
//! in `mapping`.

use kernel::{
    ffi::c_void,
    mm::Mm,
    new_spinlock,
    prelude::*,
    sync::{
        aref::ARef,
        atomic::Relaxed,
        Arc,
        ArcBorrow,
        Refcount,
        SpinLock,
        SpinLockGuard, //
    },
    types::ScopeGuard, //
};

use super::{
    driver::{
        NvP2p,
        PinKind, //
    },
    error::{
        check_page_table,
        PinError, //
    },
    state::{
        PinState,
        PutToken, //
    }, //
};
use crate::{
    bindings,
    compat,
    glue::{
        driver_result,
        ModuleRef, //
    },
    range::GpuRange,
    space::{
        Owner,
        SpaceId, //
    }, //
};

/// The rate-limit kind of the "pin released outside its process" message (after the
/// refusal reasons, which use their own values: `stats::Refusal`).
const ORPHAN_RATELIMIT: u32 = 16;

/// Which pin a handler is called for: its range and the address space that pinned.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PinIdentity {
    pub(crate) range: GpuRange,
    pub(crate) space: SpaceId,
}

/// Who pins: what every pin of theirs refers to, the driver its pins are made with
/// included (one reference a pin, shared with the record's own needs), and where its
/// pins are counted. A trait because this layer sits below the clients
/// (docs/architecture.md) and must not name their type, nor the counters above it: the
/// client's shared part implements it (its counters are the module's `Stats`), and so
/// does, in test builds only, a context of this layer's own suite (nv_p2p/tests.rs),
/// which pins with no client above it and counts its pins itself.
pub(crate) trait PinContext: Send + Sync + 'static {
    /// The driver the pins are made with.
    fn nv(&self) -> &NvP2p;

    /// A pin of `bytes` bytes was made: called once a pin, as its first handle is
    /// made.
    fn pinned(&self, bytes: u64);

    /// The last handle of a pin of `bytes` bytes was dropped: called once a pin, after
    /// its [`PinContext::pinned`], as the pin is let go of (put, left to its free
    /// callback, or already freed by it).
    fn unpinned(&self, bytes: u64);
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
    /// The process that pinned (the caller of `NvP2p::pin`), the identity nvidia.ko
    /// looks callback pins up by, handed in by the pinner, who read it (an `Owner`):
    /// its `mm_struct` (`None` for a kernel thread), held so that its address is not
    /// handed to another process while the pin lives, and its thread-group id. Two
    /// fields, so that the id shares eight bytes with `owners`.
    mm: Option<ARef<Mm>>,
    tgid: i32,
    /// How many [`CallbackPin`] handles own the pin: the last one dropped unpins. The
    /// `Arc` count is more, with the driver's `data` reference.
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
        owner: Owner,
        handler: impl PinInit<T>,
    ) -> impl PinInit<Self> {
        let (mm, tgid) = owner.into_parts();
        pin_init!(Self {
            ctx,
            range,
            mm,
            tgid,
            owners: Refcount::new(1),
            state <- new_spinlock!(PinState::new(), "peermem_pin_state"),
            handler <- handler,
        })
    }

    /// The driver the pin was made with.
    pub(super) fn nv(&self) -> &NvP2p {
        self.ctx.nv()
    }

    /// The address space that pinned (its mm address 0 for a kernel thread).
    pub(super) fn space(&self) -> SpaceId {
        SpaceId::of(self.mm.as_deref(), self.tgid)
    }

    /// Whether the calling process is the one that pinned.
    pub(super) fn owned_by_current(&self) -> bool {
        self.space().is_current()
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
            let put = st.refuse_table(table);
            drop(st);
            pr_err!(
                "nvidia.ko returned an unusable page table ({:?}); unpinning\n",
                bad
            );
            // Not freed under this lock above: live, so the put began.
            if let Some(put) = put {
                self.put(put);
            }
            return Err(PinError::BadAnswer);
        }
        st.adopt(table)
    }

    /// Ends the put `token` began: waits for the driver calls still in flight on the
    /// table (owners drop their DMA mappings before the pin, and the driver wants every
    /// mapping gone before put_pages), unpins the table with the put function of its
    /// kind, then marks the put done, giving the driver's reference back if this was
    /// its last use (after the lock: it may be the record's last reference).
    pub(super) fn put(&self, token: PutToken) {
        let mut st = self.state.lock();
        while st.busy() {
            self.wait_idle(&mut st);
        }
        drop(st);
        if let Some(table) = token.table() {
            // SAFETY: the table was handed out by this driver for `self.range` with a
            // pin of the token's kind, and no callback had started when the put began
            // (type invariant of `PutToken`); no driver call is in flight on it, and
            // none starts any more.
            unsafe { self.nv().raw_put(PinKind::Callback, self.range, table) };
        }
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
/// The pin `pin` guards has its `in_flight` count this call, and `table` is that pin's
/// table.
pub(super) struct DriverCall<'a, T: PinRecord> {
    /// Ends the call (`PinShared::end_call`) when dropped, unless dismissed by
    /// [`DriverCall::end_with`].
    pin: ScopeGuard<&'a PinShared<T>, fn(&'a PinShared<T>)>,
    table: *mut bindings::nvidia_p2p_page_table,
}

/// Ends a call in flight on `pin`'s table: a [`DriverCall`]'s undo.
fn end_call_of<T: PinRecord>(pin: &PinShared<T>) {
    let mut st = pin.state.lock();
    pin.end_call(&mut st);
}

impl<'a, T: PinRecord> DriverCall<'a, T> {
    /// A map call on `pin`'s live table, with room reserved to record its mapping
    /// (`PinState::begin_call`); [`PinError::Freed`] once the pin is freed or put.
    pub(super) fn map(pin: &'a PinShared<T>) -> Result<Self, PinError> {
        let table = pin.state.lock().begin_call()?;
        // INVARIANT: counted in flight by `begin_call`, on the pin's table.
        Ok(DriverCall {
            pin: ScopeGuard::new_with_data(pin, end_call_of::<T>),
            table,
        })
    }

    /// An unmap call of `raw` on `pin`'s table (`PinState::begin_unmap`): `None` when
    /// the free callback frees the mapping instead, or `raw` is not recorded.
    pub(super) fn unmap(
        pin: &'a PinShared<T>,
        raw: *mut bindings::nvidia_p2p_dma_mapping,
    ) -> Option<Self> {
        let table = pin.state.lock().begin_unmap(raw)?;
        // INVARIANT: counted in flight by `begin_unmap`, on the pin's table.
        Some(DriverCall {
            pin: ScopeGuard::new_with_data(pin, end_call_of::<T>),
            table,
        })
    }

    /// The table, live while the guard lives.
    pub(super) fn table(&self) -> *mut bindings::nvidia_p2p_page_table {
        self.table
    }

    /// Ends the call after `f` ran under the pin's lock, in the same lock round.
    pub(super) fn end_with<R>(self, f: impl FnOnce(&mut PinState<PinShared<T>>) -> R) -> R {
        let pin = self.pin.dismiss();
        let mut st = pin.state.lock();
        let r = f(&mut st);
        pin.end_call(&mut st);
        r
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

    /// Ends a driver call (its guard's end); wakes a callback waiting for calls to
    /// drain.
    fn end_call(&self, st: &mut PinState<Self>) {
        if st.end_call() {
            self.wake_idle(st);
        }
    }
}

impl NvP2p {
    /// Pins `range` for `ctx` with a free callback: `handler` runs if the owning process
    /// frees the memory before the pin is dropped. Must run in the owning process,
    /// `owner`.
    pub(crate) fn pin<T: FreeHandler>(
        ctx: &Arc<T::Context>,
        range: GpuRange,
        owner: Owner,
        handler: impl PinInit<T>,
    ) -> Result<CallbackPin<T>, PinError> {
        let shared = Arc::pin_init(
            PinShared::new(ctx.clone(), range, owner, handler),
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
        Ok(CallbackPin::counted(shared))
    }
}

/// A pinned range of GPU memory, owned by every clone of the handle.
///
/// Dropping the last clone unpins, unless a free callback already tore the pin down.
///
/// # Invariants
///
/// `shared.owners` counts the live handles of `shared`, this one included. A pin is
/// counted by its context (`shared.ctx`) from when it is made
/// ([`PinContext::pinned`]) until its last handle is dropped
/// ([`PinContext::unpinned`]).
pub(crate) struct CallbackPin<T: PinRecord> {
    pub(super) shared: Arc<PinShared<T>>,
}

impl<T: PinRecord> Clone for CallbackPin<T> {
    fn clone(&self) -> Self {
        // The caller's handle keeps the pin owned meanwhile: never from zero.
        self.shared.owners.inc();
        // INVARIANT: counted above.
        CallbackPin {
            shared: self.shared.clone(),
        }
    }
}

impl<T: PinRecord> CallbackPin<T> {
    /// The first handle of a pin just made (its record counts one owner), counted by
    /// the pin's context.
    fn counted(shared: Arc<PinShared<T>>) -> Self {
        shared.ctx.pinned(shared.range.len());
        // INVARIANT: one owner, this handle; counted above.
        CallbackPin { shared }
    }

    /// The GPU virtual range pinned, as asked for (64 KiB aligned), whatever the
    /// driver's table holds now.
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
        let put = {
            let mut st = s.state.lock();
            // Every mapping still recorded is unmapped first: the driver wants them gone
            // before the put. None is left in this module's use (each registration
            // unmaps its own) unless a free callback frees them; `unmap` locks again.
            while let Some(raw) = st.mapping_left() {
                drop(st);
                let unmapped = s.unmap(raw);
                st = s.state.lock();
                if !unmapped {
                    // A free callback frees it, and the others with it.
                    break;
                }
            }
            if st.is_freed() {
                // The driver tore the pin down. A callback still running elsewhere may
                // use what the owner is about to free: wait for it, unless this is that
                // very callback dropping the last reference.
                while st.callback_elsewhere() {
                    s.wait_idle(&mut st);
                }
                return;
            }
            if !s.owned_by_current() {
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
            match st.start_put() {
                Some(put) => put,
                None => return,
            }
        };
        s.put(put);
    }
}

impl<T: PinRecord> Drop for CallbackPin<T> {
    fn drop(&mut self) {
        // Release, and acquire for the last (`refcount_dec_and_test`), as an `Arc`'s
        // count: the last owner sees everything the others did with the pin.
        if !self.shared.owners.dec_and_test() {
            return;
        }
        self.put_last();
        // INVARIANT: the last handle is gone: so is the pin's count.
        self.shared.ctx.unpinned(self.shared.range.len());
    }
}

/// The driver's free callback for pins with handler `T`.
///
/// # Safety
///
/// Called by nvidia.ko with the `data` given to `nvidia_p2p_get_pages` in
/// [`NvP2p::pin`](super::NvP2p::pin): `Arc::as_ptr` of the pin's `PinShared<T>`, whose
/// reference the pin's state keeps for the driver until the callback gives it back
/// (`PinState` protocol).
pub(super) unsafe extern "C" fn free_callback<T: FreeHandler>(data: *mut c_void) {
    // The whole callback runs under its own module reference: the holders of the
    // module's other references (registrations, an orphaned pin) may let go of them
    // while it runs. Declared first, dropped last.
    let _module = ModuleRef::new();
    // SAFETY: `data` is `Arc::as_ptr` of the pin's record, whose driver reference the
    // pin's state keeps (the caller's guarantee) until this callback gives it back,
    // below, after the last use of `shared`.
    let shared: ArcBorrow<'_, PinShared<T>> =
        unsafe { ArcBorrow::from_raw(data.cast::<PinShared<T>>()) };
    shared.state.lock().start_callback();
    // No new driver call starts on the table from here on (`DriverCall`).
    shared.handler.on_free(&shared.ctx, shared.identity());

    let (table, mappings) = {
        let mut st = shared.state.lock();
        // Calls that started before the phase changed must end before the driver frees
        // the table, which it does as soon as this callback returns.
        while st.busy() {
            shared.wait_idle(&mut st);
        }
        st.take_for_free()
    };
    // Freed outside the spinlock (the driver may sleep in its frees): the pin is
    // freed with nothing in flight, so nothing else uses them any more, and the
    // callback is still running, so no owner lets the record go meanwhile.
    for m in mappings {
        // SAFETY: `m` is a live mapping of the table; freeing it is allowed inside the
        // callback (docs/abi.md 1.1), and nothing else uses it any more.
        unsafe { (shared.nv().free_dma_mapping)(m.0) };
    }
    if !table.0.is_null() {
        // SAFETY: `table` is this pin's table; freeing it is the one thing the callback
        // must do with it (docs/abi.md 1.1).
        unsafe { (shared.nv().free_page_table)(table.0) };
    }
    let (data, orphan) = {
        let mut st = shared.state.lock();
        let given = st.end_callback();
        shared.wake_idle(&st);
        given
    };
    // The driver's reference goes last (it may be the record's last one): `shared` is
    // not used after.
    drop(orphan);
    drop(data);
}
