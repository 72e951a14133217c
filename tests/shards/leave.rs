//! A member stopped hands its buckets over as it leaves.

use super::*;

/// Long enough that a member taking a leaver's buckets before this has passed can only
/// have been handed them: one round (a fifth of it) and a sync, well within `TAKEOVER`.
const LONG_LEASE: &str = "100s";

/// A member stopped (SIGTERM) gives its buckets up and deletes its Lease and its part of
/// the status as it leaves, so the other takes them at its next round, long before the
/// lease would have run out, and converges them without writing an object again.
#[tokio::test]
async fn serial_a_member_stopped_hands_its_buckets_over_at_once() {
    let client = support::client().await;
    let ns = support::namespace(&client, "shards-leave").await;
    let inv = support::namespace(&client, "shards-leave-inv").await;
    let dir = tempfile::tempdir().unwrap();
    let specs = write_specs(dir.path(), &ns, SPECS, None);
    let want = all_specs(&ns, SPECS);
    let before = support::apiserver_writes_when_quiet(&client, WRITTEN).await;

    let a = member_with_lease(&ns, &inv, &specs, "a", None, LONG_LEASE);
    let mut b = member_with_lease(&ns, &inv, &specs, "b", None, LONG_LEASE);
    let both = [("a", &a), ("b", &b)];
    let statuses = wait_divided("a and b dividing the tree", &both, &want, support::WAIT).await;
    assert!(
        !own_ids(&statuses[1]).is_empty(),
        "b holds no spec, so its leaving proves nothing: {:#}",
        statuses[1]
    );
    let (leases, parts) = membership(&client, &ns, &inv).await;
    assert_eq!(
        (leases.len(), parts.len()),
        (2, 2),
        "a Lease and a part each: {leases:?} {parts:?}"
    );
    let settled = support::apiserver_writes_when_quiet(&client, WRITTEN).await;
    assert_eq!(settled - before, SPECS as u64, "ServiceAccount writes");

    assert_eq!(
        b.stop(),
        Some(0),
        "b stopping\n{}",
        support::tail(&b.log(), 3000)
    );
    let stopped = std::time::Instant::now();
    let (leases, parts) = membership(&client, &ns, &inv).await;
    assert_eq!(
        (leases, parts),
        (
            vec![format!("driftless-member-{ns}-a")],
            vec![format!("driftless-status-{ns}-a")]
        ),
        "b's Lease and part once it has left"
    );
    wait_divided("a holding the whole tree", &[("a", &a)], &want, TAKEOVER).await;
    // Told, not judged (a shared machine's clock): a round is 20 s with this lease, and
    // the next exchange (2 s) that finds b's part gone starts one at once.
    eprintln!("a held b's buckets {:?} after b stopped", stopped.elapsed());
    table_agrees(&client, &ns, &inv, &[("a", &a)]).await;
    let after = support::apiserver_writes_when_quiet(&client, WRITTEN).await;
    assert_eq!(after - settled, 0, "ServiceAccount writes of the hand-over");
}
