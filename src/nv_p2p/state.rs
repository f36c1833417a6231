// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A pin's state, under its lock: its phase, its table, the live DMA mappings it
//! records, the driver calls in flight on the table, and the driver's reference on the
//! pin's record (docs/pin-state-machine.md).

use core::{
    num::NonZeroUsize,
    ptr::NonNull, //
};

use kernel::{
    alloc::AllocError,
    ffi::c_void,
    prelude::*,
    sync::Arc,
    types::ForeignOwnable, //
};

use super::PinError;
use crate::{
    bindings,
    glue::ModuleRef, //
};

/// Where a pin is in its life.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Phase {
    /// `get_pages` returned; the table is live.
    Live,
    /// The owner started unpinning: `put_pages` is (about to be) in flight.
    Putting,
    /// `put_pages` returned.
    Put,
    /// Dropped by its owner's handle outside the owning process: not put (the
    /// driver would not find it), left to the free callback, which still comes.
    Orphaned,
    /// A free callback started: the driver frees the table when it returns.
    Freed,
}

/// How a pin was made, and so how it is put.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum PinKind {
    /// `get_pages` with a free callback; unpinned with `put_pages`.
    Callback,
    /// The persistent pair; unpinned with the pair's `put` (made only where the driver
    /// has the pair: `NvP2p::pin_persistent`).
    Persistent,
    /// `get_pages` with a NULL callback (drivers before 535.14); unpinned with
    /// `put_pages`.
    LegacyPersistent,
}

/// A driver-owned pointer kept under the pin's lock.
pub(super) struct Raw<T>(pub(super) *mut T);

// SAFETY: the pointers are only used under the pin's lock, or by the one thread that
// took them out of it, following the driver's rules for its objects.
unsafe impl<T> Send for Raw<T> {}

/// The mutable state of a pin.
///
/// # Invariants
///
/// - `table` is non-null only in `Live`, `Putting` and `Orphaned`, and during a
///   callback until it has waited for `in_flight` to drop to zero.
/// - `mappings` are live DMA mappings of `table`.
/// - `in_flight` counts driver calls on `table` (map, unmap) not yet returned; a map
///   starts only in `Live`, an unmap only while `table` is non-null and no callback
///   has started.
/// - `data` is the driver's reference on the pin's record, from just before a callback
///   pin's `get_pages` until it is taken out ([`PinState::take_data`]): while a
///   callback may still run with it, it stays here.
pub(super) struct PinState {
    pub(super) phase: Phase,
    pub(super) table: Raw<bindings::nvidia_p2p_page_table>,
    pub(super) mappings: Mappings,
    pub(super) in_flight: u32,
    /// How the pin was made (and so is put); never changes.
    pub(super) kind: PinKind,
    /// The task running the free callback, while it runs (compared, never
    /// dereferenced).
    callback: Option<NonZeroUsize>,
    /// The driver's reference on the record (a callback pin's, until given back).
    pub(super) data: Option<DriverData>,
    /// Held while the pin is orphaned: the module stays until its callback ran.
    pub(super) orphan: Option<ModuleRef>,
}

impl PinState {
    /// The state of a pin of `kind` in `phase` with no table, mapping, call or callback
    /// yet.
    pub(super) fn new(phase: Phase, kind: PinKind) -> Self {
        PinState {
            phase,
            table: Raw(core::ptr::null_mut()),
            mappings: Mappings::new(),
            in_flight: 0,
            kind,
            callback: None,
            data: None,
            orphan: None,
        }
    }

    /// A free callback starts in the calling task: the pin is freed, no driver call on
    /// its table starts from here on.
    pub(super) fn start_callback(&mut self) {
        self.callback = NonZeroUsize::new(kernel::task::Task::current_raw() as usize);
        self.phase = Phase::Freed;
    }

    /// The free callback returns (the driver frees the table then).
    pub(super) fn end_callback(&mut self) {
        self.callback = None;
    }

    /// Whether a free callback runs in another task than the calling one.
    pub(super) fn callback_elsewhere(&self) -> bool {
        self.callback
            .is_some_and(|t| t.get() != kernel::task::Task::current_raw() as usize)
    }

    /// Counts a mapping call in flight on the live table, with room reserved to
    /// record its mapping beside those of the calls already in flight (each records
    /// one when it returns); [`PinError::Freed`] once the pin is freed or put. Called
    /// under the pin's spinlock: the room, needed only with more than one mapping of
    /// a pin (rare: a second peer, or concurrent maps), is allocated without sleeping.
    pub(super) fn begin_call(&mut self) -> Result<*mut bindings::nvidia_p2p_page_table, PinError> {
        if self.phase != Phase::Live || self.table.0.is_null() {
            return Err(PinError::Freed);
        }
        self.mappings
            .reserve(self.in_flight as usize + 1)
            .map_err(|_| PinError::NoMemory)?;
        self.in_flight += 1;
        Ok(self.table.0)
    }

    /// Counts an unmap of `raw` in flight on the live table, and forgets `raw` (so
    /// that nothing else frees it): `None` once a callback started (it frees every
    /// mapping, this one included; it may be this very thread, nested in it), or if
    /// `raw` is not recorded.
    pub(super) fn begin_unmap(
        &mut self,
        raw: *mut bindings::nvidia_p2p_dma_mapping,
    ) -> Option<*mut bindings::nvidia_p2p_page_table> {
        if self.phase == Phase::Freed || self.table.0.is_null() || !self.mappings.remove(raw) {
            return None;
        }
        self.in_flight += 1;
        Some(self.table.0)
    }

    /// Whether the driver's `data` reference may be given back now: no callback is
    /// running and none can start (put returned, or a callback already ran).
    pub(super) fn data_may_go(&self) -> bool {
        self.callback.is_none() && matches!(self.phase, Phase::Put | Phase::Freed)
    }

    /// Takes the driver's `data` reference out if it may be given back now (see
    /// [`PinState::data_may_go`]): whichever of the put and the callback ends last gets
    /// it, and only once.
    pub(super) fn take_data(&mut self) -> Option<DriverData> {
        if self.data_may_go() {
            self.data.take()
        } else {
            None
        }
    }
}

/// A driver DMA mapping, as a pin records it.
pub(super) type RawMapping = Raw<bindings::nvidia_p2p_dma_mapping>;

/// The live DMA mappings of a pin: the first in place (a pin mostly has one peer), any
/// more in a boxed vector, so that the pin's state stays small (with the client's
/// record, a pin fits a 128-byte allocation). The first is a pointer, null when there
/// is none (an `Option` of one would take 16 bytes).
///
/// # Invariants
///
/// No recorded mapping is null, and `more` holds nothing while `first` is null.
pub(super) struct Mappings {
    first: RawMapping,
    more: Option<KBox<KVec<RawMapping>>>,
}

impl Mappings {
    /// None.
    pub(super) fn new() -> Self {
        // INVARIANT: both empty.
        Mappings {
            first: Raw(core::ptr::null_mut()),
            more: None,
        }
    }

    /// How many are recorded.
    pub(super) fn len(&self) -> usize {
        usize::from(!self.first.0.is_null()) + self.more.as_ref().map_or(0, |v| v.len())
    }

    /// Makes room for `extra` more, so that that many [`Mappings::push`] succeed:
    /// allocates without sleeping (the caller holds the pin's spinlock).
    pub(super) fn reserve(&mut self, extra: usize) -> Result<(), AllocError> {
        // The first lives in place: the vector holds the others.
        let others = (self.len() + extra).saturating_sub(1);
        if others == 0 {
            return Ok(());
        }
        let more = match &mut self.more {
            Some(v) => v,
            None => self.more.insert(KBox::new(KVec::new(), GFP_ATOMIC)?),
        };
        let have = more.len();
        more.reserve(others.saturating_sub(have), GFP_ATOMIC)?;
        Ok(())
    }

    /// Records `m`; `false` if there was no room (see [`Mappings::reserve`]) or `m` is
    /// null.
    pub(super) fn push(&mut self, m: RawMapping) -> bool {
        if m.0.is_null() {
            return false;
        }
        if self.first.0.is_null() {
            // INVARIANT: not null; `first` is set before `more` takes anything.
            self.first = m;
            return true;
        }
        self.more
            .as_mut()
            .is_some_and(|v| v.push_within_capacity(m).is_ok())
    }

    /// The first recorded mapping, if any.
    pub(super) fn first(&self) -> Option<*mut bindings::nvidia_p2p_dma_mapping> {
        (!self.first.0.is_null()).then_some(self.first.0)
    }

    /// Forgets the mapping at `raw`; whether it was recorded.
    pub(super) fn remove(&mut self, raw: *mut bindings::nvidia_p2p_dma_mapping) -> bool {
        if raw.is_null() {
            return false;
        }
        if self.first.0 == raw {
            // INVARIANT: a vector element, if any, takes the first place.
            self.first = self
                .more
                .as_mut()
                .and_then(|v| v.pop())
                .unwrap_or(Raw(core::ptr::null_mut()));
            return true;
        }
        let Some(more) = self.more.as_mut() else {
            return false;
        };
        match more.iter().position(|m| m.0 == raw) {
            Some(i) => more.remove(i).is_ok(),
            None => false,
        }
    }

    /// Takes every recorded mapping, leaving none.
    pub(super) fn take(&mut self) -> impl Iterator<Item = RawMapping> {
        // INVARIANT: both emptied.
        let more = self.more.take().map(KBox::into_inner);
        let first = core::mem::replace(&mut self.first, Raw(core::ptr::null_mut()));
        let first = (!first.0.is_null()).then_some(first);
        Iterator::chain(first.into_iter(), more.into_iter().flatten())
    }
}

/// The driver's reference on a callback pin's record (a `PinShared`): the `data`
/// handed to `nvidia_p2p_get_pages` for the free callback, an `Arc` through its
/// [`ForeignOwnable`] pointer. Kept in the pin's state from just before `get_pages`
/// until it is given back, by whichever of the put and the callback ends last
/// ([`PinState::take_data`]).
///
/// # Invariants
///
/// `0` came from `<Arc<R> as ForeignOwnable>::into_foreign` for the record type `R` of
/// the pin whose state holds it, and owns that reference.
pub(super) struct DriverData(NonNull<c_void>);

// SAFETY: it owns a reference on a pin's record, which is `Send + Sync` (`new` takes
// only such records): the reference may be dropped on any thread.
unsafe impl Send for DriverData {}

impl DriverData {
    /// Hands `pin` over as the driver's reference; `None` only if the pointer were
    /// null, which an `Arc`'s never is.
    pub(super) fn new<R: Send + Sync + 'static>(pin: Arc<R>) -> Option<Self> {
        let ptr = pin.into_foreign();
        // INVARIANT: from `into_foreign` of an `Arc<R>`, owned by the result.
        NonNull::new(ptr).map(DriverData)
    }

    /// The pointer the driver is given as `data`.
    pub(super) fn as_ptr(&self) -> *mut c_void {
        self.0.as_ptr()
    }

    /// Gives the reference back.
    ///
    /// # Safety
    ///
    /// `R` is the record type the reference was made with ([`DriverData::new`]).
    pub(super) unsafe fn give_back<R: Send + Sync + 'static>(self) {
        // SAFETY: the pointer came from `into_foreign` of an `Arc<R>` (the type
        // invariant and the caller's guarantee) and is given back once, consumed here.
        drop(unsafe { <Arc<R> as ForeignOwnable>::from_foreign(self.0.as_ptr()) });
    }
}
