// SPDX-License-Identifier: GPL-2.0 OR MIT

//! What peermem shows under /sys/kernel/debug/peermem/ (read by `peermem status`).
//!
//! - `stats`: one `name value` line per counter (see [`Stats`]).
//! - `pins`: a `#` header, then one line per live pin:
//!   `id tgid mode start end bytes users state space`, where `space` identifies the
//!   address space (mm and thread group) without showing a kernel address.

use core::{fmt, sync::atomic::Ordering};

use kernel::{
    debugfs::{Dir, File},
    prelude::*,
    sync::Arc,
};

use crate::{
    client::Pins,
    stats::{Refusal, Stats},
};

/// The counters, as the `stats` file shows them.
struct StatsView(Arc<Stats>);

impl fmt::Debug for StatsView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.0;
        let counters = [
            ("registrations", &s.registrations),
            ("releases", &s.releases),
            ("pins", &s.pins),
            ("pin_reuses", &s.pin_reuses),
            ("invalidations", &s.invalidations),
            ("free_callbacks", &s.free_callbacks),
            ("pins_now", &s.pins_now),
            ("sg_lists_now", &s.sg_lists_now),
            ("bytes_pinned_now", &s.bytes_pinned_now),
            ("bytes_pinned_peak", &s.bytes_pinned_peak),
        ];
        for (name, v) in counters {
            writeln!(f, "{} {}", name, v.load(Ordering::Relaxed))?;
        }
        for why in Refusal::ALL {
            writeln!(f, "refused_{} {}", why.name(), s.refused(why))?;
        }
        Ok(())
    }
}

/// The live pins, as the `pins` file shows them.
struct PinsView(Arc<Pins>);

impl fmt::Debug for PinsView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "# id tgid mode start end bytes users state space")?;
        let salt = Arc::as_ptr(&self.0) as u64;
        let mut res = Ok(());
        self.0.for_each(|key, pin| {
            if res.is_ok() {
                res = pin.describe(key, salt, f);
            }
        });
        res
    }
}

/// The debugfs directory and its files; dropping it removes them.
pub(crate) struct Debugfs {
    _stats: Pin<KBox<File<StatsView>>>,
    _pins: Pin<KBox<File<PinsView>>>,
    _dir: Dir,
}

impl Debugfs {
    /// Creates /sys/kernel/debug/peermem/{stats,pins}.
    pub(crate) fn new(stats: Arc<Stats>, pins: Arc<Pins>) -> Result<Self> {
        let dir = Dir::new(c"peermem");
        let s = KBox::pin_init(dir.read_only_file(c"stats", StatsView(stats)), GFP_KERNEL)?;
        let p = KBox::pin_init(dir.read_only_file(c"pins", PinsView(pins)), GFP_KERNEL)?;
        Ok(Self {
            _stats: s,
            _pins: p,
            _dir: dir,
        })
    }
}
