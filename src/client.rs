// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The peer-memory client: what peermem does for each registration.
//!
//! One registration = at most one GPU pin: `acquire` (in the registering process)
//! decides "GPU memory of this process" by pinning the 64 KiB-rounded range, and keeps
//! that pin for the registration; `get_pages` only checks it. A client's mode is its
//! type (`Client<Callback>`, `Client<Persistent>`): in callback mode a registration
//! covered by a live pin of the same address space reuses it; a persistent pin has one
//! registration and no users list. See docs/pin-state-machine.md for the states and
//! the lock order.
//!
//! This file holds the client and its answers to the core's callbacks (`PeerClient`),
//! through what a registration of either mode offers (`Registration`) and keeps of its
//! mapping (`MappingSlot`). The files below
//! it: `callback` (callback mode: how a registration finds or makes its pin, and the
//! pin's record, which lists the registrations it serves and is its free handler),
//! `user` (a callback registration and its invalidation), `persistent` (persistent mode: a registration and
//! its pin in one record), `sg` (the SG list of a registration). Tests: the KUnit suite `peermem_sg` (`client/sg.rs`); the
//! client's behaviour against the fakes is tested by the suites in `tests/client`
//! (peermem_client_<mode>, peermem_model_<mode>, peermem_faults) and the plan's
//! scenarios (docs/testing.md).

use core::{
    fmt,
    marker::PhantomData, //
};

use kernel::{
    list::List,
    new_condvar,
    new_mutex,
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
        ArcBorrow,
        CondVar,
        Mutex,
        SetOnce, //
    }, //
};

use crate::{
    compat,
    device::PciFunction,
    nv_p2p::{
        CallbackPin,
        DmaMapping,
        NvP2p,
        PinContext,
        PinError, //
    },
    peer_mem::{
        ClientKind,
        DmaDevice,
        InstalledSg,
        Invalidator,
        PeerClient,
        SgHead,
        SgList, //
    },
    range::{
        GpuRange,
        Span,
        GPU_PAGE_SIZE, //
    },
    registry::{
        PinKey,
        Registry, //
    },
    space::{
        self,
        CurrentSpace, //
    },
    stats::{
        Refusal,
        Stats, //
    }, //
};

mod callback;
mod persistent;
mod refusal;
mod sg;
mod user;

pub(crate) use callback::Callback;
use callback::PinUsers;
pub(crate) use persistent::Persistent;
use persistent::PersistentUser;
use refusal::MapError;
use sg::sg_entries;

// A registration's record of either mode with its `Arc` count fits a 96-byte
// allocation, with the locks as production kernels lay them out (lock debugging makes
// every lock larger): with an SG list of one entry (32 bytes), a persistent
// registration holds 128 bytes of this module's.
#[cfg(not(any(CONFIG_DEBUG_LOCK_ALLOC, CONFIG_DEBUG_MUTEXES, CONFIG_DEBUG_SPINLOCK)))]
const _: () = assert!(
    size_of::<user::User>() <= 88 && size_of::<PersistentUser>() <= 88,
    "a registration's record must fit a 96-byte allocation"
);

/// A pin as callback mode shares it: a handle of a callback pin whose record lists the
/// registrations it serves (`PinUsers`), held by the registry and by each of them.
/// (Named here, where both `callback.rs` and `user.rs` see it, as the persistent
/// mode's pin is `PersistentPin<ClientShared>`.)
pub(crate) type SharedPin = CallbackPin<PinUsers>;

/// How a client pins, fixed in its type: what its registrations hold, how a
/// registration gets its pin, and where registrations are listed.
pub(crate) trait Mode: Sized + Send + Sync + 'static {
    /// A registration of this mode (the core's client context).
    type User: Registration;

    /// The mode's name in the `pins` file.
    const NAME: &'static str;

    /// A registration of `span` by the calling process, whose address space is `space`,
    /// listed where its release finds it: on a live pin of this client's that covers it
    /// where the mode shares pins, else on a new pin (the calling process is its owner).
    /// [`Claim::PinFailed`] if pinning failed (what that means: `Client::pin_failed`);
    /// `Err` if this module could not allocate the registration.
    fn claim(c: &Arc<ClientShared>, span: Span, space: &CurrentSpace<'_>) -> Result<Claim<Self>>;

    /// Takes `user` out of the list `claim` put it in, at its release; its pin is
    /// unlinked when it was its last registration.
    fn detach(c: &ClientShared, user: &Self::User);
}

/// A registration of either mode, as the client's callbacks use it. A trait because
/// the modes keep different records: a callback registration shares its pin with the
/// others it covers and can be invalidated (`User`); a persistent one is its pin's one
/// owner, in one record with it (`PersistentUser`).
pub(crate) trait Registration: Send + Sync + Sized + 'static {
    /// A registration of `span` claimed without a pin, to report `err` from
    /// `get_pages` (the refusal rules, docs/refusals.md).
    fn failed(span: Span, err: Error) -> Result<Arc<Self>>;

    /// The registered bytes, as the application gave them.
    fn span(&self) -> Span;

    /// The range its pin pins, or the error it was claimed with.
    fn pin_range(&self) -> Result<GpuRange, Error>;

    /// Records the core's context (in `get_pages`); `false` if the pin's memory is
    /// being freed; the error it was claimed with, if it has no pin.
    fn record_context(&self, core_context: u64) -> Result<bool, Error>;

    /// Maps its pin for `peer`, handing the DMA addresses to `build` (the pin's
    /// `dma_map`).
    fn dma_map<R>(
        &self,
        peer: &PciFunction<'_>,
        build: impl FnOnce(&[u64]) -> Result<R, MapError>,
    ) -> Result<(DmaMapping, R), MapError>;

    /// Installs the mapping and SG list `dma_map` made (`MappingSlot::install`).
    fn install(&self, c: &ClientShared, mapping: DmaMapping, sg: InstalledSg) -> TakenMapping;

    /// Takes the mapping out for the core's `dma_unmap` or `put_pages` of its table
    /// `sg`, with the SG list when it is the one installed there (`MappingSlot::take_for`).
    fn take_mapped(&self, sg: &SgHead) -> TakenMapping;

    /// Undoes what was taken out, through its pin ([`TakenMapping::undo`]).
    fn undo(&self, c: &ClientShared, mapped: TakenMapping);

    /// Its release: takes the mapping and SG list out, for [`Registration::undo`].
    fn release(&self, c: &ClientShared) -> TakenMapping;
}

/// What a registration of either mode keeps of its mapping, under its state's lock:
/// the DMA mapping of its pin made by `dma_map`, unmapped through the pin, and the SG
/// list installed in the core's table, freed from this record, since the core zeroes
/// its table after an invalidation (abi.md 2.5).
///
/// A list is counted in the client's `sg_lists_now` from [`MappingSlot::install`] until
/// [`TakenMapping::undo`] frees it, the one place a list installed here is dropped: it leaves
/// this record only in a [`TakenMapping`], which goes there, and none is left when the
/// registration goes (its release takes it out, and the core maps no released
/// registration).
pub(crate) struct MappingSlot {
    mapping: Option<DmaMapping>,
    sg: Option<InstalledSg>,
}

impl MappingSlot {
    /// The record of a registration the core has not mapped yet: no DMA mapping, no
    /// SG list.
    pub(super) fn new() -> Self {
        MappingSlot {
            mapping: None,
            sg: None,
        }
    }

    /// Installs the mapping and SG list `dma_map` made, counting the list in client
    /// `c`'s `sg_lists_now`. The core maps a region once; whatever an earlier call left
    /// comes back, for the caller to undo after the lock ([`TakenMapping::undo`]: an unmap
    /// may sleep).
    pub(super) fn install(
        &mut self,
        c: &ClientShared,
        mapping: DmaMapping,
        sg: InstalledSg,
    ) -> TakenMapping {
        c.stats.sg_list_installed();
        TakenMapping(self.mapping.replace(mapping), self.sg.replace(sg))
    }

    /// Takes the mapping out for the core's `dma_unmap` or `put_pages` of its table
    /// `sg`, with the SG list when it is the one installed there.
    pub(super) fn take_for(&mut self, sg: &SgHead) -> TakenMapping {
        let ours = self
            .sg
            .as_ref()
            .is_some_and(|installed| installed.is_in(sg));
        TakenMapping(
            self.mapping.take(),
            if ours { self.sg.take() } else { None },
        )
    }

    /// Takes both out (a release).
    pub(super) fn take_all(&mut self) -> TakenMapping {
        TakenMapping(self.mapping.take(), self.sg.take())
    }

    /// Takes the mapping out, leaving the SG list.
    pub(super) fn take_mapping(&mut self) -> Option<DmaMapping> {
        self.mapping.take()
    }
}

/// A registration's mapping and SG list, taken out of its state to be undone
/// ([`TakenMapping::undo`], which also takes the list out of the count of installed lists).
#[must_use = "a mapping and SG list taken out of a registration are undone by `TakenMapping::undo`"]
pub(crate) struct TakenMapping(Option<DmaMapping>, Option<InstalledSg>);

impl TakenMapping {
    /// Undoes a mapping and SG list taken out of a registration's state, after its
    /// lock: unmaps the mapping with `unmap` (through the registration's pin: an unmap
    /// may sleep), then empties the core's table and frees the list, which client `c`'s
    /// `sg_lists_now` no longer counts.
    pub(super) fn undo(self, c: &ClientShared, unmap: impl FnOnce(DmaMapping)) {
        let TakenMapping(mapping, sg) = self;
        if let Some(m) = mapping {
            unmap(m);
        }
        if let Some(sg) = sg {
            drop(sg);
            c.stats.sg_list_freed();
        }
    }
}

/// What a claim of a range by a client of mode `M` came to, where this module could
/// allocate what it needed.
pub(crate) enum Claim<M: Mode> {
    /// A registration, listed where its release finds it.
    Claimed(Arc<M::User>),
    /// No pin to register on: pinning failed, or the pin's memory was being freed.
    PinFailed(PinError),
}

/// This module's live pins: callback pins in the registry, where registrations they
/// cover find them; persistent pins, which are never shared, only listed, through the
/// registration that holds each (no registry node, no tree walk).
#[pin_data]
pub(crate) struct Pins {
    #[pin]
    registry: Registry<SharedPin>,
    /// The persistent registrations, each with its pin. A mutex, as the registry's: the
    /// `pins` file is written under it, however long the list.
    #[pin]
    persistent: Mutex<List<PersistentUser>>,
    /// The numbers of pins of both modes, from 1 (64 bits do not run out: never 0, never
    /// `u64::MAX`): a callback pin's key in the registry, a persistent pin's in the
    /// `pins` file.
    next_id: Atomic<u64>,
}

impl Pins {
    /// The empty registry and list of a module just loaded, numbering pins from 1.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Pins {
            registry <- Registry::new(),
            persistent <- new_mutex!(List::new(), "peermem_persistent"),
            next_id: Atomic::new(1),
        })
    }

    /// A new pin's number.
    fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Relaxed)
    }

    /// Links callback pin `pin` in the registry under a new number (so no two linked
    /// pins share a key); its key.
    fn link(&self, pin: &SharedPin) -> Result<PinKey> {
        self.registry
            .insert(pin.space(), self.next_id(), pin.clone())
    }

    /// Unlinks the callback pin with `key`, if still linked.
    fn unlink(&self, key: &PinKey) -> Option<SharedPin> {
        self.registry.remove(key)
    }

    /// How many pins are live: linked callback pins and persistent pins.
    pub(crate) fn len(&self) -> usize {
        self.registry.len() + self.persistent.lock().iter().count()
    }

    /// Writes a line for every live pin (the `pins` file): the registry's in key order,
    /// then the persistent ones in the order they were made. `salt` hides the address
    /// spaces' addresses.
    pub(crate) fn write(&self, f: &mut fmt::Formatter<'_>, salt: u64) -> fmt::Result {
        let mut res = Ok(());
        self.registry.for_each(|key, pin| {
            if res.is_ok() {
                res = write_pins_line(key.id(), pin, salt, f);
            }
        });
        res?;
        for user in self.persistent.lock().iter() {
            user.write_pins_line(f)?;
        }
        Ok(())
    }
}

/// Writes the line of callback pin `pin`, numbered `id`, in the debugfs `pins` file.
fn write_pins_line(id: u64, pin: &SharedPin, salt: u64, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let r = pin.range();
    let space = pin.identity().space;
    writeln!(
        f,
        "{} {} {} {:#x} {:#x} {} {} {} {:016x}",
        id,
        space.tgid,
        Callback::NAME,
        r.start(),
        r.end(),
        r.len(),
        pin.handler().count(),
        if pin.is_freed() { "freed" } else { "live" },
        space.display_id(salt)
    )
}

/// What every part of a client shares, of either mode.
#[pin_data]
pub(crate) struct ClientShared {
    nv: Arc<NvP2p>,
    kind: ClientKind,
    pins: Arc<Pins>,
    stats: Arc<Stats>,
    invalidator: SetOnce<Invalidator>,
    /// Where a release waits for an invalidation of its registration to return (rare:
    /// one condition for every registration instead of a lock in each).
    #[pin]
    released: CondVar,
}

/// The pins of the client's modes are counted in the module's counters.
impl PinContext for ClientShared {
    fn nv(&self) -> &NvP2p {
        &self.nv
    }

    fn pinned(&self, bytes: u64) {
        self.stats.pinned(bytes);
    }

    fn unpinned(&self, bytes: u64) {
        self.stats.unpinned(bytes);
    }
}

/// A peer-memory client of mode `M`.
pub(crate) struct Client<M: Mode> {
    shared: Arc<ClientShared>,
    _mode: PhantomData<M>,
}

impl<M: Mode> Client<M> {
    /// A client pinning in mode `M`, registered as `kind`.
    pub(crate) fn new(
        nv: Arc<NvP2p>,
        kind: ClientKind,
        pins: Arc<Pins>,
        stats: Arc<Stats>,
    ) -> Result<Arc<Self>> {
        let shared = Arc::pin_init(
            pin_init!(ClientShared {
                nv,
                kind,
                pins,
                stats,
                invalidator: SetOnce::new(),
                released <- new_condvar!("peermem_release"),
            }),
            GFP_KERNEL,
        )?;
        Ok(Arc::new(
            Client {
                shared,
                _mode: PhantomData,
            },
            GFP_KERNEL,
        )?)
    }

    /// Installs the core's invalidation entry (before the registration is enabled).
    pub(crate) fn set_invalidator(&self, inv: Invalidator) {
        self.shared.invalidator.populate(inv);
    }

    /// What a failed pin means for a registration in acquire (the refusal rules,
    /// docs/refusals.md): `None` passes the range to the next client, `Some` claims it
    /// with a user whose `get_pages` reports the error to the application.
    fn pin_failed(&self, span: Span, e: PinError) -> Result<Option<Arc<M::User>>> {
        let c = &self.shared;
        if e == PinError::Driver(EINVAL) {
            // The driver's "not a pinnable range of this process": not ours, and not
            // a refusal.
            return Ok(None);
        }
        let why = refusal::of_pin_error(e);
        let err = c.stats.refuse(why, span.addr(), span.len(), Error::from(e));
        if !refusal::claims(why) {
            // Counted and logged, then "not mine", as nvidia-peermem answers.
            return Ok(None);
        }
        Ok(Some(M::User::failed(span, err)?))
    }

    fn claim(&self, span: Span) -> Result<Option<Arc<M::User>>> {
        // The calling process's address space, read once for the whole claim.
        let claim = space::with_current(|space| {
            // A kernel thread (no address space): not a process's GPU memory.
            space.map(|space| M::claim(&self.shared, span, &space))
        });
        match claim.transpose()? {
            None => Ok(None),
            Some(Claim::Claimed(user)) => Ok(Some(user)),
            Some(Claim::PinFailed(e)) => self.pin_failed(span, e),
        }
    }
}

/// The core's callbacks on a registration: acquire, get_pages, dma_map, dma_unmap,
/// put_pages, release.
impl<M: Mode> PeerClient for Client<M> {
    type Context = Arc<M::User>;

    fn acquire(&self, addr: u64, size: u64) -> Result<Option<Arc<M::User>>> {
        let span = match Span::covering(addr, size) {
            Ok(s) => s,
            Err(_) => {
                self.shared
                    .stats
                    .refuse(Refusal::BadRange, addr, size, EINVAL);
                return Ok(None);
            }
        };
        let user = self
            .claim(span)
            .map_err(|e| self.shared.stats.refuse(Refusal::NoMemory, addr, size, e))?;
        if user.is_some() {
            // The registration holds a module reference until it is gone.
            self.shared.stats.registrations.fetch_add(1, Relaxed);
        }
        Ok(user)
    }

    fn get_pages(&self, user: ArcBorrow<'_, M::User>, _write: bool, core_context: u64) -> Result {
        if !user.record_context(core_context)? {
            let span = user.span();
            return Err(self
                .shared
                .stats
                .refuse(Refusal::Freed, span.addr(), span.len(), EFAULT));
        }
        Ok(())
    }

    fn dma_map(&self, user: ArcBorrow<'_, M::User>, sg: SgHead, dev: DmaDevice<'_>) -> Result<u32> {
        let stats = &self.shared.stats;
        let span = user.span();
        let refuse = |why, e| stats.refuse(why, span.addr(), span.len(), e);
        let peer = dev
            .pci_function()
            .ok_or_else(|| refuse(Refusal::NotPci, compat::eopnotsupp()))?;
        let pin_range = user.pin_range()?;
        let max_seg = u64::from(peer.max_segment_size());
        let range = span.range();
        // The SG list is built from the driver's addresses in place, sized once (one
        // allocation up to a page of entries; chained beyond).
        let build = |addrs: &[u64]| {
            // The driver's addresses do not cover the range: an answer not to be used.
            let entries =
                sg_entries(addrs, pin_range, range, max_seg).map_err(|_| MapError::Uncovered)?;
            SgList::new(entries).map_err(MapError::Sg)
        };
        let (mapping, list) = user
            .dma_map(&peer, build)
            .map_err(|e| refuse(refusal::of_map_error(e), Error::from(e)))?;
        // Built apart and installed only on success: on failure the core's table is
        // left untouched, as it requires (and a list built is freed uninstalled, never
        // counted in `sg_lists_now`).
        let (sg, n) = InstalledSg::install(sg, list);
        user.undo(&self.shared, user.install(&self.shared, mapping, sg));
        Ok(n)
    }

    fn dma_unmap(&self, user: ArcBorrow<'_, M::User>, sg: SgHead) {
        // The plain client's unmap runs nested in its invalidation: nothing here waits
        // for one.
        user.undo(&self.shared, user.take_mapped(&sg));
    }

    fn put_pages(&self, user: ArcBorrow<'_, M::User>, sg: SgHead) {
        // Same teardown as dma_unmap: after a failed dma_map it finds nothing to do.
        self.dma_unmap(user, sg);
    }

    fn page_size(&self, _user: ArcBorrow<'_, M::User>) -> u64 {
        GPU_PAGE_SIZE
    }

    fn release(&self, user: Arc<M::User>) {
        user.undo(&self.shared, user.release(&self.shared));
        M::detach(&self.shared, &user);
        self.shared.stats.releases.fetch_add(1, Relaxed);
        // The core's reference is the last (the list let go of its own in `detach`,
        // unless a free callback still walks a callback pin's users): dropping it drops
        // the registration's pin (a persistent registration's own, or its handle of a
        // callback pin, whose last owner unpins), outside every lock of the
        // registration.
    }
}
