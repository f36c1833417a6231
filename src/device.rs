// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The DMA peer: the PCI function an HCA maps GPU memory for.

use kernel::{
    device,
    pci,
    sync::aref::ARef, //
};

use crate::bindings;

/// A counted reference on a PCI function: the kernel crate's `ARef<pci::Device>`
/// (`pci_dev_get` when made, `pci_dev_put` when dropped).
pub(crate) struct PciFunction(ARef<pci::Device>);

impl PciFunction {
    /// Takes a reference on the PCI function behind `dev`; `None` when `dev` is null or
    /// not a PCI device (a software RDMA device, for instance): the kernel crate's
    /// conversion checks the bus (`dev_is_pci`).
    ///
    /// # Safety
    ///
    /// `dev` is null or points to a valid `struct device` for the duration of the call.
    pub(crate) unsafe fn from_device(dev: *mut bindings::device) -> Option<Self> {
        if dev.is_null() {
            return None;
        }
        // SAFETY: `dev` is non-null and valid for the duration of this call (the
        // caller's guarantee), and the reference does not outlive it: the PCI function
        // is kept by the counted reference taken below.
        let dev: &device::Device = unsafe { device::Device::from_raw(dev) };
        let pdev: &pci::Device = dev.try_into().ok()?;
        Some(Self(pdev.into()))
    }

    /// The raw pointer, for the P2P wrapper's calls into nvidia.ko.
    pub(crate) fn as_raw(&self) -> *mut bindings::pci_dev {
        // `pci::Device` is `#[repr(transparent)]` over `Opaque<bindings::pci_dev>` (on
        // every supported release), so its address is the `struct pci_dev`'s, as the
        // kernel crate's own (crate-private) `as_raw` reads it.
        let pdev: &pci::Device = &self.0;
        core::ptr::from_ref(pdev)
            .cast::<bindings::pci_dev>()
            .cast_mut()
    }

    /// The device's largest DMA segment.
    pub(crate) fn max_segment_size(&self) -> u32 {
        // SAFETY: `as_raw` is a valid `pci_dev`, referenced for as long as `self` lives.
        unsafe { bindings::peermem_pci_max_seg_size(self.as_raw()) }
    }
}
