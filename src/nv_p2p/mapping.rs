// SPDX-License-Identifier: GPL-2.0 OR MIT

//! DMA mappings of a pin for one PCI peer.

use core::ptr::NonNull;

use kernel::{
    prelude::*,
    types::ScopeGuard, //
};

use super::{
    error::{
        BadAnswer,
        Header,
        PinError, //
    },
    pin::{
        DriverCall,
        GpuPin,
        PinRecord, //
    },
    state::Raw, //
};
use crate::{
    bindings,
    device::PciFunction,
    glue::driver_result, //
};

impl<T: PinRecord> GpuPin<T> {
    /// Maps the pinned range for DMA by `peer`, and hands the DMA address of each
    /// 64 KiB page, in order and read in place, to `build`, whose result comes back
    /// with the mapping. Fails with [`PinError::Freed`] once the memory was freed, and
    /// with `build`'s error (the mapping undone); the driver's errors come as `E`. The
    /// pin records the mapping: it is undone by [`GpuPin::unmap`], else by the pin's
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
        let map = s.nv().dma_map_pages;
        let call = DriverCall::map(s)?;
        let mut raw = core::ptr::null_mut();
        // SAFETY: `map` is nvidia_p2p_dma_map_pages (type invariant of `NvP2p`); the
        // table is live while `call` is counted in flight; `peer` is a PCI function
        // valid for its borrow, which outlasts the call; `raw` is a valid out-pointer.
        let ret = unsafe { map(peer.as_raw(), call.table(), &mut raw) };
        let made = if ret == 0 { NonNull::new(raw) } else { None };
        let built = match driver_result(ret) {
            // SAFETY: on success the driver handed `raw` out; it stays valid and
            // unchanged while `call` is counted in flight, which `build` is within.
            Ok(()) => match unsafe { dma_addresses(raw, s.range.pages()) } {
                Ok(addrs) => build(addrs),
                Err(bad) => {
                    pr_err!("nvidia.ko returned an unusable DMA mapping ({:?})\n", bad);
                    Err(PinError::BadAnswer.into())
                }
            },
            Err(e) => Err(PinError::Driver(e).into()),
        };
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

/// A DMA mapping of a pin for one PCI peer, as its pin records it: the pin's handle
/// unmaps it ([`GpuPin::unmap`]). One pointer: the registration that made it keeps it
/// beside the pin's handle. Not a guard (it has no pin to unmap through): one dropped
/// without [`GpuPin::unmap`] stays recorded by its pin, whose last owner unmaps it
/// before the put, unless the free callback frees it first.
///
/// # Invariants
///
/// `0` was handed out by nvidia.ko's `dma_map_pages` for a pin of this module, which
/// records it until it is unmapped or freed.
#[must_use = "a mapping is given back through GpuPin::unmap"]
pub(crate) struct DmaMapping(NonNull<bindings::nvidia_p2p_dma_mapping>);

// SAFETY: only the pointer's value travels; the mapping is used through its pin, under
// the pin's rules.
unsafe impl Send for DmaMapping {}
// SAFETY: `&DmaMapping` gives nothing but the pointer's value.
unsafe impl Sync for DmaMapping {}

/// DMA-mapping versions this module reads: major 2, minor >= 3 (docs/abi.md 1.2).
pub(super) const fn dma_mapping_version_ok(version: u32) -> bool {
    let built = bindings::NVIDIA_P2P_DMA_MAPPING_VERSION;
    version >> 16 == built >> 16 && (version & 0xffff) >= (built & 0xffff)
}

/// Checks a DMA mapping of a table of `pages` pages; its addresses, read in place.
///
/// # Safety
///
/// `mapping` is null or points to a DMA mapping the driver handed out, which it neither
/// frees nor changes during `'a`.
pub(super) unsafe fn dma_addresses<'a>(
    mapping: *const bindings::nvidia_p2p_dma_mapping,
    pages: u64,
) -> Result<&'a [u64], BadAnswer> {
    if mapping.is_null() {
        return Err(BadAnswer::Null);
    }
    // SAFETY: `mapping` is valid for reads (the caller's guarantee).
    let m = unsafe { &*mapping };
    Header {
        version: m.version,
        version_ok: dma_mapping_version_ok(m.version),
        page_size: m.page_size_type,
        entries: m.entries,
        no_array: m.dma_addresses.is_null(),
    }
    .check(pages)?;
    // SAFETY: `dma_addresses` points to `entries` addresses (the driver's contract),
    // which stay as they are during `'a` (the caller's guarantee).
    Ok(unsafe { core::slice::from_raw_parts(m.dma_addresses, m.entries as usize) })
}
