//! The runner's own tests: canned console logs (tests/runner/logs) that must pass or
//! fail for the right reason. They prove that the summary cannot be fooled by a failing
//! assertion, a kernel report next to green KUnit results, or the absence of output.

use ktap_summary::{parse, parse_manifest, summarize, ProblemKind, Summary};

fn run(name: &str) -> Summary {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/runner");
    let manifest = std::fs::read_to_string(format!("{root}/manifest")).unwrap();
    let log = std::fs::read_to_string(format!("{root}/logs/{name}")).unwrap();
    summarize(&parse(&log), &parse_manifest(&manifest).unwrap())
}

fn kinds(s: &Summary) -> Vec<ProblemKind> {
    s.problems.iter().map(|p| p.kind).collect()
}

#[test]
fn a_clean_run_passes() {
    let s = run("pass.log");
    assert!(s.ok(), "{:?}", s.problems);
    assert_eq!((s.passed, s.failed, s.skipped), (18, 0, 0));
}

/// pass.log with two check lines cut by kernel records, as the shared serial console
/// showed it (`PEERMEM-CHECK pe[   33.700065] fake-nvidia: ...`, the rest of the check
/// on the next line): the same verdict and counts, the records no problem.
#[test]
fn a_check_line_cut_by_a_kernel_record_is_read_whole() {
    let s = run("spliced.log");
    assert!(s.ok(), "{:?}", s.problems);
    assert_eq!((s.passed, s.failed, s.skipped), (18, 0, 0));
    let log = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/runner/logs/spliced.log"
    ))
    .unwrap();
    let parsed = parse(&log);
    assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
    // Text that begins no marker before a timestamp (a detail quoting dmesg) is
    // left as it is: the line after it stays a check of its own.
    let quoted = log.replace(
        "PEERMEM-CHECK peermem_load ok version_file_dropin",
        "    # got [   12.5] dmesg line\nPEERMEM-CHECK peermem_load ok version_file_dropin",
    );
    let q = summarize(
        &parse(&quoted),
        &parse_manifest(
            &std::fs::read_to_string(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../tests/runner/manifest"
            ))
            .unwrap(),
        )
        .unwrap(),
    );
    assert!(q.ok(), "{:?}", q.problems);
    assert_eq!(q.passed, 18);
}

#[test]
fn a_failing_assertion_fails() {
    let s = run("kunit-failure.log");
    assert!(!s.ok());
    assert_eq!((s.passed, s.failed), (17, 1));
    assert!(s
        .lines
        .iter()
        .any(|l| l.contains("failed: overflow_is_refused")));
    assert!(s.problems.is_empty(), "{:?}", s.problems);
}

#[test]
fn a_warn_fails_although_kunit_is_green() {
    let s = run("warn.log");
    assert!(!s.ok());
    assert_eq!(s.passed, 18);
    assert_eq!(kinds(&s), vec![ProblemKind::KernelReport]);
    // The banner and the WARNING line are one report, named by its WARNING line.
    assert!(s.problems[0].detail.contains("WARNING: CPU: 1 PID: 61"));
}

#[test]
fn a_kasan_report_fails() {
    let s = run("kasan.log");
    assert!(!s.ok());
    assert_eq!(kinds(&s), vec![ProblemKind::KernelReport]);
    assert!(s.problems[0].detail.contains("KASAN: slab-use-after-free"));
}

#[test]
fn a_lockdep_splat_fails() {
    let s = run("lockdep.log");
    assert!(!s.ok());
    assert_eq!(kinds(&s), vec![ProblemKind::KernelReport]);
    assert!(s.problems[0].detail.contains("circular locking dependency"));
}

#[test]
fn an_expected_report_passes_and_its_absence_fails() {
    // The hazard run expects the lockdep report it provokes, and nothing else.
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/runner");
    let manifest =
        parse_manifest(&std::fs::read_to_string(format!("{root}/manifest")).unwrap()).unwrap();
    let read = |name: &str| std::fs::read_to_string(format!("{root}/logs/{name}")).unwrap();
    let mut log = parse(&read("lockdep.log"));
    assert_eq!(
        log.expect_reports("possible circular locking dependency"),
        1
    );
    assert!(summarize(&log, &manifest).ok());
    // Another report is still a failure.
    let mut log = parse(&read("kasan.log"));
    assert_eq!(
        log.expect_reports("possible circular locking dependency"),
        0
    );
    assert!(!summarize(&log, &manifest).ok());
    // A clean log has none to expect.
    let mut log = parse(&read("pass.log"));
    assert_eq!(
        log.expect_reports("possible circular locking dependency"),
        0
    );
}

#[test]
fn a_truncated_log_fails() {
    let s = run("truncated.log");
    assert!(!s.ok());
    let k = kinds(&s);
    assert!(k.contains(&ProblemKind::Truncated), "{k:?}");
    assert!(k.contains(&ProblemKind::Unfinished), "{k:?}");
    // The scenario checks after the cut never ran, so that suite is short too.
    assert!(k.contains(&ProblemKind::CaseCount), "{k:?}");
}

#[test]
fn a_missing_suite_fails_without_any_error_line() {
    let s = run("missing-suite.log");
    assert!(!s.ok());
    assert_eq!(kinds(&s), vec![ProblemKind::MissingSuite]);
    assert!(s.problems[0].detail.contains("peermem_range ran 1 time(s)"));
}

#[test]
fn a_failed_insmod_fails() {
    let s = run("insmod-failure.log");
    assert!(!s.ok());
    let k = kinds(&s);
    assert!(k.contains(&ProblemKind::MissingSuite), "{k:?}");
    assert!(k.contains(&ProblemKind::GuestFailure), "{k:?}");
    assert!(s
        .lines
        .iter()
        .any(|l| l.contains("failed: version_file_dropin")));
}

#[test]
fn a_different_case_count_fails() {
    let s = run("case-count.log");
    assert!(!s.ok());
    assert_eq!(kinds(&s), vec![ProblemKind::CaseCount]);
}

#[test]
fn an_unlisted_suite_fails() {
    let s = run("unknown-suite.log");
    assert!(!s.ok());
    assert_eq!(kinds(&s), vec![ProblemKind::UnknownSuite]);
}

#[test]
fn an_oops_fails() {
    let s = run("oops.log");
    assert!(!s.ok());
    let k = kinds(&s);
    assert!(k.contains(&ProblemKind::KernelReport), "{k:?}");
    assert!(k.contains(&ProblemKind::Truncated), "{k:?}");
    assert!(k.contains(&ProblemKind::MissingSuite), "{k:?}");
}

#[test]
fn a_failed_scenario_check_fails() {
    let s = run("scenario-failure.log");
    assert!(!s.ok());
    assert_eq!((s.passed, s.failed), (17, 1));
}

#[test]
fn the_manifest_is_strict() {
    assert!(parse_manifest("a 1\na 2\n").is_err());
    assert!(parse_manifest("a x\n").is_err());
    assert!(parse_manifest("a\n").is_err());
    let m = parse_manifest("# c\n a 3 2 # note\n").unwrap();
    assert_eq!((m["a"].cases, m["a"].runs), (3, 2));
}

#[test]
fn manifests_add_up() {
    let mut m = parse_manifest("a 3\nb 2 2\n").unwrap();
    ktap_summary::merge_manifest(&mut m, parse_manifest("b 2\nc 1\n").unwrap()).unwrap();
    assert_eq!((m["a"].runs, m["b"].runs, m["c"].runs), (1, 3, 1));
    // The same suite with another case count is an error, not a sum.
    assert!(ktap_summary::merge_manifest(&mut m, parse_manifest("a 4\n").unwrap()).is_err());
}
