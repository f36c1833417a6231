// SPDX-License-Identifier: GPL-2.0 OR MIT

//! NVIDIA driver versions and what each one offers a peer-memory client
//! (docs/abi.md 1.1 and 1.2).

use std::fmt;

/// A driver version such as 580.65.06 (the third part is 0 when absent).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct DriverVersion(pub u32, pub u32, pub u32);

impl DriverVersion {
    /// Parses `580.65.06` or `535.14`; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        let mut parts = s.trim().split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        let patch = match parts.next() {
            Some(p) => p.parse().ok()?,
            None => 0,
        };
        if parts.next().is_some() {
            return None;
        }
        Some(DriverVersion(major, minor, patch))
    }

    /// The version in `/proc/driver/nvidia/version`: the first version-shaped word of
    /// its `NVRM version:` line (`NVRM version: NVIDIA UNIX Open Kernel Module for
    /// x86_64  580.65.06  Release Build ...`).
    pub fn parse_nvrm(text: &str) -> Option<Self> {
        let line = text.lines().find(|l| l.starts_with("NVRM version:"))?;
        line.split_whitespace().find_map(Self::parse)
    }

    /// The oldest branch a Rust peer-memory client supports (the P2P structure
    /// versions it knows start at 515).
    pub const MIN_SUPPORTED: DriverVersion = DriverVersion(515, 0, 0);

    /// Whether peermem supports this driver at all.
    pub fn supported(self) -> bool {
        self >= Self::MIN_SUPPORTED
    }

    /// The page-table major version the driver hands out: 2 from 580, 1 before.
    pub fn page_table_major(self) -> u32 {
        if self.0 >= 580 {
            2
        } else {
            1
        }
    }

    /// Whether the driver exports the persistent pin pair: 535.14 and later, and the
    /// 525 back-port from 525.105.17 (before 530).
    pub fn has_persistent_api(self) -> bool {
        self >= DriverVersion(535, 14, 0)
            || (self >= DriverVersion(525, 105, 17) && self < DriverVersion(530, 0, 0))
    }
}

impl fmt::Display for DriverVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.2 == 0 {
            write!(f, "{}.{}", self.0, self.1)
        } else {
            // Driver versions print their patch level with two digits (580.65.06).
            write!(f, "{}.{}.{:02}", self.0, self.1, self.2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        assert_eq!(
            DriverVersion::parse("580.65.06"),
            Some(DriverVersion(580, 65, 6))
        );
        assert_eq!(
            DriverVersion::parse("535.14"),
            Some(DriverVersion(535, 14, 0))
        );
        assert_eq!(DriverVersion::parse("x86_64"), None);
        assert_eq!(DriverVersion::parse("1.2.3.4"), None);
        assert_eq!(DriverVersion(580, 65, 6).to_string(), "580.65.06");
    }

    #[test]
    fn parses_the_nvrm_line() {
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build  (dvs-builder@U16)  Sun Jul 27 06:54:38 UTC 2025\nGCC version:  gcc version 12.2.0\n";
        assert_eq!(
            DriverVersion::parse_nvrm(open),
            Some(DriverVersion(580, 65, 6))
        );
        let prop = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n";
        assert_eq!(
            DriverVersion::parse_nvrm(prop),
            Some(DriverVersion(535, 104, 5))
        );
        assert_eq!(DriverVersion::parse_nvrm("garbage"), None);
    }

    #[test]
    fn persistent_api_boundaries() {
        let has = |s| DriverVersion::parse(s).unwrap().has_persistent_api();
        assert!(!has("535.13.99"));
        assert!(has("535.14"));
        assert!(has("535.54.03"));
        assert!(has("580.65.06"));
        assert!(!has("525.105.16"));
        assert!(has("525.105.17"));
        assert!(has("525.147.05"));
        assert!(!has("530.30.02"));
        assert!(!has("520.61.05"));
    }

    #[test]
    fn page_table_major_and_support() {
        assert_eq!(DriverVersion(575, 64, 5).page_table_major(), 1);
        assert_eq!(DriverVersion(580, 0, 0).page_table_major(), 2);
        assert!(DriverVersion(515, 43, 4).supported());
        assert!(!DriverVersion(510, 108, 3).supported());
    }
}
