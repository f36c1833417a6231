// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A GPU pin shared by the registrations it covers, and its free handler.

use kernel::{
    list::{
        List,
        ListArc,
        ListItem, //
    },
    new_spinlock,
    prelude::*,
    sync::{
        atomic::{
            Acquire,
            Atomic,
            Full,
            Relaxed,
            Release, //
        },
        Arc,
        SpinLock, //
    }, //
};

use super::ClientShared;
use crate::{
    nv_p2p::{
        DmaMapping,
        FreeHandler,
        GpuPin,
        PinError,
        PinIdentity, //
    },
    range::GpuRange,
    registry::{
        Entry,
        PinKey,
        SpaceId, //
    }, //
};

/// A registration, as the users list of its pin sees it (`client::user::User`): the
/// pin knows its users only through this, so this file does not depend on theirs.
pub(crate) trait PinUser: ListItem<0> + Send + Sync + Sized + 'static {
    /// The memory of `pin`, which this user uses, is being freed (from its free
    /// callback): invalidates the registration.
    fn on_pin_freed(&self, pin: &PinUsers<Self>);
}

/// A DMA mapping of a pin, held for its `Drop` (which unmaps it): the core already
/// has the addresses, in the SG table built while the call was in flight.
pub(super) type Mapping<U> = DmaMapping<PinUsers<U>>;

/// A live GPU pin of either mode, shared by the registrations (`U`) it covers: one
/// owner handle of the driver pin, whose record keeps the pin's registry identity and
/// users beside the driver state (one allocation per pin).
pub(crate) struct SharedPin<U: PinUser> {
    pub(super) pin: GpuPin<PinUsers<U>>,
}

impl<U: PinUser> Clone for SharedPin<U> {
    fn clone(&self) -> Self {
        SharedPin {
            pin: self.pin.clone(),
        }
    }
}

impl<U: PinUser> SharedPin<U> {
    fn info(&self) -> &PinUsers<U> {
        self.pin.handler()
    }

    /// Records the key the registry linked the pin under (once): `Client::pin` links it
    /// under its space and start, which [`SharedPin::key`] rebuilds the key from.
    /// `false` if the free callback came first: it could not unlink the pin, so the
    /// caller does.
    pub(super) fn linked(&self, key: &PinKey) -> bool {
        // INVARIANT: registry ids are neither 0 nor `UNLINKED`, and the pin is linked
        // once (`Client::pin`); the id is set only over 0.
        self.info().id.cmpxchg(0, key.id(), Full).is_ok()
    }

    /// Numbers a persistent pin, which is never linked, for the `pins` file (once, when
    /// it is made).
    pub(super) fn numbered(&self, id: u64) {
        // INVARIANT: a persistent pin: its id is set once, over 0, and nothing else
        // changes it (it has no free callback).
        self.info().id.store(id, Release);
    }

    /// The pin's number in the `pins` file: its registry id.
    pub(super) fn id(&self) -> u64 {
        self.info().id.load(Acquire)
    }

    pub(super) fn range(&self) -> GpuRange {
        self.pin.range()
    }

    /// The users of a callback pin (a persistent pin has no list: its one user holds
    /// it).
    pub(super) fn users(&self) -> Option<&PinUsers<U>> {
        (!self.pin.is_persistent()).then(|| self.info())
    }

    pub(super) fn is_freed(&self) -> bool {
        self.pin.is_freed()
    }

    /// The address space that pinned: the pin's owner (the pin holds its mm).
    pub(super) fn space(&self) -> SpaceId {
        space_of(&self.pin.identity())
    }

    /// The registry key, once linked (a persistent pin never is).
    pub(crate) fn key(&self) -> Option<PinKey> {
        if self.pin.is_persistent() {
            return None;
        }
        self.info().key(self.space(), self.range())
    }

    /// Writes the pin's line of the debugfs `pins` file, numbered `id`.
    pub(crate) fn describe(
        &self,
        id: u64,
        salt: u64,
        f: &mut core::fmt::Formatter<'_>,
    ) -> core::fmt::Result {
        let r = self.range();
        let (users, mode) = match self.users() {
            Some(u) => (u.users.lock().count(), "callback"),
            None => (1, "persistent"),
        };
        let space = self.space();
        writeln!(
            f,
            "{} {} {} {:#x} {:#x} {} {} {} {:016x}",
            id,
            space.tgid,
            mode,
            r.start(),
            r.end(),
            r.len(),
            users,
            if self.is_freed() { "freed" } else { "live" },
            space.display_id(salt)
        )
    }
}

/// The address space a pin belongs to.
fn space_of(pin: &PinIdentity) -> SpaceId {
    SpaceId {
        mm: pin.mm,
        tgid: pin.tgid,
    }
}

impl<U: PinUser> Entry for SharedPin<U> {
    fn range(&self) -> GpuRange {
        SharedPin::range(self)
    }

    fn usable(&self) -> bool {
        self.users().is_some_and(|u| !u.users.lock().dead) && !self.is_freed()
    }
}

/// What the client keeps in a pin's record: its registry id (the rest of the key is the
/// pin's owner, mode and start) and, for a callback pin, the registrations using it
/// (the free handler).
///
/// # Invariants
///
/// For a callback pin, `id` is 0 until the pin is linked, then its registry id (neither
/// 0 nor `UNLINKED`), set once; the free callback sets `UNLINKED` as it unlinks the pin
/// (or finds it not linked yet), after which it never changes. So exactly one of the
/// callback and the linker unlinks a freed pin. A persistent pin is never linked: its
/// `id` is a number from the registry's sequence, set once when it is made, for the
/// `pins` file only.
#[pin_data]
pub(crate) struct PinUsers<U: PinUser> {
    pub(super) client: Arc<ClientShared>,
    /// The registry id, 0 until linked: the rest of the key is the owner, the mode and
    /// the start, so the record keeps eight bytes of it instead of a 32-byte key. The
    /// pin holds its owner's `mm_struct`, so the key's address is not reused while
    /// linked. A persistent pin's number (see the type's invariants).
    id: Atomic<u64>,
    /// A spinlock: what it guards is a flag and list links, changed without sleeping.
    #[pin]
    pub(super) users: SpinLock<Users<U>>,
}

impl<U: PinUser> PinUsers<U> {
    /// A pin not linked, with no users yet.
    pub(super) fn new(client: Arc<ClientShared>) -> impl PinInit<Self> {
        // INVARIANT: not linked, id 0.
        pin_init!(PinUsers {
            client,
            id: Atomic::new(0),
            users <- new_spinlock!(
                Users {
                    dead: false,
                    list: List::new(),
                },
                "peermem_pin_users"
            ),
        })
    }

    /// The registry key of the callback pin of `space` and `range`, while linked.
    fn key(&self, space: SpaceId, range: GpuRange) -> Option<PinKey> {
        key_of(self.id.load(Acquire), space, range)
    }
}

/// What `id` holds once the free callback has unlinked the pin, or found it not linked
/// yet (the registry counts its ids up from 1: 64 bits never reach this).
const UNLINKED: u64 = u64::MAX;

/// The key of a callback pin (the only ones linked) of `space` and `range` with registry
/// id `id`, if linked.
fn key_of(id: u64, space: SpaceId, range: GpuRange) -> Option<PinKey> {
    match id {
        0 | UNLINKED => None,
        id => Some(PinKey::new(space, range.start(), id)),
    }
}

/// The users of a pin.
///
/// # Invariants
///
/// A user is in `list` only while `dead` is false: the free callback takes the
/// whole list when it sets `dead`, and nothing is added after. A user is attached to
/// one pin at most, once (its only [`ListArc`] is handed to `attach`). So while `dead`
/// is false, a user of this pin that is not in `list` is in no list at all.
pub(super) struct Users<U: PinUser> {
    /// The memory is being freed: no new user, nothing to share.
    pub(super) dead: bool,
    /// Every user that acquired the pin and was not released, linked through the user
    /// itself: attaching allocates nothing, and the free callback takes the list
    /// without allocating.
    pub(super) list: List<U>,
}

impl<U: PinUser> Users<U> {
    /// Adds `user`; `EFAULT` once the memory is being freed.
    pub(super) fn attach(&mut self, user: ListArc<U>) -> Result<(), PinError> {
        if self.dead {
            return Err(PinError::Freed);
        }
        // INVARIANT: added while `dead` is false.
        self.list.push_back(user);
        Ok(())
    }

    /// Removes `user` if it is attached; whether no user is left.
    pub(super) fn detach(&mut self, user: &U) -> bool {
        if !self.dead {
            // SAFETY: while the pin is not dead, a user is either in this list or in
            // none (the type invariant).
            drop(unsafe { self.list.remove(user) });
        }
        self.list.is_empty()
    }

    /// How many users are attached.
    pub(super) fn count(&self) -> usize {
        self.list.iter().count()
    }
}

impl<U: PinUser> FreeHandler for PinUsers<U> {
    fn on_free(&self, pin: PinIdentity) {
        let list = {
            let mut u = self.users.lock();
            // INVARIANT: the list is taken as `dead` is set.
            u.dead = true;
            core::mem::take(&mut u.list)
        };
        self.client.stats.free_callbacks.fetch_add(1, Relaxed);
        // Only callback pins have a free callback. A pin not linked yet is unlinked by
        // its linker, which finds `UNLINKED` (`SharedPin::linked`).
        // INVARIANT: set once and for all, as the callback unlinks.
        let id = self.id.xchg(UNLINKED, Full);
        if let Some(key) = key_of(id, space_of(&pin), pin.range) {
            drop(self.client.pins.unlink(&key));
        }
        for user in list.iter() {
            user.on_pin_freed(self);
        }
    }

    fn released(&self, pin: PinIdentity) {
        self.client.stats.unpinned(pin.range.len());
    }
}
