// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Callback mode: pins with a free callback, linked in the registry and shared by the
//! registrations they cover. A pin's record (`PinUsers`) holds its registry id and the
//! registrations it serves, and its free handler invalidates each of them.

use kernel::{
    list::{
        List,
        ListArc, //
    },
    new_spinlock,
    prelude::*,
    sync::{
        atomic::{
            Acquire,
            Atomic,
            Full,
            Relaxed, //
        },
        Arc,
        SpinLock, //
    }, //
};

use super::{
    user::User,
    Claim,
    ClientShared,
    Mode,
    SharedPin, //
};
use crate::{
    nv_p2p::{
        CallbackPin,
        FreeHandler,
        NvP2p,
        PinError,
        PinIdentity,
        PinRecord, //
    },
    range::{
        GpuRange,
        Span, //
    },
    registry::{
        Entry,
        PinKey, //
    },
    space::{
        CurrentSpace,
        SpaceId, //
    },
};

// A callback pin's record with its `Arc` count fits a 128-byte allocation, with the
// locks as production kernels lay them out (lock debugging makes every lock larger).
#[cfg(not(any(CONFIG_DEBUG_LOCK_ALLOC, CONFIG_DEBUG_MUTEXES, CONFIG_DEBUG_SPINLOCK)))]
const _: () = assert!(
    size_of::<crate::nv_p2p::PinShared<PinUsers>>() <= 120,
    "a pin's record must fit a 128-byte allocation"
);

/// Callback mode: a pin's record lists the registrations using it, and its free
/// callback invalidates each of them.
pub(crate) struct Callback;

impl Mode for Callback {
    type User = User;

    const NAME: &'static str = "callback";

    fn claim(c: &Arc<ClientShared>, span: Span, space: &CurrentSpace<'_>) -> Result<Claim<Self>> {
        let range = span.range();
        if let Some(pin) = c.pins.registry.find_covering(space.id(), range) {
            if let Claim::Claimed(user) = attach(c, span, pin)? {
                c.stats.pin_reuses.fetch_add(1, Relaxed);
                return Ok(Claim::Claimed(user));
            }
            // Freed meanwhile: pin anew below.
        }
        // Only a new pin references the address space (its owner).
        let pin = match NvP2p::pin(c, range, space.owner(), PinUsers::new()) {
            Ok(pin) => pin,
            Err(e) => return Ok(Claim::PinFailed(e)),
        };
        if let Err(e) = link(c, &pin) {
            return Ok(Claim::PinFailed(e));
        }
        attach(c, span, pin)
    }

    fn detach(c: &ClientShared, user: &User) {
        if let Ok(pin) = user.pin() {
            remove_user(c, pin, Some(user));
        }
    }
}

/// Makes a new pin findable by the registrations it covers (once, after it is made).
fn link(c: &ClientShared, pin: &SharedPin) -> Result<(), PinError> {
    let key = c.pins.link(pin).map_err(|_| PinError::NoMemory)?;
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

/// A registration of `span` on `pin`, listed among its users: [`Claim::PinFailed`] if
/// the pin's memory is being freed (the registration is dropped, and the pin unlinked
/// when nobody else uses it).
fn attach(c: &ClientShared, span: Span, pin: SharedPin) -> Result<Claim<Callback>> {
    let user = match User::new(span, Ok(pin.clone())) {
        Ok(user) => user,
        Err(e) => {
            remove_user(c, &pin, None);
            return Err(e);
        }
    };
    let arc = user.clone_arc();
    Ok(match pin.handler().attach(user) {
        Ok(()) => Claim::Claimed(arc),
        Err(e) => {
            remove_user(c, &pin, Some(&arc));
            Claim::PinFailed(e)
        }
    })
}

/// Takes `user`, if any, out of `pin`'s users, and unlinks the pin when no user is left.
fn remove_user(c: &ClientShared, pin: &SharedPin, user: Option<&User>) {
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

/// What the registry and the users of a callback pin ask of it.
impl CallbackPin<PinUsers> {
    /// Records the key the registry linked the pin under (once): `link` (in this file)
    /// links it under its space and start, which [`CallbackPin::key`] rebuilds the key from.
    /// `false` if the free callback came first: it could not unlink the pin, so the
    /// caller does.
    pub(super) fn linked(&self, key: &PinKey) -> bool {
        // INVARIANT: registry ids are neither 0 nor `UNLINKED`, and the pin is linked
        // once (`link`, in this file); the id is set only over 0.
        self.handler().id.cmpxchg(0, key.id(), Full).is_ok()
    }

    /// The address space that pinned: the pin's owner (the pin holds its mm).
    pub(super) fn space(&self) -> SpaceId {
        self.identity().space
    }

    /// The registry key, once linked.
    pub(super) fn key(&self) -> Option<PinKey> {
        key_of(self.handler().id.load(Acquire), self.space(), self.range())
    }
}

impl Entry for CallbackPin<PinUsers> {
    fn range(&self) -> GpuRange {
        CallbackPin::range(self)
    }

    fn usable(&self) -> bool {
        !self.handler().dead() && !self.is_freed()
    }
}

/// What a callback client keeps in a pin's record: its registry id (the rest of the key
/// is the pin's owner and start) and the registrations using it (the free handler).
///
/// # Invariants
///
/// `id` is 0 until the pin is linked, then its registry id (neither 0 nor `UNLINKED`),
/// set once; the free callback sets `UNLINKED` as it unlinks the pin (or finds it not
/// linked yet), after which it never changes. So exactly one of the callback and the
/// linker unlinks a freed pin. `UNLINKED` is set under the `users` lock, as the
/// callback takes the whole list: a user is in `users` only while `id` is not
/// `UNLINKED`, and nothing is added after. A user is attached to one pin at most, once
/// (its only [`ListArc`] is handed to [`PinUsers::attach`]). So while `id` is not
/// `UNLINKED`, a user of this pin that is not in `users` is in no list at all.
#[pin_data]
pub(crate) struct PinUsers {
    /// The registry id, 0 until linked: the rest of the key is the owner and the start,
    /// so the record keeps eight bytes of it instead of a 32-byte key. The pin holds its
    /// owner's `mm_struct`, so the key's address is not reused while linked.
    id: Atomic<u64>,
    /// Every user that acquired the pin and was not released, linked through the user
    /// itself: attaching allocates nothing, and the free callback takes the list
    /// without allocating. A spinlock: list links change without sleeping.
    #[pin]
    users: SpinLock<List<User>>,
}

impl PinUsers {
    /// A pin not linked, with no users yet.
    pub(super) fn new() -> impl PinInit<Self> {
        // INVARIANT: not linked, id 0, no users.
        pin_init!(PinUsers {
            id: Atomic::new(0),
            users <- new_spinlock!(List::new(), "peermem_pin_users"),
        })
    }

    /// Whether the memory is being freed: no new user, nothing to share.
    fn dead(&self) -> bool {
        self.id.load(Acquire) == UNLINKED
    }

    /// Adds `user`; [`PinError::Freed`] once the memory is being freed.
    pub(super) fn attach(&self, user: ListArc<User>) -> Result<(), PinError> {
        let mut users = self.users.lock();
        if self.dead() {
            return Err(PinError::Freed);
        }
        // INVARIANT: added under the lock while `id` is not `UNLINKED`.
        users.push_back(user);
        Ok(())
    }

    /// Removes `user` if it is attached; whether no user is left.
    pub(super) fn detach(&self, user: &User) -> bool {
        let mut users = self.users.lock();
        if !self.dead() {
            // SAFETY: while `id` is not `UNLINKED` (read under the lock), a user is
            // either in this list or in none (the type invariant).
            drop(unsafe { users.remove(user) });
        }
        users.is_empty()
    }

    /// Whether no user is attached.
    pub(super) fn unused(&self) -> bool {
        self.users.lock().is_empty()
    }

    /// Runs `f` unless the memory is being freed, under the users lock: a free callback
    /// either sees what `f` did, or has already taken the list.
    pub(super) fn while_alive(&self, f: impl FnOnce()) -> bool {
        let _users = self.users.lock();
        if self.dead() {
            return false;
        }
        f();
        true
    }

    /// How many users are attached.
    pub(super) fn count(&self) -> usize {
        self.users.lock().iter().count()
    }
}

/// What `id` holds once the free callback has unlinked the pin, or found it not linked
/// yet (the registry counts its ids up from 1: 64 bits never reach this).
const UNLINKED: u64 = u64::MAX;

/// The key of the pin of `space` and `range` with registry id `id`, if linked.
fn key_of(id: u64, space: SpaceId, range: GpuRange) -> Option<PinKey> {
    match id {
        0 | UNLINKED => None,
        id => Some(PinKey::new(space, range, id)),
    }
}

impl PinRecord for PinUsers {
    type Context = ClientShared;
}

impl FreeHandler for PinUsers {
    fn on_free(&self, c: &ClientShared, pin: PinIdentity) {
        let (id, list) = {
            let mut users = self.users.lock();
            // INVARIANT: set once and for all, under the lock, as the list is taken.
            // A pin not linked yet is unlinked by its linker, which finds `UNLINKED`
            // (`CallbackPin::linked`).
            let id = self.id.xchg(UNLINKED, Full);
            (id, core::mem::take(&mut *users))
        };
        c.stats.free_callbacks.fetch_add(1, Relaxed);
        if let Some(key) = key_of(id, pin.space, pin.range) {
            drop(c.pins.unlink(&key));
        }
        for user in list.iter() {
            user.invalidate(c);
        }
    }
}
