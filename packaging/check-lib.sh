# SPDX-License-Identifier: GPL-2.0 OR MIT
# Sourced by packaging/test-*.sh: counters and the ok / bad / check helpers. Each
# script ends with: echo "$passed passed, $failed failed".
# shellcheck shell=bash
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }
check() { # check NAME COMMAND...
	local name=$1; shift
	if "$@" >/dev/null 2>&1; then ok "$name"; else bad "$name"; fi
}
