// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Module load and unload.

use kernel::prelude::*;

/// The loaded module.
pub(crate) struct PeerMem;

impl kernel::Module for PeerMem {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        pr_info!("peermem {} loaded\n", crate::glue::version());
        Ok(PeerMem)
    }
}

impl Drop for PeerMem {
    fn drop(&mut self) {
        pr_info!("peermem unloaded\n");
    }
}
