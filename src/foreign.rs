// SPDX-License-Identifier: GPL-2.0 OR MIT

//! What the wrappers of the foreign APIs share (nvidia.ko's P2P API, the RDMA
//! peer-memory core): a C return value as a kernel error, and the name of a foreign
//! function the loader did not resolve.

use kernel::{
    ffi::c_int,
    prelude::*, //
};

/// Maps a foreign return value to a result: 0 is success, a negative errno is that
/// error, anything else (not a valid errno) is `EIO`.
pub(crate) fn driver_result(ret: c_int) -> Result {
    match ret {
        0 => Ok(()),
        -4095..=-1 => Err(Error::from_errno(ret)),
        _ => Err(EIO),
    }
}

/// The first missing foreign function, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MissingSymbol(pub(crate) &'static str);
