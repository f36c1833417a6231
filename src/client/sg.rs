// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The SG entries of a registration, built from its pin's DMA addresses.

use kernel::prelude::*;

use crate::range::{
    GpuRange,
    GPU_PAGE_SIZE, //
};

/// The largest SG entry: lengths are 32-bit; stay 64 KiB aligned below 4 GiB.
const MAX_SG_ENTRY: u64 = (u32::MAX as u64) & !(GPU_PAGE_SIZE - 1);

/// The SG entries of `range` (inside the pin's `pin_range`), from the pin's DMA
/// addresses: contiguous pages merge, up to `max_seg` bytes (and below 4 GiB).
/// `EINVAL` if `range` is not inside `pin_range` or the addresses do not cover it.
pub(super) fn sg_entries(
    addrs: &[u64],
    pin_range: GpuRange,
    range: GpuRange,
    max_seg: u64,
) -> Result<SgEntries<'_>> {
    let first = pin_range.page_index(range.start()).ok_or(EINVAL)? as usize;
    let n = range.pages() as usize;
    let pages = addrs
        .get(first..first.checked_add(n).ok_or(EINVAL)?)
        .ok_or(EINVAL)?;
    Ok(SgEntries {
        pages,
        // At least one page; `MAX_SG_ENTRY` pages fit in a `usize`.
        cap: (max_seg.clamp(GPU_PAGE_SIZE, MAX_SG_ENTRY) / GPU_PAGE_SIZE) as usize,
    })
}

/// The SG entries `(DMA address, length)` of a run of pages, merged as they come.
#[derive(Clone)]
pub(super) struct SgEntries<'a> {
    /// The DMA addresses of the pages not yet in an entry.
    pages: &'a [u64],
    /// The longest entry, in pages: at least one, below 4 GiB in bytes.
    cap: usize,
}

/// Whether the page at `a` continues a run whose next page is expected at `expect`, the
/// last page's address plus 64 KiB, wrapping: below a page, the run reached the end of
/// the address space, which no entry crosses.
#[inline]
fn continues(expect: u64, a: u64) -> bool {
    a == expect && expect >= GPU_PAGE_SIZE
}

impl Iterator for SgEntries<'_> {
    type Item = (u64, u32);

    #[inline]
    fn next(&mut self) -> Option<(u64, u32)> {
        let &start = self.pages.first()?;
        let mut taken = 1;
        let mut expect = start;
        for &a in &self.pages[1..self.pages.len().min(self.cap)] {
            expect = expect.wrapping_add(GPU_PAGE_SIZE);
            if !continues(expect, a) {
                break;
            }
            taken += 1;
        }
        self.pages = &self.pages[taken..];
        // `taken` is at most `cap` pages: below 4 GiB.
        Some((start, (taken as u64 * GPU_PAGE_SIZE) as u32))
    }

    /// The number of entries left. Where no run can exceed `cap` pages it is one more
    /// than the breaks between pages, counted in one pass without branching on them
    /// (the SG list counts before it fills).
    fn count(self) -> usize {
        if self.pages.len() > self.cap {
            return self.fold(0, |n, _| n + 1);
        }
        let Some((&first, rest)) = self.pages.split_first() else {
            return 0;
        };
        let mut prev = first;
        let mut n: usize = 1;
        for &a in rest {
            // A break where `next` ends an entry. At most one per page: no overflow.
            n = n.wrapping_add(usize::from(!continues(prev.wrapping_add(GPU_PAGE_SIZE), a)));
            prev = a;
        }
        n
    }
}

#[cfg(peermem_kunit)]
#[kunit_tests(peermem_sg)]
mod tests {
    use super::*;

    const P: u64 = GPU_PAGE_SIZE;

    fn range(start: u64, pages: u64) -> Result<GpuRange> {
        GpuRange::aligned(start, pages * P).ok_or(EINVAL)
    }

    /// The entries as two vectors, addresses and lengths.
    fn split(entries: SgEntries<'_>) -> Result<(KVec<u64>, KVec<u32>)> {
        let (mut dma, mut len) = (KVec::new(), KVec::new());
        for (a, l) in entries {
            dma.push(a, GFP_KERNEL)?;
            len.push(l, GFP_KERNEL)?;
        }
        Ok((dma, len))
    }

    #[test]
    fn contiguous_pages_merge() -> Result {
        let pin = range(0x10_0000, 4)?;
        let addrs = [
            0x8000_0000,
            0x8000_0000 + P,
            0x8000_0000 + 2 * P,
            0x8000_0000 + 3 * P,
        ];
        let (dma, len) = split(sg_entries(&addrs, pin, pin, 1 << 31)?)?;
        assert_eq!(&dma[..], &[0x8000_0000]);
        assert_eq!(&len[..], &[(4 * P) as u32]);
        Ok(())
    }

    #[test]
    fn a_gap_starts_a_new_entry() -> Result {
        let pin = range(0x10_0000, 3)?;
        let addrs = [0x8000_0000, 0x8000_0000 + P, 0x9000_0000];
        let (dma, len) = split(sg_entries(&addrs, pin, pin, 1 << 31)?)?;
        assert_eq!(&dma[..], &[0x8000_0000, 0x9000_0000]);
        assert_eq!(&len[..], &[(2 * P) as u32, P as u32]);
        Ok(())
    }

    #[test]
    fn no_entry_exceeds_the_peer_segment() -> Result {
        let pin = range(0x10_0000, 5)?;
        let addrs = [0, P, 2 * P, 3 * P, 4 * P];
        // A 128 KiB segment limit: entries of two pages, then one.
        let (dma, len) = split(sg_entries(&addrs, pin, pin, 2 * P)?)?;
        assert_eq!(&dma[..], &[0, 2 * P, 4 * P]);
        assert_eq!(&len[..], &[(2 * P) as u32, (2 * P) as u32, P as u32]);
        // A limit below a page still gives whole pages; none reaches 4 GiB.
        let (_, len) = split(sg_entries(&addrs, pin, pin, 100)?)?;
        assert_eq!(len.len(), 5);
        let (_, len) = split(sg_entries(&addrs, pin, pin, u64::MAX)?)?;
        assert_eq!(&len[..], &[(5 * P) as u32]);
        Ok(())
    }

    #[test]
    fn no_entry_wraps_past_the_end_of_the_address_space() -> Result {
        let pin = range(0x10_0000, 3)?;
        let top = u64::MAX - P + 1;
        let addrs = [top - P, top, 0];
        let (dma, len) = split(sg_entries(&addrs, pin, pin, 1 << 31)?)?;
        assert_eq!(&dma[..], &[top - P, 0]);
        assert_eq!(&len[..], &[(2 * P) as u32, P as u32]);
        Ok(())
    }

    #[test]
    fn the_count_is_the_number_of_entries() -> Result {
        let top = u64::MAX - P + 1;
        let runs: [&[u64]; 5] = [
            &[0, P, 2 * P, 3 * P],
            &[0, P, 5 * P, 6 * P, 9 * P],
            &[top - P, top, 0, P],
            &[7 * P, 6 * P, 5 * P],
            &[P],
        ];
        for addrs in runs {
            let pin = range(0x10_0000, addrs.len() as u64)?;
            // Above, at and below the run lengths: the cap's split counted too.
            for max_seg in [1 << 31, 2 * P, P] {
                let entries = sg_entries(addrs, pin, pin, max_seg)?;
                let (dma, _) = split(entries.clone())?;
                assert_eq!(entries.count(), dma.len());
            }
        }
        Ok(())
    }

    #[test]
    fn a_covered_range_takes_its_own_pages() -> Result {
        let pin = range(0x10_0000, 4)?;
        let addrs = [0x1000_0000, 0x2000_0000, 0x3000_0000, 0x4000_0000];
        let (dma, len) = split(sg_entries(&addrs, pin, range(0x10_0000 + P, 2)?, 1 << 31)?)?;
        assert_eq!(&dma[..], &[0x2000_0000, 0x3000_0000]);
        assert_eq!(&len[..], &[P as u32, P as u32]);
        Ok(())
    }

    #[test]
    fn a_range_outside_the_pin_is_refused() -> Result {
        let pin = range(0x10_0000, 2)?;
        let addrs = [0, P];
        assert_eq!(
            sg_entries(&addrs, pin, range(0x10_0000 + P, 2)?, 1 << 31).err(),
            Some(EINVAL)
        );
        assert_eq!(
            sg_entries(&addrs, pin, range(0, 1)?, 1 << 31).err(),
            Some(EINVAL)
        );
        Ok(())
    }
}
