// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `symbol-errors`: did the kernel refuse to load peermem for a symbol?
//!
//! The module loader prints, for each symbol it cannot bind (kernel/module/version.c
//! and main.c, Linux 7.0 to 7.3):
//!
//! - `<module>: disagrees about version of symbol <symbol>`: the module's CRC for the
//!   symbol (from the `Module.symvers` it was built against) is not the loaded
//!   provider's: built against another peer-memory core's module (ib_uverbs or ib_core:
//!   upstream's instead of MOFED/DOCA-OFED's, or another MOFED release's) or another
//!   nvidia.ko;
//! - `<module>: Unknown symbol <symbol> (err <n>)`: no loaded module exports it (the
//!   provider is not loaded, or is a build without it: err -2), or it follows the
//!   version mismatch above for the same symbol (err -22).
//!
//! On a live host the log is read from `/dev/kmsg` (without blocking: each read returns
//! one record until none is left); a recorded tree records what `dmesg` printed as
//! `/dmesg.txt` at its root (as it records `nvidia-smi -q` as `/nvidia-smi-q.txt`).

use std::io::Read;

use super::{core_module_name, Check, Host, Verdict, DROPIN, NATIVE};
use crate::Root;

/// The recorded tree's kernel log: what `dmesg` printed.
pub const DMESG_FILE: &str = "/dmesg.txt";

/// Linux's `O_NONBLOCK` (the same on x86-64 and arm64).
const O_NONBLOCK: i32 = 0o4000;

/// The kernel log, or why it could not be read.
pub fn kernel_log(root: &Root) -> Result<String, String> {
    if !root.is_live() {
        return root
            .read(DMESG_FILE)
            .ok_or_else(|| format!("no kernel log recorded ({DMESG_FILE})"));
    }
    read_kmsg().map_err(|e| {
        if crate::root::is_permission(&e) {
            "cannot read the kernel log (/dev/kmsg: permission denied; run as root)".to_owned()
        } else {
            format!("cannot read the kernel log (/dev/kmsg: {e})")
        }
    })
}

/// Every record `/dev/kmsg` still holds, one message per line.
fn read_kmsg() -> std::io::Result<String> {
    use std::io::ErrorKind;
    use std::os::unix::fs::OpenOptionsExt;

    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK)
        .open("/dev/kmsg")?;
    let mut out = String::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                out.push_str(&String::from_utf8_lossy(&buf[..n]));
                if !out.ends_with('\n') {
                    out.push('\n');
                }
            }
            // Records were overwritten while reading: the next read goes on.
            Err(e) if e.raw_os_error() == Some(32) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// A symbol the loader refused.
#[derive(Clone, Debug, PartialEq, Eq)]
struct SymbolError {
    module: String,
    symbol: String,
    /// `None`: a version (CRC) mismatch; `Some(err)`: unknown symbol, with its error.
    unknown: Option<String>,
}

/// The message of a log line: `dmesg`'s `[    5.123456] ` prefix, or `/dev/kmsg`'s
/// `6,1234,5678,-;` prefix, removed.
fn message(line: &str) -> &str {
    let line = line.trim_end();
    if let Some(rest) = line.strip_prefix('[') {
        if let Some((_, msg)) = rest.split_once("] ") {
            return msg;
        }
    }
    let head = line.split(';').next().unwrap_or("");
    if line.contains(';') && head.split(',').count() >= 3 {
        return &line[head.len() + 1..];
    }
    line
}

fn parse_line(line: &str) -> Option<SymbolError> {
    let msg = message(line);
    let (module, rest) = msg.split_once(": ")?;
    if module != NATIVE && module != DROPIN {
        return None;
    }
    if let Some(symbol) = rest.strip_prefix("disagrees about version of symbol ") {
        return Some(SymbolError {
            module: module.to_owned(),
            symbol: symbol.trim().to_owned(),
            unknown: None,
        });
    }
    let rest = rest.strip_prefix("Unknown symbol ")?;
    let (symbol, err) = rest.split_once(" (err ")?;
    Some(SymbolError {
        module: module.to_owned(),
        symbol: symbol.to_owned(),
        unknown: Some(err.trim_end_matches(')').to_owned()),
    })
}

pub(super) fn symbol_errors(h: &Host<'_>) -> Check {
    const ID: &str = "symbol-errors";
    let log = match &h.log {
        Ok(log) => log,
        Err(why) => return Check::new(ID, Verdict::NotApplicable, why.clone()),
    };
    let mut errors: Vec<SymbolError> = Vec::new();
    for e in log.lines().filter_map(parse_line) {
        if !errors.contains(&e) {
            errors.push(e);
        }
    }
    if errors.is_empty() {
        return Check::new(
            ID,
            Verdict::Ok,
            "the kernel log has no symbol version or unknown-symbol errors for peermem or \
             nvidia_peermem",
        );
    }
    // A version mismatch is followed by `Unknown symbol <symbol> (err -22)` for the same
    // symbol (resolve_symbol answers -EINVAL): one error, named once.
    let mismatched = |e: &SymbolError| {
        errors
            .iter()
            .any(|m| m.unknown.is_none() && m.module == e.module && m.symbol == e.symbol)
    };
    let mut crc = Vec::new();
    let mut unknown = Vec::new();
    for e in &errors {
        if e.unknown.is_some() && mismatched(e) {
            continue;
        }
        match &e.unknown {
            None => crc.push(format!(
                "{}: disagrees about version of symbol {}",
                e.module, e.symbol
            )),
            Some(err) => unknown.push(format!(
                "{}: Unknown symbol {} (err {err})",
                e.module, e.symbol
            )),
        }
    }
    let lines: Vec<String> = crc.iter().chain(&unknown).cloned().collect();
    // The core's module as peer-memory-core finds it (loaded, or named by a
    // Module.symvers), else both that may carry it.
    let core = core_module_name(h);
    let mut fix = Vec::new();
    if !crc.is_empty() {
        let against = core.as_deref().unwrap_or("peer-memory core");
        fix.push(format!(
            "the module was built against another {against} or nvidia.ko than the loaded \
             ones: rebuild it against the installed MOFED/DOCA-OFED and nvidia.ko \
             (make KBUILD_EXTRA_SYMBOLS=\"$(packaging/find-symvers $(uname -r))\", or \
             dkms autoinstall) and reload it"
        ));
    }
    if !unknown.is_empty() {
        fix.push(match &core {
            Some(m) => format!(
                "a symbol's provider is not loaded or is a build without it: load nvidia.ko \
                 and the peer-memory core's {m} first (modprobe nvidia; modprobe {m}), and \
                 check peer-memory-core before reloading"
            ),
            None => "a symbol's provider is not loaded or is a build without it: load \
                 nvidia.ko and the peer-memory core's module first (modprobe nvidia; \
                 modprobe that module: ib_uverbs on MOFED/DOCA-OFED 25.04 and later and on \
                 the in-box cores, ib_core on MOFED/DOCA-OFED 24.04 and earlier; peermem \
                 doctor's peer-memory-core names it), and check peer-memory-core before \
                 reloading"
                .to_owned(),
        });
    }
    Check::new(
        ID,
        Verdict::Fail,
        format!("the kernel refused symbols: {}", lines.join("; ")),
    )
    .fix(fix.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_of_dmesg_and_kmsg_are_removed() {
        assert_eq!(
            message("[   12.345678] nvidia_peermem: Unknown symbol x (err -2)"),
            "nvidia_peermem: Unknown symbol x (err -2)"
        );
        assert_eq!(
            message("4,1577,14571234,-;peermem: disagrees about version of symbol y"),
            "peermem: disagrees about version of symbol y"
        );
        assert_eq!(message("peermem: loaded"), "peermem: loaded");
    }

    #[test]
    fn other_modules_are_ignored() {
        assert_eq!(
            parse_line("[ 1.0] gdrdrv: Unknown symbol nvidia_p2p_get_pages (err -2)"),
            None
        );
        assert_eq!(
            parse_line("[ 1.0] nvidia_peermem: Unknown symbol nvidia_p2p_get_pages (err -2)"),
            Some(SymbolError {
                module: "nvidia_peermem".to_owned(),
                symbol: "nvidia_p2p_get_pages".to_owned(),
                unknown: Some("-2".to_owned()),
            })
        );
    }
}
