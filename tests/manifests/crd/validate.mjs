// SPDX-License-Identifier: GPL-2.0 OR MIT
//
// node validate.mjs DOCS.json: every PodMonitor of DOCS (a JSON list of Kubernetes
// resources, what `kubectl apply -k` applies) validated against the Prometheus
// Operator's schema of monitoring.coreos.com/v1 PodMonitor, as strictly as
// kubernetes-validate --strict checks the built-in kinds (packaging/test-manifests.sh):
//   - types, formats, enums and required fields: the schema's own validator, as the
//     npm package @kubernetes-models/prometheus-operator (pinned in package-lock.json)
//     compiles it from the operator's CRD;
//   - no unknown field at any depth: the schema's properties, read from the same
//     package's type declarations (the CRD's schema sets no additionalProperties, so
//     its validator alone lets a misspelt field through; an API server with strict
//     field validation refuses it).
// Prints one line per PodMonitor ("valid NAME" or "invalid NAME: why"); exits 1 when one
// is invalid, 2 when there is none.
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { PodMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor";

const modules = join(dirname(fileURLToPath(import.meta.url)), "node_modules", "@kubernetes-models");

// Every interface of the packages' declarations: name -> { properties: name -> type,
// extends: [names], open: an index signature (any key) }; with the aliases of
// `export type { A as B }`.
const interfaces = new Map();
const aliases = new Map();
function read(dir) {
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) read(p);
    else if (p.endsWith(".d.ts")) parse(readFileSync(p, "utf8"));
  }
}
function parse(text) {
  const body = text.replace(/\/\*[\s\S]*?\*\//g, "");
  for (const m of body.matchAll(/export interface (\w+)(?: extends ([^{]+))? \{([\s\S]*?)\n\}/g)) {
    const properties = new Map();
    for (const p of m[3].matchAll(/^ {4}"([^"]+)"\??: ([^;]+);/gm)) properties.set(p[1], p[2]);
    const open = /^ {4}\[key: string\]/m.test(m[3]);
    const ext = (m[2] || "").split(",").map((s) => s.trim().replace(/<.*$/, "")).filter(Boolean);
    interfaces.set(m[1], { properties, extends: ext, open });
  }
  for (const m of body.matchAll(/export type \{([^}]+)\}/g)) {
    for (const a of m[1].split(",")) {
      const [from, to] = a.split(" as ").map((s) => s.trim());
      if (to) aliases.set(to, from);
    }
  }
}
read(modules);
// TypeMeta, which every kind extends: apiVersion and kind.
interfaces.set("TypeMeta", { properties: new Map([["apiVersion", "string"], ["kind", "string"]]), extends: [], open: false });

const resolve = (n) => (interfaces.has(n) ? n : aliases.get(n));
function props(name) {
  const i = interfaces.get(name);
  const all = new Map(i.properties);
  let open = i.open;
  for (const e of i.extends) {
    const r = resolve(e);
    if (!r) continue;
    const [p, o] = props(r);
    for (const [k, v] of p) all.set(k, v);
    open ||= o;
  }
  return [all, open];
}
// The unknown fields of VALUE, of the type written TYPE, at PATH.
function unknown(value, type, path, out) {
  if (value === null || typeof value !== "object") return;
  const names = [...type.matchAll(/\bI\w+/g)].map((m) => resolve(m[0])).filter(Boolean);
  if (Array.isArray(value)) {
    value.forEach((v, i) => unknown(v, type, `${path}[${i}]`, out));
    return;
  }
  if (names.length !== 1 || /\[key: string\]/.test(type)) return; // a map, or a union: open
  const [p, open] = props(names[0]);
  if (open) return;
  for (const [k, v] of Object.entries(value)) {
    if (!p.has(k)) out.push(`${path}.${k}: unknown field`);
    else unknown(v, p.get(k), `${path}.${k}`, out);
  }
}

const docs = JSON.parse(readFileSync(process.argv[2], "utf8")).filter((d) => d && d.kind === "PodMonitor");
if (docs.length === 0) {
  console.log("no PodMonitor");
  process.exit(2);
}
let bad = 0;
for (const d of docs) {
  const why = [];
  try {
    new PodMonitor(d).validate();
  } catch (e) {
    why.push(e.message);
  }
  unknown(d, "IPodMonitor", "", why);
  const name = d.metadata?.name ?? "(no name)";
  if (why.length) {
    bad++;
    console.log(`invalid ${name}: ${why.join("; ")}`);
  } else console.log(`valid ${name}`);
}
process.exit(bad ? 1 : 0);
