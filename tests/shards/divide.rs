//! Three members divide the 3,000 specs and take over a killed one's; a
//! `depends-on` across members.

use super::*;

#[tokio::test]
async fn serial_three_replicas_divide_a_tree_and_take_over_a_killed_one() {
    let client = support::client().await;
    let ns = support::namespace(&client, "shards").await;
    let inv = support::namespace(&client, "shards-inv").await;
    let dir = tempfile::tempdir().unwrap();
    let specs = write_specs(dir.path(), &ns, MANY, None);
    let want = all_specs(&ns, MANY);
    // Once the namespace's own `default` account is made.
    let before = support::apiserver_writes_by_code_when_quiet(&client, WRITTEN).await;

    let mut daemons = IDS.map(|id| member(&ns, &inv, &specs, id, None));
    let statuses = {
        let all: Vec<(&str, &Daemon)> = IDS.into_iter().zip(&daemons).collect();
        let statuses =
            wait_divided("three members dividing the tree", &all, &want, MANY_WAIT).await;
        table_agrees(&client, &ns, &inv, &all).await;
        statuses
    };
    // About a third each: at most 22 of the 64 buckets (the even share rounded up).
    for (id, status) in IDS.iter().zip(&statuses) {
        let own = own_ids(status).len();
        println!(
            "{id} holds {own} specs in {} buckets",
            buckets(status).len()
        );
        assert!(
            (MANY / 5..=MANY * 2 / 5).contains(&own),
            "{id} holds {own} of {MANY} specs, not about a third"
        );
    }
    accounts(&client, &ns, MANY, None).await.unwrap();
    let leases = Api::<Lease>::namespaced(client.clone(), &inv)
        .list(&ListParams::default().labels(&format!("driftless.dev/member-of={ns}")))
        .await
        .unwrap();
    assert_eq!(leases.items.len(), IDS.len(), "{:#?}", leases.items);
    // Each object written once: by one member, however they started. Counted as the
    // apiserver carried them out: a member whose Lease renewal goes unanswered (an
    // apiserver slow to answer) stops at once, and a write it had sent may be cut short
    // unprocessed (the apiserver counts it with its error) or carried out (the member
    // then finds its intent applied and writes it no more).
    let settled = support::apiserver_writes_by_code_when_quiet(&client, WRITTEN).await;
    assert_eq!(
        support::carried_out(&settled) - support::carried_out(&before),
        MANY as u64,
        "ServiceAccount writes: each object once, however the members started\n{}\n{}",
        by_code(&before, &settled),
        written_twice(&IDS, &daemons, &[0; 3], None)
    );

    // The member with the most specs dies; the tree changes while its Lease still runs.
    let victim = (0..IDS.len())
        .max_by_key(|&i| own_ids(&statuses[i]).len())
        .unwrap();
    println!(
        "killing {} ({} specs)",
        IDS[victim],
        own_ids(&statuses[victim]).len()
    );
    daemons[victim].sigkill();
    // Where each log stood at the kill: what follows is the takeover's writes.
    let marks: Vec<usize> = daemons.iter().map(|d| d.log().len()).collect();
    write_specs(dir.path(), &ns, MANY, Some("yes"));

    let survivors: Vec<(&str, &Daemon)> = IDS
        .into_iter()
        .zip(&daemons)
        .enumerate()
        .filter(|(i, _)| *i != victim)
        .map(|(_, m)| m)
        .collect();
    wait_accounts(&client, &ns, MANY, Some("yes"), MANY_WAIT).await;
    wait_divided(
        "the two survivors dividing the tree",
        &survivors,
        &want,
        MANY_WAIT,
    )
    .await;
    table_agrees(&client, &ns, &inv, &survivors).await;
    let after = support::apiserver_writes_by_code_when_quiet(&client, WRITTEN).await;
    assert_eq!(
        support::carried_out(&after) - support::carried_out(&settled),
        MANY as u64,
        "ServiceAccount writes after the kill: each object once, none twice\n{}\n{}",
        by_code(&settled, &after),
        written_twice(&IDS, &daemons, &marks, Some(victim))
    );
}

/// The apiserver's write requests between two counts, by its answer's code.
fn by_code(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> String {
    let counts: Vec<String> = after
        .iter()
        .map(|(code, n)| (code, n - before.get(code).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .map(|(code, n)| format!("{n} answered {code}"))
        .collect();
    format!("the apiserver's write requests: {}", counts.join(", "))
}

/// The objects the members' logs (but `left`'s, a killed one's) show written more than
/// once since `marks` (each log's length at the kill, or 0), with who wrote them and
/// when, and what the logs say of the members' Leases: what a failed count of writes
/// needs to be told apart from a writer outside the test.
fn written_twice(ids: &[&str], daemons: &[Daemon], marks: &[usize], left: Option<usize>) -> String {
    let mut by_object: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut leases = Vec::new();
    for (i, d) in daemons.iter().enumerate().filter(|(i, _)| Some(*i) != left) {
        let log = d.log();
        for line in log.get(marks[i]..).unwrap_or("").lines() {
            if ["Lease", "buckets"].iter().any(|w| line.contains(w)) {
                leases.push(format!("{}: {line}", ids[i]));
            }
            if !line.contains("applied action=") {
                continue;
            }
            // `… apply{spec=… object=ServiceAccount NS/NAME}: … applied action=configured`
            let Some(object) = line
                .split("object=")
                .nth(1)
                .and_then(|rest| rest.split('}').next())
            else {
                continue;
            };
            by_object
                .entry(object.to_string())
                .or_default()
                .push(format!("{}: {line}", ids[i]));
        }
    }
    let total: usize = by_object.values().map(Vec::len).sum();
    let twice: Vec<String> = by_object
        .into_iter()
        .filter(|(_, w)| w.len() > 1)
        .map(|(o, w)| format!("{o}:\n  {}", w.join("\n  ")))
        .collect();
    format!(
        "the logs show {total} writes, {} objects more than once{}\n{}\nthe members' Leases and buckets:\n{}",
        twice.len(),
        if twice.len() > 20 {
            " (the first 20)"
        } else {
            ""
        },
        twice.into_iter().take(20).collect::<Vec<_>>().join("\n"),
        leases.join("\n")
    )
}

/// A Deployment whose Pod the testbed's kubelet makes ready `delay` seconds after it
/// starts.
fn deployment(ns: &str, name: &str, delay: u32, image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n      annotations: {{testbed.driftless.dev/ready-delay-seconds: \"{delay}\"}}\n    spec:\n      containers:\n      - name: main\n        image: {image}\n"
    )
}

/// The first of `name-0`, `name-1`, … whose spec id (`id(name)`) falls in a bucket
/// `table` gives `member`.
fn name_held_by(
    table: &BTreeMap<u64, String>,
    member: &str,
    name: &str,
    id: impl Fn(&str) -> String,
) -> String {
    (0..1000)
        .map(|i| format!("{name}-{i}"))
        .find(|n| {
            let bucket = u64::from(driftless::apply::buckets::bucket_of(&id(n)));
            table.get(&bucket).is_some_and(|h| h == member)
        })
        .unwrap_or_else(|| panic!("no {name}-N in {member}'s buckets: {table:?}"))
}

/// A spec whose `depends-on` names a spec another member holds waits until that member
/// publishes it ready at the same revision: not applied while it is not, applied once it
/// is.
#[tokio::test]
async fn a_dependency_another_member_holds_is_waited_for() {
    let client = support::client().await;
    let ns = support::namespace(&client, "shards-dep").await;
    let inv = support::namespace(&client, "shards-dep-inv").await;
    let dir = tempfile::tempdir().unwrap();
    let specs = write_specs(dir.path(), &ns, 0, None);
    let a = member(&ns, &inv, &specs, "a", None);
    let b = member(&ns, &inv, &specs, "b", None);
    let table = support::eventually("a and b holding every bucket", support::WAIT, || async {
        let table = holders(&client, &ns, &inv).await?;
        let members: BTreeSet<&String> = table.values().collect();
        if table.len() == BUCKETS as usize && members.len() == 2 {
            Ok(table)
        } else {
            Err(format!("{table:?}"))
        }
    })
    .await;
    // db in a's buckets, never ready while the test looks; after, in b's, depends on it.
    let db = name_held_by(&table, "a", "db", |n| {
        format!("manifest/{ns}/Deployment.apps/{n}")
    });
    let after = name_held_by(&table, "b", "after", |n| {
        format!("manifest/{ns}/ConfigMap/{n}")
    });
    let db_id = format!("manifest/{ns}/Deployment.apps/{db}");
    let after_id = format!("manifest/{ns}/ConfigMap/{after}");
    std::fs::write(
        specs.join("db.yaml"),
        deployment(&ns, &db, 600, "nginx:1.21"),
    )
    .unwrap();
    std::fs::write(
        specs.join("after.yaml"),
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {after}\n  namespace: {ns}\n  annotations: {{driftless.dev/depends-on: {db_id}}}\ndata:\n  value: one\n"
        ),
    )
    .unwrap();

    let spec = |status: &Value, id: &str| {
        status["specs"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["id"] == id)
            .cloned()
            .unwrap_or(Value::Null)
    };
    let cms = Api::<ConfigMap>::namespaced(client.clone(), &ns);
    support::eventually("b holding after back for db", support::WAIT, || async {
        let status = b.status().unwrap_or(Value::Null);
        let waits = spec(&status, &after_id);
        // b sees db as a publishes it.
        let dep = spec(&status, &db_id);
        if waits["reason"] == "WaitingForDependencies" && dep["member"] == "a" {
            Ok(())
        } else {
            Err(format!("after: {waits}\ndb: {dep}"))
        }
    })
    .await;
    assert!(
        cms.get_opt(&after).await.unwrap().is_none(),
        "{after} applied while {db} is not ready"
    );

    // db made ready: a says so, and b applies after.
    std::fs::write(specs.join("db.yaml"), deployment(&ns, &db, 0, "nginx:1.22")).unwrap();
    support::eventually("after applied once db is ready", support::WAIT, || async {
        let status = b.status().unwrap_or(Value::Null);
        match cms.get_opt(&after).await.map_err(|e| e.to_string())? {
            Some(_) if spec(&status, &after_id)["ready"] == true => Ok(()),
            found => Err(format!(
                "{after} exists: {}; b shows after {} and db {}\na's log:\n{}",
                found.is_some(),
                spec(&status, &after_id),
                spec(&status, &db_id),
                support::tail(&a.log(), 2000)
            )),
        }
    })
    .await;
}
