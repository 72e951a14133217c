//! `driftless diff --base REV`: a pull request previewed with no cluster. The tree is read
//! as REV has it and as the work tree (or `--head REV`) has it, both rendered with the real
//! tools (an application the change leaves alone is rendered once: the render cache), and
//! what applying the change would create, update and prune is printed per application.

use std::io::{IsTerminal, Write as _};

use driftless::apply::diff::preview::{self, Preview};
use driftless::render::{Facts, NodeFacts};
use driftless::source::git::local::{self, LocalError};
use driftless::source::{Revision, TreeError};
use driftless::spec::clusters::Target;
use driftless::spec::{LoadError, SpecTree};

use super::tree::{Loaded, load_revision, print_errors};
use super::{DiffArgs, DiffOutput, GlobalArgs, exit};

pub async fn preview(args: &DiffArgs, base: &str, global: &GlobalArgs) -> anyhow::Result<u8> {
    let path = &args.tree.path;
    let policy = args
        .tree
        .policy
        .policy()?
        .protect(&args.tree.engine.inventory_namespace);
    let base_dir = tempfile::tempdir()?;
    let head_dir = tempfile::tempdir()?;
    let sides = [
        (Some(base), base_dir.path()),
        (args.head.as_deref(), head_dir.path()),
    ];
    let mut revisions = Vec::new();
    for (rev, dir) in sides {
        let read = match rev {
            Some(rev) => local::at_commit(path, rev, dir),
            None => local::work_tree(path),
        };
        match read {
            Ok(r) => revisions.push((rev, r)),
            Err(LocalError::Tree(TreeError::Read(LoadError::Invalid(errors)))) => {
                print_errors(&errors)?;
                say_which(rev)?;
                return Ok(exit::ERROR);
            }
            Err(e) => return Err(e.into()),
        }
    }
    let [(base_rev, base), (head_rev, head)] = <[_; 2]>::try_from(revisions)
        .map_err(|_| anyhow::anyhow!("the preview read fewer than two trees"))?;
    let sides = Sides {
        base: (base_rev, base),
        head: (head_rev, head),
    };
    if args.tree.policy.cluster.is_some() || !policy.cluster.is_fleet() {
        let previewed = preview_for(args, global, &policy, &sides)?;
        if let Some(text) = previewed.text {
            std::io::stdout().lock().write_all(text.as_bytes())?;
        }
        return Ok(previewed.code);
    }
    // A fleet: each cluster's view of the change (its files, its variables, its declared
    // version), under its name, as `diff` of a fleet prints each cluster's.
    let clusters = policy.cluster.clusters.clone();
    let mut code = exit::OK;
    let mut docs = Vec::new();
    for cluster in clusters.iter() {
        let name = &cluster.name;
        let policy = driftless::spec::Policy {
            cluster: Target::named(clusters.clone(), name)?,
            ..policy.clone()
        };
        let mut out = std::io::stdout().lock();
        match args.output {
            DiffOutput::Text => writeln!(out, "cluster {name}:")?,
            DiffOutput::Markdown => writeln!(out, "## cluster `{name}`\n")?,
            DiffOutput::Json => {}
        }
        out.flush()?;
        drop(out);
        let previewed = preview_for(args, global, &policy, &sides)?;
        code = code.max(previewed.code);
        match (previewed.text, args.output) {
            (Some(text), DiffOutput::Json) => {
                let mut doc: serde_json::Value = serde_json::from_str(&text)?;
                if let Some(map) = doc.as_object_mut() {
                    map.insert("cluster".into(), name.clone().into());
                }
                docs.push(doc);
            }
            (Some(text), _) => std::io::stdout().lock().write_all(text.as_bytes())?,
            (None, _) => docs.push(serde_json::json!({
                "cluster": name,
                "error": format!("the tree as cluster {name} reads it is invalid"),
            })),
        }
    }
    if args.output == DiffOutput::Json {
        let doc = serde_json::json!({ "clusters": docs });
        let text = serde_json::to_string_pretty(&doc)? + "\n";
        std::io::stdout().lock().write_all(text.as_bytes())?;
    }
    Ok(code)
}

/// Both sides as read, each with the REV it was read at (`None`: the work tree).
struct Sides<'a> {
    base: (Option<&'a str>, Revision),
    head: (Option<&'a str>, Revision),
}

/// One cluster's preview: what goes to stdout (`None` when a side is invalid: its errors
/// are printed), and the exit code.
struct Previewed {
    text: Option<String>,
    code: u8,
}

/// The preview of `sides` as the cluster `policy` serves reads them: its files, its
/// variables, and charts told its declared version.
fn preview_for(
    args: &DiffArgs,
    global: &GlobalArgs,
    policy: &driftless::spec::Policy,
    sides: &Sides,
) -> anyhow::Result<Previewed> {
    let invalid = Previewed {
        text: None,
        code: exit::ERROR,
    };
    let mut trees = Vec::new();
    for (rev, revision) in [&sides.base, &sides.head] {
        let name = name(*rev, revision);
        // A tree the change empties is shown as everything pruned, not refused: the
        // preview says what would happen; `apply` still asks for --allow-mass-prune.
        let loaded = load_revision(
            revision.clone(),
            policy,
            &args.tree.policy.tools,
            true,
            super::tree::offline_facts(policy),
        )?;
        let Some(Loaded { tree, rendered }) = loaded else {
            say_which(*rev)?;
            return Ok(invalid);
        };
        // What the head's render says (a chart's lookups that find nothing here).
        if *rev == args.head.as_deref() {
            let mut err = std::io::stderr().lock();
            for n in &rendered.notices {
                writeln!(err, "notice: {n}")?;
            }
        }
        trees.push((name, tree));
    }
    let (Some((head_name, head)), Some((base_name, mut base))) = (trees.pop(), trees.pop()) else {
        anyhow::bail!("the preview read fewer than two trees");
    };
    // An app the head holds stays as the base has it: neither changed nor pruned.
    if !head.held.is_empty() {
        let facts = head.facts();
        let in_head: std::collections::BTreeSet<_> = head.specs.iter().map(|s| &s.id).collect();
        base.specs.retain(|s| {
            let app = base
                .rendered_apps
                .app_of(&s.at.file)
                .map(ToString::to_string);
            in_head.contains(&s.id) || !facts.holds(app.as_deref())
        });
    }

    let nodes: Vec<NodeFacts> = args
        .nodes
        .iter()
        .flatten()
        .filter(|n| !n.is_empty())
        .map(|n| NodeFacts {
            name: n.clone(),
            labels: Default::default(),
        })
        .collect();
    if nodes.is_empty() && has_local_services([&base, &head]) {
        eprintln!(
            "notice: localservice specs render one object per node, and there is no cluster to list them: pass --nodes to preview them"
        );
    }
    let facts = Facts {
        instance: global.instance.clone(),
        nodes,
    };
    let diffs = preview::between(
        &driftless::render::render(&base, &facts)?,
        &driftless::render::render(&head, &facts)?,
        !args.tree.engine.no_prune,
    );
    let (mut apps, base_apps) = (head.apps(), base.apps());
    for (spec, app) in base_apps {
        apps.entry(spec).or_insert(app);
    }
    let preview = Preview::new(base_name, head_name, diffs, |spec| {
        apps.get(spec).cloned().unwrap_or_else(|| spec.to_string())
    });
    let text = match args.output {
        DiffOutput::Text => preview.text(std::io::stdout().is_terminal()),
        DiffOutput::Markdown => preview.markdown(),
        DiffOutput::Json => preview.json()?,
    };
    let text = super::tree::with_held(text, args.output, &head)?;
    let code = match super::tree::print_held(&head)? {
        true => exit::ERROR,
        false if preview.changes_anything() => exit::DIFFERENCES,
        false => exit::OK,
    };
    Ok(Previewed {
        text: Some(text),
        code,
    })
}

/// `main (1a2b3c4)`, or `the work tree`.
fn name(rev: Option<&str>, revision: &Revision) -> String {
    match (rev, revision.id.as_deref()) {
        (Some(rev), Some(id)) if !id.starts_with(rev) => {
            format!("{rev} ({})", id.get(..7).unwrap_or(id))
        }
        (Some(_), Some(id)) => id.get(..7).unwrap_or(id).to_string(),
        (Some(rev), None) => rev.to_string(),
        (None, _) => "the work tree".to_string(),
    }
}

/// Which side the errors just printed are in.
fn say_which(rev: Option<&str>) -> std::io::Result<()> {
    let side = match rev {
        Some(rev) => format!("the tree at {rev}"),
        None => "the work tree".to_string(),
    };
    writeln!(std::io::stderr().lock(), "(in {side})")
}

fn has_local_services(trees: [&SpecTree; 2]) -> bool {
    trees.iter().any(|t| {
        t.specs
            .iter()
            .any(|s| s.id.kind == driftless::spec::Kind::LocalService)
    })
}
