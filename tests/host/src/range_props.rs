//! Properties of the 64 KiB covering range and of a registration's span, over a
//! deterministic pseudo-random sweep plus the edges of the address space.

use crate::range::{GpuRange, RangeError, Span, GPU_PAGE_SIZE};

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// Interesting values: page edges, the top of the address space, small numbers.
fn edges() -> Vec<u64> {
    let mut v = vec![0, 1, 2, GPU_PAGE_SIZE - 1, GPU_PAGE_SIZE, GPU_PAGE_SIZE + 1];
    for k in [
        u64::MAX,
        u64::MAX - 1,
        u64::MAX - GPU_PAGE_SIZE,
        u64::MAX - GPU_PAGE_SIZE + 1,
    ] {
        v.push(k);
    }
    v.push(1 << 47);
    v.push((1 << 47) - 1);
    v
}

/// The reference answer computed with 128-bit arithmetic.
fn reference(addr: u64, len: u64) -> Result<(u64, u64), RangeError> {
    if len == 0 {
        return Err(RangeError::ZeroLength);
    }
    let p = u128::from(GPU_PAGE_SIZE);
    let start = u128::from(addr) / p * p;
    let end = (u128::from(addr) + u128::from(len)).div_ceil(p) * p;
    if end > u128::from(u64::MAX) {
        return Err(RangeError::Overflow);
    }
    Ok((start as u64, end as u64))
}

fn check(addr: u64, len: u64) {
    let got = GpuRange::covering(addr, len).map(|r| (r.start(), r.end()));
    assert_eq!(got, reference(addr, len), "addr={addr:#x} len={len:#x}");
    if let Ok(r) = GpuRange::covering(addr, len) {
        assert_eq!(r.start() % GPU_PAGE_SIZE, 0);
        assert_eq!(r.end() % GPU_PAGE_SIZE, 0);
        assert!(r.start() <= addr && addr - r.start() < GPU_PAGE_SIZE);
        assert!(r.end() - (addr + len) < GPU_PAGE_SIZE);
        assert_eq!(r.pages() * GPU_PAGE_SIZE, r.len());
        assert_eq!(GpuRange::aligned(r.start(), r.len()), Some(r));
        assert!(r.contains(&r) && r.overlaps(&r));
    }
    // A registration's span keeps its bytes exactly, beside the same range.
    let span = Span::covering(addr, len);
    assert_eq!(
        span.map(|s| (s.range(), s.addr(), s.len())),
        GpuRange::covering(addr, len).map(|r| (r, addr, len)),
        "span of addr={addr:#x} len={len:#x}"
    );
}

#[test]
fn edges_match_reference() {
    for &a in &edges() {
        for &l in &edges() {
            check(a, l);
        }
    }
}

#[test]
fn random_sweep_matches_reference() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..200_000 {
        let a = rng.next();
        // Mix small, medium and full-width lengths.
        let l = match rng.next() % 3 {
            0 => rng.next() % (4 * GPU_PAGE_SIZE),
            1 => rng.next() >> 20,
            _ => rng.next(),
        };
        check(a, l);
    }
}

#[test]
fn containment_agrees_with_bounds() {
    let mut rng = Rng(42);
    for _ in 0..100_000 {
        let a = GpuRange::covering(rng.next() >> 30, (rng.next() >> 40) + 1).unwrap();
        let b = GpuRange::covering(rng.next() >> 30, (rng.next() >> 40) + 1).unwrap();
        assert_eq!(a.contains(&b), a.start() <= b.start() && b.end() <= a.end());
        assert_eq!(a.overlaps(&b), a.start() < b.end() && b.start() < a.end());
        assert_eq!(a.overlaps(&b), b.overlaps(&a));
        if a.contains(&b) {
            assert!(a.overlaps(&b));
        }
    }
}
