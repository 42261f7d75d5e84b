//! The Slurm target against a real one-node cluster (tests/common/slurm.rs).

mod common;

/// The harness itself: the cluster answers and the sleep job runs on the node.
#[test]
fn the_test_cluster_runs_a_job_on_its_node() {
    let c = require_slurm!();
    let nodes = c.client(&["squeue", "-h", "-j", &c.job.to_string(), "-o", "%T %N"]);
    assert_eq!(nodes, format!("RUNNING {}", c.node));
}
