// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Safe wrapper of the RDMA peer-memory core (docs/abi.md, section 2).
//!
//! A [`PeerClient`] is registered with [`Registration::register`]; the registration
//! unregisters when dropped (which blocks until every region using the client has been
//! released). The core's C callbacks are turned into calls on the client with a typed
//! context: the box made from what `acquire` returned, handed back by value to
//! `release`, which the core calls exactly once per successful acquire.

use core::{
    ptr::NonNull,
    sync::atomic::{AtomicBool, AtomicPtr, Ordering},
};

use kernel::{
    ffi::{c_char, c_int, c_ulong, c_void},
    prelude::*,
    sync::Arc,
};

use crate::{bindings, device::PciFunction, nv_p2p::MissingSymbol};

/// The core's functions, resolved when this module was loaded.
///
/// # Invariants
///
/// Both functions are present and are the core's exports.
#[derive(Clone, Copy)]
pub(crate) struct PeerCore {
    register: unsafe extern "C" fn(
        *const bindings::peer_memory_client,
        *mut bindings::invalidate_peer_memory,
    ) -> *mut c_void,
    unregister: unsafe extern "C" fn(*mut c_void),
}

impl PeerCore {
    /// Takes the core's functions from the module's weak references.
    pub(crate) fn new(syms: &bindings::peermem_symbols) -> Result<Self, MissingSymbol> {
        match (syms.ib_register_client, syms.ib_unregister_client) {
            // INVARIANT: both present.
            (Some(register), Some(unregister)) => Ok(Self {
                register,
                unregister,
            }),
            (None, _) => Err(MissingSymbol("ib_register_peer_memory_client")),
            (_, None) => Err(MissingSymbol("ib_unregister_peer_memory_client")),
        }
    }
}

/// How a client takes part in invalidation (docs/abi.md 2.2, 2.4).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum ClientKind {
    /// Never invalidates (persistent pins).
    NoInvalidation,
    /// Invalidates; the core unmaps from inside the client's invalidation.
    Invalidate,
    /// Invalidates and unmaps by itself (extended client, INVALIDATE_UNMAPS).
    InvalidateUnmaps,
}

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

/// An SG list this module built for the core: its own record of what it allocated.
///
/// The core is handed a copy of the table header ([`SgHead::install`]) and may zero
/// its copy (it does after an invalidation); the entries are freed from this record.
///
/// # Invariants
///
/// `table` was filled by `peermem_sg_build` and is freed only by `Drop`.
pub(crate) struct SgList {
    table: bindings::sg_table,
}

// SAFETY: the list is owned memory, freed once, from any thread.
unsafe impl Send for SgList {}
// SAFETY: `&SgList` only reads the header.
unsafe impl Sync for SgList {}

impl SgList {
    /// Builds DMA-mapped entries `(address, length)`.
    pub(crate) fn new(addrs: &[u64], lens: &[u32]) -> Result<Self> {
        if addrs.len() != lens.len() || addrs.is_empty() {
            return Err(EINVAL);
        }
        let n = u32::try_from(addrs.len()).map_err(|_| EINVAL)?;
        // SAFETY: an all-zero `sg_table` is the empty table.
        let mut table: bindings::sg_table = unsafe { core::mem::zeroed() };
        // SAFETY: `table` is a valid, empty table; both arrays hold `n` elements. On
        // failure the glue leaves nothing allocated.
        let ret =
            unsafe { bindings::peermem_sg_build(&mut table, addrs.as_ptr(), lens.as_ptr(), n) };
        crate::nv_p2p::driver_result(ret)?;
        // INVARIANT: filled by `peermem_sg_build` just above.
        Ok(SgList { table })
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> u32 {
        self.table.nents
    }
}

impl Drop for SgList {
    fn drop(&mut self) {
        // SAFETY: `table` was filled by `peermem_sg_build` and is freed only here
        // (type invariant).
        unsafe { bindings::peermem_sg_free(&mut self.table) };
    }
}

/// A peer-memory client: the callbacks the core makes, with a typed context.
pub(crate) trait PeerClient: Send + Sync + 'static {
    /// What `acquire` keeps for a range it claims.
    type Context: Send + Sync + 'static;

    /// Whether `[addr, addr + size)` is this client's memory: `Ok(Some(ctx))` claims
    /// it, `Ok(None)` passes it to the next client. Runs in the registering process.
    fn acquire(&self, addr: u64, size: u64) -> Result<Option<Self::Context>>;
    /// Pins the claimed range (the same raw address and size as `acquire`).
    fn get_pages(&self, ctx: &Self::Context, write: bool, core_context: u64) -> Result;
    /// Maps it for `dev` into `sg` and returns the number of entries.
    fn dma_map(&self, ctx: &Self::Context, sg: SgHead, dev: DmaDevice) -> Result<u32>;
    /// Unmaps what `dma_map` mapped.
    fn dma_unmap(&self, ctx: &Self::Context, sg: SgHead);
    /// Frees what `get_pages` and `dma_map` built.
    fn put_pages(&self, ctx: &Self::Context, sg: SgHead);
    /// The page size of the SG entries.
    fn page_size(&self, ctx: &Self::Context) -> u64;
    /// The region is gone: last call for this context.
    fn release(&self, ctx: Self::Context);
}

/// The DMA device the core maps a region for (the HCA's `dma_device`).
pub(crate) struct DmaDevice {
    ptr: *mut bindings::device,
}

impl DmaDevice {
    /// A reference on the PCI function behind the device, or `None` when it is not a PCI
    /// device (software RDMA devices).
    pub(crate) fn pci_function(&self) -> Option<PciFunction> {
        // SAFETY: the core passes a valid device (or null) for the duration of the
        // dma_map call, which is the only place a `DmaDevice` exists.
        unsafe { PciFunction::from_device(self.ptr) }
    }
}

/// The core's invalidation entry point for one registered client.
///
/// # Invariants
///
/// `func` is the function the core stored at registration and `handle` the
/// registration it returned; both stay valid while a region of the client exists,
/// because unregistering waits for every region to be released.
#[derive(Clone, Copy)]
pub(crate) struct Invalidator {
    func: unsafe extern "C" fn(*mut c_void, u64) -> c_int,
    handle: NonNull<c_void>,
}

// SAFETY: the core's invalidate may be called from any thread.
unsafe impl Send for Invalidator {}
// SAFETY: see `Send`; the type is an immutable pair of pointers.
unsafe impl Sync for Invalidator {}

impl Invalidator {
    /// Tells the core that the memory of region `core_context` is being freed.
    ///
    /// The caller must hold a context of that region that was not yet released: that is
    /// what keeps the registration alive (see the type invariant).
    pub(crate) fn invalidate(&self, core_context: u64) -> Result {
        // SAFETY: `func` and `handle` are valid while a region exists (type invariant,
        // and the caller holds an unreleased context); the core ignores stale ids.
        let ret = unsafe { (self.func)(self.handle.as_ptr(), core_context) };
        crate::nv_p2p::driver_result(ret)
    }
}

/// What the core's callbacks reach through the registration slot.
struct RegShared<T: PeerClient> {
    vtable: bindings::peer_memory_client_ex,
    /// Written by the core during registration when the client may invalidate.
    invalidate: bindings::invalidate_peer_memory,
    /// Set once the registration is complete and the client has what it needs; until
    /// then `acquire` claims nothing.
    ready: AtomicBool,
    client: Arc<T>,
}

/// One slot per concurrently registered client (the core's `acquire` carries no client
/// pointer, so the trampolines find their client through a static slot).
const SLOTS: usize = 2;
static SLOT: [AtomicPtr<c_void>; SLOTS] = [const { AtomicPtr::new(core::ptr::null_mut()) }; SLOTS];

/// A client registered with the core; dropping it unregisters.
///
/// # Invariants
///
/// `handle` is the core's handle for `shared`, whose address is in `SLOT[S]`; `shared`
/// is not moved or freed before the client is unregistered.
pub(crate) struct Registration<T: PeerClient, const S: usize> {
    core: PeerCore,
    shared: KBox<RegShared<T>>,
    handle: NonNull<c_void>,
}

// SAFETY: the registration is an owned handle; the core may be called from any thread.
unsafe impl<T: PeerClient, const S: usize> Send for Registration<T, S> {}
// SAFETY: `&Registration` only reads immutable fields.
unsafe impl<T: PeerClient, const S: usize> Sync for Registration<T, S> {}

/// The context box the core carries as `client_context`.
struct Ctx<T: PeerClient> {
    client: Arc<T>,
    ctx: T::Context,
}

fn copy_name(dst: &mut [c_char], src: &CStr) -> Result {
    let bytes = src.to_bytes();
    if bytes.len() >= dst.len() {
        return Err(EINVAL);
    }
    for (d, s) in dst.iter_mut().zip(bytes) {
        *d = *s as c_char;
    }
    Ok(())
}

impl<T: PeerClient, const S: usize> Registration<T, S> {
    /// Registers `client` under `name` and `version` as a client of `kind`. It claims
    /// nothing until [`Registration::enable`].
    pub(crate) fn register(
        core: PeerCore,
        name: &CStr,
        version: &CStr,
        kind: ClientKind,
        client: Arc<T>,
    ) -> Result<Self> {
        if S >= SLOTS {
            return Err(EINVAL);
        }
        let mut client_ops = bindings::peer_memory_client {
            name: [0; bindings::IB_PEER_MEMORY_NAME_MAX as usize],
            version: [0; bindings::IB_PEER_MEMORY_VER_MAX as usize],
            acquire: Some(acquire::<T, S>),
            get_pages: Some(get_pages::<T>),
            dma_map: Some(dma_map::<T>),
            dma_unmap: Some(dma_unmap::<T>),
            put_pages: Some(put_pages::<T>),
            get_page_size: Some(get_page_size::<T>),
            release: Some(release::<T>),
        };
        copy_name(&mut client_ops.name, name)?;
        // The version string leaves its last byte alone: the core reads a non-zero last
        // byte as "extended client" (docs/abi.md 2.2).
        copy_name(
            &mut client_ops.version[..bindings::IB_PEER_MEMORY_VER_MAX as usize - 1],
            version,
        )?;
        let mut flags = 0;
        let mut ex_size = 0;
        if kind == ClientKind::InvalidateUnmaps {
            let last = client_ops.version.len() - 1;
            client_ops.version[last] = 1;
            ex_size = core::mem::size_of::<bindings::peer_memory_client_ex>() as c_ulong;
            flags = bindings::PEER_MEM_INVALIDATE_UNMAPS;
        }
        let mut shared = KBox::new(
            RegShared {
                vtable: bindings::peer_memory_client_ex {
                    client: client_ops,
                    ex_size,
                    flags,
                },
                invalidate: None,
                ready: AtomicBool::new(false),
                client,
            },
            GFP_KERNEL,
        )?;
        let ptr: *mut RegShared<T> = &mut *shared;
        SLOT[S]
            .compare_exchange(
                core::ptr::null_mut(),
                ptr.cast(),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .map_err(|_| EBUSY)?;
        let invalidate_out = if kind == ClientKind::NoInvalidation {
            core::ptr::null_mut()
        } else {
            // SAFETY: `ptr` points to the boxed `shared`, alive and not moved.
            unsafe { core::ptr::addr_of_mut!((*ptr).invalidate) }
        };
        // SAFETY: `ptr` is valid; the vtable is the first field of the extended client
        // and stays at this address until unregistration (it is boxed and the box lives
        // in the returned registration); `invalidate_out` is null or points into it.
        let handle =
            unsafe { (core.register)(core::ptr::addr_of!((*ptr).vtable.client), invalidate_out) };
        let Some(handle) = NonNull::new(handle) else {
            SLOT[S].store(core::ptr::null_mut(), Ordering::Release);
            return Err(EINVAL);
        };
        // INVARIANT: registered with `shared`, whose address is in the slot.
        Ok(Self {
            core,
            shared,
            handle,
        })
    }

    /// The core's invalidation entry, when the client was registered as one that may
    /// invalidate and the core provided it.
    pub(crate) fn invalidator(&self) -> Option<Invalidator> {
        // INVARIANT: the core's function and handle of this registration.
        self.shared.invalidate.map(|func| Invalidator {
            func,
            handle: self.handle,
        })
    }

    /// Starts claiming memory.
    pub(crate) fn enable(&self) {
        self.shared.ready.store(true, Ordering::Release);
    }
}

impl<T: PeerClient, const S: usize> Drop for Registration<T, S> {
    fn drop(&mut self) {
        self.shared.ready.store(false, Ordering::Release);
        // SAFETY: `handle` is the core's handle for this client (type invariant). This
        // blocks until every region of the client was released; afterwards the core
        // makes no more calls into the client.
        unsafe { (self.core.unregister)(self.handle.as_ptr()) };
        SLOT[S].store(core::ptr::null_mut(), Ordering::Release);
    }
}

/// Borrows the context the core carries.
///
/// # Safety
///
/// `client_context` came from a successful [`acquire`] and `release` has not run.
unsafe fn ctx<'a, T: PeerClient>(client_context: *mut c_void) -> &'a Ctx<T> {
    // SAFETY: the box made in `acquire` lives until `release` (the caller's guarantee).
    unsafe { &*client_context.cast::<Ctx<T>>() }
}

/// Turns the core's `sg_head` into an [`SgHead`]; `None` if null.
fn sg(ptr: *mut bindings::sg_table) -> Option<SgHead> {
    // INVARIANT: the core passes the region's own table, alive until release.
    NonNull::new(ptr).map(|ptr| SgHead { ptr })
}

/// The core's `acquire` for the client in slot `S`.
///
/// # Safety
///
/// Called by the core with a valid `client_context` out-pointer (or null).
unsafe extern "C" fn acquire<T: PeerClient, const S: usize>(
    addr: c_ulong,
    size: usize,
    _private: *mut c_void,
    _name: *mut c_char,
    client_context: *mut *mut c_void,
) -> c_int {
    let shared = SLOT[S].load(Ordering::Acquire).cast::<RegShared<T>>();
    if shared.is_null() || client_context.is_null() {
        return 0;
    }
    // SAFETY: a non-null slot points to a live registration: it is cleared only after
    // the core stopped calling into the client (unregistration).
    let shared = unsafe { &*shared };
    if !shared.ready.load(Ordering::Acquire) {
        return 0;
    }
    // The box comes first: once the client has claimed the range, nothing may fail
    // before the core holds the context (and will release it).
    let Ok(slot) = KBox::<Ctx<T>>::new_uninit(GFP_KERNEL) else {
        return ENOMEM.to_errno();
    };
    match shared.client.acquire(addr as u64, size as u64) {
        Ok(Some(ctx)) => {
            let boxed = KBox::write(
                slot,
                Ctx {
                    client: shared.client.clone(),
                    ctx,
                },
            );
            // SAFETY: `client_context` is the core's valid out-pointer.
            unsafe { *client_context = KBox::into_raw(boxed).cast() };
            1
        }
        Ok(None) => 0,
        Err(e) => e.to_errno(),
    }
}

/// The core's `get_pages`.
///
/// # Safety
///
/// `client_context` comes from a successful [`acquire`] whose release has not run.
unsafe extern "C" fn get_pages<T: PeerClient>(
    _addr: c_ulong,
    _size: usize,
    write: c_int,
    _force: c_int,
    _sg_head: *mut bindings::sg_table,
    client_context: *mut c_void,
    core_context: u64,
) -> c_int {
    // SAFETY: the core passes the context of a successful acquire, before release.
    let c = unsafe { ctx::<T>(client_context) };
    match c.client.get_pages(&c.ctx, write != 0, core_context) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// The core's `dma_map`.
///
/// # Safety
///
/// `client_context` comes from a successful [`acquire`] whose release has not run;
/// `sg_head` is the region's table, `dma_device` a valid device, `nmap` writable.
unsafe extern "C" fn dma_map<T: PeerClient>(
    sg_head: *mut bindings::sg_table,
    client_context: *mut c_void,
    dma_device: *mut bindings::device,
    _dmasync: c_int,
    nmap: *mut c_int,
) -> c_int {
    // SAFETY: the core passes the context of a successful acquire, before release.
    let c = unsafe { ctx::<T>(client_context) };
    let (Some(sg), false) = (sg(sg_head), nmap.is_null()) else {
        return EINVAL.to_errno();
    };
    match c.client.dma_map(&c.ctx, sg, DmaDevice { ptr: dma_device }) {
        Ok(n) => {
            // SAFETY: `nmap` is the core's valid out-pointer (checked non-null).
            unsafe { *nmap = n as c_int };
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// The core's `dma_unmap`.
///
/// # Safety
///
/// `client_context` comes from a successful [`acquire`] whose release has not run.
unsafe extern "C" fn dma_unmap<T: PeerClient>(
    sg_head: *mut bindings::sg_table,
    client_context: *mut c_void,
    _dma_device: *mut bindings::device,
) -> c_int {
    // SAFETY: the core passes the context of a successful acquire, before release.
    let c = unsafe { ctx::<T>(client_context) };
    if let Some(sg) = sg(sg_head) {
        c.client.dma_unmap(&c.ctx, sg);
    }
    // The core requires 0 (docs/abi.md 2.2).
    0
}

/// The core's `put_pages`.
///
/// # Safety
///
/// `client_context` comes from a successful [`acquire`] whose release has not run.
unsafe extern "C" fn put_pages<T: PeerClient>(
    sg_head: *mut bindings::sg_table,
    client_context: *mut c_void,
) {
    // SAFETY: the core passes the context of a successful acquire, before release.
    let c = unsafe { ctx::<T>(client_context) };
    if let Some(sg) = sg(sg_head) {
        c.client.put_pages(&c.ctx, sg);
    }
}

/// The core's `get_page_size`.
///
/// # Safety
///
/// `client_context` comes from a successful [`acquire`] whose release has not run.
unsafe extern "C" fn get_page_size<T: PeerClient>(client_context: *mut c_void) -> c_ulong {
    // SAFETY: the core passes the context of a successful acquire, before release.
    let c = unsafe { ctx::<T>(client_context) };
    c.client.page_size(&c.ctx) as c_ulong
}

/// The core's `release`.
///
/// # Safety
///
/// `client_context` comes from a successful [`acquire`]; the core calls this once.
unsafe extern "C" fn release<T: PeerClient>(client_context: *mut c_void) {
    if client_context.is_null() {
        return;
    }
    // SAFETY: the box was made in `acquire`; the core calls release exactly once per
    // successful acquire, and never uses the context afterwards.
    let c = unsafe { KBox::from_raw(client_context.cast::<Ctx<T>>()) };
    let Ctx { client, ctx } = KBox::into_inner(c);
    client.release(ctx);
}
