// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A callback client's registration: its shared pin, DMA mapping and SG list, and its
//! invalidation.

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
        atomic::{
            Acquire,
            Atomic,
            Relaxed,
            Release, //
        },
        Arc,
        SpinLock, //
    }, //
};

use super::{
    refusal::MapError,
    ClientShared,
    MappingSlot,
    Registration,
    SharedPin,
    TakenMapping, //
};
use crate::{
    device::PciFunction,
    glue::ModuleRef,
    nv_p2p::{
        DmaMapping,
        PinError, //
    },
    peer_mem::{
        ClientKind,
        InstalledSg,
        SgHead, //
    },
    range::{
        GpuRange,
        Span, //
    }, //
};

// A registry node holds the handle in place: one pointer, so the node fits a 64-byte
// allocation (the assertion on a tree node in src/registry.rs).
const _: () = assert!(
    size_of::<SharedPin>() == size_of::<usize>(),
    "a pin handle must be one pointer"
);

/// No core_context yet (`get_pages` not called).
pub(super) const NO_CONTEXT: u64 = u64::MAX;

/// One registration (the core's client context) of a callback client.
#[pin_data]
pub(crate) struct User {
    /// The pin it uses, from acquire on; `None` for a registration claimed to report the
    /// error its pin failed with (kept in its state) from `get_pages`. Never changed,
    /// so read without a lock. Declared first, so dropped before the module reference:
    /// the last owner's put runs in this module.
    pin: Option<SharedPin>,
    /// Every live registration holds the module: rmmod fails with "in use" instead
    /// of blocking in the core's unregistration (abi.md 3).
    _module: ModuleRef,
    /// The registered bytes (the 64 KiB pages that cover them are computed from them).
    span: Span,
    pub(super) core_context: Atomic<u64>,
    #[pin]
    state: SpinLock<UserState>,
    /// Its place among the users of its pin (`PinUsers`).
    #[pin]
    links: ListLinks,
}

// The one `ListArc` of a user is made with it and handed to its pin's users list.
impl_list_arc_safe! {
    impl ListArcSafe<0> for User { untracked; }
}
impl_list_item! {
    impl ListItem<0> for User { using ListLinks { self.links }; }
}

/// Where a registration is in its invalidation and release.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Stage {
    /// Neither invalidated nor released.
    Live,
    /// An invalidation (there is one at most) is calling the core: a release waits
    /// until it returns, so that the core's context outlives the call.
    /// `release_waits`: a release waits on the client's `released` condition.
    Invalidating { release_waits: bool },
    /// The invalidation returned.
    Invalidated,
    /// The core released the registration: no invalidation starts after.
    Released,
}

/// What a registration changes after it is made: its mapping and SG list, and where it
/// is in its invalidation and release.
///
/// A spinlock: nothing sleeps under it (mappings and SG lists are taken out and undone
/// after it). Never held by `dma_unmap`/`put_pages` beyond taking them out, so the core
/// may call those under a region's mapping lock (after a failed `dma_map`, with the
/// region still findable) while an invalidation waits for that lock (abi.md 2.5).
struct UserState {
    maps: MappingSlot,
    stage: Stage,
    /// The error the registration's pin failed with (a registration without a pin).
    failed: Option<Error>,
}

impl User {
    /// A registration of `span` using `pin`, or claimed with the error its pin failed
    /// with.
    pub(super) fn new(span: Span, pin: Result<SharedPin, Error>) -> Result<ListArc<Self>> {
        let (pin, failed) = match pin {
            Ok(pin) => (Some(pin), None),
            Err(e) => (None, Some(e)),
        };
        ListArc::pin_init(
            try_pin_init!(Self {
                pin,
                _module: ModuleRef::new(),
                span,
                core_context: Atomic::new(NO_CONTEXT),
                state <- new_spinlock!(
                    UserState {
                        maps: MappingSlot::new(),
                        stage: Stage::Live,
                        failed,
                    },
                    "peermem_user_state"
                ),
                links <- ListLinks::new(),
            }),
            GFP_KERNEL,
        )
    }

    /// The pin the registration uses, or the error it was claimed with.
    pub(super) fn pin(&self) -> Result<&SharedPin, Error> {
        match &self.pin {
            Some(pin) => Ok(pin),
            None => Err(self.state.lock().failed.unwrap_or(EFAULT)),
        }
    }

    /// Invalidates the registration through the core (from the free callback of the
    /// pin of client `c`): once, and never after its release.
    pub(super) fn invalidate(&self, c: &ClientShared) {
        let cc = self.core_context.load(Acquire);
        if cc == NO_CONTEXT {
            // Not past get_pages: it sees the pin dead and fails.
            return;
        }
        {
            let mut st = self.state.lock();
            if st.stage != Stage::Live {
                return;
            }
            st.stage = Stage::Invalidating {
                release_waits: false,
            };
        }
        if let Some(inv) = c.invalidator.as_ref() {
            // SAFETY: this registration's context is not released: the stage was `Live`
            // under the state lock when it became `Invalidating`, and `release` waits
            // for it to end before the core frees the context.
            match unsafe { inv.invalidate(cc) } {
                Ok(()) => {
                    c.stats.invalidations.fetch_add(1, Relaxed);
                }
                Err(e) => pr_warn!("invalidation of core context {} failed: {:?}\n", cc, e),
            }
        }
        if c.kind == ClientKind::InvalidateUnmaps {
            // The core will not unmap an invalidated region: unmap it now. The driver
            // frees the DMA mapping itself once the callback returns. The SG list
            // stays until dma_unmap, put_pages or release: when deregistration won
            // the race, the core still restores its trimmed entries and unmaps.
            // Taken under the state lock, so that exactly one of this and the core's
            // dma_unmap drops it; dropped before release may go on.
            let mapping = self.state.lock().maps.take_mapping();
            if let (Some(m), Some(pin)) = (mapping, &self.pin) {
                pin.unmap(m);
            }
        }
        let mut st = self.state.lock();
        let waits = st.stage
            == Stage::Invalidating {
                release_waits: true,
            };
        st.stage = Stage::Invalidated;
        if waits {
            c.released.notify_all();
        }
    }
}

impl Registration for User {
    fn failed(span: Span, err: Error) -> Result<Arc<Self>> {
        Ok(User::new(span, Err(err))?.into_arc())
    }

    fn span(&self) -> Span {
        self.span
    }

    fn pin_range(&self) -> Result<GpuRange, Error> {
        Ok(self.pin()?.range())
    }

    fn record_context(&self, core_context: u64) -> Result<bool, Error> {
        // Under the users lock, so a free callback either sees this context (and
        // invalidates it) or has already taken the users.
        Ok(self
            .pin()?
            .handler()
            .while_alive(|| self.core_context.store(core_context, Release)))
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
        self.state.lock().maps.install(c, mapping, sg)
    }

    /// Never waits for an invalidation (see `UserState`): the state lock alone decides
    /// which of this and an INVALIDATE_UNMAPS invalidation drops the mapping.
    fn take_mapped(&self, sg: &SgHead) -> TakenMapping {
        self.state.lock().maps.take_for(sg)
    }

    fn undo(&self, c: &ClientShared, mapped: TakenMapping) {
        mapped.undo(c, |m| {
            if let Some(pin) = &self.pin {
                pin.unmap(m);
            }
        });
    }

    /// Marks the registration released (no invalidation starts after), waits for an
    /// invalidation in progress to return, and takes the mapping and SG list out: one
    /// lock round.
    fn release(&self, c: &ClientShared) -> TakenMapping {
        let mut st = self.state.lock();
        while let Stage::Invalidating { .. } = st.stage {
            st.stage = Stage::Invalidating {
                release_waits: true,
            };
            c.released.wait(&mut st);
        }
        st.stage = Stage::Released;
        st.maps.take_all()
    }
}
