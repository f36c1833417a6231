// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The pin registry: live callback pins by address space and 64 KiB range (persistent
//! pins are never shared, so never linked here).
//!
//! Pins sit in a red-black tree ordered by (address space, start, id). Finding a pin
//! that covers a range walks back from the last pin starting at or before the range's
//! start, within the same address space, for at most [`SCAN`] pins:
//! `O(log n + SCAN)` whatever the number of live pins. Each key carries its pin's
//! length, so the walk reads tree nodes only, and a pin's own record only once its key
//! covers the range (with millions of pins the records are far apart in memory). A
//! covering pin further back is not found and the registration pins anew, which is
//! always correct (overlapping pins are legal; the driver shares their BAR1 mappings,
//! docs/abi.md 1.5). See docs/architecture.md, "Pin registry".

use kernel::{
    new_mutex,
    prelude::*,
    rbtree::{
        RBTree,
        RBTreeNode, //
    },
    sync::Mutex, //
};

use crate::{
    range::{
        GpuRange,
        GPU_PAGE_SIZE, //
    },
    space::SpaceId, //
};

/// How many pins a covering-pin search examines at most.
pub(crate) const SCAN: usize = 16;

/// A pin's place in the tree, ordered by address space, start and id, with the pin's
/// length in 64 KiB pages.
///
/// The address space is kept as its two fields rather than as a nested [`SpaceId`],
/// which pads to 16 bytes: the key packs into 32 bytes (the length in the `tgid`'s
/// padding), and a tree node (the kernel's `rb_node`, the key and the pin reference)
/// into a 64-byte allocation instead of a 96-byte one. The derived order follows the
/// declaration: `mm` then `tgid` is [`SpaceId`]'s own order, then start and id; ids are
/// unique, so the length never decides.
///
/// # Invariants
///
/// `pages` is the pin's length in 64 KiB pages, or less where it does not fit 32 bits
/// (a key then covers less than its pin, never more).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(crate) struct PinKey {
    mm: usize,
    tgid: i32,
    start: u64,
    id: u64,
    pages: u32,
}

impl PinKey {
    /// The key of pin `id`, of `space`, pinning `range`.
    pub(crate) fn new(space: SpaceId, range: GpuRange, id: u64) -> Self {
        // INVARIANT: the length, or `u32::MAX` pages where it is longer.
        PinKey {
            mm: space.mm,
            tgid: space.tgid,
            start: range.start(),
            id,
            pages: u32::try_from(range.pages()).unwrap_or(u32::MAX),
        }
    }

    /// Whether the pin covers `range`, as far as its key says (the type invariant: a
    /// key never covers more than its pin).
    fn covers(&self, range: GpuRange) -> bool {
        let len = u64::from(self.pages) * GPU_PAGE_SIZE;
        self.start <= range.start() && range.end() <= self.start.saturating_add(len)
    }

    /// The pin's id, unique among linked pins and never 0 (`Pins::next_id`).
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    fn space(&self) -> SpaceId {
        SpaceId {
            mm: self.mm,
            tgid: self.tgid,
        }
    }
}

// A tree node: the kernel's `rb_node` (three words), the key, the pin handle (one
// pointer: the client's assertion on its pin type).
const _: () = assert!(
    3 * size_of::<usize>() + size_of::<PinKey>() + size_of::<usize>() <= 64,
    "a registry node must fit a 64-byte allocation"
);

/// What the registry needs to know of a pin. The registry keeps the handle itself in
/// its tree node (no further allocation), and hands out clones of it.
pub(crate) trait Entry: Clone + Send + Sync + Unpin {
    /// The GPU virtual range the pin holds, 64 KiB aligned: the key's start and length.
    fn range(&self) -> GpuRange;
    /// Whether a new registration may still use it (not freed or dying).
    fn usable(&self) -> bool;
}

/// The live callback pins, one tree under one mutex, ordered by address space, then
/// start, then number ([`PinKey`]): a registration finds a pin of its own process
/// that covers its range by walking only that space's pins from its start down.
#[pin_data]
pub(crate) struct Registry<V: Entry> {
    #[pin]
    tree: Mutex<RBTree<PinKey, V>>,
}

impl<V: Entry> Registry<V> {
    /// A registry with no pin, its mutex named `peermem_registry` for lockdep.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            tree <- new_mutex!(RBTree::new(), "peermem_registry"),
        })
    }

    /// Links `pin` under `space` and its range, numbered `id`; returns its key. `id` is
    /// unique among linked pins (`Pins::link` numbers them): keys differ by it.
    pub(crate) fn insert(&self, space: SpaceId, id: u64, pin: V) -> Result<PinKey> {
        let key = PinKey::new(space, pin.range(), id);
        let node = RBTreeNode::new(key, pin, GFP_KERNEL)?;
        self.tree.lock().insert(node);
        Ok(key)
    }

    /// Unlinks the pin with `key`, if still linked.
    pub(crate) fn remove(&self, key: &PinKey) -> Option<V> {
        self.tree.lock().remove(key)
    }

    /// A usable pin of `space` that covers `range`, if one is among the [`SCAN`] pins
    /// starting closest at or before it.
    pub(crate) fn find_covering(&self, space: SpaceId, range: GpuRange) -> Option<V> {
        let probe = PinKey::new(space, range, u64::MAX);
        let mut tree = self.tree.lock();
        // No key equals `probe` (ids stop short of u64::MAX): the lower bound is the
        // first pin after it, so the walk starts one before that.
        let mut cursor = match tree.cursor_lower_bound_mut(&probe) {
            Some(c) => c.move_prev(),
            None => tree.cursor_back_mut(),
        };
        for _ in 0..SCAN {
            let c = cursor?;
            let (k, v) = c.current();
            if k.space() != space {
                return None;
            }
            if k.covers(range) && v.usable() {
                return Some(v.clone());
            }
            cursor = c.move_prev();
        }
        None
    }

    /// The number of linked pins.
    pub(crate) fn len(&self) -> usize {
        self.tree.lock().iter().count()
    }

    /// Calls `f` on every linked pin, in key order, under the registry's lock.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&PinKey, &V)) {
        for (k, v) in self.tree.lock().iter() {
            f(k, v);
        }
    }
}

#[cfg(peermem_kunit)]
#[kunit_tests(peermem_registry)]
mod tests {
    use super::*;
    use crate::range::GPU_PAGE_SIZE as P;
    use kernel::sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc, //
    };

    struct Fake {
        range: GpuRange,
        usable: Atomic<bool>,
    }

    impl Entry for Arc<Fake> {
        fn range(&self) -> GpuRange {
            self.range
        }
        fn usable(&self) -> bool {
            self.usable.load(Relaxed)
        }
    }

    const A: SpaceId = SpaceId {
        mm: 0x1000,
        tgid: 10,
    };
    const B: SpaceId = SpaceId {
        mm: 0x1000,
        tgid: 11,
    };

    fn pin(start: u64, pages: u64) -> Result<Arc<Fake>> {
        Ok(Arc::new(
            Fake {
                range: r(start, pages)?,
                usable: Atomic::new(true),
            },
            GFP_KERNEL,
        )?)
    }

    fn r(start: u64, pages: u64) -> Result<GpuRange> {
        GpuRange::aligned(start * P, pages * P).ok_or(EINVAL)
    }

    fn reg() -> Result<Pin<KBox<Registry<Arc<Fake>>>>> {
        KBox::pin_init(Registry::new(), GFP_KERNEL)
    }

    #[test]
    fn keys_order_by_space_start_and_id() {
        let k = |space: SpaceId, start, id| PinKey {
            mm: space.mm,
            tgid: space.tgid,
            start,
            id,
            pages: 1,
        };
        // The packed key orders as (SpaceId, start, id) would.
        assert!(k(A, 9, 9) < k(B, 0, 0));
        let other_mm = SpaceId {
            mm: 0x2000,
            tgid: 0,
        };
        assert!(k(B, 0, 0) < k(other_mm, 0, 0));
        assert!(k(A, 1, 9) < k(A, 2, 0));
        assert!(k(A, 1, 1) < k(A, 1, 2));
        assert!(k(A, 1, 1).space() == A);
        assert_eq!(size_of::<PinKey>(), 32);
    }

    #[test]
    fn a_key_covers_what_its_pin_covers_and_never_more() -> Result {
        let key = PinKey::new(A, r(10, 10)?, 1);
        assert!(key.covers(r(10, 10)?));
        assert!(key.covers(r(12, 3)?));
        assert!(!key.covers(r(15, 10)?));
        assert!(!key.covers(r(9, 2)?));
        // A pin longer than 2^32 pages (256 TiB): its key covers the first 2^32 - 1.
        let huge = PinKey::new(A, r(0, 1 << 33)?, 2);
        assert!(huge.covers(r(0, u64::from(u32::MAX))?));
        assert!(!huge.covers(r(0, 1 << 32)?));
        // The search decides from the keys: up to the pin's last page, not past it.
        let reg = reg()?;
        reg.insert(A, 1, pin(10, 10)?)?;
        assert!(reg.find_covering(A, r(19, 1)?).is_some());
        assert!(reg.find_covering(A, r(20, 1)?).is_none());
        Ok(())
    }

    #[test]
    fn finds_exact_and_covering_pins() -> Result {
        let reg = reg()?;
        let big = pin(10, 10)?;
        reg.insert(A, 1, big.clone())?;
        let found = reg.find_covering(A, r(12, 3)?).ok_or(ENOENT)?;
        assert!(Arc::ptr_eq(&found, &big));
        assert!(reg.find_covering(A, r(10, 10)?).is_some());
        // Partial overlaps and ranges outside are not covered.
        assert!(reg.find_covering(A, r(15, 10)?).is_none());
        assert!(reg.find_covering(A, r(5, 6)?).is_none());
        assert!(reg.find_covering(A, r(20, 1)?).is_none());
        Ok(())
    }

    #[test]
    fn spaces_separate_pins() -> Result {
        let reg = reg()?;
        reg.insert(A, 1, pin(0, 8)?)?;
        assert!(reg.find_covering(B, r(1, 1)?).is_none());
        let other_mm = SpaceId {
            mm: 0x2000,
            tgid: 10,
        };
        assert!(reg.find_covering(other_mm, r(1, 1)?).is_none());
        Ok(())
    }

    #[test]
    fn unusable_pins_are_skipped_and_removal_unlinks() -> Result {
        let reg = reg()?;
        let dead = pin(0, 8)?;
        let live = pin(0, 8)?;
        reg.insert(A, 1, live.clone())?;
        let dkey = reg.insert(A, 2, dead.clone())?;
        dead.usable.store(false, Relaxed);
        let found = reg.find_covering(A, r(2, 2)?).ok_or(ENOENT)?;
        assert!(Arc::ptr_eq(&found, &live));
        assert!(reg.remove(&dkey).is_some());
        assert!(reg.remove(&dkey).is_none());
        assert_eq!(reg.len(), 1);
        Ok(())
    }

    #[test]
    fn a_covering_pin_behind_small_ones_is_found_within_the_scan() -> Result {
        let reg = reg()?;
        reg.insert(A, 1, pin(0, 100)?)?;
        for i in 1..(SCAN as u64 - 1) {
            reg.insert(A, i + 1, pin(i, 1)?)?;
        }
        assert!(reg.find_covering(A, r(50, 10)?).is_some());
        Ok(())
    }

    #[test]
    fn the_scan_is_bounded() -> Result {
        let reg = reg()?;
        reg.insert(A, 1, pin(0, 1000)?)?;
        for i in 1..=(SCAN as u64) {
            reg.insert(A, i + 1, pin(i, 1)?)?;
        }
        // The big pin is SCAN + 1 pins back: not examined, so not found.
        assert!(reg.find_covering(A, r(500, 1)?).is_none());
        assert_eq!(reg.len(), SCAN + 1);
        Ok(())
    }
}
