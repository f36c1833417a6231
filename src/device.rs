// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The DMA peer: the PCI function an HCA maps GPU memory for.

use kernel::{
    device,
    pci, //
};

use crate::bindings;

/// A PCI function borrowed for `'a`: the peer of one `dma_map` call, which the core
/// keeps alive for the call. No reference is taken (`pci_dev_get` would write the
/// device's count, shared by every CPU mapping for that HCA, twice a registration):
/// nvidia.ko keeps the peer of a DMA mapping as a bare pointer too, and the core unmaps
/// before its device goes (docs/abi.md 1.1).
pub(crate) struct PciFunction<'a>(&'a pci::Device);

impl<'a> PciFunction<'a> {
    /// The PCI function behind `dev`; `None` when `dev` is null or not a PCI device (a
    /// software RDMA device, for instance): the kernel crate's conversion checks the
    /// bus (`dev_is_pci`).
    ///
    /// # Safety
    ///
    /// `dev` is null or points to a valid `struct device` for `'a`.
    pub(crate) unsafe fn from_device(dev: *mut bindings::device) -> Option<Self> {
        if dev.is_null() {
            return None;
        }
        // SAFETY: `dev` is non-null and valid for `'a` (the caller's guarantee).
        let dev: &'a device::Device = unsafe { device::Device::from_raw(dev) };
        let pdev: &'a pci::Device = dev.try_into().ok()?;
        Some(Self(pdev))
    }

    /// The raw pointer, for the P2P wrapper's calls into nvidia.ko.
    pub(crate) fn as_raw(&self) -> *mut bindings::pci_dev {
        // `pci::Device` is `#[repr(transparent)]` over `Opaque<bindings::pci_dev>` (on
        // every supported release), so its address is the `struct pci_dev`'s, as the
        // kernel crate's own (crate-private) `as_raw` reads it.
        core::ptr::from_ref(self.0)
            .cast::<bindings::pci_dev>()
            .cast_mut()
    }

    /// The device's largest DMA segment.
    pub(crate) fn max_segment_size(&self) -> u32 {
        // SAFETY: `as_raw` is a valid `pci_dev` for `'a`, which `self` does not outlive.
        unsafe { bindings::peermem_pci_max_seg_size(self.as_raw()) }
    }
}
