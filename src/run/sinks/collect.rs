//! Keeps events in memory: used by the silent planning pass that decides whether a real
//! run must ask for confirmation first.

use crate::actions::events::{Event, Sink, Stamped};
use std::cell::RefCell;
use std::rc::Rc;

#[derive(Clone, Default)]
pub struct Collected(pub Rc<RefCell<Vec<Event>>>);

pub struct CollectSink(pub Collected);

impl Sink for CollectSink {
    fn emit(&mut self, ev: &Stamped) {
        self.0 .0.borrow_mut().push(ev.event.clone());
    }
}
