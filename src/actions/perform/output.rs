//! What an action's command prints, on its way to people and the record: each line
//! masked (a secret cut across a 64 KiB piece included), kept for a dry-run's replay
//! (`kept_reads.rs`), and made an `output` event; the tails an `action_finished` keeps.

use crate::actions::ctx::Ctx;
use crate::actions::events::Event;
use crate::actions::kept_reads::Piece;
use crate::targets::{ExecOutcome, Stream};
use std::cell::RefCell;

/// How much of each stream an `action_finished` event keeps (every line is also an
/// `output` event of its own).
const TAIL_BYTES: usize = 4096;

/// The lines of one action's command, as they come.
pub struct Lines<'a> {
    ctx: &'a Ctx,
    step: usize,
    action: u64,
    /// Nothing but the mask is shown of a command whose output is secret.
    secret_output: bool,
    /// Stdout is data (`artifact.capture`'s archive): kept for the primitive, never made
    /// output events or a tail.
    binary_output: bool,
    /// Pieces of lines kept for a dry-run's replay, when the dry-run keeps its reads.
    kept: Option<RefCell<Vec<Piece>>>,
    /// What a line cut at 64 KiB left that could be the start of a secret, per stream.
    carry: RefCell<[String; 2]>,
}

impl<'a> Lines<'a> {
    pub fn new(
        ctx: &'a Ctx,
        step: usize,
        action: u64,
        secret_output: bool,
        binary_output: bool,
        keep: bool,
    ) -> Self {
        Lines {
            ctx,
            step,
            action,
            secret_output,
            binary_output,
            kept: keep.then(Default::default),
            carry: Default::default(),
        }
    }

    /// A piece of a line (`continues`: the line goes on in the next piece).
    pub fn line(&self, stream: Stream, piece: &str, continues: bool) {
        if self.binary_output && stream == Stream::Stdout {
            return;
        }
        if let Some(kept) = &self.kept {
            kept.borrow_mut()
                .push((stream, piece.to_string(), continues));
        }
        let line = if self.secret_output {
            crate::base::secrets::MASK.to_string()
        } else {
            let mut carry = self.carry.borrow_mut();
            let slot = &mut carry[stream as usize];
            self.ctx.bus.mask_piece(slot, piece, continues)
        };
        if continues && line.is_empty() {
            return;
        }
        self.ctx.bus.emit(Event::Output {
            step: self.step,
            action: self.action,
            stream,
            line,
        })
    }

    /// The command ended: a line cut at 64 KiB at the very end is shown now, with what
    /// was held back of it.
    pub fn end(&self) {
        for stream in [Stream::Stdout, Stream::Stderr] {
            let rest = std::mem::take(&mut self.carry.borrow_mut()[stream as usize]);
            if !rest.is_empty() {
                self.line(stream, &rest, false);
            }
        }
    }

    /// The pieces kept for the replay (empty unless kept).
    pub fn kept(&self) -> Vec<Piece> {
        self.kept.as_ref().map(|k| k.take()).unwrap_or_default()
    }

    /// The tails of stdout and stderr an `action_finished` event keeps.
    pub fn tails(&self, out: &ExecOutcome) -> (String, String) {
        let stdout = match self.binary_output {
            true => String::new(),
            false => self.tail(&out.stdout),
        };
        (stdout, self.tail(&out.stderr))
    }

    /// Masked before it is cut, and nothing but the mask for a command whose output is
    /// secret.
    fn tail(&self, bytes: &[u8]) -> String {
        if self.secret_output && !bytes.is_empty() {
            return crate::base::secrets::MASK.into();
        }
        self.ctx.bus.masked_tail(bytes, TAIL_BYTES)
    }
}
