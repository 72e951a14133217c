//! An instance moves between one replica (the inventory's single layout) and members
//! (a ConfigMap per bucket) without losing what it prunes.

use super::*;

/// The object a spec id names (`manifest/<ns>/ServiceAccount/<name>`): its last part.
fn object_of(id: &str) -> String {
    id.rsplit('/').next().unwrap_or(id).to_string()
}

/// The objects spec `ids` name.
fn objects(ids: &BTreeSet<String>) -> BTreeSet<String> {
    ids.iter().map(|id| object_of(id)).collect()
}

/// Removes spec `id`'s file from the tree: its object is to be pruned.
fn remove_spec(specs: &Path, id: &str) {
    std::fs::remove_file(specs.join(format!("{}.yaml", object_of(id)))).unwrap();
}

/// `driftless --instance ns apply SPECS --inventory-namespace inv`: one replica, once,
/// which keeps the single layout; it must succeed.
fn apply_once(ns: &str, inv: &str, specs: &Path) {
    let specs = specs.to_string_lossy().into_owned();
    let out = support::driftless_on_cluster(ns, &["apply", &specs, "--inventory-namespace", inv]);
    support::assert_exit(&out, 0);
}

/// The names of the specs' ServiceAccounts in `ns` (not the namespace's `default`).
async fn account_names(client: &kube::Client, ns: &str) -> Result<BTreeSet<String>, String> {
    let list = Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|a| a.metadata.name)
        .filter(|n| n.starts_with("sa-"))
        .collect())
}

/// One inventory ConfigMap of an instance: the bucket it holds (`None`: the single
/// layout) and the objects its entries name.
#[derive(Debug)]
struct Recorded {
    name: String,
    bucket: Option<String>,
    objects: Vec<String>,
}

/// The inventory ConfigMaps of instance `ns` (in `inv`), of both layouts.
async fn inventory(client: &kube::Client, ns: &str, inv: &str) -> Result<Vec<Recorded>, String> {
    let list = Api::<ConfigMap>::namespaced(client.clone(), inv)
        .list(&ListParams::default().labels(&format!("{INVENTORY_OF}={ns}")))
        .await
        .map_err(|e| e.to_string())?;
    let mut maps = Vec::new();
    for map in list.items {
        let name = map.metadata.name.clone().unwrap_or_default();
        let text = map
            .data
            .as_ref()
            .and_then(|d| d.get("entries.json"))
            .ok_or_else(|| format!("no entries.json in {name}"))?;
        let entries: Vec<Value> =
            serde_json::from_str(text).map_err(|e| format!("{name}: {e}: {text}"))?;
        let objects = entries
            .iter()
            .map(|e| {
                e["name"]
                    .as_str()
                    .map(str::to_string)
                    .ok_or_else(|| format!("{name}: an entry names no object: {e}"))
            })
            .collect::<Result<Vec<String>, String>>()?;
        let bucket = map
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(BUCKET_OF))
            .cloned();
        maps.push(Recorded {
            name,
            bucket,
            objects,
        });
    }
    Ok(maps)
}

/// The objects the ConfigMaps of one layout (bucketed or not) list, sorted: one listed
/// twice shows twice.
fn listed(maps: &[Recorded], bucketed: bool) -> Vec<String> {
    let mut names: Vec<String> = maps
        .iter()
        .filter(|m| m.bucket.is_some() == bucketed)
        .flat_map(|m| m.objects.iter().cloned())
        .collect();
    names.sort();
    names
}

/// Ok when the inventory of `ns` is all in the single layout (`driftless-inventory-<ns>-<n>`,
/// none empty) and lists exactly `objects`, each once; no bucket's ConfigMap left.
fn single_layout(maps: &[Recorded], ns: &str, objects: &BTreeSet<String>) -> Result<(), String> {
    let prefix = format!("driftless-inventory-{ns}-");
    let wrong = maps
        .iter()
        .any(|m| m.bucket.is_some() || !m.name.starts_with(&prefix) || m.objects.is_empty());
    let want: Vec<String> = objects.iter().cloned().collect();
    if wrong || listed(maps, false) != want {
        return Err(format!(
            "not the single layout listing the {} objects {want:?}: {maps:#?}",
            want.len()
        ));
    }
    Ok(())
}

/// Ok once the members have moved what they wrote out of the single layout: every object
/// of `left` listed once, in either layout (none pruned listed any more); the objects of
/// `written` (the specs of the members that wrote) in their buckets' own ConfigMaps
/// (`driftless-buckets-<ns>-<bucket>-<n>`); no ConfigMap of the single layout left empty.
fn moved(
    maps: &[Recorded],
    ns: &str,
    left: &BTreeSet<String>,
    written: &BTreeSet<String>,
) -> Result<(), String> {
    let mut all = listed(maps, false);
    all.extend(listed(maps, true));
    all.sort();
    let single = listed(maps, false);
    let stayed: Vec<&String> = single.iter().filter(|n| written.contains(*n)).collect();
    let misnamed = maps.iter().any(|m| {
        m.bucket
            .as_ref()
            .is_some_and(|b| !m.name.starts_with(&format!("driftless-buckets-{ns}-{b}-")))
    });
    let emptied = maps
        .iter()
        .any(|m| m.bucket.is_none() && m.objects.is_empty());
    let why = if all != left.iter().cloned().collect::<Vec<_>>() {
        format!(
            "the inventory lists {all:?}, not the {} objects left",
            left.len()
        )
    } else if !stayed.is_empty() {
        format!("the single layout still lists {stayed:?}, whose buckets were written")
    } else if misnamed {
        "a bucket's ConfigMap is named for another".to_string()
    } else if emptied {
        "a ConfigMap of the single layout is left empty".to_string()
    } else {
        return Ok(());
    };
    Err(format!("{why}: {maps:#?}"))
}

/// Two specs to delete: one from each member where both list some (so both write their
/// buckets, and the single layout is emptied); else the first two the other lists.
fn two_to_delete(statuses: &[Value]) -> Vec<String> {
    let lists: Vec<BTreeSet<String>> = statuses.iter().map(own_ids).collect();
    let firsts: Vec<String> = lists.iter().filter_map(|l| l.first().cloned()).collect();
    if firsts.len() >= 2 {
        firsts[..2].to_vec()
    } else {
        lists.iter().flatten().take(2).cloned().collect()
    }
}

/// An instance moves from one replica (a one-shot `apply`: the inventory's single
/// layout) to two members sharing the tree (`run --shard`: a ConfigMap per bucket) and
/// back, pruning what left the tree at each step: the members find what the single
/// layout recorded for their buckets, and move it into their buckets' own ConfigMaps at
/// their first write; the `apply` after them reads those and puts everything back in the
/// single layout. No move writes an object: each ServiceAccount is written at its create
/// and at its delete, once.
#[tokio::test]
async fn serial_an_instance_moves_between_one_replica_and_shared_without_losing_what_it_prunes() {
    let client = support::client().await;
    let ns = support::namespace(&client, "shards-move").await;
    let inv = support::namespace(&client, "shards-move-inv").await;
    let dir = tempfile::tempdir().unwrap();
    let specs = write_specs(dir.path(), &ns, SPECS, None);
    let mut want = all_specs(&ns, SPECS);
    // Once the namespace's own `default` account is made.
    let before = support::apiserver_writes_when_quiet(&client, WRITTEN).await;

    // One replica: all 30 recorded in the single layout.
    apply_once(&ns, &inv, &specs);
    accounts(&client, &ns, SPECS, None).await.unwrap();
    let maps = inventory(&client, &ns, &inv).await.unwrap();
    single_layout(&maps, &ns, &objects(&want)).unwrap_or_else(|e| panic!("{e}"));
    let applied = support::apiserver_writes_when_quiet(&client, WRITTEN).await;
    assert_eq!(
        applied - before,
        SPECS as u64,
        "ServiceAccount writes of the apply"
    );

    // Two members: each adopts what the single layout recorded for its buckets, and
    // writes no object.
    let mut a = member(&ns, &inv, &specs, "a", None);
    let mut b = member(&ns, &inv, &specs, "b", None);
    let both = [("a", &a), ("b", &b)];
    let statuses = wait_divided("a and b dividing the tree", &both, &want, support::WAIT).await;
    table_agrees(&client, &ns, &inv, &both).await;
    let adopted = support::apiserver_writes_when_quiet(&client, WRITTEN).await;
    assert_eq!(
        adopted - applied,
        0,
        "ServiceAccount writes of the members taking over the single layout's record"
    );

    // Two specs leave the tree: only the single layout recorded their objects, so their
    // pruning proves the members read it for their buckets.
    let deleted = two_to_delete(&statuses);
    for id in &deleted {
        remove_spec(&specs, id);
        want.remove(id);
    }
    let left = objects(&want);
    support::eventually("the two pruned", TAKEOVER, || async {
        let names = account_names(&client, &ns).await?;
        if names == left {
            Ok(())
        } else {
            Err(format!("ServiceAccounts {names:?}"))
        }
    })
    .await;
    let pruned = wait_divided("a and b dividing the 28 left", &both, &want, TAKEOVER).await;
    for (i, (id, _)) in both.iter().enumerate() {
        assert_eq!(
            buckets(&statuses[i]),
            buckets(&pruned[i]),
            "{id}'s buckets moved: which member wrote what is no longer known"
        );
    }
    // The members that pruned wrote every bucket they hold.
    let written: BTreeSet<String> = statuses
        .iter()
        .map(own_ids)
        .filter(|ids| deleted.iter().any(|d| ids.contains(d)))
        .flatten()
        .filter(|id| want.contains(id))
        .map(|id| object_of(&id))
        .collect();
    println!(
        "deleted {deleted:?}; {} of the {} left in buckets written since",
        written.len(),
        left.len()
    );
    support::eventually(
        "the written buckets moved out of the single layout",
        Duration::from_secs(30),
        || async { moved(&inventory(&client, &ns, &inv).await?, &ns, &left, &written) },
    )
    .await;
    let after_prune = support::apiserver_writes_when_quiet(&client, WRITTEN).await;
    assert_eq!(
        after_prune - adopted,
        2,
        "ServiceAccount writes of the prune: the two deletes"
    );

    // Back to one replica: its apply reads the buckets' ConfigMaps, prunes what left the
    // tree since, and keeps the single layout alone.
    for (id, daemon) in [("a", &mut a), ("b", &mut b)] {
        assert_eq!(
            daemon.stop(),
            Some(0),
            "{id} stopping\n{}",
            support::tail(&daemon.log(), 3000)
        );
    }
    let last = want.first().cloned().unwrap();
    remove_spec(&specs, &last);
    want.remove(&last);
    apply_once(&ns, &inv, &specs);
    assert_eq!(
        account_names(&client, &ns).await.unwrap(),
        objects(&want),
        "ServiceAccounts after the apply that prunes {last}"
    );
    let maps = inventory(&client, &ns, &inv).await.unwrap();
    single_layout(&maps, &ns, &objects(&want)).unwrap_or_else(|e| panic!("{e}"));

    // Each object written at its create and its delete, and never by a move.
    let after = support::apiserver_writes_when_quiet(&client, WRITTEN).await;
    assert_eq!(
        after - before,
        SPECS as u64 + 3,
        "ServiceAccount writes: 30 creates, 3 deletes"
    );
}
