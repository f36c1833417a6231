// SPDX-License-Identifier: GPL-2.0 OR MIT

//! DMA mappings of a pin (callback or persistent) for one PCI peer, and the map call
//! both make.

use core::ptr::NonNull;

use kernel::{
    prelude::*,
    types::ScopeGuard, //
};

use super::{
    driver::NvP2p,
    error::{
        dma_addresses,
        PinError, //
    },
    persistent::PersistentPin,
    pin::{
        CallbackPin,
        DriverCall,
        PinContext,
        PinRecord, //
    },
    state::Raw, //
};
use crate::{
    bindings,
    device::PciFunction,
    glue::driver_result, //
};

impl<T: PinRecord> CallbackPin<T> {
    /// Maps the pinned range for DMA by `peer`, and hands the DMA address of each
    /// 64 KiB page, in order and read in place, to `build`, whose result comes back
    /// with the mapping. Fails with [`PinError::Freed`] once the memory was freed, and
    /// with `build`'s error (the mapping undone); the driver's errors come as `E`. The
    /// pin records the mapping: it is undone by [`CallbackPin::unmap`], else by the pin's
    /// last owner before the put, or freed by the free callback.
    ///
    /// `build` runs while the driver call is counted in flight: a free callback waits
    /// for it before the driver frees the addresses. It must not wait for anything a
    /// free callback holds.
    pub(crate) fn dma_map<R, E: From<PinError>>(
        &self,
        peer: &PciFunction<'_>,
        build: impl FnOnce(&[u64]) -> Result<R, E>,
    ) -> Result<(DmaMapping, R), E> {
        let s = &self.shared;
        let call = DriverCall::map(s)?;
        // SAFETY: the table is live while `call` is counted in flight, which the map
        // call and `build` are within.
        let (made, built) =
            unsafe { map_table(s.nv(), call.table(), s.range.pages(), peer, build) };
        // `DriverCall::map` made room for every call in flight to record its mapping.
        let alive = call.end_with(|st| match made {
            Some(m) => st.record(Raw(m.as_ptr())),
            None => !st.is_freed(),
        });
        // From here the pin records the mapping: undone when the guard goes, unless it
        // is handed out.
        let made = made.map(|m| {
            ScopeGuard::new_with_data(m, |m: NonNull<bindings::nvidia_p2p_dma_mapping>| {
                s.unmap(m.as_ptr());
            })
        });
        match (built, made) {
            // INVARIANT: handed out by the driver for this pin, which records it.
            (Ok(r), Some(made)) if alive => Ok((DmaMapping(made.dismiss()), r)),
            (Ok(_), None) if alive => Err(PinError::BadAnswer.into()),
            (Err(e), _) if alive => Err(e),
            // Freed meanwhile: whatever was built is dropped (the callback frees the
            // mapping).
            _ => Err(PinError::Freed.into()),
        }
    }

    /// Unmaps `m`, a mapping of this pin, unless the free callback frees it (then it
    /// does); a mapping the pin does not record is left alone.
    pub(crate) fn unmap(&self, m: DmaMapping) {
        self.shared.unmap(m.0.as_ptr());
    }
}

/// A map call of `table`, a live table of `pages` pages, for `peer`: the mapping the
/// driver handed out, if any, and what `build` made of its addresses (checked, and read
/// in place while the call lasts). The caller records the mapping or unmaps it.
///
/// # Safety
///
/// `table` is a live table of `nv`'s driver, and stays live during the call.
unsafe fn map_table<R, E: From<PinError>>(
    nv: &NvP2p,
    table: *mut bindings::nvidia_p2p_page_table,
    pages: u64,
    peer: &PciFunction<'_>,
    build: impl FnOnce(&[u64]) -> Result<R, E>,
) -> (
    Option<NonNull<bindings::nvidia_p2p_dma_mapping>>,
    Result<R, E>,
) {
    let mut raw = core::ptr::null_mut();
    // SAFETY: `dma_map_pages` is nvidia_p2p_dma_map_pages (type invariant of `NvP2p`);
    // the table is live (the caller's guarantee); `peer` is a PCI function valid for
    // its borrow, which outlasts the call; `raw` is a valid out-pointer.
    let ret = unsafe { (nv.dma_map_pages)(peer.as_raw(), table, &mut raw) };
    let made = if ret == 0 { NonNull::new(raw) } else { None };
    let built = match driver_result(ret) {
        // SAFETY: on success the driver handed `raw` out; nothing frees or changes it
        // before the caller records or unmaps it, after this returns.
        Ok(()) => match unsafe { dma_addresses(raw, pages) } {
            Ok(addrs) => build(addrs),
            Err(bad) => {
                pr_err!("nvidia.ko returned an unusable DMA mapping ({:?})\n", bad);
                Err(PinError::BadAnswer.into())
            }
        },
        Err(e) => Err(PinError::Driver(e).into()),
    };
    (made, built)
}

impl<C: PinContext> PersistentPin<C> {
    /// Maps the pinned range for DMA by `peer`, and hands the DMA address of each
    /// 64 KiB page, in order and read in place, to `build`, whose result comes back
    /// with the mapping; `build`'s error (the mapping undone), or the driver's as `E`.
    /// The pin does not record the mapping: its owner unmaps it
    /// ([`PersistentPin::unmap`]) before dropping the pin.
    pub(crate) fn dma_map<R, E: From<PinError>>(
        &self,
        peer: &PciFunction<'_>,
        build: impl FnOnce(&[u64]) -> Result<R, E>,
    ) -> Result<(DmaMapping, R), E> {
        // SAFETY: the table is live until the pin is dropped, which the borrow holds off.
        let (made, built) = unsafe {
            map_table(
                self.nv(),
                self.table(),
                self.span().range().pages(),
                peer,
                build,
            )
        };
        match (made, built) {
            // INVARIANT: handed out by the driver for this pin, whose owner now holds it.
            (Some(m), Ok(r)) => Ok((DmaMapping(m), r)),
            (made, built) => {
                if let Some(m) = made {
                    // SAFETY: made just above by this pin, and handed to nobody.
                    unsafe { self.unmap(DmaMapping(m)) };
                }
                Err(built.err().unwrap_or_else(|| PinError::BadAnswer.into()))
            }
        }
    }

    /// Unmaps `m`.
    ///
    /// # Safety
    ///
    /// `m` was made by this pin's [`PersistentPin::dma_map`] (nothing else frees a
    /// persistent pin's mappings, so it is live).
    pub(crate) unsafe fn unmap(&self, m: DmaMapping) {
        let raw = m.0.as_ptr();
        // SAFETY: `raw` is a live mapping of this pin's table (the caller's guarantee):
        // its `pci_dev` is the peer it was made for (docs/abi.md 1.1), which outlives
        // it (the core unmaps before its device goes).
        let peer = unsafe { (*raw).pci_dev };
        // SAFETY: `dma_unmap_pages` is nvidia_p2p_dma_unmap_pages (type invariant of
        // `NvP2p`); `raw` is a live mapping of the pin's live table for `peer`, given
        // back once, here.
        let ret = unsafe { (self.nv().dma_unmap_pages)(peer, self.table(), raw) };
        if let Err(e) = driver_result(ret) {
            pr_warn!("nvidia_p2p_dma_unmap_pages failed: {:?}\n", e);
        }
    }
}

/// A DMA mapping of a pin for one PCI peer, unmapped through the pin that made it
/// ([`CallbackPin::unmap`], [`PersistentPin::unmap`]). One pointer: the registration that
/// made it keeps it beside its pin. Not a guard (it has no pin to unmap through): one
/// dropped without its unmap stays recorded by a callback pin, whose last owner unmaps
/// it before the put unless the free callback frees it first; a persistent pin's owner
/// unmaps the mappings it keeps before dropping the pin.
///
/// # Invariants
///
/// `0` was handed out by nvidia.ko's `dma_map_pages` for a pin of this module: a
/// callback pin, which records it until it is unmapped or freed, or a persistent pin,
/// whose owner holds it until it unmaps it.
#[must_use = "a mapping is given back through its pin's unmap"]
pub(crate) struct DmaMapping(NonNull<bindings::nvidia_p2p_dma_mapping>);

// SAFETY: only the pointer's value travels; the mapping is used through its pin, under
// the pin's rules.
unsafe impl Send for DmaMapping {}
// SAFETY: `&DmaMapping` gives nothing but the pointer's value.
unsafe impl Sync for DmaMapping {}
