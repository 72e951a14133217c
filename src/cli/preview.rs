//! `driftless diff --base REV`: a pull request previewed with no cluster. The tree is read
//! as REV has it and as the work tree (or `--head REV`) has it, both rendered with the real
//! tools (an application the change leaves alone is rendered once: the render cache), and
//! what applying the change would create, update and prune is printed per application.

use std::io::{IsTerminal, Write as _};

use driftless::apply::diff::preview::{self, Preview};
use driftless::render::{Facts, NodeFacts};
use driftless::source::git::local::{self, LocalError};
use driftless::source::{Revision, TreeError};
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
    let mut trees = Vec::new();
    for (rev, dir) in sides {
        let read = match rev {
            Some(rev) => local::at_commit(path, rev, dir),
            None => local::work_tree(path),
        };
        let revision = match read {
            Ok(r) => r,
            Err(LocalError::Tree(TreeError::Read(LoadError::Invalid(errors)))) => {
                print_errors(&errors)?;
                say_which(rev)?;
                return Ok(exit::ERROR);
            }
            Err(e) => return Err(e.into()),
        };
        let name = name(rev, &revision);
        // A tree the change empties is shown as everything pruned, not refused: the
        // preview says what would happen; `apply` still asks for --allow-mass-prune.
        let loaded = load_revision(
            revision,
            &policy,
            &args.tree.policy.tools,
            true,
            Default::default(),
        )?;
        let Some(Loaded { tree, rendered }) = loaded else {
            say_which(rev)?;
            return Ok(exit::ERROR);
        };
        // What the head's render says (a chart's lookups that find nothing here).
        if rev == args.head.as_deref() {
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
            in_head.contains(&s.id) || !facts.holds(driftless::spec::app_of(&s.at.file).as_deref())
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
    std::io::stdout().lock().write_all(text.as_bytes())?;
    if super::tree::print_held(&head)? {
        return Ok(exit::ERROR);
    }
    Ok(match preview.changes_anything() {
        true => exit::DIFFERENCES,
        false => exit::OK,
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
