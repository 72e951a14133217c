//! Readiness by a tree's `[[health]]` rule (`spec::settings`): CEL over the live object,
//! its top-level fields (`apiVersion`, `kind`, `metadata`, `spec`, `status`, ...) as
//! variables, as Flux's `healthCheckExprs` binds them. `failed` is asked first, then
//! `current`; when neither holds the object is in progress.
//!
//! An expression that cannot be evaluated (it names a field the object does not have, or
//! compares a string with a number) does not hold: it answers, false, at once. In Flux
//! it is an error, retried until the timeout, and a `failed` naming a field that appears
//! only on failure held up every healthy object.

use std::sync::{Arc, LazyLock};

use serde_json::Value;

use super::{ObjectStatus, Status};
use crate::spec::settings::{Expr, HealthRule};

static ENV: LazyLock<Arc<cel::Env>> = LazyLock::new(|| Arc::new(cel::Env::stdlib()));

/// Whether `expr` holds for the object whose fields `vars` binds.
fn holds(expr: &Expr, vars: &cel::Context) -> bool {
    // A bug of the evaluator on some object is an answer of false, not a dead daemon.
    let run = std::panic::AssertUnwindSafe(|| expr.program.execute(vars));
    matches!(
        std::panic::catch_unwind(run),
        Ok(Ok(cel::Value::Bool(true)))
    )
}

/// The status `rule` gives the live object `obj`.
pub fn judge(rule: &HealthRule, obj: &Value) -> ObjectStatus {
    let mut vars = cel::Context::with_env(ENV.clone());
    if let Some(fields) = obj.as_object() {
        for (name, value) in fields {
            if let Ok(v) = cel::to_value(value) {
                vars.add_variable_from_value(name.as_str(), v);
            }
        }
    }
    let said = |expr: &Expr| format!("{} (rule at {})", expr.source, rule.at);
    if let Some(failed) = rule.failed.as_ref().filter(|e| holds(e, &vars)) {
        return ObjectStatus {
            status: Status::Failed,
            reason: Some("HealthCheckFailed".into()),
            message: format!("failed: {}", said(failed)),
        };
    }
    if let Some(current) = rule.current.as_ref().filter(|e| holds(e, &vars)) {
        return ObjectStatus {
            status: Status::Current,
            reason: None,
            message: format!("current: {}", said(current)),
        };
    }
    let message = match (&rule.in_progress, &rule.current) {
        (Some(p), _) if holds(p, &vars) => format!("in progress: {}", said(p)),
        (_, Some(c)) => format!("waiting for: {}", said(c)),
        (_, None) => "waiting".to_string(),
    };
    ObjectStatus {
        status: Status::InProgress,
        reason: Some("HealthCheckInProgress".into()),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Location;
    use serde_json::json;

    fn expr(source: &str) -> Option<Expr> {
        Some(Expr {
            source: source.into(),
            program: Arc::new(cel::Program::compile(source).unwrap()),
        })
    }

    fn rule(current: &str, failed: &str, in_progress: Option<&str>) -> HealthRule {
        HealthRule {
            at: Location {
                file: ".driftless.toml".into(),
                line: 3,
                column: 1,
            },
            api_version: "example.com/v1".into(),
            kind: "Widget".into(),
            current: expr(current),
            failed: expr(failed),
            in_progress: in_progress.and_then(expr),
            scope: None,
        }
    }

    fn widget(status: Value) -> Value {
        let mut obj = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "generation": 1}, "spec": {"size": 3}});
        if !status.is_null() {
            obj["status"] = status;
        }
        obj
    }

    #[test]
    fn failed_first_then_current_else_in_progress() {
        let r = rule(
            "status.phase == 'Ready'",
            "status.phase == 'Broken'",
            Some("status.phase == 'Pending'"),
        );
        let s = judge(&r, &widget(json!({"phase": "Broken"})));
        assert_eq!(s.status, Status::Failed);
        assert_eq!(
            s.message,
            "failed: status.phase == 'Broken' (rule at .driftless.toml:3:1)"
        );
        assert_eq!(
            judge(&r, &widget(json!({"phase": "Ready"}))).status,
            Status::Current
        );
        let pending = judge(&r, &widget(json!({"phase": "Pending"})));
        assert_eq!(pending.status, Status::InProgress);
        assert!(pending.message.starts_with("in progress: "), "{pending:?}");
        let other = judge(&r, &widget(json!({"phase": "Odd"})));
        assert_eq!(other.status, Status::InProgress);
        assert!(
            other
                .message
                .starts_with("waiting for: status.phase == 'Ready'")
        );
    }

    #[test]
    fn a_missing_field_makes_an_expression_false_not_an_error() {
        // `failed` names a field only a failure sets: a healthy object is judged by
        // `current` at once.
        let r = rule(
            "status.phase == 'Ready' && spec.size > 0",
            "status.error.code > 0",
            None,
        );
        assert_eq!(
            judge(&r, &widget(json!({"phase": "Ready"}))).status,
            Status::Current
        );
        // No status at all: in progress, not an error and not Unknown.
        assert_eq!(judge(&r, &widget(Value::Null)).status, Status::InProgress);
        let presence = rule("has(status.phase)", "has(status.error)", None);
        assert_eq!(
            judge(&presence, &widget(Value::Null)).status,
            Status::InProgress
        );
        assert_eq!(
            judge(&presence, &widget(json!({"phase": "x"}))).status,
            Status::Current
        );
        // A type mismatch is false as well.
        let mismatch = rule("status.phase > 3", "false", None);
        assert_eq!(
            judge(&mismatch, &widget(json!({"phase": "x"}))).status,
            Status::InProgress
        );
    }

    #[test]
    fn metadata_and_spec_are_bound() {
        let r = rule("metadata.name == 'w' && spec.size == 3", "false", None);
        assert_eq!(judge(&r, &widget(Value::Null)).status, Status::Current);
    }
}
