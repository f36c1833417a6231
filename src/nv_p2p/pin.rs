// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A GPU pin: its phases, the free callback, and the put (docs/pin-state-machine.md).

use kernel::{
    ffi::c_void,
    new_mutex,
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Full,
            Relaxed, //
        },
        Arc,
        ArcBorrow,
        Mutex,
        MutexGuard, //
    }, //
};

use super::{
    abi::check_page_table,
    NvP2p,
    Owner,
    PinError,
    ORPHAN_RATELIMIT, //
};
use crate::{
    bindings,
    compat,
    foreign::driver_result,
    glue::ModuleRef,
    range::GpuRange, //
};

impl NvP2p {
    /// Pins `range` with a free callback: `handler` runs if the owning process frees
    /// the memory before the pin is dropped. Must run in the owning process.
    pub(crate) fn pin<T: FreeHandler>(
        nv: &Arc<NvP2p>,
        range: GpuRange,
        handler: impl PinInit<T>,
    ) -> Result<GpuPin<T>, PinError> {
        let shared = Arc::pin_init(
            PinShared::new(nv.clone(), range, PinKind::Callback, handler),
            GFP_KERNEL,
        )
        .map_err(|_| PinError::NoMemory)?;
        let get = nv.get_pages;
        // The driver's reference to `shared`, handed over as the callback's `data`;
        // given back by whichever of put and callback ends last (see `PinState`).
        let data = Arc::into_raw(shared.clone()).cast_mut().cast::<c_void>();
        let mut table = core::ptr::null_mut();
        // SAFETY: `get` is nvidia_p2p_get_pages (type invariant). Tokens are 0 (abi.md
        // 1.1); `table` is a valid out-pointer; `data` stays valid until the driver can
        // no longer call `free_callback::<T>` with it (`PinState` protocol).
        let ret = unsafe {
            get(
                0,
                0,
                range.start(),
                range.len(),
                &mut table,
                Some(free_callback::<T>),
                data,
            )
        };
        if let Err(e) = driver_result(ret) {
            // The driver kept no reference: take back its `data` reference.
            // SAFETY: `data` came from `Arc::into_raw` above and the driver failed, so
            // it will never use it.
            drop(unsafe { Arc::from_raw(data.cast::<PinShared<T>>()) });
            return Err(PinError::Driver(e));
        }
        shared.adopt_table(table)?;
        Ok(GpuPin { shared })
    }

    /// Pins `range` persistently: the memory stays allocated until the pin is dropped,
    /// even if the process frees it. Uses the persistent pair where the driver has
    /// it, else `get_pages` with a NULL callback (drivers before 535.14, docs/abi.md 1.1).
    /// `handler` is never called on a free (there is no callback), only
    /// [`FreeHandler::released`] when the last owner lets go.
    pub(crate) fn pin_persistent<T: FreeHandler>(
        nv: &Arc<NvP2p>,
        range: GpuRange,
        handler: impl PinInit<T>,
    ) -> Result<GpuPin<T>, PinError> {
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
        let init = PinShared::new(nv.clone(), range, kind, handler);
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
        Ok(GpuPin { shared })
    }

    /// Unpins `table` with the put function of its kind.
    ///
    /// # Safety
    ///
    /// `table` was handed out by this driver for `range` with a pin of `kind`, and was
    /// neither put nor torn down by a free callback.
    unsafe fn raw_put(
        &self,
        kind: PinKind,
        range: GpuRange,
        table: *mut bindings::nvidia_p2p_page_table,
    ) {
        let ret = match (kind, self.persistent) {
            (PinKind::Persistent, Some(api)) => {
                // SAFETY: `table` is a live persistent pin of `range` (the caller's
                // guarantee), made by the pair `api.put` belongs to; flags must be 0.
                unsafe { (api.put)(range.start(), table, 0) }
            }
            (PinKind::Persistent, None) => {
                // Never made: persistent pins come from the pair (`pin_persistent`).
                pr_err!("persistent pin without the persistent API: not put\n");
                return;
            }
            (PinKind::Callback | PinKind::LegacyPersistent, _) => {
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

/// Which pin a handler is called for: its range and the process that pinned.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PinIdentity {
    pub(crate) range: GpuRange,
    /// The `mm_struct`'s address (compared, never dereferenced; 0 for a kernel thread).
    pub(crate) mm: usize,
    pub(crate) tgid: i32,
}

/// What runs when the owning process frees pinned memory, and when a pin's last owner
/// lets go of it.
pub(crate) trait FreeHandler: Send + Sync + 'static {
    /// Called from the driver's free callback of callback pin `pin`, before the page
    /// table and its DMA mappings are freed. It may sleep briefly; it must not wait for
    /// the GPU, and it must not allocate. Every DMA mapping of the pin is dead once
    /// this returns.
    fn on_free(&self, pin: PinIdentity);

    /// Called once, when the last [`GpuPin`] of `pin` is dropped, after the pin was put
    /// (or left to its callback, or found freed by one).
    fn released(&self, _pin: PinIdentity) {}
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PinKind {
    /// `get_pages` with a free callback.
    Callback,
    /// The persistent pair; unpinned with its `put` (the driver table's own: a pin
    /// keeps a reference to the table, not a copy of the function).
    Persistent,
    /// `get_pages` with a NULL callback (drivers before 535.14).
    LegacyPersistent,
}

/// Where a pin is in its life.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Phase {
    /// `get_pages` returned; the table is live.
    Live,
    /// The owner started unpinning: `put_pages` is (about to be) in flight.
    Putting,
    /// `put_pages` returned.
    Put,
    /// Dropped by its owner's handle outside the owning process: not put (the
    /// driver would not find it), left to the free callback, which still comes.
    Orphaned,
    /// A free callback started: the driver frees the table when it returns.
    Freed,
}

/// A driver-owned pointer kept under the pin's lock.
pub(super) struct Raw<T>(pub(super) *mut T);

// SAFETY: the pointers are only used under the pin's lock, or by the one thread that
// took them out of it, following the driver's rules for its objects.
unsafe impl<T> Send for Raw<T> {}

/// The mutable state of a pin.
///
/// # Invariants
///
/// - `table` is non-null only in `Live`, `Putting` and `Orphaned`, and during a
///   callback until it has waited for `in_flight` to drop to zero.
/// - `mappings` are live DMA mappings of `table`.
/// - `in_flight` counts driver calls on `table` (map, unmap) not yet returned; a map
///   starts only in `Live`, an unmap only while `table` is non-null and no callback
///   has started.
pub(super) struct PinState {
    pub(super) phase: Phase,
    pub(super) table: Raw<bindings::nvidia_p2p_page_table>,
    pub(super) mappings: Mappings,
    pub(super) in_flight: u32,
    /// Tasks waiting on the pin's `idle` condition: a waker with none skips the wake-up.
    pub(super) waiters: u32,
    pub(super) callback_running: bool,
    /// The task running the callback (compared, never dereferenced).
    pub(super) callback_task: usize,
    /// Whether the driver's `data` reference was given back.
    pub(super) data_released: bool,
    /// Held while the pin is orphaned: the module stays until its callback ran.
    pub(super) orphan: Option<ModuleRef>,
}

impl PinState {
    /// Counts a mapping call in flight on the live table, with room reserved to
    /// record its mapping beside those of the calls already in flight (each records
    /// one when it returns); `EFAULT` once the pin is freed or put.
    pub(super) fn begin_call(&mut self) -> Result<*mut bindings::nvidia_p2p_page_table> {
        if self.phase != Phase::Live || self.table.0.is_null() {
            return Err(EFAULT);
        }
        self.mappings.reserve(self.in_flight as usize + 1)?;
        self.in_flight += 1;
        Ok(self.table.0)
    }

    /// Whether the driver's `data` reference may be given back now: no callback is
    /// running and none can start (put returned, or a callback already ran).
    pub(super) fn take_data_release(&mut self) -> bool {
        if self.data_released || self.callback_running {
            return false;
        }
        if matches!(self.phase, Phase::Put | Phase::Freed) {
            self.data_released = true;
            return true;
        }
        false
    }
}

/// A driver DMA mapping, as a pin records it.
pub(super) type RawMapping = Raw<bindings::nvidia_p2p_dma_mapping>;

/// The live DMA mappings of a pin: the first in place (a pin mostly has one peer), any
/// more in a boxed vector, so that the pin's state stays small (with the client's
/// record, a pin fits a 192-byte allocation).
///
/// # Invariants
///
/// `more` holds nothing while `first` is `None`.
pub(super) struct Mappings {
    first: Option<RawMapping>,
    more: Option<KBox<KVec<RawMapping>>>,
}

impl Mappings {
    /// None.
    pub(super) fn new() -> Self {
        // INVARIANT: both empty.
        Mappings {
            first: None,
            more: None,
        }
    }

    /// How many are recorded.
    pub(super) fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.more.as_ref().map_or(0, |v| v.len())
    }

    /// Makes room for `extra` more, so that that many [`Mappings::push`] succeed.
    pub(super) fn reserve(&mut self, extra: usize) -> Result {
        // The first lives in place: the vector holds the others.
        let others = (self.len() + extra).saturating_sub(1);
        if others == 0 {
            return Ok(());
        }
        let more = match &mut self.more {
            Some(v) => v,
            None => self.more.insert(KBox::new(KVec::new(), GFP_KERNEL)?),
        };
        let have = more.len();
        more.reserve(others.saturating_sub(have), GFP_KERNEL)?;
        Ok(())
    }

    /// Records `m`; `false` if there was no room (see [`Mappings::reserve`]).
    pub(super) fn push(&mut self, m: RawMapping) -> bool {
        if self.first.is_none() {
            // INVARIANT: `first` is set before `more` takes anything.
            self.first = Some(m);
            return true;
        }
        self.more
            .as_mut()
            .is_some_and(|v| v.push_within_capacity(m).is_ok())
    }

    /// Forgets the mapping at `raw`; whether it was recorded.
    pub(super) fn remove(&mut self, raw: *mut bindings::nvidia_p2p_dma_mapping) -> bool {
        if self.first.as_ref().is_some_and(|m| m.0 == raw) {
            // INVARIANT: a vector element, if any, takes the first place.
            self.first = self.more.as_mut().and_then(|v| v.pop());
            return true;
        }
        let Some(more) = self.more.as_mut() else {
            return false;
        };
        match more.iter().position(|m| m.0 == raw) {
            Some(i) => more.remove(i).is_ok(),
            None => false,
        }
    }

    /// Takes every recorded mapping, leaving none.
    pub(super) fn take(&mut self) -> impl Iterator<Item = RawMapping> {
        // INVARIANT: both emptied.
        let more = self.more.take().map(KBox::into_inner);
        Iterator::chain(self.first.take().into_iter(), more.into_iter().flatten())
    }
}

/// What a pin handle and the driver's callback share.
#[pin_data]
pub(super) struct PinShared<T: FreeHandler> {
    /// The driver's functions, shared by every pin (a copy would be 64 bytes a pin).
    pub(super) nv: Arc<NvP2p>,
    pub(super) range: GpuRange,
    pub(super) kind: PinKind,
    /// The process that pinned (the caller of `NvP2p::pin`).
    owner: Owner,
    /// How many [`GpuPin`] handles own the pin: the last one dropped unpins. The
    /// `Arc` count is more, with the driver's `data` reference and DMA mappings.
    owners: Atomic<u32>,
    #[pin]
    pub(super) state: Mutex<PinState>,
    #[pin]
    pub(super) handler: T,
}

impl<T: FreeHandler> PinShared<T> {
    fn new(
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
            owners: Atomic::new(1),
            state <- new_mutex!(PinState {
                phase: Phase::Live,
                table: Raw(core::ptr::null_mut()),
                mappings: Mappings::new(),
                in_flight: 0,
                waiters: 0,
                callback_running: false,
                callback_task: 0,
                data_released: !matches!(kind, PinKind::Callback),
                orphan: None,
            }, "peermem_pin_state"),
            handler <- handler,
        })
    }

    /// The pin's range and owner.
    fn identity(&self) -> PinIdentity {
        PinIdentity {
            range: self.range,
            mm: self.owner.mm_addr(),
            tgid: self.owner.tgid,
        }
    }

    /// Takes the table `get_pages` returned, after checking it.
    fn adopt_table(
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
    fn finish_put(self: &Arc<Self>) {
        let release = {
            let mut st = self.state.lock();
            st.phase = Phase::Put;
            st.table = Raw(core::ptr::null_mut());
            st.take_data_release()
        };
        if release {
            // SAFETY: the driver's reference was created by `Arc::into_raw` in
            // `NvP2p::pin`, and `take_data_release` returned true exactly once.
            drop(unsafe { Arc::from_raw(Arc::as_ptr(self)) });
        }
    }

    /// Starts a mapping call on the live table, with room reserved to record the
    /// mapping; `EFAULT` once the pin is freed or put.
    pub(super) fn begin_call(&self) -> Result<*mut bindings::nvidia_p2p_page_table> {
        self.state.lock().begin_call()
    }

    /// Ends a driver call; wakes a callback waiting for calls to drain.
    pub(super) fn end_call(&self, st: &mut PinState) {
        st.in_flight -= 1;
        if st.in_flight == 0 {
            self.wake_idle(st);
        }
    }

    /// Waits for a change of the state (a call ending, a callback finishing): the lock
    /// is dropped while asleep and held again on return.
    fn wait_idle(&self, st: &mut MutexGuard<'_, PinState>) {
        // Counted under the lock, and queued before the lock is dropped: a waker, which
        // holds the lock, sees the count whenever a waiter could miss its wake-up.
        st.waiters += 1;
        self.nv.idle.wait(st);
        st.waiters -= 1;
    }

    /// Wakes the tasks in [`PinShared::wait_idle`], if any (with the state lock held).
    fn wake_idle(&self, st: &PinState) {
        if st.waiters > 0 {
            self.nv.idle.notify_all();
        }
    }
}

/// The driver's free callback for pins with handler `T`.
///
/// # Safety
///
/// Called by nvidia.ko with the `data` given to `nvidia_p2p_get_pages` in
/// [`NvP2p::pin`]: a reference on a `PinShared<T>` that stays valid until the callback
/// gives it back (`PinState` protocol).
unsafe extern "C" fn free_callback<T: FreeHandler>(data: *mut c_void) {
    // The whole callback runs under its own module reference: the holders of the
    // module's other references (registrations, an orphaned pin) may let go of them
    // while it runs. Declared first, dropped last.
    let _module = ModuleRef::new();
    // SAFETY: `data` is the driver's reference (the caller's guarantee); it is only
    // given back below, after the last use of `shared`.
    let shared: ArcBorrow<'_, PinShared<T>> = unsafe { ArcBorrow::from_raw(data.cast()) };
    {
        let mut st = shared.state.lock();
        st.callback_running = true;
        st.callback_task = kernel::task::Task::current_raw() as usize;
        st.phase = Phase::Freed;
    }
    // No new driver call starts on the table from here on (`begin_call`).
    shared.handler.on_free(shared.identity());

    let release = {
        let mut st = shared.state.lock();
        // Calls that started before the phase changed must end before the driver frees
        // the table, which it does as soon as this callback returns.
        while st.in_flight > 0 {
            shared.wait_idle(&mut st);
        }
        let table = core::mem::replace(&mut st.table, Raw(core::ptr::null_mut()));
        for m in st.mappings.take() {
            // SAFETY: `m` is a live mapping of the table; freeing it is allowed inside
            // the callback (docs/abi.md 1.1), and nothing else uses it any more.
            unsafe { (shared.nv.free_dma_mapping)(m.0) };
        }
        if !table.0.is_null() {
            // SAFETY: `table` is this pin's table; freeing it is the one thing the
            // callback must do with it (docs/abi.md 1.1).
            unsafe { (shared.nv.free_page_table)(table.0) };
        }
        st.callback_running = false;
        st.callback_task = 0;
        shared.wake_idle(&st);
        (st.take_data_release(), st.orphan.take())
    };
    let (release, _orphan) = release;
    if release {
        // SAFETY: the driver's reference came from `Arc::into_raw` in `NvP2p::pin` and
        // `take_data_release` returned true exactly once; `shared` is not used after.
        drop(unsafe { Arc::from_raw(data.cast::<PinShared<T>>().cast_const()) });
    }
}

/// A pinned range of GPU memory, owned by every clone of the handle.
///
/// Dropping the last clone unpins, unless a free callback already tore the pin down.
///
/// # Invariants
///
/// `shared.owners` counts the live handles of `shared`, this one included.
pub(crate) struct GpuPin<T: FreeHandler> {
    pub(super) shared: Arc<PinShared<T>>,
}

impl<T: FreeHandler> Clone for GpuPin<T> {
    fn clone(&self) -> Self {
        // Relaxed, as for an `Arc`: the caller's handle keeps the pin owned meanwhile.
        self.shared.owners.fetch_add(1, Relaxed);
        // INVARIANT: counted above.
        GpuPin {
            shared: self.shared.clone(),
        }
    }
}

impl<T: FreeHandler> GpuPin<T> {
    /// The bytes of a pin's record with handler `T`, besides the `Arc`'s count (checked
    /// by the client where locks have their production layout).
    #[cfg_attr(
        any(CONFIG_DEBUG_LOCK_ALLOC, CONFIG_DEBUG_MUTEXES, CONFIG_DEBUG_SPINLOCK),
        expect(dead_code)
    )]
    pub(crate) const RECORD_BYTES: usize = size_of::<PinShared<T>>();

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
        self.shared.state.lock().phase == Phase::Freed
    }

    /// The pin's range and the process that pinned. The pin holds that process's
    /// `mm_struct` (mmgrab), so no other process gets its address while the pin lives.
    pub(crate) fn identity(&self) -> PinIdentity {
        self.shared.identity()
    }

    /// Whether the pin is persistent (it has no free callback).
    pub(crate) fn is_persistent(&self) -> bool {
        self.shared.kind != PinKind::Callback
    }

    /// Unpins, as the last owner: puts the pin, or leaves it to its callback.
    fn put_last(&self) {
        let s = &self.shared;
        let table = {
            let mut st = s.state.lock();
            if st.phase == Phase::Freed {
                // The driver tore the pin down. A callback still running elsewhere may
                // use what the owner is about to free: wait for it, unless this is that
                // very callback dropping the last reference.
                let me = kernel::task::Task::current_raw() as usize;
                while st.callback_running && st.callback_task != me {
                    s.wait_idle(&mut st);
                }
                return;
            }
            if st.phase != Phase::Live {
                return;
            }
            if matches!(s.kind, PinKind::Callback) && !s.owner.is_current() {
                // Outside the owning process nvidia.ko would not find the pin and
                // answer 0, keeping it and its callback (abi.md 1.4b). Leave it to
                // that callback: the driver keeps its `data` reference, and the module
                // stays loaded until the callback has run.
                st.phase = Phase::Orphaned;
                st.orphan = Some(ModuleRef::new());
                drop(st);
                if crate::glue::ratelimit(ORPHAN_RATELIMIT) {
                    pr_info!(
                        "GPU pin {:#x}+{:#x} released outside its process (tgid {}): it stays until that process frees the memory or exits\n",
                        s.range.start(),
                        s.range.len(),
                        s.owner.tgid
                    );
                }
                return;
            }
            st.phase = Phase::Putting;
            // Owners drop their DMA mappings before the pin (the driver wants every
            // mapping gone before put_pages); wait for unmaps still in flight.
            while st.in_flight > 0 {
                s.wait_idle(&mut st);
            }
            st.table.0
        };
        // SAFETY: the table is a live pin of `s.range` of kind `s.kind`: the phase was
        // `Live` and is now `Putting`, so no callback started before and none will use
        // the table after put_pages returns.
        unsafe { s.nv.raw_put(s.kind, s.range, table) };
        s.finish_put();
    }
}

impl<T: FreeHandler> Drop for GpuPin<T> {
    fn drop(&mut self) {
        // Fully ordered, as an `Arc`'s count (release, and acquire for the last), so
        // that the last owner sees everything the others did with the pin.
        if compat::fetch_sub(&self.shared.owners, 1, Full) != 1 {
            return;
        }
        self.put_last();
        self.shared.handler.released(self.shared.identity());
    }
}
