// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Running `nvidia-smi -q`: its output, its failures, and a timeout for one that hangs.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use peermem_tool::nvsmi::{self, QueryError};

/// The tests write a stub and start it at once: one at a time. Otherwise one test's
/// fork can inherit the other's stub still open for writing, and exec of that stub
/// fails with ETXTBSY (seen as `NotFound`, 3 runs in 40).
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// An executable shell script `name` in a scratch directory, with `body`.
fn stub(name: &str, body: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("peermem-nvsmi-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("nvidia-smi");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn a_hanging_nvidia_smi_is_killed_at_the_timeout() {
    let _serial = serial();
    // `exec`: the shell becomes sleep, so the kill reaches the process that hangs.
    let path = stub("hang", "exec sleep 60");
    let start = Instant::now();
    let r = nvsmi::query(&path, Duration::from_millis(500));
    let took = start.elapsed();
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    assert_eq!(r, Err(QueryError::TimedOut(Duration::from_millis(500))));
    assert!(took >= Duration::from_millis(500), "{took:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert_eq!(
        QueryError::TimedOut(nvsmi::TIMEOUT).to_string(),
        "nvidia-smi -q did not finish within 10 s and was killed"
    );
}

#[test]
fn output_failure_and_absence() {
    let _serial = serial();
    let path = stub(
        "ok",
        "[ \"$1\" = -q ] || exit 3\necho 'Driver Version : 580.65.06'",
    );
    let r = nvsmi::query(&path, nvsmi::TIMEOUT);
    assert_eq!(r.as_deref(), Ok("Driver Version : 580.65.06\n"));
    let fail = stub("fail", "exit 9");
    let r = nvsmi::query(&fail, nvsmi::TIMEOUT);
    assert!(
        matches!(r, Err(QueryError::Failed(s)) if s.code() == Some(9)),
        "{r:?}"
    );
    let r = nvsmi::query(path.with_file_name("absent"), nvsmi::TIMEOUT);
    assert_eq!(r, Err(QueryError::NotFound));
    // There but not executable: said so, with the system's reason, not "not installed".
    std::fs::set_permissions(&fail, std::fs::Permissions::from_mode(0o644)).unwrap();
    let r = nvsmi::query(&fail, nvsmi::TIMEOUT);
    assert!(
        matches!(&r, Err(QueryError::NotStarted(why)) if why.contains("ermission denied")),
        "{r:?}"
    );
    assert!(r
        .unwrap_err()
        .to_string()
        .starts_with("nvidia-smi could not be started ("));
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    std::fs::remove_dir_all(fail.parent().unwrap()).unwrap();
}
