//! The loop a front end leaves training to: where a run stops when left
//! alone (`Drive::new`: the one stop rule), how many steps a call trains
//! (about `CALL_S` of work, so a listener hears the run that often), and
//! going on after a device lost between calls. The CLI runs it whole
//! (`Session::drive`); the page's worker a call at a time (`Drive::call`),
//! answering the page's other requests between calls.

use serde::Serialize;

use super::{Cadence, Devices, Event, Run, Session};
use crate::error::Result;
use crate::train::now_s;

/// Seconds of steps a call trains, about.
const CALL_S: f64 = 0.3;
/// Steps a call trains at most (a loss is noticed at the end of a call).
const MAX_CALL_STEPS: u32 = 16;

/// Who hears a drive: each call's events, as they happen.
#[allow(async_fn_in_trait)] // used as a generic, never as `dyn`
pub trait Listener {
    /// What a call did, and the run after it; an error stops the drive.
    async fn hear(&mut self, run: &Run, events: Vec<Event>) -> Result<()>;
    /// Asked before each call: whether the person paused.
    fn paused(&self) -> bool {
        false
    }
}

/// How a drive ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stopped {
    /// The person paused it.
    Paused,
    /// The run reached its end (`Drive::end`).
    Ended,
}

/// A drive under way: its end, fixed when it starts, and what a step costs.
#[derive(Clone, Debug)]
pub struct Drive {
    /// The last step to train: the cadence's end, else the schedule's end
    /// where the run starts before it; none (until paused) past it.
    pub end: Option<u32>,
    step_s: f64,
}

impl Drive {
    pub fn new<D: Devices>(session: &Session<D>, cadence: &Cadence) -> Drive {
        let t = &session.run.trainer;
        let total = t.config.optim.schedule.total;
        let end = cadence.end.or((t.steps() < total).then_some(total));
        Drive { end, step_s: 0.1 }
    }

    /// Whether the run is at the drive's end.
    pub fn ended<D: Devices>(&self, session: &Session<D>) -> bool {
        self.end
            .is_some_and(|end| session.run.trainer.steps() >= end)
    }

    /// One call: about `CALL_S` seconds of steps, never past the end
    /// (`cadence`'s other fields as the front end sets them now). A device
    /// lost where `advance` could not tell is replaced here
    /// (`Session::after_failure`) and the drive goes on.
    pub async fn call<D: Devices>(
        &mut self,
        session: &mut Session<D>,
        cadence: &Cadence,
    ) -> Result<Vec<Event>> {
        let step = session.run.trainer.steps();
        let n = ((CALL_S / self.step_s.max(1e-3)).round() as u32).clamp(1, MAX_CALL_STEPS);
        let n = self
            .end
            .map_or(n, |end| n.min(end.saturating_sub(step).max(1)));
        let cadence = Cadence {
            end: self.end,
            ..cadence.clone()
        };
        let started = now_s();
        let events = match session.advance(n, &cadence).await {
            Ok(events) => events,
            Err(e) => match session.after_failure().await? {
                Some(lost) => vec![lost],
                None => return Err(e),
            },
        };
        self.step_s = (now_s() - started) / n as f64;
        Ok(events)
    }
}

impl<D: Devices> Session<D> {
    /// Trains to the run's end (`Drive::new`) or until `listener` pauses
    /// it, telling it each call's events; then pauses (`pause`: the steps
    /// in flight, and a validation unless one was made at the last step)
    /// and tells that too, where it trained at all.
    pub async fn drive(
        &mut self,
        cadence: &Cadence,
        listener: &mut impl Listener,
    ) -> Result<Stopped> {
        let mut drive = Drive::new(self, cadence);
        let mut trained = false;
        let stopped = loop {
            if drive.ended(self) {
                break Stopped::Ended;
            }
            if listener.paused() {
                break Stopped::Paused;
            }
            let events = drive.call(self, cadence).await?;
            trained = true;
            listener.hear(&self.run, events).await?;
        };
        if trained {
            let events = self.pause().await?;
            listener.hear(&self.run, events).await?;
        }
        Ok(stopped)
    }
}
