//! `--limit PATTERN`: which of the hosts `targets("group")` gives a run keeps, as
//! Ansible's `--limit` (`run`, `plan` and `apply` take it; a plan records it).
//!
//! PATTERN is terms separated by commas: `gpu01`, `gpu*` (wildcards, `base/glob.rs`),
//! a group name (its members, its children's included), `!TERM` (not these), `&TERM`
//! (only those also in these). A host is kept when it matches a plain term (or there is
//! none), every `&` term and no `!` term: `--limit 'gpu,!gpu07'`, `--limit 'a100,&rack2'`.
//! A group's Slurm selections are not expanded here (the scheduler lists their nodes
//! when the group is used): a node of one is matched by its name.

use crate::base::glob;
use crate::base::inventory::Inventory;
use crate::base::suggest;

#[derive(Debug, Clone, PartialEq)]
enum Op {
    Any,
    Not,
    And,
}

#[derive(Debug, Clone)]
struct Term {
    op: Op,
    word: String,
    /// The word names a group: its members (children's included), from the inventory.
    members: Option<Vec<String>>,
}

#[derive(Debug, Clone)]
pub struct Limit {
    /// As given, for messages, the plan and the record.
    pub text: String,
    terms: Vec<Term>,
}

impl Limit {
    /// Reads PATTERN against the inventory: every term must name a group or match a
    /// host of it (or, where groups hold Slurm selections, may be a node's name), and the
    /// whole must keep some host.
    pub fn parse(text: &str, inv: Option<&Inventory>) -> Result<Limit, String> {
        let shown = format!("--limit {text}");
        let Some(inv) = inv else {
            return Err(format!(
                "{shown}: a limit picks hosts of the inventory's groups, and there is no inventory (./inventory.toml or --inventory FILE)"
            ));
        };
        let mut terms = Vec::new();
        for raw in text.split(',').map(str::trim) {
            let (op, word) = match raw.strip_prefix('!') {
                Some(w) => (Op::Not, w),
                None => match raw.strip_prefix('&') {
                    Some(w) => (Op::And, w),
                    None => (Op::Any, raw),
                },
            };
            if word.is_empty() {
                return Err(format!(
                    "{shown}: an empty term; give host names, wildcards or groups separated by commas, e.g. 'gpu,!gpu07'"
                ));
            }
            let members = match inv.groups.contains_key(word) {
                true => Some(inv.group(word)?),
                false => None,
            };
            let term = Term {
                op,
                word: word.to_string(),
                members,
            };
            let matches_a_host = inv.hosts.keys().any(|h| term.matches(h));
            if term.members.is_none() && !matches_a_host && !inv.has_slurm() {
                let names = inv
                    .hosts
                    .keys()
                    .chain(inv.groups.keys())
                    .map(String::as_str);
                return Err(format!(
                    "{shown}: '{word}' is no group and matches no host of {}{}",
                    inv.path.display(),
                    suggest::hint(word, names)
                ));
            }
            terms.push(term);
        }
        let limit = Limit {
            text: text.to_string(),
            terms,
        };
        let kept = inv.hosts.keys().filter(|h| limit.keeps(h)).count();
        if kept == 0 && !inv.has_slurm() {
            return Err(format!(
                "{shown}: keeps none of the {} hosts of {}",
                inv.hosts.len(),
                inv.path.display()
            ));
        }
        Ok(limit)
    }

    /// Whether the host or node named `name` is kept.
    pub fn keeps(&self, name: &str) -> bool {
        let any: Vec<&Term> = self.terms.iter().filter(|t| t.op == Op::Any).collect();
        (any.is_empty() || any.iter().any(|t| t.matches(name)))
            && self.terms.iter().all(|t| match t.op {
                Op::Any => true,
                Op::And => t.matches(name),
                Op::Not => !t.matches(name),
            })
    }
}

impl Term {
    fn matches(&self, name: &str) -> bool {
        match &self.members {
            Some(members) => members.iter().any(|m| m == name),
            None => glob::matches(&self.word, name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inventory(text: &str) -> Inventory {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("inventory.toml");
        std::fs::write(&p, text).unwrap();
        Inventory::load(&p).unwrap()
    }

    const FLEET: &str = r#"
[hosts.gpu01]
address = "a.example"
[hosts.gpu02]
address = "b.example"
[hosts.gpu07]
address = "c.example"
[hosts.cpu01]
address = "d.example"
[groups]
a100 = ["gpu01", "gpu02"]
h100 = ["gpu07"]
gpu = { children = ["a100", "h100"] }
rack2 = ["gpu02", "cpu01"]
"#;

    fn kept(limit: &str) -> Vec<&'static str> {
        let inv = inventory(FLEET);
        let l = Limit::parse(limit, Some(&inv)).unwrap();
        ["gpu01", "gpu02", "gpu07", "cpu01"]
            .into_iter()
            .filter(|h| l.keeps(h))
            .collect()
    }

    #[test]
    fn terms_globs_groups_not_and_and() {
        assert_eq!(kept("gpu01"), ["gpu01"]);
        assert_eq!(kept("gpu*"), ["gpu01", "gpu02", "gpu07"]);
        assert_eq!(kept("gpu"), ["gpu01", "gpu02", "gpu07"], "children count");
        assert_eq!(kept("gpu,!gpu07"), ["gpu01", "gpu02"]);
        assert_eq!(kept("!h100"), ["gpu01", "gpu02", "cpu01"]);
        assert_eq!(kept("gpu,&rack2"), ["gpu02"]);
        assert_eq!(kept("a100, cpu01"), ["gpu01", "gpu02", "cpu01"]);
    }

    #[test]
    fn a_limit_that_matches_nothing_is_an_error() {
        let inv = inventory(FLEET);
        let err = |l: &str| Limit::parse(l, Some(&inv)).unwrap_err();
        assert!(
            err("gpu08").contains("'gpu08' is no group and matches no host"),
            "{}",
            err("gpu08")
        );
        assert!(err("a10").contains("did you mean"), "{}", err("a10"));
        assert!(
            err("gpu01,&h100").contains("keeps none of the 4 hosts"),
            "{}",
            err("gpu01,&h100")
        );
        assert!(err("gpu,").contains("an empty term"));
        assert!(Limit::parse("gpu", None)
            .unwrap_err()
            .contains("there is no inventory"));
    }
}
