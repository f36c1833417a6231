// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Which path a job's GPU memory takes to the NIC, per library and NIC: dma-buf
//! (`ibv_reg_dmabuf_mr`, no peer-memory client involved) or peer memory (`ibv_reg_mr`
//! on the GPU pointer, through peermem), decided by the rules NCCL, UCX and libfabric
//! apply (docs/abi.md 7), from the facts of this host and the job's environment.
//!
//! The CUDA side of dma-buf (`CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED`) is judged from
//! what sets it: NVIDIA's open kernel modules, a driver of CUDA 11.7 or later (R515),
//! a kernel with `CONFIG_DMA_SHARED_BUFFER`, confidential compute off.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::{Check, Host, Verdict};
use crate::verbs::Answer;
use crate::version::DriverVersion;
use crate::Root;

/// `EBADF`, `EPROTONOSUPPORT`, `EOPNOTSUPP` (Linux's numbers).
const EBADF: i32 = 9;
const EPROTONOSUPPORT: i32 = 93;
const EOPNOTSUPP: i32 = 95;

/// The first driver whose CUDA has dma-buf (CUDA 11.7 is R515).
const DMABUF_DRIVER: DriverVersion = DriverVersion(515, 0, 0);

/// The environment variables the rules read.
pub const ENV_VARS: [&str; 5] = [
    "NCCL_DMABUF_ENABLE",
    "UCX_IB_GPU_DIRECT_RDMA",
    "UCX_CUDA_COPY_DMABUF",
    "FI_VERBS_USE_DMABUF",
    "FI_HMEM_CUDA_USE_DMABUF",
];

/// A job's environment: the process's, or a file of `NAME=VALUE` lines (`export`
/// before a line, quotes around a value and `#` comments allowed).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Env(pub BTreeMap<String, String>);

impl Env {
    /// The variables of `ENV_VARS` in this process's environment.
    pub fn current() -> Self {
        Env(ENV_VARS
            .iter()
            .filter_map(|v| Some(((*v).to_owned(), std::env::var(v).ok()?)))
            .collect())
    }

    /// The assignments of `text`; `Err` names the first line that is not one.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut vars = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            let l = line.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let l = l.strip_prefix("export ").unwrap_or(l).trim_start();
            let Some((k, v)) = l.split_once('=') else {
                return Err(format!("line {}: not NAME=VALUE: {line}", i + 1));
            };
            let v = v.trim();
            let v = [('"', '"'), ('\'', '\'')]
                .iter()
                .find_map(|(a, b)| v.strip_prefix(*a).and_then(|v| v.strip_suffix(*b)))
                .unwrap_or(v);
            vars.insert(k.trim().to_owned(), v.to_owned());
        }
        Ok(Env(vars))
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// `name` set to a value that switches a feature off.
    fn off(&self, name: &str) -> bool {
        self.get(name).is_some_and(|v| {
            matches!(
                v.to_ascii_lowercase().as_str(),
                "0" | "n" | "no" | "false" | "off"
            )
        })
    }
}

/// The NICs' answers to the dma-buf probe (`crate::verbs::probe`), or why there are
/// none.
pub type NicAnswers = Result<Vec<(String, Answer)>, String>;

/// What the path rules read, besides the environment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Facts {
    /// The environment variables of `ENV_VARS` that are set.
    pub env: BTreeMap<String, String>,
    /// NVIDIA's open kernel modules: `Some(false)` for the proprietary build.
    pub open_modules: Option<bool>,
    /// The GPU driver's version.
    pub driver: Option<String>,
    /// `CONFIG_DMA_SHARED_BUFFER=y` in the running kernel's configuration.
    pub dma_shared_buffer: Option<bool>,
    /// Confidential compute on (NVML or nvidia-smi), if known.
    pub confidential_compute: Option<bool>,
    /// The RDMA core registers dma-buf memory (`ib_umem_dmabuf_get` in kallsyms).
    pub core_dmabuf: bool,
    /// A peer-memory core (`ib_register_peer_memory_client` in kallsyms).
    pub core_peer_memory: bool,
    /// The peer-memory entries present, of those the libraries look for.
    pub peer_entries: Vec<String>,
}

/// A registration path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Path {
    /// `ibv_reg_dmabuf_mr`: peermem is not involved.
    DmaBuf,
    /// `ibv_reg_mr` on the GPU pointer: through the peer-memory client.
    PeerMemory,
    /// Neither: GPU memory is not registered with the NIC (staged through host memory).
    None,
}

impl Path {
    fn word(self) -> &'static str {
        match self {
            Path::DmaBuf => "dma-buf",
            Path::PeerMemory => "peer memory",
            Path::None => "no GPUDirect RDMA",
        }
    }
}

/// One library's path on one NIC, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// `nccl`, `ucx`, `libfabric`.
    pub library: &'static str,
    /// The RDMA device, or `-` where none was probed.
    pub nic: String,
    /// The path.
    pub path: Path,
    /// The facts that decided it, in the order the library weighs them.
    pub why: Vec<String>,
}

/// The peer-memory entries the libraries read (docs/abi.md 7).
const NV_MEM: &str = "/sys/kernel/mm/memory_peers/nv_mem/version";
const NV_MEM_NC: &str = "/sys/kernel/mm/memory_peers/nv_mem_nc/version";
const NVIDIA_PEERMEM: &str = "/sys/module/nvidia_peermem/version";
const NV_PEER_MEM: &str = "/sys/module/nv_peer_mem/version";

/// The facts of host `h` for the environment `env`.
pub(super) fn facts(h: &Host<'_>, env: &Env) -> Facts {
    let root: &Root = h.root;
    // The proprietary nvidia.ko taints the kernel with P; the open modules do not.
    let open_modules = h.module("nvidia").then(|| {
        !root
            .read_trimmed("/sys/module/nvidia/taint")
            .unwrap_or_default()
            .contains('P')
    });
    Facts {
        env: env
            .0
            .iter()
            .filter(|(k, _)| ENV_VARS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        open_modules,
        driver: h.driver.as_ref().map(|(_, s)| s.clone()),
        dma_shared_buffer: h.config.as_ref().map(|c| c.yes("DMA_SHARED_BUFFER")),
        confidential_compute: h.smi.as_ref().map(|s| s.cc_on()),
        core_dmabuf: h.kallsyms_has("ib_umem_dmabuf_get").is_some(),
        core_peer_memory: h.kallsyms_has("ib_register_peer_memory_client").is_some(),
        peer_entries: [NV_MEM, NV_MEM_NC, NVIDIA_PEERMEM, NV_PEER_MEM]
            .into_iter()
            .filter(|p| root.exists(p))
            .map(str::to_owned)
            .collect(),
    }
}

impl Facts {
    fn entry(&self, path: &str) -> bool {
        self.peer_entries.iter().any(|p| p == path)
    }

    /// CUDA's dma-buf support, as `CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED` would say,
    /// with the reason when it is missing.
    fn cuda_dmabuf(&self) -> Result<String, String> {
        match self.open_modules {
            None => return Err("no GPU driver loaded".to_owned()),
            Some(false) => {
                return Err(
                    "the proprietary GPU driver (dma-buf needs the open kernel modules)".to_owned(),
                )
            }
            Some(true) => {}
        }
        let v = self.driver.as_deref().and_then(DriverVersion::parse);
        match v {
            Some(v) if v < DMABUF_DRIVER => {
                return Err(format!(
                    "driver {} (dma-buf needs 515 or later)",
                    self.driver.as_deref().unwrap_or("?")
                ))
            }
            None => return Err("the driver's version is unknown".to_owned()),
            Some(_) => {}
        }
        match self.dma_shared_buffer {
            Some(false) => return Err("the kernel has no CONFIG_DMA_SHARED_BUFFER".to_owned()),
            None => {
                return Err(
                    "the kernel's configuration was not found (CONFIG_DMA_SHARED_BUFFER unknown)"
                        .to_owned(),
                )
            }
            Some(true) => {}
        }
        if self.confidential_compute == Some(true) {
            return Err("confidential compute is on".to_owned());
        }
        Ok(format!(
            "CUDA has dma-buf (open modules {}, CONFIG_DMA_SHARED_BUFFER=y)",
            self.driver.as_deref().unwrap_or("?")
        ))
    }
}

/// A NIC's probe answer in words.
fn answer_word(a: &Answer) -> String {
    match a {
        Answer::Registered => "the dma-buf probe succeeded".to_owned(),
        Answer::Errno(e) => format!("the dma-buf probe answered {}", errno_name(*e)),
        Answer::NotProbed(why) => format!("not probed ({why})"),
    }
}

fn errno_name(e: i32) -> String {
    match e {
        EBADF => "EBADF".to_owned(),
        EPROTONOSUPPORT => "EPROTONOSUPPORT".to_owned(),
        EOPNOTSUPP => "EOPNOTSUPP".to_owned(),
        0 => "no errno".to_owned(),
        e => format!("errno {e}"),
    }
}

/// The decisions for every library and NIC.
pub fn decide(f: &Facts, env: &Env, nics: &NicAnswers) -> Vec<Decision> {
    // libibverbs answered and lists no device: nothing to register GPU memory with.
    if matches!(nics, Ok(l) if l.is_empty()) {
        return ["nccl", "ucx", "libfabric"]
            .into_iter()
            .map(|library| Decision {
                library,
                nic: "-".to_owned(),
                path: Path::None,
                why: vec!["no RDMA device (libibverbs lists none)".to_owned()],
            })
            .collect();
    }
    let nics: Vec<(String, Option<&Answer>)> = match nics {
        Ok(list) if !list.is_empty() => list.iter().map(|(n, a)| (n.clone(), Some(a))).collect(),
        _ => vec![("-".to_owned(), None)],
    };
    let mut out = Vec::new();
    for (nic, answer) in &nics {
        out.push(nccl(f, env, nic, *answer));
        out.push(ucx(f, env, nic, *answer));
        out.push(libfabric(f, env, nic, *answer));
    }
    out
}

/// Whether the library's dma-buf switch `var` is not `off_word` and CUDA has dma-buf;
/// the reason goes to `why`. An empty `var`: no switch.
fn cuda_allowed(f: &Facts, env: &Env, var: &str, off_word: &str, why: &mut Vec<String>) -> bool {
    if !var.is_empty() && env.off(var) {
        why.push(format!("{var}={off_word}"));
        return false;
    }
    let (ok, w) = match f.cuda_dmabuf() {
        Ok(w) => (true, w),
        Err(w) => (false, w),
    };
    why.push(w);
    ok
}

/// What NIC `nic` answered, for a reason line.
fn nic_word(nic: &str, a: Option<&Answer>) -> String {
    match a {
        Some(a) => format!("{nic}: {}", answer_word(a)),
        None => "no NIC probed (no RDMA device, or no libibverbs)".to_owned(),
    }
}

/// NCCL (src/transport/net_ib/gdr.cc, src/init.cc): dma-buf when the communicator and
/// the NIC support it, else peer memory when its entries exist.
fn nccl(f: &Facts, env: &Env, nic: &str, a: Option<&Answer>) -> Decision {
    let mut why = Vec::new();
    let comm = cuda_allowed(f, env, "NCCL_DMABUF_ENABLE", "0", &mut why);
    // NCCL counts every answer but EOPNOTSUPP and EPROTONOSUPPORT as support.
    let nic_ok = match a {
        Some(Answer::Errno(EOPNOTSUPP | EPROTONOSUPPORT)) => false,
        Some(Answer::Registered | Answer::Errno(_)) => true,
        Some(Answer::NotProbed(_)) | None => false,
    };
    if comm {
        why.push(nic_word(nic, a));
    }
    let peer = [NV_MEM, NV_MEM_NC, NVIDIA_PEERMEM]
        .iter()
        .find(|p| f.entry(p));
    let path = if comm && nic_ok {
        Path::DmaBuf
    } else if let Some(p) = peer {
        why.push(format!("{p} exists"));
        Path::PeerMemory
    } else {
        why.push("no peer-memory entry (memory_peers/nv_mem, nv_mem_nc, /sys/module/nvidia_peermem): \"GPU Direct RDMA Disabled\"".to_owned());
        Path::None
    };
    Decision {
        library: "nccl",
        nic: nic.to_owned(),
        path,
        why,
    }
}

/// UCX (uct/ib/base/ib_md.c, uct/cuda/cuda_copy): dma-buf when the NIC and CUDA have
/// it, else peer memory unless UCX_IB_GPU_DIRECT_RDMA=no.
fn ucx(f: &Facts, env: &Env, nic: &str, a: Option<&Answer>) -> Decision {
    let mut why = Vec::new();
    let cuda = cuda_allowed(f, env, "UCX_CUDA_COPY_DMABUF", "no", &mut why);
    // UCX counts success and EBADF only.
    let nic_ok = matches!(a, Some(Answer::Registered | Answer::Errno(EBADF)));
    if cuda {
        why.push(nic_word(nic, a));
    }
    let peer = [NV_MEM, NVIDIA_PEERMEM, NV_PEER_MEM]
        .iter()
        .find(|p| f.entry(p));
    let path = if cuda && nic_ok {
        Path::DmaBuf
    } else if env.off("UCX_IB_GPU_DIRECT_RDMA") {
        why.push("UCX_IB_GPU_DIRECT_RDMA=no".to_owned());
        Path::None
    } else if let Some(p) = peer {
        why.push(format!("{p} exists"));
        Path::PeerMemory
    } else {
        why.push(
            "no peer-memory entry (memory_peers/nv_mem, /sys/module/nvidia_peermem, nv_peer_mem)"
                .to_owned(),
        );
        Path::None
    };
    Decision {
        library: "ucx",
        nic: nic.to_owned(),
        path,
        why,
    }
}

/// libfabric's verbs provider (prov/verbs): dma-buf when the core has it and the
/// variables allow it; a NIC that refuses the registration falls back to
/// `ibv_reg_mr` where a peer-memory core exists.
fn libfabric(f: &Facts, env: &Env, nic: &str, a: Option<&Answer>) -> Decision {
    let mut why = Vec::new();
    let dmabuf = if env.off("FI_VERBS_USE_DMABUF") {
        why.push("FI_VERBS_USE_DMABUF=0".to_owned());
        false
    } else if env.off("FI_HMEM_CUDA_USE_DMABUF") {
        why.push("FI_HMEM_CUDA_USE_DMABUF=0".to_owned());
        false
    } else if !f.core_dmabuf {
        why.push("the RDMA core has no dma-buf (no ib_umem_dmabuf_get in kallsyms)".to_owned());
        false
    } else {
        why.push("ib_umem_dmabuf_get in kallsyms".to_owned());
        cuda_allowed(f, env, "", "", &mut why)
    };
    let refused = matches!(a, Some(Answer::Errno(EOPNOTSUPP | EPROTONOSUPPORT)));
    if dmabuf && refused {
        why.push(format!(
            "{nic}: {}, so the registration falls back to ibv_reg_mr",
            answer_word(a.expect("refused"))
        ));
    }
    let path = if dmabuf && !refused {
        Path::DmaBuf
    } else if f.core_peer_memory {
        why.push("ib_register_peer_memory_client in kallsyms".to_owned());
        Path::PeerMemory
    } else {
        why.push("no peer-memory core (no ib_register_peer_memory_client in kallsyms)".to_owned());
        Path::None
    };
    Decision {
        library: "libfabric",
        nic: nic.to_owned(),
        path,
        why,
    }
}

/// The check `gpu-memory-path`: the decisions summed up, with where peermem still
/// matters when no library takes it by default.
pub(super) fn check(decisions: &[Decision], f: &Facts, nics: &NicAnswers) -> Check {
    const ID: &str = "gpu-memory-path";
    let count = |p: Path| decisions.iter().filter(|d| d.path == p).count();
    let (dmabuf, peer, none) = (
        count(Path::DmaBuf),
        count(Path::PeerMemory),
        count(Path::None),
    );
    let probed = match nics {
        Ok(l) if l.is_empty() => {
            return Check::new(
                ID,
                Verdict::NotApplicable,
                "no RDMA device: no library has a NIC to register GPU memory with (hca)",
            )
        }
        Ok(l) => format!("{} NIC(s) probed", l.len()),
        Err(e) => format!("NICs not probed: {e}"),
    };
    let still = "peermem still carries GPU memory registered with ibv_reg_mr directly \
                 (perftest, MPI, custom verbs code), NCCL's GIN/GDAKI (it looks for \
                 /sys/module/nvidia_peermem/version), and any job with dma-buf switched off";
    if peer == 0 && dmabuf > 0 && none == 0 {
        return Check::new(
            ID,
            Verdict::Ok,
            format!("NCCL, UCX and libfabric register GPU memory through dma-buf ({probed}): peermem is not used by default; {still}"),
        );
    }
    if none > 0 {
        let who: Vec<String> = decisions
            .iter()
            .filter(|d| d.path == Path::None)
            .map(|d| format!("{} on {}", d.library, d.nic))
            .collect();
        let fix = if f.peer_entries.is_empty() && !f.core_peer_memory {
            "load peermem (its drop-in, nvidia_peermem) on a host with a peer-memory core, or enable dma-buf (open GPU modules 515+, CONFIG_DMA_SHARED_BUFFER, a NIC that supports it)"
        } else {
            "see the per-library lines below: the variable or fact named is what to change"
        };
        return Check::new(
            ID,
            Verdict::Warn,
            format!("no GPUDirect RDMA for {} ({probed})", who.join(", ")),
        )
        .fix(fix);
    }
    Check::new(
        ID,
        Verdict::Ok,
        format!("{peer} of {} library/NIC pairs register GPU memory through peer memory (peermem), {dmabuf} through dma-buf ({probed})", decisions.len()),
    )
}

/// The decisions as text: one line per library and NIC.
pub fn render(decisions: &[Decision]) -> String {
    let mut out = String::new();
    for d in decisions {
        let _ = writeln!(
            out,
            "path  {:<9}  {:<8}  {:<17}  {}",
            d.library,
            d.nic,
            d.path.word(),
            d.why.join("; ")
        );
    }
    out
}
