//! Small tracking moves: when no goal has a pole, every target is within reach and every gap is
//! at most [`TRACK_FRACTION`] of its chain's reach ([`Fabrik::is_small_move`]), the hybrid
//! [`super::Fabrik`] takes the damped-least-squares steps from the warm start (the least joint
//! motion that closes the gaps; Nilsson's thesis §2.4.3) before FABRIK's steps on bone frames
//! ([`Fabrik::track_small_moves`]); a lone free chain takes its Gauss–Newton steps from the warm
//! start instead (`serial.rs`). FABRIK's first iteration places a chain anew and its limit
//! steering makes discrete choices (swivels, bends), which showed as pops between frames. Not in
//! the report (TR-632, `../shared/papers/fabrik-tech-report-2009.md`).

use super::Fabrik;
use crate::pose::Pose;
use crate::problem::Problem;
use crate::solver::{SolveSettings, StopReason};

/// A tracking move is small when every goal's gap is at most this fraction of its chain's reach
/// (and every target within reach): the damped-least-squares step from the warm start then
/// solves it ([`Fabrik::track_small_moves`]). FABRIK's limit steering chooses swivels and bends
/// discretely, which showed as pops in tracking (a bone turning 0.2–3 rad in one frame where
/// the motion turns 0.03); the least joint motion has none. Measured on the humanoid tracking
/// and §4.3.2 reconstruction benchmarks (docs/benchmarks.md): 0.05 removes every pop and keeps
/// the constrained reconstruction at least as accurate as FABRIK alone.
pub(super) const TRACK_FRACTION: f64 = 0.05;

/// Most damped-least-squares steps a small tracking move may take before FABRIK takes over.
const TRACK_ITERATIONS: u32 = 40;

impl Fabrik {
    /// Tracking: when every goal is within reach and its gap is small next to its chain's reach,
    /// the damped-least-squares step from the start pose (the smallest joint motion that closes
    /// the gaps) solves it; FABRIK's limit steering makes discrete choices (swivels, flips) that
    /// show as pops between frames. `Err` with the iterations spent when that does not apply or
    /// does not reach within [`TRACK_ITERATIONS`] (at most half the budget): FABRIK then solves
    /// from the start (its frames are untouched; `pose` keeps its root translation, and its
    /// rotations are overwritten later).
    pub(super) fn track_small_moves(&mut self, problem: &Problem, settings: &SolveSettings, pose: &mut Pose) -> std::result::Result<(u32, StopReason), u32> {
        if !self.is_small_move(problem, settings.tolerance) {
            return Err(0);
        }
        let start_root = pose.root_translation;
        pose.rotations.copy_from_slice(&self.start_locals);
        // The budget is the solver's, not what this round has left, which only caps it: a round
        // must depend on its start alone up to the cap (see [`Fabrik::round`]).
        let budget = TRACK_ITERATIONS.min(self.settings.max_iterations / 2).min(settings.max_iterations);
        let out = self.dls.refine(problem, pose, Some(&self.frames), settings.tolerance, budget);
        if out.reached {
            return Ok((out.iterations, StopReason::Converged));
        }
        pose.root_translation = start_root;
        Err(out.iterations)
    }

    /// Whether this is a tracking move (see [`TRACK_FRACTION`]): no goal has a pole, every target
    /// is within reach, and every gap is at most [`TRACK_FRACTION`] of its chain's reach.
    pub(super) fn is_small_move(&self, problem: &Problem, tolerance: f64) -> bool {
        let topo = problem.topology();
        !problem.goals().iter().any(|g| g.pole.is_some())
            && self.unmet_if_all_within_reach(problem, tolerance).is_some()
            && problem.goals().iter().enumerate().all(|(gi, g)| {
                (self.frames.effector(g.bone, g.use_tail) - g.target).length() <= TRACK_FRACTION * topo.chain_reach[gi]
            })
    }
}
