// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Counters, and the refusal reasons with their counter names and rate-limited
//! messages. Which error stands for which reason is the client's
//! (`client/refusal.rs`): this file names nothing of the layers it counts.

use kernel::{
    prelude::*,
    sync::atomic::{
        Atomic,
        Relaxed, //
    }, //
};

use crate::compat;

/// Why a registration of GPU memory was refused (its name and message:
/// [`Refusal::REASONS`]).
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

/// A refusal reason's counter name and dmesg message, side by side.
pub(crate) struct Reason {
    pub(crate) why: Refusal,
    /// The counter's name: the `stats` file shows it as `refused_<name>`.
    pub(crate) name: &'static str,
    /// What the rate-limited dmesg line says.
    message: &'static str,
}

// Each reason sits at its own index.
const _: () = {
    let mut i = 0;
    while i < REFUSALS {
        assert!(Refusal::REASONS[i].why as usize == i);
        i += 1;
    }
};

impl Refusal {
    /// Every reason, in counter order: the one list of their names and messages.
    pub(crate) const REASONS: [Reason; REFUSALS] = [
        Reason {
            why: Refusal::BadRange,
            name: "bad_range",
            message: "zero length or address + length overflows",
        },
        Reason {
            why: Refusal::Bar1Exhausted,
            name: "bar1_exhausted",
            message: "GPU BAR1 space exhausted (too much GPU memory pinned)",
        },
        Reason {
            why: Refusal::PinFailed,
            name: "pin_failed",
            message: "nvidia.ko refused to pin the memory",
        },
        Reason {
            why: Refusal::NotPci,
            name: "not_pci",
            message: "the RDMA device is not a PCI function (software RDMA cannot DMA to GPU memory)",
        },
        Reason {
            why: Refusal::DmaMapFailed,
            name: "dma_map_failed",
            message: "nvidia.ko could not map the GPU pages for the RDMA device (PCIe topology or DMA mask)",
        },
        Reason {
            why: Refusal::Freed,
            name: "freed",
            message: "the GPU memory was freed during registration",
        },
        Reason {
            why: Refusal::NoMemory,
            name: "no_memory",
            message: "out of memory",
        },
    ];

    /// The reason's entry in [`Refusal::REASONS`].
    fn reason(self) -> &'static Reason {
        &Self::REASONS[self as usize]
    }
}

/// The module's counters: one set for the module, which its clients share, each
/// counted by whoever owns its event. The client counts registrations, releases, pin
/// reuses, invalidations, free callbacks and refusals; a pin reports its making and
/// its end to the client that made it (`PinContext`, which the client forwards to
/// [`Stats::pinned`] and [`Stats::unpinned`]); the client counts the SG lists it
/// installs in the core's tables and frees ([`Stats::sg_list_installed`],
/// [`Stats::sg_list_freed`]).
///
/// The gauges (`*_now`) and the peak change only through those pairs of methods, each
/// called once for an event and once for its undoing, after it: `pins_now` and
/// `bytes_pinned_now` are the pins made and not yet let go of and the bytes they pin,
/// `sg_lists_now` the lists installed and not yet freed.
pub(crate) struct Stats {
    /// Registrations claimed (successful acquires).
    pub(crate) registrations: Atomic<u64>,
    /// Registrations released.
    pub(crate) releases: Atomic<u64>,
    /// GPU pins made (one nvidia.ko pin each).
    pins: Atomic<u64>,
    /// Registrations served by an existing pin.
    pub(crate) pin_reuses: Atomic<u64>,
    /// Invalidations delivered to the core.
    pub(crate) invalidations: Atomic<u64>,
    /// Free callbacks received from nvidia.ko.
    pub(crate) free_callbacks: Atomic<u64>,
    /// Pins alive now: made, and not yet let go of by their last owner.
    pins_now: Atomic<u64>,
    /// SG lists `dma_map` installed in the core's table and not yet freed.
    sg_lists_now: Atomic<u64>,
    /// The bytes the pins alive now pin, and the most they pinned at once.
    bytes_pinned_now: Atomic<u64>,
    bytes_pinned_peak: Atomic<u64>,
    /// Refusals, by [`Refusal`].
    pub(crate) refusals: [Atomic<u64>; REFUSALS],
}

/// A counter of the `stats` file: its name, and how it is read.
pub(crate) type Counter = (&'static str, fn(&Stats) -> u64);

impl Stats {
    /// The counters the `stats` file shows, in its order, before the refusal counters
    /// (`refused_` and the name of each of [`Refusal::REASONS`]). The one list of their names:
    /// `peermem status` knows exactly these (tools/peermem/tests/known_stats.rs).
    pub(crate) const COUNTERS: [Counter; 10] = [
        ("registrations", |s| s.registrations.load(Relaxed)),
        ("releases", |s| s.releases.load(Relaxed)),
        ("pins", |s| s.pins.load(Relaxed)),
        ("pin_reuses", |s| s.pin_reuses.load(Relaxed)),
        ("invalidations", |s| s.invalidations.load(Relaxed)),
        ("free_callbacks", |s| s.free_callbacks.load(Relaxed)),
        ("pins_now", |s| s.pins_now.load(Relaxed)),
        ("sg_lists_now", |s| s.sg_lists_now.load(Relaxed)),
        ("bytes_pinned_now", |s| s.bytes_pinned_now.load(Relaxed)),
        ("bytes_pinned_peak", |s| s.bytes_pinned_peak.load(Relaxed)),
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
            pins_now: Atomic::new(0),
            sg_lists_now: Atomic::new(0),
            bytes_pinned_now: Atomic::new(0),
            bytes_pinned_peak: Atomic::new(0),
            refusals: [const { Atomic::new(0) }; REFUSALS],
        }
    }
}

impl Stats {
    /// Counts a pin of `bytes` bytes just made: alive from now on, and its bytes
    /// pinned (the peak raised to them).
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

    /// Counts the end of a pin of `bytes` bytes counted by [`Stats::pinned`]: its last
    /// owner let go of it.
    pub(crate) fn unpinned(&self, bytes: u64) {
        compat::fetch_sub(&self.pins_now, 1, Relaxed);
        compat::fetch_sub(&self.bytes_pinned_now, bytes, Relaxed);
    }

    /// Counts an SG list `dma_map` installed in the core's table.
    pub(crate) fn sg_list_installed(&self) {
        self.sg_lists_now.fetch_add(1, Relaxed);
    }

    /// Counts the freeing of an SG list counted by [`Stats::sg_list_installed`].
    pub(crate) fn sg_list_freed(&self) {
        compat::fetch_sub(&self.sg_lists_now, 1, Relaxed);
    }
}

impl Stats {
    /// Counts a refusal and prints why, at most 10 times per 5 s for each reason.
    pub(crate) fn refuse(&self, why: Refusal, addr: u64, len: u64, err: Error) -> Error {
        self.refusals[why as usize].fetch_add(1, Relaxed);
        if crate::glue::ratelimit(why as u32) {
            pr_warn!(
                "refused registration of {:#x}+{:#x}: {} ({:?})\n",
                addr,
                len,
                why.reason().message,
                err
            );
        }
        err
    }

    /// Reads a refusal counter.
    pub(crate) fn refused(&self, why: Refusal) -> u64 {
        self.refusals[why as usize].load(Relaxed)
    }
}
