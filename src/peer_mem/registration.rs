// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A client registered with the core.

use core::ptr::NonNull;

use kernel::{
    ffi::{
        c_char,
        c_ulong,
        c_void, //
    },
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Full,
            Release, //
        },
        Arc, //
    },
};

use super::{
    callbacks::{
        acquire,
        dma_map,
        dma_unmap,
        get_page_size,
        get_pages,
        put_pages,
        release,
        RegShared,
        SLOT,
        SLOTS, //
    },
    ClientKind,
    Invalidator,
    PeerClient,
    PeerCore, //
};
use crate::bindings;

/// Slot `S` of the callbacks' table, claimed with the address of a registration's
/// shared part; cleared when dropped.
///
/// # Invariants
///
/// `SLOT[S]` holds the address it was claimed with while the guard lives.
struct Slot<const S: usize>(());

impl<const S: usize> Slot<S> {
    /// Claims the slot for `ptr`; `EBUSY` if another registration holds it.
    fn claim(ptr: *mut c_void) -> Result<Self> {
        // Checked when `S` is known: a slot past the table fails the build.
        const { assert!(S < SLOTS, "a registration's slot must be in the table") };
        SLOT[S]
            .cmpxchg(core::ptr::null_mut(), ptr, Full)
            .map_err(|_| EBUSY)?;
        // INVARIANT: the slot holds `ptr` from here on.
        Ok(Slot(()))
    }
}

impl<const S: usize> Drop for Slot<S> {
    fn drop(&mut self) {
        SLOT[S].store(core::ptr::null_mut(), Release);
    }
}

/// A client registered with the core; dropping it unregisters.
///
/// # Invariants
///
/// `handle` is the core's handle for `shared`, whose address `slot` holds; `shared`
/// is not moved or freed before the client is unregistered.
pub(crate) struct CoreRegistration<T: PeerClient, const S: usize> {
    core: PeerCore,
    handle: NonNull<c_void>,
    /// Declared before `shared`: cleared (after the unregistration) before the box goes.
    _slot: Slot<S>,
    shared: KBox<RegShared<T>>,
}

// SAFETY: the registration is an owned handle; the core may be called from any thread.
unsafe impl<T: PeerClient, const S: usize> Send for CoreRegistration<T, S> {}
// SAFETY: `&CoreRegistration` only reads immutable fields.
unsafe impl<T: PeerClient, const S: usize> Sync for CoreRegistration<T, S> {}

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

impl<T: PeerClient, const S: usize> CoreRegistration<T, S> {
    /// Registers `client` under `name` and `version` as a client of `kind`. It claims
    /// nothing until [`CoreRegistration::enable`].
    pub(crate) fn register(
        core: PeerCore,
        name: &CStr,
        version: &CStr,
        kind: ClientKind,
        client: Arc<T>,
    ) -> Result<Self> {
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
        let slot = Slot::<S>::claim(ptr.cast())?;
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
        // Refused: the slot is cleared as `slot` goes.
        let handle = NonNull::new(handle).ok_or(EINVAL)?;
        // INVARIANT: registered with `shared`, whose address is in the slot.
        Ok(Self {
            core,
            handle,
            _slot: slot,
            shared,
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

    /// Starts claiming memory: until this is called, the `acquire` callback answers the
    /// core "not mine" for every range, so no registration arrives before the module
    /// is fully set up.
    pub(crate) fn enable(&self) {
        self.shared.ready.store(true, Release);
    }
}

impl<T: PeerClient, const S: usize> Drop for CoreRegistration<T, S> {
    fn drop(&mut self) {
        self.shared.ready.store(false, Release);
        // SAFETY: `handle` is the core's handle for this client (type invariant). This
        // blocks until every region of the client was released; afterwards the core
        // makes no more calls into the client.
        unsafe { (self.core.unregister)(self.handle.as_ptr()) };
        // The slot is cleared as the registration's fields go, then the shared part.
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
