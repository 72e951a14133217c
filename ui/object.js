// The object view (one object of a spec as the cluster has it, read through the API),
// and Flux's and Argo CD's apps: their panel and each app's objects as a tree. Loaded
// before app.js, which routes to them.
"use strict";

// The object view reads the cluster on demand (GET /api/v1/object): once when it opens
// and on Refresh, never on every status event, so a selection in it stays put.
let objectShown = null;

function table(caption, heads, rows) {
  return el(
    "table",
    { class: "objects" },
    el("caption", {}, caption),
    el("thead", {}, el("tr", {}, heads.map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, rows.map((cells) => el("tr", {}, cells.map((c, i) => el(i ? "td" : "th", i ? { "data-label": heads[i] } : { scope: "row", "data-label": heads[0] }, c)))))
  );
}

function lastState(o) {
  return [o.state, o.last_state].filter(Boolean).join("; ") || "–";
}

function driftRows(drifts) {
  return drifts
    .slice()
    .reverse()
    .map((d) => [
      d.began ? when(d.began) : "–",
      d.corrected ? when(d.corrected) : "not yet",
      (d.managers || []).join(", ") || "–",
      el(
        "ul",
        { class: "fields" },
        (d.fields || []).map((f) => el("li", {}, el("code", {}, f.pointer), ": ", el("code", {}, JSON.stringify(f.applied)), " → ", el("code", {}, JSON.stringify(f.found))))
      ),
    ]);
}

function drawObject(want, view, drifts) {
  const body = $("object-body");
  if (view.error) {
    body.replaceChildren(el("p", { class: "bad-text" }, view.error));
    return;
  }
  const owned = view.owned || [];
  const events = view.events || [];
  body.replaceChildren(
    el("p", {}, "Spec ", el("a", { href: specHref(want.spec) }, want.spec), ` · read ${when(view.read_at)} `, el("button", { type: "button", id: "object-refresh", onclick: () => loadObject(want) }, "Refresh")),
    el("h3", {}, "What it owns"),
    owned.length
      ? table(
          `${plural(owned.length, "object")} owned by ${want.object}`,
          ["Object", "Phase", "Ready", "Restarts", "State / last state"],
          owned.map((o) => [el("code", { title: o.object }, o.object), dash(o.phase), dash(o.ready), String(o.restarts ?? "–"), lastState(o)])
        )
      : el("p", {}, "Nothing (no ReplicaSets, Pods or Jobs that name it as their owner)."),
    el("h3", {}, "Events"),
    events.length
      ? table(
          `${plural(events.length, "event")} of it and what it owns, newest first`,
          ["Object", "Type", "Reason", "Message", "Count", "Last seen"],
          events.map((e) => [el("code", { title: e.object }, e.object), dash(e.type), dash(e.reason), el("span", { class: "message" }, dash(e.message)), String(e.count ?? 1), e.last ? when(e.last) : "–"])
        )
      : el("p", {}, "No events (the cluster keeps them about an hour)."),
    el("h3", {}, "Drift history"),
    drifts.length
      ? table(`${plural(drifts.length, "drift")} of ${want.object} in the drift ledger, newest first`, ["Began", "Corrected", "Written by", "Fields: applied → found"], driftRows(drifts))
      : el("p", {}, "No drift recorded."),
    el("h3", {}, "Diff: live → desired"),
    view.diff ? el("pre", { class: "diff" }, view.diff.split("\n").map((line) => el("span", { class: line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "" }, `${line}\n`))) : el("p", {}, view.diff_error || "No difference: apply would change nothing."),
    el("details", {}, el("summary", {}, "Live manifest"), el("pre", {}, view.live || "Not in the cluster.")),
    el("details", {}, el("summary", {}, "Desired manifest"), el("pre", {}, view.desired || "–"))
  );
}

async function loadObject(want) {
  const key = JSON.stringify(want);
  objectShown = key;
  setText($("object-heading"), want.object);
  $("object-body").replaceChildren(el("p", {}, "Reading it from the cluster…"));
  let view;
  let drifts = [];
  try {
    const ledger = await fetch("api/v1/drift", { cache: "no-store", credentials: "same-origin" });
    if (ledger.ok) drifts = ((await ledger.json()).drifts || []).filter((d) => d.object === want.object);
  } catch {
    // The ledger is a part of the view; the object's own state matters more.
  }
  try {
    const response = await fetch(`api/v1/object?${new URLSearchParams(want)}`, { cache: "no-store", credentials: "same-origin" });
    view = await response.json();
    if (!response.ok && !view.error) view = { error: `${response.status} ${response.statusText}` };
  } catch (error) {
    view = { error: `Reading it failed: ${error.message}` };
  }
  if (objectShown === key) drawObject(want, view, drifts);
}

// The history view (`#/history`): the drift ledger, the syncs and the controls asked
// for, newest first, read when it opens and on Refresh.
let historyShown = false;

async function loadHistory() {
  historyShown = true;
  $("history-body").replaceChildren(el("p", {}, "Reading the ledger…"));
  const read = async (path) => {
    const response = await fetch(path, { cache: "no-store", credentials: "same-origin" });
    if (!response.ok) throw new Error(`${path}: ${response.status} ${response.statusText}`);
    return response.json();
  };
  let drifts;
  let syncs;
  let controls;
  try {
    drifts = (await read("api/v1/drift")).drifts || [];
    syncs = (await read("api/v1/syncs")).syncs || [];
    controls = (await read("api/v1/controls")).controls || [];
  } catch (error) {
    $("history-body").replaceChildren(el("p", { class: "bad-text" }, `Reading the history failed: ${error.message}`));
    return;
  }
  $("history-body").replaceChildren(
    el("p", {}, el("button", { type: "button", id: "history-refresh", onclick: loadHistory }, "Refresh")),
    el("h3", {}, "Drift"),
    drifts.length
      ? table(
          `${plural(drifts.length, "drift")} recorded, newest first`,
          ["Object", "Began", "Corrected", "Written by", "Fields: applied → found"],
          drifts
            .slice()
            .reverse()
            .map((d, i) => [el("a", { href: objectHref(d.spec, d.object), title: d.object }, el("code", {}, d.object)), ...driftRows([drifts[drifts.length - 1 - i]])[0]])
        )
      : el("p", {}, "No drift recorded."),
    el("h3", {}, "Syncs"),
    syncs.length
      ? table(
          `${plural(syncs.length, "sync")}, newest first`,
          ["Ended", "Revision", "Result", "Counts", "Changed"],
          syncs
            .slice()
            .reverse()
            .map((s) => [
              when(s.ended),
              el("code", {}, dash(s.revision)),
              [s.result, s.message].filter(Boolean).join(": "),
              `${s.applied} applied, ${s.unchanged} unchanged, ${s.pruned} pruned, ${s.failed} failed`,
              (s.changed || []).length ? el("ul", { class: "fields" }, s.changed.map((c) => el("li", {}, el("code", {}, c)))) : "–",
            ])
        )
      : el("p", {}, "No sync yet."),
    el("h3", {}, "Controls"),
    controls.length
      ? table(
          `${plural(controls.length, "control")} asked for, newest first`,
          ["When", "Who", "From", "What", "Answer"],
          controls
            .slice()
            .reverse()
            .map((c) => [
              when(c.time),
              c.who,
              el("code", {}, c.from),
              el("code", {}, c.what),
              [String(c.answer), c.reason].filter(Boolean).join(": "),
            ])
        )
      : el("p", {}, "No control asked for.")
  );
}

function showHistory() {
  if (!historyShown) loadHistory();
}

function showObject(want) {
  if (objectShown !== JSON.stringify(want)) loadObject(want);
}

// An app's health as a badge: the worst of its specs'.
function appBadge(a) {
  const [text, tone, symbol] = a.ready ? STATES.Current : stateOf(a.status);
  return badge(tone, symbol, text);
}

// Flux's and Argo CD's apps, trouble first (the status orders them): each links to the
// list narrowed to its specs.
function renderApps(doc) {
  const apps = doc.apps || [];
  $("apps").hidden = !apps.length;
  const signature = JSON.stringify([apps, listState().sort, listState().group]);
  const body = $("app-rows");
  if (body.dataset.signature === signature) return;
  body.dataset.signature = signature;
  body.replaceChildren(
    ...apps.map((a) =>
      el(
        "tr",
        { "data-app": a.name, class: a.ready ? "" : "unready" },
        el("th", { scope: "row", "data-label": "App" }, el("a", { href: appHref(a.name), title: `${a.name}: its objects` }, a.name)),
        el("td", { "data-label": "Health" }, appBadge(a)),
        el("td", { "data-label": "Specs ready" }, el("a", { class: "specs-link", href: listHref({ ...listState(), q: `app:${a.name}` }), title: `${a.name}: its specs` }, `${a.ready_specs}/${a.specs.length}`)),
        el("td", { "data-label": "Revision", title: a.revision || "its specs are at different revisions" }, a.revision ? a.revision.slice(0, 12) : "–")
      )
    )
  );
}

// The app view (`#/app?name=argo/shop`): every object of a Flux or Argo CD app as a tree
// by owner references (Deployment → ReplicaSet → Pods, with Services and the rest beside),
// each node coloured by its health and, for the app's own objects, linked to its object
// view, as Argo CD draws an app's resources. What they own is read from the cluster when
// it opens and on Refresh.
let appShown = null;

function routedApp() {
  const match = location.hash.match(/^#\/app\?(.*)$/);
  if (!match) return null;
  return new URLSearchParams(match[1]).get("name");
}

const appHref = (name) => `#/app?${new URLSearchParams({ name })}`;

// `Deployment.apps ns/web` and `Deployment web` name one object: kind and name.
function kindAndName(object) {
  const [kind, rest] = object.split(" ");
  return `${kind.split(".")[0]} ${(rest || "").split("/").pop()}`;
}

// A ReplicaSet, Job or Pod the cluster has: its health from what the view says of it.
function ownedTone(o) {
  const state = `${o.phase || ""} ${o.state || ""}`;
  if (/Failed|CrashLoopBackOff|Error|ImagePullBackOff/.test(state)) return ["bad", "✕"];
  const [ready, wanted] = String(o.ready || "").split("/");
  if (o.object.startsWith("Job ")) return o.phase === "Complete" ? ["ok", "✓"] : ["warn", "…"];
  if (wanted !== undefined && ready === wanted && (!o.phase || o.phase === "Running")) return ["ok", "✓"];
  return ["warn", "…"];
}

function drawApp(name, roots, owned) {
  const app = (model.apps || []).find((a) => a.name === name);
  const body = $("app-body");
  // Redrawn only when something shown changed: a status event about another app does
  // not take the Refresh button from under the pointer.
  const signature = JSON.stringify([app, roots, owned]);
  if (body.dataset.signature === signature) return;
  body.dataset.signature = signature;
  if (!app) {
    body.replaceChildren(el("p", { class: "bad-text" }, `No app ${name} in the status.`));
    return;
  }
  const below = (parent) => owned.filter((o) => o.owner === parent);
  const node = (o, depth) => {
    const [tone, symbol] = ownedTone(o);
    const children = depth < 3 ? below(kindAndName(o.object)) : [];
    return el(
      "li",
      { "data-object": o.object },
      badge(tone, symbol, o.object, [o.phase, o.ready, o.state].filter(Boolean).join(" · ")),
      children.length ? el("ul", {}, children.map((c) => node(c, depth + 1))) : null
    );
  };
  body.replaceChildren(
    el(
      "p",
      {},
      appBadge(app),
      ` ${app.ready_specs}/${plural(app.specs.length, "spec")} ready · `,
      el("a", { href: listHref({ ...listState(), q: `app:${name}` }) }, "its specs"),
      " ",
      el("button", { type: "button", id: "app-refresh", onclick: () => loadApp(name) }, "Refresh")
    ),
    el(
      "ul",
      { class: "tree", "aria-label": `The objects of ${name}` },
      roots.map((r) => {
        const [text, tone, symbol] = stateOf(r.status);
        const children = below(kindAndName(r.object));
        return el(
          "li",
          { "data-object": r.object },
          el("a", { href: objectHref(r.spec, r.object), title: [text, r.reason, r.message].filter(Boolean).join(": ") }, badge(tone, symbol, r.object)),
          children.length ? el("ul", {}, children.map((c) => node(c, 1))) : null
        );
      })
    )
  );
}

// Workloads first, as the cluster runs them; the rest by name.
const workloadRank = (o) => (/^(Deployment|StatefulSet|DaemonSet|CronJob|Job)[. ]/.test(o) ? 0 : 1);

// The app's own objects, as the status has them now.
function appRoots(name) {
  return (model.specs || [])
    .filter((s) => s.app === name)
    .flatMap((s) => (s.objects || []).map((o) => ({ spec: s.id, ...o })))
    .sort((a, b) => workloadRank(a.object) - workloadRank(b.object) || (a.object < b.object ? -1 : a.object > b.object ? 1 : 0));
}

// What the app's workloads own, as last read.
let appOwned = [];

async function loadApp(name) {
  appShown = name;
  appOwned = [];
  setText($("app-heading"), name);
  const roots = appRoots(name);
  drawApp(name, roots, appOwned);
  const owned = [];
  for (const r of roots.filter((r) => workloadRank(r.object) === 0)) {
    try {
      const response = await fetch(`api/v1/object?${new URLSearchParams({ spec: r.spec, object: r.object })}`, { cache: "no-store", credentials: "same-origin" });
      if (response.ok) owned.push(...((await response.json()).owned || []));
    } catch {
      // A workload whose children cannot be read is drawn alone.
    }
  }
  if (appShown !== name) return;
  appOwned = owned;
  drawApp(name, appRoots(name), appOwned);
}

// Each status event redraws the app's own objects (their health moves); what they own is
// read again on Refresh.
function showApp(name) {
  if (appShown !== name) loadApp(name);
  else drawApp(name, appRoots(name), appOwned);
}
