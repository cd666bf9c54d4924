//! Cyclic Coordinate Descent (TR-632 §3.6.1), `"ccd"`: see [`Ccd`] for its contract.

use glam::{DQuat, DVec3};

use super::prepare::{IterationStart, refuse_stretch, refuse_tree_poles};
use super::{PositionSolver, Solution, SolveSettings, StopReason, begin_solve, settle};
use crate::error::Result;
use crate::geometry::{EPS_LEN, angle_between, fit_rotation, shortest_arc, twist_angle};
use crate::limits::Freedom;
use crate::pose::{Frames, Pose};
use crate::problem::{Problem, RootMode};

/// Cyclic Coordinate Descent (TR-632 §3.6.1; Wang & Chen 1991; the triangulation paper's §2.2
/// gives its equations), `"ccd"`.
///
/// **Contract.**
/// - **One iteration** is one sweep from the effectors to the root: every bone some goal moves,
///   in reverse rig order (children before parents, so along each chain from the effector
///   inward), turns once about its head to bring the effectors of the goals that move it toward
///   their targets.
///   - One position goal through the bone: the turn by the angle θ between `e − p` and `t − p`
///     about their cross product (eqs. 1–2 of the triangulation paper's §2.2), which puts the
///     effector `e` on the line from the joint `p` to the target `t`.
///   - Several goals through it (a tree: "each bone turned for the effectors below it"), or
///     orientation goals: the turn that minimises the weighted sum of the squared distances of
///     those effectors to their targets plus, for each orientation goal, its squared angle error
///     times its chain's reach squared (a radian counts as far as the chain reaches, as in
///     [`Problem::goal_met`]): the weighted least-squares rotation of [`fit_rotation`]. TR-632
///     §3.6.1 cites per-chain CCD for trees; the weighted joint turn is that, with the chains
///     that share a bone averaged by their weights.
///   - A hinge turns about its axis only, by the angle that minimises the same sum (closed form).
///   - The free root, when some goal moves it, translates last, by the weighted mean of the
///     position goals' remaining gaps (the optimal step of that coordinate).
/// - **Limits at every step**: each turn's local rotation goes through
///   [`crate::JointLimit::clamp`] before the next bone moves; a locked bone stays; a stiff bone
///   moves `1 − stiffness` of the way (the largest of per-axis stiffnesses, as FABRIK's own steps).
///   So no returned pose violates a limit.
/// - **Termination**: every goal within `tolerance` ([`StopReason::Converged`], checked before the
///   first sweep too); no effector short of its goal moved more than `stall_tolerance` in a sweep
///   ([`StopReason::Stalled`]: out of reach or blocked by limits); or `max_iterations`.
/// - **Poles and the reference pose** (`solver/prepare.rs`): a lone chain's pole is Blender's turn
///   before solving ([`crate::Pole`]); a pole on a chain another goal also moves is refused with
///   [`crate::Error::Unsupported`]. With a reference pose the solve starts from it (clamped into
///   the limits, poles applied), as Blender's IK starts from the pose before IK, unless the start
///   meets the goals or is near them (tracking); no step pulls toward it afterwards.
///
/// **What it guarantees.** Every step lowers (never raises) the weighted error of the goals
/// through the bone it turns. An unconstrained chain reaches a reachable target in the limit (a
/// straight chain pointing past a target on its own line is a stationary point it cannot leave);
/// the triangulation paper measured 92% of reachable targets within 20 sweeps on a 5-bone arm. A
/// bone turns only for goals whose chains include it, so a goal with a short chain whose effector
/// rides on another goal's chain is corrected by its own bones at the next sweep, not by the
/// shared ones.
///
/// Keeps scratch space between solves.
#[derive(Debug, Clone, Default)]
pub struct Ccd {
    settings: SolveSettings,
    frames: Frames,
    start_locals: Vec<DQuat>,
    /// Per bone: the goals whose chains include it (what it turns for).
    moves_for: Vec<Vec<usize>>,
    /// Per bone: the goals whose effector it carries (itself or an ancestor of the effector).
    carries: Vec<Vec<usize>>,
    /// Per goal: its effector point and bone rotation, tracked through a sweep.
    effectors: Vec<(DVec3, DQuat)>,
    /// The same at the start of the sweep (for the stall rule).
    before: Vec<(DVec3, DQuat)>,
    /// The vector pairs one turn fits: (from the joint to an effector point or along an effector
    /// axis, where it should point, weight).
    pairs: Vec<(DVec3, DVec3, f64)>,
    start: IterationStart,
}

impl Ccd {
    /// A CCD solver with `settings` (checked when solving).
    #[must_use]
    pub fn new(settings: SolveSettings) -> Self {
        Self { settings, ..Self::default() }
    }
}

impl PositionSolver for Ccd {
    fn name(&self) -> &'static str {
        "ccd"
    }

    fn settings(&self) -> &SolveSettings {
        &self.settings
    }

    /// # Errors
    /// As [`crate::Solver::solve`], and [`crate::Error::Unsupported`] for a pole on a chain another goal
    /// also moves, or a bone that may stretch carrying a goal (`solver/prepare.rs`).
    fn solve_positions(&mut self, problem: &Problem, start: &Pose) -> Result<Solution> {
        let settings = begin_solve(&self.settings, problem, start, &mut self.start_locals)?;
        refuse_tree_poles(problem, self.name())?;
        refuse_stretch(problem, self.name())?;
        let rig = problem.rig();
        let mut pose = Pose::default();
        self.start.prepare(problem, start, &self.start_locals, settings.tolerance, &mut pose, &mut self.frames);
        self.plan(problem);
        let goals = problem.goals();
        let tol = settings.tolerance;
        let met = |frames: &Frames| (0..goals.len()).all(|gi| problem.goal_met(gi, frames, tol));
        let mut stop = StopReason::IterationLimit;
        let mut iterations = 0;
        if met(&self.frames) {
            stop = StopReason::Converged;
        }
        while stop == StopReason::IterationLimit && iterations < settings.max_iterations {
            iterations += 1;
            self.effectors.clear();
            self.effectors.extend(goals.iter().map(|g| (self.frames.effector(g.bone, g.use_tail), self.frames.rotations[g.bone])));
            self.before.clone_from(&self.effectors);
            self.sweep(problem, &mut pose);
            rig.forward_into(&pose, &mut self.frames);
            if met(&self.frames) {
                stop = StopReason::Converged;
            } else {
                let moved = goals.iter().zip(&self.before).enumerate().fold(0.0f64, |m, (gi, (g, &(e, r)))| {
                    if problem.goal_met(gi, &self.frames, tol) {
                        return m;
                    }
                    let turned = if g.orientation.is_some() { angle_between(r, self.frames.rotations[g.bone]) * problem.angle_scale(gi) } else { 0.0 };
                    m.max((self.frames.effector(g.bone, g.use_tail) - e).length()).max(turned)
                });
                if moved <= settings.stall_tolerance {
                    stop = StopReason::Stalled;
                }
            }
        }
        settle(problem, &self.start_locals, &mut pose.rotations);
        rig.forward_into(&pose, &mut self.frames);
        Ok(Solution::of_solved(problem, pose, &self.frames, iterations, stop, tol))
    }
}

impl Ccd {
    /// Fills `moves_for` and `carries` for `problem`.
    fn plan(&mut self, problem: &Problem) {
        let rig = problem.rig();
        let n = rig.len();
        for v in [&mut self.moves_for, &mut self.carries] {
            v.iter_mut().for_each(Vec::clear);
            v.resize_with(n, Vec::new);
        }
        for (gi, g) in problem.goals().iter().enumerate() {
            for &b in &problem.topology().moved[gi] {
                self.moves_for[b].push(gi);
            }
            let mut b = Some(g.bone);
            while let Some(i) = b {
                self.carries[i].push(gi);
                b = rig.bone(i).parent;
            }
        }
    }

    /// One sweep: every active bone from the last to the first turns once (see the type's docs),
    /// then the free root translates. `self.frames` holds the forward kinematics of `pose` at the
    /// start of the sweep; a bone's own frame is still valid when it turns (only its ancestors
    /// move it, and they turn after it), and `self.effectors` follows every turn.
    fn sweep(&mut self, problem: &Problem, pose: &mut Pose) {
        let rig = problem.rig();
        let goals = problem.goals();
        for &b in problem.topology().active.iter().rev() {
            let bone = rig.bone(b);
            let limit = &bone.limit;
            if limit.locked {
                continue;
            }
            let (head, rot) = (self.frames.heads[b], self.frames.rotations[b]);
            self.pairs.clear();
            for &gi in &self.moves_for[b] {
                let g = &goals[gi];
                let (e, r) = self.effectors[gi];
                let from = e - head;
                if from.length_squared() > EPS_LEN * EPS_LEN {
                    self.pairs.push((from, g.target - head, g.weight));
                }
                if let Some(q) = g.orientation {
                    // Σ over the three axes of |R u − Q u|² is 2 φ² for a small angle φ: scaled by
                    // reach / √2 it counts φ · reach as a distance.
                    let s = problem.angle_scale(gi) * std::f64::consts::FRAC_1_SQRT_2;
                    for u in [DVec3::X, DVec3::Y, DVec3::Z] {
                        self.pairs.push((r * u * s, q * u * s, g.weight));
                    }
                }
            }
            if self.pairs.is_empty() {
                continue;
            }
            let parent = bone.parent.map_or(DQuat::IDENTITY, |p| self.frames.rotations[p]);
            let base = rig.local_base(b, parent);
            let want = match limit.freedom() {
                Freedom::Hinge(h) => {
                    // The turn δ about the hinge's world axis maximising Σ w t·R(δ)e.
                    let axis = base * h.axis;
                    let (mut sin, mut cos) = (0.0, 0.0);
                    for &(a, t, w) in &self.pairs {
                        sin += w * axis.dot(a.cross(t));
                        cos += w * (a.dot(t) - a.dot(axis) * t.dot(axis));
                    }
                    let delta = if sin == 0.0 && cos == 0.0 { 0.0 } else { sin.atan2(cos) };
                    DQuat::from_axis_angle(h.axis, twist_angle(pose.rotations[b], h.axis) + delta)
                }
                _ => {
                    let turn = match self.pairs.as_slice() {
                        [(a, t, _)] => match (a.try_normalize(), t.try_normalize()) {
                            (Some(a), Some(t)) => shortest_arc(a, t),
                            _ => DQuat::IDENTITY,
                        },
                        pairs => fit_rotation(DQuat::IDENTITY, pairs.iter().copied()),
                    };
                    (base.conjugate() * (turn * rot)).normalize()
                }
            };
            let local = limit.constrain_step(pose.rotations[b], pose.rotations[b], want);
            pose.rotations[b] = local;
            let turn = ((base * local).normalize() * rot.conjugate()).normalize();
            for &gi in &self.carries[b] {
                let (e, r) = &mut self.effectors[gi];
                *e = head + turn * (*e - head);
                *r = (turn * *r).normalize();
            }
        }
        if problem.root() == RootMode::Free && problem.topology().is_active[0] {
            // The root's translation is one more coordinate: its best step is the weighted mean gap.
            let (mut gap, mut wsum) = (DVec3::ZERO, 0.0);
            for &gi in &self.moves_for[0] {
                let g = &goals[gi];
                gap += (g.target - self.effectors[gi].0) * g.weight;
                wsum += g.weight;
            }
            if wsum > 0.0 {
                let b0 = rig.bone(0);
                pose.root_translation += b0.rest_rotation.conjugate() * (gap / wsum);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Solver;
    use crate::goal::Goal;
    use crate::rig::tests::chain;

    #[test]
    fn a_free_chain_reaches_a_reachable_target() {
        let problem = Problem::new(chain(5), vec![Goal::new(4, DVec3::new(2.0, 2.5, 1.0))], RootMode::Pinned).unwrap();
        let s = Ccd::new(SolveSettings { max_iterations: 500, ..SolveSettings::default() }).solve(&problem, &Pose::rest(5)).unwrap();
        assert!(s.reached, "{:?} {:?} after {}", s.stop, s.residuals, s.iterations);
    }
}
