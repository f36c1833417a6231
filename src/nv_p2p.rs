// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Safe wrapper of nvidia.ko's P2P API (docs/abi.md, section 1).
//!
//! Everything above this module sees GPU pins as owned handles:
//!
//! - [`CallbackPin`]: a callback pin of a 64 KiB-aligned range, owned by every clone of the
//!   handle: it runs a [`FreeHandler`] when the owning process frees the memory, and
//!   its owners keep their data in the pin's record ([`PinRecord`]). Dropping the last
//!   clone unpins (unless a free callback already tore it down).
//! - [`PersistentPin`]: a persistent pin with one owner, which keeps the memory alive
//!   until it is dropped (which puts it): no callback, so no shared record or state.
//! - Whoever pins is the pins' [`PinContext`]: a pin refers to it, and reports to it
//!   when it is made and let go of, so the counters live with the caller, above this
//!   layer.
//! - [`DmaMapping`]: a live DMA mapping of a pin's range for one PCI peer; its
//!   addresses are read in place, while the map call lasts, by the builder the pin's
//!   `dma_map` hands them to. It is given back through its pin's `unmap`; one a callback
//!   pin's owners never gave back is unmapped by its last owner before the put.
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
//! Files, each importing only those before it: `error` (why a pin or a DMA mapping
//! failed, and the checks of the driver's answers: the versions of page tables and DMA
//! mappings read, `page_table_version_ok` and `dma_mapping_version_ok`, the check of a
//! table and of a mapping, `check_page_table` and `dma_addresses`, all defined in
//! `nv_p2p/error.rs`, and the header both share), `state` (a callback pin's state
//! machine under its lock: every transition, the DMA mappings it records, the driver's
//! reference on it), `driver` (the driver handle: nvidia.ko's functions, resolved at
//! load, and the put of a table by its kind), `pin` (a callback pin's record and the
//! handler traits, the guard of a driver call in flight, making a pin, its handle, the
//! last owner's put, the free callback), `persistent` (the persistent pin: made, and
//! put when dropped), `mapping` (the map call, DMA mappings of both kinds of pin).
//! Tests: the KUnit suite
//! `peermem_nv_p2p` (`nv_p2p/tests.rs`); the client suites in `tests/client` exercise
//! it against the fake nvidia.ko.

mod driver;
mod error;
mod mapping;
mod persistent;
mod pin;
mod state;
#[cfg(peermem_kunit)]
mod tests;

pub(crate) use driver::NvP2p;
pub(crate) use error::PinError;
pub(crate) use mapping::DmaMapping;
pub(crate) use persistent::PersistentPin;
// The record, named outside only by the size assertion of the client's records, which
// production lock layouts have.
#[cfg(not(any(CONFIG_DEBUG_LOCK_ALLOC, CONFIG_DEBUG_MUTEXES, CONFIG_DEBUG_SPINLOCK)))]
pub(crate) use pin::PinShared;
pub(crate) use pin::{
    CallbackPin,
    FreeHandler,
    PinContext,
    PinIdentity,
    PinRecord, //
};
