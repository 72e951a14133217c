//! `driftless apply` and `driftless diff`: the one-shot sync commands (binary edge).

use std::io::{IsTerminal, Write as _};
use std::time::Duration;

use anyhow::Context as _;

use super::{ApplyArgs, DiffArgs, GlobalArgs, TreeArgs, exit, load};
use driftless::apply::prune;
use driftless::apply::{Action, Engine, SyncReport};
use driftless::cluster::Selection;
use driftless::health::{SpecHealth, Status};
use driftless::render::{Facts, Object};
use driftless::spec::SpecTree;

/// The tree's specs, an engine for the selected cluster, and the objects they render;
/// `None` for an invalid tree (its errors printed), which applies and prunes nothing.
async fn prepare(
    args: &TreeArgs,
    global: &GlobalArgs,
    selection: &Selection,
) -> anyhow::Result<Option<(SpecTree, Engine, Vec<Object>)>> {
    let policy = args
        .policy
        .policy()
        .protect(&args.engine.inventory_namespace);
    let Some(tree) = load(&args.path, &policy)? else {
        return Ok(None);
    };
    let client = selection
        .client()
        .await
        .context("connecting to the cluster")?;
    let nodes = if tree
        .specs
        .iter()
        .any(|s| s.id.kind == driftless::spec::Kind::LocalService)
    {
        driftless::cluster::node_facts(&client)
            .await
            .context("listing nodes")?
    } else {
        Vec::new()
    };
    let objects = driftless::render::render(
        &tree,
        &Facts {
            instance: global.instance.clone(),
            nodes,
        },
    )?;
    let engine = Engine::new(client, args.engine.options(&global.instance));
    Ok(Some((tree, engine, objects)))
}

pub async fn apply(
    args: &ApplyArgs,
    global: &GlobalArgs,
    selection: &Selection,
) -> anyhow::Result<u8> {
    let Some((tree, engine, objects)) = prepare(&args.tree, global, selection).await? else {
        return Ok(exit::ERROR);
    };
    let report = engine.sync(&objects, &tree.adopt_specs()).await?;
    print_sync(&tree, &report)?;
    let mut code = if report.ok() {
        exit::OK
    } else {
        exit::DIFFERENCES
    };
    if args.wait {
        let health = wait(&engine, &tree, &objects, args.timeout).await?;
        let mut out = std::io::stdout().lock();
        for h in &health {
            let mark = match h.status {
                Status::Current => "ready",
                Status::Failed => "FAILED",
                _ => "not ready",
            };
            let reason = h
                .reason
                .as_deref()
                .map(|r| format!(" [{r}]"))
                .unwrap_or_default();
            writeln!(out, "{:<60} {mark}{reason}: {}", h.id, h.message)?;
        }
        if health.iter().any(|h| !h.ready) {
            code = exit::DIFFERENCES;
        }
    }
    eprintln!("{} API writes", engine.writes.total());
    Ok(code)
}

fn print_sync(tree: &SpecTree, report: &SyncReport) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    for spec in &tree.specs {
        let mine: Vec<_> = report
            .objects
            .iter()
            .filter(|o| o.spec == spec.id)
            .collect();
        let mut counts: Vec<(&str, usize)> = Vec::new();
        for o in &mine {
            match counts.iter_mut().find(|(l, _)| *l == o.action.label()) {
                Some((_, n)) => *n += 1,
                None => counts.push((o.action.label(), 1)),
            }
        }
        let summary: Vec<String> = counts.iter().map(|(l, n)| format!("{n} {l}")).collect();
        let summary = if summary.is_empty() {
            "no objects".to_string()
        } else {
            summary.join(", ")
        };
        writeln!(out, "{:<60} {summary}", spec.id.to_string())?;
        for o in mine {
            if let Action::Conflict(m) | Action::Failed(m) = &o.action {
                writeln!(out, "  {} {}: {m}", o.action.label(), o.key)?;
            }
        }
    }
    if let Some(why) = &report.prune.refused {
        writeln!(out, "prune refused: {why}")?;
    }
    for p in &report.prune.objects {
        let what = match &p.action {
            prune::Action::Pruned => "pruned".to_string(),
            prune::Action::AlreadyGone => "already gone".to_string(),
            prune::Action::KeptNamespace => "kept (namespaces are never pruned)".to_string(),
            prune::Action::LeftAlone(why) => format!("left alone: {why}"),
            prune::Action::Failed(e) => format!("prune failed: {e}"),
        };
        writeln!(out, "{} ({}): {what}", p.key, p.spec)?;
    }
    Ok(())
}

/// Polls until every spec is ready or failed, or `timeout` passes; the last health.
async fn wait(
    engine: &Engine,
    tree: &SpecTree,
    objects: &[Object],
    timeout: Duration,
) -> anyhow::Result<Vec<SpecHealth>> {
    let deadline = tokio::time::Instant::now() + timeout;
    let tty = std::io::stderr().is_terminal();
    let expected = driftless::health::expected(objects);
    loop {
        let observed = engine.observe(objects).await?;
        let health = driftless::health::tree_health(
            &tree.specs,
            &expected,
            &observed,
            k8s_openapi::jiff::Timestamp::now(),
        );
        let ready = health.iter().filter(|h| h.ready).count();
        let settled = health.iter().all(|h| h.status != Status::InProgress);
        if tty {
            eprint!("\r\x1b[2Kwaiting: {ready}/{} specs ready", health.len());
        }
        if settled || tokio::time::Instant::now() >= deadline {
            if tty {
                eprintln!();
            }
            if !settled {
                eprintln!(
                    "timed out after {} waiting for readiness",
                    humantime::format_duration(timeout)
                );
            }
            return Ok(health);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

pub async fn diff(
    args: &DiffArgs,
    global: &GlobalArgs,
    selection: &Selection,
) -> anyhow::Result<u8> {
    let Some((tree, engine, objects)) = prepare(&args.tree, global, selection).await? else {
        return Ok(exit::ERROR);
    };
    let diffs = engine.diff(&objects, &tree.adopt_specs()).await?;
    let color = std::io::stdout().is_terminal();
    let mut out = std::io::stdout().lock();
    let (mut changed, mut errors) = (false, false);
    for d in &diffs {
        match d.change {
            driftless::apply::diff::Change::Unchanged => continue,
            driftless::apply::diff::Change::Error(_) => errors = true,
            _ => changed = true,
        }
        out.write_all(driftless::apply::diff::render_change(d, color).as_bytes())?;
    }
    Ok(if errors {
        exit::ERROR
    } else if changed {
        exit::DIFFERENCES
    } else {
        exit::OK
    })
}
