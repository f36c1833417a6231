// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A GPU pin shared by the registrations it covers, and its free handler.

use core::sync::atomic::Ordering;

use kernel::{
    mm::Mm,
    prelude::*,
    sync::{aref::ARef, Arc, Mutex, SetOnce},
};

use super::{user::User, ClientShared};
use crate::{
    nv_p2p::{DmaMapping, FreeHandler, GpuPin, NoCallback},
    range::GpuRange,
    registry::{Entry, PinKey, SpaceId},
    stats::Stats,
};

/// A GPU pin of either mode.
pub(super) enum PinHandle {
    Callback(GpuPin<PinUsers>),
    Persistent(GpuPin<NoCallback>),
}

/// A DMA mapping of either mode.
pub(super) enum Mapping {
    Callback(DmaMapping<PinUsers>),
    Persistent(DmaMapping<NoCallback>),
}

impl Mapping {
    pub(super) fn addresses(&self) -> &[u64] {
        match self {
            Mapping::Callback(m) => m.addresses(),
            Mapping::Persistent(m) => m.addresses(),
        }
    }

    pub(super) fn forget_addresses(&mut self) {
        match self {
            Mapping::Callback(m) => m.forget_addresses(),
            Mapping::Persistent(m) => m.forget_addresses(),
        }
    }
}

/// A live GPU pin, shared by the registrations it covers.
pub(crate) struct SharedPin {
    pub(super) space: SpaceId,
    pub(super) key: SetOnce<PinKey>,
    /// Keeps the `mm_struct` (the key's address) from being reused while linked.
    pub(super) _mm: ARef<Mm>,
    pub(super) handle: PinHandle,
    pub(super) stats: Arc<Stats>,
}

impl SharedPin {
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
        self.key.copy()
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
            Some(u) => (u.users.lock().list.len(), "callback"),
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
pub(crate) struct PinUsers {
    pub(super) client: Arc<ClientShared>,
    pub(super) key: SetOnce<PinKey>,
    pub(super) users: Pin<KBox<Mutex<Users>>>,
}

pub(super) struct Users {
    /// The memory is being freed: no new user, nothing to share.
    pub(super) dead: bool,
    /// Every user that acquired the pin and was not released, with its room reserved
    /// at attach time: the free callback takes the list without allocating.
    pub(super) list: KVec<Arc<User>>,
}

impl FreeHandler for PinUsers {
    fn on_free(&self) {
        let list = {
            let mut u = self.users.lock();
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
