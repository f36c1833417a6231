// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Which refusal a failure is, and whether the client claims the range it refused
//! (docs/refusals.md, rules 3 to 5 and 7): the errors of the layers below, turned into
//! the reasons the counters count (`stats::Refusal`).

use kernel::prelude::*;

use crate::{
    nv_p2p::PinError,
    peer_mem::SgError,
    stats::Refusal, //
};

/// The reason a failed pin stands for: only nvidia.ko's `ENOMEM` is BAR1 exhaustion;
/// this module's own allocation failures are `NoMemory`.
pub(super) fn of_pin_error(e: PinError) -> Refusal {
    match e {
        PinError::Driver(err) if err == ENOMEM => Refusal::Bar1Exhausted,
        PinError::Driver(_) | PinError::BadAnswer => Refusal::PinFailed,
        PinError::Freed => Refusal::Freed,
        PinError::NoMemory => Refusal::NoMemory,
    }
}

/// The reason a failed DMA mapping stands for: every error of the driver's, even its
/// `ENOMEM` or `EFAULT`, is `DmaMapFailed`, and so are addresses an SG list cannot be
/// built of.
pub(super) fn of_map_error(e: MapError) -> Refusal {
    match e {
        MapError::Pin(PinError::Driver(_) | PinError::BadAnswer)
        | MapError::Sg(SgError::Entries)
        | MapError::Uncovered => Refusal::DmaMapFailed,
        MapError::Pin(PinError::Freed) => Refusal::Freed,
        MapError::Pin(PinError::NoMemory) | MapError::Sg(SgError::NoMemory) => Refusal::NoMemory,
    }
}

/// Whether a range whose pin failed for reason `why` is claimed, so that the
/// application sees the error: BAR1 exhaustion, this module's own allocation failure,
/// memory freed while being pinned. Any other failure of the driver passes the range
/// to the next client, as nvidia-peermem does.
pub(super) fn claims(why: Refusal) -> bool {
    matches!(
        why,
        Refusal::Bar1Exhausted | Refusal::Freed | Refusal::NoMemory
    )
}

/// Why a registration's `dma_map` failed: the pin's mapping, or the SG list built of
/// its addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MapError {
    /// The driver's mapping failed, or the memory was freed.
    Pin(PinError),
    /// The SG list could not be built.
    Sg(SgError),
    /// The driver's addresses do not cover the registration's range.
    Uncovered,
}

impl From<PinError> for MapError {
    fn from(e: PinError) -> Self {
        MapError::Pin(e)
    }
}

impl From<MapError> for Error {
    fn from(e: MapError) -> Error {
        match e {
            MapError::Pin(e) => e.into(),
            MapError::Sg(SgError::NoMemory) => ENOMEM,
            MapError::Sg(SgError::Entries) | MapError::Uncovered => EIO,
        }
    }
}
