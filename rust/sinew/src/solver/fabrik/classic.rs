//! Textbook FABRIK (TR-632 §3.7), `"fabrik_classic"`: see [`FabrikClassic`] for its contract.
//!
//! Made of the report's steps alone (`stages.rs`, which the hybrid [`super::Fabrik`] takes too);
//! the report is `../shared/papers/fabrik-tech-report-2009.md` from the repository root.

use std::sync::Arc;

use glam::{DQuat, DVec3};

use super::plan::Plan;
use super::stages::{aim, gather_pulls, keep_child_in_limit, line_step};
use crate::error::Result;
use crate::geometry::{EPS_LEN, Pull, angle_between, fit_rigid, fit_rotation};
use crate::pose::{Frames, Pose};
use crate::problem::{Problem, RootMode};
use crate::rig::Rig;
use crate::solver::prepare::{IterationStart, refuse_stretch, refuse_tree_poles};
use crate::solver::{PositionSolver, Solution, SolveSettings, StopReason, begin_solve, settle};

/// Textbook FABRIK (Aristidou & Lasenby, Cambridge TR-632, 2009), `"fabrik_classic"`: the
/// report's algorithm and nothing else, for comparison with the hybrid [`super::Fabrik`].
///
/// **Contract.**
/// - **Alg. 1 (§3.7).** One iteration is a forward stage (from every effector inward, each bone's
///   pulled point moved onto its target and its head onto the line back toward where it was,
///   lines 1.19–1.28) and a backward stage (from the root outward, each bone's head fixed where
///   its parent now puts it and the bone turned toward the forward estimates, lines 1.29–1.38).
///   A lone serial chain of connected free bones whose target is beyond its reach is straightened
///   toward it in one pass (lines 1.4–1.12; [`StopReason::OutOfReach`], one iteration).
/// - **Termination** (§3.7): every goal within `tolerance` (before any iteration too:
///   [`StopReason::Converged`]); or no effector short of its goal moved more than
///   `stall_tolerance` in the last iteration, the report's rule for targets limits or reach make
///   unattainable ([`StopReason::Stalled`]); or `max_iterations`. No least-squares finish, no
///   closed-form end game, no re-solve rounds: the iteration counts are the report's.
/// - **Several end effectors (§3.7.1).** A bone several things pull on (children on the way to
///   different effectors, or a goal and a child) is a sub-base. In the forward stage it goes to
///   the centroid of the positions its chains give it, weighted by the goals' weights (the report's
///   centroid is unweighted: equal weights give it); in the backward stage it turns toward that
///   centroid, and each chain below is solved outward from it.
/// - **Joint limits (§3.7.2)** at every step, as the report applies them: in the forward stage a
///   bone is re-oriented so its child's rotation relative to it stays inside the child's limit
///   (Alg. 2, "re-orient the joint p_{i-1}"); in the backward stage each bone's local rotation is
///   brought inside its own limit (Alg. 3 then Alg. 2, through [`crate::JointLimit::clamp`], which
///   also projects a hinge onto its axis). The last stage is a backward one, so the returned pose
///   never violates a limit. A locked bone keeps its start rotation; a stiff bone moves
///   `1 − stiffness` of the way at each backward step (the largest of per-axis stiffnesses, as the
///   hybrid's own steps).
/// - **End-effector orientation** (the journal version, Graphical Models 2011): a goal with an
///   orientation gives its bone the target frame in both stages; the bones above reach for the
///   head that frame needs.
/// - **Poles and the reference pose** (`solver/prepare.rs`): a lone chain's pole is Blender's turn
///   before solving ([`crate::Pole`]); a pole on a chain another goal also moves is refused with
///   [`crate::Error::Unsupported`]. With a reference pose the solve starts from it (clamped into
///   the limits, poles applied), as Blender's IK starts from the pose before IK, unless the start
///   meets the goals or is near them (tracking); no step pulls toward it afterwards.
///
/// **Where the report is silent.** Sinew's bones are rigid bodies whose children may hang off
/// their tails (a clavicle on a chest): a bone pulled at one point takes the report's line step
/// for that point (the head lands on the line from the target back toward the old head), which
/// for connected bones is Alg. 1 exactly. A sub-base whose pull points do not coincide takes the
/// weighted least-squares rigid fit of those points ([`fit_rigid`]), which is the centroid where
/// they coincide. A free root goes, in the backward stage, where the forward stage put it (as the
/// report's "root translated to a desired position", with the forward estimate as the desired
/// position). The report gives no rule for a sub-base's own limit in the forward stage: there
/// only the backward clamp applies.
///
/// **What it guarantees.** The report: "FABRIK always converges to any given chains/goal
/// positions, when the target is within reach" (one unconstrained chain); convergence is linear,
/// with no bound on the iterations where the chain must fold tight or stretch out (a two-link
/// chain folded to 3% of its reach took over 2000 to 1e-4), and a straight chain whose target lies on its own line never bends
/// (every line step stays on that line): it stalls there, short of the target. With limits,
/// sub-bases or orientation goals the report promises nothing.
///
/// Keeps scratch space between solves.
#[derive(Debug, Clone, Default)]
pub struct FabrikClassic {
    settings: SolveSettings,
    /// The current pose's frames (rotations of active bones hold their forward-stage rotation
    /// between the stages).
    frames: Frames,
    locals: Vec<DQuat>,
    start_locals: Vec<DQuat>,
    /// Per bone: its head as the forward stage placed it.
    forward_heads: Vec<DVec3>,
    /// Per goal: its effector point and bone rotation after the last iteration.
    effectors: Vec<(DVec3, DQuat)>,
    pulls: Vec<Pull>,
    start: IterationStart,
    /// The plan of the problem last solved ([`Plan`]), derived anew for another structure.
    plan: Arc<Plan>,
}

impl FabrikClassic {
    /// A textbook FABRIK solver with `settings` (checked when solving).
    #[must_use]
    pub fn new(settings: SolveSettings) -> Self {
        Self { settings, ..Self::default() }
    }
}

impl PositionSolver for FabrikClassic {
    fn name(&self) -> &'static str {
        "fabrik_classic"
    }

    fn settings(&self) -> &SolveSettings {
        &self.settings
    }

    /// # Errors
    /// As [`crate::Solver::solve`], and [`crate::Error::Unsupported`] for a pole on a chain another goal
    /// also moves, or a bone that may stretch carrying a goal (`solver/prepare.rs`).
    fn solve_positions(&mut self, problem: &Problem, start: &Pose) -> Result<Solution> {
        Plan::refresh(&mut self.plan, problem);
        let settings = begin_solve(&self.settings, problem, start, &mut self.start_locals)?;
        refuse_tree_poles(problem, self.name())?;
        refuse_stretch(problem, self.name())?;
        let rig = problem.rig();
        let mut pose = Pose::default();
        self.start.prepare(problem, start, &self.start_locals, settings.tolerance, &mut pose, &mut self.frames);
        self.locals.clone_from(&pose.rotations);
        let (iterations, stop) = self.iterate(problem, &settings);
        pose.rotations.copy_from_slice(&self.locals);
        if iterations > 0 && problem.root() == RootMode::Free && problem.topology().is_active[0] {
            // (The backward stage put the root where the forward stage did.)
            let b0 = rig.bone(0);
            pose.root_translation = b0.rest_rotation.conjugate() * (self.frames.heads[0] - b0.rest_head);
        }
        settle(problem, &self.start_locals, &mut pose.rotations);
        rig.forward_into(&pose, &mut self.frames);
        Ok(Solution::of_solved(problem, pose, &self.frames, iterations, stop, settings.tolerance))
    }
}

impl FabrikClassic {
    /// Alg. 1's loop on `self.frames` / `self.locals`: the iterations and why it stopped.
    fn iterate(&mut self, problem: &Problem, s: &SolveSettings) -> (u32, StopReason) {
        let goals = problem.goals();
        let tol = s.tolerance;
        let met = |frames: &Frames| (0..goals.len()).all(|gi| problem.goal_met(gi, frames, tol));
        if met(&self.frames) {
            return (0, StopReason::Converged);
        }
        if self.straighten_if_out_of_reach(problem) {
            return (1, StopReason::OutOfReach);
        }
        let root_head = self.frames.heads[0];
        self.forward_heads.clear();
        self.forward_heads.extend_from_slice(&self.frames.heads);
        self.effectors.clear();
        self.effectors.extend(goals.iter().map(|g| (self.frames.effector(g.bone, g.use_tail), self.frames.rotations[g.bone])));
        for it in 1..=s.max_iterations {
            self.forward_stage(problem);
            self.backward_stage(problem, root_head);
            if met(&self.frames) {
                return (it, StopReason::Converged);
            }
            // The report's termination rule: the effectors (of goals not yet met) stopped moving.
            let mut moved = 0.0f64;
            for (gi, (g, e)) in goals.iter().zip(self.effectors.iter_mut()).enumerate() {
                let now = (self.frames.effector(g.bone, g.use_tail), self.frames.rotations[g.bone]);
                if !problem.goal_met(gi, &self.frames, tol) {
                    let turned = if g.orientation.is_some() { angle_between(now.1, e.1) * problem.angle_scale(gi) } else { 0.0 };
                    moved = moved.max((now.0 - e.0).length()).max(turned);
                }
                *e = now;
            }
            if moved <= s.stall_tolerance {
                return (it, StopReason::Stalled);
            }
        }
        (s.max_iterations, StopReason::IterationLimit)
    }

    /// Alg. 1 lines 1.4–1.12: a lone serial chain of connected free bones (pinned top, position
    /// goal on its tail, the [`Plan`]'s serial chain without limits) whose target
    /// is farther from the chain's top than its length is pointed straight at the target. Returns
    /// whether it was.
    fn straighten_if_out_of_reach(&mut self, problem: &Problem) -> bool {
        let plan = Arc::clone(&self.plan);
        let Some(chain) = plan.serial_chain.as_ref().filter(|c| !c.limited) else { return false };
        let g = &problem.goals()[0];
        let Some(&top) = chain.bones.first() else { return false };
        if g.orientation.is_some() || problem.beyond_reach_by(0, self.frames.heads[top]) <= 0.0 {
            return false;
        }
        let rig = problem.rig();
        for &b in &chain.bones {
            let bone = rig.bone(b);
            let (base, head) = self.base_and_head(rig, b, self.frames.heads[b]);
            let want = aim(self.frames.rotations[b], head, DVec3::new(0.0, bone.length, 0.0), g.target);
            self.locals[b] = (base.conjugate() * want).normalize();
            self.place(rig, b, base, head);
        }
        true
    }

    /// Bone `b`'s rest-relative base rotation (`world = base · local`) and head, from its
    /// parent's current frame; a root keeps `root_head`.
    #[inline]
    fn base_and_head(&self, rig: &Rig, b: usize, root_head: DVec3) -> (DQuat, DVec3) {
        let bone = rig.bone(b);
        match bone.parent {
            Some(p) => {
                let pr = self.frames.rotations[p];
                (pr * bone.rest_rotation, self.frames.heads[p] + pr * bone.rest_head)
            }
            None => (bone.rest_rotation, root_head),
        }
    }

    /// Sets bone `b`'s frame from its local rotation, `base` and `head`.
    #[inline]
    fn place(&mut self, rig: &Rig, b: usize, base: DQuat, head: DVec3) {
        let rot = (base * self.locals[b]).normalize();
        self.frames.rotations[b] = rot;
        self.frames.heads[b] = head;
        self.frames.tails[b] = head + rot * DVec3::new(0.0, rig.bone(b).length, 0.0);
    }

    /// Fills `self.pulls` with what pulls bone `b` (FABRIK's [`gather_pulls`]).
    fn gather_pulls(&mut self, problem: &Problem, b: usize) -> Option<DQuat> {
        gather_pulls(&self.plan, problem, b, &self.forward_heads, &mut self.pulls)
    }

    /// Stage 1 (forward reaching, lines 1.19–1.28, and §3.7.1's sub-bases): from the effectors
    /// inward.
    fn forward_stage(&mut self, problem: &Problem) {
        let rig = problem.rig();
        let topo = problem.topology();
        for &b in topo.active.iter().rev() {
            let orientation = self.gather_pulls(problem, b);
            let (old_rot, old_head) = (self.frames.rotations[b], self.frames.heads[b]);
            let wsum: f64 = self.pulls.iter().map(|p| p.weight).sum();
            let (rot, head) = if self.pulls.is_empty() {
                (old_rot, old_head)
            } else if let Some(q) = orientation {
                // The effector takes its target frame; its head goes where that frame puts it
                // (weighted over the pulls when the bone is a sub-base too).
                (q, self.pulls.iter().map(|p| (p.target - q * p.local) * p.weight).sum::<DVec3>() / wsum)
            } else if let [p] = self.pulls.as_slice() {
                line_step(old_rot, old_head, p.local, p.target)
            } else {
                let local = self.pulls.iter().map(|p| p.local * p.weight).sum::<DVec3>() / wsum;
                let centroid = self.pulls.iter().map(|p| p.target * p.weight).sum::<DVec3>() / wsum;
                let spread = self.pulls.iter().fold(0.0f64, |m, p| m.max((p.local - local).length()));
                if spread <= 1e-9 * local.length().max(EPS_LEN) {
                    // §3.7.1: the chains meet at one point of the bone, which goes to the
                    // centroid of the positions they give it; then the line step.
                    line_step(old_rot, old_head, local, centroid)
                } else {
                    fit_rigid(old_rot, &self.pulls)
                }
            };
            let (rot, head) = match self.plan.pulls[b].as_slice() {
                &[(c, _)] if self.pulls.len() == 1 => self.keep_child_in_limit(rig, c, rot, head),
                _ => (rot, head),
            };
            self.frames.rotations[b] = rot;
            self.forward_heads[b] = head;
        }
    }

    /// §3.7.2, Alg. 2 in the forward stage (FABRIK's [`keep_child_in_limit`]; a locked child
    /// keeps its start rotation).
    fn keep_child_in_limit(&self, rig: &Rig, c: usize, rot: DQuat, head: DVec3) -> (DQuat, DVec3) {
        keep_child_in_limit(rig, c, (rot, head), self.frames.rotations[c], self.locals[c], self.forward_heads[c])
    }

    /// Stage 2 (backward reaching, lines 1.29–1.38): from the root outward, each active bone turns
    /// about its head (where its parent now puts it) toward the forward estimates, then its limit
    /// is applied; bones no goal moves follow their parents.
    fn backward_stage(&mut self, problem: &Problem, root_head: DVec3) {
        let rig = problem.rig();
        let topo = problem.topology();
        for b in 0..rig.len() {
            let bone = rig.bone(b);
            let active = topo.is_active[b];
            let fixed_head = match bone.parent {
                None if b == 0 && problem.root() == RootMode::Free && active => self.forward_heads[0],
                None if b == 0 => root_head,
                _ => self.frames.heads[b],
            };
            let (base, head) = self.base_and_head(rig, b, fixed_head);
            if active && !bone.limit.locked {
                let current = self.frames.rotations[b];
                let orientation = self.gather_pulls(problem, b);
                let want = if let Some(q) = orientation {
                    q
                } else {
                    match self.pulls.as_slice() {
                        // Pulled at its head only (a head goal): nothing turns it.
                        [] => base * self.locals[b],
                        [p] if p.local.length_squared() <= EPS_LEN * EPS_LEN => base * self.locals[b],
                        [p] => aim(current, head, p.local, p.target),
                        pulls => fit_rotation(current, pulls.iter().map(|p| (p.local, p.target - head, p.weight))),
                    }
                };
                // (Unlocked: its current local rotation stands in for its start.)
                self.locals[b] = bone.limit.constrain_step(self.locals[b], self.locals[b], (base.conjugate() * want).normalize());
            }
            self.place(rig, b, base, head);
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
    fn a_free_chain_converges_as_the_report_says() {
        let problem = Problem::new(chain(10), vec![Goal::new(9, DVec3::new(3.0, 5.0, 1.0))], RootMode::Pinned).unwrap();
        let s = FabrikClassic::new(SolveSettings { max_iterations: 1000, ..SolveSettings::default() }).solve(&problem, &Pose::rest(10)).unwrap();
        assert!(s.reached, "{:?} {:?}", s.stop, s.residuals);
        assert!(s.iterations > 1);
    }

    #[test]
    fn an_unreachable_target_straightens_the_chain_in_one_pass() {
        let target = DVec3::new(20.0, 3.0, -1.0);
        let problem = Problem::new(chain(10), vec![Goal::new(9, target)], RootMode::Pinned).unwrap();
        let s = FabrikClassic::new(SolveSettings::default()).solve(&problem, &Pose::rest(10)).unwrap();
        assert_eq!((s.iterations, s.stop), (1, StopReason::OutOfReach));
        let f = problem.rig().forward(&s.pose);
        for i in 0..10 {
            assert!(((f.tails[i] - f.heads[i]).normalize() - target.normalize()).length() < 1e-12);
        }
    }
}
