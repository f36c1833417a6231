#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR MIT
#
# packaging/test-manifests.sh TOOL MODULE: the Kubernetes manifests of deploy/kubernetes
# (docs/fleet.md):
#   - every resource the kustomization lists exists, and every manifest beside it is
#     listed;
#   - each validates, strictly (no unknown field), against the schemas of two current
#     Kubernetes minor releases with kubernetes-validate (PyPI, pinned below; installed
#     once into a virtual environment under $PEERMEM_CACHE/venv);
#   - the DaemonSet's container command, its probes and its preStop hook parse as the
#     peermem tool TOOL takes them (the ConfigMap's values put in for $(VAR)), and do
#     what they say on a node without the module: run refuses for the missing module
#     file (exit 3, not a usage error), probe is not ready (exit 1), stop has nothing to
#     unload (exit 0);
#   - the ConfigMap's keys are the parameters of the module file MODULE.
# Last line: "N passed, N failed".
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/packaging/check-lib.sh"
. "$ROOT/scripts/kernel-env"
tool=${1:?usage: test-manifests.sh TOOL MODULE}
module=${2:?usage: test-manifests.sh TOOL MODULE}
D=$ROOT/deploy/kubernetes
KV_VERSION=1.37.0
K8S_RELEASES=(1.36.0 1.37.0)

venv=$PEERMEM_CACHE/venv/kubernetes-validate-$KV_VERSION
if [ ! -x "$venv/bin/kubernetes-validate" ]; then
	rm -rf "$venv"
	python3 -m venv "$venv" && "$venv/bin/pip" install -q "kubernetes-validate==$KV_VERSION" ||
		{ bad "prerequisites: pip install kubernetes-validate==$KV_VERSION into $venv"; finish; }
fi
py=$venv/bin/python3

# The kustomization's resources, one per line.
resources=$("$py" -c 'import sys, yaml; print("\n".join(yaml.safe_load(open(sys.argv[1]))["resources"]))' "$D/kustomization.yaml")
for r in $resources; do
	check "kustomization: resource $r exists" test -f "$D/$r"
done
for f in "$D"/*.yaml; do
	n=$(basename "$f")
	[ "$n" = kustomization.yaml ] && continue
	check "kustomization: lists $n" grep -qx "$n" <<<"$resources"
done
for k in "${K8S_RELEASES[@]}"; do
	for r in $resources; do
		out=$("$venv/bin/kubernetes-validate" --strict --no-warn -k "$k" "$D/$r" 2>&1)
		rc=$?
		if [ "$rc" = 0 ] && ! grep -q ERROR <<<"$out"; then ok "Kubernetes ${k%.*}: $r is valid (strict)"
		else bad "Kubernetes ${k%.*}: $r is valid (strict)"; sed 's/^/     /' <<<"$out" | head -n 10; fi
	done
done

# The commands of the DaemonSet's container, $(VAR) replaced by the ConfigMap's values
# as the kubelet replaces them: one command per line (kind, then argv), its words
# separated by the ASCII unit separator.
commands=$("$py" - "$D/daemonset.yaml" "$D/configmap.yaml" <<'PY'
import re, sys, yaml
ds, cm = (yaml.safe_load(open(p)) for p in sys.argv[1:3])
c = ds["spec"]["template"]["spec"]["containers"][0]
env = {e["name"]: cm["data"][e["valueFrom"]["configMapKeyRef"]["key"]] for e in c.get("env", [])}
sub = lambda a: re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], a)
for kind, argv in [("run", c["command"] + c["args"]),
                   ("readiness", c["readinessProbe"]["exec"]["command"]),
                   ("liveness", c["livenessProbe"]["exec"]["command"]),
                   ("preStop", c["lifecycle"]["preStop"]["exec"]["command"])]:
    print("\x1f".join([kind] + [sub(a) for a in argv]))
PY
)
empty=$(mktemp -d)
trap 'rm -rf "$empty"' EXIT
while IFS= read -r line; do
	IFS=$'\x1f' read -r -a argv <<<"$line"
	kind=${argv[0]} prog=${argv[1]}
	expect "DaemonSet $kind: runs the peermem tool" "$prog" peermem
	out=$("$tool" "${argv[@]:2}" --root "$empty" 2>&1)
	rc=$?
	case $kind in
	run)
		expect "DaemonSet run: parses, and refuses a missing module file (exit 3)" "$rc" 3
		has "DaemonSet run: says why" "$out" "refusing to start: /opt/peermem/nvidia-peermem.ko:" ;;
	readiness | liveness)
		expect "DaemonSet $kind probe: not ready without the module (exit 1)" "$rc" 1
		has "DaemonSet $kind probe: names the drop-in" "$out" "not ready: nvidia_peermem is not loaded" ;;
	preStop)
		expect "DaemonSet preStop: nothing to unload (exit 0)" "$rc" 0 ;;
	esac
done <<<"$commands"

keys=$("$py" -c 'import sys, yaml; print(" ".join(sorted(yaml.safe_load(open(sys.argv[1]))["data"])))' "$D/configmap.yaml")
parms=$(modinfo -F parm "$module" | cut -d: -f1 | sort | tr '\n' ' ')
expect "ConfigMap: its keys are the module's parameters" "$keys " "$parms"
finish
