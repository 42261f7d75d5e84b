//! examples/fleet/cache-rollout.lua (issue 26, item 6) against three real sshd, each a
//! machine of its own (its own machine id and host key) with its own home, where the
//! cache lives (`~/.cache/inductor`), and its own GPUs as the nvidia-smi double reports
//! them: node1 and node2 eight H200s, node3 four A100s. The cache is captured on node1
//! and restored in parallel: node2 gets it byte for byte (its own kept aside), node3 is
//! refused on the GPU field and keeps its own; one line per node.
use crate::common::sshd::Fleet;
use crate::common::*;
use std::collections::BTreeMap;
use std::path::Path;

/// Relative path → content of every file below `dir`.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(base: &Path, d: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                let rel = p.strip_prefix(base).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

#[test]
fn capture_on_one_node_restore_on_the_others_where_the_key_matches() {
    require_sshd!();
    let mut fleet = Fleet::start_machines(3);
    let homes = tempfile::Builder::new()
        .prefix("runbook-rollout-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let home = |n: &str| homes.path().join(n);
    let cache = |n: &str| home(n).join(".cache/inductor");
    for (node, gpus) in [
        ("node1", "h200x8"),
        ("node2", "h200x8"),
        ("node3", "a100x4"),
    ] {
        std::fs::create_dir_all(cache(node)).unwrap();
        let h = home(node).display().to_string();
        fleet
            .node(node)
            .set_env(&[("HOME", &h), ("NVIDIA_SMI_FIXTURE", gpus)]);
    }
    // node1 compiled: nested, binary entries; node2 and node3 have caches of their own.
    std::fs::create_dir_all(cache("node1").join("fxgraph/ab")).unwrap();
    std::fs::write(
        cache("node1").join("fxgraph/ab/graph.bin"),
        (0..=255u8).cycle().take(50_000).collect::<Vec<u8>>(),
    )
    .unwrap();
    std::fs::write(cache("node1").join("attention.kernel"), "h200 kernel\n").unwrap();
    std::fs::write(cache("node2").join("attention.kernel"), "stale\n").unwrap();
    std::fs::write(cache("node3").join("attention.kernel"), "a100 kernel\n").unwrap();
    let known_good = files(&cache("node1"));
    let node3_before = files(&cache("node3"));
    // One venv for all: the key's python is read from it.
    let venv = homes.path().join("venv");
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(made.success());

    let node1_id = std::fs::read_to_string(fleet.node("node1").machine_id.as_ref().unwrap())
        .unwrap()
        .trim()
        .to_string();
    let env = Env::new();
    let out = Run::new(&env, repo().join("examples/fleet/cache-rollout.lua"))
        .yes()
        .json()
        .set("source", "node1")
        .set("nodes", "node1 node2 node3")
        .set("cache", "~/.cache/inductor")
        .set("venv", &venv)
        .ssh(&fleet)
        .run();
    out.assert_exit(0);
    let ids: Vec<String> = std::fs::read_dir(env.state().join("artifacts/manifests"))
        .unwrap()
        .flatten()
        .map(|e| {
            let m: serde_json::Value =
                serde_json::from_slice(&std::fs::read(e.path()).unwrap()).unwrap();
            assert_eq!(m["source"], "node1");
            assert_eq!(m["key"]["gpu"], "NVIDIA H200");
            // Which machine node1 is: the host key the connection verified, its machine id.
            let who = &m["source_identity"];
            assert_eq!(who["machine_id"], node1_id.as_str(), "{who}");
            assert!(
                who["host_key"]
                    .as_str()
                    .is_some_and(|k| k.starts_with("ssh-ed25519 SHA256:")),
                "{who}"
            );
            m["id"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(ids.len(), 1, "captured once, on node1");
    let lines: Vec<String> = out
        .logs()
        .into_iter()
        .filter(|l| l.starts_with("node") && l.contains(": "))
        .filter(|l| !l.starts_with("node3: artifact.restore"))
        .collect();
    assert_eq!(
        lines,
        vec![
            "node1: the source, left as it is".to_string(),
            format!("node2: restored artifact {}", ids[0]),
            format!(
                "node3: not restored: the key here differs from the newest artifact 'compile-cache' ({}, made just now on node1): driver: 580.82.07 (artifact) ≠ 570.133.20 (here); gpu: NVIDIA H200 (artifact) ≠ NVIDIA A100-SXM4-80GB (here)",
                ids[0]
            ),
        ],
        "one line per node, in the nodes' order: {:?}",
        out.logs()
    );
    assert!(out
        .logs()
        .contains(&"1 node(s) restored, 1 not (their key differs or no artifact matches: they compile their own)".to_string()));
    assert_eq!(
        files(&cache("node2")),
        known_good,
        "node2 got node1's cache"
    );
    assert_eq!(files(&cache("node3")), node3_before, "node3 keeps its own");
    assert_eq!(files(&cache("node1")), known_good, "the source as it was");
    let kept: Vec<_> = std::fs::read_dir(home("node2").join(".cache"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.display().to_string().contains("inductor.runbook-kept-"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(
        std::fs::read_to_string(kept[0].join("attention.kernel")).unwrap(),
        "stale\n",
        "node2's own cache is kept aside"
    );
}
