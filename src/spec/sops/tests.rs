//! Against files the real sops 3.11 wrote (`tests/fixtures/sops/make.sh`).

use serde_json::json;

use super::*;
use crate::spec::SpecBody;

macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/sops/",
            $name
        ))
    };
}

const SECRET: &str = fixture!("secret.enc.yaml");

fn keys() -> AgeKeys {
    AgeKeys::parse(fixture!("test-key.txt"), "test-key.txt", false).unwrap()
}

fn other_keys() -> AgeKeys {
    AgeKeys::parse(fixture!("other-key.txt"), "other-key.txt", false).unwrap()
}

fn bodies(found: &[Found]) -> Vec<serde_json::Value> {
    found
        .iter()
        .map(|f| match &f.body {
            SpecBody::Manifest(m) => serde_json::to_value(m).unwrap(),
            other => panic!("not a manifest: {other:?}"),
        })
        .collect()
}

/// The 1-based line of the first occurrence of `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    text[..text.find(needle).unwrap()].matches('\n').count() + 1
}

#[test]
fn a_sops_file_decrypts_to_its_documents_sealed() {
    let (found, errors) = file("s.yaml", SECRET, &keys(), None);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(found.len(), 2);
    assert!(found.iter().all(|f| f.policy.sealed));
    let docs = bodies(&found);
    assert_eq!(
        docs[0]["stringData"],
        json!({"password": "hunter2 \"quoted\" PLAINTEXT-MARKER", "multi": "line one\nline two\n"})
    );
    assert_eq!(docs[0]["data"], json!({"token": "aHVudGVyMg=="}));
    assert_eq!(docs[0]["type"], "Opaque");
    assert!(docs[0].get("sops").is_none());
    assert_eq!(
        docs[1]["data"],
        json!({"colour": "blue", "replicas": 3, "enabled": true, "ratio": 1.5, "empty": "",
               "list": ["one", {"two": 2}]})
    );
    // Each spec is placed at its document in the encrypted file.
    assert_eq!(found[1].at.line, line_of(SECRET, "\n---\n") + 2);
}

#[test]
fn every_rule_sops_writes_decrypts() {
    for (name, text) in [
        ("full", fixture!("full.enc.yaml")),
        ("unencrypted-regex", fixture!("unencrypted-regex.enc.yaml")),
        ("mac-only", fixture!("mac-only.enc.yaml")),
        ("two-recipients", fixture!("two-recipients.enc.yaml")),
        ("typed", fixture!("typed.enc.yaml")),
    ] {
        let (found, errors) = file("f.yaml", text, &keys(), None);
        assert!(errors.is_empty(), "{name}: {errors:?}");
        let doc = &bodies(&found)[0];
        assert!(doc["apiVersion"].is_string(), "{name}");
        assert_eq!(doc["metadata"]["namespace"], "dev", "{name}");
    }
    let (found, _) = file("f.yaml", fixture!("typed.enc.yaml"), &keys(), None);
    let spec = &bodies(&found)[0]["spec"];
    assert_eq!(spec["password"], "only this is encrypted");
    assert_eq!(
        (&spec["mode"], &spec["quoted_true"]),
        (&json!(420), &json!("true"))
    );
    let (found, _) = file("f.yaml", fixture!("mac-only.enc.yaml"), &keys(), None);
    assert_eq!(
        bodies(&found)[0]["data"],
        json!({"shown": "visible", "token_secret": "s3cr3t-value"})
    );
}

#[test]
fn the_decrypted_text_keeps_every_line() {
    let data_key = {
        let (at, block) = walk::documents(SECRET).unwrap()[0]
            .as_ref()
            .and_then(|d| d.get("sops").map(|(k, v)| (k.start(), v.clone())))
            .unwrap();
        metadata::read(&block, at)
            .unwrap()
            .data_key(&keys(), at)
            .unwrap()
    };
    assert_eq!(data_key.len(), 32);
    let plain = decrypt(SECRET, &keys()).unwrap().unwrap();
    assert_eq!(plain.text.lines().count(), SECRET.lines().count());
    assert_eq!(
        line_of(&plain.text, "password: "),
        line_of(SECRET, "password: ")
    );
    assert!(
        plain
            .text
            .lines()
            .any(|l| l == "    password: \"hunter2 \\\"quoted\\\" PLAINTEXT-MARKER\"")
    );
    // Comments stay as sops wrote them: encrypted, and not read.
    assert!(
        plain
            .text
            .lines()
            .all(|l| !l.contains("ENC[") || l.trim_start().starts_with("#ENC[")),
        "{}",
        plain.text.as_str()
    );
    assert!(!plain.text.contains("sops:"));
}

#[test]
fn without_a_key_the_error_names_the_recipients_and_how_to_give_one() {
    let (found, errors) = file("s.yaml", SECRET, &AgeKeys::default(), None);
    assert!(found.is_empty());
    assert_eq!(errors.len(), 1, "{errors:?}");
    let e = &errors[0];
    assert_eq!(
        (e.at.file.as_str(), e.at.line, e.at.column),
        ("s.yaml", line_of(SECRET, "sops:"), 1)
    );
    let recipient = keys().recipients()[0].clone();
    assert!(e.message.contains(&recipient), "{e}");
    for how in ["--sops-age-key-file", "SOPS_AGE_KEY_FILE", "SOPS_AGE_KEY"] {
        assert!(e.message.contains(how), "{e}");
    }
}

#[test]
fn a_key_that_is_not_a_recipient_is_named_by_its_public_half() {
    let (_, errors) = file("s.yaml", SECRET, &other_keys(), None);
    assert_eq!(errors.len(), 1, "{errors:?}");
    let message = &errors[0].message;
    assert!(message.contains(&other_keys().recipients()[0]), "{message}");
    assert!(message.contains("other-key.txt"), "{message}");
    // A file for two recipients opens with either key.
    let (_, errors) = file(
        "t.yaml",
        fixture!("two-recipients.enc.yaml"),
        &other_keys(),
        None,
    );
    assert!(errors.is_empty(), "{errors:?}");
}

/// `SECRET` with the line holding `needle` edited by `edit`.
fn edited(needle: &str, edit: impl Fn(&str) -> String) -> (String, usize) {
    let line = line_of(SECRET, needle);
    let text = SECRET
        .lines()
        .enumerate()
        .map(|(i, l)| if i + 1 == line { edit(l) } else { l.to_string() } + "\n")
        .collect();
    (text, line)
}

#[test]
fn a_changed_encrypted_byte_is_refused_at_its_value() {
    let (text, line) = edited("password: ENC[", |l| {
        let at = l.find("data:").unwrap() + 5;
        let c = if &l[at..=at] == "A" { "B" } else { "A" };
        format!("{}{c}{}", &l[..at], &l[at + 1..])
    });
    let (found, errors) = file("s.yaml", &text, &keys(), None);
    assert!(found.is_empty());
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!((errors[0].at.line, errors[0].at.column), (line, 15));
    assert!(errors[0].message.contains("does not decrypt"), "{errors:?}");
}

#[test]
fn a_value_moved_to_another_key_is_refused() {
    let token_line = SECRET.lines().find(|l| l.contains("token: ENC[")).unwrap();
    let token = token_line.split_once(": ").unwrap().1;
    let (text, line) = edited("password: ENC[", |_| format!("    password: {token}"));
    let (_, errors) = file("s.yaml", &text, &keys(), None);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].at.line, line);
    assert!(errors[0].message.contains("moved"), "{errors:?}");
}

#[test]
fn a_changed_plain_value_or_a_removed_one_fails_the_mac() {
    let (text, _) = edited("type: Opaque", |_| "type: kubernetes.io/opaque".into());
    let (_, errors) = file("s.yaml", &text, &keys(), None);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].message.contains("MAC mismatch"), "{errors:?}");
    assert_eq!(errors[0].at.line, line_of(SECRET, "    mac: "));
    let (text, _) = edited("token: ENC[", |_| String::new());
    let (_, errors) = file("s.yaml", &text, &keys(), None);
    assert!(errors[0].message.contains("MAC mismatch"), "{errors:?}");
    // With mac_only_encrypted, plain values are outside the MAC, as in sops.
    let mac_only = fixture!("mac-only.enc.yaml").replace("shown: visible", "shown: changed");
    let (found, errors) = file("m.yaml", &mac_only, &keys(), None);
    assert!(errors.is_empty() && found.len() == 1, "{errors:?}");
}

#[test]
fn malformed_and_unencrypted_values_are_refused_without_quoting_them() {
    let (text, line) = edited("token: ENC[", |_| {
        "    token: ENC[AES256_GCM,data:xx".into()
    });
    let (_, errors) = file("s.yaml", &text, &keys(), None);
    assert_eq!((errors.len(), errors[0].at.line), (1, line), "{errors:?}");
    assert!(
        errors[0].message.starts_with("malformed SOPS value"),
        "{errors:?}"
    );
    let (text, line) = edited("token: ENC[", |_| "    token: c2VjcmV0LXBsYWlu".into());
    let (_, errors) = file("s.yaml", &text, &keys(), None);
    assert_eq!((errors.len(), errors[0].at.line), (1, line), "{errors:?}");
    assert!(errors[0].message.contains("not encrypted"), "{errors:?}");
    assert!(!errors[0].message.contains("c2VjcmV0"), "{errors:?}");
}

#[test]
fn errors_of_the_decrypted_documents_point_at_their_lines_and_quote_no_plaintext() {
    let text = fixture!("bad-label.enc.yaml");
    let (found, errors) = file("b.yaml", text, &keys(), None);
    assert!(found.is_empty());
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].at.line, line_of(text, "team: ENC["));
    assert!(
        errors[0].message.contains("invalid label value"),
        "{errors:?}"
    );
    assert!(!errors[0].message.contains("LABEL-MARKER"), "{errors:?}");
    assert!(
        !errors[0].message.contains("valid label value!"),
        "{errors:?}"
    );
}

#[test]
fn plain_yaml_that_mentions_sops_is_read_as_before() {
    let text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sops\ndata:\n  sops: x\n";
    let (found, errors) = file("p.yaml", text, &AgeKeys::default(), None);
    assert!(errors.is_empty(), "{errors:?}");
    assert!(!found[0].policy.sealed);
    // A syntax error is the YAML reader's to report, SOPS file or not.
    let (_, errors) = file("p.yaml", "sops: [\n", &AgeKeys::default(), None);
    assert!(errors[0].message.starts_with("YAML: "), "{errors:?}");
}

#[test]
fn messages_lose_every_form_of_a_decrypted_value() {
    let secrets = [
        Zeroizing::new("hunter2".to_string()),
        Zeroizing::new("a\nb".to_string()),
        Zeroizing::new("x".repeat(100)),
    ];
    let long = format!("{:?}… (100 bytes)", "x".repeat(64));
    for message in [
        "invalid value \"hunter2\" here".to_string(),
        "invalid value \"a\\nb\"".to_string(),
        format!("invalid value {long}"),
    ] {
        let shown = redact(&message, &secrets);
        assert!(shown.contains("***"), "{shown}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("a\\nb"),
            "{shown}"
        );
        assert!(!shown.contains("xxxxxxxx"), "{shown}");
    }
}

#[test]
fn sealed_objects_show_their_identity_and_which_fields_change() {
    let live = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "x", "namespace": "dev", "labels": {"a": "b"}},
        "data": {"same": "1", "changed": "old", "gone": "g"}});
    let mut desired = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "x", "namespace": "dev", "labels": {"a": "b",
            "driftless.dev/instance": "default"}},
        "data": {"same": "1", "changed": "new", "added": "n"}});
    let mut shown_live = live.clone();
    mask_sealed(&mut shown_live, Some(&desired), "before");
    mask_sealed(&mut desired, Some(&live), "after");
    assert_eq!(desired["metadata"]["name"], "x");
    assert_eq!(desired["metadata"]["labels"]["a"], "***");
    assert_eq!(
        desired["metadata"]["labels"]["driftless.dev/instance"],
        "default"
    );
    assert_eq!(
        desired["data"],
        json!({"same": "***", "changed": "*** (after)", "added": "*** (after)"})
    );
    assert_eq!(shown_live["data"]["gone"], "*** (before)");
    let mut rendered = live.clone();
    mask_sealed(&mut rendered, None, "");
    assert_eq!(rendered["data"]["changed"], "***");
}

#[test]
fn a_sops_block_left_unread_is_an_error_not_an_object() {
    let text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\nsops:\n  mac: y\n";
    let (found, errors) = refuse_unread_metadata(crate::spec::yaml::file("u.yaml", text, None));
    assert!(found.is_empty());
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].message.contains("`sops` block"), "{errors:?}");
    // Values sops encrypted, their `sops` block gone.
    let cut = &SECRET[..SECRET.find("sops:").unwrap()];
    let (found, errors) = file("c.yaml", cut, &keys(), None);
    assert!(found.is_empty());
    assert!(errors[0].message.contains("no `sops` block"), "{errors:?}");
    // A `sops` map the SOPS reader does read, but that is not sops's metadata, is a
    // SOPS file's error too.
    let (found, errors) = file("u.yaml", text, &keys(), None);
    assert!(found.is_empty());
    assert!(errors[0].message.contains("lastmodified"), "{errors:?}");
}

/// Broken SOPS files (cut short anywhere, a byte changed anywhere) give errors at real
/// places, never a panic, and never an object with a value still encrypted.
#[test]
fn damaged_files_are_errors_at_real_places() {
    let lines = SECRET.lines().count();
    let mut variants: Vec<String> = (0..SECRET.len())
        .step_by(13)
        .filter(|&i| SECRET.is_char_boundary(i))
        .map(|i| SECRET[..i].to_string())
        .collect();
    for i in (0..SECRET.len()).step_by(29) {
        for c in ["A", ":", "\n", " ", "]", "\"", "é"] {
            if SECRET.is_char_boundary(i) && SECRET.is_char_boundary(i + 1) {
                variants.push(format!("{}{c}{}", &SECRET[..i], &SECRET[i + 1..]));
            }
        }
    }
    for text in &variants {
        let (found, errors) = file("d.yaml", text, &keys(), None);
        for e in &errors {
            assert!(e.at.line >= 1 && e.at.line <= lines + 1, "{e}");
            assert!(!e.message.contains('\n'), "a message over lines: {e:?}");
        }
        for doc in bodies(&found) {
            let json = doc.to_string();
            assert!(
                !json.contains("ENC[AES256_GCM"),
                "an encrypted value kept: {json}"
            );
        }
    }
}

/// Found by the fuzzer: a damaged `encrypted_regex` gave the regex crate's drawing of the
/// pattern, over three lines, as the message.
#[test]
fn a_bad_regex_in_the_metadata_is_a_one_line_error() {
    let text = SECRET.replacen("encrypted_regex: ^(data", "encrypted_regex: ^*data", 1);
    assert_ne!(text, SECRET);
    let (_, errors) = file("r.yaml", &text, &keys(), None);
    assert_eq!(errors.len(), 1, "{errors:?}");
    let message = &errors[0].message;
    assert!(!message.contains('\n'), "{message:?}");
    assert!(
        message.contains("`encrypted_regex`: not a valid regular expression (unopened group)"),
        "{message}"
    );
}

/// An apiserver's answer about a sealed object may quote its values: they are cut out,
/// a Secret's `data` as written and as decoded, while its name and kind stay.
#[test]
fn an_error_about_a_sealed_object_loses_its_values() {
    let body = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "db", "namespace": "shop", "labels": {"team": "payments"}},
        "data": {"token": "aHVudGVyMg=="},
        "stringData": {"password": "correct horse \"battery\""},
        "type": "Opaque",
    });
    let message = "Secret \"db\" is invalid: stringData[password]: Invalid value: \
                   \"correct horse \\\"battery\\\"\": bad; data[token]: hunter2 (aHVudGVyMg==), team payments";
    let shown = redact_sealed(message, &body);
    for gone in [
        "correct horse",
        "battery",
        "hunter2",
        "aHVudGVyMg==",
        "payments",
    ] {
        assert!(!shown.contains(gone), "{gone} in {shown}");
    }
    assert!(
        shown.starts_with("Secret \"db\" is invalid: stringData[password]"),
        "{shown}"
    );
    assert!(shown.contains("data[token]: *** (***)"), "{shown}");
}
