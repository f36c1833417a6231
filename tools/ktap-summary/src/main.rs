//! `ktap-summary --manifest FILE [--manifest FILE]... [--label WORD]
//! [--expect-report TEXT] LOG`: prints one line per suite run (several manifests add
//! up: a plan made of several plans), every problem, and a last line
//! `[WORD: ]N passed, N failed[, N skipped]`. Exits 0 only when the run passed (see
//! the library's documentation for what that means). With `--expect-report`, kernel
//! reports whose line contains TEXT are expected rather than failures, and the run
//! fails if there is none.

use std::process::ExitCode;

fn usage() -> ExitCode {
    eprintln!(
        "usage: ktap-summary --manifest FILE [--manifest FILE]... [--label WORD] [--expect-report TEXT] LOG"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (mut manifests, mut label, mut log, mut expect) = (Vec::new(), None, None, None);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--manifest" => match args.next() {
                Some(m) => manifests.push(m),
                None => return usage(),
            },
            "--label" => label = args.next(),
            "--expect-report" => match args.next() {
                Some(t) => expect = Some(t),
                None => return usage(),
            },
            _ if log.is_none() && !a.starts_with("--") => log = Some(a),
            _ => return usage(),
        }
    }
    let Some(log) = log else {
        return usage();
    };
    if manifests.is_empty() {
        return usage();
    }
    let read = |p: &str| {
        std::fs::read(p)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .map_err(|e| eprintln!("ktap-summary: {p}: {e}"))
    };
    let Ok(ltext) = read(&log) else {
        return ExitCode::from(2);
    };
    let mut manifest = std::collections::BTreeMap::new();
    for path in &manifests {
        let Ok(mtext) = read(path) else {
            return ExitCode::from(2);
        };
        let merged = ktap_summary::parse_manifest(&mtext)
            .and_then(|m| ktap_summary::merge_manifest(&mut manifest, m));
        if let Err(e) = merged {
            eprintln!("ktap-summary: {path}: {e}");
            return ExitCode::from(2);
        }
    }
    let mut parsed = ktap_summary::parse(&ltext);
    let mut missing_report = false;
    if let Some(text) = &expect {
        let n = parsed.expect_reports(text);
        println!("expected kernel report '{text}': {n} seen");
        missing_report = n == 0;
    }
    let mut s = ktap_summary::summarize(&parsed, &manifest);
    if missing_report {
        s.failed += 1;
        s.problems.push(ktap_summary::Problem {
            kind: ktap_summary::ProblemKind::KernelReport,
            detail: format!(
                "the expected report '{}' was not printed",
                expect.unwrap_or_default()
            ),
        });
    }
    for l in &s.lines {
        println!("{l}");
    }
    for p in &s.problems {
        println!("FAIL    {}: {}", p.kind, p.detail);
    }
    let prefix = label.map(|l| format!("{l}: ")).unwrap_or_default();
    let skipped = if s.skipped > 0 {
        format!(", {} skipped", s.skipped)
    } else {
        String::new()
    };
    println!("{prefix}{} passed, {} failed{skipped}", s.passed, s.failed);
    if s.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
