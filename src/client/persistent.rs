// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Persistent mode: pins without a free callback, one per registration, never shared (a
//! pin outlives a free, while the address may be reused for new memory). A
//! registration and its pin are one record ([`PersistentUser`]), listed for the `pins`
//! file only.

use core::fmt;

use kernel::{
    list::{
        impl_list_arc_safe,
        impl_list_item,
        ListArc,
        ListLinks, //
    },
    new_spinlock,
    prelude::*,
    sync::{
        Arc,
        SpinLock, //
    }, //
};

use super::{
    refusal::MapError,
    Claim,
    ClientShared,
    MappingSlot,
    Mode,
    Registration,
    TakenMapping, //
};
use crate::{
    device::PciFunction,
    glue::ModuleRef,
    nv_p2p::{
        DmaMapping,
        NvP2p,
        PersistentPin,
        PinError, //
    },
    peer_mem::{
        InstalledSg,
        SgHead, //
    },
    range::{
        GpuRange,
        Span, //
    },
    space::CurrentSpace, //
};

/// Persistent mode: a registration is its pin's one owner and record.
pub(crate) struct Persistent;

impl Mode for Persistent {
    type User = PersistentUser;

    const NAME: &'static str = "persistent";

    fn claim(c: &Arc<ClientShared>, span: Span, space: &CurrentSpace<'_>) -> Result<Claim<Self>> {
        // Never shared: pinned anew, listed for the `pins` file only.
        let pin = match NvP2p::pin_persistent(c, span) {
            Ok(pin) => pin,
            Err(e) => return Ok(Claim::PinFailed(e)),
        };
        // One sequence numbers pins of both modes; the `pins` file shows the low 32
        // bits of a persistent pin's (a record of 88 bytes has no room for more).
        let id = c.pins.next_id() as u32;
        // Without its registration the pin is dropped, which puts it.
        let user = PersistentUser::new(PinOrFailure::Pin(pin), space.id().tgid, id)?;
        let arc = user.clone_arc();
        c.pins.persistent.lock().push_back(user);
        Ok(Claim::Claimed(arc))
    }

    fn detach(c: &ClientShared, user: &PersistentUser) {
        // SAFETY: a persistent registration is in the persistent list or in none: its
        // one `ListArc` went to that list in `claim` (a registration claimed without a
        // pin is in none), and only this removes it.
        let listed = unsafe { c.pins.persistent.lock().remove(user) };
        // After the lock (the caller holds the user too: never the last reference).
        drop(listed);
    }
}

/// A persistent registration's pin, or why it has none.
enum PinOrFailure {
    /// Its pin, which it owns alone (dropping it puts it).
    Pin(PersistentPin<ClientShared>),
    /// Claimed without a pin, to report the error its pin failed with from
    /// `get_pages`; the bytes it was claimed for.
    Failed(Error, Span),
}

/// A registration of a persistent client and its pin, in one record (the core's client
/// context).
///
/// # Invariants
///
/// `state`'s mapping, if any, was made by the pin's [`PersistentPin::dma_map`] and is
/// not unmapped yet: it is unmapped before the pin is put (the registration's release
/// takes it out, or its drop).
#[pin_data(PinnedDrop)]
pub(crate) struct PersistentUser {
    /// Declared first, so dropped (and put) before the module reference: the put runs
    /// in this module.
    pin: PinOrFailure,
    /// The registering process's thread group, for the `pins` file.
    tgid: i32,
    /// The pin's number in the `pins` file.
    id: u32,
    /// Every live registration holds the module: rmmod fails with "in use" instead
    /// of blocking in the core's unregistration (abi.md 3).
    _module: ModuleRef,
    /// Its mapping and SG list (a spinlock: nothing sleeps under it).
    #[pin]
    state: SpinLock<MappingSlot>,
    /// Its place in the list of persistent registrations (`Pins`).
    #[pin]
    links: ListLinks,
}

// The one `ListArc` of a pinned registration is made with it and handed to the list of
// persistent registrations.
impl_list_arc_safe! {
    impl ListArcSafe<0> for PersistentUser { untracked; }
}
impl_list_item! {
    impl ListItem<0> for PersistentUser { using ListLinks { self.links }; }
}

impl PersistentUser {
    fn new(pin: PinOrFailure, tgid: i32, id: u32) -> Result<ListArc<Self>> {
        ListArc::pin_init(
            try_pin_init!(Self {
                pin,
                tgid,
                id,
                _module: ModuleRef::new(),
                state <- new_spinlock!(MappingSlot::new(), "peermem_user_state"),
                links <- ListLinks::new(),
            }),
            GFP_KERNEL,
        )
    }

    /// The pin, or the error the registration was claimed with.
    fn pin(&self) -> Result<&PersistentPin<ClientShared>, Error> {
        match &self.pin {
            PinOrFailure::Pin(pin) => Ok(pin),
            PinOrFailure::Failed(e, _) => Err(*e),
        }
    }

    /// Writes the registration's line in the `pins` file, if it has a pin.
    pub(super) fn write_pins_line(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Ok(pin) = self.pin() else {
            return Ok(());
        };
        let r = pin.span().range();
        // Persistent pins are looked up by nobody: no address space is shown.
        writeln!(
            f,
            "{} {} {} {:#x} {:#x} {} 1 live",
            self.id,
            self.tgid,
            Persistent::NAME,
            r.start(),
            r.end(),
            r.len()
        )
    }

    /// Unmaps `mapping` (if any) through the pin.
    fn unmap(&self, mapping: Option<DmaMapping>) {
        if let (Some(m), PinOrFailure::Pin(pin)) = (mapping, &self.pin) {
            // SAFETY: a mapping of this registration's state was made by its pin's
            // `dma_map` and is not unmapped yet (type invariant); it was taken out of
            // the state, so it is unmapped once, here.
            unsafe { pin.unmap(m) };
        }
    }
}

impl Registration for PersistentUser {
    fn failed(span: Span, err: Error) -> Result<Arc<Self>> {
        // Listed nowhere: it has no pin to show.
        Ok(Self::new(PinOrFailure::Failed(err, span), 0, 0)?.into_arc())
    }

    fn span(&self) -> Span {
        match &self.pin {
            PinOrFailure::Pin(pin) => pin.span(),
            PinOrFailure::Failed(_, span) => *span,
        }
    }

    fn pin_range(&self) -> Result<GpuRange, Error> {
        Ok(self.pin()?.span().range())
    }

    fn record_context(&self, _core_context: u64) -> Result<bool, Error> {
        // No free callback: the memory stays until the pin is put, and nothing
        // invalidates the registration.
        self.pin().map(|_| true)
    }

    fn dma_map<R>(
        &self,
        peer: &PciFunction<'_>,
        build: impl FnOnce(&[u64]) -> Result<R, MapError>,
    ) -> Result<(DmaMapping, R), MapError> {
        // Without a pin the core never maps (its get_pages failed): as freed.
        let pin = self.pin().map_err(|_| MapError::Pin(PinError::Freed))?;
        pin.dma_map(peer, build)
    }

    fn install(&self, c: &ClientShared, mapping: DmaMapping, sg: InstalledSg) -> TakenMapping {
        // INVARIANT: made by the pin's `dma_map` (the client's `dma_map`).
        self.state.lock().install(c, mapping, sg)
    }

    fn take_mapped(&self, sg: &SgHead) -> TakenMapping {
        self.state.lock().take_for(sg)
    }

    fn undo(&self, c: &ClientShared, mapped: TakenMapping) {
        mapped.undo(c, |m| self.unmap(Some(m)));
    }

    fn release(&self, _c: &ClientShared) -> TakenMapping {
        self.state.lock().take_all()
    }
}

#[pinned_drop]
impl PinnedDrop for PersistentUser {
    fn drop(self: Pin<&mut Self>) {
        // The core releases every registration it mapped, and the release takes the
        // mapping out: none is left here, unless a registration was dropped unreleased.
        // Unmapped before the pin is put all the same (the driver wants it).
        let mapping = self.state.lock().take_mapping();
        self.unmap(mapping);
    }
}
