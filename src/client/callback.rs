// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Callback mode: pins with a free callback, linked in the registry and shared by the
//! registrations they cover.

use kernel::{
    prelude::*,
    sync::{
        atomic::{
            Relaxed,
            Release, //
        },
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
        PinError,
        SpaceId, //
    },
    range::Span,
};

/// Callback mode: a pin's record lists the registrations using it, and its free
/// callback invalidates each of them.
pub(crate) struct Callback;

impl Mode for Callback {
    type Record = PinUsers<User<Callback>>;

    const NAME: &'static str = "callback";

    fn claim(
        c: &Arc<ClientShared>,
        span: Span,
        space: SpaceId,
    ) -> Result<Result<Arc<User<Self>>, PinError>> {
        let range = span.range();
        if let Some(pin) = c.pins.registry.find_covering(space, range) {
            if let Ok(user) = attach(c, span, pin)? {
                c.stats.pin_reuses.fetch_add(1, Relaxed);
                return Ok(Ok(user));
            }
            // Freed meanwhile: pin anew below.
        }
        let pin = match NvP2p::pin(c, range, PinUsers::new()) {
            Ok(pin) => pin,
            Err(e) => return Ok(Err(e)),
        };
        if let Err(e) = link(c, &pin) {
            return Ok(Err(e));
        }
        attach(c, span, pin)
    }

    fn detach(c: &ClientShared, user: &User<Self>) {
        if let Ok(pin) = user.pin() {
            let_go(c, pin, Some(user));
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

/// Makes a new pin findable by the registrations it covers (once, after it is made).
fn link(c: &ClientShared, pin: &Pin<Callback>) -> Result<(), PinError> {
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

/// A registration of `span` on `pin`, listed among its users: `Ok(Err(_))` if the pin's
/// memory is being freed (the registration is dropped, and the pin unlinked when nobody
/// else uses it).
fn attach(
    c: &ClientShared,
    span: Span,
    pin: Pin<Callback>,
) -> Result<Result<Arc<User<Callback>>, PinError>> {
    let user = match User::new(span, Ok(pin.clone())) {
        Ok(user) => user,
        Err(e) => {
            let_go(c, &pin, None);
            return Err(e);
        }
    };
    let arc = user.clone_arc();
    Ok(match pin.handler().attach(user) {
        Ok(()) => Ok(arc),
        Err(e) => {
            let_go(c, &pin, Some(&arc));
            Err(e)
        }
    })
}

/// Takes `user`, if any, out of `pin`'s users, and unlinks the pin when no user is left.
fn let_go(c: &ClientShared, pin: &Pin<Callback>, user: Option<&User<Callback>>) {
    let unused = match user {
        Some(user) => pin.handler().detach(user),
        None => pin.handler().unused(),
    };
    if unused {
        if let Some(k) = pin.key() {
            drop(c.pins.unlink(&k));
        }
    }
}
