// SPDX-License-Identifier: GPL-2.0 OR MIT

//! What peermem shows under /sys/kernel/debug/peermem/ (read by `peermem status`).
//!
//! - `stats`: one `name value` line per counter ([`Stats::COUNTERS`], then the
//!   refusals).
//! - `pins`: a `#` header, then one line per live pin:
//!   `id tgid mode start end bytes users state space`, where `space` identifies the
//!   address space (its mm, salted, without showing a kernel address; the thread group
//!   has its own column). A persistent pin's line has no `space`: nothing looks it up
//!   by its address space, and its record keeps only the thread group.
//! - `params`: the module parameters as `name value` lines (`persistent_api_support`,
//!   `peerdirect_support`), a fallback for `peermem doctor` when
//!   /sys/module/<name>/parameters cannot be read.

use core::fmt;

use kernel::{
    debugfs::{
        Dir,
        File, //
    },
    prelude::*,
    sync::Arc, //
};

use crate::{
    client::Pins,
    stats::{
        Refusal,
        Stats, //
    }, //
};

/// The counters, as the `stats` file shows them.
struct StatsView(Arc<Stats>);

impl fmt::Debug for StatsView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.0;
        for (name, counter) in Stats::COUNTERS {
            writeln!(f, "{} {}", name, counter(s))?;
        }
        for r in &Refusal::REASONS {
            writeln!(f, "refused_{} {}", r.name, s.refused(r.why))?;
        }
        Ok(())
    }
}

/// The live pins, as the `pins` file shows them.
struct PinsView(Arc<Pins>);

impl fmt::Debug for PinsView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "# id tgid mode start end bytes users state space")?;
        self.0.write(f, Arc::as_ptr(&self.0) as u64)
    }
}

/// The module's parameters, as the `params` file shows them (`name value` lines, the
/// names nvidia-peermem uses), a fallback for tools when sysfs cannot be read.
pub(crate) struct Params {
    /// 1: persistent pins; 0: callback pins.
    pub(crate) persistent_api_support: bool,
    /// 1: `nv_mem` is a plain invalidating client.
    pub(crate) peerdirect_support: bool,
}

impl fmt::Debug for Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "persistent_api_support {}",
            u8::from(self.persistent_api_support)
        )?;
        writeln!(
            f,
            "peerdirect_support {}",
            u8::from(self.peerdirect_support)
        )
    }
}

/// The debugfs directory and its files; dropping it removes them.
pub(crate) struct Debugfs {
    _stats: Pin<KBox<File<StatsView>>>,
    _pins: Pin<KBox<File<PinsView>>>,
    _params: Pin<KBox<File<Params>>>,
    _dir: Dir,
}

impl Debugfs {
    /// Creates /sys/kernel/debug/peermem/{stats,pins,params}.
    pub(crate) fn new(stats: Arc<Stats>, pins: Arc<Pins>, params: Params) -> Result<Self> {
        let dir = Dir::new(c"peermem");
        let s = KBox::pin_init(dir.read_only_file(c"stats", StatsView(stats)), GFP_KERNEL)?;
        let p = KBox::pin_init(dir.read_only_file(c"pins", PinsView(pins)), GFP_KERNEL)?;
        let m = KBox::pin_init(dir.read_only_file(c"params", params), GFP_KERNEL)?;
        Ok(Self {
            _stats: s,
            _pins: p,
            _params: m,
            _dir: dir,
        })
    }
}
