// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Safe wrapper of the RDMA peer-memory core (docs/abi.md, section 2).
//!
//! A [`PeerClient`] is registered with [`CoreRegistration::register`]; the registration
//! unregisters when dropped (which blocks until every region using the client has been
//! released). The core's C callbacks are turned into calls on the client with a typed
//! context: the box made from what `acquire` returned, handed back by value to
//! `release`, which the core calls exactly once per successful acquire.
//!
//! Files: `sg` (the core's `sg_table` and the SG lists handed to it), `callbacks` (the
//! C callbacks the core makes, and the slots they find their client through),
//! `registration` (the registered client). Tests: `copy_name` in the KUnit
//! suite `peermem_peer_mem`; the fake core's suites and the client suites in
//! `tests/` drive every callback (docs/testing.md).

use core::{
    marker::PhantomData,
    ptr::NonNull, //
};

use kernel::{
    ffi::{
        c_int,
        c_void, //
    },
    prelude::*,
    types::ForeignOwnable, //
};

use crate::{
    bindings,
    device::PciFunction,
    glue::{
        driver_result,
        MissingSymbol, //
    }, //
};

mod callbacks;
mod registration;
mod sg;

pub(crate) use registration::CoreRegistration;
pub(crate) use sg::{
    InstalledSg,
    SgError,
    SgHead,
    SgList, //
};

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

/// A peer-memory client: the callbacks the core makes, with a typed context. A trait
/// because this layer sits below the clients (docs/architecture.md) and must not name
/// their type: `Client<M>` implements it, for each mode.
///
/// The context is what the core carries as `client_context`: `acquire` hands it over
/// with [`ForeignOwnable::into_foreign`], the callbacks borrow it, `release` takes it
/// back. No allocation of its own.
pub(crate) trait PeerClient: Send + Sync + 'static {
    /// What `acquire` keeps for a range it claims.
    type Context: ForeignOwnable + Send + Sync + 'static;

    /// Whether `[addr, addr + size)` is this client's memory: `Ok(Some(ctx))` claims
    /// it, `Ok(None)` passes it to the next client. Runs in the registering process.
    fn acquire(&self, addr: u64, size: u64) -> Result<Option<Self::Context>>;
    /// Called once the range is claimed (the same raw address and size as `acquire`),
    /// with the core_context an invalidation names the region by.
    fn get_pages(&self, ctx: Borrowed<'_, Self>, write: bool, core_context: u64) -> Result;
    /// Maps it for `dev` into `sg` and returns the number of entries.
    fn dma_map(&self, ctx: Borrowed<'_, Self>, sg: SgHead, dev: DmaDevice<'_>) -> Result<u32>;
    /// Unmaps what `dma_map` mapped.
    fn dma_unmap(&self, ctx: Borrowed<'_, Self>, sg: SgHead);
    /// Frees what `get_pages` and `dma_map` built.
    fn put_pages(&self, ctx: Borrowed<'_, Self>, sg: SgHead);
    /// The page size of the SG entries.
    fn page_size(&self, ctx: Borrowed<'_, Self>) -> u64;
    /// The region is gone: last call for this context.
    fn release(&self, ctx: Self::Context);
}

/// A client's context, borrowed for one callback.
pub(crate) type Borrowed<'a, T> = <<T as PeerClient>::Context as ForeignOwnable>::Borrowed<'a>;

/// The DMA device the core maps a region for (the HCA's `dma_device`), borrowed for
/// one `dma_map` call.
///
/// # Invariants
///
/// `ptr` is null or a device that stays valid for `'a`.
pub(crate) struct DmaDevice<'a> {
    ptr: *mut bindings::device,
    _device: PhantomData<&'a bindings::device>,
}

impl<'a> DmaDevice<'a> {
    /// Borrows the device the core passed to `dma_map`.
    ///
    /// # Safety
    ///
    /// `ptr` is null or a device valid for the returned borrow's lifetime.
    pub(super) unsafe fn new(ptr: *mut bindings::device) -> Self {
        // INVARIANT: the caller's guarantee.
        Self {
            ptr,
            _device: PhantomData,
        }
    }

    /// The PCI function behind the device, borrowed as long as the device, or `None`
    /// when it is not a PCI device (software RDMA devices).
    pub(crate) fn pci_function(&self) -> Option<PciFunction<'a>> {
        // SAFETY: `ptr` is null or a device valid for `'a` (type invariant).
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
    /// # Safety
    ///
    /// The caller holds a context of a region of this client that was not released,
    /// and keeps its release from running until this returns: that is what keeps the
    /// registration, and so `func` and `handle`, alive (see the type invariant).
    pub(crate) unsafe fn invalidate(&self, core_context: u64) -> Result {
        // SAFETY: `func` and `handle` are valid while a region exists (type invariant,
        // and the caller holds an unreleased context); the core ignores stale ids.
        let ret = unsafe { (self.func)(self.handle.as_ptr(), core_context) };
        driver_result(ret)
    }
}
