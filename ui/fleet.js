// The page of a daemon serving a fleet: a row per cluster from GET api/v1/fleet (the
// words of `driftless status` with several clusters), read again every few seconds, each
// row leading to that cluster's own page at clusters/NAME/. Text only, never markup: a
// cluster's message is the apiserver's words.
"use strict";

const $ = (id) => document.getElementById(id);
const EVERY_MS = 3000;

const cell = (row, text, tag = "td") => {
  const node = document.createElement(tag);
  if (tag === "th") node.scope = "row";
  if (text instanceof Node) node.append(text);
  else node.textContent = text;
  row.append(node);
  return node;
};

const badge = (text, kind) => {
  const node = document.createElement("span");
  node.className = `badge ${kind}`;
  node.textContent = text;
  return node;
};

// Trouble first: not reached, then not converged, then by name.
const rank = (c) => (c.error || !c.reachable ? 0 : c.converged ? 2 : 1);

const lastSync = (c) => {
  if (!c.last_sync) return "none yet";
  const at = Date.parse(c.last_sync.time);
  if (Number.isNaN(at)) return c.last_sync.result;
  const seconds = Math.max(0, Math.round((Date.now() - at) / 1000));
  return `${c.last_sync.result} ${seconds}s ago`;
};

function render(clusters) {
  clusters.sort((a, b) => rank(a) - rank(b) || a.cluster.localeCompare(b.cluster));
  const rows = clusters.map((c) => {
    const row = document.createElement("tr");
    row.dataset.cluster = c.cluster;
    const link = document.createElement("a");
    link.href = `clusters/${encodeURIComponent(c.cluster)}/`;
    link.textContent = c.cluster;
    cell(row, link, "th");
    if (c.error) {
      cell(row, badge("unknown", "warn"));
      cell(row, "–");
      cell(row, "–");
      cell(row, "–");
      cell(row, "–");
      cell(row, c.error);
      return row;
    }
    cell(row, c.reachable ? badge("yes", "ok") : badge("no", "bad"));
    cell(row, c.kubernetes || "–");
    cell(row, String(c.ready));
    cell(row, String(c.not_ready));
    cell(row, lastSync(c));
    cell(row, c.converged ? badge("converged", "ok") : c.not_converged.join("; "));
    return row;
  });
  $("cluster-rows").replaceChildren(...rows);
  const away = clusters.filter((c) => c.error || !c.reachable).length;
  const converged = clusters.filter((c) => !c.error && c.converged).length;
  const parts = [`${clusters.length} clusters`, `${converged} converged`];
  if (clusters.length - converged - away > 0) parts.push(`${clusters.length - converged - away} not converged`);
  if (away > 0) parts.push(`${away} not reached`);
  $("summary").textContent = parts.join(", ");
}

async function refresh() {
  try {
    const response = await fetch("api/v1/fleet", { cache: "no-store", credentials: "same-origin" });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    render((await response.json()).clusters || []);
    $("connection").dataset.state = "live";
    $("connection").textContent = "Live";
  } catch (e) {
    $("connection").dataset.state = "down";
    $("connection").textContent = "Cannot reach the daemon";
  }
  setTimeout(refresh, EVERY_MS);
}

refresh();
