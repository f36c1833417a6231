// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The core's callbacks on a registration (`PeerClient` for [`Client`]): acquire,
//! get_pages, dma_map, dma_unmap, put_pages, release.

use kernel::{
    prelude::*,
    sync::{
        atomic::Relaxed,
        Arc,
        ArcBorrow, //
    }, //
};

use crate::{
    compat,
    peer_mem::{
        DmaDevice,
        InstalledSg,
        PeerClient,
        SgHead,
        SgList, //
    },
    range::{
        Span,
        GPU_PAGE_SIZE, //
    },
    stats::{
        MapError,
        Refusal, //
    },
};

use super::{
    sg_entries,
    Client,
    Mode,
    User, //
};

impl<M: Mode> PeerClient for Client<M> {
    type Context = Arc<User<M>>;

    fn acquire(&self, addr: u64, size: u64) -> Result<Option<Arc<User<M>>>> {
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
            // The user holds a module reference until it is gone (`User::_module`).
            self.shared.stats.registrations.fetch_add(1, Relaxed);
        }
        Ok(user)
    }

    fn get_pages(&self, user: ArcBorrow<'_, User<M>>, _write: bool, core_context: u64) -> Result {
        if !M::record_context(user.pin()?, &user, core_context) {
            return Err(self
                .shared
                .stats
                .refuse(Refusal::Freed, user.addr(), user.len(), EFAULT));
        }
        Ok(())
    }

    fn dma_map(&self, user: ArcBorrow<'_, User<M>>, sg: SgHead, dev: DmaDevice<'_>) -> Result<u32> {
        let stats = &self.shared.stats;
        let refuse = |why, e| stats.refuse(why, user.addr(), user.len(), e);
        let peer = dev
            .pci_function()
            .ok_or_else(|| refuse(Refusal::NotPci, compat::eopnotsupp()))?;
        let pin = user.pin()?;
        let max_seg = u64::from(peer.max_segment_size());
        let (pin_range, range) = (pin.range(), user.range());
        // The SG list is built from the driver's addresses in place, sized once (one
        // allocation up to a page of entries; chained beyond).
        let build = |addrs: &[u64]| {
            // The driver's addresses do not cover the range: an answer not to be used.
            let entries =
                sg_entries(addrs, pin_range, range, max_seg).map_err(|_| MapError::Uncovered)?;
            SgList::new(entries).map_err(MapError::Sg)
        };
        let (mapping, list) = pin
            .dma_map(&peer, build)
            .map_err(|e| refuse(Refusal::of_map_error(e), Error::from(e)))?;
        // Built apart and installed only on success: on failure the core's table is
        // left untouched, as it requires.
        let (sg, n) = InstalledSg::install(sg, list);
        // The core maps a region once; whatever an earlier call left is undone after
        // the lock (an unmap may sleep).
        let earlier = {
            let mut st = user.state.lock();
            (st.mapping.replace(mapping), st.sg.replace(sg))
        };
        user.undo(earlier);
        Ok(n)
    }

    fn dma_unmap(&self, user: ArcBorrow<'_, User<M>>, sg: SgHead) {
        // Never waits for an invalidation (see `UserState`): the state lock alone
        // decides which of this and an INVALIDATE_UNMAPS invalidation drops the
        // mapping; the plain client's unmap runs nested in its invalidation.
        let mapped = {
            let mut st = user.state.lock();
            let ours = st.sg.as_ref().is_some_and(|installed| installed.is_in(&sg));
            (st.mapping.take(), if ours { st.sg.take() } else { None })
        };
        user.undo(mapped);
    }

    fn put_pages(&self, user: ArcBorrow<'_, User<M>>, sg: SgHead) {
        // Same teardown as dma_unmap: after a failed dma_map it finds nothing to do.
        self.dma_unmap(user, sg);
    }

    fn page_size(&self, _user: ArcBorrow<'_, User<M>>) -> u64 {
        GPU_PAGE_SIZE
    }

    fn release(&self, user: Arc<User<M>>) {
        user.undo(user.release(&self.shared));
        M::detach(&self.shared, &user);
        self.shared.stats.releases.fetch_add(1, Relaxed);
        // The core's reference is the last (the users list let go of its own in
        // `detach`, unless a free callback still walks it): dropping it drops the
        // registration's pin handle, and the last owner unpins, outside every lock of
        // the registration.
    }
}
