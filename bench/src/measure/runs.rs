//! The main runs: a cold apply, a no-op apply and the diffs, by driftless, kubectl and a
//! raw server-side apply loop, each into namespaces of its own; and what their runs sum to.

use super::cpu::settle;
use super::*;

impl Bench<'_> {
    /// Writes the tree; returns its directory.
    pub(super) fn write_tree(
        &self,
        tree: &Tree,
        name: &str,
        edits: &Edits,
    ) -> anyhow::Result<PathBuf> {
        let dir = self.work.join(name);
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        tree.write(&dir, edits)
            .with_context(|| format!("writing {}", dir.display()))?;
        Ok(dir)
    }

    /// `driftless render` of a tree, with its namespaces first: what kubectl applies.
    pub(super) async fn render_for_kubectl(
        &self,
        dir: &Path,
        tree: &Tree,
        instance: &str,
        file: &str,
    ) -> anyhow::Result<PathBuf> {
        let t = timed(
            self.driftless_cmd(instance)
                .arg("render")
                .arg(dir)
                .arg("--nodes")
                .arg(self.node_list()),
        )
        .await?;
        if t.code != 0 {
            bail!("driftless render failed: {}", t.stderr);
        }
        let mut yaml = String::new();
        for ns in tree.namespace_names() {
            yaml.push_str(&format!(
                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n---\n"
            ));
        }
        yaml.push_str(&t.stdout);
        let path = self.work.join(file);
        std::fs::write(&path, yaml)?;
        Ok(path)
    }

    pub(super) async fn driftless_apply(
        &self,
        dir: &Path,
        instance: &str,
    ) -> anyhow::Result<(f64, u64)> {
        let t = timed(
            self.driftless_cmd(instance)
                .arg("apply")
                .arg(dir)
                .arg("--concurrency")
                .arg(self.args.concurrency.to_string()),
        )
        .await?;
        if t.code != 0 {
            bail!(
                "driftless apply exited {}: {}\n{}",
                t.code,
                t.stderr,
                t.stdout
                    .lines()
                    .filter(|l| l.contains("failed") || l.contains("conflict"))
                    .take(10)
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
        let writes = api_writes(&t.stderr)
            .ok_or_else(|| anyhow!("no \"N API writes\" line in: {}", t.stderr))?;
        Ok((t.secs, writes))
    }

    pub(super) async fn kubectl_apply(&self, file: &Path) -> anyhow::Result<f64> {
        let t = timed(
            self.kubectl_cmd()
                .args(["apply", "--server-side", "--field-manager", "kubectl", "-f"])
                .arg(file),
        )
        .await?;
        if t.code != 0 {
            bail!("kubectl apply exited {}: {}", t.code, t.stderr);
        }
        Ok(t.secs)
    }

    /// The apiserver's ceiling for these objects: SSA PATCHes with the same concurrency
    /// as driftless, no reads, no inventory. Namespaces first (applied too).
    pub(super) async fn raw_ssa(
        &self,
        dir: &Path,
        tree: &Tree,
        instance: &str,
    ) -> anyhow::Result<f64> {
        let specs = driftless::spec::load_dir(dir).map_err(|e| anyhow!("{e}"))?;
        let objects = driftless::render::render(
            &specs,
            &driftless::render::Facts {
                instance: instance.to_string(),
                nodes: self.nodes.clone(),
            },
        )?;
        let resolver = driftless::apply::Resolver::new(self.client.clone());
        let mut apis = Vec::with_capacity(objects.len());
        for o in &objects {
            let r = resolver
                .resolve(&o.api_version, &o.kind)
                .await
                .with_context(|| format!("discovering {} {}", o.api_version, o.kind))?;
            apis.push(r.api(&self.client, o.namespace.as_deref()));
        }
        let pp = PatchParams::apply("bench-raw").force();
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let start = Instant::now();
        for ns in tree.namespace_names() {
            let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            namespaces.patch(&ns, &pp, &Patch::Apply(&body)).await?;
        }
        let failures: Vec<String> = futures::stream::iter(objects.iter().zip(&apis))
            .map(|(o, api): (_, &Api<DynamicObject>)| {
                let pp = &pp;
                async move {
                    api.patch(&o.name, pp, &Patch::Apply(&o.body.value()))
                        .await
                        .err()
                        .map(|e| format!("{}: {e}", o.display_ref()))
                }
            })
            .buffer_unordered(self.args.concurrency.max(1))
            .filter_map(|e| async move { e })
            .collect()
            .await;
        let secs = start.elapsed().as_secs_f64();
        if let Some(first) = failures.first() {
            bail!("raw SSA: {} failures, first: {first}", failures.len());
        }
        Ok(secs)
    }

    pub(super) async fn driftless_diff(
        &self,
        dir: &Path,
        instance: &str,
    ) -> anyhow::Result<(f64, i32, usize)> {
        let t = timed(
            self.driftless_cmd(instance)
                .arg("diff")
                .arg(dir)
                .arg("--concurrency")
                .arg(self.args.concurrency.to_string()),
        )
        .await?;
        if t.code > 1 {
            bail!("driftless diff exited {}: {}", t.code, t.stderr);
        }
        let shown = t.stdout.lines().filter(|l| l.starts_with("+++ ")).count();
        Ok((t.secs, t.code, shown))
    }

    pub(super) async fn kubectl_diff(&self, file: &Path) -> anyhow::Result<(f64, i32, usize)> {
        let t = timed(
            self.kubectl_cmd()
                .args(["diff", "--server-side", "--field-manager", "kubectl", "-f"])
                .arg(file),
        )
        .await?;
        if t.code > 1 {
            bail!("kubectl diff exited {}: {}", t.code, t.stderr);
        }
        let shown = t.stdout.lines().filter(|l| l.starts_with("+++ ")).count();
        Ok((t.secs, t.code, shown))
    }

    /// Cold sync, no-op resync and diff, one run: each tool on its own namespace set.
    pub(super) async fn main_run(&mut self, r: usize) -> anyhow::Result<MainRun> {
        let n = self.args.n;
        let with_kubectl = !self.args.skips("kubectl");
        let (pd, pk, pr) = (
            format!("bench-d{r}"),
            format!("bench-k{r}"),
            format!("bench-r{r}"),
        );
        let (td, tk, tr) = (self.tree(n, &pd), self.tree(n, &pk), self.tree(n, &pr));
        let changed = generate::one_percent(n);
        let none = Edits::default();
        let dir_d = self.write_tree(&td, &format!("run{r}/driftless"), &none)?;
        let dir_d1 = self.write_tree(&td, &format!("run{r}/driftless-1pct"), &changed)?;
        let dir_k = self.write_tree(&tk, &format!("run{r}/kubectl"), &none)?;
        let dir_k1 = self.write_tree(&tk, &format!("run{r}/kubectl-1pct"), &changed)?;
        let dir_r = self.write_tree(&tr, &format!("run{r}/raw"), &none)?;
        let yaml_k = self
            .render_for_kubectl(&dir_k, &tk, &pk, &format!("run{r}/kubectl.yaml"))
            .await?;
        let yaml_k1 = self
            .render_for_kubectl(&dir_k1, &tk, &pk, &format!("run{r}/kubectl-1pct.yaml"))
            .await?;

        // Rotate the order so no tool always runs first (or on the busiest cluster).
        let mut order = vec![Tool::Driftless, Tool::Raw];
        if with_kubectl {
            order.insert(1, Tool::Kubectl);
        }
        let len = order.len();
        order.rotate_left(r % len);
        let (mut cold_d, mut cold_k, mut cold_r) = (None, None, None);
        let mut cpu = Vec::new();
        for tool in order {
            eprintln!("run {r}: cold sync, {tool:?}");
            let probe = CpuProbe::start();
            let label = match tool {
                Tool::Driftless => {
                    cold_d = Some(self.driftless_apply(&dir_d, &pd).await?);
                    "cold/driftless"
                }
                Tool::Kubectl => {
                    cold_k = Some(self.kubectl_apply(&yaml_k).await?);
                    "cold/kubectl"
                }
                Tool::Raw => {
                    // The probe covers discovery and rendering too; the time does not.
                    cold_r = Some(self.raw_ssa(&dir_r, &tr, &pr).await?);
                    "cold/raw"
                }
            };
            cpu.push((label.to_string(), probe.finish()));
        }
        let (cold_driftless, cold_driftless_writes) =
            cold_d.ok_or_else(|| anyhow!("driftless did not run"))?;
        let cold_raw = cold_r.ok_or_else(|| anyhow!("the raw loop did not run"))?;
        eprintln!(
            "run {r}: cold driftless {cold_driftless:.2}s ({cold_driftless_writes} writes), kubectl {}, raw {cold_raw:.2}s",
            cold_k.map_or("-".into(), |k| format!("{k:.2}s"))
        );

        let mut out = MainRun {
            cold_driftless,
            cold_driftless_writes,
            cold_kubectl: cold_k,
            cold_raw,
            noop_driftless: None,
            noop_kubectl: None,
            kubectl_warm_writes: None,
            diff_unchanged: None,
            diff_changed: None,
            cpu,
        };
        if !self.args.skips("noop") {
            eprintln!("run {r}: no-op resync");
            // Each tool's no-op on a quiet cluster: right after a cold sync the
            // controllers are still working through the new objects, which slowed
            // whichever tool came first (driftless) against the one after it.
            settle().await;
            let probe = CpuProbe::start();
            out.noop_driftless = Some(self.driftless_apply(&dir_d, &pd).await?);
            out.cpu.push(("noop/driftless".into(), probe.finish()));
            if with_kubectl {
                settle().await;
                let probe = CpuProbe::start();
                out.noop_kubectl = Some(self.kubectl_apply(&yaml_k).await?);
                out.cpu.push(("noop/kubectl".into(), probe.finish()));
                if r == 0 {
                    out.kubectl_warm_writes = self.kubectl_patches(&yaml_k).await.ok();
                }
            }
            eprintln!(
                "run {r}: no-op driftless {:?}, kubectl {:?}",
                out.noop_driftless, out.noop_kubectl
            );
        }
        if !self.args.skips("diff") {
            eprintln!("run {r}: diff");
            let mut cpu = Vec::new();
            let mut diff_pair =
                async |what: &str, dir: &Path, yaml: &Path| -> anyhow::Result<DiffRun> {
                    let probe = CpuProbe::start();
                    let (secs, code, shown) = self.driftless_diff(dir, &pd).await?;
                    cpu.push((format!("diff-{what}/driftless"), probe.finish()));
                    let kubectl = if with_kubectl {
                        let probe = CpuProbe::start();
                        let k = self.kubectl_diff(yaml).await?;
                        cpu.push((format!("diff-{what}/kubectl"), probe.finish()));
                        Some(k)
                    } else {
                        None
                    };
                    Ok(DiffRun {
                        driftless: secs,
                        driftless_exit: code,
                        driftless_shown: shown,
                        kubectl,
                    })
                };
            out.diff_unchanged = Some(diff_pair("unchanged", &dir_d, &yaml_k).await?);
            out.diff_changed = Some(diff_pair("1pct", &dir_d1, &yaml_k1).await?);
            out.cpu.extend(cpu);
        }
        self.cleanup(&[pd.clone(), pk, pr], &[pd]).await?;
        Ok(out)
    }

    /// PATCH requests one warm `kubectl apply --server-side` sends (from its `-v=6` log).
    pub(super) async fn kubectl_patches(&self, file: &Path) -> anyhow::Result<u64> {
        let t = timed(
            self.kubectl_cmd()
                .args([
                    "apply",
                    "--server-side",
                    "--field-manager",
                    "kubectl",
                    "-v=6",
                    "-f",
                ])
                .arg(file),
        )
        .await?;
        Ok(t.stderr
            .lines()
            .filter(|l| l.contains("PATCH https://"))
            .count() as u64)
    }

    /// Deletes the namespaces named `<prefix>-*` and the inventories of `instances`, then
    /// waits (untimed) until the namespaces are gone.
    pub(super) async fn cleanup(
        &self,
        prefixes: &[String],
        instances: &[String],
    ) -> anyhow::Result<()> {
        let ns_api: Api<Namespace> = Api::all(self.client.clone());
        let matches = |name: &str| prefixes.iter().any(|p| name.starts_with(&format!("{p}-")));
        // Inventories of the given instances, or (no instances) of any bench instance.
        let cms: Api<ConfigMap> = Api::namespaced(self.client.clone(), "driftless-system");
        if let Ok(list) = cms
            .list(&ListParams::default().labels("driftless.dev/inventory-of"))
            .await
        {
            for cm in list.items {
                let of = cm
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("driftless.dev/inventory-of"))
                    .cloned()
                    .unwrap_or_default();
                let ours = if instances.is_empty() {
                    prefixes.iter().any(|p| of.starts_with(&format!("{p}-")))
                } else {
                    instances.contains(&of)
                };
                if ours && let Some(name) = &cm.metadata.name {
                    let _ = cms.delete(name, &DeleteParams::default()).await;
                }
            }
        }
        let start = Instant::now();
        let mut deleted = false;
        let mut last_delete = Instant::now();
        loop {
            let left: Vec<String> = ns_api
                .list(&ListParams::default())
                .await?
                .items
                .into_iter()
                .filter_map(|ns| ns.metadata.name)
                .filter(|name| matches(name))
                .collect();
            if left.is_empty() {
                break;
            }
            // Again every 30 s: a namespace recreated meanwhile (by a daemon that was
            // still stopping) would otherwise be waited for forever.
            if !deleted || last_delete.elapsed() > Duration::from_secs(30) {
                last_delete = Instant::now();
                for name in &left {
                    match ns_api.delete(name, &DeleteParams::background()).await {
                        Ok(_) => {}
                        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                if !deleted {
                    eprintln!("deleting {} namespaces", left.len());
                }
                deleted = true;
            }
            if start.elapsed() > Duration::from_secs(900) {
                bail!("namespaces still terminating after 15 min: {left:?}");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        if deleted {
            eprintln!("namespaces gone in {:.1}s", start.elapsed().as_secs_f64());
        }
        Ok(())
    }
}

pub(super) fn cold_of(runs: &[MainRun], objects: usize) -> anyhow::Result<Option<Cold>> {
    if runs.is_empty() {
        return Ok(None);
    }
    let objs = objects as f64;
    let d: Vec<f64> = runs.iter().map(|r| r.cold_driftless).collect();
    let raw: Vec<f64> = runs.iter().map(|r| r.cold_raw).collect();
    let k: Vec<f64> = runs.iter().filter_map(|r| r.cold_kubectl).collect();
    let rate = |xs: &[f64]| xs.iter().map(|s| objs / s).collect::<Vec<_>>();
    Ok(Some(Cold {
        driftless_s: summary(&d)?,
        kubectl_s: opt_summary(&k),
        raw_s: summary(&raw)?,
        driftless_objs_per_s: summary(&rate(&d))?,
        kubectl_objs_per_s: opt_summary(&rate(&k)),
        raw_objs_per_s: summary(&rate(&raw))?,
        driftless_vs_raw: summary(
            &runs
                .iter()
                .map(|r| r.cold_raw / r.cold_driftless)
                .collect::<Vec<_>>(),
        )?,
        speedup_vs_kubectl: opt_summary(
            &runs
                .iter()
                .filter_map(|r| r.cold_kubectl.map(|k| k / r.cold_driftless))
                .collect::<Vec<_>>(),
        ),
        driftless_writes: runs.iter().map(|r| r.cold_driftless_writes).collect(),
    }))
}

pub(super) fn noop_of(runs: &[MainRun]) -> anyhow::Result<Noop> {
    let d: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.noop_driftless.map(|x| x.0))
        .collect();
    let k: Vec<f64> = runs.iter().filter_map(|r| r.noop_kubectl).collect();
    Ok(Noop {
        driftless_s: summary(&d)?,
        driftless_writes: runs
            .iter()
            .filter_map(|r| r.noop_driftless.map(|x| x.1))
            .collect(),
        kubectl_s: opt_summary(&k),
        kubectl_writes: runs.iter().find_map(|r| r.kubectl_warm_writes),
        ratio: opt_summary(
            &runs
                .iter()
                .filter_map(|r| Some(r.noop_driftless?.0 / r.noop_kubectl?))
                .collect::<Vec<_>>(),
        ),
    })
}

pub(super) fn diff_of(runs: &[MainRun], n: usize) -> anyhow::Result<Diffs> {
    let pair = |get: &dyn Fn(&MainRun) -> Option<&DiffRun>| -> anyhow::Result<DiffPair> {
        let ds: Vec<&DiffRun> = runs.iter().filter_map(get).collect();
        let d: Vec<f64> = ds.iter().map(|x| x.driftless).collect();
        let k: Vec<f64> = ds.iter().filter_map(|x| x.kubectl.map(|k| k.0)).collect();
        Ok(DiffPair {
            driftless_s: summary(&d)?,
            driftless_exit: ds.iter().map(|x| x.driftless_exit).collect(),
            kubectl_s: opt_summary(&k),
            kubectl_exit: ds.iter().filter_map(|x| x.kubectl.map(|k| k.1)).collect(),
            kubectl_objects_shown: ds.iter().filter_map(|x| x.kubectl.map(|k| k.2)).collect(),
            driftless_objects_shown: ds.iter().map(|x| x.driftless_shown).collect(),
            speedup: opt_summary(
                &ds.iter()
                    .filter_map(|x| x.kubectl.map(|k| k.0 / x.driftless))
                    .collect::<Vec<_>>(),
            ),
        })
    };
    Ok(Diffs {
        unchanged: pair(&|r| r.diff_unchanged.as_ref())?,
        changed: pair(&|r| r.diff_changed.as_ref())?,
        changed_specs: generate::one_percent(n).image.len(),
    })
}
