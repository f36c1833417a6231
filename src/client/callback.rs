// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Callback mode: pins with a free callback, linked in the registry and shared by the
//! registrations they cover.

use kernel::{
    list::ListArc,
    prelude::*,
    sync::{
        atomic::Release,
        Arc, //
    }, //
};

use super::{
    shared_pin::PinUsers,
    ClientShared,
    Mode,
    Pin,
    User, //
};
use crate::{
    nv_p2p::{
        NvP2p,
        PinError, //
    },
    range::GpuRange,
    registry::SpaceId,
};

/// Callback mode: a pin's record lists the registrations using it, and its free
/// callback invalidates each of them.
pub(crate) struct Callback;

impl Mode for Callback {
    type Record = PinUsers<User<Callback>>;

    const NAME: &'static str = "callback";

    fn find(c: &ClientShared, space: SpaceId, range: GpuRange) -> Option<Pin<Self>> {
        c.pins.registry.find_covering(space, range)
    }

    fn make(c: &Arc<ClientShared>, range: GpuRange) -> Result<Pin<Self>, PinError> {
        NvP2p::pin(c, range, PinUsers::new())
    }

    fn link(c: &ClientShared, pin: &Pin<Self>) -> Result<(), PinError> {
        let key = c
            .pins
            .registry
            .insert(pin.space(), pin.clone())
            .map_err(|_| PinError::NoMemory)?;
        // The window between taking the table and recording the link: a free callback
        // running here finds no id and leaves the unlink to `linked` below. Test builds
        // park here on demand (`race_free_before_the_pin_is_linked`).
        #[cfg(peermem_kunit)]
        crate::glue::test_pause_before_link();
        if !pin.linked(&key) {
            // Freed before its key was known to the callback: unlink here.
            drop(c.pins.unlink(&key));
        }
        Ok(())
    }

    fn attach(
        _c: &ClientShared,
        pin: &Pin<Self>,
        user: ListArc<User<Self>>,
    ) -> Result<(), PinError> {
        pin.handler().attach(user)
    }

    fn detach(c: &ClientShared, pin: &Pin<Self>, user: &User<Self>) {
        if pin.handler().detach(user) {
            if let Some(k) = pin.key() {
                drop(c.pins.unlink(&k));
            }
        }
    }

    fn forget_unused(c: &ClientShared, pin: &Pin<Self>) {
        if pin.handler().unused() {
            if let Some(k) = pin.key() {
                drop(c.pins.unlink(&k));
            }
        }
    }

    fn record_context(pin: &Pin<Self>, user: &User<Self>, core_context: u64) -> bool {
        // Under the users lock, so a free callback either sees this context (and
        // invalidates it) or has already taken the users.
        pin.handler()
            .while_alive(|| user.core_context.store(core_context, Release))
    }

    fn users(pin: &Pin<Self>) -> usize {
        pin.handler().count()
    }
}
