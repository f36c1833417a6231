// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The peer-memory client: what peermem does for each registration.
//!
//! One registration = at most one GPU pin: `acquire` (in the registering process)
//! decides "GPU memory of this process" by pinning the 64 KiB-rounded range, and keeps
//! that pin for the registration; `get_pages` only checks it. In callback mode a
//! registration covered by a live pin of the same address space reuses it. See
//! docs/pin-state-machine.md for the states and the lock order.
//!
//! Files: `peer` (the core's callbacks, `PeerClient`), `user` (one registration and its
//! invalidation), `shared_pin` (a pin and the registrations it serves), `sg` (the SG
//! list of a registration). Tests: the KUnit
//! suite `peermem_sg` (`client/sg.rs`); the client's behaviour against the fakes is
//! tested by the suites in `tests/client` (peermem_client_<mode>, peermem_model_<mode>,
//! peermem_faults) and the plan's scenarios (docs/testing.md).

use kernel::{
    list::{
        List,
        ListArc, //
    },
    new_condvar,
    new_mutex,
    prelude::*,
    sync::{
        atomic::Relaxed,
        Arc,
        CondVar,
        Mutex,
        SetOnce, //
    }, //
};

use crate::{
    compat,
    nv_p2p::{
        NvP2p,
        PinError, //
    },
    peer_mem::{
        ClientKind,
        Invalidator,
        SgHead,
        SgList, //
    },
    range::{
        GpuRange,
        Span, //
    },
    registry::{
        PinKey,
        Registry,
        SpaceId, //
    },
    stats::{
        Refusal,
        Stats, //
    }, //
};

mod peer;
mod sg;
mod shared_pin;
mod user;

use sg::sg_entries;
pub(crate) use user::SharedPin;
use user::{
    Mapping,
    PinUsers,
    User, //
};

/// This module's live pins: callback pins in the registry, where registrations they
/// cover find them; persistent pins, which are never shared, only listed, through the
/// registration that holds each (no registry node, no tree walk).
#[pin_data]
pub(crate) struct Pins {
    #[pin]
    registry: Registry<SharedPin>,
    /// The registrations of persistent pins: one each. A mutex, as the registry's: the
    /// `pins` file is written under it, however long the list.
    #[pin]
    persistent: Mutex<List<User>>,
}

impl Pins {
    /// No pins.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Pins {
            registry <- Registry::new(),
            persistent <- new_mutex!(List::new(), "peermem_persistent"),
        })
    }

    /// Unlinks the callback pin with `key`, if still linked.
    fn unlink(&self, key: &PinKey) -> Option<SharedPin> {
        self.registry.remove(key)
    }

    /// How many pins are live: linked callback pins and persistent pins.
    pub(crate) fn len(&self) -> usize {
        self.registry.len() + self.persistent.lock().iter().count()
    }

    /// Calls `f` with the id of every live pin and the pin: the registry's in key
    /// order, then the persistent ones in the order they were made.
    pub(crate) fn for_each(&self, mut f: impl FnMut(u64, &SharedPin)) {
        self.registry.for_each(|key, pin| f(key.id(), pin));
        for user in self.persistent.lock().iter() {
            if let Ok(pin) = user.pin() {
                f(pin.id(), pin);
            }
        }
    }
}

/// How a client pins.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum PinMode {
    /// Pins with a free callback, linked in the registry and shared by the
    /// registrations they cover.
    Callback,
    /// Persistent pins, never shared (a pin outlives a free, while the address may be
    /// reused for new memory): listed through their registration only.
    Persistent,
}

/// What every part of a client shares.
#[pin_data]
struct ClientShared {
    nv: Arc<NvP2p>,
    mode: PinMode,
    kind: ClientKind,
    pins: Arc<Pins>,
    stats: Arc<Stats>,
    invalidator: SetOnce<Invalidator>,
    /// Where a release waits for an invalidation of its registration to return (rare:
    /// one condition for every registration instead of a lock in each).
    #[pin]
    released: CondVar,
}

/// A peer-memory client of one mode.
pub(crate) struct Client {
    shared: Arc<ClientShared>,
}

impl Client {
    /// A client pinning in `mode`, registered as `kind`.
    pub(crate) fn new(
        nv: Arc<NvP2p>,
        mode: PinMode,
        kind: ClientKind,
        pins: Arc<Pins>,
        stats: Arc<Stats>,
    ) -> Result<Arc<Client>> {
        let shared = Arc::pin_init(
            pin_init!(ClientShared {
                nv,
                mode,
                kind,
                pins,
                stats,
                invalidator: SetOnce::new(),
                released <- new_condvar!("peermem_release"),
            }),
            GFP_KERNEL,
        )?;
        Ok(Arc::new(Client { shared }, GFP_KERNEL)?)
    }

    /// Installs the core's invalidation entry (before the registration is enabled).
    pub(crate) fn set_invalidator(&self, inv: Invalidator) {
        self.shared.invalidator.populate(inv);
    }

    /// Pins `range` anew in the client's mode and links the pin (under its owner: the
    /// calling process).
    fn pin(&self, range: GpuRange) -> Result<SharedPin, PinError> {
        let c = &self.shared;
        let users = PinUsers::new(c.clone());
        let pin = SharedPin {
            pin: match c.mode {
                PinMode::Callback => NvP2p::pin(&c.nv, range, users)?,
                PinMode::Persistent => NvP2p::pin_persistent(&c.nv, range, users)?,
            },
        };
        // Accounted as unpinned when its last owner lets go (`PinUsers::released`).
        c.stats.pinned(range.len());
        if c.mode == PinMode::Persistent {
            // Never shared: listed through its registration (`attach`), not linked.
            pin.numbered(c.pins.registry.next_id());
            return Ok(pin);
        }
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
        Ok(pin)
    }

    /// Adds `user` to the users of `pin`, or, for a persistent pin (whose one user
    /// holds it), to the list of persistent registrations; `EFAULT` if the pin's memory
    /// is being freed.
    fn attach(&self, pin: &SharedPin, user: ListArc<User>) -> Result<(), PinError> {
        match pin.users() {
            Some(u) => u.users.lock().attach(user),
            None => {
                self.shared.pins.persistent.lock().push_back(user);
                Ok(())
            }
        }
    }

    /// Removes `user` from the users of `pin` (or the persistent registrations); unlinks
    /// a callback pin when it was the last.
    fn detach(&self, pin: &SharedPin, user: &User) {
        let Some(u) = pin.users() else {
            // SAFETY: the user of a persistent pin is in the persistent list or in
            // none: its one `ListArc` went to `attach`, which put it there, and only
            // this removes it.
            let listed = unsafe { self.shared.pins.persistent.lock().remove(user) };
            // After the lock (the caller holds the user too: never the last reference).
            drop(listed);
            return;
        };
        if u.users.lock().detach(user) {
            if let Some(k) = pin.key() {
                drop(self.shared.pins.unlink(&k));
            }
        }
    }

    /// What a failed pin means for a registration in acquire (the refusal rules,
    /// docs/refusals.md): `None` passes the range to the next client, `Some` claims it
    /// with a user whose `get_pages` reports the error to the application.
    fn pin_failed(&self, span: Span, e: PinError) -> Result<Option<Arc<User>>> {
        let c = &self.shared;
        if e == PinError::Driver(EINVAL) {
            // The driver's "not a pinnable range of this process": not ours, and not
            // a refusal.
            return Ok(None);
        }
        let why = Refusal::of_pin_error(e);
        let err = c.stats.refuse(why, span.addr(), span.len(), Error::from(e));
        if !why.claims() {
            // Counted and logged, then "not mine", as nvidia-peermem answers.
            return Ok(None);
        }
        Ok(Some(User::new(span, Err(err))?.into_arc()))
    }

    /// Unlinks `pin` unless a registration uses it (a user could not be made for it).
    fn unlink_unless_used(&self, pin: &SharedPin) {
        let used = pin.users().is_some_and(|u| !u.users.lock().list.is_empty());
        if !used {
            if let Some(k) = pin.key() {
                drop(self.shared.pins.unlink(&k));
            }
        }
    }

    /// A user of `pin` for the registration, attached to it: `Ok(Err(_))` if the pin's
    /// memory is being freed (the user is dropped, and the pin unlinked when nobody else
    /// uses it).
    fn attach_user(&self, span: Span, pin: SharedPin) -> Result<Result<Arc<User>, PinError>> {
        let user = match User::new(span, Ok(pin.clone())) {
            Ok(user) => user,
            Err(e) => {
                self.unlink_unless_used(&pin);
                return Err(e);
            }
        };
        let arc = user.clone_arc();
        Ok(match self.attach(&pin, user) {
            Ok(()) => Ok(arc),
            Err(e) => {
                self.detach(&pin, &arc);
                Err(e)
            }
        })
    }

    /// Drops a registration's DMA mapping (which unmaps) and frees its SG list, taken
    /// out of its state.
    fn drop_mapped(&self, (mapping, sg): (Option<Mapping>, Option<(SgHead, SgList)>)) {
        drop(mapping);
        if let Some((mut head, list)) = sg {
            head.uninstall(&list);
            drop(list);
        }
    }

    fn claim(&self, span: Span) -> Result<Option<Arc<User>>> {
        let c = &self.shared;
        let range = span.range();
        let Some(space) = current_space() else {
            // A kernel thread: not a process's GPU memory.
            return Ok(None);
        };
        if c.mode == PinMode::Callback {
            if let Some(pin) = c.pins.registry.find_covering(space, range) {
                if let Ok(user) = self.attach_user(span, pin)? {
                    c.stats.pin_reuses.fetch_add(1, Relaxed);
                    return Ok(Some(user));
                }
                // Freed meanwhile: pin anew below.
            }
        }
        let attached = match self.pin(range) {
            Ok(pin) => self.attach_user(span, pin)?,
            Err(e) => Err(e),
        };
        match attached {
            Ok(user) => Ok(Some(user)),
            Err(e) => self.pin_failed(span, e),
        }
    }
}

/// The calling process's address space, if it has one (the mm is not held: a pin made
/// from here holds it).
fn current_space() -> Option<SpaceId> {
    let task = kernel::current!();
    let mm = task.mm()?;
    Some(SpaceId {
        mm: mm.as_raw() as usize,
        tgid: compat::tgid(task),
    })
}
