//! DCGM's diagnostic (`dcgmi diag -r N -j`), read into tests and their results. DCGM
//! 3.x (`"DCGM GPU Diagnostic"`, a result's GPU in `gpu_id`) and 4.x (`"DCGM
//! Diagnostic"`, `entity_group`/`entity_id`) both nest tests under `test_categories`;
//! the reader walks that shape and takes each result's status, GPU and words.

use super::finding::{Action, Finding, Verdict};
use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Pass,
    Fail,
    Warn,
    /// Skipped or not run: it did not pass.
    Skip,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TestResult {
    pub name: String,
    pub result: Outcome,
    /// The GPU's index, for a result of one GPU.
    pub gpu: Option<u32>,
    /// What DCGM said of it (its warnings, errors and info).
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Dcgm {
    pub level: u8,
    /// Every test passed: none failed, warned or was skipped, and it finished in time.
    pub passed: bool,
    pub timed_out: bool,
    pub version: Option<String>,
    pub tests: Vec<TestResult>,
}

impl Dcgm {
    /// A run that did not finish within its time: it passed nothing.
    pub fn timed_out(level: u8) -> Self {
        Dcgm {
            level,
            passed: false,
            timed_out: true,
            version: None,
            tests: Vec::new(),
        }
    }

    /// Each result that did not pass as a finding, with its GPU.
    pub fn findings(&self) -> Vec<(Option<u32>, Finding)> {
        let mut out = Vec::new();
        if self.timed_out {
            out.push((
                None,
                Finding {
                    check: "dcgm".into(),
                    severity: Verdict::Critical,
                    detail: format!(
                        "dcgmi diag -r {} did not finish in time: a GPU that hangs its diagnostic is suspect",
                        self.level
                    ),
                    action: Action::DrainAndReset,
                },
            ));
        }
        for t in &self.tests {
            let (severity, action, what) = match t.result {
                Outcome::Pass => continue,
                Outcome::Fail => (Verdict::Critical, Action::ContactSupport, "failed"),
                Outcome::Warn => (Verdict::Warn, Action::None, "warned"),
                Outcome::Skip => (Verdict::Warn, Action::None, "was skipped (not passed)"),
            };
            let detail = if t.detail.is_empty() {
                format!("DCGM level {} test '{}' {what}", self.level, t.name)
            } else {
                format!(
                    "DCGM level {} test '{}' {what}: {}",
                    self.level, t.name, t.detail
                )
            };
            out.push((
                t.gpu,
                Finding {
                    check: "dcgm".into(),
                    severity,
                    detail,
                    action,
                },
            ));
        }
        out
    }
}

/// Reads `dcgmi diag -r LEVEL -j`'s JSON.
pub fn parse(level: u8, json: &str) -> Result<Dcgm, String> {
    let v: Value = serde_json::from_str(json.trim()).map_err(|e| format!("not JSON: {e}"))?;
    let top = v
        .get("DCGM Diagnostic")
        .or_else(|| v.get("DCGM GPU Diagnostic"))
        .ok_or("no \"DCGM Diagnostic\" object")?;
    let version = v
        .get("version")
        .or_else(|| top.get("version"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let categories = top
        .get("test_categories")
        .and_then(Value::as_array)
        .ok_or("no test_categories")?;
    let mut tests = Vec::new();
    for cat in categories {
        for test in cat
            .get("tests")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = test
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_string();
            for r in test
                .get("results")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let status = r.get("status").and_then(Value::as_str).unwrap_or("");
                tests.push(TestResult {
                    name: name.clone(),
                    result: outcome(status),
                    gpu: gpu_of(r),
                    detail: words(r),
                });
            }
        }
    }
    if tests.is_empty() {
        return Err("no test results".into());
    }
    let passed = tests.iter().all(|t| t.result == Outcome::Pass);
    Ok(Dcgm {
        level,
        passed,
        timed_out: false,
        version,
        tests,
    })
}

fn outcome(status: &str) -> Outcome {
    match status.to_ascii_lowercase().as_str() {
        "pass" => Outcome::Pass,
        "fail" => Outcome::Fail,
        "warn" => Outcome::Warn,
        // "Skip", "Not Run" and anything this reader does not know: not passed.
        _ => Outcome::Skip,
    }
}

/// DCGM 3 names a result's GPU as `gpu_id` (a string of digits); DCGM 4 as an entity.
fn gpu_of(r: &Value) -> Option<u32> {
    let number = |v: &Value| match v {
        Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    };
    if let Some(id) = r.get("gpu_id").and_then(number) {
        return Some(id);
    }
    match r.get("entity_group").and_then(Value::as_str) {
        Some("GPU") => r.get("entity_id").and_then(number),
        _ => None,
    }
}

/// The words of a result's warnings, errors and info, joined.
fn words(r: &Value) -> String {
    let mut out: Vec<String> = Vec::new();
    for key in ["errors", "warnings"] {
        for w in r.get(key).and_then(Value::as_array).into_iter().flatten() {
            let text = w
                .get("warning")
                .or_else(|| w.get("message"))
                .or_else(|| w.get("error"))
                .and_then(Value::as_str)
                .or_else(|| w.as_str());
            if let Some(t) = text {
                out.push(t.trim().to_string());
            }
        }
    }
    match r.get("info") {
        Some(Value::String(s)) if !s.trim().is_empty() => out.push(s.trim().to_string()),
        Some(Value::Array(a)) => out.extend(a.iter().filter_map(Value::as_str).map(str::to_string)),
        _ => {}
    }
    out.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_dcgm_3_and_4_results() {
        let v3 = r#"{ "DCGM GPU Diagnostic": { "test_categories": [
            { "category": "Deployment", "tests": [ { "name": "Denylist", "results": [ { "status": "Pass" } ] } ] },
            { "category": "Hardware", "tests": [ { "name": "GPU Memory", "results": [
                { "gpu_id": "0", "status": "Pass" },
                { "gpu_id": "1", "status": "Fail", "warnings": [ { "warning": "DBE detected", "error_id": 83 } ] } ] } ] },
            { "category": "Stress", "tests": [ { "name": "Targeted Power", "results": [ { "gpu_id": "0", "status": "Skip" } ] } ] }
        ], "version": "3.3.5" } }"#;
        let d = parse(2, v3).unwrap();
        assert!(!d.passed);
        assert_eq!(d.version.as_deref(), Some("3.3.5"));
        let failed = &d.tests[2];
        assert_eq!(
            (failed.result, failed.gpu, failed.detail.as_str()),
            (Outcome::Fail, Some(1), "DBE detected")
        );
        assert_eq!(d.tests[3].result, Outcome::Skip);
        let f = d.findings();
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].0, Some(1));
        assert_eq!(f[0].1.severity, Verdict::Critical);

        let v4 = r#"{ "DCGM Diagnostic": { "test_categories": [ { "category": "Deployment",
            "tests": [ { "name": "software", "results": [ { "entity_group": "GPU", "entity_group_id": 1, "entity_id": 0, "status": "Pass" } ],
            "test_summary": { "status": "Pass" } } ] } ] }, "version": "4.1.1" }"#;
        let d = parse(1, v4).unwrap();
        assert!(d.passed);
        assert_eq!(d.tests[0].gpu, Some(0));
        assert!(parse(1, "Error: unable to connect").is_err());
    }
}
