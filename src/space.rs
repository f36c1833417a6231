// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The address space of a process, as peermem tells pins apart by it: the calling
//! process's, read once per registration ([`with_current`]), and the owner a new pin
//! holds ([`Owner`]). nvidia.ko looks a callback pin up by the same identity
//! (docs/abi.md 1.4b).

use kernel::{
    mm::Mm,
    sync::aref::ARef, //
};

/// The identity of an address space: its `mm_struct` and thread group. A pin holds a
/// reference on its owner's mm ([`Owner`]), so the address is not reused by another
/// process while a pin of it lives.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(crate) struct SpaceId {
    /// The `mm_struct`'s address (compared, never dereferenced).
    pub(crate) mm: usize,
    /// The thread-group id (a CLONE_VM child shares the mm but is another owner).
    pub(crate) tgid: i32,
}

impl SpaceId {
    /// The identity of the address space that `mm` (`None` for a kernel thread) and
    /// thread group `tgid` make.
    pub(crate) fn of(mm: Option<&Mm>, tgid: i32) -> Self {
        SpaceId {
            mm: mm.map_or(0, |mm| mm.as_raw() as usize),
            tgid,
        }
    }

    /// Whether the calling process is this address space's (for a kernel thread's, mm
    /// 0: whether the caller is a kernel thread of its thread group).
    pub(crate) fn is_current(&self) -> bool {
        with_current(|space| match space {
            Some(space) => space.id() == *self,
            None => self.mm == 0 && kernel::current!().group_leader().pid() == self.tgid,
        })
    }

    /// An identifier of the address space for display: its mm address mixed with
    /// `salt` by a bijection (splitmix64), so different spaces never share one and
    /// the kernel address itself is not shown.
    pub(crate) fn display_id(&self, salt: u64) -> u64 {
        let mut z = (self.mm as u64 ^ salt).wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// The calling process's address space, borrowed for one call of [`with_current`]: its
/// identity is read once, and its mm referenced only for a pin that keeps it
/// ([`CurrentSpace::owner`]).
pub(crate) struct CurrentSpace<'a> {
    mm: &'a Mm,
    tgid: i32,
}

impl CurrentSpace<'_> {
    /// The identity of the space (its mm and the process's tgid, read once), which a
    /// pin's key and owner carry; the mm is not referenced by it.
    pub(crate) fn id(&self) -> SpaceId {
        SpaceId::of(Some(self.mm), self.tgid)
    }

    /// The owner a new pin of it holds: its mm referenced (mmgrab).
    pub(crate) fn owner(&self) -> Owner {
        Owner {
            mm: Some(ARef::from(self.mm)),
            tgid: self.tgid,
        }
    }
}

/// Runs `f` with the calling process's address space; `None` for a kernel thread (no
/// mm: not a process's GPU memory).
pub(crate) fn with_current<R>(f: impl FnOnce(Option<CurrentSpace<'_>>) -> R) -> R {
    let task = kernel::current!();
    let tgid = task.group_leader().pid();
    f(task.mm().map(|mm| CurrentSpace { mm, tgid }))
}

/// The address space that made a pin: its `mm_struct`, held (mmgrab) so that its
/// address is not handed to another process while the pin lives, and its thread-group
/// id.
pub(crate) struct Owner {
    /// `None` for a kernel thread (the nv_p2p suite pins from its test thread).
    mm: Option<ARef<Mm>>,
    tgid: i32,
}

impl Owner {
    /// The calling kernel thread, which has no address space: the nv_p2p suite's
    /// pins' owner.
    #[cfg(peermem_kunit)]
    pub(crate) fn kernel_thread() -> Self {
        Owner {
            mm: None,
            tgid: kernel::current!().group_leader().pid(),
        }
    }

    /// Its parts, the mm reference and the thread-group id, for a record that lays
    /// them out beside its own fields (a pin's: docs/architecture.md, "What one
    /// registration allocates").
    pub(crate) fn into_parts(self) -> (Option<ARef<Mm>>, i32) {
        (self.mm, self.tgid)
    }
}
