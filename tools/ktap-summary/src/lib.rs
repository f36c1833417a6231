//! Reads the serial console log of a peermem test VM and decides whether the run passed.
//!
//! A run passes only when all of these hold:
//! - the log is complete: the guest's init printed `PEERMEM-RUN-END`;
//! - every suite in the manifest ran exactly as often as the manifest says, with the
//!   case count it says, and finished; no suite ran that the manifest does not know;
//! - no case failed (KUnit `not ok`, or a scenario's `PEERMEM-CHECK ... not ok`);
//! - the guest reported no failure of its own (`PEERMEM-FAIL`: a module that did not
//!   load or unload, a scenario that died);
//! - the kernel printed no report: oops, BUG, WARN, KASAN, UBSAN, lockdep, kmemleak,
//!   panic, stall. Such a report fails the run even when every KUnit case says ok.
//!
//! Absence is never success: a module that failed to load, a suite compiled out or a VM
//! that hung each leave a manifest entry unmatched, which is a failure.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::fmt;

/// What a test case ended as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// `ok`.
    Pass,
    /// `not ok`.
    Fail,
    /// `ok ... # SKIP`.
    Skip,
}

/// One test case's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    /// The case name.
    pub name: String,
    /// Its outcome.
    pub outcome: Outcome,
}

/// One run of a suite: a KUnit suite, or the checks of a scenario script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuiteRun {
    /// The suite name.
    pub name: String,
    /// Its cases, in order.
    pub cases: Vec<Case>,
    /// The case count the suite announced (KTAP plan `1..N`), if any.
    pub planned: Option<usize>,
    /// Whether the suite's own result line was seen (KUnit) or it is a scenario.
    pub finished: bool,
    /// The 1-based log line where it started.
    pub line: usize,
}

/// A kernel report, a guest failure or a structural problem of the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// What kind of problem.
    pub kind: ProblemKind,
    /// A human-readable detail.
    pub detail: String,
}

/// The kinds of problems that fail a run besides failed cases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProblemKind {
    /// The kernel printed an oops, BUG, WARN, KASAN, lockdep or similar report.
    KernelReport,
    /// The guest's init reported a failure (`PEERMEM-FAIL`).
    GuestFailure,
    /// The log ends before the guest's end marker (crash, hang, timeout).
    Truncated,
    /// A suite of the manifest is absent or ran a different number of times.
    MissingSuite,
    /// A suite ran that the manifest does not list.
    UnknownSuite,
    /// A suite ran a different number of cases than the manifest says.
    CaseCount,
    /// A suite started but never printed its result.
    Unfinished,
}

impl fmt::Display for ProblemKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProblemKind::KernelReport => "kernel report",
            ProblemKind::GuestFailure => "guest failure",
            ProblemKind::Truncated => "truncated log",
            ProblemKind::MissingSuite => "missing suite",
            ProblemKind::UnknownSuite => "unknown suite",
            ProblemKind::CaseCount => "case count",
            ProblemKind::Unfinished => "unfinished suite",
        })
    }
}

/// Everything read from one console log.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Log {
    /// Suite runs in the order they started.
    pub suites: Vec<SuiteRun>,
    /// Kernel reports and guest failures, in log order.
    pub problems: Vec<Problem>,
    /// Whether the end marker was seen.
    pub complete: bool,
}

/// The marker the guest's init prints last, right before it reboots.
pub const END_MARKER: &str = "PEERMEM-RUN-END";
/// Prefix of a guest-side failure line.
pub const FAIL_MARKER: &str = "PEERMEM-FAIL";
/// Prefix of a scenario check line: `PEERMEM-CHECK <suite> ok|not ok <name>`.
pub const CHECK_MARKER: &str = "PEERMEM-CHECK";

/// Text that, anywhere in a console line, means the kernel reported a problem.
const REPORT_PATTERNS: &[&str] = &[
    "------------[ cut here ]------------",
    "WARNING:",
    "BUG:",
    "kernel BUG at",
    "Oops:",
    "Oops#",
    "KASAN:",
    "UBSAN:",
    "KFENCE:",
    "possible circular locking dependency",
    "possible recursive locking",
    "inconsistent lock state",
    "lock held when returning to user space",
    "suspicious RCU usage",
    "DEBUG_LOCKS_WARN_ON",
    "Kernel panic",
    "general protection fault",
    "Unable to handle kernel",
    "unreferenced object 0x",
    "refcount_t:",
    "list_add corruption",
    "list_del corruption",
    "sleeping function called from invalid context",
    "scheduling while atomic",
    "detected stalls on CPU",
    "soft lockup",
    "blocked for more than",
    "ODEBUG:",
];

/// Returns the line without the printk timestamp (`[    1.234567] `).
fn strip_timestamp(line: &str) -> &str {
    let l = line.trim_end_matches(['\r', '\n']);
    if let Some(rest) = l.strip_prefix('[') {
        if let Some(close) = rest.find("] ") {
            let stamp = rest[..close].trim();
            if !stamp.is_empty() && stamp.chars().all(|c| c.is_ascii_digit() || c == '.') {
                return &rest[close + 2..];
            }
        }
    }
    l
}

/// The console lines of `text` with each guest marker line made whole again, numbered
/// from 1. The guest's shell and the kernel's printk share the serial console, so a
/// kernel record can land inside a marker line the guest is writing:
/// `PEERMEM-CHECK pe[   33.700065] fake-nvidia: ...` then `ermem_scenarios ok name` on
/// the next line. Such a line is split into the kernel's record (a line of its own) and
/// the marker's beginning, which is put back before the next line. Only text that
/// begins a marker (or is the beginning of one) is joined: other text before a
/// timestamp (a check's detail quoting dmesg, say) is left as it is.
fn console_lines(text: &str) -> Vec<(usize, String)> {
    const MARKERS: [&str; 4] = [END_MARKER, FAIL_MARKER, CHECK_MARKER, "PEERMEM-RUN-BEGIN"];
    let mut out = Vec::new();
    let mut carry = String::new();
    for (idx, raw) in text.lines().enumerate() {
        let mut line = std::mem::take(&mut carry);
        line.push_str(raw.trim_end_matches(['\r', '\n']));
        let spliced = line.match_indices('[').find_map(|(at, _)| {
            let head = &line[..at];
            let marker = !head.is_empty()
                && MARKERS
                    .iter()
                    .any(|m| head.starts_with(m) || m.starts_with(head));
            (marker && strip_timestamp(&line[at..]) != &line[at..]).then_some(at)
        });
        match spliced {
            Some(at) => {
                carry = line[..at].to_owned();
                out.push((idx + 1, line[at..].to_owned()));
            }
            None => out.push((idx + 1, line)),
        }
    }
    if !carry.is_empty() {
        out.push((text.lines().count(), carry));
    }
    out
}

/// A KTAP result line: indentation, outcome, name.
fn parse_result(line: &str) -> Option<(usize, Outcome, String)> {
    let indent = line.len() - line.trim_start().len();
    let body = line.trim_start();
    let (ok, rest) = if let Some(r) = body.strip_prefix("not ok ") {
        (false, r)
    } else if let Some(r) = body.strip_prefix("ok ") {
        (true, r)
    } else {
        return None;
    };
    let (num, rest) = rest.split_once(' ').unwrap_or((rest, ""));
    if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let (name, directive) = match rest.split_once(" # ") {
        Some((n, d)) => (n, Some(d)),
        None => (rest, None),
    };
    let skip = directive.is_some_and(|d| d.trim_start().to_ascii_uppercase().starts_with("SKIP"));
    let outcome = match (ok, skip) {
        (false, _) => Outcome::Fail,
        (true, true) => Outcome::Skip,
        (true, false) => Outcome::Pass,
    };
    Some((indent, outcome, name.trim().to_string()))
}

/// Reads a console log.
pub fn parse(text: &str) -> Log {
    let mut log = Log::default();
    // The open KUnit suite: index into `log.suites` and its indentation.
    let mut open: Option<(usize, usize)> = None;
    let mut checks: BTreeMap<String, usize> = BTreeMap::new();

    // Line number of the last "cut here" banner: the WARNING/BUG line right after it
    // belongs to the same report.
    let mut cut_here: Option<usize> = None;

    for (lineno, raw) in console_lines(text) {
        let line = strip_timestamp(&raw);
        let body = line.trim_start();
        let indent = line.len() - body.len();

        if body.starts_with(END_MARKER) {
            log.complete = true;
            continue;
        }
        if let Some(rest) = body.strip_prefix(FAIL_MARKER) {
            log.problems.push(Problem {
                kind: ProblemKind::GuestFailure,
                detail: format!("line {lineno}: {}", rest.trim()),
            });
            continue;
        }
        if let Some(rest) = body.strip_prefix(CHECK_MARKER) {
            let rest = rest.trim();
            let (suite, rest) = rest.split_once(' ').unwrap_or((rest, ""));
            let (outcome, name) = if let Some(n) = rest.strip_prefix("not ok") {
                (Outcome::Fail, n)
            } else if let Some(n) = rest.strip_prefix("ok") {
                (Outcome::Pass, n)
            } else {
                log.problems.push(Problem {
                    kind: ProblemKind::GuestFailure,
                    detail: format!("line {lineno}: malformed check line: {body}"),
                });
                continue;
            };
            let i = *checks.entry(suite.to_string()).or_insert_with(|| {
                log.suites.push(SuiteRun {
                    name: suite.to_string(),
                    cases: Vec::new(),
                    planned: None,
                    finished: true,
                    line: lineno,
                });
                log.suites.len() - 1
            });
            log.suites[i].cases.push(Case {
                name: name.trim().to_string(),
                outcome,
            });
            continue;
        }
        if REPORT_PATTERNS.iter().any(|p| line.contains(p)) {
            let banner = line.contains("[ cut here ]");
            if cut_here.is_some_and(|l| l + 1 == lineno) {
                // The body of the report announced on the previous line: name it.
                if let Some(p) = log.problems.last_mut() {
                    p.detail = format!("line {lineno}: {body}");
                }
            } else {
                log.problems.push(Problem {
                    kind: ProblemKind::KernelReport,
                    detail: format!("line {lineno}: {body}"),
                });
            }
            cut_here = banner.then_some(lineno);
            continue;
        }

        if let Some(name) = body.strip_prefix("# Subtest:") {
            match open {
                // A nested subtest (parameterised case): part of the open suite.
                Some((_, level)) if indent > level => {}
                _ => {
                    log.suites.push(SuiteRun {
                        name: name.trim().to_string(),
                        cases: Vec::new(),
                        planned: None,
                        finished: false,
                        line: lineno,
                    });
                    open = Some((log.suites.len() - 1, indent));
                }
            }
            continue;
        }
        if let Some((i, level)) = open {
            if indent == level {
                if let Some(plan) = body.strip_prefix("1..") {
                    if let Ok(n) = plan.trim().parse::<usize>() {
                        log.suites[i].planned = Some(n);
                    }
                    continue;
                }
            }
            if let Some((ind, outcome, name)) = parse_result(line) {
                if ind == level {
                    log.suites[i].cases.push(Case { name, outcome });
                } else if ind < level {
                    log.suites[i].finished = true;
                    open = None;
                }
            }
        }
    }
    log
}

/// What the manifest expects of one suite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    /// The number of cases per run.
    pub cases: usize,
    /// How many times the suite runs in the log.
    pub runs: usize,
}

/// Reads a manifest: one suite per line, `name cases [runs]`; `#` starts a comment.
pub fn parse_manifest(text: &str) -> Result<BTreeMap<String, Expected>, String> {
    let mut m = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        let num = |s: &str| {
            s.parse::<usize>()
                .map_err(|_| format!("manifest line {}: '{s}' is not a number", i + 1))
        };
        let exp = match f.as_slice() {
            [_, c] => Expected {
                cases: num(c)?,
                runs: 1,
            },
            [_, c, r] => Expected {
                cases: num(c)?,
                runs: num(r)?,
            },
            _ => {
                return Err(format!(
                    "manifest line {}: expected 'suite cases [runs]'",
                    i + 1
                ))
            }
        };
        if m.insert(f[0].to_string(), exp).is_some() {
            return Err(format!(
                "manifest line {}: suite {} listed twice",
                i + 1,
                f[0]
            ));
        }
    }
    Ok(m)
}

/// Adds a second manifest to `base`: its suites run in addition to the base's (a plan
/// made of several plans). A suite in both must have the same case count; the runs
/// add up.
pub fn merge_manifest(
    base: &mut BTreeMap<String, Expected>,
    more: BTreeMap<String, Expected>,
) -> Result<(), String> {
    for (name, exp) in more {
        match base.get_mut(&name) {
            Some(b) if b.cases != exp.cases => {
                return Err(format!(
                    "suite {name}: {} cases in one manifest, {} in another",
                    b.cases, exp.cases
                ))
            }
            Some(b) => b.runs += exp.runs,
            None => {
                base.insert(name, exp);
            }
        }
    }
    Ok(())
}

/// The verdict on one log against a manifest.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    /// One line per suite run, for the report.
    pub lines: Vec<String>,
    /// Every problem, including failed cases' suites.
    pub problems: Vec<Problem>,
    /// Cases passed.
    pub passed: usize,
    /// Cases failed plus problems that are not failed cases.
    pub failed: usize,
    /// Cases skipped.
    pub skipped: usize,
}

impl Summary {
    /// Whether the run passed.
    pub fn ok(&self) -> bool {
        self.failed == 0
    }
}

impl Log {
    /// Takes the kernel reports whose line contains `text` out of the problems: a run
    /// made to show a known report (the callback-mode lock hazard) expects it. Returns
    /// how many there were; the caller fails the run when there was none.
    pub fn expect_reports(&mut self, text: &str) -> usize {
        let before = self.problems.len();
        self.problems
            .retain(|p| !(p.kind == ProblemKind::KernelReport && p.detail.contains(text)));
        before - self.problems.len()
    }
}

/// Checks a parsed log against the manifest.
pub fn summarize(log: &Log, manifest: &BTreeMap<String, Expected>) -> Summary {
    let mut s = Summary::default();
    let mut runs: BTreeMap<&str, usize> = BTreeMap::new();

    for run in &log.suites {
        *runs.entry(run.name.as_str()).or_default() += 1;
        let pass = run
            .cases
            .iter()
            .filter(|c| c.outcome == Outcome::Pass)
            .count();
        let skip = run
            .cases
            .iter()
            .filter(|c| c.outcome == Outcome::Skip)
            .count();
        let failed: Vec<&str> = run
            .cases
            .iter()
            .filter(|c| c.outcome == Outcome::Fail)
            .map(|c| c.name.as_str())
            .collect();
        s.passed += pass;
        s.skipped += skip;
        s.failed += failed.len();
        let mut line = format!(
            "{:<7} {:<40} {}/{}",
            if failed.is_empty() && run.finished {
                "ok"
            } else {
                "not ok"
            },
            run.name,
            pass,
            run.cases.len()
        );
        if skip > 0 {
            line.push_str(&format!(" ({skip} skipped)"));
        }
        if !failed.is_empty() {
            line.push_str(&format!(" failed: {}", failed.join(", ")));
        }
        s.lines.push(line);

        if !run.finished {
            s.problems.push(Problem {
                kind: ProblemKind::Unfinished,
                detail: format!("{} (started at line {}) never finished", run.name, run.line),
            });
        }
        match manifest.get(&run.name) {
            None => s.problems.push(Problem {
                kind: ProblemKind::UnknownSuite,
                detail: format!("{} is not in the manifest", run.name),
            }),
            Some(exp) => {
                let n = run.planned.unwrap_or(run.cases.len());
                if run.finished && (run.cases.len() != exp.cases || n != exp.cases) {
                    s.problems.push(Problem {
                        kind: ProblemKind::CaseCount,
                        detail: format!(
                            "{} ran {} cases (plan {}), the manifest expects {}",
                            run.name,
                            run.cases.len(),
                            n,
                            exp.cases
                        ),
                    });
                }
            }
        }
    }
    for (name, exp) in manifest {
        let got = runs.get(name.as_str()).copied().unwrap_or(0);
        if got != exp.runs {
            s.problems.push(Problem {
                kind: ProblemKind::MissingSuite,
                detail: format!(
                    "{name} ran {got} time(s), the manifest expects {}",
                    exp.runs
                ),
            });
        }
    }
    if !log.complete {
        s.problems.push(Problem {
            kind: ProblemKind::Truncated,
            detail: format!("no {END_MARKER} marker: the VM crashed, hung or timed out"),
        });
    }
    s.problems.extend(log.problems.iter().cloned());
    // Each problem that is not a failed case counts as one failure.
    s.failed += s.problems.len();
    s
}
