// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A GPU pin shared by the registrations it covers, and its free handler.

use core::sync::atomic::{AtomicU64, Ordering};

use kernel::{
    list::{List, ListArc},
    mm::Mm,
    new_mutex,
    prelude::*,
    sync::{aref::ARef, Arc, Mutex, SetOnce},
};

use super::{user::User, ClientShared};
use crate::{
    nv_p2p::{DmaMapping, FreeHandler, GpuPin, NoCallback, PinError},
    range::GpuRange,
    registry::{Entry, Mode, PinKey, SpaceId},
    stats::Stats,
};

/// A GPU pin of either mode.
pub(super) enum PinHandle {
    Callback(GpuPin<PinUsers>),
    Persistent(GpuPin<NoCallback>),
}

/// A DMA mapping of either mode, held for its `Drop` (which unmaps it): the core
/// already has the addresses, in the SG table built while the call was in flight.
pub(super) enum Mapping {
    Callback { _held: DmaMapping<PinUsers> },
    Persistent { _held: DmaMapping<NoCallback> },
}

/// A live GPU pin, shared by the registrations it covers.
///
/// # Invariants
///
/// `id` is 0 until the pin is linked, then its registry id (never 0), set once.
pub(crate) struct SharedPin {
    pub(super) space: SpaceId,
    /// The registry id, 0 until linked: the rest of its key is the space, the mode and
    /// the start, so the pin keeps eight bytes of it instead of a 40-byte key.
    id: AtomicU64,
    /// Keeps the `mm_struct` (the key's address) from being reused while linked.
    pub(super) _mm: ARef<Mm>,
    pub(super) handle: PinHandle,
    pub(super) stats: Arc<Stats>,
}

// The pin with its `Arc` count fits a 64-byte allocation.
const _: () = assert!(
    size_of::<SharedPin>() <= 56,
    "SharedPin must fit a 64-byte allocation"
);

impl SharedPin {
    /// A pin of `space` not linked yet.
    pub(super) fn new(space: SpaceId, mm: ARef<Mm>, handle: PinHandle, stats: Arc<Stats>) -> Self {
        // INVARIANT: not linked, id 0.
        SharedPin {
            space,
            id: AtomicU64::new(0),
            _mm: mm,
            handle,
            stats,
        }
    }

    /// The mode the pin was made in.
    fn mode(&self) -> Mode {
        match &self.handle {
            PinHandle::Callback(_) => Mode::Callback,
            PinHandle::Persistent(_) => Mode::Persistent,
        }
    }

    /// Records the key the registry linked the pin under (once): `Client::pin` links it
    /// under its space, mode and start, which [`SharedPin::key`] rebuilds the key from.
    pub(super) fn linked(&self, key: &PinKey) {
        // INVARIANT: registry ids are never 0, and the pin is linked once (`Client::pin`).
        self.id.store(key.id(), Ordering::Release);
    }

    pub(super) fn range(&self) -> GpuRange {
        match &self.handle {
            PinHandle::Callback(p) => p.range(),
            PinHandle::Persistent(p) => p.range(),
        }
    }

    pub(super) fn users(&self) -> Option<&PinUsers> {
        match &self.handle {
            PinHandle::Callback(p) => Some(p.handler()),
            PinHandle::Persistent(_) => None,
        }
    }

    pub(super) fn is_freed(&self) -> bool {
        match &self.handle {
            PinHandle::Callback(p) => p.is_freed(),
            PinHandle::Persistent(p) => p.is_freed(),
        }
    }

    /// The registry key, once linked.
    pub(crate) fn key(&self) -> Option<PinKey> {
        match self.id.load(Ordering::Acquire) {
            0 => None,
            id => Some(PinKey::new(
                self.space,
                self.mode(),
                self.range().start(),
                id,
            )),
        }
    }

    /// Writes the pin's line of the debugfs `pins` file.
    pub(crate) fn describe(
        &self,
        key: &PinKey,
        salt: u64,
        f: &mut core::fmt::Formatter<'_>,
    ) -> core::fmt::Result {
        let r = self.range();
        let (users, mode) = match self.users() {
            Some(u) => (u.users.lock().count(), "callback"),
            None => (1, "persistent"),
        };
        writeln!(
            f,
            "{} {} {} {:#x} {:#x} {} {} {} {:016x}",
            key.id(),
            self.space.tgid,
            mode,
            r.start(),
            r.end(),
            r.len(),
            users,
            if self.is_freed() { "freed" } else { "live" },
            self.space.display_id(salt)
        )
    }
}

impl Entry for SharedPin {
    fn range(&self) -> GpuRange {
        SharedPin::range(self)
    }

    fn usable(&self) -> bool {
        self.users().is_some_and(|u| !u.users.lock().dead) && !self.is_freed()
    }
}

impl Drop for SharedPin {
    fn drop(&mut self) {
        self.stats.unpinned(self.range().len());
    }
}

/// The registrations using a callback pin: its free handler.
#[pin_data]
pub(crate) struct PinUsers {
    pub(super) client: Arc<ClientShared>,
    pub(super) key: SetOnce<PinKey>,
    #[pin]
    pub(super) users: Mutex<Users>,
}

impl PinUsers {
    /// No users yet.
    pub(super) fn new(client: Arc<ClientShared>) -> impl PinInit<Self> {
        pin_init!(PinUsers {
            client,
            key: SetOnce::new(),
            users <- new_mutex!(
                Users {
                    dead: false,
                    list: List::new(),
                },
                "peermem_pin_users"
            ),
        })
    }
}

/// The users of a pin.
///
/// # Invariants
///
/// A [`User`] is in `list` only while `dead` is false: the free callback takes the
/// whole list when it sets `dead`, and nothing is added after. A user is attached to
/// one pin at most, once (its only [`ListArc`] is handed to `attach`). So while `dead`
/// is false, a user of this pin that is not in `list` is in no list at all.
pub(super) struct Users {
    /// The memory is being freed: no new user, nothing to share.
    pub(super) dead: bool,
    /// Every user that acquired the pin and was not released, linked through the user
    /// itself: attaching allocates nothing, and the free callback takes the list
    /// without allocating.
    pub(super) list: List<User>,
}

impl Users {
    /// Adds `user`; `EFAULT` once the memory is being freed.
    pub(super) fn attach(&mut self, user: ListArc<User>) -> Result<(), PinError> {
        if self.dead {
            return Err(PinError::Freed);
        }
        // INVARIANT: added while `dead` is false.
        self.list.push_back(user);
        Ok(())
    }

    /// Removes `user` if it is attached; whether no user is left.
    pub(super) fn detach(&mut self, user: &User) -> bool {
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

impl FreeHandler for PinUsers {
    fn on_free(&self) {
        let list = {
            let mut u = self.users.lock();
            // INVARIANT: the list is taken as `dead` is set.
            u.dead = true;
            core::mem::take(&mut u.list)
        };
        self.client
            .stats
            .free_callbacks
            .fetch_add(1, Ordering::Relaxed);
        if let Some(key) = self.key.copy() {
            drop(self.client.pins.remove(&key));
        }
        for user in list.iter() {
            user.invalidate();
        }
    }
}
