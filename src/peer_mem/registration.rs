// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A client registered with the core, and the C callbacks the core makes into it.

use core::ptr::NonNull;

use kernel::{
    ffi::{
        c_char,
        c_int,
        c_ulong,
        c_void, //
    },
    prelude::*,
    sync::{
        atomic::{
            Acquire,
            Atomic,
            Full,
            Release, //
        },
        Arc, //
    },
    types::ForeignOwnable, //
};

use super::{
    sg::sg,
    Borrowed,
    ClientKind,
    DmaDevice,
    Invalidator,
    PeerClient,
    PeerCore, //
};
use crate::{
    bindings,
    compat::{
        self,
        AtomicPtr, //
    }, //
};

/// What the core's callbacks reach through the registration slot.
struct RegShared<T: PeerClient> {
    vtable: bindings::peer_memory_client_ex,
    /// Written by the core during registration when the client may invalidate.
    invalidate: bindings::invalidate_peer_memory,
    /// Set once the registration is complete and the client has what it needs; until
    /// then `acquire` claims nothing.
    ready: Atomic<bool>,
    client: Arc<T>,
}

/// One slot per concurrently registered client (the core's `acquire` carries no client
/// pointer, so the trampolines find their client through a static slot).
const SLOTS: usize = 2;
static SLOT: [AtomicPtr<c_void>; SLOTS] = [const { compat::null_atomic_ptr() }; SLOTS];

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
            get_pages: Some(get_pages::<T, S>),
            dma_map: Some(dma_map::<T, S>),
            dma_unmap: Some(dma_unmap::<T, S>),
            put_pages: Some(put_pages::<T, S>),
            get_page_size: Some(get_page_size::<T, S>),
            release: Some(release::<T, S>),
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
                ready: Atomic::new(false),
                client,
            },
            GFP_KERNEL,
        )?;
        let ptr: *mut RegShared<T> = &mut *shared;
        SLOT[S]
            .cmpxchg(core::ptr::null_mut(), ptr.cast(), Full)
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
            SLOT[S].store(core::ptr::null_mut(), Release);
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
        self.shared.ready.store(true, Release);
    }
}

impl<T: PeerClient, const S: usize> Drop for Registration<T, S> {
    fn drop(&mut self) {
        self.shared.ready.store(false, Release);
        // SAFETY: `handle` is the core's handle for this client (type invariant). This
        // blocks until every region of the client was released; afterwards the core
        // makes no more calls into the client.
        unsafe { (self.core.unregister)(self.handle.as_ptr()) };
        SLOT[S].store(core::ptr::null_mut(), Release);
    }
}

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
    // `S` (of type `T`: only `Registration<T, S>` fills the slot, and only its own
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
unsafe extern "C" fn acquire<T: PeerClient, const S: usize>(
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
unsafe extern "C" fn get_pages<T: PeerClient, const S: usize>(
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
unsafe extern "C" fn dma_map<T: PeerClient, const S: usize>(
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
unsafe extern "C" fn dma_unmap<T: PeerClient, const S: usize>(
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
unsafe extern "C" fn put_pages<T: PeerClient, const S: usize>(
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
unsafe extern "C" fn get_page_size<T: PeerClient, const S: usize>(
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
unsafe extern "C" fn release<T: PeerClient, const S: usize>(client_context: *mut c_void) {
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

#[cfg(peermem_kunit)]
#[kunit_tests(peermem_peer_mem)]
mod tests {
    use super::*;

    #[test]
    fn names_are_copied_with_room_for_the_nul() {
        let mut dst = [0 as c_char; 8];
        assert_eq!(copy_name(&mut dst, c"nv_mem"), Ok(()));
        assert_eq!(
            &dst[..7],
            &[
                b'n' as c_char,
                b'v' as c_char,
                b'_' as c_char,
                b'm' as c_char,
                b'e' as c_char,
                b'm' as c_char,
                0
            ]
        );
        // Seven bytes and the NUL fill eight; eight bytes do not fit.
        let mut dst = [0 as c_char; 8];
        assert_eq!(copy_name(&mut dst, c"1234567"), Ok(()));
        assert_eq!(dst[7], 0);
        assert_eq!(copy_name(&mut [0 as c_char; 8], c"12345678"), Err(EINVAL));
        assert_eq!(copy_name(&mut [0 as c_char; 8], c""), Ok(()));
    }

    #[test]
    fn the_version_leaves_the_extended_flag_byte_alone() {
        // `register` copies the version into all but the last of the 16 bytes (the
        // core reads a non-zero last byte as "extended client", docs/abi.md 2.2).
        let mut v = [0 as c_char; bindings::IB_PEER_MEMORY_VER_MAX as usize];
        let last = v.len() - 1;
        assert_eq!(copy_name(&mut v[..last], c"580.159.04"), Ok(()));
        assert_eq!(v[last], 0);
        assert_eq!(copy_name(&mut v[..last], c"123456789012345"), Err(EINVAL));
    }
}
