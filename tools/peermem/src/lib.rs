// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The `peermem` userspace tool as a library, so that its tests run on recorded trees.
//!
//! Every file it reads is named by its absolute path on a live host (`/sys/...`) and
//! resolved under a [`Root`] (`/` on a live host, a recorded tree in tests).
//!
//! - [`agent`]: the entrypoint of a container that loads peermem on a Kubernetes node.
//! - [`cli`]: the command line (clap definitions).
//! - [`status`]: parses the module's debugfs files (`stats`, `pins`) and renders them.
//! - [`doctor`]: checks whether a host can run peermem and lets applications use it.
//! - [`nvsmi`]: the few facts `doctor` takes from `nvidia-smi -q`.
//! - [`nvml`]: the same facts from NVML, which `doctor` asks first on a live host.
//! - [`version`]: NVIDIA driver versions and what each one offers.
//!
//! JSON output is serialized with `serde_json` from the report types
//! ([`status::Status`], [`doctor::Report`]), under a top-level `schema_version`
//! ([`JSON_SCHEMA_VERSION`]).

pub mod agent;
pub mod cli;
pub mod doctor;
pub mod nvml;
pub mod nvsmi;
pub mod root;
pub mod status;
pub mod verbs;
pub mod version;

pub use root::Root;

/// The `schema_version` of `status --json`: raised when a field changes meaning or
/// goes away (new fields do not raise it).
pub const JSON_SCHEMA_VERSION: u32 = 1;

/// The `schema_version` of `doctor --json`, by the same rule. 2: `client-registered`
/// moved the checks after `peer-memory-core` one place on (a consumer reading them by
/// position reads others), with `gpu-memory-path`, `paths` and `path_facts` added. 3:
/// the checks in dependency order (GPU driver and RDMA core before the module),
/// `fix_first`, `first_warning` and `peer_memory_needed` added, and each check's
/// `peer_memory`.
pub const DOCTOR_JSON_SCHEMA_VERSION: u32 = 3;

/// This repository's version (the `VERSION` file), which the module declares with
/// `MODULE_VERSION`: how `doctor` tells our `nvidia_peermem` from NVIDIA's.
pub const PEERMEM_VERSION: &str = include_str!("../../../VERSION");

/// [`PEERMEM_VERSION`] without its trailing newline.
pub fn peermem_version() -> &'static str {
    PEERMEM_VERSION.trim()
}
