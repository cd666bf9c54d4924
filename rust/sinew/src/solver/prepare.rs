//! What the paper methods without a least-squares finish (`fabrik_classic`, `ccd`,
//! `triangulation`) do before their first iteration: choose the pose they iterate from, and turn
//! lone chains toward their poles as Blender's IK does before its iterations.
//!
//! - **The reference pose** ([`crate::Problem::reference`]). These methods have no term that pulls
//!   toward it, so they honour it the way Blender's IK does: they start from it (clamped into the
//!   limits, bones no goal moves and locked bones at the start's rotation, lone-chain poles
//!   applied: [`effective_reference`]), unless the start is already near the answer (a tracking
//!   frame warm-started from the frame before, [`starts_near`]) or meets every goal, where they
//!   start from the start (so solving again from a solution returns it).
//!   Where the goals leave freedom, the answer is then the method's own from the reference, not
//!   the pose nearest the reference that `fabrik` and `dls` return.
//! - **Poles.** A goal's pole on a chain no other goal moves is Blender's turn before solving
//!   ([`turn_chain_toward_pole`], as in [`crate::Pole`]), applied here to the pose iterated from;
//!   a goal already met there is left as it is. A pole on a chain some other goal also moves has no
//!   Blender meaning (Blender drops it) and these methods have no step that keeps it: they refuse
//!   such a problem with [`Error::Unsupported`] ([`refuse_tree_poles`]) rather than ignore it.
//! - **Stretch.** Their steps place joints at the bones' fixed lengths and have no unknown for
//!   a length: a problem where a bone that may stretch ([`crate::JointLimit::stretch`] above 0)
//!   carries a goal's effector is refused with [`Error::Unsupported`] ([`refuse_stretch`]) rather
//!   than solved rigid. (`dls`, `fabrik` and the Jacobian family solve it.)

use glam::DQuat;

use super::reference::{effective_reference, starts_near, turn_chain_toward_pole};
use crate::error::{Error, Result};
use crate::pose::{Frames, Pose};
use crate::problem::Problem;

/// [`Error::Unsupported`] for the first goal with a pole on a chain another goal also moves.
///
/// # Errors
/// As above.
pub(crate) fn refuse_tree_poles(problem: &Problem, method: &str) -> Result<()> {
    let topo = problem.topology();
    match (0..problem.goals().len()).find(|&gi| problem.goals()[gi].pole.is_some() && !topo.is_lone_chain(gi)) {
        Some(gi) => Err(Error::Unsupported {
            method: method.to_owned(),
            what: format!(
                "goal {gi} has a pole on a chain another goal also moves (Blender drops such poles; this method keeps only the pole of a chain of its own, turned before solving); remove the pole or use \"fabrik\" or \"dls\""
            ),
        }),
        None => Ok(()),
    }
}

/// [`Error::Unsupported`] for the first bone that may stretch and carries a goal's effector
/// (it lies on the goal's path to the root, and is not the effector bone of a goal on its head).
///
/// # Errors
/// As above.
pub(crate) fn refuse_stretch(problem: &Problem, method: &str) -> Result<()> {
    let rig = problem.rig();
    for &b in &problem.topology().stretchy {
        let carried = problem.goals().iter().position(|g| {
            let mut x = if g.use_tail { Some(g.bone) } else { rig.bone(g.bone).parent };
            while let Some(i) = x {
                if i == b {
                    return true;
                }
                x = rig.bone(i).parent;
            }
            false
        });
        if let Some(gi) = carried {
            return Err(Error::Unsupported {
                method: method.to_owned(),
                what: format!(
                    "bone \"{}\" may stretch (stretch {}) and carries goal {gi}: this method keeps every bone's length; set its stretch to 0 or use \"dls\", \"fabrik\" or a Jacobian method",
                    rig.bone(b).name,
                    rig.bone(b).limit.stretch
                ),
            });
        }
    }
    Ok(())
}

/// Scratch space for [`IterationStart::prepare`]: the effective reference and its frames.
#[derive(Debug, Clone, Default)]
pub(crate) struct IterationStart {
    reference: Pose,
    reference_frames: Frames,
}

impl IterationStart {
    /// The pose a solve iterates from (see the module docs), into `pose` with its forward
    /// kinematics in `frames`. `start` is the caller's start and `start_locals` its rotations as
    /// [`super::begin_solve`] normalised and clamped them.
    pub(crate) fn prepare(&mut self, problem: &Problem, start: &Pose, start_locals: &[DQuat], tolerance: f64, pose: &mut Pose, frames: &mut Frames) {
        let rig = problem.rig();
        pose.rotations.clear();
        pose.rotations.extend_from_slice(start_locals);
        pose.root_translation = start.root_translation;
        // (Lengths no goal depends on keep the start's: see [`refuse_stretch`].)
        pose.scales = super::start_scales(problem, start);
        rig.forward_into(pose, frames);
        if problem.goals().is_empty() {
            return;
        }
        if problem.has_reference() {
            effective_reference(problem, pose, &mut self.reference, &mut self.reference_frames);
            let met = (0..problem.goals().len()).all(|gi| problem.goal_met(gi, frames, tolerance));
            if !met && !starts_near(problem, frames) {
                // (The effective reference has its lone-chain poles applied already.)
                pose.clone_from(&self.reference);
                frames.copy_from(&self.reference_frames);
                Self::clamp_pole_turns(problem, pose, frames);
                return;
            }
        }
        let topo = problem.topology();
        let mut turned = false;
        for (gi, g) in problem.goals().iter().enumerate() {
            if g.pole.is_some() && topo.is_lone_chain(gi) && !problem.goal_met(gi, frames, tolerance) {
                turn_chain_toward_pole(problem, gi, &mut pose.rotations, &pose.scales, frames);
                turned = true;
            }
        }
        if turned {
            Self::clamp_pole_turns(problem, pose, frames);
        }
    }

    /// The pole turn keeps a chain's top bone within its limit up to 1e-9 rad (the bisection's
    /// slack); these methods may return that pose as it is (a goal met by the turn alone), so
    /// it is brought exactly inside.
    fn clamp_pole_turns(problem: &Problem, pose: &mut Pose, frames: &mut Frames) {
        let rig = problem.rig();
        let mut changed = false;
        for &b in &problem.topology().active {
            let limit = &rig.bone(b).limit;
            if !limit.locked && limit.violation(pose.rotations[b]) > 1e-12 {
                pose.rotations[b] = limit.clamp(pose.rotations[b]);
                changed = true;
            }
        }
        if changed {
            rig.forward_into(pose, frames);
        }
    }
}
