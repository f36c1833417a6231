// SPDX-License-Identifier: GPL-2.0 OR MIT

//! 64 KiB GPU page range arithmetic.
//!
//! nvidia.ko pins and maps GPU memory in 64 KiB pages and refuses an address or length
//! that is not 64 KiB aligned with `-EINVAL` (docs/abi.md 1.1). An RDMA application
//! registers whatever byte range it likes, so every registration is widened to the
//! smallest 64 KiB-aligned range that covers it: the start rounded down, the end rounded
//! up (docs/abi.md 1.1, 3).
//!
//! This file depends on `core` only: the kernel module and the host tests
//! (`tests/host`) compile the same source.

/// log2 of the GPU page size.
pub(crate) const GPU_PAGE_SHIFT: u32 = 16;

/// The GPU page size: 64 KiB (docs/abi.md 1.3: drivers always report page-size enum 1).
pub(crate) const GPU_PAGE_SIZE: u64 = 1 << GPU_PAGE_SHIFT;

const GPU_PAGE_MASK: u64 = GPU_PAGE_SIZE - 1;

/// Why a byte range has no covering GPU range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RangeError {
    /// The length is zero: there is nothing to pin.
    ZeroLength,
    /// `addr + len`, or the end rounded up to 64 KiB, does not fit in 64 bits.
    Overflow,
}

/// A non-empty range of GPU virtual addresses, `[start, end)`, in whole 64 KiB pages.
///
/// # Invariants
///
/// - `start` and `end` are multiples of [`GPU_PAGE_SIZE`].
/// - `start < end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct GpuRange {
    start: u64,
    end: u64,
}

impl GpuRange {
    /// Returns the smallest 64 KiB-aligned range that covers `[addr, addr + len)`.
    pub(crate) fn covering(addr: u64, len: u64) -> Result<Self, RangeError> {
        if len == 0 {
            return Err(RangeError::ZeroLength);
        }
        let last = addr.checked_add(len - 1).ok_or(RangeError::Overflow)?;
        let end = (last | GPU_PAGE_MASK)
            .checked_add(1)
            .ok_or(RangeError::Overflow)?;
        // INVARIANT: `start` is rounded down and `end` is one past a page's last byte,
        // so both are aligned; `start <= addr <= last < end`.
        Ok(Self {
            start: addr & !GPU_PAGE_MASK,
            end,
        })
    }

    // Used by the tests only (KUnit suites, host sweeps).
    #[cfg(any(test, peermem_kunit))]
    /// Returns the range `[start, start + len)` when both are 64 KiB aligned, the length
    /// is not zero and the end fits in 64 bits; `None` otherwise.
    pub(crate) fn aligned(start: u64, len: u64) -> Option<Self> {
        if start & GPU_PAGE_MASK != 0 || len & GPU_PAGE_MASK != 0 || len == 0 {
            return None;
        }
        let end = start.checked_add(len)?;
        // INVARIANT: checked above; `end` is aligned as the sum of two aligned values.
        Some(Self { start, end })
    }

    /// The first address of the range (64 KiB aligned).
    pub(crate) fn start(&self) -> u64 {
        self.start
    }

    /// One past the last address of the range (64 KiB aligned).
    pub(crate) fn end(&self) -> u64 {
        self.end
    }

    /// The length in bytes (a non-zero multiple of 64 KiB).
    pub(crate) fn len(&self) -> u64 {
        self.end - self.start
    }

    /// The number of 64 KiB pages in the range.
    pub(crate) fn pages(&self) -> u64 {
        self.len() >> GPU_PAGE_SHIFT
    }

    // Used by the tests only (KUnit suites, host sweeps).
    #[cfg(any(test, peermem_kunit))]
    /// Whether `other` lies entirely inside `self`.
    pub(crate) fn contains(&self, other: &Self) -> bool {
        self.start <= other.start && other.end <= self.end
    }

    // Used by the tests only (KUnit suites, host sweeps).
    #[cfg(any(test, peermem_kunit))]
    /// Whether the two ranges share at least one page.
    pub(crate) fn overlaps(&self, other: &Self) -> bool {
        self.start < other.end && other.start < self.end
    }

    /// The index of the 64 KiB page holding `addr` within `self`, if `addr` is inside.
    pub(crate) fn page_index(&self, addr: u64) -> Option<u64> {
        if addr < self.start || addr >= self.end {
            return None;
        }
        Some((addr - self.start) >> GPU_PAGE_SHIFT)
    }
}

/// A registration's bytes, `[addr, addr + len)`, kept as their first and one-past-last
/// addresses: 16 bytes. The 64 KiB pages that cover them are computed when asked
/// (two masks), instead of being stored beside them.
///
/// # Invariants
///
/// `addr < end`, and `end` rounded up to a 64 KiB boundary fits in 64 bits: the bytes
/// have a covering [`GpuRange`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    addr: u64,
    end: u64,
}

impl Span {
    /// The bytes `[addr, addr + len)`, if they have a covering range
    /// ([`GpuRange::covering`], whose errors it returns).
    pub(crate) fn covering(addr: u64, len: u64) -> Result<Self, RangeError> {
        GpuRange::covering(addr, len)?;
        // INVARIANT: `covering` checked that `len > 0` and that `addr + len - 1` and
        // the end of its page fit in 64 bits: so `addr + len` fits, above `addr`.
        Ok(Self {
            addr,
            end: addr + len,
        })
    }

    /// The 64 KiB pages that cover the bytes.
    pub(crate) fn range(&self) -> GpuRange {
        // INVARIANT: `start` is rounded down from `addr` and the end is one past the
        // page of the last byte (it fits: the type's invariant), so both are aligned
        // and `start <= addr < end`.
        GpuRange {
            start: self.addr & !GPU_PAGE_MASK,
            end: ((self.end - 1) | GPU_PAGE_MASK) + 1,
        }
    }

    /// The first byte's address.
    pub(crate) fn addr(&self) -> u64 {
        self.addr
    }

    /// The number of bytes (never 0).
    pub(crate) fn len(&self) -> u64 {
        // Never wraps: `addr < end` (type invariant).
        self.end - self.addr
    }
}

#[cfg(peermem_kunit)]
#[kernel::prelude::kunit_tests(peermem_range)]
mod tests {
    use super::*;

    use kernel::prelude::*;

    const K64: u64 = GPU_PAGE_SIZE;

    fn cover(addr: u64, len: u64) -> Result<GpuRange> {
        GpuRange::covering(addr, len).map_err(|_| EINVAL)
    }

    #[test]
    fn aligned_input_is_unchanged() -> Result {
        let r = cover(0x7f00_0000_0000, 4 * K64)?;
        assert_eq!(r.start(), 0x7f00_0000_0000);
        assert_eq!(r.end(), 0x7f00_0000_0000 + 4 * K64);
        assert_eq!(r.pages(), 4);
        Ok(())
    }

    #[test]
    fn start_rounds_down_end_rounds_up() -> Result {
        // One byte in the middle of a page covers that whole page.
        let r = cover(3 * K64 + 100, 1)?;
        assert_eq!((r.start(), r.end()), (3 * K64, 4 * K64));
        // A range crossing one page boundary by a byte covers two pages.
        let r = cover(2 * K64 - 1, 2)?;
        assert_eq!((r.start(), r.end()), (K64, 3 * K64));
        // Ending exactly on a boundary does not add a page.
        let r = cover(K64 + 1, K64 - 1)?;
        assert_eq!((r.start(), r.end(), r.pages()), (K64, 2 * K64, 1));
        Ok(())
    }

    #[test]
    fn zero_length_is_refused() -> Result {
        assert_eq!(GpuRange::covering(K64, 0), Err(RangeError::ZeroLength));
        assert_eq!(GpuRange::covering(0, 0), Err(RangeError::ZeroLength));
        Ok(())
    }

    #[test]
    fn overflow_is_refused() -> Result {
        assert_eq!(GpuRange::covering(u64::MAX, 2), Err(RangeError::Overflow));
        assert_eq!(GpuRange::covering(1, u64::MAX), Err(RangeError::Overflow));
        // The last page of the address space: its end (2^64) does not fit.
        assert_eq!(
            GpuRange::covering(u64::MAX - K64 + 1, 1),
            Err(RangeError::Overflow)
        );
        // The page before it does.
        let r = cover(u64::MAX - 2 * K64 + 1, K64)?;
        assert_eq!(r.end(), u64::MAX - K64 + 1);
        Ok(())
    }

    #[test]
    fn huge_lengths() -> Result {
        let r = cover(K64, 1 << 47)?;
        assert_eq!(r.len(), 1 << 47);
        assert_eq!(r.pages(), (1 << 47) / K64);
        let r = cover(0, u64::MAX - K64 + 1)?;
        assert_eq!((r.start(), r.end()), (0, u64::MAX - K64 + 1));
        assert_eq!(r.pages(), (1 << 48) - 1);
        Ok(())
    }

    #[test]
    fn aligned_constructor_checks_alignment() -> Result {
        assert!(GpuRange::aligned(K64, K64).is_some());
        assert!(GpuRange::aligned(K64 + 1, K64).is_none());
        assert!(GpuRange::aligned(K64, K64 + 1).is_none());
        assert!(GpuRange::aligned(K64, 0).is_none());
        assert!(GpuRange::aligned(u64::MAX - K64 + 1, K64).is_none());
        Ok(())
    }

    #[test]
    fn span_keeps_address_and_length() -> Result {
        for (addr, len) in [
            (K64, K64),
            (K64 + 1, 1),
            (2 * K64 - 1, 2),
            (3 * K64 + 100, 5 * K64),
            (0, 1 << 37),
            (u64::MAX - 2 * K64 + 1, K64),
        ] {
            let s = Span::covering(addr, len).map_err(|_| EINVAL)?;
            assert_eq!((s.addr(), s.len()), (addr, len));
            assert_eq!(s.range(), cover(addr, len)?);
        }
        assert_eq!(Span::covering(K64, 0), Err(RangeError::ZeroLength));
        assert_eq!(Span::covering(u64::MAX, 2), Err(RangeError::Overflow));
        Ok(())
    }

    #[test]
    fn containment_and_overlap() -> Result {
        let big = cover(0, 8 * K64)?;
        let inner = cover(2 * K64 + 5, K64)?;
        let tail = cover(7 * K64, 2 * K64)?;
        let apart = cover(8 * K64, K64)?;
        assert!(big.contains(&inner));
        assert!(!inner.contains(&big));
        assert!(!big.contains(&tail));
        assert!(big.overlaps(&tail));
        assert!(!big.overlaps(&apart));
        assert_eq!(big.page_index(3 * K64 + 7), Some(3));
        assert_eq!(big.page_index(8 * K64), None);
        Ok(())
    }
}
