use super::*;

fn spec() -> Spec {
    Spec {
        python: "python3".into(),
        script: "w.py".into(),
        args: Vec::new(),
        env: Vec::new(),
        cwd: None,
        timeout: None,
        detach: None,
        single_threaded: true,
        expect_cache: Vec::new(),
        expect_hit: None,
        torch_report: false,
        mega_save: None,
        quiet_warning: None,
    }
}

#[test]
fn defaults_join_the_callers_environment() {
    let env = environment(&spec());
    assert_eq!(
        env,
        vec![
            ("PYTHONUNBUFFERED".to_string(), "1".into()),
            ("TORCHINDUCTOR_COMPILE_THREADS".to_string(), "1".into()),
        ]
    );
    let mine = Spec {
        env: vec![("TORCHINDUCTOR_COMPILE_THREADS".into(), "4".into())],
        single_threaded: true,
        ..spec()
    };
    assert!(environment(&mine).contains(&("TORCHINDUCTOR_COMPILE_THREADS".into(), "4".into())));
    let multi = Spec {
        single_threaded: false,
        ..spec()
    };
    assert!(!environment(&multi)
        .iter()
        .any(|(k, _)| k == "TORCHINDUCTOR_COMPILE_THREADS"));
}

#[test]
fn growth_means_more_files_or_bytes() {
    let c = |fb, bb, fa, ba| CacheGrowth {
        path: "/c".into(),
        files_before: fb,
        bytes_before: bb,
        files_after: fa,
        bytes_after: ba,
        grew: None,
        state: None,
    };
    assert!(grew(&c(None, None, Some(1), Some(10))));
    assert!(grew(&c(Some(1), Some(10), Some(1), Some(11))));
    assert!(!grew(&c(Some(1), Some(10), Some(1), Some(10))));
    assert!(!grew(&c(None, None, None, None)));
    assert!(!grew(&c(None, None, Some(0), Some(0))));
    assert_eq!(state(&c(None, None, Some(3), Some(30))), "filled");
    assert_eq!(state(&c(Some(14), Some(122), Some(14), Some(122))), "warm");
    assert_eq!(state(&c(Some(14), Some(122), Some(0), Some(0))), "empty");
    assert_eq!(state(&c(None, None, None, None)), "empty");
    assert_eq!(parse_size("4096 3"), Some((3, 4096)), "BYTES FILES");
    assert_eq!(parse_size("missing"), None);
    assert_eq!(size(Some(1200), Some(4096)), "4.0 KiB, 1,200 files");
}

#[test]
fn the_report_reads_torchs_groups_and_judges_by_counters_first() {
    let line = r#"{"counters": {"aot_autograd": {"autograd_cache_hit": 1, "ok": 1}, "inductor": {"fxgraph_cache_hit": 2, "fxgraph_cache_bypass": 1, "pattern_matcher_count": 76}}, "error": null, "inductor": "/c", "mega": {"saved": false, "reason": "old"}, "torch": "2.11.0+cu130"}"#;
    let r: TorchReport = serde_json::from_str(line).unwrap();
    let c = r.counters.clone().unwrap();
    assert_eq!(
        (
            c.fxgraph_cache_hit,
            c.fxgraph_cache_miss,
            c.fxgraph_cache_bypass,
            c.autograd_cache_hit
        ),
        (2, 0, 1, 1)
    );
    assert_eq!(r.mega.as_ref().unwrap().reason.as_deref(), Some("old"));
    // Counters win over the files: a bypass compiled a graph and left no entry.
    let mut h = HitCheck {
        dir: "/c".into(),
        entries_before: Some(2),
        entries_after: Some(2),
        ..Default::default()
    };
    judge(&mut h, Some(&c));
    assert_eq!(
        (h.graphs_compiled, h.hit, h.counted_by.as_deref()),
        (Some(1), Some(false), Some("counters"))
    );
    assert_eq!(
        hit_message("local", &h, Some(&r)),
        "warm-up on local: the restored cache missed: 1 graph compiled (inductor's counters: \
         2 hit, 0 miss, 1 bypass; FX graph cache entries in /c/fxgraph: 2 → 2, 0 new)"
    );
    // Without counters, the new entries; no fxgraph/ before is none.
    let mut h = HitCheck {
        dir: "/c".into(),
        entries_after: Some(3),
        ..Default::default()
    };
    judge(&mut h, None);
    assert_eq!((h.graphs_compiled, h.hit), (Some(3), Some(false)));
    // Nothing looked up at all is no proof, and says so.
    let idle: TorchReport =
        serde_json::from_str(r#"{"counters": {"inductor": {}, "aot_autograd": {}}}"#).unwrap();
    let mut h = HitCheck::default();
    judge(&mut h, idle.counters.as_ref());
    assert_eq!(h.hit, Some(true));
    assert!(hit_message("local", &h, Some(&idle)).contains("no FX graph was looked up either"));
}
