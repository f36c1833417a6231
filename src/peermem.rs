// SPDX-License-Identifier: GPL-2.0 OR MIT

//! peermem: a GPUDirect RDMA peer-memory client.
//!
//! It lets an RDMA adapter DMA straight into GPU memory: it pins GPU memory through
//! nvidia.ko's P2P API and hands the DMA addresses to the RDMA peer-memory core, so that
//! `ibv_reg_mr` on a GPU pointer works. See `docs/architecture.md`.

mod bindings;
mod client;
mod compat;
mod debugfs;
mod device;
mod glue;
mod module;
mod nv_p2p;
mod peer_mem;
mod range;
mod registry;
mod space;
mod stats;

/// Declares the module under the given name: `peermem`, or `nvidia_peermem` for the
/// drop-in build (`make dropin`: Kbuild's `PEERMEM_DROPIN=1`), whose `/sys/module/nvidia_peermem/version` is what
/// applications look for (docs/abi.md 4).
macro_rules! peermem_module {
    ($name:tt) => {
        kernel::prelude::module! {
            type: module::PeerMem,
            name: $name,
            authors: ["peermem developers"],
            description: "GPUDirect RDMA peer-memory client for NVIDIA GPUs",
            license: "Dual MIT/GPL",
        }
    };
}

#[cfg(not(peermem_dropin))]
peermem_module!("peermem");
#[cfg(peermem_dropin)]
peermem_module!("nvidia_peermem");
