// Finding specs: the list's search, facets and sort, and its state in the URL. Loaded
// before app.js, which draws the list with these.
"use strict";

// The list's state lives in the URL (`#/?q=status:failed&sort=name&group=source`), so
// any view of it can be bookmarked and shared.
function listState() {
  const match = location.hash.match(/^#\/?\?(.*)$/);
  const params = new URLSearchParams(match ? match[1] : "");
  return { q: params.get("q") || "", sort: params.get("sort") || "trouble", group: params.get("group") || "" };
}

function listHref(state) {
  const params = new URLSearchParams();
  if (state.q) params.set("q", state.q);
  if (state.sort && state.sort !== "trouble") params.set("sort", state.sort);
  if (state.group) params.set("group", state.group);
  const query = params.toString();
  return query ? `#/?${query}` : "#/";
}

// The kind a person knows the spec by: a manifest spec of one object is that object's
// kind (Deployment), not `manifest`.
function ownKind(spec) {
  const objects = spec.objects || [];
  if (spec.kind === "manifest" && objects.length === 1) {
    const kind = objects[0].object.split(" ")[0].split(".")[0];
    if (kind) return kind;
  }
  return spec.kind;
}

function sourceOf(spec) {
  return spec.rendered_by ? `${spec.file} (${spec.rendered_by.tool})` : spec.file;
}

// Trouble first: failed, then missing, unknown, in progress, drifted, suspended, ready.
function troubleRank(spec) {
  if (!spec.ready) {
    const rank = { Failed: 0, NotFound: 1, Unknown: 2 }[spec.status];
    return rank === undefined ? 3 : rank;
  }
  if ((spec.drifted || []).length) return 4;
  if (spec.suspended) return 5;
  return 6;
}

function statusWords(spec) {
  const words = [];
  if (spec.ready) words.push("ready");
  else {
    words.push("unready");
    words.push({ Failed: "failed", NotFound: "notfound", Unknown: "unknown" }[spec.status] || "progressing");
  }
  if ((spec.drifted || []).length) words.push("drifted");
  if (spec.suspended) words.push("suspended");
  return words;
}

// Where the spec's sync stands: an object's apply conflicted or failed, its change in
// the newest revision not applied and observed yet (pending), or synced.
function syncState(spec) {
  const actions = (spec.objects || []).map((o) => o.action);
  if (actions.includes("conflict")) return "conflict";
  if (actions.includes("failed")) return "error";
  const newest = model && model.revision_seen;
  if (!spec.revision || (newest && spec.revision !== newest)) return "pending";
  return "synced";
}

function parseQuery(q) {
  const terms = [];
  for (const raw of q.trim().split(/\s+/).filter(Boolean)) {
    const match = raw.match(/^(ns|namespace|kind|status|sync|file|app):(.*)$/i);
    if (match) terms.push({ key: { namespace: "ns" }[match[1].toLowerCase()] || match[1].toLowerCase(), value: match[2].toLowerCase() });
    else terms.push({ key: "", value: raw.toLowerCase() });
  }
  return terms;
}

function matches(spec, terms) {
  const has = (text, value) => String(text || "").toLowerCase().includes(value);
  return terms.every(({ key, value }) => {
    switch (key) {
      case "ns":
        return value === "(cluster)" ? !spec.namespace : has(spec.namespace, value);
      case "kind":
        return has(ownKind(spec), value) || has(spec.kind, value);
      case "status":
        return statusWords(spec).includes(value);
      case "sync":
        return syncState(spec) === value;
      case "file":
        return has(sourceOf(spec), value);
      case "app":
        return has(spec.app, value);
      default:
        return [spec.id, spec.name, spec.namespace, spec.kind, ownKind(spec), spec.file].some((t) => has(t, value));
    }
  });
}

function sortSpecs(specs, sort) {
  // Code-point order, not localeCompare: ids and names are ASCII, and with 10,000 specs
  // localeCompare took most of a redraw.
  const cmp = (x, y) => (x < y ? -1 : x > y ? 1 : 0);
  const byId = (a, b) => cmp(a.id, b.id);
  const keyed = {
    name: (a, b) => cmp(a.name, b.name) || byId(a, b),
    file: (a, b) => cmp(a.file, b.file) || (a.line || 0) - (b.line || 0) || byId(a, b),
  };
  if (keyed[sort]) return [...specs].sort(keyed[sort]);
  // Each spec's rank once, not once per comparison; and when no spec moved rank and
  // none came or went (most updates), the last order again without sorting: a redraw
  // of 10,000 specs is within an update's budget only so.
  const ranks = specs.map(troubleRank);
  const last = sortSpecs.last;
  if (
    last &&
    last.specs.length === specs.length &&
    specs.every((spec, i) => spec.id === last.specs[i].id && ranks[i] === last.ranks[i])
  ) {
    return last.order.map((i) => specs[i]);
  }
  const order = specs.map((_, i) => i).sort((a, b) => ranks[a] - ranks[b] || byId(specs[a], specs[b]));
  sortSpecs.last = { specs, ranks, order };
  return order.map((i) => specs[i]);
}

// Values a facet shows until its "more" is pressed, and the facets opened so.
const FACET_SHOWN = 6;
const openFacets = new Set();

// Facets: each value with how many specs have it; a click puts its term in the search.
function renderFacets(specs, state) {
  const terms = parseQuery(state.q);
  const groups = [
    ["Status", "status", (s) => statusWords(s).filter((w) => w !== "unready")],
    ["Sync", "sync", (s) => [syncState(s)]],
    ["Kind", "kind", (s) => [ownKind(s)]],
    ["Namespace", "ns", (s) => [s.namespace || "(cluster)"]],
    ["Source", "file", (s) => [sourceOf(s)]],
    // Only a tree of Flux's or Argo CD's apps has this one.
    ...(specs.some((s) => s.app) ? [["App", "app", (s) => (s.app ? [s.app] : [])]] : []),
  ];
  const counted = groups.map(([title, key, values]) => {
    const counts = new Map();
    for (const spec of specs) for (const v of values(spec)) counts.set(v, (counts.get(v) || 0) + 1);
    return [title, key, [...counts].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))];
  });
  // Hundreds of chips are rebuilt only when a count or the query changed: most updates
  // move no count.
  const facets = $("facets");
  const signature = JSON.stringify([state, counted, [...openFacets]]);
  if (facets.dataset.signature === signature) return;
  facets.dataset.signature = signature;
  facets.replaceChildren(
    ...counted.map(([title, key, entries]) => {
      return el(
        "div",
        { class: "facet", role: "group", "aria-label": title },
        el("span", { class: "facet-title" }, title),
        entries.map(([value, n], i) => {
          const term = `${key}:${/\s/.test(value) ? value.split(/\s/)[0] : value}`;
          const on = terms.some((t) => t.key === key && t.value === term.slice(key.length + 1).toLowerCase());
          // A real tree has dozens of files and namespaces: the commonest few show, the
          // rest behind "more", so the list itself is on the first screen.
          if (i >= FACET_SHOWN && !on && !openFacets.has(key)) return null;
          const q = on
            ? state.q.split(/\s+/).filter((t) => t.toLowerCase() !== term.toLowerCase()).join(" ")
            : [state.q.trim(), term].filter(Boolean).join(" ");
          return el("a", { class: "chip", href: listHref({ ...state, q }), "aria-current": on ? "true" : null, title: value }, `${value} (${n})`);
        }),
        entries.length > FACET_SHOWN
          ? el(
              "button",
              {
                type: "button",
                class: "more",
                "aria-expanded": String(openFacets.has(key)),
                onclick: () => {
                  if (openFacets.has(key)) openFacets.delete(key);
                  else openFacets.add(key);
                  renderFacets(specs, state);
                },
              },
              openFacets.has(key) ? "fewer" : `${entries.length - FACET_SHOWN} more`
            )
          : null
      );
    })
  );
}
