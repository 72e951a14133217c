//! A member's part of a shared tree's status (`run --shard`): the specs it holds, as it
//! publishes them for the other members to show (a ConfigMap each, `daemon::shards`).
//!
//! JSON, gzipped: a ConfigMap holds at most 1 MiB, and a member of three holding 3,300
//! specs says about 2 MB of JSON, a tenth of that compressed. A part that is still too
//! big drops what the others can do without, in this order: the objects of ready specs,
//! then every spec's objects (the holder's own status and API keep them).

use std::io::Read as _;

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;

use super::SpecStatus;

/// Room left in a ConfigMap's 1 MiB for its metadata and base64's growth (binaryData is
/// counted decoded by the apiserver, but sent encoded: 4/3 of this is still well under the
/// request limit).
pub(crate) const LARGEST: usize = 700 * 1024;

/// Largest part decompressed: a peer's corrupt or hostile part must not eat the memory.
const LARGEST_DECODED: u64 = 64 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum PartError {
    #[error(
        "its {specs} specs' status is {bytes} bytes compressed even without their objects, over the {LARGEST} a ConfigMap is given; the other replicas show what they last read"
    )]
    TooLarge { specs: usize, bytes: usize },
    #[error("cannot be read: {0}")]
    Corrupt(String),
}

/// `specs` as a part, shed of objects as far as it must be to fit.
pub fn encode(specs: &[SpecStatus]) -> Result<Vec<u8>, PartError> {
    let whole = gzip(specs);
    if whole.len() <= LARGEST {
        return Ok(whole);
    }
    let mut shed: Vec<SpecStatus> = specs.to_vec();
    for s in shed.iter_mut().filter(|s| s.ready) {
        s.objects.clear();
    }
    let lighter = gzip(&shed);
    if lighter.len() <= LARGEST {
        return Ok(lighter);
    }
    for s in &mut shed {
        s.objects.clear();
    }
    let lightest = gzip(&shed);
    if lightest.len() <= LARGEST {
        return Ok(lightest);
    }
    Err(PartError::TooLarge {
        specs: specs.len(),
        bytes: lightest.len(),
    })
}

fn gzip(specs: &[SpecStatus]) -> Vec<u8> {
    let mut out = GzEncoder::new(Vec::new(), Compression::fast());
    // Writing into memory cannot fail, nor can serialising this model.
    let _ = serde_json::to_writer(&mut out, specs);
    out.finish().unwrap_or_default()
}

pub fn decode(bytes: &[u8]) -> Result<Vec<SpecStatus>, PartError> {
    let mut text = Vec::new();
    GzDecoder::new(bytes)
        .take(LARGEST_DECODED)
        .read_to_end(&mut text)
        .map_err(|e| PartError::Corrupt(e.to_string()))?;
    serde_json::from_slice(&text).map_err(|e| PartError::Corrupt(e.to_string()))
}

/// Only for tests: a gzip stream of `text` as it is, valid or not.
#[cfg(test)]
fn raw(text: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut out = GzEncoder::new(Vec::new(), Compression::fast());
    out.write_all(text).unwrap();
    out.finish().unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::status::ObjectState;

    fn spec(i: usize, ready: bool, objects: usize) -> SpecStatus {
        SpecStatus {
            id: format!("manifest/n/ConfigMap/c{i}"),
            ready,
            status: if ready { "Current" } else { "InProgress" }.into(),
            member: Some("m1".into()),
            objects: (0..objects)
                .map(|o| ObjectState {
                    // Text that does not compress away, as real messages vary.
                    object: format!("ConfigMap n/c{i}-{o}"),
                    message: format!("{:x}", (i * 7919 + o) * 104729),
                    ..ObjectState::default()
                })
                .collect(),
            ..SpecStatus::default()
        }
    }

    #[test]
    fn a_part_reads_back_as_it_was_written() {
        let specs: Vec<SpecStatus> = (0..50).map(|i| spec(i, i % 2 == 0, 2)).collect();
        let back = decode(&encode(&specs).unwrap()).unwrap();
        assert_eq!(back, specs);
    }

    #[test]
    fn a_part_too_big_sheds_the_objects_of_ready_specs_first() {
        // Enough objects that the whole does not fit, but those of the specs not ready do.
        let specs: Vec<SpecStatus> = (0..3000).map(|i| spec(i, i % 10 != 0, 60)).collect();
        assert!(
            gzip(&specs).len() > LARGEST,
            "the test's part must be too big"
        );
        let back = decode(&encode(&specs).unwrap()).unwrap();
        assert_eq!(back.len(), specs.len());
        for (b, s) in back.iter().zip(&specs) {
            let kept = if s.ready { 0 } else { s.objects.len() };
            assert_eq!(b.objects.len(), kept, "{}", s.id);
        }
    }

    #[test]
    fn corrupt_parts_are_errors_not_panics() {
        assert!(matches!(
            decode(b"not gzip at all"),
            Err(PartError::Corrupt(_))
        ));
        assert!(matches!(
            decode(&raw(b"{\"not\": \"a list\"}")),
            Err(PartError::Corrupt(_))
        ));
    }
}
