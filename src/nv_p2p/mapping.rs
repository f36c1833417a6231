// SPDX-License-Identifier: GPL-2.0 OR MIT

//! DMA mappings of a pin for one PCI peer.

use kernel::{
    prelude::*,
    sync::Arc, //
};

use super::{
    abi::dma_addresses,
    pin::GpuPin,
    shared::{
        DriverCall,
        PinRecord,
        PinShared, //
    },
    state::{
        Phase,
        Raw, //
    },
    PinError, //
};
use crate::{
    bindings,
    device::PciFunction,
    foreign::driver_result, //
};

impl<T: PinRecord> GpuPin<T> {
    /// Maps the pinned range for DMA by `peer`, and hands the DMA address of each
    /// 64 KiB page, in order and read in place, to `build`, whose result comes back
    /// with the mapping. Fails with [`PinError::Freed`] once the memory was freed, and
    /// with `build`'s error (the mapping undone).
    ///
    /// `build` runs while the driver call is counted in flight: a free callback waits
    /// for it before the driver frees the addresses. It must not wait for anything a
    /// free callback holds.
    pub(crate) fn dma_map<R>(
        &self,
        peer: PciFunction,
        build: impl FnOnce(&[u64]) -> Result<R, PinError>,
    ) -> Result<(DmaMapping<T>, R), PinError> {
        let s = &self.shared;
        let map = s.nv().dma_map_pages;
        let call = DriverCall::map(s)?;
        let mut raw = core::ptr::null_mut();
        // SAFETY: `map` is nvidia_p2p_dma_map_pages (type invariant of `NvP2p`); the
        // table is live while `call` is counted in flight; `peer` holds a reference on
        // the PCI function; `raw` is a valid out-pointer.
        let ret = unsafe { map(peer.as_raw(), call.table(), &mut raw) };
        let made = ret == 0 && !raw.is_null();
        let built = match driver_result(ret) {
            // SAFETY: on success the driver handed `raw` out; it stays valid and
            // unchanged while `call` is counted in flight, which `build` is within.
            Ok(()) => match unsafe { dma_addresses(raw, s.range.pages()) } {
                Ok(addrs) => build(addrs),
                Err(bad) => {
                    pr_err!("nvidia.ko returned an unusable DMA mapping ({:?})\n", bad);
                    Err(PinError::BadAnswer)
                }
            },
            Err(e) => Err(PinError::Driver(e)),
        };
        let alive = call.end_with(|st| {
            if made {
                // `DriverCall::map` made room for every call in flight.
                let recorded = st.mappings.push(Raw(raw));
                debug_assert!(recorded);
            }
            st.phase != Phase::Freed
        });
        let err = match built {
            Ok(r) if alive => {
                return Ok((
                    DmaMapping {
                        shared: s.clone(),
                        raw: Raw(raw),
                        peer,
                    },
                    r,
                ))
            }
            Err(e) if alive => e,
            // Freed meanwhile: whatever was built is dropped with the mapping undone.
            _ => PinError::Freed,
        };
        if made {
            unmap_raw(s, &peer, raw);
        }
        Err(err)
    }
}

/// Unmaps `raw` unless a callback took over its freeing (then the callback frees it).
fn unmap_raw<T: PinRecord>(
    s: &PinShared<T>,
    peer: &PciFunction,
    raw: *mut bindings::nvidia_p2p_dma_mapping,
) {
    let Some(call) = DriverCall::unmap(s, raw) else {
        // The callback frees it (it may be this very thread, nested in it).
        return;
    };
    // SAFETY: `dma_unmap_pages` is nvidia_p2p_dma_unmap_pages (type invariant of
    // `NvP2p`); `raw` is a live mapping of the table for `peer`, forgotten by the pin so
    // nobody else frees it; the table stays live while `call` is counted in flight.
    let ret = unsafe { (s.nv().dma_unmap_pages)(peer.as_raw(), call.table(), raw) };
    if let Err(e) = driver_result(ret) {
        pr_warn!("nvidia_p2p_dma_unmap_pages failed: {:?}\n", e);
    }
    drop(call);
}

/// A DMA mapping of a pinned range for one PCI peer; dropping it unmaps.
pub(crate) struct DmaMapping<T: PinRecord> {
    shared: Arc<PinShared<T>>,
    raw: Raw<bindings::nvidia_p2p_dma_mapping>,
    peer: PciFunction,
}

impl<T: PinRecord> Drop for DmaMapping<T> {
    fn drop(&mut self) {
        unmap_raw(&self.shared, &self.peer, self.raw.0);
    }
}
