#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR MIT
#
# packaging/test-manifests.sh TOOL MODULE: the Kubernetes manifests of deploy/kubernetes
# (docs/fleet.md):
#   - every resource the kustomization lists exists, and every manifest beside it is
#     listed;
#   - what `kubectl apply -k` applies for the base and for the build-on-the-node overlay
#     (deploy/kubernetes/build-on-node; rendered by packaging/render-manifests)
#     validates, strictly (no unknown field), against the schemas of two current
#     Kubernetes minor releases with kubernetes-validate (PyPI; pinned in
#     packaging/manifests-python, installed once into a virtual environment);
#   - both kustomizations' image tags are this VERSION's;
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
K8S_RELEASES=(1.36.0 1.37.0)

bin=$("$ROOT/packaging/manifests-python") ||
	{ bad "prerequisites: the manifests' Python environment (packaging/manifests-python)"; finish; }
py=$bin/python3

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
# What `kubectl apply -k` applies, for the base and the build-on-the-node overlay
# (packaging/render-manifests), each resource validated.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for k in "${K8S_RELEASES[@]}"; do
	for dir in "$D" "$D/build-on-node"; do
		name=${dir#"$ROOT"/}
		if ! "$py" "$ROOT/packaging/render-manifests" "$dir" > "$work/rendered.yaml" 2>"$work/err"; then
			bad "$name renders (render-manifests)"; sed 's/^/     /' "$work/err"; continue
		fi
		out=$("$bin/kubernetes-validate" --strict --no-warn -k "$k" "$work/rendered.yaml" 2>&1)
		rc=$?
		if [ "$rc" = 0 ] && ! grep -q ERROR <<<"$out"; then ok "Kubernetes ${k%.*}: kubectl apply -k $name: every resource valid (strict)"
		else bad "Kubernetes ${k%.*}: kubectl apply -k $name: every resource valid (strict)"; sed 's/^/     /' <<<"$out" | head -n 10; fi
	done
done
# The images the kustomizations name are this version's.
VERSION=$(tr -d '[:space:]' < "$ROOT/VERSION")
expect "images: the base's tag is the version" \
	"$("$py" -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["images"][0]["newTag"])' "$D/kustomization.yaml")" "$VERSION"
expect "images: build-on-node's tag is the version's build image" \
	"$("$py" -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["images"][0]["newTag"])' "$D/build-on-node/kustomization.yaml")" "$VERSION-build-debian13"

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
                   ("startup", c["startupProbe"]["exec"]["command"]),
                   ("readiness", c["readinessProbe"]["exec"]["command"]),
                   ("liveness", c["livenessProbe"]["exec"]["command"]),
                   ("preStop", c["lifecycle"]["preStop"]["exec"]["command"])]:
    print("\x1f".join([kind] + [sub(a) for a in argv]))
PY
)
empty=$work/empty
mkdir -p "$empty"
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
	startup | readiness | liveness)
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
