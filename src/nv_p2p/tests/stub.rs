// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A stub nvidia.ko for the `peermem_nv_p2p` suite: what its persistent get hands out
//! is chosen per test (`MODE`), and its puts and unmaps are counted.

use kernel::{
    ffi::c_int,
    prelude::*,
    sync::atomic::{
        Atomic,
        Relaxed, //
    },
};

use crate::{
    bindings,
    compat::{
        self,
        AtomicPtr, //
    },
    glue::no_symbols, //
};

// A stub driver: what its persistent get hands out is chosen per test.
pub(super) static MODE: Atomic<u32> = Atomic::new(0);
pub(super) static PUTS: Atomic<u32> = Atomic::new(0);
/// The unmaps made, and the puts counted at the last one.
pub(super) static UNMAPS: Atomic<u32> = Atomic::new(0);
pub(super) static PUTS_AT_UNMAP: Atomic<u32> = Atomic::new(0);
/// What the persistent get hands out in mode 2.
pub(super) static GOOD_TABLE: AtomicPtr<bindings::nvidia_p2p_page_table> =
    compat::null_atomic_ptr();
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
    let t = match MODE.load(Relaxed) {
        // Success, but no table.
        0 => core::ptr::null_mut(),
        // A valid table, set by the test.
        2 => GOOD_TABLE.load(Relaxed),
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
    PUTS.fetch_add(1, Relaxed);
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
    table: *mut *mut bindings::nvidia_p2p_page_table,
    _cb: bindings::nvidia_p2p_free_callback_t,
    _data: *mut c_void,
) -> c_int {
    // In mode 2 a pin with the table the test set (the callback is never called),
    // else ENOMEM.
    if MODE.load(Relaxed) != 2 {
        return -12;
    }
    // SAFETY: the wrapper passes a valid out-pointer.
    unsafe { *table = GOOD_TABLE.load(Relaxed) };
    0
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
    PUTS.fetch_add(1, Relaxed);
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
    PUTS_AT_UNMAP.store(PUTS.load(Relaxed), Relaxed);
    UNMAPS.fetch_add(1, Relaxed);
    0
}

/// # Safety
///
/// Called by the wrapper under test, with the pointers it passes to a driver.
unsafe extern "C" fn stub_free_map(_m: *mut bindings::nvidia_p2p_dma_mapping) -> c_int {
    0
}

pub(super) fn stub_driver(persistent: bool) -> bindings::peermem_symbols {
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
