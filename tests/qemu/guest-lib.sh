# Helpers for the plans the guest runs (tests/qemu/plans/*.sh), sourced by init.
# A failure is printed as a PEERMEM-FAIL line, a scenario assertion as a
# PEERMEM-CHECK line; scripts/ktap-summary reads both.

# load MODULE [PARAM=VALUE]...: insmod /peermem/MODULE.ko; a failure is a test failure.
load() {
    m=$1; shift
    if ! out=$(insmod "/peermem/$m.ko" "$@" 2>&1); then
        echo "PEERMEM-FAIL insmod $m: $out"
        return 1
    fi
}

# unload MODULE: rmmod; a failure is a test failure.
unload() {
    if ! out=$(rmmod "$1" 2>&1); then
        echo "PEERMEM-FAIL rmmod $1: $out"
        return 1
    fi
}

# check SUITE NAME COMMAND...: runs COMMAND, records ok / not ok for NAME in SUITE.
check() {
    suite=$1 name=$2; shift 2
    if out=$("$@" 2>&1); then
        echo "PEERMEM-CHECK $suite ok $name"
    else
        echo "PEERMEM-CHECK $suite not ok $name"
        printf '%s\n' "$out" | sed 's/^/    # /'
    fi
}

# A command's output must contain TEXT: expect_output TEXT COMMAND...
expect_output() {
    text=$1; shift
    out=$("$@" 2>&1) || true
    case "$out" in
        *"$text"*) return 0 ;;
        *) echo "expected '$text' in output of '$*', got: $out"; return 1 ;;
    esac
}

# A command must fail: expect_fail COMMAND...
expect_fail() {
    if "$@" >/dev/null 2>&1; then echo "'$*' succeeded, expected a failure"; return 1; fi
}
