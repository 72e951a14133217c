//! `diff --output markdown`: a pull-request comment. A heading and a table of counts,
//! then one collapsed section per object holding its masked unified diff. GitHub refuses
//! a comment over 65,536 characters, so sections that would pass `MARKDOWN_LIMIT` are
//! left out and named in a note; the table always stays.

use super::ObjectDiff;
use super::present::{DiffAction, Shown, Summary, shown};

/// Room under GitHub's 65,536-character limit, counted in bytes (never fewer than
/// characters), so a comment that fits here fits there.
pub(crate) const MARKDOWN_LIMIT: usize = 60_000;

/// The first line, so a CI job can find and update its own earlier comment.
pub(crate) const MARKER: &str = "<!-- driftless diff -->";

/// The first line of a preview (`diff --base`): a job may post both, each its own comment.
pub(crate) const PREVIEW_MARKER: &str = "<!-- driftless diff --base -->";

/// Kept free for the note on left-out sections, so it is never itself cut short.
const NOTE_ROOM: usize = 2_000;

/// The whole comment, at most `MARKDOWN_LIMIT` bytes unless the table alone is larger.
pub fn markdown(diffs: &[ObjectDiff]) -> String {
    markdown_within(diffs, MARKDOWN_LIMIT)
}

fn markdown_within(diffs: &[ObjectDiff], limit: usize) -> String {
    let objects = shown(diffs);
    let mut out = format!("{MARKER}\n### driftless diff\n\n");
    if objects.is_empty() {
        out.push_str("No changes: the cluster matches the specs.\n");
        return out;
    }
    out.push_str(&table(&Summary::of(&objects)));
    sections(out, objects, limit)
}

/// `out` (the head: heading and table), then a collapsed section per object, those that
/// would pass `limit` left out and named in a note.
pub(super) fn sections(mut out: String, mut objects: Vec<Shown>, limit: usize) -> String {
    // Errors first: they fail the job, and a reviewer reads them before any diff. The
    // sort is stable, so the rest keep the engine's order (apply order, prunes last).
    objects.sort_by_key(|o| o.action != DiffAction::Error);
    let room = limit.saturating_sub(out.len() + NOTE_ROOM);
    let mut used = 0;
    let mut left_out = Vec::new();
    // A section too large for what is left is skipped, not the ones after it: one big
    // CRD early in the apply order should not hide every other object.
    for o in &objects {
        let s = section(o);
        if used + s.len() <= room {
            used += s.len();
            out.push_str(&s);
        } else {
            left_out.push(o);
        }
    }
    if !left_out.is_empty() {
        let room = limit.saturating_sub(out.len());
        out.push_str(&note(&left_out, objects.len(), room));
    }
    out
}

fn table(s: &Summary) -> String {
    let rows = [
        ("create", s.create),
        ("update", s.update),
        ("replace (deleted and recreated)", s.replace),
        ("prune (deleted: left the specs)", s.prune),
        ("error", s.error),
    ];
    let mut t = String::from("| action | objects |\n| --- | ---: |\n");
    for (label, n) in rows {
        t.push_str(&format!("| {label} | {n} |\n"));
    }
    t.push('\n');
    t
}

/// `<b>update</b> <code>Deployment.apps dev/shop</code> from spec <code>…</code>`: the
/// line a reviewer sees before opening a section.
fn headline(o: &Shown) -> String {
    let action = match o.action {
        DiffAction::Create => "create",
        DiffAction::Update => "update",
        DiffAction::Replace => "replace",
        DiffAction::Prune => "prune",
        DiffAction::Error => "error",
    };
    let mut line = format!("<b>{action}</b> <code>{}</code>", escape(&o.id));
    if let Some(app) = &o.app {
        line.push_str(&format!(" in app <code>{}</code>", escape(app)));
    } else if !o.spec.is_empty() {
        line.push_str(&format!(" from spec <code>{}</code>", escape(&o.spec)));
    }
    match o.action {
        DiffAction::Replace => line.push_str(&format!(
            ": a replacement, it cannot change in place{} (apply deletes and recreates it)",
            escape(&super::present::immutable_said(&o.immutable))
        )),
        DiffAction::Prune => line.push_str(": left the specs (prune deletes it)"),
        _ => {}
    }
    line
}

fn section(o: &Shown) -> String {
    let (open, lang, body) = match &o.error {
        Some(e) => (" open", "text", e.as_str()),
        None => ("", "diff", o.diff.as_str()),
    };
    let fence = fence(body);
    let newline = if body.ends_with('\n') { "" } else { "\n" };
    format!(
        "<details{open}><summary>{}</summary>\n\n{fence}{lang}\n{body}{newline}{fence}\n\n</details>\n\n",
        headline(o)
    )
}

/// A code fence longer than any run of backticks in `body`, so nothing in it (a ConfigMap
/// holding a README, say) can close the block early.
fn fence(body: &str) -> String {
    let longest = body.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

/// Text placed in HTML (the `<summary>` line), where Markdown does not escape it.
pub(super) fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Which objects were left out, as many as fit in `room` bytes.
fn note(left_out: &[&Shown], total: usize, room: usize) -> String {
    let mut n = format!(
        "> **{} of {total} objects are not shown:** this comment would pass GitHub's \
         65,536-character limit. `driftless diff` prints every diff.\n\n",
        left_out.len()
    );
    // Kept back for the "and N more" line.
    let room = room.saturating_sub(100);
    for (i, o) in left_out.iter().enumerate() {
        let line = format!("- {}\n", headline(o));
        if n.len() + line.len() > room {
            n.push_str(&format!("- and {} more\n", left_out.len() - i));
            break;
        }
        n.push_str(&line);
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::ObjKey;
    use crate::apply::diff::Change;
    use serde_json::{Value, json};

    fn key(kind: &str, name: &str) -> ObjKey {
        ObjKey {
            group: if kind == "Deployment" { "apps" } else { "" }.into(),
            kind: kind.into(),
            namespace: "dev".into(),
            name: name.into(),
        }
    }

    fn cm(name: &str, value: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "dev"}, "data": {"k": value}})
    }

    fn diff(kind: &str, name: &str, change: Change) -> ObjectDiff {
        ObjectDiff {
            key: key(kind, name),
            spec: format!("manifest/dev/{kind}/{name}"),
            change,
        }
    }

    /// Every section of a comment: (headline, code block).
    fn sections(md: &str) -> Vec<(&str, &str)> {
        md.split("<details")
            .skip(1)
            .map(|s| {
                let head = s.split("</summary>").next().unwrap();
                let body = s.split("</summary>").nth(1).unwrap();
                (head, body.split("</details>").next().unwrap())
            })
            .collect()
    }

    #[test]
    fn a_section_per_object_under_a_table_of_counts() {
        let diffs = [
            diff("ConfigMap", "same", Change::Unchanged),
            diff(
                "ConfigMap",
                "new",
                Change::Create {
                    desired: cm("new", "a"),
                },
            ),
            diff(
                "ConfigMap",
                "cfg",
                Change::Update {
                    live: cm("cfg", "old-value"),
                    desired: cm("cfg", "new-value"),
                },
            ),
            diff(
                "Pod",
                "ide",
                Change::Replace {
                    live: cm("ide", "1"),
                    desired: cm("ide", "2"),
                    immutable: Vec::new(),
                },
            ),
            diff(
                "Deployment",
                "gone",
                Change::Error("conflict: <html> & co".into()),
            ),
            diff(
                "ConfigMap",
                "old",
                Change::Delete {
                    live: cm("old", "x"),
                },
            ),
        ];
        let md = markdown(&diffs);
        assert!(
            md.starts_with("<!-- driftless diff -->\n### driftless diff\n\n"),
            "{md}"
        );
        for row in [
            "| create | 1 |",
            "| update | 1 |",
            "| replace (deleted and recreated) | 1 |",
            "| prune (deleted: left the specs) | 1 |",
            "| error | 1 |",
        ] {
            assert!(md.contains(row), "{row}\n{md}");
        }
        let s = sections(&md);
        let heads: Vec<&str> = s.iter().map(|(h, _)| *h).collect();
        assert_eq!(
            heads,
            [
                " open><summary><b>error</b> <code>Deployment.apps dev/gone</code> from spec <code>manifest/dev/Deployment/gone</code>",
                "><summary><b>create</b> <code>ConfigMap dev/new</code> from spec <code>manifest/dev/ConfigMap/new</code>",
                "><summary><b>update</b> <code>ConfigMap dev/cfg</code> from spec <code>manifest/dev/ConfigMap/cfg</code>",
                "><summary><b>replace</b> <code>Pod dev/ide</code> from spec <code>manifest/dev/Pod/ide</code>: a replacement, it cannot change in place (apply deletes and recreates it)",
                "><summary><b>prune</b> <code>ConfigMap dev/old</code> from spec <code>manifest/dev/ConfigMap/old</code>: left the specs (prune deletes it)",
            ]
        );
        assert!(
            s[0].1.contains("\n```text\nconflict: <html> & co\n```\n"),
            "{}",
            s[0].1
        );
        assert!(
            s[2].1
                .contains("```diff\n--- live/ConfigMap/dev/cfg\n+++ desired/ConfigMap/dev/cfg\n")
                && s[2].1.contains("\n-  k: old-value\n+  k: new-value\n"),
            "{}",
            s[2].1
        );
        assert!(!md.contains('\x1b'), "{md}");
        let coloured = markdown(&[diff(
            "ConfigMap",
            "ansi",
            Change::Create {
                desired: cm("ansi", "\x1b[31mred\x1b[0m"),
            },
        )]);
        assert!(!coloured.contains('\x1b'), "{coloured}");
        assert!(md.len() < MARKDOWN_LIMIT);
    }

    #[test]
    fn an_unchanged_tree_says_so_briefly() {
        let md = markdown(&[diff("ConfigMap", "same", Change::Unchanged)]);
        assert_eq!(
            md,
            "<!-- driftless diff -->\n### driftless diff\n\nNo changes: the cluster matches the specs.\n"
        );
        assert_eq!(markdown(&[]), md);
    }

    #[test]
    fn secret_values_never_appear() {
        let secret = |pw: &str| {
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"},
                   "data": {"pw": pw, "user": "YWRtaW4="}, "stringData": {"token": pw}})
        };
        let diffs = [
            diff(
                "Secret",
                "db",
                Change::Update {
                    live: secret("b2xkLXNlY3JldA=="),
                    desired: secret("bmV3LXNlY3JldA=="),
                },
            ),
            diff(
                "Secret",
                "made",
                Change::Create {
                    desired: secret("bmV3LXNlY3JldA=="),
                },
            ),
            diff(
                "Secret",
                "gone",
                Change::Delete {
                    live: secret("b2xkLXNlY3JldA=="),
                },
            ),
        ];
        let md = markdown(&diffs);
        let json = crate::apply::diff::json(&diffs).unwrap();
        for out in [&md, &json] {
            for planted in ["b2xkLXNlY3JldA==", "bmV3LXNlY3JldA==", "YWRtaW4="] {
                assert!(!out.contains(planted), "{planted} in\n{out}");
            }
        }
        assert!(
            md.contains("*** (before)") && md.contains("*** (after)"),
            "{md}"
        );
    }

    #[test]
    fn a_diff_holding_backticks_gets_a_longer_fence() {
        let readme = "# Usage\n```sh\nrun it\n```\nand ```` four\n";
        let md = markdown(&[diff(
            "ConfigMap",
            "docs",
            Change::Create {
                desired: cm("docs", readme),
            },
        )]);
        let (_, body) = sections(&md)[0];
        assert!(body.starts_with("\n\n`````diff\n"), "{body}");
        assert!(body.ends_with("\n`````\n\n"), "{body}");
        // The diff is whole inside it: its backtick lines are there, and only the
        // closing fence is as long as the opening one.
        assert!(
            body.contains("```sh") && body.contains("```` four"),
            "{body}"
        );
        assert_eq!(body.matches("`````").count(), 2, "{body}");
        assert_eq!(fence("no ticks"), "```");
        assert_eq!(fence("a `b` ``c``"), "```");
    }

    #[test]
    fn past_the_limit_sections_are_left_out_and_counted() {
        let big = "x".repeat(3_000);
        let many: Vec<ObjectDiff> = (0..40)
            .map(|i| {
                diff(
                    "ConfigMap",
                    &format!("cm-{i:02}"),
                    Change::Create {
                        desired: cm("c", &big),
                    },
                )
            })
            .collect();
        let md = markdown(&many);
        assert!(md.len() <= MARKDOWN_LIMIT, "{}", md.len());
        assert!(md.contains("| create | 40 |"), "the table stays");
        let shown = sections(&md).len();
        assert!(shown > 10 && shown < 40, "{shown}");
        assert!(
            md.contains(&format!(
                "> **{} of 40 objects are not shown:** this comment would pass GitHub's 65,536-character limit.",
                40 - shown
            )),
            "{}",
            &md[md.len() - 2_000..]
        );
        assert!(md.contains("- <b>create</b> <code>ConfigMap dev/cm-39</code>"));

        // One object too large on its own does not hide the small ones after it.
        let huge = "y".repeat(70_000);
        let diffs = [
            diff(
                "ConfigMap",
                "huge",
                Change::Create {
                    desired: cm("huge", &huge),
                },
            ),
            diff(
                "ConfigMap",
                "small",
                Change::Create {
                    desired: cm("small", "s"),
                },
            ),
        ];
        let md = markdown(&diffs);
        assert!(md.len() <= MARKDOWN_LIMIT, "{}", md.len());
        assert!(md.contains("<code>ConfigMap dev/small</code>") && md.contains("+  k: s\n"));
        assert!(md.contains("> **1 of 2 objects are not shown:**"), "{md}");
        assert!(
            md.contains("- <b>create</b> <code>ConfigMap dev/huge</code>"),
            "{md}"
        );

        // So many left out that not all of them can be named.
        let md = markdown_within(&vec![many[0].clone(); 500], 4_000);
        assert!(md.len() <= 4_000, "{}", md.len());
        assert!(
            md.contains("> **500 of 500 objects are not shown:**"),
            "{md}"
        );
        assert!(md.trim_end().ends_with(" more"), "{md}");
    }
}
