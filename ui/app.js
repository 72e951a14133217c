// The driftless dashboard: one status document at a time from the daemon's event stream,
// drawn with DOM calls only (textContent, never innerHTML), so nothing the cluster or a
// spec file says can turn into markup or script.
"use strict";

// sessionStorage: the token dies with the tab and is never sent anywhere but the
// Authorization header of this page's own requests. With sign-in, the session is a
// SameSite=Strict cookie and the daemon refuses a control another origin's page makes.
const TOKEN_KEY = "driftless.api-token";
const STATES = {
  Current: ["Ready", "ok", "✓"],
  InProgress: ["In progress", "warn", "…"],
  Terminating: ["Terminating", "warn", "…"],
  Unknown: ["Unknown", "warn", "?"],
  NotFound: ["Not found", "bad", "✕"],
  Failed: ["Failed", "bad", "✕"],
};

let model = null;
let suspending = null;
let shownRoute;

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "onclick") node.addEventListener("click", value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

function setText(node, text) {
  // Rewriting an unchanged aria-live region would make screen readers repeat it.
  if (node.textContent !== text) node.textContent = text;
}

const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;
const dash = (value) => (value === null || value === undefined || value === "" ? "–" : String(value));

function ago(time) {
  const seconds = Math.round((Date.now() - Date.parse(time)) / 1000);
  if (!Number.isFinite(seconds)) return "";
  if (seconds < 60) return `${Math.max(seconds, 0)} s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ago`;
  return `${Math.floor(seconds / 86400)} d ago`;
}

function when(time) {
  const date = new Date(time);
  return Number.isNaN(date.getTime()) ? dash(time) : `${date.toLocaleString()} (${ago(time)})`;
}

function duration(seconds) {
  if (typeof seconds !== "number") return "–";
  return seconds < 1 ? `${Math.round(seconds * 1000)} ms` : `${seconds.toFixed(1)} s`;
}

function stateOf(status) {
  return STATES[status] || [dash(status), "warn", "?"];
}

function badge(tone, symbol, text, title) {
  return el("span", { class: `badge ${tone}`, title }, el("span", { "aria-hidden": "true" }, symbol), ` ${text}`);
}

function readiness(spec) {
  const [text, tone, symbol] = spec.ready ? STATES.Current : stateOf(spec.status);
  const badges = [badge(tone, symbol, text)];
  if (spec.suspended) badges.push(badge("paused", "‖", "Suspended", spec.suspended.reason));
  const drifted = spec.drifted || [];
  if (drifted.length) badges.push(badge("drift", "≠", `Drifted (${drifted.length})`, drifted.join("\n")));
  const warnings = spec.warnings || [];
  if (warnings.length) badges.push(badge("warn", "!", `Warnings (${warnings.length})`, warnings.join("\n")));
  return badges;
}

function figures(f) {
  switch (f && f.kind) {
    case "workspace":
      return [["State", f.state], ["Phase", f.phase], ["Node", f.node], ["Pod IP", f.pod_ip], ["URL", f.url]];
    case "elasticweb":
      return [
        ["Replicas", `${f.available_replicas}/${f.desired_replicas} available`],
        ["Real QPS", f.real_qps],
      ];
    case "localservice": {
      const ready = Object.entries(f.ready_endpoints || {}).map(([node, n]) => `${node}: ${n}`);
      return [["Nodes", (f.nodes || []).join(", ") || "none"], ["Ready endpoints", ready.join(", ") || "none"]];
    }
    default:
      return [];
  }
}

function figureList(f) {
  const pairs = figures(f);
  if (!pairs.length) return "–";
  return el("dl", { class: "figures" }, pairs.map(([k, v]) => el("div", {}, el("dt", {}, k), el("dd", {}, dash(v)))));
}

function reasonText(spec) {
  // Why a person paused it comes first: it explains why a change is not applied.
  const held = spec.suspended ? `Suspended: ${spec.suspended.reason}` : "";
  const why = [spec.reason, spec.message].filter(Boolean).join(": ");
  return [held, why].filter(Boolean).join(" · ") || "–";
}

const encodeId = (id) => id.split("/").map(encodeURIComponent).join("/");
const specHref = (id) => `#/spec/${encodeId(id)}`;
const objectHref = (spec, object) => `#/object?${new URLSearchParams({ spec, object })}`;

function routedSpec() {
  const match = location.hash.match(/^#\/spec\/(.+)$/);
  if (!match) return null;
  try {
    return match[1].split("/").map(decodeURIComponent).join("/");
  } catch {
    return null;
  }
}

function routedObject() {
  const match = location.hash.match(/^#\/object\?(.*)$/);
  if (!match) return null;
  const params = new URLSearchParams(match[1]);
  const spec = params.get("spec");
  const object = params.get("object");
  return spec && object ? { spec, object } : null;
}

function actionButton(spec) {
  // One key for both buttons, so focus follows Suspend → Resume when the row is redrawn.
  const key = `action:${spec.id}`;
  // The tree holds it back (Flux's suspend: true): changing the tree resumes it.
  if (spec.suspended && spec.suspended.declared) {
    return el("span", { "data-key": key, class: "source", title: spec.suspended.reason }, "Suspended in the tree");
  }
  if (spec.suspended) {
    return el("button", { type: "button", "data-key": key, "aria-label": `Resume ${spec.id}`, onclick: () => resume(spec.id) }, "Resume");
  }
  return el("button", { type: "button", "data-key": key, "aria-label": `Suspend ${spec.id}`, onclick: () => askSuspend(spec.id) }, "Suspend");
}

function queryLink(text, q) {
  return el("a", { href: listHref({ ...listState(), q }), class: "count" }, text);
}

function renderOverview(doc) {
  const specs = doc.specs || [];
  const ready = specs.filter((s) => s.ready).length;
  const counts = new Map();
  for (const spec of specs) for (const word of statusWords(spec)) counts.set(word, (counts.get(word) || 0) + 1);
  const count = (word) => counts.get(word) || 0;
  // Each count is a link to the list filtered to what it counts.
  const parts = [queryLink(`${ready}/${plural(specs.length, "spec")} ready`, ready < specs.length ? "status:unready" : "")];
  for (const [word, label] of [["failed", "failed"], ["suspended", "suspended"], ["drifted", "drifted"]]) {
    const n = count(word);
    if (n) parts.push(queryLink(`${n} ${label}`, `status:${word}`));
  }
  // An error with an app holds that app alone; one without holds the whole revision.
  const treeErrors = (doc.errors || []).filter((e) => !e.app).length;
  const held = new Set((doc.errors || []).filter((e) => e.app).map((e) => e.app));
  const errors = (doc.errors || []).length;
  if (held.size) parts.push(`${plural(held.size, "app")} held`);
  if (treeErrors) parts.push(plural(treeErrors, "error"));
  // A sync's success is of the revision it ran; a newer one that did not apply is not green.
  const stale = treeErrors > 0 || (doc.revision_seen && doc.revision_applied && doc.revision_seen !== doc.revision_applied);
  const sync = doc.last_sync;
  const result = sync ? (stale && sync.result === "success" ? "success, of an older revision" : sync.result) : "";
  if (sync) parts.push(`last sync ${result}`);
  const summary = $("summary");
  const text = parts.map((p) => (typeof p === "string" ? p : p.textContent)).join(", ");
  // Rewriting an unchanged aria-live region would make screen readers repeat it.
  if (summary.textContent !== text || summary.dataset.links !== String(listState().sort + listState().group)) {
    summary.replaceChildren(...parts.flatMap((p, i) => (i ? [", ", p] : [p])));
    summary.dataset.links = String(listState().sort + listState().group);
  }

  setText($("source"), dash(doc.source));
  setText($("instance"), dash(doc.instance));
  // Only in a fleet (--clusters): the cluster this daemon serves.
  $("cluster-fact").hidden = !doc.cluster;
  setText($("cluster"), dash(doc.cluster));
  setText($("revision-applied"), dash(doc.revision_applied));
  setText($("revision-seen"), dash(doc.revision_seen));
  // Not in the live summary: a screen reader would announce every sync starting and ending.
  const doing = doc.sync_progress && doc.sync_progress.message;
  const running = doc.syncing ? (doing ? `; syncing now: ${doing}` : "; syncing now…") : "";
  setText($("last-sync"), (sync ? `${result} at ${when(sync.time)}, took ${duration(sync.duration_seconds)}` : "never") + running);
  $("last-sync").dataset.result = sync ? (stale && sync.result === "success" ? "stale" : sync.result) : "";
  setText($("counts"), sync ? `${sync.applied} applied, ${sync.unchanged} unchanged, ${sync.pruned} pruned, ${sync.failed} failed` : "–");
  const leader = { true: "yes (this replica syncs)", false: "no (standby)" }[doc.leader] || "no leader election";
  setText($("leader"), leader);
  setText($("drift"), { correct: "corrected", report: "reported only" }[doc.drift] || "–");
  $("last-sync-message").hidden = !(sync && sync.message);
  setText($("last-sync-message"), (sync && sync.message) || "");

  $("errors").hidden = !errors;
  setText(
    $("errors-title"),
    treeErrors ? "Errors: the newest revision was not applied" : "Held apps: neither applied nor pruned; the rest of the newest revision was applied"
  );
  $("error-list").replaceChildren(
    ...(doc.errors || []).map((e) => {
      const where = [e.file, e.line, e.column].filter((p) => p !== null && p !== undefined).join(":");
      return el("li", {}, e.app ? el("strong", {}, `${e.app} held: `) : null, where ? el("code", {}, `${where}: `) : null, e.message);
    })
  );
}

// The row drawn for each spec entry: a delta replaces only the entries that changed, so
// an unchanged entry is the same object and its row is reused without comparing.
const rowOf = new WeakMap();
// Each spec's row by id, whichever entry drew it: a changed entry finds the row to keep
// here, without reading 10,000 rows back from the page.
const rowById = new Map();

function specRow(spec) {
  const same = rowOf.get(spec);
  if (same) return same;
  const signature = JSON.stringify(spec);
  const old = rowById.get(spec.id);
  if (old && old.dataset.signature === signature) {
    rowOf.set(spec, old);
    return old;
  }
  const kind = ownKind(spec);
  const row = el(
    "tr",
    { "data-id": spec.id, class: spec.ready ? "" : "unready" },
    el("td", { "data-label": "Kind", title: kind === spec.kind ? kind : `${kind} (${spec.kind} spec)` }, kind),
    el("td", { "data-label": "Namespace", title: spec.namespace }, spec.namespace),
    el(
      "th",
      { scope: "row", "data-label": "Name" },
      el("a", { href: specHref(spec.id), "data-key": `open:${spec.id}`, title: spec.id }, spec.name),
      el("div", { class: "source", title: `${spec.file}:${spec.line}` }, sourceOf(spec))
    ),
    el("td", { "data-label": "Readiness", class: "state" }, readiness(spec)),
    el("td", { "data-label": "Reason / message", class: "message" }, reasonText(spec)),
    el("td", { "data-label": "Figures" }, figureList(spec.figures)),
    el("td", { "data-label": "Actions" }, actionButton(spec))
  );
  // The name link is the keyboard path; a click anywhere else on the row is a shortcut.
  row.addEventListener("click", (event) => {
    if (!event.target.closest("a, button")) location.hash = specHref(spec.id);
  });
  row.dataset.signature = signature;
  rowOf.set(spec, row);
  rowById.set(spec.id, row);
  return row;
}

function renderSpecs(doc) {
  const specs = doc.specs || [];
  const state = listState();
  const search = $("search");
  if (document.activeElement !== search && search.value !== state.q) search.value = state.q;
  $("sort").value = state.sort;
  $("group").checked = state.group === "source";
  renderFacets(specs, state);
  const terms = parseQuery(state.q);
  const shown = sortSpecs(terms.length ? specs.filter((s) => matches(s, terms)) : specs, state.sort);
  setText(
    $("specs-caption"),
    specs.length
      ? `${shown.length === specs.length ? plural(specs.length, "spec") : `${shown.length} of ${plural(specs.length, "spec")}`}; select a name for its objects.`
      : "No specs."
  );
  // A row is redrawn only when its spec changed: a button a person is about to press is
  // not swapped under the pointer by a status event about some other spec.
  const body = $("spec-rows");
  let rows = shown.map(specRow);
  if (state.group === "source") {
    const groups = new Map();
    shown.forEach((spec, i) => {
      const key = sourceOf(spec);
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key).push(rows[i]);
    });
    rows = [...groups].flatMap(([source, members]) => [
      el("tr", { class: "group" }, el("th", { colspan: "7", scope: "rowgroup" }, `${source} (${members.length})`)),
      ...members,
    ]);
  }
  // Rows are put in place one by one, each only when it is not there already: a
  // change that moves one row of 10,000 moves that row, not all of them.
  const now = body.children;
  if (!now.length) {
    body.replaceChildren(...rows);
    return;
  }
  if (now.length === rows.length && rows.every((row, i) => now[i] === row)) return;
  const wanted = new Set(rows);
  for (const row of [...now]) {
    if (wanted.has(row)) continue;
    row.remove();
    if (row.dataset.id && rowById.get(row.dataset.id) === row) rowById.delete(row.dataset.id);
  }
  for (let i = 0; i < rows.length; i++) {
    if (now[i] !== rows[i]) body.insertBefore(rows[i], now[i] || null);
  }
  while (now.length > rows.length) body.lastElementChild.remove();
}

// A chart release as one unit: its figures and how many of its specs are ready.
function releaseText(doc, r) {
  const app = r.app_version ? ` (app ${r.app_version})` : "";
  const unit = (doc.releases || []).find(
    (o) => o.name === r.name && o.namespace === r.namespace && o.file === r.file,
  );
  const ready = unit ? ` · ${unit.ready_specs}/${unit.specs.length} specs ready` : "";
  return `${r.namespace}/${r.release_name}: chart ${r.chart} ${r.version}${app}${ready}`;
}

function renderDetail(doc, id) {
  const spec = (doc.specs || []).find((s) => s.id === id);
  setText($("detail-heading"), id);
  if (!spec) {
    delete $("detail-body").dataset.signature;
    $("detail-body").replaceChildren(el("p", {}, `There is no spec ${id} (any more).`));
    return;
  }
  // Redrawn only when the spec changed: a selection in it survives other specs' updates.
  const signature = JSON.stringify(spec);
  if ($("detail-body").dataset.signature === signature) return;
  $("detail-body").dataset.signature = signature;
  const facts = [
    ["Kind", ownKind(spec) === spec.kind ? spec.kind : `${ownKind(spec)} (${spec.kind} spec)`],
    ["Readiness", readiness(spec)],
    ["Reason / message", reasonText(spec)],
    ["Defined at", `${spec.file}:${spec.line}`],
    ...(spec.rendered_by ? [["Rendered by", `${spec.rendered_by.command} (${spec.rendered_by.tool} ${spec.rendered_by.version})`]] : []),
    ...(spec.rendered_by && spec.rendered_by.release ? [["Release", releaseText(doc, spec.rendered_by.release)]] : []),
    ...figures(spec.figures).map(([k, v]) => [k, dash(v)]),
    ["Suspended", spec.suspended ? `yes${spec.suspended.declared ? ", in the tree" : ""}, since ${when(spec.suspended.since)}: ${spec.suspended.reason}` : "no"],
  ];
  const drifted = spec.drifted || [];
  const objects = spec.objects || [];
  // What the apiserver warned of at the last write: shown whole, only when there is any.
  const warnings = spec.warnings || [];
  $("detail-body").replaceChildren(
    el("dl", { class: "facts" }, facts.map(([k, v]) => el("div", {}, el("dt", {}, k), el("dd", {}, v)))),
    el("p", {}, actionButton(spec)),
    ...(warnings.length
      ? [el("h3", {}, "Warnings from the apiserver"), el("ul", { class: "warnings" }, warnings.map((w) => el("li", {}, w)))]
      : []),
    el("h3", {}, "Drifted objects"),
    drifted.length
      ? el("ul", { class: "drifted" }, drifted.map((o) => el("li", {}, el("a", { href: objectHref(spec.id, o) }, el("code", {}, o)))))
      : el("p", {}, "None."),
    el("h3", {}, "Objects"),
    el(
      "table",
      { class: "objects" },
      el("caption", {}, `${plural(objects.length, "object")} of ${spec.id}; select one for its live state, diff, Pods and events.`),
      el("thead", {}, el("tr", {}, ["Object", "Status", "Reason", "Message", "Last action"].map((h) => el("th", { scope: "col" }, h)))),
      el(
        "tbody",
        {},
        objects.map((o) => {
          const [text, tone, symbol] = stateOf(o.status);
          return el(
            "tr",
            {},
            el("th", { scope: "row", "data-label": "Object" }, el("a", { href: objectHref(spec.id, o.object), title: o.object }, el("code", {}, o.object))),
            el("td", { "data-label": "Status" }, badge(tone, symbol, text)),
            el("td", { "data-label": "Reason" }, dash(o.reason)),
            el("td", { "data-label": "Message", class: "message" }, dash(o.error || o.message)),
            el("td", { "data-label": "Last action" }, dash(o.action))
          );
        })
      )
    )
  );
}

function render() {
  if (!model) return;
  const focused = document.activeElement && document.activeElement.dataset && document.activeElement.dataset.key;
  renderOverview(model);
  const id = routedSpec();
  const object = routedObject();
  const history = location.hash === "#/history";
  const app = routedApp();
  $("history").hidden = !history;
  if (history) showHistory();
  $("app").hidden = app === null;
  if (app !== null) showApp(app);
  $("list").hidden = id !== null || object !== null || history || app !== null;
  $("apps").hidden = $("list").hidden || !(model.apps || []).length;
  $("detail").hidden = id === null;
  $("object").hidden = object === null;
  $("back").setAttribute("href", lastList);
  if ($("list").hidden === false) {
    renderApps(model);
    renderSpecs(model);
  }
  if (id !== null) renderDetail(model, id);
  if (object !== null) showObject(object);
  // Redrawn rows are new elements: put focus back where the person left it.
  if (focused) {
    const again = document.querySelector(`[data-key="${CSS.escape(focused)}"]`);
    if (again && document.activeElement !== again) again.focus();
  }
  if (shownRoute !== location.hash) {
    const wasList = shownRoute === undefined || !/^#\/(spec|object|history|app)/.test(shownRoute);
    shownRoute = location.hash;
    if (id !== null) $("detail-heading").focus();
    if (object !== null) $("object-heading").focus();
    if (history) $("history-heading").focus();
    if (app !== null) $("app-heading").focus();
    if ($("list").hidden === false && !wasList) $("specs-heading").focus();
  }
}

// Keyboard: `/` search, `j`/`k` move through the rows, Enter opens, Esc goes back, `?` help.
function onKey(event) {
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  const typing = event.target.closest && event.target.closest("input, textarea, select, dialog");
  if (event.key === "Escape") {
    if (event.target === $("search")) {
      $("search").blur();
      return;
    }
    if (typing) return;
    if (routedObject()) location.hash = specHref(routedObject().spec);
    else if (routedSpec() !== null || routedApp() !== null || location.hash === "#/history") location.hash = lastList;
    return;
  }
  if (typing) return;
  if (event.key === "/") {
    event.preventDefault();
    if (routedSpec() !== null || routedObject()) location.hash = lastList;
    $("search").focus();
    $("search").select();
  } else if (event.key === "?") {
    event.preventDefault();
    $("help-dialog").showModal();
  } else if ((event.key === "j" || event.key === "k") && !$("list").hidden) {
    const links = [...document.querySelectorAll("#spec-rows th a")];
    if (!links.length) return;
    const at = links.indexOf(document.activeElement);
    const next = event.key === "j" ? Math.min(at + 1, links.length - 1) : Math.max(at - 1, 0);
    links[at === -1 ? 0 : next].focus();
    links[at === -1 ? 0 : next].closest("tr").scrollIntoView({ block: "nearest" });
  }
}

let lastList = "#/";

function setConnection(state, text) {
  const node = $("connection");
  node.dataset.state = state;
  setText(node, text);
}

// A delta (see src/report/delta.rs): changed top-level fields, changed or new specs
// whole, removed ids, and the ids' order when it changed.
function applyDelta(doc, delta) {
  Object.assign(doc, delta.set || {});
  const byId = new Map((doc.specs || []).map((s) => [s.id, s]));
  for (const spec of delta.specs || []) byId.set(spec.id, spec);
  for (const id of delta.removed || []) byId.delete(id);
  const order = delta.order || (doc.specs || []).map((s) => s.id).concat((delta.specs || []).map((s) => s.id).filter((id) => !(doc.specs || []).some((s) => s.id === id)));
  doc.specs = order.filter((id) => byId.has(id)).map((id) => byId.get(id));
}

function connect() {
  setConnection("connecting", "Connecting…");
  // The whole document once, then only what changed (`event: delta`): a quiet tree
  // sends almost nothing, and the page redraws only the rows that changed.
  const events = new EventSource("api/v1/events?deltas=1");
  events.addEventListener("open", () => setConnection("live", "Live"));
  events.addEventListener("status", (event) => {
    try {
      model = JSON.parse(event.data);
    } catch {
      return;
    }
    setConnection("live", "Live");
    render();
  });
  events.addEventListener("delta", (event) => {
    let delta;
    try {
      delta = JSON.parse(event.data);
    } catch {
      return;
    }
    if (!model) return;
    applyDelta(model, delta);
    render();
  });
  events.addEventListener("error", () => {
    if (events.readyState === EventSource.CLOSED) {
      // The browser gives up for good on an answer that is not a stream (a 404 from an
      // older daemon, a proxy's error page): keep trying, more slowly.
      events.close();
      setConnection("down", "Disconnected; retrying in 5 s…");
      setTimeout(connect, 5000);
    } else {
      setConnection("reconnecting", "Reconnecting…");
    }
  });
}

function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

// Who this page acts as once the daemon's sign-in is configured (GET api/v1/whoami):
// a person who signed in steers with their session; nobody needs a token then.
let whoami = null;

async function findWhoami() {
  try {
    const response = await fetch("api/v1/whoami", { cache: "no-store", credentials: "same-origin" });
    if (!response.ok) return;
    whoami = await response.json();
  } catch {
    return;
  }
  if (whoami && whoami.kind === "person") {
    const groups = whoami.groups && whoami.groups.length ? ` (${whoami.groups.join(", ")})` : "";
    setText($("who"), `Signed in as ${whoami.user}${groups}`);
    $("signed-in").hidden = false;
    $("token-form").hidden = true;
    setText($("token-help"), "Reconcile, Suspend and Resume act as you: the cluster's RBAC decides (patch on a spec's objects).");
  }
}

async function signOut() {
  let then = "/";
  try {
    const response = await fetch("/auth/logout", { method: "POST", cache: "no-store", credentials: "same-origin" });
    const answer = await response.json();
    if (answer && typeof answer.then === "string") then = answer.then;
  } catch {
    // Signed out here or not, the provider's page is where a sign-out ends.
  }
  location.assign(then);
}

function showTokenHelp() {
  setText(
    $("token-help"),
    token()
      ? "A token is set for this tab only (sessionStorage); closing the tab forgets it."
      : "Reconcile, Suspend and Resume need the daemon's API token: start driftless run with --api-token-file FILE and paste that file's contents here. It is kept in this tab only."
  );
}

function report(tone, text) {
  const node = $("action-result");
  node.dataset.tone = tone;
  setText(node, text);
}

function needToken() {
  if (token() || (whoami && whoami.kind === "person")) return false;
  report("bad", "No API token: paste the one from the daemon's --api-token-file into the API token field first.");
  $("token").focus();
  return true;
}

async function post(what, path, body) {
  if (needToken()) return;
  report("pending", `${what}…`);
  const headers = token() ? { Authorization: `Bearer ${token()}` } : {};
  if (body) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path, { method: "POST", headers, body: body && JSON.stringify(body), cache: "no-store", credentials: "same-origin" });
  } catch (error) {
    report("bad", `${what} failed: ${error.message}`);
    return;
  }
  if (response.ok) {
    report("ok", `${what}: accepted (${response.status}).`);
    return;
  }
  const raw = await response.text().catch(() => "");
  let text = raw.trim() || response.statusText;
  try {
    const parsed = JSON.parse(raw);
    if (parsed && typeof parsed.error === "string") text = parsed.error;
  } catch {
    // Not JSON (a proxy's page): the raw text is the best explanation there is.
  }
  report("bad", `${what} refused (${response.status}): ${text}`);
}

function askSuspend(id) {
  if (needToken()) return;
  suspending = id;
  setText($("suspend-heading"), `Suspend ${id}`);
  $("suspend-reason").value = "";
  $("suspend-dialog").showModal();
}

function resume(id) {
  post(`Resume ${id}`, `api/v1/specs/${encodeId(id)}/resume`);
}

function setUp() {
  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const value = $("token").value.trim();
    if (value) sessionStorage.setItem(TOKEN_KEY, value);
    $("token").value = "";
    showTokenHelp();
  });
  $("forget-token").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    showTokenHelp();
  });
  $("reconcile").addEventListener("click", () => post("Reconcile", "api/v1/sync"));
  $("suspend-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const reason = $("suspend-reason").value.trim();
    if (!reason) return;
    $("suspend-dialog").close();
    post(`Suspend ${suspending}`, `api/v1/specs/${encodeId(suspending)}/suspend`, { reason });
  });
  $("suspend-cancel").addEventListener("click", () => $("suspend-dialog").close());
  // The button that opened the dialog may have been redrawn meanwhile: focus its successor.
  $("suspend-dialog").addEventListener("close", () => {
    const button = document.querySelector(`[data-key="${CSS.escape(`action:${suspending}`)}"]`);
    if (button) button.focus();
  });
  window.addEventListener("hashchange", () => {
    if (!routedObject()) objectShown = null;
    if (location.hash !== "#/history") historyShown = false;
    if (routedSpec() === null && !routedObject() && routedApp() === null && location.hash !== "#/history") lastList = location.hash || "#/";
    render();
  });
  // Typing in the search box updates the list and the URL; the page history gets one
  // entry per search, not one per key.
  $("search").addEventListener("input", () => {
    history.replaceState(null, "", listHref({ ...listState(), q: $("search").value }));
    lastList = location.hash;
    render();
  });
  $("search-form").addEventListener("submit", (event) => event.preventDefault());
  $("sort").addEventListener("change", () => {
    location.hash = listHref({ ...listState(), sort: $("sort").value });
  });
  $("group").addEventListener("change", () => {
    location.hash = listHref({ ...listState(), group: $("group").checked ? "source" : "" });
  });
  $("help-close").addEventListener("click", () => $("help-dialog").close());
  document.addEventListener("keydown", onKey);
  if (routedSpec() === null && !routedObject() && location.hash !== "#/history") lastList = location.hash || "#/";
  // Keeps "n s ago" honest between documents.
  setInterval(() => model && renderOverview(model), 10000);
  showTokenHelp();
  $("sign-out").addEventListener("click", signOut);
  findWhoami();
  // One cluster of a fleet's daemon: its page lies under the fleet's.
  $("fleet-link").hidden = !location.pathname.startsWith("/clusters/");
  connect();
}

setUp();
