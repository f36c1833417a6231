// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Safe wrapper of nvidia.ko's P2P API (docs/abi.md, section 1).
//!
//! Everything above this module sees GPU pins as owned handles:
//!
//! - [`GpuPin`]: a pinned 64 KiB-aligned range. A callback pin runs a [`FreeHandler`]
//!   when the owning process frees the memory; a persistent pin keeps the memory
//!   alive. Dropping the handle unpins (unless a free callback already tore it down).
//! - [`DmaMapping`]: the range's DMA addresses for one PCI peer, copied out of the
//!   driver's structure while it is guaranteed alive. Dropping it unmaps.
//!
//! The driver's rules that make this hard are enforced here, once:
//!
//! - inside the free callback only `free_page_table` / `free_dma_mapping` may be
//!   called, never `put_pages` or `dma_unmap_pages` (docs/abi.md 1.4);
//! - once the callback returns, the driver frees the page table and every DMA mapping
//!   of it: no call on them may be in flight then or start afterwards (docs/abi.md 1.1);
//! - `put_pages` after a callback is unsafe on drivers before 535.14, so it is never
//!   made once the callback has started;
//! - the callback's `data` must stay valid until both the put and any callback that
//!   started have finished;
//! - `put_pages` of a callback pin only works from the owning process: from another
//!   one the driver returns 0 and keeps the pin and its callback (abi.md 1.4b), so
//!   such a pin is left to its callback ("orphaned"), with its data and a module
//!   reference, instead of being put.
//!
//! See docs/pin-state-machine.md for the states and the lock order.

use kernel::{
    ffi::{c_int, c_void},
    new_condvar, new_mutex,
    prelude::*,
    sync::{Arc, ArcBorrow, CondVar, Mutex},
};

use crate::{bindings, device::PciFunction, glue::ModuleRef, range::GpuRange};

/// Page-table versions this module reads: majors 1 (minor >= 2) and 2 (docs/abi.md 1.2).
/// The fields read (version, page_size, pages, entries) sit at the same offsets in
/// both.
pub(crate) const fn page_table_version_ok(version: u32) -> bool {
    let (major, minor) = (version >> 16, version & 0xffff);
    // Major 2 started at minor 0 (0x00020000): every minor of it is readable.
    match major {
        1 => minor >= (bindings::NVIDIA_P2P_PAGE_TABLE_VERSION_R515 & 0xffff),
        2 => true,
        _ => false,
    }
}

/// DMA-mapping versions this module reads: major 2, minor >= 3 (docs/abi.md 1.2).
pub(crate) const fn dma_mapping_version_ok(version: u32) -> bool {
    let built = bindings::NVIDIA_P2P_DMA_MAPPING_VERSION;
    version >> 16 == built >> 16 && (version & 0xffff) >= (built & 0xffff)
}

/// Maps a driver return value to a result: 0 is success, a negative errno is that
/// error, anything else (not a valid errno) is `EIO`.
pub(crate) fn driver_result(ret: c_int) -> Result {
    match ret {
        0 => Ok(()),
        -4095..=-1 => Err(Error::from_errno(ret)),
        _ => Err(EIO),
    }
}

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
    /// A null page array or entry, or null DMA addresses.
    NullEntry,
    /// No memory to copy the answer.
    NoMemory,
}

impl From<BadAnswer> for Error {
    fn from(bad: BadAnswer) -> Error {
        match bad {
            BadAnswer::NoMemory => ENOMEM,
            _ => EIO,
        }
    }
}

/// Why a pin failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PinError {
    /// nvidia.ko refused, with this errno (`ENOMEM`: BAR1 exhausted; `EINVAL`: not
    /// this process's GPU memory).
    Driver(Error),
    /// nvidia.ko answered with a page table this module cannot read (it was put back).
    BadAnswer,
    /// A free callback tore the pin down before it was taken over.
    Freed,
    /// This module could not allocate its own state for the pin.
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

/// The process a callback pin belongs to: its `mm_struct` (compared, never
/// dereferenced; 0 for a kernel thread) and thread-group id, the identity nvidia.ko
/// looks callback pins up by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Owner {
    mm: usize,
    tgid: i32,
}

impl Owner {
    /// The calling process.
    fn current() -> Self {
        let task = kernel::current!();
        Owner {
            mm: task.mm().map_or(0, |mm| mm.as_raw() as usize),
            tgid: task.tgid(),
        }
    }
}

/// Checks a page table the driver returned for a pin of `pages` pages.
///
/// # Safety
///
/// `table` is null or points to a page table the driver handed out and has not freed,
/// for the duration of the call.
pub(crate) unsafe fn check_page_table(
    table: *const bindings::nvidia_p2p_page_table,
    pages: u64,
) -> Result<(), BadAnswer> {
    if table.is_null() {
        return Err(BadAnswer::Null);
    }
    // SAFETY: `table` is valid for reads (the caller's guarantee); only fields whose
    // offsets agree between majors 1 and 2 are read.
    let t = unsafe { &*table };
    if !page_table_version_ok(t.version) {
        return Err(BadAnswer::Version(t.version));
    }
    if t.page_size != bindings::nvidia_p2p_page_size_type_NVIDIA_P2P_PAGE_SIZE_64KB {
        return Err(BadAnswer::PageSize(t.page_size));
    }
    if u64::from(t.entries) != pages {
        return Err(BadAnswer::Entries(t.entries));
    }
    if t.pages.is_null() {
        return Err(BadAnswer::NullEntry);
    }
    for i in 0..t.entries as usize {
        // SAFETY: `pages` points to `entries` page pointers (the driver's contract).
        if unsafe { *t.pages.add(i) }.is_null() {
            return Err(BadAnswer::NullEntry);
        }
    }
    Ok(())
}

/// Checks a DMA mapping of a table of `pages` pages and copies its addresses.
///
/// # Safety
///
/// `mapping` is null or points to a DMA mapping the driver handed out and has not
/// freed, for the duration of the call.
pub(crate) unsafe fn read_dma_mapping(
    mapping: *const bindings::nvidia_p2p_dma_mapping,
    pages: u64,
) -> Result<KVec<u64>, BadAnswer> {
    if mapping.is_null() {
        return Err(BadAnswer::Null);
    }
    // SAFETY: `mapping` is valid for reads (the caller's guarantee).
    let m = unsafe { &*mapping };
    if !dma_mapping_version_ok(m.version) {
        return Err(BadAnswer::Version(m.version));
    }
    if m.page_size_type != bindings::nvidia_p2p_page_size_type_NVIDIA_P2P_PAGE_SIZE_64KB {
        return Err(BadAnswer::PageSize(m.page_size_type));
    }
    if u64::from(m.entries) != pages {
        return Err(BadAnswer::Entries(m.entries));
    }
    if m.dma_addresses.is_null() {
        return Err(BadAnswer::NullEntry);
    }
    let n = m.entries as usize;
    let mut out = KVec::with_capacity(n, GFP_KERNEL).map_err(|_| BadAnswer::NoMemory)?;
    for i in 0..n {
        // SAFETY: `dma_addresses` points to `entries` addresses (the driver's contract).
        let a = unsafe { *m.dma_addresses.add(i) };
        out.push_within_capacity(a)
            .map_err(|_| BadAnswer::NoMemory)?;
    }
    Ok(out)
}

/// nvidia.ko's functions, resolved when this module was loaded.
///
/// # Invariants
///
/// Every function but the persistent pair is present (`Some`); each present pointer
/// is the driver's function with the signature the header declares.
#[derive(Clone, Copy)]
pub(crate) struct NvP2p {
    syms: bindings::peermem_symbols,
}

/// The first missing nvidia.ko function, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MissingSymbol(pub(crate) &'static str);

impl NvP2p {
    /// Takes nvidia.ko's functions from the module's weak references.
    pub(crate) fn new(syms: &bindings::peermem_symbols) -> Result<Self, MissingSymbol> {
        let required = [
            (syms.nv_get_pages.is_some(), "nvidia_p2p_get_pages"),
            (syms.nv_put_pages.is_some(), "nvidia_p2p_put_pages"),
            (
                syms.nv_free_page_table.is_some(),
                "nvidia_p2p_free_page_table",
            ),
            (syms.nv_dma_map_pages.is_some(), "nvidia_p2p_dma_map_pages"),
            (
                syms.nv_dma_unmap_pages.is_some(),
                "nvidia_p2p_dma_unmap_pages",
            ),
            (
                syms.nv_free_dma_mapping.is_some(),
                "nvidia_p2p_free_dma_mapping",
            ),
        ];
        if let Some((_, name)) = required.iter().find(|(present, _)| !present) {
            return Err(MissingSymbol(name));
        }
        // INVARIANT: the required functions were checked just above.
        Ok(Self { syms: *syms })
    }

    /// Whether the driver has the persistent pair (535.14 / 525.105.17 and later).
    pub(crate) fn has_persistent_api(&self) -> bool {
        self.syms.nv_get_pages_persistent.is_some() && self.syms.nv_put_pages_persistent.is_some()
    }

    /// Pins `range` with a free callback: `handler` runs if the owning process frees
    /// the memory before the pin is dropped. Must run in the owning process.
    pub(crate) fn pin<T: FreeHandler>(
        &self,
        range: GpuRange,
        handler: T,
    ) -> Result<GpuPin<T>, PinError> {
        let shared = Arc::pin_init(
            PinShared::new(*self, range, PinKind::Callback, handler),
            GFP_KERNEL,
        )
        .map_err(|_| PinError::NoMemory)?;
        let get = self.syms.nv_get_pages.ok_or(PinError::Driver(ENODEV))?;
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
    pub(crate) fn pin_persistent(&self, range: GpuRange) -> Result<GpuPin<NoCallback>, PinError> {
        let (kind, ret, table) = {
            let mut table = core::ptr::null_mut();
            if let Some(get) = self.syms.nv_get_pages_persistent {
                // SAFETY: `get` is nvidia_p2p_get_pages_persistent (type invariant);
                // `table` is a valid out-pointer; flags 0 is the default.
                let ret = unsafe { get(range.start(), range.len(), &mut table, 0) };
                (PinKind::Persistent, ret, table)
            } else {
                let get = self.syms.nv_get_pages.ok_or(PinError::Driver(ENODEV))?;
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
        let shared = match Arc::pin_init(PinShared::new(*self, range, kind, NoCallback), GFP_KERNEL)
        {
            Ok(s) => s,
            Err(_) => {
                // SAFETY: `table` was just handed out for `range` by the call above and
                // nothing else refers to it.
                unsafe { self.raw_put(kind, range, table) };
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
        let ret = match (
            kind,
            self.syms.nv_put_pages_persistent,
            self.syms.nv_put_pages,
        ) {
            (PinKind::Persistent, Some(put), _) => {
                // SAFETY: `table` is a live persistent pin of `range` (the caller's
                // guarantee); flags must be 0.
                unsafe { put(range.start(), table, 0) }
            }
            (PinKind::Callback | PinKind::LegacyPersistent, _, Some(put)) => {
                // SAFETY: `table` is a live pin of `range` made by get_pages (the
                // caller's guarantee); tokens are 0 as at get_pages.
                unsafe { put(0, 0, range.start(), table) }
            }
            _ => return,
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

/// What runs when the owning process frees pinned memory.
pub(crate) trait FreeHandler: Send + Sync + 'static {
    /// Called from the driver's free callback, before the page table and its DMA
    /// mappings are freed. It may sleep briefly; it must not wait for the GPU, and it
    /// must not allocate. Every DMA mapping of the pin is dead once this returns.
    fn on_free(&self);
}

/// The handler of persistent pins, which have no callback.
pub(crate) struct NoCallback;

impl FreeHandler for NoCallback {
    fn on_free(&self) {}
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum PinKind {
    Callback,
    Persistent,
    LegacyPersistent,
}

/// Where a pin is in its life.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Phase {
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
struct Raw<T>(*mut T);

// SAFETY: the pointers are only used under the pin's lock, or by the one thread that
// took them out of it, following the driver's rules for its objects.
unsafe impl<T> Send for Raw<T> {}

/// The mutable state of a pin.
///
/// # Invariants
///
/// - `table` is non-null only in `Live` and `Putting`, and during a callback until it
///   has waited for `in_flight` to drop to zero.
/// - `mappings` are live DMA mappings of `table`.
/// - `in_flight` counts driver calls on `table` (map, unmap) not yet returned; none
///   starts unless the phase is `Live` or `Putting`.
struct PinState {
    phase: Phase,
    table: Raw<bindings::nvidia_p2p_page_table>,
    mappings: KVec<Raw<bindings::nvidia_p2p_dma_mapping>>,
    in_flight: u32,
    callback_running: bool,
    /// The task running the callback (compared, never dereferenced).
    callback_task: usize,
    /// Whether the driver's `data` reference was given back.
    data_released: bool,
    /// Held while the pin is orphaned: the module stays until its callback ran.
    orphan: Option<ModuleRef>,
}

impl PinState {
    /// Whether the driver's `data` reference may be given back now: no callback is
    /// running and none can start (put returned, or a callback already ran).
    fn take_data_release(&mut self) -> bool {
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

/// What a pin handle and the driver's callback share.
#[pin_data]
struct PinShared<T: FreeHandler> {
    nv: NvP2p,
    range: GpuRange,
    kind: PinKind,
    /// The process that pinned (the caller of `NvP2p::pin`).
    owner: Owner,
    #[pin]
    state: Mutex<PinState>,
    #[pin]
    idle: CondVar,
    handler: T,
}

impl<T: FreeHandler> PinShared<T> {
    fn new(nv: NvP2p, range: GpuRange, kind: PinKind, handler: T) -> impl PinInit<Self> {
        pin_init!(Self {
            nv,
            range,
            kind,
            owner: Owner::current(),
            state <- new_mutex!(PinState {
                phase: Phase::Live,
                table: Raw(core::ptr::null_mut()),
                mappings: KVec::new(),
                in_flight: 0,
                callback_running: false,
                callback_task: 0,
                data_released: *kind != PinKind::Callback,
                orphan: None,
            }, "peermem_pin_state"),
            idle <- new_condvar!("peermem_pin_idle"),
            handler,
        })
    }

    /// Takes the table `get_pages` returned, after checking it.
    fn adopt_table(
        self: &Arc<Self>,
        table: *mut bindings::nvidia_p2p_page_table,
    ) -> Result<(), PinError> {
        let mut st = self.state.lock();
        if st.phase == Phase::Freed {
            // A callback ran between get_pages returning and now: the table is gone.
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
    fn begin_call(&self) -> Result<*mut bindings::nvidia_p2p_page_table> {
        let mut st = self.state.lock();
        if st.phase != Phase::Live || st.table.0.is_null() {
            return Err(EFAULT);
        }
        st.mappings.reserve(1, GFP_KERNEL)?;
        st.in_flight += 1;
        Ok(st.table.0)
    }

    /// Ends a driver call; wakes a callback waiting for calls to drain.
    fn end_call(&self, st: &mut PinState) {
        st.in_flight -= 1;
        if st.in_flight == 0 {
            self.idle.notify_all();
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
    shared.handler.on_free();

    let release = {
        let mut st = shared.state.lock();
        // Calls that started before the phase changed must end before the driver frees
        // the table, which it does as soon as this callback returns.
        while st.in_flight > 0 {
            shared.idle.wait(&mut st);
        }
        let table = core::mem::replace(&mut st.table, Raw(core::ptr::null_mut()));
        for m in st.mappings.drain_all() {
            if let Some(free) = shared.nv.syms.nv_free_dma_mapping {
                // SAFETY: `m` is a live mapping of the table; freeing it is allowed
                // inside the callback (docs/abi.md 1.1), and nothing else uses it any more.
                unsafe { free(m.0) };
            }
        }
        if !table.0.is_null() {
            if let Some(free) = shared.nv.syms.nv_free_page_table {
                // SAFETY: `table` is this pin's table; freeing it is the one thing the
                // callback must do with it (docs/abi.md 1.1).
                unsafe { free(table.0) };
            }
        }
        st.callback_running = false;
        st.callback_task = 0;
        shared.idle.notify_all();
        (st.take_data_release(), st.orphan.take())
    };
    let (release, _orphan) = release;
    if release {
        // SAFETY: the driver's reference came from `Arc::into_raw` in `NvP2p::pin` and
        // `take_data_release` returned true exactly once; `shared` is not used after.
        drop(unsafe { Arc::from_raw(data.cast::<PinShared<T>>().cast_const()) });
    }
}

/// A pinned range of GPU memory.
///
/// Dropping it unpins, unless a free callback already tore the pin down.
pub(crate) struct GpuPin<T: FreeHandler> {
    shared: Arc<PinShared<T>>,
}

impl<T: FreeHandler> GpuPin<T> {
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

    /// Maps the pinned range for DMA by `peer`. Fails with `EFAULT` once the memory was
    /// freed.
    pub(crate) fn dma_map(&self, peer: PciFunction) -> Result<DmaMapping<T>> {
        let s = &self.shared;
        let map = s.nv.syms.nv_dma_map_pages.ok_or(ENODEV)?;
        let table = s.begin_call()?;
        let mut raw = core::ptr::null_mut();
        // SAFETY: `map` is nvidia_p2p_dma_map_pages (type invariant of `NvP2p`);
        // `table` is live and stays so while the call is counted in flight; `peer` holds
        // a reference on the PCI function; `raw` is a valid out-pointer.
        let ret = unsafe { map(peer.as_raw(), table, &mut raw) };
        let made = ret == 0 && !raw.is_null();
        let addrs = match driver_result(ret) {
            // SAFETY: on success the driver handed `raw` out; it stays valid while the
            // call is counted in flight.
            Ok(()) => unsafe { read_dma_mapping(raw, s.range.pages()) }.map_err(|bad| {
                if bad != BadAnswer::NoMemory {
                    pr_err!("nvidia.ko returned an unusable DMA mapping ({:?})\n", bad);
                }
                Error::from(bad)
            }),
            Err(e) => Err(e),
        };
        let alive = {
            let mut st = s.state.lock();
            if made {
                // Recorded even when unusable, so that it is unmapped, or freed by a
                // callback, and never leaked. `begin_call` reserved the room.
                let _ = st.mappings.push_within_capacity(Raw(raw));
            }
            let alive = st.phase != Phase::Freed;
            s.end_call(&mut st);
            alive
        };
        match addrs {
            Ok(addrs) if alive => Ok(DmaMapping {
                shared: s.clone(),
                raw: Raw(raw),
                peer,
                addrs,
            }),
            res => {
                if made {
                    unmap_raw(s, &peer, raw);
                }
                Err(if alive {
                    res.err().unwrap_or(EFAULT)
                } else {
                    EFAULT
                })
            }
        }
    }
}

/// Unmaps `raw` unless a callback took over its freeing (then the callback frees it).
fn unmap_raw<T: FreeHandler>(
    s: &PinShared<T>,
    peer: &PciFunction,
    raw: *mut bindings::nvidia_p2p_dma_mapping,
) {
    let table = {
        let mut st = s.state.lock();
        let Some(i) = st.mappings.iter().position(|m| m.0 == raw) else {
            return;
        };
        if st.phase == Phase::Freed || st.table.0.is_null() {
            // The callback frees it (it may be this very thread, nested in it).
            return;
        }
        let _ = st.mappings.remove(i);
        st.in_flight += 1;
        st.table.0
    };
    if let Some(unmap) = s.nv.syms.nv_dma_unmap_pages {
        // SAFETY: `unmap` is nvidia_p2p_dma_unmap_pages; `raw` is a live mapping of
        // `table` for `peer`, removed from `mappings` so nobody else frees it; the table
        // stays live while the call is counted in flight.
        let ret = unsafe { unmap(peer.as_raw(), table, raw) };
        if let Err(e) = driver_result(ret) {
            pr_warn!("nvidia_p2p_dma_unmap_pages failed: {:?}\n", e);
        }
    }
    let mut st = s.state.lock();
    s.end_call(&mut st);
}

impl<T: FreeHandler> Drop for GpuPin<T> {
    fn drop(&mut self) {
        let s = &self.shared;
        let table = {
            let mut st = s.state.lock();
            if st.phase == Phase::Freed {
                // The driver tore the pin down. A callback still running elsewhere may
                // use what the owner is about to free: wait for it, unless this is that
                // very callback dropping the last reference.
                let me = kernel::task::Task::current_raw() as usize;
                while st.callback_running && st.callback_task != me {
                    s.idle.wait(&mut st);
                }
                return;
            }
            if st.phase != Phase::Live {
                return;
            }
            if s.kind == PinKind::Callback && Owner::current() != s.owner {
                // Outside the owning process nvidia.ko would not find the pin and
                // answer 0, keeping it and its callback (abi.md 1.4b). Leave it to
                // that callback: the driver keeps its `data` reference, and the module
                // stays loaded until the callback has run.
                st.phase = Phase::Orphaned;
                st.orphan = Some(ModuleRef::new());
                drop(st);
                if crate::glue::ratelimit(crate::stats::ORPHAN_RATELIMIT) {
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
                s.idle.wait(&mut st);
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

/// The DMA addresses of a pinned range for one PCI peer; dropping it unmaps.
pub(crate) struct DmaMapping<T: FreeHandler> {
    shared: Arc<PinShared<T>>,
    raw: Raw<bindings::nvidia_p2p_dma_mapping>,
    peer: PciFunction,
    addrs: KVec<u64>,
}

impl<T: FreeHandler> DmaMapping<T> {
    /// The DMA address of each 64 KiB page of the pin, in order (empty after
    /// [`DmaMapping::forget_addresses`]).
    pub(crate) fn addresses(&self) -> &[u64] {
        &self.addrs
    }

    /// Frees the copy of the addresses; the mapping itself stays.
    pub(crate) fn forget_addresses(&mut self) {
        self.addrs = KVec::new();
    }
}

impl<T: FreeHandler> Drop for DmaMapping<T> {
    fn drop(&mut self) {
        unmap_raw(&self.shared, &self.peer, self.raw.0);
    }
}

#[kunit_tests(peermem_nv_p2p)]
mod tests {
    use super::*;
    use core::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn page_table_versions() {
        // docs/abi.md 1.2: majors 1 (minor >= 2) and 2 are read; others are refused.
        assert!(page_table_version_ok(0x0001_0002));
        assert!(page_table_version_ok(0x0002_0000));
        assert!(page_table_version_ok(0x0001_0003));
        assert!(page_table_version_ok(0x0002_0001));
        assert!(!page_table_version_ok(0x0001_0001));
        assert!(!page_table_version_ok(0x0001_0000));
        assert!(!page_table_version_ok(0x0003_0000));
        assert!(!page_table_version_ok(0));
        assert!(!page_table_version_ok(0xdead_0002));
    }

    #[test]
    fn dma_mapping_versions() {
        assert!(dma_mapping_version_ok(0x0002_0003));
        assert!(dma_mapping_version_ok(0x0002_0004));
        assert!(!dma_mapping_version_ok(0x0002_0002));
        assert!(!dma_mapping_version_ok(0x0001_0003));
        assert!(!dma_mapping_version_ok(0x0003_0003));
    }

    #[test]
    fn driver_errnos_map_to_errors() {
        assert_eq!(driver_result(0), Ok(()));
        assert_eq!(driver_result(-22), Err(EINVAL));
        assert_eq!(driver_result(-12), Err(ENOMEM));
        assert_eq!(driver_result(-5), Err(EIO));
        assert_eq!(driver_result(-16), Err(EBUSY));
        assert_eq!(driver_result(-19), Err(ENODEV));
        assert_eq!(driver_result(-524), Err(ENOTSUPP));
        // Not an errno: a positive value, or beyond MAX_ERRNO.
        assert_eq!(driver_result(1), Err(EIO));
        assert_eq!(driver_result(-4096), Err(EIO));
        assert_eq!(driver_result(c_int::MIN), Err(EIO));
    }

    /// A page table made by hand, as a driver would hand it out.
    struct Table {
        pages: KVec<bindings::nvidia_p2p_page>,
        ptrs: KVec<*mut bindings::nvidia_p2p_page>,
        raw: bindings::nvidia_p2p_page_table,
    }

    fn table(version: u32, n: u32) -> Result<KBox<Table>> {
        let mut t = KBox::new(
            Table {
                pages: KVec::new(),
                ptrs: KVec::new(),
                raw: bindings::nvidia_p2p_page_table {
                    version,
                    page_size: bindings::nvidia_p2p_page_size_type_NVIDIA_P2P_PAGE_SIZE_64KB,
                    pages: core::ptr::null_mut(),
                    entries: n,
                    gpu_uuid: core::ptr::null_mut(),
                    flags: 0,
                },
            },
            GFP_KERNEL,
        )?;
        for i in 0..n {
            t.pages.push(
                bindings::nvidia_p2p_page {
                    physical_address: 0xe000_0000 + u64::from(i) * 0x1_0000,
                    u: bindings::nvidia_p2p_page__bindgen_ty_1 {
                        registers: bindings::nvidia_p2p_page__bindgen_ty_1__bindgen_ty_1 {
                            request: [0; 3],
                            reserved: [0; 3],
                        },
                    },
                },
                GFP_KERNEL,
            )?;
        }
        for i in 0..n as usize {
            let p: *mut bindings::nvidia_p2p_page = &mut t.pages[i];
            t.ptrs.push(p, GFP_KERNEL)?;
        }
        t.raw.pages = t.ptrs.as_mut_ptr();
        Ok(t)
    }

    fn check(t: &Table, pages: u64) -> Result<(), BadAnswer> {
        // SAFETY: `t.raw` and the arrays it points to live as long as `t`.
        unsafe { check_page_table(&t.raw, pages) }
    }

    #[test]
    fn page_tables_are_checked() -> Result {
        // SAFETY: a null pointer is allowed.
        let null = unsafe { check_page_table(core::ptr::null(), 1) };
        assert_eq!(null, Err(BadAnswer::Null));
        let t = table(0x0002_0000, 4)?;
        assert_eq!(check(&t, 4), Ok(()));
        assert_eq!(check(&t, 3), Err(BadAnswer::Entries(4)));
        let t = table(0x0001_0002, 2)?;
        assert_eq!(check(&t, 2), Ok(()));
        let t = table(0x0003_0000, 2)?;
        assert_eq!(check(&t, 2), Err(BadAnswer::Version(0x0003_0000)));
        let mut t = table(0x0002_0000, 2)?;
        t.raw.page_size = bindings::nvidia_p2p_page_size_type_NVIDIA_P2P_PAGE_SIZE_4KB;
        assert_eq!(check(&t, 2), Err(BadAnswer::PageSize(0)));
        let mut t = table(0x0002_0000, 2)?;
        t.ptrs[1] = core::ptr::null_mut();
        assert_eq!(check(&t, 2), Err(BadAnswer::NullEntry));
        t.raw.pages = core::ptr::null_mut();
        assert_eq!(check(&t, 2), Err(BadAnswer::NullEntry));
        Ok(())
    }

    #[test]
    fn dma_mappings_are_checked_and_copied() -> Result {
        let mut addrs = KVec::new();
        for i in 0..3u64 {
            addrs.push(0x1_0000_0000 + i * 0x1_0000, GFP_KERNEL)?;
        }
        let mut m = bindings::nvidia_p2p_dma_mapping {
            version: bindings::NVIDIA_P2P_DMA_MAPPING_VERSION,
            page_size_type: bindings::nvidia_p2p_page_size_type_NVIDIA_P2P_PAGE_SIZE_64KB,
            entries: 3,
            dma_addresses: addrs.as_mut_ptr(),
            private: core::ptr::null_mut(),
            pci_dev: core::ptr::null_mut(),
        };
        // SAFETY: `m` and `addrs` live across the calls.
        let read = |m: &bindings::nvidia_p2p_dma_mapping, n| unsafe { read_dma_mapping(m, n) };
        let copy = read(&m, 3).map_err(Error::from)?;
        assert_eq!(&copy[..], &addrs[..]);
        assert_eq!(read(&m, 4).err(), Some(BadAnswer::Entries(3)));
        m.version = 0x0002_0002;
        assert_eq!(read(&m, 3).err(), Some(BadAnswer::Version(0x0002_0002)));
        m.version = bindings::NVIDIA_P2P_DMA_MAPPING_VERSION;
        m.dma_addresses = core::ptr::null_mut();
        assert_eq!(read(&m, 3).err(), Some(BadAnswer::NullEntry));
        // SAFETY: a null pointer is allowed.
        let null = unsafe { read_dma_mapping(core::ptr::null(), 1) };
        assert_eq!(null.err(), Some(BadAnswer::Null));
        Ok(())
    }

    use crate::glue::no_symbols;

    // A stub driver: what its persistent get hands out is chosen per test.
    static MODE: AtomicU32 = AtomicU32::new(0);
    static PUTS: AtomicU32 = AtomicU32::new(0);
    static mut BAD_TABLE: bindings::nvidia_p2p_page_table = bindings::nvidia_p2p_page_table {
        version: 0x0009_0000,
        page_size: 1,
        pages: core::ptr::null_mut(),
        entries: 1,
        gpu_uuid: core::ptr::null_mut(),
        flags: 0,
    };

    /// # Safety
    ///
    /// Called by the wrapper under test, with the pointers it passes to a driver.
    unsafe extern "C" fn stub_get_persistent(
        _va: u64,
        _len: u64,
        table: *mut *mut bindings::nvidia_p2p_page_table,
        _flags: u32,
    ) -> c_int {
        let t = match MODE.load(Ordering::Relaxed) {
            // Success, but no table.
            0 => core::ptr::null_mut(),
            // A table of an unknown version.
            _ => core::ptr::addr_of_mut!(BAD_TABLE),
        };
        // SAFETY: the wrapper passes a valid out-pointer.
        unsafe { *table = t };
        0
    }

    /// # Safety
    ///
    /// Called by the wrapper under test, with the pointers it passes to a driver.
    unsafe extern "C" fn stub_put_persistent(
        _va: u64,
        _table: *mut bindings::nvidia_p2p_page_table,
        _flags: u32,
    ) -> c_int {
        PUTS.fetch_add(1, Ordering::Relaxed);
        0
    }

    /// # Safety
    ///
    /// Called by the wrapper under test, with the pointers it passes to a driver.
    unsafe extern "C" fn stub_get(
        _t: u64,
        _v: u32,
        _va: u64,
        _len: u64,
        _table: *mut *mut bindings::nvidia_p2p_page_table,
        _cb: bindings::nvidia_p2p_free_callback_t,
        _data: *mut c_void,
    ) -> c_int {
        -12
    }

    /// # Safety
    ///
    /// Called by the wrapper under test, with the pointers it passes to a driver.
    unsafe extern "C" fn stub_put(
        _t: u64,
        _v: u32,
        _va: u64,
        _table: *mut bindings::nvidia_p2p_page_table,
    ) -> c_int {
        0
    }

    /// # Safety
    ///
    /// Called by the wrapper under test, with the pointers it passes to a driver.
    unsafe extern "C" fn stub_free_table(_t: *mut bindings::nvidia_p2p_page_table) -> c_int {
        0
    }

    /// # Safety
    ///
    /// Called by the wrapper under test, with the pointers it passes to a driver.
    unsafe extern "C" fn stub_map(
        _p: *mut bindings::pci_dev,
        _t: *mut bindings::nvidia_p2p_page_table,
        _m: *mut *mut bindings::nvidia_p2p_dma_mapping,
    ) -> c_int {
        -5
    }

    /// # Safety
    ///
    /// Called by the wrapper under test, with the pointers it passes to a driver.
    unsafe extern "C" fn stub_unmap(
        _p: *mut bindings::pci_dev,
        _t: *mut bindings::nvidia_p2p_page_table,
        _m: *mut bindings::nvidia_p2p_dma_mapping,
    ) -> c_int {
        0
    }

    /// # Safety
    ///
    /// Called by the wrapper under test, with the pointers it passes to a driver.
    unsafe extern "C" fn stub_free_map(_m: *mut bindings::nvidia_p2p_dma_mapping) -> c_int {
        0
    }

    fn stub_driver(persistent: bool) -> bindings::peermem_symbols {
        let mut s = no_symbols();
        s.nv_get_pages = Some(stub_get);
        s.nv_put_pages = Some(stub_put);
        s.nv_free_page_table = Some(stub_free_table);
        s.nv_dma_map_pages = Some(stub_map);
        s.nv_dma_unmap_pages = Some(stub_unmap);
        s.nv_free_dma_mapping = Some(stub_free_map);
        if persistent {
            s.nv_get_pages_persistent = Some(stub_get_persistent);
            s.nv_put_pages_persistent = Some(stub_put_persistent);
        }
        s
    }

    #[test]
    fn missing_symbols_are_named() {
        assert_eq!(
            NvP2p::new(&no_symbols()).err(),
            Some(MissingSymbol("nvidia_p2p_get_pages"))
        );
        let mut s = stub_driver(false);
        s.nv_dma_unmap_pages = None;
        assert_eq!(
            NvP2p::new(&s).err(),
            Some(MissingSymbol("nvidia_p2p_dma_unmap_pages"))
        );
        // The persistent pair is optional (drivers before 535.14).
        let nv = NvP2p::new(&stub_driver(false));
        assert!(nv.as_ref().is_ok_and(|nv| !nv.has_persistent_api()));
        let nv = NvP2p::new(&stub_driver(true));
        assert!(nv.as_ref().is_ok_and(|nv| nv.has_persistent_api()));
    }

    #[test]
    fn unusable_driver_answers_fail_cleanly() -> Result {
        let nv = NvP2p::new(&stub_driver(true)).map_err(|_| EINVAL)?;
        let range = GpuRange::aligned(0x7f00_0000_0000, 0x1_0000).ok_or(EINVAL)?;
        // Success without a table: EIO, nothing to put.
        MODE.store(0, Ordering::Relaxed);
        let puts = PUTS.load(Ordering::Relaxed);
        assert_eq!(nv.pin_persistent(range).err(), Some(PinError::BadAnswer));
        assert_eq!(PUTS.load(Ordering::Relaxed), puts);
        // A table of an unknown version: EIO, and the pin is given back.
        MODE.store(1, Ordering::Relaxed);
        assert_eq!(nv.pin_persistent(range).err(), Some(PinError::BadAnswer));
        assert_eq!(PUTS.load(Ordering::Relaxed), puts + 1);
        // A driver error is passed through, as the driver's.
        assert_eq!(
            nv.pin(range, NoCallback).err(),
            Some(PinError::Driver(ENOMEM))
        );
        Ok(())
    }
}
