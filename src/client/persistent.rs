// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Persistent mode: pins without a free callback, one per registration, never shared (a
//! pin outlives a free, while the address may be reused for new memory) and listed
//! through their registration only.

use kernel::{
    prelude::*,
    sync::{
        atomic::Release,
        Arc, //
    }, //
};

use super::{
    Claim,
    ClientShared,
    Mode,
    Pin,
    User, //
};
use crate::{
    nv_p2p::{
        NvP2p,
        PinRecord, //
    },
    range::Span,
    space::CurrentSpace,
};

/// Persistent mode: a pin's record is its number alone ([`PinNumber`]); no users list,
/// no registry link, no free handler.
pub(crate) struct Persistent;

/// What a persistent client keeps in a pin's record.
pub(crate) struct PinNumber {
    /// The pin's number in the `pins` file, from the registry's sequence.
    pub(super) id: u64,
}

impl PinRecord for PinNumber {
    type Context = ClientShared;
}

impl Mode for Persistent {
    type Record = PinNumber;

    const NAME: &'static str = "persistent";

    fn claim(c: &Arc<ClientShared>, span: Span, space: &CurrentSpace<'_>) -> Result<Claim<Self>> {
        // Never shared: pinned anew, listed through its registration only.
        let record = PinNumber {
            id: c.pins.registry.next_id(),
        };
        let pin = match NvP2p::pin_persistent(c, span.range(), space.owner(), record) {
            Ok(pin) => pin,
            Err(e) => return Ok(Claim::PinFailed(e)),
        };
        // Without its registration the pin is dropped, which unpins.
        let user = User::new(span, Ok(pin))?;
        let arc = user.clone_arc();
        c.pins.persistent.lock().push_back(user);
        Ok(Claim::Claimed(arc))
    }

    fn detach(c: &ClientShared, user: &User<Self>) {
        // SAFETY: a registration of a persistent client is in the persistent list or in
        // none: its one `ListArc` went to that list in `claim`, and only this removes
        // it.
        let listed = unsafe { c.pins.persistent.lock().remove(user) };
        // After the lock (the caller holds the user too: never the last reference).
        drop(listed);
    }

    fn record_context(_pin: &Pin<Self>, user: &User<Self>, core_context: u64) -> bool {
        // No free callback: the memory stays until the pin is put.
        user.core_context.store(core_context, Release);
        true
    }

    fn users(_pin: &Pin<Self>) -> usize {
        // Its one registration holds it.
        1
    }
}
