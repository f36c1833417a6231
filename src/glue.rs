// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The module's own C glue (`src/glue.c`), seen from Rust, and what the wrappers of
//! the foreign APIs share (nvidia.ko's P2P API, the RDMA peer-memory core): the
//! foreign functions the loader resolved, a C return value as a kernel error, and the
//! name of a foreign function it did not resolve.

use kernel::{
    ffi::c_int,
    prelude::*, //
};

use crate::bindings;

/// The module version (the `VERSION` file, as `MODULE_VERSION` declares it).
pub(crate) fn version() -> &'static CStr {
    let ptr = core::ptr::addr_of!(bindings::peermem_version);
    // SAFETY: `ptr` points to a NUL-terminated string that lives as long as the module
    // and is never modified.
    unsafe { CStr::from_char_ptr(ptr.cast()) }
}

/// The foreign functions, each `None` where its exporter was not loaded before this
/// module (weak references resolved by the module loader).
pub(crate) fn resolve_symbols() -> bindings::peermem_symbols {
    let mut syms = no_symbols();
    // SAFETY: `syms` is a valid, writable `peermem_symbols`; the function only stores
    // the addresses of the weak references into it.
    unsafe { bindings::peermem_resolve_symbols(&mut syms) };
    syms
}

/// The module parameters given at load time (declared by the C glue, so that they
/// show in sysfs).
pub(crate) fn params() -> bindings::peermem_params {
    let mut p = bindings::peermem_params {
        persistent_api_support: 0,
        peerdirect_support: 0,
    };
    // SAFETY: `p` is a valid, writable `peermem_params`; the function only stores the
    // parameters' values into it.
    unsafe { bindings::peermem_get_params(&mut p) };
    p
}

/// Maps a foreign return value to a result: 0 is success, a negative errno is that
/// error, anything else (not a valid errno) is `EIO`.
pub(crate) fn driver_result(ret: c_int) -> Result {
    match ret {
        0 => Ok(()),
        -4095..=-1 => Err(Error::from_errno(ret)),
        _ => Err(EIO),
    }
}

/// The first missing foreign function, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MissingSymbol(pub(crate) &'static str);

/// A symbol table with every function absent.
pub(crate) const fn no_symbols() -> bindings::peermem_symbols {
    bindings::peermem_symbols {
        nv_get_pages: None,
        nv_put_pages: None,
        nv_free_page_table: None,
        nv_dma_map_pages: None,
        nv_dma_unmap_pages: None,
        nv_free_dma_mapping: None,
        nv_get_pages_persistent: None,
        nv_put_pages_persistent: None,
        ib_register_client: None,
        ib_unregister_client: None,
    }
}

/// Whether a message of the given kind may be printed now (per-kind rate limit).
pub(crate) fn ratelimit(kind: u32) -> bool {
    // SAFETY: `peermem_ratelimit` accepts any value (it clamps out-of-range kinds).
    unsafe { bindings::peermem_ratelimit(kind) != 0 }
}

/// Test builds only: the pause point between a callback pin's link into the registry
/// and the record of its id (`link` in src/client/callback.rs), where a client suite
/// may park the registering thread while a free callback runs (the fake nvidia.ko's
/// `FAKE_NV_PAUSE_CLIENT_BEFORE_LINK`). Counts a hit; returns at once unless armed.
#[cfg(peermem_kunit)]
pub(crate) fn test_pause_before_link() {
    // The C glue's test-only function (src/glue.c, built with PEERMEM_KUNIT), not in
    // the generated bindings, which describe the production build.
    unsafe extern "C" {
        fn peermem_test_pause_before_link();
    }
    // SAFETY: the function takes no argument and touches nothing of the caller's; it
    // may sleep, and is called only from process context with no lock held
    // (`link` in src/client/callback.rs, in the core's acquire).
    unsafe { peermem_test_pause_before_link() };
}

/// A reference on this module, dropped with the guard.
///
/// Held by every live registration, by a callback pin left to its free callback
/// (see `nv_p2p`), and by every free callback while it runs: `rmmod` then fails
/// with "in use" instead of unloading code that nvidia.ko or the core may still call.
///
/// # Invariants
///
/// The guard owns one reference on this module, taken in [`ModuleRef::new`].
pub(crate) struct ModuleRef(());

impl ModuleRef {
    /// Takes a reference on this module.
    pub(crate) fn new() -> Self {
        // SAFETY: the module is live (this code runs in it, called by a holder of
        // one of its references or by the loader); taking a reference on a live
        // module is always allowed.
        unsafe { bindings::peermem_module_get() };
        // INVARIANT: the reference was just taken.
        ModuleRef(())
    }
}

impl Drop for ModuleRef {
    fn drop(&mut self) {
        // SAFETY: the guard owns one reference (type invariant), given back once here.
        unsafe { bindings::peermem_module_put() }
    }
}
