//! `targets("slurm:…")` selections (`partition=gpu`, `job=42`, `nodes=gpu[01-64]`): the
//! words read, the command that lists the selected nodes, and a node spec for each node
//! listed. Apart from the rest of `slurm.rs` because it only chooses nodes: nothing here
//! runs on them.

use super::{is_slurm_name, SlurmSpec};
use std::time::Duration;

/// Whether what follows `slurm:` selects nodes (`partition=gpu`) rather than naming one
/// (`gpu01`, `gpu01?job=42`).
pub fn is_selection(text: &str) -> bool {
    text.split('?')
        .next()
        .is_some_and(|head| head.contains('='))
}

/// `targets("slurm:…")`: nodes chosen by the scheduler, one target each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// A Slurm host list (`gpu[01-64],login1`), as `scontrol show hostnames` reads it.
    pub nodes: Option<String>,
    /// A running job: its nodes (or those of `nodes` in it), each target in the job.
    pub job: Option<u64>,
    /// A partition: its nodes (or those of `nodes`), allocations from it.
    pub partition: Option<String>,
    pub immediate: Option<Duration>,
}

impl Selection {
    /// `partition=P`, `job=ID`, `nodes=LIST`, joined with `&`, plus `immediate=DUR`.
    pub fn parse(text: &str) -> Result<Selection, String> {
        let mut sel = Selection {
            nodes: None,
            job: None,
            partition: None,
            immediate: None,
        };
        for pair in text.split('&') {
            let Some((k, v)) = pair.split_once('=') else {
                return Err(format!(
                    "'{pair}' is not a selection: give partition=P, job=ID or nodes=LIST"
                ));
            };
            match k {
                "nodes" => {
                    let ok = v
                        .bytes()
                        .next()
                        .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
                        && v.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"-_.,[]".contains(&b));
                    if !ok {
                        return Err(format!(
                            "nodes: '{v}' is not a Slurm host list (e.g. gpu[01-64],login1)"
                        ));
                    }
                    sel.nodes = Some(v.to_string());
                }
                "job" => {
                    sel.job =
                        Some(v.parse::<u64>().ok().filter(|&j| j > 0).ok_or_else(|| {
                            format!("job: '{v}' is not a job id (a whole number)")
                        })?)
                }
                "partition" => {
                    if !is_slurm_name(v) {
                        return Err(format!("partition: '{v}' is not a partition name"));
                    }
                    sel.partition = Some(v.to_string());
                }
                "immediate" => {
                    sel.immediate = Some(
                        crate::base::duration::parse(v).map_err(|e| format!("immediate: {e}"))?,
                    )
                }
                other => {
                    let known = ["partition", "job", "nodes", "immediate"];
                    return Err(format!(
                        "unknown setting '{other}'{} (partition, job, nodes, immediate)",
                        crate::base::suggest::hint(other, known)
                    ));
                }
            }
        }
        if sel.job.is_some() && sel.partition.is_some() {
            return Err(
                "give job or partition, not both: a job's steps run in the job's own partition"
                    .into(),
            );
        }
        if sel.nodes.is_none() && sel.job.is_none() && sel.partition.is_none() {
            return Err("say which nodes: partition=P, job=ID or nodes=LIST".into());
        }
        Ok(sel)
    }

    /// The command that lists the selection's nodes as a host list or one per line:
    /// `scontrol show hostnames` expands the first two.
    pub fn list_command(&self) -> Vec<String> {
        let words: Vec<String> = match (&self.nodes, self.job, &self.partition) {
            (Some(list), _, _) => vec![
                "scontrol".into(),
                "show".into(),
                "hostnames".into(),
                list.clone(),
            ],
            (None, Some(job), _) => vec![
                "squeue".into(),
                "--noheader".into(),
                format!("--jobs={job}"),
                "--states=RUNNING".into(),
                "--format=%N".into(),
            ],
            (None, None, Some(p)) => vec![
                "sinfo".into(),
                "--noheader".into(),
                "--Node".into(),
                format!("--partition={p}"),
                "--format=%N".into(),
            ],
            (None, None, None) => unreachable!("checked by parse"),
        };
        words
    }

    /// The node names in a listing (one or more per line, `,`-separated host lists
    /// already expanded by the caller), each once, in order.
    pub fn names(listing: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for n in listing
            .split(|c: char| c.is_whitespace())
            .filter(|n| !n.is_empty())
        {
            if !out.iter().any(|o| o == n) {
                out.push(n.to_string());
            }
        }
        out
    }

    /// The target spec of each node.
    pub fn specs(&self, nodes: &[String]) -> Result<Vec<SlurmSpec>, String> {
        nodes
            .iter()
            .map(|n| SlurmSpec::new(n, self.job, self.partition.as_deref(), self.immediate))
            .collect()
    }
}
