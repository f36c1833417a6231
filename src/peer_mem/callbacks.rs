// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The C callbacks the core makes into a registered client, and the slots they find
//! it through.

use kernel::{
    ffi::{
        c_int,
        c_ulong,
        c_void, //
    },
    prelude::*,
    sync::{
        atomic::{
            Acquire,
            Atomic, //
        },
        Arc, //
    },
    types::ForeignOwnable, //
};

use super::{
    sg::sg,
    Borrowed,
    DmaDevice,
    PeerClient, //
};
use crate::{
    bindings,
    compat::{
        self,
        AtomicPtr, //
    }, //
};

/// What the core's callbacks reach through the registration slot.
pub(super) struct RegShared<T: PeerClient> {
    pub(super) vtable: bindings::peer_memory_client_ex,
    /// Written by the core during registration when the client may invalidate.
    pub(super) invalidate: bindings::invalidate_peer_memory,
    /// Set once the registration is complete and the client has what it needs; until
    /// then `acquire` claims nothing.
    pub(super) ready: Atomic<bool>,
    pub(super) client: Arc<T>,
}

/// One slot per concurrently registered client (the core's `acquire` carries no client
/// pointer, so the trampolines find their client through a static slot).
pub(super) const SLOTS: usize = 2;
pub(super) static SLOT: [AtomicPtr<c_void>; SLOTS] = [const { compat::null_atomic_ptr() }; SLOTS];

/// The client in slot `S` and the context the core carries, borrowed for one callback.
///
/// # Safety
///
/// `client_context` came from a successful [`acquire`] of the client in slot `S`, and
/// its `release` has not run.
unsafe fn region<'a, T: PeerClient, const S: usize>(
    client_context: *mut c_void,
) -> Option<(&'a T, Borrowed<'a, T>)> {
    let shared = SLOT[S].load(Acquire).cast::<RegShared<T>>();
    // SAFETY: a non-null slot points to the live registration of the client in slot
    // `S` (of type `T`: only `CoreRegistration<T, S>` fills the slot, and only its own
    // callbacks read it); the core's unregistration, after which it is freed, waits
    // for every region, and the caller's region is not released.
    let shared = unsafe { shared.as_ref() }?;
    // SAFETY: `client_context` came from `into_foreign` in `acquire`, and
    // `from_foreign` (in `release`) has not run (the caller's guarantee).
    let ctx = unsafe { T::Context::borrow(client_context) };
    Some((&shared.client, ctx))
}

/// The core's `acquire` for the client in slot `S`.
///
/// # Safety
///
/// Called by the core with a valid `client_context` out-pointer (or null).
pub(super) unsafe extern "C" fn acquire<T: PeerClient, const S: usize>(
    addr: c_ulong,
    size: usize,
    _private: *mut c_void,
    _name: *mut c_char,
    client_context: *mut *mut c_void,
) -> c_int {
    let shared = SLOT[S].load(Acquire).cast::<RegShared<T>>();
    if shared.is_null() || client_context.is_null() {
        return 0;
    }
    // SAFETY: a non-null slot points to a live registration: it is cleared only after
    // the core stopped calling into the client (unregistration).
    let shared = unsafe { &*shared };
    if !shared.ready.load(Acquire) {
        return 0;
    }
    match shared.client.acquire(addr as u64, size as u64) {
        Ok(Some(ctx)) => {
            // SAFETY: `client_context` is the core's valid out-pointer.
            unsafe { *client_context = ctx.into_foreign() };
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
pub(super) unsafe extern "C" fn get_pages<T: PeerClient, const S: usize>(
    _addr: c_ulong,
    _size: usize,
    write: c_int,
    _force: c_int,
    _sg_head: *mut bindings::sg_table,
    client_context: *mut c_void,
    core_context: u64,
) -> c_int {
    // SAFETY: the core passes the context of a successful acquire, before release.
    let Some((client, ctx)) = (unsafe { region::<T, S>(client_context) }) else {
        return EINVAL.to_errno();
    };
    match client.get_pages(ctx, write != 0, core_context) {
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
pub(super) unsafe extern "C" fn dma_map<T: PeerClient, const S: usize>(
    sg_head: *mut bindings::sg_table,
    client_context: *mut c_void,
    dma_device: *mut bindings::device,
    _dmasync: c_int,
    nmap: *mut c_int,
) -> c_int {
    // SAFETY: the core passes the context of a successful acquire, before release.
    let region = unsafe { region::<T, S>(client_context) };
    let (Some((client, ctx)), Some(sg), false) = (region, sg(sg_head), nmap.is_null()) else {
        return EINVAL.to_errno();
    };
    // SAFETY: the core passes a valid device (or null) for the duration of this call,
    // which the borrow does not outlive.
    let dev = unsafe { DmaDevice::new(dma_device) };
    match client.dma_map(ctx, sg, dev) {
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
pub(super) unsafe extern "C" fn dma_unmap<T: PeerClient, const S: usize>(
    sg_head: *mut bindings::sg_table,
    client_context: *mut c_void,
    _dma_device: *mut bindings::device,
) -> c_int {
    // SAFETY: the core passes the context of a successful acquire, before release.
    let region = unsafe { region::<T, S>(client_context) };
    if let (Some((client, ctx)), Some(sg)) = (region, sg(sg_head)) {
        client.dma_unmap(ctx, sg);
    }
    // The core requires 0 (docs/abi.md 2.2).
    0
}

/// The core's `put_pages`.
///
/// # Safety
///
/// `client_context` comes from a successful [`acquire`] whose release has not run.
pub(super) unsafe extern "C" fn put_pages<T: PeerClient, const S: usize>(
    sg_head: *mut bindings::sg_table,
    client_context: *mut c_void,
) {
    // SAFETY: the core passes the context of a successful acquire, before release.
    let region = unsafe { region::<T, S>(client_context) };
    if let (Some((client, ctx)), Some(sg)) = (region, sg(sg_head)) {
        client.put_pages(ctx, sg);
    }
}

/// The core's `get_page_size`.
///
/// # Safety
///
/// `client_context` comes from a successful [`acquire`] whose release has not run.
pub(super) unsafe extern "C" fn get_page_size<T: PeerClient, const S: usize>(
    client_context: *mut c_void,
) -> c_ulong {
    // SAFETY: the core passes the context of a successful acquire, before release.
    match unsafe { region::<T, S>(client_context) } {
        Some((client, ctx)) => client.page_size(ctx) as c_ulong,
        None => 0,
    }
}

/// The core's `release`.
///
/// # Safety
///
/// `client_context` comes from a successful [`acquire`]; the core calls this once.
pub(super) unsafe extern "C" fn release<T: PeerClient, const S: usize>(
    client_context: *mut c_void,
) {
    if client_context.is_null() {
        return;
    }
    let shared = SLOT[S].load(Acquire).cast::<RegShared<T>>();
    // SAFETY: the pointer came from `into_foreign` in `acquire`; the core calls release
    // exactly once per successful acquire, and never uses the context afterwards.
    let ctx = unsafe { T::Context::from_foreign(client_context) };
    // SAFETY: as in `region`: the slot's registration outlives every region of it.
    if let Some(shared) = unsafe { shared.as_ref() } {
        shared.client.release(ctx);
    }
}
