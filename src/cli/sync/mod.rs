//! `driftless apply` and `driftless diff`: the one-shot sync commands (binary edge).

mod wait;

use std::collections::BTreeSet;
use std::io::{IsTerminal, Write as _};
use std::time::Duration;

use anyhow::Context as _;

use super::{ApplyArgs, DiffArgs, DiffOutput, GlobalArgs, TreeArgs, exit};
use driftless::apply::diff::{self, DiffAction};
use driftless::apply::{Action, Engine, SyncReport};
use driftless::cluster::Selection;
use driftless::gate::Poll;
use driftless::health::Status;
use driftless::object::ObjKey;
use driftless::render::{Facts, Object};
use driftless::spec::SpecTree;
use wait::{Interrupt, on_interrupt, say, wait, wait_for_deletions};

/// The tree's specs, an engine for the selected cluster, and the objects they render;
/// `None` for an invalid tree (its errors printed), which applies and prunes nothing.
async fn prepare(
    args: &TreeArgs,
    global: &GlobalArgs,
    selection: &Selection,
) -> anyhow::Result<Option<(SpecTree, Engine, Vec<Object>)>> {
    let policy = args
        .policy
        .policy()?
        .protect(&args.engine.inventory_namespace);
    // Charts are told the cluster's version and APIs, as Argo CD tells them: the client
    // comes first for a tree that has charts.
    let early = match super::tree::uses_helm(&args.path) {
        true => Some(
            selection
                .client()
                .await
                .context("connecting to the cluster")?,
        ),
        false => None,
    };
    // A chart's `lookup` reads the cluster through a read-only listener, kept until the
    // tree is rendered; each command reads the cluster anew.
    let lookup = match &early {
        Some(client) => Some(driftless::cluster::lookup::start(client.clone()).await?),
        None => None,
    };
    let facts = match &early {
        Some(client) => driftless::hydrate::helm::ClusterFacts {
            lookup: lookup
                .as_ref()
                .map(|l| driftless::hydrate::stage::LookupAccess {
                    kubeconfig: l.kubeconfig.clone(),
                    reading: std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_nanos() as u64),
                }),
            ..driftless::cluster::chart_facts(client)
                .await
                .context("reading the cluster's version and APIs for charts")?
        },
        None => Default::default(),
    };
    let Some(loaded) = super::tree::load_rendered_for(
        &args.path,
        &policy,
        &args.policy.tools,
        args.engine.allow_mass_prune,
        facts,
    )?
    else {
        return Ok(None);
    };
    let tree = loaded.tree;
    let client = match early {
        Some(client) => client,
        None => selection
            .client()
            .await
            .context("connecting to the cluster")?,
    };
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
    say_held_back(&tree);
    let interrupt = on_interrupt();
    // Waves and hooks wait for readiness within the sync, each stage up to --timeout.
    let gate = Poll {
        engine: &engine,
        timeout: args.timeout,
        say: Some(say),
        cancel: Some(interrupt.clone()),
    };
    let report = match tree.has_dependencies() {
        false => engine.sync(&objects, &tree.facts(), &gate).await?,
        true => match in_waves(&engine, &tree, &objects, args.timeout, &interrupt).await? {
            Ok(report) => report,
            Err(code) => {
                super::tree::print_held(&tree)?;
                return Ok(code);
            }
        },
    };
    print_sync(&tree, &report)?;
    if interrupt.borrow().is_some() {
        eprintln!(
            "interrupted: what is listed above was applied (and recorded), nothing was pruned; \
             apply again to finish"
        );
        eprintln!("{} API writes", engine.writes.total());
        return Ok(exit::INTERRUPTED);
    }
    let mut code = if report.ok() {
        exit::OK
    } else {
        exit::DIFFERENCES
    };
    if args.wait && report.prune.waiting().next().is_some() {
        // What prune left being deleted (a PVC's finalizer): waited for too, so an
        // uninstall ends with nothing left rather than needing a second run.
        if !wait_for_deletions(&engine, &tree, &objects, args.timeout).await? {
            code = exit::DIFFERENCES;
        }
    }
    if args.wait {
        let mut failed: BTreeSet<String> = report
            .objects
            .iter()
            .filter(|o| o.action.is_error())
            .map(|o| o.key.to_string())
            .collect();
        // A sync stopped at a stage never reached the later ones: their objects will not
        // appear by waiting, and count as failed to apply.
        if report.stopped.is_some() {
            let reached: BTreeSet<&ObjKey> = report.objects.iter().map(|o| &o.key).collect();
            failed.extend(
                driftless::health::expected(&objects)
                    .into_iter()
                    .filter(|e| !reached.contains(&e.key))
                    .map(|e| e.display),
            );
        }
        let (waited, waited_objects) = not_held_back(&tree, &objects);
        let health = wait(
            &engine,
            &waited,
            &waited_objects,
            &failed,
            args.timeout,
            &interrupt,
        )
        .await?;
        if interrupt.borrow().is_some() {
            eprintln!("interrupted while waiting for readiness: everything was applied");
            return Ok(exit::INTERRUPTED);
        }
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
    // Said last: the apps this revision left as they were, and why.
    let held_in_tree = super::tree::print_held(&tree)?;
    for (app, why) in &report.held {
        eprintln!("held: app {app}, neither applied nor pruned: the apiserver refused {why}");
    }
    if held_in_tree || !report.held.is_empty() {
        code = exit::ERROR;
    }
    Ok(code)
}

/// Says which specs the tree holds back (`driftless.dev/suspend`, Flux's `suspend: true`):
/// the engine leaves their objects as they are, applied and pruned by no one.
fn say_held_back(tree: &SpecTree) {
    let mut by_reason: std::collections::BTreeMap<&str, usize> = Default::default();
    for s in &tree.specs {
        if let Some(reason) = &s.policy.suspended {
            *by_reason.entry(reason.as_str()).or_default() += 1;
        }
    }
    for (reason, n) in by_reason {
        eprintln!(
            "left as they are: {} suspended in the tree: {reason}",
            plural(n, "spec")
        );
    }
}

/// The specs (and their objects) a wait for readiness waits for: not those the tree holds
/// back, which nothing applies.
fn not_held_back(tree: &SpecTree, objects: &[Object]) -> (SpecTree, Vec<Object>) {
    let specs = tree
        .specs
        .iter()
        .filter(|s| s.policy.suspended.is_none())
        .cloned()
        .collect();
    let objects = objects
        .iter()
        .filter(|o| o.policy.suspended.is_none())
        .cloned()
        .collect();
    (
        SpecTree {
            specs,
            settings: tree.settings.clone(),
            rendered: tree.rendered.clone(),
            rendered_apps: tree.rendered_apps.clone(),
            held: tree.held.clone(),
            all_or_nothing: tree.all_or_nothing,
        },
        objects,
    )
}

/// A tree with `depends-on`: each wave of specs but the last applied on its own and
/// waited for (within `timeout`, all waves together), then one whole sync, which applies
/// the last wave, finds the earlier ones unchanged, and prunes. What an earlier wave
/// wrote is reported as its write. `Err(exit code)` when a wave failed or was not ready
/// in time: what depends on it is not applied, and nothing is pruned.
async fn in_waves(
    engine: &Engine,
    tree: &SpecTree,
    objects: &[Object],
    timeout: Duration,
    interrupt: &Interrupt,
) -> anyhow::Result<Result<SyncReport, u8>> {
    let deadline = tokio::time::Instant::now() + timeout;
    let facts = tree.facts();
    let waves = tree.waves();
    let mut written: Vec<driftless::apply::ObjectResult> = Vec::new();
    for (n, wave) in waves.iter().enumerate().take(waves.len().saturating_sub(1)) {
        let mine: Vec<Object> = objects
            .iter()
            .filter(|o| wave.contains(&o.spec))
            .cloned()
            .collect();
        let specs = SpecTree {
            specs: tree
                .specs
                .iter()
                .filter(|s| wave.contains(&s.id))
                .cloned()
                .collect(),
            settings: tree.settings.clone(),
            rendered: tree.rendered.clone(),
            rendered_apps: tree.rendered_apps.clone(),
            held: tree.held.clone(),
            all_or_nothing: tree.all_or_nothing,
        };
        let gate = Poll {
            engine,
            timeout: deadline.saturating_duration_since(tokio::time::Instant::now()),
            say: Some(say),
            cancel: Some(interrupt.clone()),
        };
        let report = engine
            .sync_scope(&mine, &facts, driftless::apply::Scope::Only(wave), &gate)
            .await?;
        written.extend(
            report
                .objects
                .iter()
                .filter(|o| o.action.is_write())
                .cloned(),
        );
        if interrupt.borrow().is_some() {
            print_sync(&specs, &report)?;
            eprintln!("interrupted: what depends on them was not applied, and nothing was pruned");
            return Ok(Err(exit::INTERRUPTED));
        }
        if !report.ok() {
            print_sync(&specs, &report)?;
            eprintln!(
                "not applying what depends on them: {} of wave {} failed",
                plural(
                    report
                        .objects
                        .iter()
                        .filter(|o| o.action.is_error())
                        .count(),
                    "object"
                ),
                n + 1
            );
            return Ok(Err(exit::DIFFERENCES));
        }
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        eprintln!(
            "waiting for {} before applying what depends on them",
            plural(wave.len(), "spec")
        );
        let (specs_waited, mine_waited) = not_held_back(&specs, &mine);
        let health = wait(
            engine,
            &specs_waited,
            &mine_waited,
            &BTreeSet::new(),
            left,
            interrupt,
        )
        .await?;
        if interrupt.borrow().is_some() {
            // The caller says it: what this wave applied is in `written`, nothing more.
            print_sync(&specs, &report)?;
            eprintln!("interrupted: what depends on them was not applied, and nothing was pruned");
            return Ok(Err(exit::INTERRUPTED));
        }
        let unready: Vec<&str> = health
            .iter()
            .filter(|h| !h.ready)
            .map(|h| h.id.as_str())
            .collect();
        if !unready.is_empty() {
            print_sync(&specs, &report)?;
            eprintln!(
                "not ready within --timeout {}: {}; what depends on them was not applied, and nothing was pruned",
                humantime::format_duration(timeout),
                unready.join(", ")
            );
            return Ok(Err(exit::DIFFERENCES));
        }
    }
    let gate = Poll {
        engine,
        timeout: deadline.saturating_duration_since(tokio::time::Instant::now()),
        say: Some(say),
        cancel: Some(interrupt.clone()),
    };
    let mut report = engine.sync(objects, &facts, &gate).await?;
    for o in &mut report.objects {
        if o.action == Action::Unchanged
            && let Some(w) = written.iter().find(|w| w.key == o.key)
        {
            o.action = w.action.clone();
        }
    }
    Ok(Ok(report))
}

fn plural(n: usize, noun: &str) -> String {
    match n {
        1 => format!("1 {noun}"),
        n => format!("{n} {noun}s"),
    }
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
        let summary = if summary.is_empty() && report.stopped.is_some() {
            "not applied".to_string()
        } else if summary.is_empty() {
            "no objects".to_string()
        } else {
            summary.join(", ")
        };
        writeln!(out, "{:<60} {summary}", spec.id.to_string())?;
        for o in mine {
            if let Action::Conflict(m) | Action::Failed(m) = &o.action {
                writeln!(out, "  {} {}: {m}", o.action.label(), o.key)?;
            }
            for w in &o.warnings {
                writeln!(out, "  warning {}: {w}", o.key)?;
            }
        }
    }
    if let Some(why) = &report.stopped {
        writeln!(out, "stopped: {why}")?;
    }
    if let Some(why) = &report.prune.refused {
        writeln!(out, "prune refused: {why}")?;
    }
    for p in &report.prune.objects {
        let what = p.action.to_string();
        match &p.waiting {
            Some(on) => writeln!(out, "{} ({}): {what}; {on}", p.key, p.spec)?,
            None => writeln!(out, "{} ({}): {what}", p.key, p.spec)?,
        }
    }
    Ok(())
}

pub async fn diff(
    args: &DiffArgs,
    global: &GlobalArgs,
    selection: &Selection,
) -> anyhow::Result<u8> {
    let Some(one) = diff_of(args, global, selection).await? else {
        return Ok(exit::ERROR);
    };
    std::io::stdout().lock().write_all(one.text.as_bytes())?;
    Ok(one.code)
}

/// One cluster's diff, as `--output` prints it, and the exit code it makes.
pub(super) struct Diffed {
    pub text: String,
    pub code: u8,
}

/// The diff of the tree against the cluster `selection` reaches; `None` for an invalid
/// tree (its errors printed). The held apps are told on stderr.
pub(super) async fn diff_of(
    args: &DiffArgs,
    global: &GlobalArgs,
    selection: &Selection,
) -> anyhow::Result<Option<Diffed>> {
    let Some((tree, engine, objects)) = prepare(&args.tree, global, selection).await? else {
        return Ok(None);
    };
    let diffs = engine.diff(&objects, &tree.facts()).await?;
    let text = match args.output {
        DiffOutput::Text => driftless::report::status::releases::diff_text(
            &tree,
            &diffs,
            std::io::stdout().is_terminal(),
        ),
        DiffOutput::Markdown => diff::markdown(&diffs),
        DiffOutput::Json => diff::json(&diffs)?,
    };
    let text = super::tree::with_held(text, args.output, &tree)?;
    let actions: Vec<_> = diffs.iter().filter_map(|d| d.change.action()).collect();
    let held = super::tree::print_held(&tree)?;
    let code = if held || actions.contains(&DiffAction::Error) {
        exit::ERROR
    } else if actions.is_empty() {
        exit::OK
    } else {
        exit::DIFFERENCES
    };
    Ok(Some(Diffed { text, code }))
}
