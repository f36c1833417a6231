// SPDX-License-Identifier: GPL-2.0 OR MIT

//! What differs between the kernel releases peermem builds on (README.md, "Supported
//! kernels"): the only place that knows. Kbuild sets `peermem_kernel_7_3` on 7.3 and
//! later; each item below names the release whose kernel crate made it unnecessary,
//! so it can go when that release becomes the oldest supported one.

use kernel::{prelude::*, task::Task};

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

/// The task's thread-group id, in the initial pid namespace (`Task::tgid` from 7.3 on).
#[cfg(peermem_kernel_7_3)]
pub(crate) fn tgid(task: &Task) -> i32 {
    task.tgid()
}

/// The task's thread-group id, in the initial pid namespace (`Task::tgid` from 7.3 on).
#[cfg(not(peermem_kernel_7_3))]
pub(crate) fn tgid(task: &Task) -> i32 {
    // SAFETY: `task` is a valid task (the reference's guarantee), and its tgid never
    // changes after the task is created, so the read is not a data race (the reasoning
    // of 7.3's `Task::tgid`).
    unsafe { *core::ptr::addr_of!((*task.as_ptr()).tgid) }
}
