// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Counters, and the refusal reasons with their errno and rate-limited message.

use kernel::{
    prelude::*,
    sync::atomic::{
        Atomic,
        Relaxed, //
    }, //
};

use crate::{
    compat,
    nv_p2p::PinError, //
};

/// Why a registration of GPU memory was refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub(crate) enum Refusal {
    /// Zero length, or address + length overflows.
    BadRange = 0,
    /// nvidia.ko has no BAR1 space left for the pin (`ENOMEM`).
    Bar1Exhausted,
    /// nvidia.ko refused the pin for another reason (`EIO`, `ENOTSUPP`, `EBUSY`, ...)
    /// or answered with an unreadable page table: counted and logged, and the range is
    /// left to the next client ("not mine"), as nvidia-peermem does.
    PinFailed,
    /// The DMA device is not a PCI function (a software RDMA device).
    NotPci,
    /// nvidia.ko could not map the pages for the peer (topology, DMA mask).
    DmaMapFailed,
    /// The memory was freed while being registered.
    Freed,
    /// No memory for peermem's own bookkeeping (never nvidia.ko's BAR1 `ENOMEM`).
    NoMemory,
}

/// How many refusal reasons there are.
pub(crate) const REFUSALS: usize = 7;

impl Refusal {
    /// Every reason, in counter order.
    pub(crate) const ALL: [Refusal; REFUSALS] = [
        Refusal::BadRange,
        Refusal::Bar1Exhausted,
        Refusal::PinFailed,
        Refusal::NotPci,
        Refusal::DmaMapFailed,
        Refusal::Freed,
        Refusal::NoMemory,
    ];

    /// The counters' names, in counter order (the `stats` file shows each as
    /// `refused_<name>`).
    pub(crate) const NAMES: [&'static str; REFUSALS] = [
        "bad_range",
        "bar1_exhausted",
        "pin_failed",
        "not_pci",
        "dma_map_failed",
        "freed",
        "no_memory",
    ];

    /// The counter's name.
    pub(crate) fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// The reason a failed pin stands for: only nvidia.ko's `ENOMEM` is BAR1
    /// exhaustion; this module's own allocation failures are `NoMemory`.
    pub(crate) fn of_pin_error(e: PinError) -> Refusal {
        match e {
            PinError::Driver(err) if err == ENOMEM => Refusal::Bar1Exhausted,
            PinError::Driver(_) | PinError::BadAnswer => Refusal::PinFailed,
            PinError::Freed => Refusal::Freed,
            PinError::NoMemory => Refusal::NoMemory,
        }
    }

    /// Whether a range whose pin failed this way is claimed, so that the application
    /// sees the error (docs/refusals.md): BAR1 exhaustion, this module's own
    /// allocation failure, memory freed while being pinned. Any other failure of the
    /// driver passes the range to the next client, as nvidia-peermem does.
    pub(crate) fn claims(self) -> bool {
        matches!(
            self,
            Refusal::Bar1Exhausted | Refusal::Freed | Refusal::NoMemory
        )
    }
}

/// The module's counters. All are monotonic except the `*_now` gauges.
pub(crate) struct Stats {
    /// Registrations claimed (successful acquires).
    pub(crate) registrations: Atomic<u64>,
    /// Registrations released.
    pub(crate) releases: Atomic<u64>,
    /// GPU pins made (one nvidia.ko pin each).
    pub(crate) pins: Atomic<u64>,
    /// Registrations served by an existing pin.
    pub(crate) pin_reuses: Atomic<u64>,
    /// Invalidations delivered to the core.
    pub(crate) invalidations: Atomic<u64>,
    /// Free callbacks received from nvidia.ko.
    pub(crate) free_callbacks: Atomic<u64>,
    /// Bytes pinned now, and the peak.
    pub(crate) bytes_pinned_now: Atomic<u64>,
    pub(crate) bytes_pinned_peak: Atomic<u64>,
    /// Pins alive now.
    pub(crate) pins_now: Atomic<u64>,
    /// SG lists built by `dma_map` and not yet freed.
    pub(crate) sg_lists_now: Atomic<u64>,
    /// Refusals, by [`Refusal`].
    pub(crate) refusals: [Atomic<u64>; REFUSALS],
}

/// A counter of the `stats` file: its name, and where it is in [`Stats`].
pub(crate) type Counter = (&'static str, fn(&Stats) -> &Atomic<u64>);

impl Stats {
    /// The counters the `stats` file shows, in its order, before the refusal counters
    /// (`refused_` and each of [`Refusal::NAMES`]). The one list of their names:
    /// `peermem status` knows exactly these (tools/peermem/tests/known_stats.rs).
    pub(crate) const COUNTERS: [Counter; 10] = [
        ("registrations", |s| &s.registrations),
        ("releases", |s| &s.releases),
        ("pins", |s| &s.pins),
        ("pin_reuses", |s| &s.pin_reuses),
        ("invalidations", |s| &s.invalidations),
        ("free_callbacks", |s| &s.free_callbacks),
        ("pins_now", |s| &s.pins_now),
        ("sg_lists_now", |s| &s.sg_lists_now),
        ("bytes_pinned_now", |s| &s.bytes_pinned_now),
        ("bytes_pinned_peak", |s| &s.bytes_pinned_peak),
    ];
}

impl Default for Stats {
    fn default() -> Self {
        Self {
            registrations: Atomic::new(0),
            releases: Atomic::new(0),
            pins: Atomic::new(0),
            pin_reuses: Atomic::new(0),
            invalidations: Atomic::new(0),
            free_callbacks: Atomic::new(0),
            bytes_pinned_now: Atomic::new(0),
            bytes_pinned_peak: Atomic::new(0),
            pins_now: Atomic::new(0),
            sg_lists_now: Atomic::new(0),
            refusals: [const { Atomic::new(0) }; REFUSALS],
        }
    }
}

impl Stats {
    /// Counts a refusal and prints why, at most 10 times per 5 s for each reason.
    pub(crate) fn refuse(&self, why: Refusal, addr: u64, len: u64, err: Error) -> Error {
        self.refusals[why as usize].fetch_add(1, Relaxed);
        if crate::glue::ratelimit(why as u32) {
            let what = match why {
                Refusal::BadRange => "zero length or address + length overflows",
                Refusal::Bar1Exhausted => "GPU BAR1 space exhausted (too much GPU memory pinned)",
                Refusal::PinFailed => "nvidia.ko refused to pin the memory",
                Refusal::NotPci => "the RDMA device is not a PCI function (software RDMA cannot DMA to GPU memory)",
                Refusal::DmaMapFailed => "nvidia.ko could not map the GPU pages for the RDMA device (PCIe topology or DMA mask)",
                Refusal::Freed => "the GPU memory was freed during registration",
                Refusal::NoMemory => "out of memory",
            };
            pr_warn!(
                "refused registration of {:#x}+{:#x}: {} ({:?})\n",
                addr,
                len,
                what,
                err
            );
        }
        err
    }

    /// Reads a refusal counter.
    pub(crate) fn refused(&self, why: Refusal) -> u64 {
        self.refusals[why as usize].load(Relaxed)
    }

    /// Accounts a pin of `bytes` made.
    pub(crate) fn pinned(&self, bytes: u64) {
        self.pins.fetch_add(1, Relaxed);
        self.pins_now.fetch_add(1, Relaxed);
        let now = self.bytes_pinned_now.fetch_add(bytes, Relaxed) + bytes;
        let mut peak = self.bytes_pinned_peak.load(Relaxed);
        while now > peak {
            match self.bytes_pinned_peak.cmpxchg(peak, now, Relaxed) {
                Ok(_) => break,
                Err(seen) => peak = seen,
            }
        }
    }

    /// Accounts a pin of `bytes` gone.
    pub(crate) fn unpinned(&self, bytes: u64) {
        compat::fetch_sub(&self.pins_now, 1, Relaxed);
        compat::fetch_sub(&self.bytes_pinned_now, bytes, Relaxed);
    }
}
