//! Holding a real run to a plan (`Enforcer`): each change as it is reached must be one of
//! its step's planned changes, each read must return what it returned when planned.

use super::*;

use std::collections::BTreeMap;

/// The plan a run's actions are seen by: none, the one a plan pass records, or the one a
/// run is held to. One at a time: a plan pass is never held to a plan.
#[derive(Default)]
pub enum Watch {
    #[default]
    Free,
    Recording(Recording),
    Held(Enforcer),
}

impl Watch {
    /// The plan this run is held to, if it is.
    pub fn held(&mut self) -> Option<&mut Enforcer> {
        match self {
            Watch::Held(enforcer) => Some(enforcer),
            _ => None,
        }
    }

    /// What a plan pass records, if this is one.
    pub fn recording(&mut self) -> Option<&mut Recording> {
        match self {
            Watch::Recording(rec) => Some(rec),
            _ => None,
        }
    }
}

/// Holds a real run to a plan.
#[derive(Debug)]
pub struct Enforcer {
    salt: Salt,
    planned: Vec<Change>,
    /// Which planned changes ran (in this attempt of their step).
    used: Vec<bool>,
    /// Which ran in any attempt: a retry may pass over one made before (it is done).
    made: Vec<bool>,
    reads: Vec<Read>,
    reads_used: Vec<bool>,
    /// Targets this run changed: reads there after that are expected to differ.
    changed: std::collections::HashSet<String>,
    /// The step whose attempt runs now.
    step: Option<usize>,
    /// Set at the first difference: nothing changes after that.
    broken: Option<String>,
    /// Whether any change was let through: a refusal after one cannot say that nothing
    /// was changed.
    made_any: bool,
    /// Why the run was stopped before its first change because the plan does not read
    /// as the change it holds (an edited plan file): `apply` then refuses, exit 2.
    refused: Option<String>,
    /// What each planned change a hole names printed when it ran in this run, by its
    /// index: the only value that hole may hold.
    outputs: BTreeMap<usize, Vec<u8>>,
    /// A saved plan (a file anyone may have edited): what it shows of its reads and of
    /// what its steps said is held to what the run reads and says (`read`, `note`).
    texts: bool,
    /// What each step said in the plan, and which of those the run's step has said.
    notes: BTreeMap<usize, Vec<Note>>,
    notes_said: BTreeMap<usize, Vec<bool>>,
    /// A read of this run returned something else than the plan's, or something the plan
    /// does not know (offline, secret, a read it did not make): a text that tells what
    /// reads found may then differ without the file being edited.
    moved: bool,
}

/// A real command read back as a template (`known_after.rs`): the command line and its
/// standard input, each hole holding the marker of its change.
pub struct Templated {
    pub command: Vec<u8>,
    pub stdin: Option<Vec<u8>>,
}

impl Enforcer {
    pub fn new(plan: &Plan) -> Self {
        Enforcer {
            salt: plan.salt.clone(),
            used: vec![false; plan.changes.len()],
            made: vec![false; plan.changes.len()],
            planned: plan.changes.clone(),
            reads_used: vec![false; plan.reads.len()],
            reads: plan.reads.clone(),
            changed: Default::default(),
            step: None,
            broken: None,
            made_any: false,
            refused: None,
            outputs: BTreeMap::new(),
            texts: false,
            notes: plan
                .steps
                .iter()
                .map(|s| (s.index, s.notes.clone()))
                .collect(),
            notes_said: BTreeMap::new(),
            moved: false,
        }
    }

    /// Holds the run to what a saved plan shows of its reads and notes too (see
    /// `read` and `note`): an in-memory plan (`run`'s confirmation) is the run's own.
    pub fn hold_texts(mut self) -> Self {
        self.texts = true;
        self
    }

    /// A text the plan shows (a read's summary, a step's note) is not what the run has.
    /// While every read so far returned what the plan's did and nothing was changed, the
    /// same runbook says the same: the plan file was edited, and is refused. Once a read
    /// returned something else (or something the plan cannot compare) or a change ran,
    /// such a text may tell what a read found: said as a warning.
    fn text_differs(&mut self, why: String) -> Result<Option<String>, String> {
        if self.made_any || self.moved {
            return Ok(Some(format!(
                "{why}; the changes are still held to the plan"
            )));
        }
        self.broken = Some(why.clone());
        self.refused = Some(why.clone());
        Err(format!(
            "{why}; stopped before any change, and nothing is changed"
        ))
    }

    /// The run's step logged `message` (masked) at `level`, as `log.*` does: it must be
    /// one of what the plan shows that step said and the run has not said yet (other
    /// notes, runbook's own, may lie between). Not in the plan's order: the branches of a
    /// `parallel()` log in the order they finish, which differs from run to run (seen:
    /// a fleet's per-host lines refused a plan whose reads all matched). What a
    /// reviewer reads is each note's text, held here; their order is not a promise. See
    /// `text_differs` for what a difference does.
    pub fn note(
        &mut self,
        step: usize,
        level: crate::actions::events::Level,
        message: &str,
    ) -> Result<Option<String>, String> {
        if !self.texts || level == crate::actions::events::Level::Debug {
            return Ok(None);
        }
        let planned = self.notes.get(&step).map(Vec::as_slice).unwrap_or(&[]);
        let said = self
            .notes_said
            .entry(step)
            .or_insert_with(|| vec![false; planned.len()]);
        let unsaid = |k: &usize| !said[*k];
        if let Some(k) = (0..planned.len())
            .filter(unsaid)
            .find(|&k| planned[k].level == level && planned[k].message == message)
        {
            said[k] = true;
            return Ok(None);
        }
        let shown = (0..planned.len())
            .find(unsaid)
            .map_or("nothing more".into(), |k| {
                format!("({}) {:?}", planned[k].level, planned[k].message)
            });
        self.text_differs(format!(
            "step {}: field \"steps[].notes\": the plan shows the step saying {shown}, and it says ({level}) {message:?}",
            step + 1
        ))
    }

    /// Why the run was stopped before it changed anything, when the plan's text of a
    /// change is not the change (see `allow`): the run is then a refused plan, not a
    /// failed run.
    pub fn refused(&self) -> Option<&str> {
        self.refused.as_deref()
    }

    /// An attempt of `step` starts: its planned changes are all to run again (a retry
    /// repeats them), and its reads are compared again. Steps run in order, so the
    /// changes of steps the run skipped are simply never asked for.
    pub fn step_attempt(&mut self, step: usize) {
        self.step = Some(step);
        for (c, used) in self.planned.iter().zip(self.used.iter_mut()) {
            if c.step == step {
                *used = false;
            }
        }
        for (r, used) in self.reads.iter().zip(self.reads_used.iter_mut()) {
            if r.step == step {
                *used = false;
            }
        }
        self.notes_said.remove(&step);
    }

    /// Allows `now` when it is its step's next planned change (in the plan's order, which
    /// is the order shown; the changes of one `parallel()`, shown "in any order", in any
    /// order among themselves: see [`Self::out_of_order`]) and the plan reads
    /// as it is: the same target name, step name, command text, command as shown,
    /// summary and destructive flag, each as the plan holds it (masked by `mask`, the
    /// run's masker). Otherwise says why not, showing both versions. Gives the planned
    /// change's index.
    ///
    /// The digests alone would let a plan file whose texts were edited (the command a
    /// reviewer reads, its summary, "destructive") hold the run to a change it does not
    /// show: the digests and the salt are in the file, so nothing in it proves its texts;
    /// the real change does.
    pub fn allow(&mut self, seen: &Seen, mask: &dyn Fn(&str) -> String) -> Result<usize, String> {
        self.allow_templated(seen, &[], mask)
    }

    /// Where change `i` stands in its step's order: the first change of the run of
    /// parallel changes it belongs to, or itself.
    fn position(&self, i: usize) -> usize {
        let c = &self.planned[i];
        if !c.parallel {
            return i;
        }
        let mut p = i;
        while p > 0 && self.planned[p - 1].parallel && self.planned[p - 1].step == c.step {
            p -= 1;
        }
        p
    }

    /// Why planned change `i` may not run now, by the order the plan shows: a change of
    /// its step shown before it has not run (a retry may pass over one an earlier attempt
    /// made), or one shown after it ran already. None: it is next.
    fn out_of_order(&self, i: usize) -> Option<String> {
        let at = self.position(i);
        let step = self.planned[i].step;
        let head = |j: usize| {
            let c = &self.planned[j];
            format!("change {} (on {}: {})", j + 1, c.target, c.summary)
        };
        for j in (0..self.planned.len()).filter(|&j| j != i && self.planned[j].step == step) {
            let pj = self.position(j);
            if pj < at && !self.used[j] && !self.made[j] {
                return Some(format!(
                    "it is change {} of the plan, which shows {} before it, and that has not run",
                    i + 1,
                    head(j)
                ));
            }
            if pj > at && self.used[j] {
                return Some(format!(
                    "it is change {} of the plan, which shows it before {}, and that ran already",
                    i + 1,
                    head(j)
                ));
            }
        }
        None
    }

    /// What may stand in the holes of the step's planned changes not run yet: for each
    /// change a hole names that ran in this run, the forms of what it printed. Empty when
    /// the step's changes have no hole.
    pub fn fills(&self) -> Vec<(usize, Vec<Vec<u8>>)> {
        let mut sources: Vec<usize> = (0..self.planned.len())
            .filter(|&i| !self.used[i] && Some(self.planned[i].step) == self.step)
            .flat_map(|i| self.planned[i].known_after.iter().copied())
            .collect();
        sources.sort();
        sources.dedup();
        sources
            .into_iter()
            .filter_map(|n| Some((n, crate::actions::known_after::forms(self.outputs.get(&n)?))))
            .collect()
    }

    /// The planned change `index` ran and printed `stdout`: kept when a hole names it.
    pub fn output(&mut self, index: usize, stdout: &[u8]) {
        if self.planned.iter().any(|c| c.known_after.contains(&index)) {
            self.outputs.insert(index, stdout.to_vec());
        }
    }

    /// `allow`, where a planned change with holes matches one of `templated` (the real
    /// command read back with the outputs of [`Self::fills`] as holes) exactly: the
    /// command differs from the plan only where a hole is, and there only by the output
    /// of the change the hole names.
    pub fn allow_templated(
        &mut self,
        seen: &Seen,
        templated: &[Templated],
        mask: &dyn Fn(&str) -> String,
    ) -> Result<usize, String> {
        let now = seen.change(&self.salt);
        if let Some(why) = &self.broken {
            return Err(format!(
                "no change runs after the run left the confirmed plan ({why})"
            ));
        }
        let open: Vec<usize> = (0..self.planned.len())
            .filter(|&i| !self.used[i] && self.planned[i].step == now.step)
            .collect();
        let fits = |want: &Change| {
            if want.known_after.is_empty() {
                return want.same(&now);
            }
            want.step == now.step
                && want.target == now.target
                && want.destination == now.destination
                && templated.iter().any(|t| {
                    self.salt.digest(&t.command) == want.command_sha256
                        && t.stdin.as_ref().map(|s| self.salt.digest(s)) == want.stdin_sha256
                })
        };
        let exact: Vec<usize> = open
            .iter()
            .copied()
            .filter(|&i| fits(&self.planned[i]))
            .collect();
        let mut holes: Vec<Vec<u8>> = self.fills().into_iter().flat_map(|(_, f)| f).collect();
        holes.sort_by_key(|h| std::cmp::Reverse(h.len()));
        let readable: Vec<usize> = exact
            .iter()
            .copied()
            .filter(|&i| self.planned[i].misread(seen, mask, &holes).is_none())
            .collect();
        if let Some(&i) = readable.iter().find(|&&i| self.out_of_order(i).is_none()) {
            self.used[i] = true;
            self.made[i] = true;
            self.made_any = true;
            self.changed.insert(now.target);
            return Ok(i);
        }
        // A planned change, but not the next one in the order the plan shows.
        if let Some(why) = readable.first().and_then(|&i| self.out_of_order(i)) {
            let step_name = seen.step_name;
            self.broken = Some(format!("step \"{step_name}\""));
            return Err(format!(
                "step \"{step_name}\": this change runs out of the order the plan shows: {why}; a step's changes run in the plan's order (those of one parallel(), shown \"in any order\", in any order among themselves); stopped before it, and nothing further is changed\n  now: {}",
                now.shown
            ));
        }
        // The change the plan holds by its digests (or all but the target's name), shown
        // otherwise than it is.
        let misread = exact.first().copied().or_else(|| {
            open.iter().copied().find(|&i| {
                let c = &self.planned[i];
                c.destination == now.destination
                    && c.command_sha256 == now.command_sha256
                    && c.stdin_sha256 == now.stdin_sha256
            })
        });
        if let Some((i, m)) =
            misread.and_then(|i| Some((i, self.planned[i].misread(seen, mask, &holes)?)))
        {
            let why = format!(
                "change {}: field \"{}\" is not what the change is (step \"{}\", on {}): the plan says {}, the change is {}; {}",
                i + 1,
                m.field,
                mask(seen.step_name),
                seen.target,
                m.planned,
                m.now,
                if m.field == "summary" {
                    "the plan file was edited, or what the reads found changed since it was made (a size, a list of files)"
                } else {
                    "the plan file was edited after it was made"
                }
            );
            self.broken = Some(format!("change {}", i + 1));
            if !self.made_any {
                self.refused = Some(why.clone());
            }
            return Err(format!(
                "{why}; stopped before it, and nothing further is changed"
            ));
        }
        let step_name = seen.step_name;
        let mut lines = vec![format!(
            "step \"{step_name}\": this change is not one that was confirmed for this step; stopped before it, and nothing further is changed"
        )];
        match open.first().map(|&i| &self.planned[i]) {
            Some(want) => {
                if want.target != now.target {
                    lines.push(format!("  confirmed on: {}", want.target));
                    lines.push(format!("  now on:       {}", now.target));
                } else if want.destination != now.destination {
                    lines.push(format!(
                        "  confirmed on: {} ({})",
                        want.target, want.destination
                    ));
                    lines.push(format!(
                        "  now on:       {} ({})",
                        now.target, now.destination
                    ));
                }
                lines.push(format!("  confirmed: {}", want.shown));
                lines.push(format!("  now:       {}", now.shown));
                if want.command_sha256 == now.command_sha256
                    && want.stdin_sha256 != now.stdin_sha256
                {
                    lines.push("  (the same command, with different standard input)".into());
                } else if want.shown == now.shown && want.command_sha256 != now.command_sha256 {
                    lines.push(
                        "  (shown the same; the exact command lines differ, e.g. in a script's text or a secret)"
                            .into(),
                    );
                }
                if !want.known_after.is_empty() {
                    lines.push(format!(
                        "  (where it says {}, only what {} printed in this run may stand; the command differs elsewhere, or that change has not run)",
                        crate::actions::known_after::SHOWN,
                        changes_named(&want.known_after)
                    ));
                }
            }
            None => {
                let elsewhere = self.planned.iter().any(|c| c.same_but_step(&now));
                lines.push(format!(
                    "  confirmed: nothing more in this step{}",
                    if elsewhere {
                        " (this command was confirmed for another step)"
                    } else {
                        ""
                    }
                ));
                lines.push(format!("  now:       {}", now.shown));
            }
        }
        self.broken = Some(format!("step \"{step_name}\""));
        Err(lines.join("\n"))
    }

    /// What the attempt of `step` that just succeeded left of its planned changes.
    pub fn not_run(&self, step: usize) -> Vec<String> {
        (0..self.planned.len())
            .filter(|&i| self.planned[i].step == step && !self.used[i])
            .map(|i| {
                let c = &self.planned[i];
                format!(
                    "step \"{}\": the planned change `{}` on {} was not made: the step found nothing to do there any more",
                    c.step_name, c.summary, c.target
                )
            })
            .collect()
    }

    /// A read ran: when the plan ran the same read in the same step, on a target this run
    /// has not changed yet, and it returned something else, the warning to show. Held to
    /// a saved plan, the read must also be shown as the plan shows it (its summary and
    /// command, masked by `mask`): see `text_differs`.
    pub fn read(
        &mut self,
        seen: &Seen,
        code: Option<i32>,
        stdout: Option<&[u8]>,
        mask: &dyn Fn(&str) -> String,
    ) -> Result<Option<String>, String> {
        let digest = self.salt.digest(seen.command.as_bytes());
        let Some(i) = (0..self.reads.len()).find(|&i| {
            !self.reads_used[i]
                && self.reads[i].step == seen.step
                && self.reads[i].target == seen.target
                && self.reads[i].command_sha256 == digest
        }) else {
            self.moved = true;
            return Ok(None);
        };
        self.reads_used[i] = true;
        if self.texts {
            let r = &self.reads[i];
            let texts = [
                ("summary", r.summary.clone(), mask(seen.summary)),
                ("shown", r.shown.clone(), mask(seen.shown)),
            ];
            // A text with a value known only after apply cannot be compared as it is.
            if let Some((field, planned, now)) = texts
                .into_iter()
                .find(|(_, p, n)| p != n && !p.contains(crate::actions::known_after::SHOWN))
            {
                return self.text_differs(format!(
                    "read {}: field \"{field}\" is not what the read is (step \"{}\", on {}): the plan says {planned:?}, the read is {now:?}",
                    i + 1,
                    mask(seen.step_name),
                    seen.target
                ));
            }
        }
        let result = self.read_result(i, seen, code, stdout);
        if result.is_some() || self.reads[i].result_sha256.is_none() || stdout.is_none() {
            self.moved = true;
        }
        Ok(result)
    }

    /// Whether read `i` returned what it returned when the plan was made.
    fn read_result(
        &mut self,
        i: usize,
        seen: &Seen,
        code: Option<i32>,
        stdout: Option<&[u8]>,
    ) -> Option<String> {
        if self.changed.contains(seen.target) {
            return None;
        }
        let then = self.reads[i].result_sha256.as_ref()?;
        let now = self.salt.result(code, stdout?);
        if *then == now {
            return None;
        }
        let codes = match (self.reads[i].exit_code, code) {
            (a, b) if a != b => format!(
                " (exit code {} then, {} now)",
                a.map_or("-".into(), |c| c.to_string()),
                b.map_or("-".into(), |c| c.to_string())
            ),
            _ => String::new(),
        };
        Some(format!(
            "step \"{}\": the read `{}` on {} returned something else than when the plan was made{codes}; the changes are still held to the plan",
            seen.step_name, seen.summary, seen.target
        ))
    }
}
