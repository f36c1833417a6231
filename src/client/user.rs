// SPDX-License-Identifier: GPL-2.0 OR MIT

//! One registration: its pin, DMA mapping and SG list, and its invalidation.

use core::sync::atomic::{AtomicU64, Ordering};

use kernel::{
    list::{impl_list_arc_safe, impl_list_item, ListArc, ListLinks},
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
};

use super::{shared_pin::Mapping, ClientShared, SharedPin};
use crate::{
    glue::ModuleRef,
    peer_mem::{ClientKind, SgHead, SgList},
    range::GpuRange,
};

/// No core_context yet (`get_pages` not called).
pub(super) const NO_CONTEXT: u64 = u64::MAX;

/// One registration (the core's client context).
#[pin_data]
pub(crate) struct User {
    /// The pin it uses, from acquire on (`None` for a registration claimed with an
    /// error); never changed, so read without a lock. Declared first, so dropped
    /// before the module reference: the last owner's put runs in this module.
    pub(super) pin: Option<SharedPin>,
    pub(super) client: Arc<ClientShared>,
    /// Every live registration holds the module: rmmod fails with "in use" instead
    /// of blocking in the core's unregistration (abi.md 3).
    pub(super) _module: ModuleRef,
    /// Where the registration starts within the first page of `range` (the address is
    /// `range.start() + offset`: four bytes instead of eight keep the record within a
    /// 192-byte allocation).
    offset: u32,
    pub(super) len: u64,
    pub(super) range: GpuRange,
    /// Why the pin failed in `acquire` (reported by `get_pages`).
    pub(super) error: Option<Error>,
    pub(super) core_context: AtomicU64,
    #[pin]
    pub(super) state: Mutex<UserState>,
    #[pin]
    pub(super) gate: Mutex<Gate>,
    /// Its place among the users of its pin (`Users`).
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

pub(super) struct UserState {
    pub(super) mapping: Option<Mapping>,
    /// The core's table and the SG list installed in it: freed from this record,
    /// since the core zeroes its table after an invalidation (abi.md 2.5).
    pub(super) sg: Option<(SgHead, SgList)>,
}

/// Held around an invalidation and around release, so that the two never overlap.
///
/// Never taken by `dma_unmap`/`put_pages`: the core may call those under a region's
/// mapping lock (after a failed `dma_map`, with the region still findable), while an
/// invalidation holding the gate waits for that lock (abi.md 2.5).
pub(super) struct Gate {
    pub(super) released: bool,
    pub(super) invalidated: bool,
}

impl User {
    pub(super) fn new(
        client: &Arc<ClientShared>,
        addr: u64,
        len: u64,
        range: GpuRange,
        pin: Option<SharedPin>,
        error: Option<Error>,
    ) -> Result<ListArc<User>> {
        ListArc::pin_init(
            try_pin_init!(User {
                pin,
                client: client.clone(),
                _module: ModuleRef::new(),
                // `range` covers `addr`, so the offset is below one 64 KiB page.
                offset: u32::try_from(addr.saturating_sub(range.start())).unwrap_or(0),
                len,
                range,
                error,
                core_context: AtomicU64::new(NO_CONTEXT),
                state <- new_mutex!(UserState { mapping: None, sg: None }, "peermem_user_state"),
                gate <- new_mutex!(Gate { released: false, invalidated: false }, "peermem_user_gate"),
                links <- ListLinks::new(),
            }),
            GFP_KERNEL,
        )
    }

    /// The registered address, as the application gave it.
    pub(super) fn addr(&self) -> u64 {
        self.range.start() + u64::from(self.offset)
    }

    /// Invalidates the registration through the core (from the free callback): once,
    /// and never after its release.
    pub(super) fn invalidate(&self) {
        let cc = self.core_context.load(Ordering::Acquire);
        if cc == NO_CONTEXT {
            // Not past get_pages: it sees the pin dead and fails.
            return;
        }
        let mut gate = self.gate.lock();
        if gate.released || gate.invalidated {
            return;
        }
        gate.invalidated = true;
        if let Some(inv) = self.client.invalidator.as_ref() {
            // SAFETY: this registration's context is not released: `gate.released` is
            // false, and `release` waits for the gate this holds.
            match unsafe { inv.invalidate(cc) } {
                Ok(()) => {
                    self.client
                        .stats
                        .invalidations
                        .fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => pr_warn!("invalidation of core context {} failed: {:?}\n", cc, e),
            }
        }
        if self.client.kind == ClientKind::InvalidateUnmaps {
            // The core will not unmap an invalidated region: unmap it now. The driver
            // frees the DMA mapping itself once the callback returns. The SG list
            // stays until dma_unmap, put_pages or release: when deregistration won
            // the race, the core still restores its trimmed entries and unmaps.
            // Taken under the state lock, so that exactly one of this and the core's
            // dma_unmap drops it.
            let mapping = self.state.lock().mapping.take();
            drop(mapping);
        }
        drop(gate);
    }

    /// Frees an SG list this registration built.
    pub(super) fn free_sg(&self, sg: Option<(SgHead, SgList)>) {
        if let Some((mut head, list)) = sg {
            head.uninstall(&list);
            drop(list);
            self.client
                .stats
                .sg_lists_now
                .fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Drops the DMA mapping and frees the SG list (one lock round for both).
    pub(super) fn teardown(&self) {
        let (mapping, sg) = {
            let mut st = self.state.lock();
            (st.mapping.take(), st.sg.take())
        };
        drop(mapping);
        self.free_sg(sg);
    }
}
