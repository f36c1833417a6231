// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Each RDMA device's answer to the dma-buf probe NCCL and UCX make before they choose
//! a registration path (docs/abi.md 7): `ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0)` on a
//! protection domain of the device. A provider without dma-buf support fails it with
//! `EOPNOTSUPP` (or `EPROTONOSUPPORT`); one with it passes the bad file descriptor to
//! the kernel, which answers `EBADF`. libibverbs (rdma-core's `libibverbs.so.1`) is
//! loaded at run time, so the tool has no build dependency on it; where it is not
//! installed the answers are unknown.
//!
//! The one module of the host crates with `unsafe`: the calls into a C library
//! loaded at run time (no crate wraps libibverbs without linking it at build time).
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_void, CStr};

use libloading::Library;

/// The library loaded when no other is named.
pub const DEFAULT_LIB: &str = "libibverbs.so.1";

/// One device's answer to the probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The registration succeeded (and was undone).
    Registered,
    /// It failed with this errno.
    Errno(i32),
    /// The device could not be probed (open or protection domain failed): why.
    NotProbed(String),
}

type GetDeviceList = unsafe extern "C" fn(*mut c_int) -> *mut *mut c_void;
type FreeDeviceList = unsafe extern "C" fn(*mut *mut c_void);
type GetDeviceName = unsafe extern "C" fn(*mut c_void) -> *const c_char;
type OpenDevice = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
type CloseDevice = unsafe extern "C" fn(*mut c_void) -> c_int;
type AllocPd = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
type DeallocPd = unsafe extern "C" fn(*mut c_void) -> c_int;
type RegDmabufMr = unsafe extern "C" fn(*mut c_void, u64, usize, u64, c_int, c_int) -> *mut c_void;
type DeregMr = unsafe extern "C" fn(*mut c_void) -> c_int;

/// The verbs calls the probe makes, resolved from one library.
struct Verbs {
    get_device_list: GetDeviceList,
    free_device_list: FreeDeviceList,
    get_device_name: GetDeviceName,
    open_device: OpenDevice,
    close_device: CloseDevice,
    alloc_pd: AllocPd,
    dealloc_pd: DeallocPd,
    reg_dmabuf_mr: RegDmabufMr,
    dereg_mr: DeregMr,
}

impl Verbs {
    fn resolve(lib: &Library) -> Result<Self, String> {
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the symbol is libibverbs' function of that name, whose C
                // signature (infiniband/verbs.h) the field's type repeats.
                *unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                    .map_err(|e| format!("{}: {e}", $name))?
            };
        }
        Ok(Verbs {
            get_device_list: sym!("ibv_get_device_list"),
            free_device_list: sym!("ibv_free_device_list"),
            get_device_name: sym!("ibv_get_device_name"),
            open_device: sym!("ibv_open_device"),
            close_device: sym!("ibv_close_device"),
            alloc_pd: sym!("ibv_alloc_pd"),
            dealloc_pd: sym!("ibv_dealloc_pd"),
            reg_dmabuf_mr: sym!("ibv_reg_dmabuf_mr"),
            dereg_mr: sym!("ibv_dereg_mr"),
        })
    }

    /// The probe on device `dev` (an entry of the device list).
    fn probe(&self, dev: *mut c_void) -> Answer {
        // SAFETY: `dev` is an entry of a live device list.
        let ctx = unsafe { (self.open_device)(dev) };
        if ctx.is_null() {
            return Answer::NotProbed(format!(
                "ibv_open_device: {}",
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY: `ctx` is the open context just returned.
        let pd = unsafe { (self.alloc_pd)(ctx) };
        let answer = if pd.is_null() {
            Answer::NotProbed(format!("ibv_alloc_pd: {}", std::io::Error::last_os_error()))
        } else {
            // SAFETY: `pd` is a live protection domain; offset, length and iova 0 with
            // file descriptor -1 is the probe NCCL and UCX make.
            let mr = unsafe { (self.reg_dmabuf_mr)(pd, 0, 0, 0, -1, 0) };
            let answer = if mr.is_null() {
                Answer::Errno(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
            } else {
                // SAFETY: `mr` is the region just registered, deregistered once.
                unsafe { (self.dereg_mr)(mr) };
                Answer::Registered
            };
            // SAFETY: `pd` has no region left; freed once.
            unsafe { (self.dealloc_pd)(pd) };
            answer
        };
        // SAFETY: `ctx` has no protection domain left; closed once.
        unsafe { (self.close_device)(ctx) };
        answer
    }
}

/// The probe on every device libibverbs `lib` lists, in its order, with the device's
/// name. `Err` when the library cannot be loaded or lacks a call.
pub fn probe(lib: &str) -> Result<Vec<(String, Answer)>, String> {
    // SAFETY: loading libibverbs runs its initialisers (provider discovery), as in
    // every verbs application.
    let library = unsafe { Library::new(lib) }.map_err(|e| format!("cannot load {lib}: {e}"))?;
    let verbs = Verbs::resolve(&library).map_err(|e| format!("{lib}: no {e}"))?;
    let mut n: c_int = 0;
    // SAFETY: `n` receives the count; the list is freed below.
    let list = unsafe { (verbs.get_device_list)(&mut n) };
    if list.is_null() {
        return Err(format!(
            "ibv_get_device_list: {}",
            std::io::Error::last_os_error()
        ));
    }
    let mut out = Vec::new();
    for i in 0..usize::try_from(n).unwrap_or(0) {
        // SAFETY: the list holds `n` entries.
        let dev = unsafe { *list.add(i) };
        // SAFETY: `dev` is a live entry; its name is a NUL-terminated string it owns.
        let name = unsafe { CStr::from_ptr((verbs.get_device_name)(dev)) }
            .to_string_lossy()
            .into_owned();
        out.push((name, verbs.probe(dev)));
    }
    // SAFETY: the list came from ibv_get_device_list and is freed once, after its last use.
    unsafe { (verbs.free_device_list)(list) };
    Ok(out)
}
