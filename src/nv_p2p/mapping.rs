// SPDX-License-Identifier: GPL-2.0 OR MIT

//! DMA mappings of a pin for one PCI peer.

use kernel::{prelude::*, sync::Arc};

use super::{
    abi::{driver_result, read_dma_mapping, BadAnswer},
    pin::{FreeHandler, GpuPin, Phase, PinShared, Raw},
};
use crate::{bindings, device::PciFunction};

impl<T: FreeHandler> GpuPin<T> {
    /// Maps the pinned range for DMA by `peer`. Fails with `EFAULT` once the memory was
    /// freed.
    pub(crate) fn dma_map(&self, peer: PciFunction) -> Result<DmaMapping<T>> {
        let s = &self.shared;
        let map = s.nv.dma_map_pages;
        let table = s.begin_call()?;
        let mut raw = core::ptr::null_mut();
        // SAFETY: `map` is nvidia_p2p_dma_map_pages (type invariant of `NvP2p`);
        // `table` is live and stays so while the call is counted in flight; `peer` holds
        // a reference on the PCI function; `raw` is a valid out-pointer.
        let ret = unsafe { map(peer.as_raw(), table, &mut raw) };
        let made = ret == 0 && !raw.is_null();
        let addrs = match driver_result(ret) {
            // SAFETY: on success the driver handed `raw` out; it stays valid while the
            // call is counted in flight.
            Ok(()) => unsafe { read_dma_mapping(raw, s.range.pages()) }.map_err(|bad| {
                if bad != BadAnswer::NoMemory {
                    pr_err!("nvidia.ko returned an unusable DMA mapping ({:?})\n", bad);
                }
                Error::from(bad)
            }),
            Err(e) => Err(e),
        };
        let alive = {
            let mut st = s.state.lock();
            if made {
                // Recorded even when unusable, so that it is unmapped, or freed by a
                // callback, and never leaked. `begin_call` reserved the room.
                let _ = st.mappings.push_within_capacity(Raw(raw));
            }
            let alive = st.phase != Phase::Freed;
            s.end_call(&mut st);
            alive
        };
        match addrs {
            Ok(addrs) if alive => Ok(DmaMapping {
                shared: s.clone(),
                raw: Raw(raw),
                peer,
                addrs,
            }),
            res => {
                if made {
                    unmap_raw(s, &peer, raw);
                }
                Err(if alive {
                    res.err().unwrap_or(EFAULT)
                } else {
                    EFAULT
                })
            }
        }
    }
}

/// Unmaps `raw` unless a callback took over its freeing (then the callback frees it).
fn unmap_raw<T: FreeHandler>(
    s: &PinShared<T>,
    peer: &PciFunction,
    raw: *mut bindings::nvidia_p2p_dma_mapping,
) {
    let table = {
        let mut st = s.state.lock();
        let Some(i) = st.mappings.iter().position(|m| m.0 == raw) else {
            return;
        };
        if st.phase == Phase::Freed || st.table.0.is_null() {
            // The callback frees it (it may be this very thread, nested in it).
            return;
        }
        let _ = st.mappings.remove(i);
        st.in_flight += 1;
        st.table.0
    };
    // SAFETY: `dma_unmap_pages` is nvidia_p2p_dma_unmap_pages (type invariant of
    // `NvP2p`); `raw` is a live mapping of `table` for `peer`, removed from `mappings`
    // so nobody else frees it; the table stays live while the call is counted in flight.
    let ret = unsafe { (s.nv.dma_unmap_pages)(peer.as_raw(), table, raw) };
    if let Err(e) = driver_result(ret) {
        pr_warn!("nvidia_p2p_dma_unmap_pages failed: {:?}\n", e);
    }
    let mut st = s.state.lock();
    s.end_call(&mut st);
}

/// The DMA addresses of a pinned range for one PCI peer; dropping it unmaps.
pub(crate) struct DmaMapping<T: FreeHandler> {
    shared: Arc<PinShared<T>>,
    raw: Raw<bindings::nvidia_p2p_dma_mapping>,
    peer: PciFunction,
    addrs: KVVec<u64>,
}

impl<T: FreeHandler> DmaMapping<T> {
    /// The DMA address of each 64 KiB page of the pin, in order (empty after
    /// [`DmaMapping::forget_addresses`]).
    pub(crate) fn addresses(&self) -> &[u64] {
        &self.addrs
    }

    /// Frees the copy of the addresses; the mapping itself stays.
    pub(crate) fn forget_addresses(&mut self) {
        self.addrs = KVVec::new();
    }
}

impl<T: FreeHandler> Drop for DmaMapping<T> {
    fn drop(&mut self) {
        unmap_raw(&self.shared, &self.peer, self.raw.0);
    }
}
