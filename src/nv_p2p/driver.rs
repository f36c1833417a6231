// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The driver handle: nvidia.ko's functions, resolved when this module was loaded
//! (docs/abi.md 1.1), and what every pin made with them shares.

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
    glue::{
        driver_result,
        MissingSymbol, //
    },
    range::GpuRange, //
};

/// `nvidia_p2p_get_pages` (docs/abi.md 1.1).
pub(super) type GetPagesFn = unsafe extern "C" fn(
    u64,
    u32,
    u64,
    u64,
    *mut *mut bindings::nvidia_p2p_page_table,
    bindings::nvidia_p2p_free_callback_t,
    *mut c_void,
) -> c_int;
/// `nvidia_p2p_put_pages`.
pub(super) type PutPagesFn =
    unsafe extern "C" fn(u64, u32, u64, *mut bindings::nvidia_p2p_page_table) -> c_int;
/// `nvidia_p2p_free_page_table`.
pub(super) type FreePageTableFn =
    unsafe extern "C" fn(*mut bindings::nvidia_p2p_page_table) -> c_int;
/// `nvidia_p2p_dma_map_pages`.
pub(super) type DmaMapPagesFn = unsafe extern "C" fn(
    *mut bindings::pci_dev,
    *mut bindings::nvidia_p2p_page_table,
    *mut *mut bindings::nvidia_p2p_dma_mapping,
) -> c_int;
/// `nvidia_p2p_dma_unmap_pages`.
pub(super) type DmaUnmapPagesFn = unsafe extern "C" fn(
    *mut bindings::pci_dev,
    *mut bindings::nvidia_p2p_page_table,
    *mut bindings::nvidia_p2p_dma_mapping,
) -> c_int;
/// `nvidia_p2p_free_dma_mapping`.
pub(super) type FreeDmaMappingFn =
    unsafe extern "C" fn(*mut bindings::nvidia_p2p_dma_mapping) -> c_int;
/// `nvidia_p2p_get_pages_persistent`.
pub(super) type GetPagesPersistentFn =
    unsafe extern "C" fn(u64, u64, *mut *mut bindings::nvidia_p2p_page_table, u32) -> c_int;
/// `nvidia_p2p_put_pages_persistent`.
pub(super) type PutPagesPersistentFn =
    unsafe extern "C" fn(u64, *mut bindings::nvidia_p2p_page_table, u32) -> c_int;

/// How a pin was made, and so how it is put.
#[derive(Clone, Copy)]
pub(super) enum PinKind {
    /// `get_pages` with a free callback; unpinned with `put_pages`.
    Callback,
    /// The persistent pair; unpinned with the pair's `put`, which the kind carries
    /// (`NvP2p::persistent_kind` makes it only from a driver that has the pair).
    Persistent(PutPagesPersistentFn),
    /// `get_pages` with a NULL callback (drivers before 535.14); unpinned with
    /// `put_pages`.
    LegacyPersistent,
}

/// The persistent pair, present together on drivers from 535.14 / 525.105.17.
#[derive(Clone, Copy)]
pub(super) struct PersistentApi {
    pub(super) get: GetPagesPersistentFn,
    pub(super) put: PutPagesPersistentFn,
}

/// nvidia.ko's functions, resolved when this module was loaded, and what every pin of
/// this driver shares.
///
/// # Invariants
///
/// Each pointer is the driver's function with the signature the header declares.
#[pin_data]
pub(crate) struct NvP2p {
    pub(super) get_pages: GetPagesFn,
    pub(super) put_pages: PutPagesFn,
    pub(super) free_page_table: FreePageTableFn,
    pub(super) dma_map_pages: DmaMapPagesFn,
    pub(super) dma_unmap_pages: DmaUnmapPagesFn,
    pub(super) free_dma_mapping: FreeDmaMappingFn,
    /// `None` on drivers before 535.14 (docs/abi.md 1.1).
    pub(super) persistent: Option<PersistentApi>,
    /// Where tasks wait for a change of a pin's state (a call in flight ending, a
    /// callback finishing): rare, so one queue for every pin instead of one each (24
    /// bytes a pin); a waiter rechecks its own pin's state when woken.
    #[pin]
    pub(super) idle: CondVar,
    /// How many tasks wait on `idle`: a waker sees none and skips the wake-up (a
    /// waiter counts itself under its pin's lock, which the waker holds).
    pub(super) idle_waiters: Atomic<u32>,
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

    /// How this driver makes a persistent pin: with the pair where it has it, else
    /// with `get_pages` and no callback.
    pub(super) fn persistent_kind(&self) -> PinKind {
        match self.persistent {
            Some(api) => PinKind::Persistent(api.put),
            None => PinKind::LegacyPersistent,
        }
    }

    /// Unpins `table` with the put function of its kind.
    ///
    /// # Safety
    ///
    /// `table` was handed out by this driver for `range` with a pin of `kind`, and was
    /// neither put nor torn down by a free callback.
    pub(super) unsafe fn raw_put(
        &self,
        kind: PinKind,
        range: GpuRange,
        table: *mut bindings::nvidia_p2p_page_table,
    ) {
        let ret = match kind {
            // SAFETY: `table` is a live persistent pin of `range` made by this driver's
            // pair (the caller's guarantee), and `put` is the pair's, from this
            // driver's table (`persistent_kind`); flags must be 0.
            PinKind::Persistent(put) => unsafe { put(range.start(), table, 0) },
            PinKind::Callback | PinKind::LegacyPersistent => {
                // SAFETY: `table` is a live pin of `range` made by get_pages (the
                // caller's guarantee); tokens are 0 as at get_pages.
                unsafe { (self.put_pages)(0, 0, range.start(), table) }
            }
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
