use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use http_body_util::BodyExt as _;
use hyper::header::{CONTENT_TYPE, HeaderMap, HeaderValue, RETRY_AFTER};
use hyper::{Method, Request, Response, StatusCode};
use kube::client::{Body, DynBody};
use tokio::time::Instant;
use tower::{BoxError, Layer as _, Service as _, ServiceExt as _};

use super::{Bucket, Layer, Policy, RateLimit, Reason};

const APPLY: &str = "application/apply-patch+yaml";

fn reason_for_status(
    method: Method,
    content_type: Option<&str>,
    code: u16,
    retry_after: Option<&str>,
) -> Option<Reason> {
    let mut headers = HeaderMap::new();
    if let Some(r) = retry_after {
        headers.insert(RETRY_AFTER, HeaderValue::from_str(r).unwrap());
    }
    let ct = content_type.map(|c| HeaderValue::from_str(c).unwrap());
    Policy::reason(
        &method,
        ct.as_ref(),
        Ok((StatusCode::from_u16(code).unwrap(), &headers)),
    )
}

fn reason_for_error(
    method: Method,
    content_type: Option<&str>,
    e: &(dyn std::error::Error + 'static),
) -> Option<Reason> {
    let ct = content_type.map(|c| HeaderValue::from_str(c).unwrap());
    Policy::reason(&method, ct.as_ref(), Err(e))
}

#[test]
fn throttling_and_unavailability_are_retried_refusals_are_not() {
    assert_eq!(
        reason_for_status(Method::POST, None, 429, Some("1")),
        Some(Reason::Throttled {
            retry_after: Some(Duration::from_secs(1))
        })
    );
    for code in [502, 503, 504] {
        assert_eq!(
            reason_for_status(Method::PATCH, Some(APPLY), code, None),
            Some(Reason::Unavailable(StatusCode::from_u16(code).unwrap())),
            "{code}"
        );
        // The apiserver did not process it: a create too.
        assert!(reason_for_status(Method::POST, None, code, None).is_some());
    }
    // 500 is a 1.20 apiserver's answer to a type error in an apply: it says the same again.
    for code in [200, 201, 400, 401, 403, 404, 409, 410, 422, 500, 501] {
        assert_eq!(
            reason_for_status(Method::GET, None, code, Some("1")),
            None,
            "{code}"
        );
    }
}

#[test]
fn retry_after_is_read_as_seconds_and_ignored_otherwise() {
    let after = |v: &str| match reason_for_status(Method::GET, None, 429, Some(v)) {
        Some(Reason::Throttled { retry_after }) => retry_after,
        other => panic!("{other:?}"),
    };
    assert_eq!(after("1"), Some(Duration::from_secs(1)));
    assert_eq!(after(" 3 "), Some(Duration::from_secs(3)));
    assert_eq!(after("0"), Some(Duration::ZERO));
    for ignored in [
        "",
        "-1",
        "1.5",
        "soon",
        "Wed, 21 Oct 2015 07:28:00 GMT",
        "99999999999999",
    ] {
        assert_eq!(after(ignored), None, "{ignored:?}");
    }
}

#[derive(Debug, thiserror::Error)]
#[error("client error (Connect)")]
struct Wrapped(#[source] std::io::Error);

#[test]
fn a_connection_refused_is_retried_for_any_request() {
    let refused = Wrapped(std::io::ErrorKind::ConnectionRefused.into());
    assert_eq!(
        reason_for_error(Method::POST, None, &refused),
        Some(Reason::Unreached)
    );
    assert_eq!(
        reason_for_error(Method::GET, None, &refused),
        Some(Reason::Unreached)
    );
}

#[test]
fn a_dropped_connection_is_retried_only_where_twice_is_once() {
    use std::io::ErrorKind as K;
    for kind in [
        K::ConnectionReset,
        K::ConnectionAborted,
        K::BrokenPipe,
        K::UnexpectedEof,
    ] {
        let e = Wrapped(kind.into());
        for (method, ct) in [
            (Method::GET, None),
            (Method::DELETE, None),
            (Method::PUT, Some("application/json")),
            (Method::PATCH, Some(APPLY)),
            (
                Method::PATCH,
                Some("application/merge-patch+json; charset=utf-8"),
            ),
        ] {
            assert_eq!(
                reason_for_error(method.clone(), ct, &e),
                Some(Reason::Dropped),
                "{kind:?} {method} {ct:?}"
            );
        }
        // A create may have made the object; a JSON patch may have been applied.
        assert_eq!(
            reason_for_error(Method::POST, Some("application/json"), &e),
            None
        );
        assert_eq!(
            reason_for_error(Method::PATCH, Some("application/json-patch+json"), &e),
            None
        );
        assert_eq!(reason_for_error(Method::PATCH, None, &e), None);
    }
}

#[test]
fn timeouts_and_other_failures_are_not_retried() {
    use std::io::ErrorKind as K;
    for kind in [K::TimedOut, K::InvalidData, K::PermissionDenied, K::Other] {
        let e = Wrapped(kind.into());
        assert_eq!(reason_for_error(Method::GET, None, &e), None, "{kind:?}");
    }
}

#[test]
fn waits_grow_are_capped_jittered_and_honour_retry_after() {
    let p = Policy::default();
    let plain = Reason::Unavailable(StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(p.wait(1, plain, 0.0), Duration::from_millis(250));
    assert_eq!(p.wait(2, plain, 0.0), Duration::from_millis(500));
    assert_eq!(p.wait(4, plain, 0.0), Duration::from_secs(2));
    assert_eq!(p.wait(9, plain, 0.0), p.max_wait);
    assert_eq!(p.wait(u32::MAX, plain, 0.0), p.max_wait);
    assert_eq!(p.wait(1, plain, 1.0), Duration::from_millis(375));
    assert_eq!(p.wait(9, plain, 1.0), p.max_wait.mul_f64(1.5));
    // At least what the apiserver asked for, jittered above it, never below.
    let asked = Reason::Throttled {
        retry_after: Some(Duration::from_secs(1)),
    };
    assert_eq!(p.wait(1, asked, 0.0), Duration::from_secs(1));
    assert_eq!(p.wait(1, asked, 0.5), Duration::from_millis(1250));
    assert_eq!(p.wait(5, asked, 0.0), Duration::from_secs(4));
    let long = Reason::Throttled {
        retry_after: Some(Duration::from_secs(3600)),
    };
    assert!(p.wait(1, long, 0.0) >= Duration::from_secs(3600));
}

#[test]
fn retries_are_bounded_in_count_and_in_time() {
    let p = Policy::default();
    let second = Duration::from_secs(1);
    let throttled = Reason::Throttled {
        retry_after: Some(second),
    };
    let timeout = Reason::Unavailable(StatusCode::GATEWAY_TIMEOUT);
    assert!(p.again(1, throttled, Duration::ZERO, second));
    assert!(
        !p.again(p.tries, throttled, Duration::ZERO, second),
        "no try past the count"
    );
    assert!(
        !p.again(1, throttled, p.budget, second),
        "no retry past the budget"
    );
    // An apiserver that asks for an hour is not waited for.
    assert!(!p.again(1, throttled, Duration::ZERO, Duration::from_secs(3600)));
    // A request that took a minute to fail (etcd away: 504) is not tried again.
    assert!(!p.again(
        1,
        timeout,
        Duration::from_secs(60),
        Duration::from_millis(250)
    ));
    // An apiserver that is down is reported within seconds.
    let six = Duration::from_secs(6);
    assert!(p.again(1, throttled, six, second));
    assert!(!p.again(1, Reason::Unreached, six, second));
    assert!(!p.again(1, Reason::Dropped, six, second));
    assert!(p.again(1, Reason::Unreached, Duration::ZERO, second));
    // The longest a request is tried: every wait at its jittered most still ends within
    // the budget plus the last try's own time.
    let mut elapsed = Duration::ZERO;
    let mut tries = 1;
    loop {
        let wait = p.wait(tries, throttled, 1.0);
        if !p.again(tries, throttled, elapsed, wait) {
            break;
        }
        elapsed += wait;
        tries += 1;
    }
    assert!(elapsed <= p.budget, "{elapsed:?}");
    assert!(
        tries >= 5,
        "{tries} tries in {elapsed:?}: too few to ride out throttling"
    );
}

#[test]
fn the_bucket_gives_a_burst_then_paces_at_qps() {
    let b = Bucket::new(RateLimit {
        qps: 10.0,
        burst: 3,
    })
    .unwrap();
    let t0 = Instant::now();
    for _ in 0..3 {
        assert_eq!(b.take(t0), Duration::ZERO);
    }
    // Each later request waits behind the earlier ones: 0.1 s, 0.2 s, ...
    let w1 = b.take(t0);
    let w2 = b.take(t0);
    assert!((w1.as_secs_f64() - 0.1).abs() < 1e-6, "{w1:?}");
    assert!((w2.as_secs_f64() - 0.2).abs() < 1e-6, "{w2:?}");
    // Refilled over time, never past the burst.
    let later = t0 + Duration::from_secs(60);
    for _ in 0..3 {
        assert_eq!(b.take(later), Duration::ZERO);
    }
    assert!(b.take(later) > Duration::ZERO);
    assert!(
        Bucket::new(RateLimit { qps: 0.0, burst: 3 }).is_none(),
        "0 turns it off"
    );
}

fn answer(code: u16, retry_after: Option<&str>, body: &str) -> Response<Box<DynBody>> {
    let mut r = Response::builder().status(code);
    if let Some(v) = retry_after {
        r = r.header(RETRY_AFTER, v);
    }
    let body: Box<DynBody> = Box::new(
        http_body_util::Full::new(hyper::body::Bytes::from(body.to_string()))
            .map_err(|never| -> BoxError { match never {} }),
    );
    r.body(body).unwrap()
}

fn apply_request() -> Request<Body> {
    Request::builder()
        .method(Method::PATCH)
        .uri("/apis/apps/v1/namespaces/a/deployments/web")
        .header(CONTENT_TYPE, APPLY)
        .body(Body::from(b"{}".to_vec()))
        .unwrap()
}

fn quick() -> Policy {
    Policy {
        tries: 4,
        first_wait: Duration::from_millis(1),
        max_wait: Duration::from_millis(5),
        budget: Duration::from_secs(5),
        connection_budget: Duration::from_secs(5),
    }
}

/// A fake apiserver: `script[n]` answers the n-th try, the last one every later try.
fn apiserver(
    script: Vec<(u16, Option<&'static str>, &'static str)>,
) -> (
    impl tower::Service<
        Request<Body>,
        Response = Response<Box<DynBody>>,
        Error = BoxError,
        Future: Send,
    > + Clone
    + Send
    + 'static,
    Arc<AtomicU32>,
) {
    let tries = Arc::new(AtomicU32::new(0));
    let seen = tries.clone();
    let svc = tower::service_fn(move |req: Request<Body>| {
        let n = seen.fetch_add(1, Ordering::SeqCst) as usize;
        let (code, after, body) = script[n.min(script.len() - 1)];
        async move {
            // Each try carries the whole request again.
            let sent = req.into_body().collect().await?.to_bytes();
            assert_eq!(&sent[..], b"{}");
            Ok::<_, BoxError>(answer(code, after, body))
        }
    });
    (svc, tries)
}

#[tokio::test]
async fn a_throttled_request_is_sent_again_until_it_is_taken() {
    let (svc, tries) = apiserver(vec![
        (
            429,
            Some("0"),
            "Too many requests, please try again later.\n",
        ),
        (503, None, ""),
        (200, None, "{}"),
    ]);
    let mut client = Layer::new(RateLimit::default(), quick()).layer(svc);
    let answer = client
        .ready()
        .await
        .unwrap()
        .call(apply_request())
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(tries.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn when_tries_run_out_the_answer_says_so_as_a_status() {
    let (svc, tries) = apiserver(vec![(
        429,
        Some("0"),
        "Too many requests, please try again later.\n",
    )]);
    let mut client = Layer::new(RateLimit::default(), quick()).layer(svc);
    let answer = client
        .ready()
        .await
        .unwrap()
        .call(apply_request())
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(tries.load(Ordering::SeqCst), 4);
    let body = answer.into_body().collect().await.unwrap().to_bytes();
    let status: kube::core::Status = serde_json::from_slice(&body).unwrap();
    assert_eq!(status.code, 429);
    assert_eq!(status.reason, "TooManyRequests");
    assert!(
        status
            .message
            .starts_with("Too many requests, please try again later; tried 4 times in "),
        "{}",
        status.message
    );
    let said = super::super::error_text(&kube::Error::Api(Box::new(status)));
    assert!(!said.contains("parse"), "{said}");
}

#[tokio::test]
async fn an_apiservers_own_status_keeps_its_words() {
    let (svc, tries) = apiserver(vec![(
        504,
        None,
        r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Timeout: request did not complete within requested timeout 34s","reason":"Timeout","code":504}"#,
    )]);
    let policy = Policy {
        tries: 1,
        ..quick()
    };
    let mut client = Layer::new(RateLimit::default(), policy).layer(svc);
    let answer = client
        .ready()
        .await
        .unwrap()
        .call(apply_request())
        .await
        .unwrap();
    assert_eq!(tries.load(Ordering::SeqCst), 1);
    let body = answer.into_body().collect().await.unwrap().to_bytes();
    let status: kube::core::Status = serde_json::from_slice(&body).unwrap();
    assert_eq!(status.reason, "Timeout");
    assert!(
        status.message.starts_with(
            "Timeout: request did not complete within requested timeout 34s; tried once"
        ),
        "{}",
        status.message
    );
}

#[tokio::test]
async fn a_refusal_is_answered_at_once() {
    let (svc, tries) = apiserver(vec![(500, None, "{}")]);
    let mut client = Layer::new(RateLimit::default(), quick()).layer(svc);
    let answer = client
        .ready()
        .await
        .unwrap()
        .call(apply_request())
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(tries.load(Ordering::SeqCst), 1);
    // Untouched.
    let body = answer.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"{}");
}

#[tokio::test]
async fn a_create_is_sent_again_when_the_connection_was_refused_not_when_it_dropped() {
    let create = || {
        Request::builder()
            .method(Method::POST)
            .uri("/api/v1/namespaces/a/configmaps")
            .header(CONTENT_TYPE, "application/json")
            .body(Body::from(b"{}".to_vec()))
            .unwrap()
    };
    for (kind, want_tries, want_ok) in [
        (std::io::ErrorKind::ConnectionRefused, 2, true),
        (std::io::ErrorKind::ConnectionReset, 1, false),
    ] {
        let tries = Arc::new(AtomicU32::new(0));
        let seen = tries.clone();
        let svc = tower::service_fn(move |_req: Request<Body>| {
            let n = seen.fetch_add(1, Ordering::SeqCst);
            async move {
                if n == 0 {
                    Err::<Response<Box<DynBody>>, BoxError>(Box::new(Wrapped(kind.into())))
                } else {
                    Ok(answer(201, None, "{}"))
                }
            }
        });
        let mut client = Layer::new(RateLimit::default(), quick()).layer(svc);
        let answer = client.ready().await.unwrap().call(create()).await;
        assert_eq!(answer.is_ok(), want_ok, "{kind:?}");
        assert_eq!(tries.load(Ordering::SeqCst), want_tries, "{kind:?}");
    }
}

#[test]
fn trouble_lasts_from_the_first_answer_not_taken_until_one_is() {
    let t = super::Trouble::default();
    let t0 = Instant::now();
    assert_eq!(t.note(t0, false), None);
    assert_eq!(t.note(t0, true), Some(t0));
    let later = t0 + Duration::from_secs(3);
    assert_eq!(t.note(later, true), Some(t0), "still the same trouble");
    assert_eq!(t.note(later, false), None, "an answer ends it");
    assert_eq!(t.note(later, true), Some(later));
}

/// An apiserver that is down: once one request has used the budget, the next are not
/// given one of their own, so a sync of many objects fails in about the budget, not in the budget
/// for each of them. One answer taken, and requests are tried again as before.
// Paused time: the budget runs on tokio's clock, which advances only as the retries
// sleep, so how many tries fit in it does not depend on how loaded the machine is.
#[tokio::test(start_paused = true)]
async fn once_the_apiserver_has_been_away_for_the_budget_requests_fail_at_once() {
    let down = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let tries = Arc::new(AtomicU32::new(0));
    let (is_down, seen) = (down.clone(), tries.clone());
    let svc = tower::service_fn(move |_req: Request<Body>| {
        seen.fetch_add(1, Ordering::SeqCst);
        let down = is_down.load(Ordering::SeqCst);
        async move {
            if down {
                Err::<Response<Box<DynBody>>, BoxError>(Box::new(Wrapped(
                    std::io::ErrorKind::ConnectionRefused.into(),
                )))
            } else {
                Ok(answer(200, None, "{}"))
            }
        }
    });
    let policy = Policy {
        tries: 100,
        first_wait: Duration::from_millis(5),
        max_wait: Duration::from_millis(5),
        budget: Duration::from_secs(5),
        connection_budget: Duration::from_millis(100),
    };
    let mut client = Layer::new(RateLimit::default(), policy).layer(svc);
    let mut send = async |req| {
        tries.store(0, Ordering::SeqCst);
        let ok = client.ready().await.unwrap().call(req).await.is_ok();
        (ok, tries.load(Ordering::SeqCst))
    };
    let (ok, first) = send(apply_request()).await;
    assert!(!ok);
    assert!(
        first > 5,
        "the first request rode it out for a while: {first} tries"
    );
    // The first gave up when its next wait would have overrun the budget. A wait is
    // jittered (5 to 7.5 ms here), so a later request may still fit one shorter wait in
    // what is left; after one has, none fits. Ten more requests therefore take one try
    // each and one more at most, and one wait of time at most, between them.
    let started = Instant::now();
    let mut more = 0;
    for _ in 0..10 {
        let (ok, n) = send(apply_request()).await;
        assert!(!ok);
        more += n;
    }
    assert!(
        more <= 11,
        "the next take no budget of their own: {more} tries for 10"
    );
    // Plus a millisecond: tokio's timer rounds a sleep up to its tick.
    assert!(
        started.elapsed() <= policy.max_wait.mul_f64(1.5) + Duration::from_millis(1),
        "the next end within what was left: {:?}",
        started.elapsed()
    );
    down.store(false, Ordering::SeqCst);
    assert_eq!(send(apply_request()).await, (true, 1));
    down.store(true, Ordering::SeqCst);
    let (ok, again) = send(apply_request()).await;
    assert!(!ok);
    assert!(again > 5, "after an answer, a new budget: {again} tries");
}
