// SPDX-License-Identifier: GPL-2.0 OR MIT

//! What differs between the kernel releases peermem builds on (README.md, "Supported
//! kernels"): the only place that knows. Kbuild sets `peermem_kernel_7_3` on 7.3 and
//! later; each item below names the release whose kernel crate made it unnecessary,
//! so it can go when that release becomes the oldest supported one.

#[cfg(not(peermem_kernel_7_3))]
use core::marker::PhantomData;

use kernel::{
    prelude::*,
    sync::atomic::{
        ordering,
        Atomic,
        AtomicType, //
    },
};

/// "Operation not supported" (`EOPNOTSUPP`; a kernel-crate error code from 7.3 on).
#[cfg(peermem_kernel_7_3)]
pub(crate) fn eopnotsupp() -> Error {
    kernel::error::code::EOPNOTSUPP
}

/// "Operation not supported" (`EOPNOTSUPP`; a kernel-crate error code from 7.3 on).
#[cfg(not(peermem_kernel_7_3))]
pub(crate) fn eopnotsupp() -> Error {
    Error::from_errno(-(kernel::bindings::EOPNOTSUPP as i32))
}

/// `atomic.fetch_sub(v, o)` on a counter: `Atomic::fetch_sub` from 7.3 on; before, the
/// addition of the negated value (the kernel's atomics wrap, so it is the same).
pub(crate) fn fetch_sub<T: Counter, O: ordering::Ordering>(atomic: &Atomic<T>, v: T, o: O) -> T {
    T::fetch_sub(atomic, v, o)
}

/// The counter types [`fetch_sub`] takes.
pub(crate) trait Counter: AtomicType {
    /// See [`fetch_sub`].
    fn fetch_sub<O: ordering::Ordering>(atomic: &Atomic<Self>, v: Self, o: O) -> Self;
}

macro_rules! counter {
    ($($t:ty),*) => {$(
        impl Counter for $t {
            #[cfg(peermem_kernel_7_3)]
            fn fetch_sub<O: ordering::Ordering>(atomic: &Atomic<Self>, v: Self, o: O) -> Self {
                atomic.fetch_sub(v, o)
            }

            #[cfg(not(peermem_kernel_7_3))]
            fn fetch_sub<O: ordering::Ordering>(atomic: &Atomic<Self>, v: Self, o: O) -> Self {
                atomic.fetch_add(v.wrapping_neg(), o)
            }
        }
    )*};
}

counter!(u32, u64);

/// An atomic pointer (`Atomic<*mut T>` from 7.3 on).
#[cfg(peermem_kernel_7_3)]
pub(crate) type AtomicPtr<T> = Atomic<*mut T>;

/// An atomic pointer (`Atomic<*mut T>` from 7.3 on): before, its address in an
/// `Atomic<usize>` (`as` casts, which expose the pointer's provenance).
#[cfg(not(peermem_kernel_7_3))]
pub(crate) struct AtomicPtr<T>(Atomic<usize>, PhantomData<fn() -> *mut T>);

/// An atomic pointer holding null (what `Atomic::new(null_mut())` is from 7.3 on).
#[cfg(peermem_kernel_7_3)]
pub(crate) const fn null_atomic_ptr<T>() -> AtomicPtr<T> {
    Atomic::new(core::ptr::null_mut())
}

/// An atomic pointer holding null (what `Atomic::new(null_mut())` is from 7.3 on).
#[cfg(not(peermem_kernel_7_3))]
pub(crate) const fn null_atomic_ptr<T>() -> AtomicPtr<T> {
    AtomicPtr(Atomic::new(0), PhantomData)
}

#[cfg(not(peermem_kernel_7_3))]
impl<T> AtomicPtr<T> {
    /// `Atomic::load`.
    pub(crate) fn load<O: ordering::AcquireOrRelaxed>(&self, o: O) -> *mut T {
        self.0.load(o) as *mut T
    }

    /// `Atomic::store`.
    pub(crate) fn store<O: ordering::ReleaseOrRelaxed>(&self, p: *mut T, o: O) {
        self.0.store(p as usize, o)
    }

    /// `Atomic::cmpxchg`.
    pub(crate) fn cmpxchg<O: ordering::Ordering>(
        &self,
        old: *mut T,
        new: *mut T,
        o: O,
    ) -> Result<*mut T, *mut T> {
        self.0
            .cmpxchg(old as usize, new as usize, o)
            .map(|p| p as *mut T)
            .map_err(|p| p as *mut T)
    }
}
