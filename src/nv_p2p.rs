// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Safe wrapper of nvidia.ko's P2P API (docs/abi.md, section 1).
//!
//! Everything above this module sees GPU pins as owned handles:
//!
//! - [`GpuPin`]: a pinned 64 KiB-aligned range, owned by every clone of the handle. A
//!   callback pin runs a [`FreeHandler`] when the owning process frees the memory; a
//!   persistent pin keeps the memory alive. Either kind's owners keep their data in
//!   the pin's record ([`PinRecord`]). Dropping the last clone unpins (unless a free
//!   callback already tore it down).
//! - [`DmaMapping`]: a live DMA mapping of the range for one PCI peer; its addresses
//!   are read in place, while the map call is counted in flight, by the builder
//!   [`GpuPin::dma_map`] hands them to. It is given back through [`GpuPin::unmap`];
//!   one never given back is unmapped by the pin's last owner before the put.
//!
//! The driver's rules that make this hard are enforced here, once:
//!
//! - inside the free callback only `free_page_table` / `free_dma_mapping` may be
//!   called, never `put_pages` or `dma_unmap_pages` (docs/abi.md 1.4);
//! - once the callback returns, the driver frees the page table and every DMA mapping
//!   of it: no call on them may be in flight then or start afterwards (docs/abi.md 1.1);
//! - `put_pages` after a callback is unsafe on drivers before 535.14, so a put is
//!   begun only while no callback has started; a callback that starts once the put
//!   has begun is not held off (drivers from 535.14 answer 0 for a table a callback
//!   tore down, docs/abi.md 1.1);
//! - the callback's `data` must stay valid until both the put and any callback that
//!   started have finished;
//! - `put_pages` of a callback pin only works from the owning process: from another
//!   one the driver returns 0 and keeps the pin and its callback (abi.md 1.4b), so
//!   such a pin is left to its callback ("orphaned"), with its data and a module
//!   reference, instead of being put.
//!
//! See docs/pin-state-machine.md for the states and the lock order.
//!
//! Files, each importing only those before it: `state` (a pin's state machine under its
//! lock: every transition, the DMA mappings it records, the driver's reference on it),
//! `pin` (the pin's record and the handler traits, the guard of a driver call in
//! flight, making a pin, its handle, the last owner's put, the free callback, the
//! page-table versions read and the check of a table), `mapping` (DMA mappings, the
//! mapping versions read and the check of a mapping). Tests: the KUnit suite
//! `peermem_nv_p2p` (`nv_p2p/tests.rs`); the client suites in `tests/client` exercise
//! it against the fake nvidia.ko.

use kernel::{
    ffi::{
        c_int,
        c_void, //
    },
    new_condvar,
    prelude::*,
    sync::{
        atomic::Atomic,
        CondVar, //
    }, //
};

use crate::{
    bindings,
    glue::MissingSymbol, //
};

mod mapping;
mod pin;
mod state;
#[cfg(peermem_kunit)]
mod tests;

pub(crate) use mapping::DmaMapping;
// The record, named outside only by the size assertion of the client's records, which
// production lock layouts have.
#[cfg(not(any(CONFIG_DEBUG_LOCK_ALLOC, CONFIG_DEBUG_MUTEXES, CONFIG_DEBUG_SPINLOCK)))]
pub(crate) use pin::PinShared;
pub(crate) use pin::{
    FreeHandler,
    GpuPin,
    PinContext,
    PinCounts,
    PinIdentity,
    PinRecord,
    SpaceId, //
};

/// The rate-limit kind of the "pin released outside its process" message (after the
/// refusal reasons, which use their own values: `stats::Refusal`).
const ORPHAN_RATELIMIT: u32 = 16;

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
}

/// The fields a page table and a DMA mapping both have, as the driver filled them in.
#[derive(Clone, Copy)]
struct Header {
    /// The structure's version.
    version: u32,
    /// Whether this module reads that version of the structure.
    version_ok: bool,
    /// The page size (an `nvidia_p2p_page_size_type`).
    page_size: u32,
    /// The number of entries.
    entries: u32,
    /// Whether the array of entries is null.
    no_array: bool,
}

impl Header {
    /// Checks the header of a structure for `pages` pages: a version this module reads,
    /// 64 KiB pages, as many entries as pages, an array of them.
    fn check(&self, pages: u64) -> Result<(), BadAnswer> {
        let Header {
            version,
            version_ok,
            page_size,
            entries,
            no_array,
        } = *self;
        if !version_ok {
            return Err(BadAnswer::Version(version));
        }
        if page_size != bindings::nvidia_p2p_page_size_type_NVIDIA_P2P_PAGE_SIZE_64KB {
            return Err(BadAnswer::PageSize(page_size));
        }
        if u64::from(entries) != pages {
            return Err(BadAnswer::Entries(entries));
        }
        if no_array {
            return Err(BadAnswer::NullEntry);
        }
        Ok(())
    }
}

/// Why a pin, or a DMA mapping of one, failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PinError {
    /// nvidia.ko refused, with this errno (a pin's `ENOMEM`: BAR1 exhausted; its
    /// `EINVAL`: not this process's GPU memory).
    Driver(Error),
    /// nvidia.ko answered with a page table or DMA mapping this module cannot read (it
    /// was given back).
    BadAnswer,
    /// A free callback tore the pin down before it was taken over, or before the
    /// mapping was.
    Freed,
    /// This module could not allocate its own state for the pin or the mapping.
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

/// `nvidia_p2p_get_pages` (docs/abi.md 1.1).
type GetPagesFn = unsafe extern "C" fn(
    u64,
    u32,
    u64,
    u64,
    *mut *mut bindings::nvidia_p2p_page_table,
    bindings::nvidia_p2p_free_callback_t,
    *mut c_void,
) -> c_int;
/// `nvidia_p2p_put_pages`.
type PutPagesFn =
    unsafe extern "C" fn(u64, u32, u64, *mut bindings::nvidia_p2p_page_table) -> c_int;
/// `nvidia_p2p_free_page_table`.
type FreePageTableFn = unsafe extern "C" fn(*mut bindings::nvidia_p2p_page_table) -> c_int;
/// `nvidia_p2p_dma_map_pages`.
type DmaMapPagesFn = unsafe extern "C" fn(
    *mut bindings::pci_dev,
    *mut bindings::nvidia_p2p_page_table,
    *mut *mut bindings::nvidia_p2p_dma_mapping,
) -> c_int;
/// `nvidia_p2p_dma_unmap_pages`.
type DmaUnmapPagesFn = unsafe extern "C" fn(
    *mut bindings::pci_dev,
    *mut bindings::nvidia_p2p_page_table,
    *mut bindings::nvidia_p2p_dma_mapping,
) -> c_int;
/// `nvidia_p2p_free_dma_mapping`.
type FreeDmaMappingFn = unsafe extern "C" fn(*mut bindings::nvidia_p2p_dma_mapping) -> c_int;
/// `nvidia_p2p_get_pages_persistent`.
type GetPagesPersistentFn =
    unsafe extern "C" fn(u64, u64, *mut *mut bindings::nvidia_p2p_page_table, u32) -> c_int;
/// `nvidia_p2p_put_pages_persistent`.
type PutPagesPersistentFn =
    unsafe extern "C" fn(u64, *mut bindings::nvidia_p2p_page_table, u32) -> c_int;

/// The persistent pair, present together on drivers from 535.14 / 525.105.17.
#[derive(Clone, Copy)]
struct PersistentApi {
    get: GetPagesPersistentFn,
    put: PutPagesPersistentFn,
}

/// nvidia.ko's functions, resolved when this module was loaded, and what every pin of
/// this driver shares.
///
/// # Invariants
///
/// Each pointer is the driver's function with the signature the header declares.
#[pin_data]
pub(crate) struct NvP2p {
    get_pages: GetPagesFn,
    put_pages: PutPagesFn,
    free_page_table: FreePageTableFn,
    dma_map_pages: DmaMapPagesFn,
    dma_unmap_pages: DmaUnmapPagesFn,
    free_dma_mapping: FreeDmaMappingFn,
    /// `None` on drivers before 535.14 (docs/abi.md 1.1).
    persistent: Option<PersistentApi>,
    /// Where tasks wait for a change of a pin's state (a call in flight ending, a
    /// callback finishing): rare, so one queue for every pin instead of one each (24
    /// bytes a pin); a waiter rechecks its own pin's state when woken.
    #[pin]
    idle: CondVar,
    /// How many tasks wait on `idle`: a waker sees none and skips the wake-up (a
    /// waiter counts itself under its pin's lock, which the waker holds).
    idle_waiters: Atomic<u32>,
}

/// A function the module cannot work without, or the name it is missing by.
fn required<F>(f: Option<F>, name: &'static str) -> Result<F, MissingSymbol> {
    f.ok_or(MissingSymbol(name))
}

impl NvP2p {
    /// Takes nvidia.ko's functions from the module's weak references.
    pub(crate) fn new(
        syms: &bindings::peermem_symbols,
    ) -> Result<impl PinInit<Self>, MissingSymbol> {
        let get_pages = required(syms.nv_get_pages, "nvidia_p2p_get_pages")?;
        let put_pages = required(syms.nv_put_pages, "nvidia_p2p_put_pages")?;
        let free_page_table = required(syms.nv_free_page_table, "nvidia_p2p_free_page_table")?;
        let dma_map_pages = required(syms.nv_dma_map_pages, "nvidia_p2p_dma_map_pages")?;
        let dma_unmap_pages = required(syms.nv_dma_unmap_pages, "nvidia_p2p_dma_unmap_pages")?;
        let free_dma_mapping = required(syms.nv_free_dma_mapping, "nvidia_p2p_free_dma_mapping")?;
        let persistent = match (syms.nv_get_pages_persistent, syms.nv_put_pages_persistent) {
            (Some(get), Some(put)) => Some(PersistentApi { get, put }),
            _ => None,
        };
        // INVARIANT: the module loader resolved each weak reference to the export of
        // that name, declared in the header with this signature.
        Ok(pin_init!(Self {
            get_pages,
            put_pages,
            free_page_table,
            dma_map_pages,
            dma_unmap_pages,
            free_dma_mapping,
            persistent,
            idle <- new_condvar!("peermem_pin_idle"),
            idle_waiters: Atomic::new(0),
        }))
    }

    /// Whether the driver has the persistent pair (535.14 / 525.105.17 and later).
    pub(crate) fn has_persistent_api(&self) -> bool {
        self.persistent.is_some()
    }
}
