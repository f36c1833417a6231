// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A pin's state, under its lock: its phase and every transition of it, its table, the
//! live DMA mappings it records, the driver calls in flight on the table, and the
//! driver's reference on the pin's record (docs/pin-state-machine.md).

use core::num::NonZeroI32;

use kernel::{
    alloc::AllocError,
    prelude::*,
    sync::Arc, //
};

use super::error::PinError;
use crate::{
    bindings,
    glue::ModuleRef, //
};

/// Where a pin is in its life, with what each phase owns: the driver's table while it
/// is this module's to use, put or free, the module reference of an orphaned pin, and
/// the thread running a free callback.
///
/// # Invariants
///
/// A table held is one the driver handed out for the pin, or null: in `Live` until
/// `get_pages` returned it, in `Freed` once the callback took it to free or the put
/// returned.
pub(super) enum Phase {
    /// `get_pages` returned; the table is live.
    Live { table: RawTable },
    /// The owner started unpinning: `put_pages` is (about to be) in flight, on the
    /// table its [`PutToken`] carries too.
    Putting { table: RawTable },
    /// `put_pages` returned.
    Put,
    /// Dropped by its owner's handle outside the owning process: not put (the
    /// driver would not find it), left to the free callback, which still comes. The
    /// module stays loaded until then (`module`).
    Orphaned { table: RawTable, module: ModuleRef },
    /// A free callback started: the driver frees the table when it returns. `thread`
    /// runs it, until it ends; `orphan`: the module reference of a pin orphaned
    /// before, given back when it ends.
    Freed {
        table: RawTable,
        thread: Option<NonZeroI32>,
        orphan: Option<ModuleRef>,
    },
}

/// A page table of the driver's, as a pin's phase holds it.
pub(super) type RawTable = Raw<bindings::nvidia_p2p_page_table>;

impl Phase {
    /// The table this phase holds (null if none).
    fn table(&self) -> *mut bindings::nvidia_p2p_page_table {
        match self {
            Phase::Live { table }
            | Phase::Putting { table }
            | Phase::Orphaned { table, .. }
            | Phase::Freed { table, .. } => table.0,
            Phase::Put => core::ptr::null_mut(),
        }
    }
}

/// The calling thread's id (never 0 for a thread that runs a callback: only the idle
/// tasks have 0).
fn current_thread() -> Option<NonZeroI32> {
    NonZeroI32::new(kernel::current!().pid())
}

/// A put begun: the pin went from `Live` to `Putting`, and this is what the put call
/// needs. [`PinShared::put`](super::pin::PinShared::put) ends the put, and takes it.
///
/// # Invariants
///
/// `table` is null or the table the driver handed out for the (callback) pin;
/// when the put began the pin was live (no callback had started), and no driver call
/// starts on the table after.
#[must_use = "a put begun is ended by PinShared::put"]
pub(super) struct PutToken {
    table: RawTable,
}

impl PutToken {
    /// The table to put, if the pin has one.
    pub(super) fn table(&self) -> Option<*mut bindings::nvidia_p2p_page_table> {
        (!self.table.0.is_null()).then_some(self.table.0)
    }
}

/// A driver-owned pointer kept under the pin's lock.
pub(super) struct Raw<T>(pub(super) *mut T);

impl<T> Raw<T> {
    /// The null pointer: no table or mapping (the empty slot of [`Mappings`]).
    pub(super) const fn null() -> Self {
        Raw(core::ptr::null_mut())
    }
}

impl<T> Clone for Raw<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Raw<T> {}

// SAFETY: the pointers are only used under the pin's lock, or by the one thread that
// took them out of it, following the driver's rules for its objects.
unsafe impl<T> Send for Raw<T> {}

/// The mutable state of a pin, whose record is an `R`: every transition of its phase
/// is one of its methods (docs/pin-state-machine.md).
///
/// # Invariants
///
/// - `mappings` are live DMA mappings of the table the phase holds.
/// - `in_flight` counts driver calls on that table (map, unmap) not yet returned; a
///   map starts only in `Live`, an unmap only in `Live`, `Putting` or `Orphaned`. A
///   callback keeps the table until `in_flight` drops to zero.
/// - `data` is the driver's reference on the pin's record, handed over just before a
///   callback pin's `get_pages` and kept until it is taken out ([`PinState::finish_put`],
///   [`PinState::end_callback`]) once no callback may still run with it.
pub(super) struct PinState<R> {
    phase: Phase,
    mappings: Mappings,
    in_flight: u32,
    /// The driver's reference on the record (a callback pin's, until given back).
    data: Option<Arc<R>>,
}

impl<R> PinState<R> {
    /// The state of a pin just asked of the driver: live, with no table, mapping, call
    /// or callback yet.
    pub(super) fn new() -> Self {
        // INVARIANT: no table, mapping, call or data.
        PinState {
            phase: Phase::Live { table: Raw::null() },
            mappings: Mappings::new(),
            in_flight: 0,
            data: None,
        }
    }

    /// Whether a free callback has started: the memory is gone.
    pub(super) fn is_freed(&self) -> bool {
        matches!(self.phase, Phase::Freed { .. })
    }

    /// Keeps the driver's reference on the record, handed over as the callback's
    /// `data` (before `get_pages`: the callback may run before it returns).
    pub(super) fn hand_data(&mut self, data: Arc<R>) {
        self.data = Some(data);
    }

    /// Takes the driver's reference back after a `get_pages` that failed (the driver
    /// kept none, and runs no callback).
    pub(super) fn data_back(&mut self) -> Option<Arc<R>> {
        self.data.take()
    }

    /// Takes the table `get_pages` returned; [`PinError::Freed`] if a callback ran
    /// since the driver armed it, maybe before `get_pages` returned (docs/abi.md 1.4):
    /// the table is gone, and not to be read.
    pub(super) fn adopt(
        &mut self,
        new: *mut bindings::nvidia_p2p_page_table,
    ) -> Result<(), PinError> {
        match &mut self.phase {
            Phase::Live { table } => {
                // INVARIANT: the driver handed `new` out for this pin.
                *table = Raw(new);
                Ok(())
            }
            _ => Err(PinError::Freed),
        }
    }

    /// Starts the put of a live pin (no callback started): no driver call starts on
    /// its table from here on. `None` if the pin is not live.
    pub(super) fn start_put(&mut self) -> Option<PutToken> {
        let Phase::Live { table } = self.phase else {
            return None;
        };
        // The phase keeps the table too: a callback that starts during the put frees
        // it, as the driver wants (docs/abi.md 1.1).
        self.phase = Phase::Putting {
            table: Raw(table.0),
        };
        // INVARIANT: the pin was live, its table (if any) the driver's for it; no call
        // starts on it once `Putting`.
        Some(PutToken { table })
    }

    /// Starts the put of a live pin whose table `table`, just handed out by the
    /// driver, this module cannot read (it was never taken over). `None` if the pin is
    /// not live.
    pub(super) fn refuse_table(
        &mut self,
        table: *mut bindings::nvidia_p2p_page_table,
    ) -> Option<PutToken> {
        let mut token = self.start_put()?;
        // INVARIANT: the driver handed `table` out for this pin; nothing
        // was started on it.
        token.table = Raw(table);
        Some(token)
    }

    /// The put returned: the table is gone (a callback that started meanwhile finds
    /// none to free). Gives the driver's reference back if no callback can use it any
    /// more.
    pub(super) fn finish_put(&mut self) -> Option<Arc<R>> {
        match &mut self.phase {
            // INVARIANT: no table once put.
            Phase::Freed { table, .. } => *table = Raw::null(),
            _ => self.phase = Phase::Put,
        }
        self.take_data()
    }

    /// Leaves a live pin to its free callback (its last owner let go of it outside the
    /// owning process, where the driver would not find it): the module stays loaded
    /// until the callback has run. `false` if the pin is not live.
    pub(super) fn orphan(&mut self) -> bool {
        let Phase::Live { table } = self.phase else {
            return false;
        };
        self.phase = Phase::Orphaned {
            table,
            module: ModuleRef::new(),
        };
        true
    }

    /// A free callback starts in the calling thread: the pin is freed, no driver call
    /// on its table starts from here on.
    pub(super) fn start_callback(&mut self) {
        let table = Raw(self.phase.table());
        let old = core::mem::replace(
            &mut self.phase,
            Phase::Freed {
                table,
                thread: current_thread(),
                orphan: None,
            },
        );
        if let (Phase::Orphaned { module, .. }, Phase::Freed { orphan, .. }) =
            (old, &mut self.phase)
        {
            *orphan = Some(module);
        }
    }

    /// The free callback takes what the driver frees when it returns, once no driver
    /// call is in flight on the table (`busy` is false): the table, and the mappings to
    /// free with it.
    pub(super) fn take_for_free(&mut self) -> (RawTable, impl Iterator<Item = RawMapping>) {
        let table = match &mut self.phase {
            Phase::Freed { table, .. } => core::mem::replace(table, Raw::null()),
            _ => Raw::null(),
        };
        (table, self.mappings.take())
    }

    /// The free callback returns (the driver frees the table then): gives the driver's
    /// reference back if the owner's put is done (or never comes), and the module
    /// reference of an orphaned pin.
    pub(super) fn end_callback(&mut self) -> (Option<Arc<R>>, Option<ModuleRef>) {
        let orphan = match &mut self.phase {
            Phase::Freed { thread, orphan, .. } => {
                *thread = None;
                orphan.take()
            }
            _ => None,
        };
        (self.take_data(), orphan)
    }

    /// Whether a free callback runs in another thread than the calling one.
    pub(super) fn callback_elsewhere(&self) -> bool {
        match self.phase {
            Phase::Freed {
                thread: Some(t), ..
            } => Some(t) != current_thread(),
            _ => false,
        }
    }

    /// Whether a driver call is in flight on the table.
    pub(super) fn busy(&self) -> bool {
        self.in_flight > 0
    }

    /// Counts a mapping call in flight on the live table, with room reserved to
    /// record its mapping beside those of the calls already in flight (each records
    /// one when it returns); [`PinError::Freed`] once the pin is freed or put. Called
    /// under the pin's spinlock: the room, needed only with more than one mapping of
    /// a pin (rare: a second peer, or concurrent maps), is allocated without sleeping.
    pub(super) fn begin_call(&mut self) -> Result<*mut bindings::nvidia_p2p_page_table, PinError> {
        let table = match self.phase {
            Phase::Live { table } if !table.0.is_null() => table.0,
            _ => return Err(PinError::Freed),
        };
        self.mappings
            .reserve(self.in_flight as usize + 1)
            .map_err(|_| PinError::NoMemory)?;
        self.in_flight += 1;
        Ok(table)
    }

    /// Records the mapping a map call made (room was reserved by its
    /// [`PinState::begin_call`]); whether the pin is still not freed.
    pub(super) fn record(&mut self, m: RawMapping) -> bool {
        let recorded = self.mappings.push(m);
        debug_assert!(recorded);
        !self.is_freed()
    }

    /// Counts an unmap of `raw` in flight on the table, and forgets `raw` (so that
    /// nothing else frees it): `None` once a callback started (it frees every mapping,
    /// this one included; it may be this very thread, nested in it), once put, or if
    /// `raw` is not recorded.
    pub(super) fn begin_unmap(
        &mut self,
        raw: *mut bindings::nvidia_p2p_dma_mapping,
    ) -> Option<*mut bindings::nvidia_p2p_page_table> {
        let table = match &self.phase {
            Phase::Live { table } | Phase::Putting { table } | Phase::Orphaned { table, .. } => {
                table.0
            }
            Phase::Put | Phase::Freed { .. } => return None,
        };
        if table.is_null() || !self.mappings.remove(raw) {
            return None;
        }
        self.in_flight += 1;
        Some(table)
    }

    /// Ends a driver call; whether none is left in flight.
    pub(super) fn end_call(&mut self) -> bool {
        self.in_flight -= 1;
        self.in_flight == 0
    }

    /// A mapping still recorded while the pin is live, if any: one its maker left.
    pub(super) fn mapping_left(&self) -> Option<*mut bindings::nvidia_p2p_dma_mapping> {
        match self.phase {
            Phase::Live { .. } => self.mappings.first(),
            _ => None,
        }
    }

    /// Whether the driver's `data` reference may be given back now: no callback is
    /// running and none can start (put returned, or a callback already ran).
    fn data_may_go(&self) -> bool {
        matches!(self.phase, Phase::Put | Phase::Freed { thread: None, .. })
    }

    /// Takes the driver's `data` reference out if it may be given back now (see
    /// [`PinState::data_may_go`]): whichever of the put and the callback ends last gets
    /// it, and only once.
    fn take_data(&mut self) -> Option<Arc<R>> {
        if self.data_may_go() {
            self.data.take()
        } else {
            None
        }
    }
}

/// What the suite `peermem_nv_p2p` reads and sets directly.
#[cfg(peermem_kunit)]
impl<R> PinState<R> {
    /// A state in `phase`, with `data` as the driver's reference.
    pub(super) fn in_phase(phase: Phase, data: Option<Arc<R>>) -> Self {
        PinState {
            phase,
            data,
            ..PinState::new()
        }
    }

    /// The calls in flight.
    pub(super) fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// The DMA mappings made of this pin and not yet unmapped, for the caller to record
    /// or take one, under the pin's lock.
    pub(super) fn mappings(&mut self) -> &mut Mappings {
        &mut self.mappings
    }

    /// Whether the state gives the driver's reference back now.
    pub(super) fn gives_data_back(&mut self) -> bool {
        self.take_data().is_some()
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
    /// No mapping recorded, and nothing allocated: a pin's first mapping takes the
    /// in-place slot.
    pub(super) fn new() -> Self {
        // INVARIANT: both empty.
        Mappings {
            first: Raw::null(),
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
                .unwrap_or(Raw::null());
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
        let first = core::mem::replace(&mut self.first, Raw::null());
        let first = (!first.0.is_null()).then_some(first);
        Iterator::chain(first.into_iter(), more.into_iter().flatten())
    }
}

// The phase carries its data in 16 bytes, and the state (no lock inside: the same in
// every kernel configuration) stays within the 48 bytes a pin's 128-byte record leaves
// it (the assertion on the records, on `PinShared<PinUsers>` in `client/callback.rs`).
const _: () = assert!(
    size_of::<PinState<u8>>() <= 48 && size_of::<Phase>() <= 16,
    "a pin's state must fit 48 bytes"
);
