// The object view: one object of a spec as the cluster has it, read through the API.
// Loaded before app.js, which routes to it.
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
    const ledger = await fetch("/api/v1/drift", { cache: "no-store", credentials: "omit" });
    if (ledger.ok) drifts = ((await ledger.json()).drifts || []).filter((d) => d.object === want.object);
  } catch {
    // The ledger is a part of the view; the object's own state matters more.
  }
  try {
    const response = await fetch(`/api/v1/object?${new URLSearchParams(want)}`, { cache: "no-store", credentials: "omit" });
    view = await response.json();
    if (!response.ok && !view.error) view = { error: `${response.status} ${response.statusText}` };
  } catch (error) {
    view = { error: `Reading it failed: ${error.message}` };
  }
  if (objectShown === key) drawObject(want, view, drifts);
}

// The history view (`#/history`): the drift ledger and the syncs, newest first, read
// when it opens and on Refresh.
let historyShown = false;

async function loadHistory() {
  historyShown = true;
  $("history-body").replaceChildren(el("p", {}, "Reading the ledger…"));
  const read = async (path) => {
    const response = await fetch(path, { cache: "no-store", credentials: "omit" });
    if (!response.ok) throw new Error(`${path}: ${response.status} ${response.statusText}`);
    return response.json();
  };
  let drifts;
  let syncs;
  try {
    drifts = (await read("/api/v1/drift")).drifts || [];
    syncs = (await read("/api/v1/syncs")).syncs || [];
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
      : el("p", {}, "No sync yet.")
  );
}

function showHistory() {
  if (!historyShown) loadHistory();
}

function showObject(want) {
  if (objectShown !== JSON.stringify(want)) loadObject(want);
}
