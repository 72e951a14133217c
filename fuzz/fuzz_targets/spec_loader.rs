//! Arbitrary bytes as one spec file (a TOML one, a YAML one and `.driftless.toml` in
//! turn) through the loader the CLI and the daemon use
//! (`spec::parse_files`: the same path a directory or a git revision takes), then, when
//! valid, through rendering (pure). Nothing may panic, and what comes out must be what
//! the apiserver takes:
//! - every error is one line at a real position (line and column from 1, the line within
//!   the file);
//! - a valid tree renders (or refuses a node-dependent name collision), to YAML too;
//! - every rendered object has a valid name, valid label keys and values, and carries
//!   this instance's ownership labels.
#![no_main]

use std::collections::BTreeMap;

use driftless::render::{Facts, NodeFacts, RenderError, ownership, render, to_yaml};
use driftless::spec::{SourceFile, names, parse_files};
use libfuzzer_sys::fuzz_target;

fn facts() -> Facts {
    let node = |name: &str, zone: &str| NodeFacts {
        name: name.to_string(),
        labels: BTreeMap::from([("topology.kubernetes.io/zone".to_string(), zone.to_string())]),
    };
    Facts {
        instance: "fuzz".to_string(),
        nodes: vec![
            node("node-1", "a"),
            node("ip-10-0-0-7.eu-west-1.compute.internal", "b"),
            node(&"n".repeat(200), "a"),
        ],
    }
}

fuzz_target!(|data: &[u8]| {
    // The tree-level settings file too: its CEL expressions, patterns and variables.
    for name in ["fuzz.toml", "fuzz.yaml", ".driftless.toml"] {
        check(name, data);
    }
});

fn check(name: &str, data: &[u8]) {
    let files = [SourceFile {
        path: name.to_string(),
        contents: data.to_vec(),
    }];
    let lines = data.split(|b| *b == b'\n').count();
    let tree = match parse_files(&files) {
        Ok(tree) => tree,
        Err(errors) => {
            assert!(!errors.0.is_empty());
            for e in &errors.0 {
                assert!(e.at.line >= 1 && e.at.column >= 1, "{e}");
                assert!(e.at.line <= lines, "{e}: past the last line ({lines})");
                assert!(!e.message.contains('\n'), "multi-line message: {e:?}");
            }
            return;
        }
    };
    let objects = match render(&tree, &facts()) {
        Ok(objects) => objects,
        Err(RenderError::Collision { .. }) => return,
        Err(e) => panic!("a valid tree does not render: {e}"),
    };
    to_yaml(&objects).expect("rendered objects serialise to YAML");
    for o in &objects {
        assert!(
            names::NameRule::of(&o.api_version, &o.kind)
                .check(&o.name)
                .is_ok(),
            "name {:?}",
            o.name
        );
        let body = o.body.value();
        let meta = &body["metadata"];
        let labels = meta["labels"].as_object().expect("labels");
        for (k, v) in labels {
            let v = v.as_str().expect("label values are strings");
            assert!(names::label_key(k).is_ok(), "label key {k:?}");
            assert!(names::label_value(v).is_ok(), "label value {k}={v:?}");
        }
        assert_eq!(labels[ownership::INSTANCE], "fuzz", "{}", o.display_ref());
    }
}
