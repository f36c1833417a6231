//! Host tests of the module's pure logic.
//!
//! The files included here are the module's own sources (`src/*.rs`) that depend on
//! `core` only; the module compiles the very same text. The KUnit suites check fixed
//! cases inside the kernel; these tests sweep wide input spaces on the host.

#[path = "../../../src/range.rs"]
#[expect(dead_code, reason = "the kernel uses helpers these tests do not")]
mod range;

#[cfg(test)]
mod range_props;
