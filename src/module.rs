// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Module load and unload: parameters, the providers' symbols, client registration.

use kernel::prelude::*;
use kernel::sync::Arc;

use crate::{
    client::{
        Callback,
        Client,
        Mode,
        Persistent,
        Pins, //
    },
    debugfs::{
        Debugfs,
        Params, //
    },
    glue::{
        self,
        MissingSymbol, //
    },
    nv_p2p::NvP2p,
    peer_mem::{
        ClientKind,
        CoreRegistration,
        PeerCore, //
    },
    stats::Stats, //
};

/// The clients registered with the core (docs/abi.md section 3):
/// - `persistent_api_support=1` (default): "nv_mem", persistent pins;
/// - `persistent_api_support=0`: "nv_mem" with callback pins (INVALIDATE_UNMAPS, or a
///   plain invalidating client with `peerdirect_support=1`), and "nv_mem_nc" with
///   persistent pins for buffers that cannot be invalidated.
enum Clients {
    Persistent {
        _nv_mem: CoreRegistration<Client<Persistent>, 0>,
    },
    Callback {
        _nv_mem: CoreRegistration<Client<Callback>, 0>,
        _nv_mem_nc: CoreRegistration<Client<Persistent>, 1>,
    },
}

/// The loaded module: its registrations with the peer-memory core (by mode), its
/// debugfs files and the pins both serve; dropped at unload, clients first.
pub(crate) struct PeerMem {
    // Dropped first: unregistering waits for every region to be released.
    _clients: Clients,
    _debugfs: Debugfs,
    pins: Arc<Pins>,
}

/// Reads a 0/1 parameter, refusing anything else with a message.
fn flag(name: &str, value: i32) -> Result<bool> {
    match value {
        0 => Ok(false),
        1 => Ok(true),
        v => {
            pr_err!("{}={} is invalid: use 0 or 1\n", name, v);
            Err(EINVAL)
        }
    }
}

fn register<M: Mode, const S: usize>(
    core: PeerCore,
    name: &CStr,
    kind: ClientKind,
    client: &Arc<Client<M>>,
) -> Result<CoreRegistration<Client<M>, S>> {
    let reg = CoreRegistration::<Client<M>, S>::register(
        core,
        name,
        glue::version(),
        kind,
        client.clone(),
    )
        .inspect_err(|e| {
            pr_err!(
                "the peer-memory core refused client {} ({:?}); is another peer-memory client (nvidia-peermem) loaded?\n",
                name,
                e
            )
        })?;
    if kind != ClientKind::NoInvalidation {
        let inv = reg.invalidator().ok_or_else(|| {
            pr_err!(
                "the peer-memory core gave no invalidation entry for {}\n",
                name
            );
            EINVAL
        })?;
        client.set_invalidator(inv);
    }
    Ok(reg)
}

impl kernel::Module for PeerMem {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let params = glue::params();
        let persistent = flag("persistent_api_support", params.persistent_api_support)?;
        let peerdirect = flag("peerdirect_support", params.peerdirect_support)?;

        let syms = glue::resolve_symbols();
        let nv = NvP2p::new(&syms).map_err(|MissingSymbol(name)| {
            pr_err!(
                "nvidia.ko is not loaded ({} unresolved): load NVIDIA's open kernel modules before peermem; a proprietary nvidia.ko cannot serve a Rust module, and the build must use KBUILD_EXTRA_SYMBOLS with nvidia's Module.symvers\n",
                name
            );
            ENODEV
        })?;
        // One driver table for every pin (each keeps a reference).
        let nv = Arc::pin_init(nv, GFP_KERNEL)?;
        let core = PeerCore::new(&syms).map_err(|MissingSymbol(name)| {
            pr_err!(
                "the RDMA peer-memory core is not loaded ({} unresolved): load the module that exports it first (modprobe ib_uverbs: MOFED/DOCA-OFED from 25.04 and the in-box cores; ib_core: MOFED/DOCA-OFED up to 24.04; peermem doctor names it), or install MOFED/DOCA-OFED where the kernel has no peer-memory core\n",
                name
            );
            ENODEV
        })?;
        if persistent && !nv.has_persistent_api() {
            pr_info!(
                "nvidia.ko has no persistent pin API (driver before 535.14 / 525.105.17): persistent pins use nvidia_p2p_get_pages with a NULL callback\n"
            );
        }

        let pins = Arc::pin_init(Pins::new(), GFP_KERNEL)?;
        let stats = Arc::new(Stats::default(), GFP_KERNEL)?;
        let persistent_client = || {
            Client::<Persistent>::new(
                nv.clone(),
                ClientKind::NoInvalidation,
                pins.clone(),
                stats.clone(),
            )
        };
        let clients = if persistent {
            let c = persistent_client()?;
            let r = register::<_, 0>(core, c"nv_mem", ClientKind::NoInvalidation, &c)?;
            r.enable();
            Clients::Persistent { _nv_mem: r }
        } else {
            let kind = if peerdirect {
                ClientKind::Invalidate
            } else {
                ClientKind::InvalidateUnmaps
            };
            let c = Client::<Callback>::new(nv.clone(), kind, pins.clone(), stats.clone())?;
            let nc = persistent_client()?;
            let r = register::<_, 0>(core, c"nv_mem", kind, &c)?;
            let r_nc = register::<_, 1>(core, c"nv_mem_nc", ClientKind::NoInvalidation, &nc)?;
            r.enable();
            r_nc.enable();
            Clients::Callback {
                _nv_mem: r,
                _nv_mem_nc: r_nc,
            }
        };
        pr_info!(
            "peermem {} loaded: {} pins{}\n",
            glue::version(),
            if persistent { "persistent" } else { "callback" },
            if nv.has_persistent_api() {
                ""
            } else {
                " (driver without the persistent API)"
            }
        );
        Ok(PeerMem {
            _clients: clients,
            _debugfs: Debugfs::new(
                stats,
                pins.clone(),
                Params {
                    persistent_api_support: persistent,
                    peerdirect_support: peerdirect,
                },
            )?,
            pins,
        })
    }
}

impl Drop for PeerMem {
    fn drop(&mut self) {
        // `_clients` is dropped after this body; every region is released by then only
        // if nothing is live, which the module references guarantee at rmmod.
        let live = self.pins.len();
        if live != 0 {
            pr_err!("{} pins still live at unload\n", live);
        }
        pr_info!("peermem unloaded\n");
    }
}
