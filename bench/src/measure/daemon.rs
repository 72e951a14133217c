//! The daemon's runs: a first sync and edits on one tree, and how it scales with the
//! number of specs.

use super::cpu::settle;
use super::*;

impl Bench<'_> {
    /// The daemon on an N-spec tree: first sync, then `edits` edits (one elasticweb
    /// scaled from 0 to 1 replica each), timed to applied and to ready; memory.
    pub(super) async fn daemon(
        &mut self,
        n: usize,
        prefix: &str,
        edits: usize,
    ) -> anyhow::Result<Daemon> {
        let tree = self.tree(n, prefix);
        let mut state = Edits::default();
        let dir = self.write_tree(&tree, &format!("{prefix}/specs"), &state)?;
        let status_path = self.work.join(format!("{prefix}/status.json"));
        let log_path = self.work.join(format!("{prefix}/daemon.log"));
        // A status file of an earlier run would read as an early first sync.
        let _ = std::fs::remove_file(&status_path);
        let port = free_port()?;
        let log = std::fs::File::create(&log_path)?;
        eprintln!("daemon: N={n}, starting");
        let start = Instant::now();
        let (mut child, pid) = spawn_daemon(
            self.driftless_cmd(prefix)
                .arg("run")
                .arg("--dir")
                .arg(&dir)
                .arg("--status-file")
                .arg(&status_path)
                .arg("--metrics-addr")
                .arg(format!("127.0.0.1:{port}"))
                .arg("--concurrency")
                .arg(self.args.concurrency.to_string()),
            log,
        )?;
        let result = self
            .daemon_inner(
                n,
                &tree,
                &dir,
                &status_path,
                port,
                pid,
                start,
                edits,
                &mut state,
            )
            .await;
        // SIGTERM, as systemd would; it writes its final status and exits.
        // SAFETY: kill(2) on the pid of our own child, which we have not reaped yet.
        unsafe {
            libc::kill(pid as i32, libc::SIGTERM);
        }
        if tokio::time::timeout(Duration::from_secs(20), child.wait())
            .await
            .is_err()
        {
            let _ = child.kill().await;
        }
        self.cleanup(&[prefix.to_string()], &[prefix.to_string()])
            .await?;
        let d = result.with_context(|| format!("daemon log: {}", log_path.display()))?;
        eprintln!(
            "daemon: N={n}: first sync {:.2}s, applied p50 {:.3}s p95 {:.3}s, ready p50 {:.3}s p95 {:.3}s, peak RSS {:.1} MiB",
            d.first_sync_s,
            d.applied.p50_s,
            d.applied.p95_s,
            d.ready.p50_s,
            d.ready.p95_s,
            d.peak_rss_mib
        );
        Ok(d)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) async fn daemon_inner(
        &self,
        n: usize,
        tree: &Tree,
        dir: &Path,
        status_path: &Path,
        port: u16,
        pid: u32,
        start: Instant,
        edits: usize,
        state: &mut Edits,
    ) -> anyhow::Result<Daemon> {
        let mut status = StatusReader::new(status_path);
        let deadline = Duration::from_secs(1800);
        // First sync: the revision read was applied.
        loop {
            if let Some(s) = status.read_if_changed()
                && s["revision_applied"].is_string()
                && s["revision_applied"] == s["revision_seen"]
            {
                if s["last_sync"]["result"] != "success" {
                    bail!("first sync: {}", s["last_sync"]);
                }
                break;
            }
            if start.elapsed() > deadline {
                bail!("no first sync after {deadline:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let first_sync_s = start.elapsed().as_secs_f64();
        let rss_after_first_sync_mib = proc_status_kib(pid, "VmRSS:").unwrap_or(f64::NAN) / 1024.0;
        let mut first_ready_s = None;
        loop {
            if let Some(s) = status.read_if_changed()
                && let Some(specs) = s["specs"].as_array()
                && specs.len() == n
                && specs.iter().all(|sp| sp["ready"] == true)
            {
                first_ready_s = Some(start.elapsed().as_secs_f64());
                break;
            }
            if start.elapsed() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        eprintln!(
            "daemon: first sync {first_sync_s:.2}s, all ready {:?}",
            first_ready_s
        );
        let writes_before = metrics_writes(port).await?;
        let (mut applied, mut ready) = (Vec::new(), Vec::new());
        for i in generate::edit_targets(n, edits) {
            let ns = tree.namespace(i);
            let name = tree.name(i);
            let id = tree.spec_id(i);
            let deployments: Api<Deployment> = Api::namespaced(self.client.clone(), &ns);
            let current = deployments.get(&name).await?;
            let rv = current
                .metadata
                .resource_version
                .clone()
                .unwrap_or_default();
            let wp = WatchParams::default()
                .fields(&format!("metadata.name={name}"))
                .timeout(120);
            let mut events = deployments.watch(&wp, &rv).await?.boxed();
            state.scaled_up.insert(i);
            let t0 = Instant::now();
            tree.write_one(dir, i, state)?;
            let seen = tokio::time::timeout(Duration::from_secs(120), async {
                while let Some(ev) = events.next().await {
                    // Read as JSON: whether `spec` is optional differs between the
                    // Kubernetes versions k8s-openapi's features choose.
                    if let Ok(WatchEvent::Modified(d)) = ev
                        && serde_json::to_value(&d).is_ok_and(|d| d["spec"]["replicas"] == 1)
                    {
                        return Some(t0.elapsed());
                    }
                }
                None
            })
            .await
            .ok()
            .flatten()
            .ok_or_else(|| anyhow!("{id}: the change never reached the cluster"))?;
            drop(events);
            let to_ready = loop {
                if let Some(s) = status.read_if_changed()
                    && let Some(spec) = s["specs"]
                        .as_array()
                        .and_then(|a| a.iter().find(|sp| sp["id"] == id.as_str()))
                    && spec["ready"] == true
                    && spec["figures"]["desired_replicas"] == 1
                    && spec["figures"]["available_replicas"] == 1
                {
                    break t0.elapsed();
                }
                if t0.elapsed() > Duration::from_secs(120) {
                    bail!("{id}: not ready 120 s after the edit");
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            };
            applied.push(seen.as_secs_f64());
            ready.push(to_ready.as_secs_f64());
        }
        let writes_after = metrics_writes(port).await?;
        let done = applied.len();
        Ok(Daemon {
            n,
            objects: generate::expected_objects(n, self.nodes.len()),
            first_sync_s,
            first_ready_s,
            edits: done,
            applied: Latency::of(applied),
            ready: Latency::of(ready),
            writes_per_edit: if done == 0 {
                0.0
            } else {
                (writes_after - writes_before) as f64 / done as f64
            },
            rss_after_first_sync_mib,
            peak_rss_mib: proc_status_kib(pid, "VmHWM:").unwrap_or(f64::NAN) / 1024.0,
        })
    }

    /// Cold sync and no-op time at each N, and the daemon's memory at each N.
    pub(super) async fn scaling(
        &mut self,
        main_runs: &[MainRun],
        main_daemon: Option<&Daemon>,
    ) -> anyhow::Result<Scaling> {
        let mut points = Vec::new();
        let mut sizes = self.args.scaling.clone();
        sizes.sort_unstable();
        sizes.dedup();
        for n in sizes {
            let objects = generate::expected_objects(n, self.nodes.len());
            let (mut cold, mut noop) = (Vec::new(), Vec::new());
            if n == self.args.n && !main_runs.is_empty() {
                cold = main_runs.iter().map(|r| r.cold_driftless).collect();
                noop = main_runs
                    .iter()
                    .filter_map(|r| r.noop_driftless.map(|(s, _)| s))
                    .collect();
            } else {
                let runs = if n <= self.args.n { self.args.runs } else { 1 };
                for r in 0..runs {
                    let prefix = format!("bench-s{n}r{r}");
                    let tree = self.tree(n, &prefix);
                    let dir = self.write_tree(&tree, &prefix, &Edits::default())?;
                    eprintln!("scaling: N={n}, run {r}: cold sync");
                    let (secs, _) = self.driftless_apply(&dir, &prefix).await?;
                    settle().await;
                    let (noop_secs, writes) = self.driftless_apply(&dir, &prefix).await?;
                    if writes != 0 {
                        self.notes.push(format!(
                            "scaling N={n}: the no-op resync made {writes} writes"
                        ));
                    }
                    eprintln!("scaling: N={n}: cold {secs:.2}s, no-op {noop_secs:.2}s");
                    cold.push(secs);
                    noop.push(noop_secs);
                    let both = std::slice::from_ref(&prefix);
                    self.cleanup(both, both).await?;
                }
            }
            let daemon = match main_daemon {
                Some(d) if d.n == n => Some(d.clone()),
                _ if self.args.skips("daemon") => None,
                _ => {
                    let edits = self.args.edits.min(5);
                    match self.daemon(n, &format!("bench-sd{n}"), edits).await {
                        Ok(d) => Some(d),
                        Err(e) => {
                            // Reported, not fatal: the other points (and the twenty minutes
                            // of runs before this one) still make a result.
                            eprintln!("scaling: N={n}: the daemon run failed: {e:#}");
                            self.notes
                                .push(format!("scaling N={n}: the daemon run failed: {e:#}"));
                            None
                        }
                    }
                }
            };
            points.push(ScalePoint {
                n,
                objects,
                cold_s: summary(&cold)?,
                noop_s: summary(&noop)?,
                daemon_peak_rss_mib: daemon.as_ref().map(|d| d.peak_rss_mib),
                daemon_first_sync_s: daemon.as_ref().map(|d| d.first_sync_s),
            });
        }
        let exp = |f: &dyn Fn(&ScalePoint) -> Option<f64>| {
            let pts: Vec<(f64, f64)> = points
                .iter()
                .filter_map(|p| f(p).map(|y| (p.objects as f64, y)))
                .collect();
            scaling_exponent(&pts)
        };
        let mem: Vec<(usize, f64)> = points
            .iter()
            .filter_map(|p| p.daemon_peak_rss_mib.map(|m| (p.objects, m)))
            .collect();
        let kib_per_object = match (mem.first(), mem.last()) {
            (Some(a), Some(b)) if b.0 > a.0 => Some((b.1 - a.1) * 1024.0 / (b.0 - a.0) as f64),
            _ => None,
        };
        Ok(Scaling {
            cold_time_exponent: exp(&|p| Some(p.cold_s.median)),
            noop_time_exponent: exp(&|p| Some(p.noop_s.median)),
            daemon_first_sync_exponent: exp(&|p| p.daemon_first_sync_s),
            daemon_memory_exponent: exp(&|p| p.daemon_peak_rss_mib),
            daemon_kib_per_object: kib_per_object,
            points,
        })
    }
}

/// Re-reads the status file only when it was replaced (it is written atomically, by
/// rename), so polling it often costs little.
pub(super) struct StatusReader {
    path: PathBuf,
    last: Option<(std::time::SystemTime, u64, u64)>,
}

impl StatusReader {
    fn new(path: &Path) -> StatusReader {
        StatusReader {
            path: path.to_path_buf(),
            last: None,
        }
    }

    fn read_if_changed(&mut self) -> Option<Value> {
        use std::os::unix::fs::MetadataExt as _;
        let meta = std::fs::metadata(&self.path).ok()?;
        let stamp = (meta.modified().ok()?, meta.ino(), meta.len());
        if self.last.as_ref() == Some(&stamp) {
            return None;
        }
        let text = std::fs::read_to_string(&self.path).ok()?;
        let v = serde_json::from_str(&text).ok()?;
        self.last = Some(stamp);
        Some(v)
    }
}
