// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The DMA peer: the PCI function an HCA maps GPU memory for.

use crate::bindings;

/// A counted reference on a PCI function (`struct pci_dev`).
///
/// # Invariants
///
/// `ptr` is a valid `struct pci_dev` on which this object holds one reference
/// (`pci_dev_get`), dropped when it is dropped.
pub(crate) struct PciFunction {
    ptr: core::ptr::NonNull<bindings::pci_dev>,
}

// SAFETY: a counted `pci_dev` reference may be used and dropped from any thread.
unsafe impl Send for PciFunction {}
// SAFETY: every method takes `&self` and only reads immutable properties of the device
// through functions that are safe to call concurrently.
unsafe impl Sync for PciFunction {}

impl PciFunction {
    /// Takes a reference on the PCI function behind `dev`; `None` when it is not a PCI
    /// device (a software RDMA device, for instance).
    ///
    /// # Safety
    ///
    /// `dev` is null or points to a valid `struct device` for the duration of the call.
    pub(crate) unsafe fn from_device(dev: *mut bindings::device) -> Option<Self> {
        // SAFETY: `dev` is null or valid (the caller's guarantee); the helper checks both
        // before taking a reference.
        let ptr = unsafe { bindings::peermem_pci_dev_get(dev) };
        // INVARIANT: a non-null result carries the reference taken by the helper.
        core::ptr::NonNull::new(ptr).map(|ptr| Self { ptr })
    }

    /// The raw pointer, for the P2P wrapper's calls into nvidia.ko.
    pub(crate) fn as_raw(&self) -> *mut bindings::pci_dev {
        self.ptr.as_ptr()
    }

    /// The device's largest DMA segment.
    pub(crate) fn max_segment_size(&self) -> u32 {
        // SAFETY: `self.ptr` is valid by the type invariant.
        unsafe { bindings::peermem_pci_max_seg_size(self.as_raw()) }
    }
}

impl Drop for PciFunction {
    fn drop(&mut self) {
        // SAFETY: this object owns one reference (type invariant).
        unsafe { bindings::peermem_pci_dev_put(self.as_raw()) };
    }
}
