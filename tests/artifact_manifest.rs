//! What `artifact.capture` records beside the cache (issue 26, item 1): the throughput the
//! run's gate measured, given as `throughput = N`, refused when it is not a measurement.
//! (Where it was made, by name and by machine, is checked in tests/clean_reset.rs and
//! tests/cache_rollout.rs, on this machine and over sshd.)
use crate::common::*;

#[test]
fn a_throughput_that_is_not_a_measurement_is_refused_at_its_line() {
    let env = Env::new();
    let cache = tempfile::Builder::new()
        .prefix("runbook-manifest-test-")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::write(cache.path().join("k"), "kernel").unwrap();
    for (value, want) in [
        (
            "-1",
            "option 'throughput' must be a number ≥ 0 (what the gate measured), got -1",
        ),
        (
            "0/0",
            "option 'throughput' must be a number ≥ 0 (what the gate measured), got NaN",
        ),
        ("\"fast\"", "option 'throughput' must be a number"),
    ] {
        let rb = env.write(
            "capture.lua",
            &subst(
                r#"runbook { name = "capture" }
step("capture", function()
  artifact.capture(target("local"), { name = "c", paths = "@cache@", throughput = @value@ })
end)
"#,
                &[("cache", &cache.path().display()), ("value", &value)],
            ),
        );
        let out = Run::new(&env, &rb).yes().json().run();
        out.assert_exit(1);
        let error = out.step_error("capture");
        assert!(
            error.contains("capture.lua:3:") && error.contains(want),
            "{value}: {error}"
        );
        assert!(
            !env.state().join("artifacts/manifests").exists(),
            "{value}: nothing captured"
        );
    }
    let rb = env.write(
        "capture.lua",
        &subst(
            r#"runbook { name = "capture" }
step("capture", function()
  artifact.capture(target("local"), { name = "c", paths = "@cache@", throughput = 21.5 })
end)
"#,
            &[("cache", &cache.path().display())],
        ),
    );
    Run::new(&env, &rb).yes().expect_exit(0).run();
    let manifest = std::fs::read_dir(env.state().join("artifacts/manifests"))
        .unwrap()
        .flatten()
        .next()
        .unwrap();
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(manifest.path()).unwrap()).unwrap();
    assert_eq!(m["throughput"], 21.5);
}
