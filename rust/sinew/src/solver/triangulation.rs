//! Triangulation IK (Müller-Cajar & Mukundan), `"triangulation"`: see [`Triangulation`] for its
//! contract.

use glam::{DQuat, DVec2, DVec3};

use super::prepare::IterationStart;
use super::{PositionSolver, Solution, SolveSettings, StopReason, begin_solve, settle};
use crate::error::{Error, Result};
use crate::geometry::{EPS_LEN, angle_between, shortest_arc};
use crate::limits::Freedom;
use crate::pose::{Frames, Pose};
use crate::problem::Problem;

/// Triangulation IK (Müller-Cajar & Mukundan, "Triangulation: a new algorithm for Inverse
/// Kinematics", 2007; TR-632 §3.6.2), `"triangulation"`: the law of cosines from the root out, one
/// pass.
///
/// **Contract.**
/// - **One effector on one chain** (§3.2, §7): exactly one goal, a position (no orientation).
///   Anything else is refused with [`Error::Unsupported`]: several goals (the method "can only be
///   applied to problems with a single end effector", TR §3.6.2), an orientation goal, a hinge on a
///   bone that moves (the method "cannot accept constrictions on the axis of rotation", §7), a
///   stiff bone that moves (one pass: a partial turn would only fall short), a bone that may
///   stretch carrying the effector (the triangles are the bones' fixed lengths).
/// - **Alg. 1**, from the chain's top bone to the effector, once (one iteration). At joint `i`
///   (the bone's head) with `a` the length of its link (head to the next joint, or to the effector
///   point), `b` the length of the rest of the chain straightened, `c` the distance to the target
///   and `â`, `ĉ` their directions:
///   - `c ≥ a + b` (too far, §3.1.3): the bone points at the target, `â = ĉ`;
///   - `c < |a − b|` (too close, §3.1.3): `â = −ĉ` (δ fixed at 180°), so the next joint tries again
///     from farther away; when `a > b` the target is inside the hole no pose reaches (the paper:
///     "there is no solution") and the bone points at it, the closest the effector can get;
///   - otherwise the bone turns by `θ = acos(â·ĉ) − acos((a² + c² − b²) / 2ac)` about `â × ĉ`
///     (eqs. 5–7), forming the triangle; every bone after it then points at the target (§3.1.2).
///   - `â` parallel to `ĉ` (§3.1.1): the axis is the previous joint's (when it is across `â`),
///     else the bone's own X axis (a knee's or elbow's in Blender's convention), else any axis
///     across `â`.
/// - **Constrained joints** (§3.1.3, constrained variant): a joint's turn is reduced into its
///   limit before the next joint is placed ([`crate::JointLimit::clamp`], cones and twist ranges;
///   a locked bone stays). When some joint after `i` is limited and the target is too close for the
///   straightened rest, `b` becomes the length of the rest *fully collapsed*; if it is still too
///   close, δ stays 180° (no solution); if then too far, the bone points at the target (the paper's
///   rule, read literally). The collapsed length is the paper's planar model: each later joint
///   bent, all to one side in one plane, by the most its limit allows (a cone's widest half-angle
///   plus the bend its rest pose already has; π for a free joint; a locked joint as it is).
/// - **Result**: [`StopReason::Converged`] when the target is met; [`StopReason::OutOfReach`]
///   when it is farther from the chain's top than the chain is long (the chain then points at
///   it); [`StopReason::Stalled`] otherwise (limits kept it short, as the paper warns: "each joint
///   position is calculated independently without considering the restrictions of the next
///   joint").
/// - **Poles and the reference pose** (`solver/prepare.rs`). The turn axes come from the pose the
///   pass starts from, so a lone chain's pole (Blender's turn before solving) sets the plane the
///   chain bends in; with a reference pose the pass starts from it (as Blender's IK starts from
///   the pose before IK) unless the start meets the goal or is near it. The root stays where the start puts it even when free (the paper's chain has a fixed
///   base).
///
/// **What it guarantees.** An unconstrained chain reaches any target within its reach in the one
/// pass (every link is a free joint, children may hang off their parents' tails); with limits,
/// nothing beyond "no limit violated".
///
/// Keeps scratch space between solves.
#[derive(Debug, Clone, Default)]
pub struct Triangulation {
    settings: SolveSettings,
    frames: Frames,
    start_locals: Vec<DQuat>,
    /// The joints of the pass, top first: (bone, its link in its own frame).
    joints: Vec<(usize, DVec3)>,
    /// Per joint: its link's length.
    lengths: Vec<f64>,
    /// Per joint: its head and world rotation, moved along as the joints above it turn.
    heads: Vec<DVec3>,
    rotations: Vec<DQuat>,
    start: IterationStart,
}

impl Triangulation {
    /// A triangulation solver with `settings` (checked when solving; only the tolerance matters:
    /// there is one pass).
    #[must_use]
    pub fn new(settings: SolveSettings) -> Self {
        Self { settings, ..Self::default() }
    }
}

impl PositionSolver for Triangulation {
    fn name(&self) -> &'static str {
        "triangulation"
    }

    fn settings(&self) -> &SolveSettings {
        &self.settings
    }

    /// # Errors
    /// As [`crate::Solver::solve`], and [`Error::Unsupported`] for what the type's docs list.
    fn solve_positions(&mut self, problem: &Problem, start: &Pose) -> Result<Solution> {
        let settings = begin_solve(&self.settings, problem, start, &mut self.start_locals)?;
        self.check_supported(problem)?;
        let rig = problem.rig();
        let tol = settings.tolerance;
        let mut pose = Pose::default();
        self.start.prepare(problem, start, &self.start_locals, tol, &mut pose, &mut self.frames);
        let (iterations, stop) = match problem.goals().first() {
            None => (0, StopReason::Converged),
            Some(_) if problem.goal_met(0, &self.frames, tol) => (0, StopReason::Converged),
            Some(_) => (1, self.pass(problem, &mut pose)),
        };
        settle(problem, &self.start_locals, &mut pose.rotations);
        rig.forward_into(&pose, &mut self.frames);
        Ok(Solution::of_solved(problem, pose, &self.frames, iterations, stop, tol))
    }
}

impl Triangulation {
    /// [`Error::Unsupported`] for what the method cannot honour (the type's docs).
    fn check_supported(&self, problem: &Problem) -> Result<()> {
        let refuse = |what: String| Err(Error::Unsupported { method: self.name().to_owned(), what });
        let goals = problem.goals();
        if goals.len() > 1 {
            return refuse(format!(
                "{} goals: triangulation moves a single effector on a single chain (Müller-Cajar & Mukundan §3.2 and §7; TR-632 §3.6.2); use \"fabrik\", \"fabrik_classic\", \"ccd\" or \"dls\" for several",
                goals.len()
            ));
        }
        super::prepare::refuse_stretch(problem, self.name())?;
        let Some(g) = goals.first() else { return Ok(()) };
        if g.orientation.is_some() {
            return refuse("goal 0 has an orientation: the law of cosines places the effector's position only".into());
        }
        let rig = problem.rig();
        for &b in &problem.topology().moved[0] {
            let limit = &rig.bone(b).limit;
            // (The effector bone of a head goal does not move the effector: it is not a joint.)
            if limit.locked || (b == g.bone && !g.use_tail) {
                continue;
            }
            let name = &rig.bone(b).name;
            if matches!(limit.freedom(), Freedom::Hinge(_)) {
                return refuse(format!("bone \"{name}\" is a hinge: triangulation cannot restrict the axis of rotation (Müller-Cajar & Mukundan §7)"));
            }
            if limit.max_stiffness() > 0.0 {
                return refuse(format!("bone \"{name}\" is stiff: triangulation turns each joint once, and a partial turn would only fall short"));
            }
        }
        Ok(())
    }

    /// Alg. 1 on goal 0's chain of `pose` (whose forward kinematics is `self.frames`); returns the
    /// stop reason before `Solution::of_solved` looks at the result.
    fn pass(&mut self, problem: &Problem, pose: &mut Pose) -> StopReason {
        let rig = problem.rig();
        let g = problem.goals()[0];
        let chain = &problem.topology().moved[0];
        // Joints top first; each bone's link runs from its head to the next bone's head, the
        // effector bone's to its tail (a head goal's effector bone is no joint).
        self.joints.clear();
        for (k, &b) in chain.iter().enumerate().rev() {
            let link = match k {
                0 if g.use_tail => DVec3::new(0.0, rig.bone(b).length, 0.0),
                0 => continue,
                _ => rig.bone(chain[k - 1]).rest_head,
            };
            self.joints.push((b, link));
        }
        self.heads.clear();
        self.heads.extend(self.joints.iter().map(|&(b, _)| self.frames.heads[b]));
        self.rotations.clear();
        self.rotations.extend(self.joints.iter().map(|&(b, _)| self.frames.rotations[b]));
        let target = g.target;
        self.lengths.clear();
        self.lengths.extend(self.joints.iter().map(|(_, l)| l.length()));
        let total: f64 = self.lengths.iter().sum();
        let out_of_reach = self.heads.first().is_some_and(|&h| (target - h).length() > total);
        let mut formed = false;
        let mut previous_axis: Option<DVec3> = None;
        for k in 0..self.joints.len() {
            let (b, link) = self.joints[k];
            let bone = rig.bone(b);
            let a = self.lengths[k];
            if bone.limit.locked || a <= EPS_LEN {
                continue;
            }
            let (head, rot) = (self.heads[k], self.rotations[k]);
            let a_dir = rot * link / a;
            let to_target = target - head;
            let c = to_target.length();
            if c <= EPS_LEN {
                // On the joint: every direction of this link is as good.
                continue;
            }
            let c_dir = to_target / c;
            let b_straight: f64 = self.lengths[k + 1..].iter().sum();
            let limited_below = self.joints[k + 1..].iter().any(|&(j, _)| rig.bone(j).limit.locked || rig.bone(j).limit.bounds_swing());
            let mut triangle = None;
            let turn = if formed || c >= a + b_straight {
                shortest_arc(a_dir, c_dir)
            } else if c >= (a - b_straight).abs() {
                triangle = Some(b_straight);
                DQuat::IDENTITY
            } else if a > b_straight {
                // Inside the hole no pose reaches: as close as the effector can get.
                shortest_arc(a_dir, c_dir)
            } else if limited_below {
                let collapsed = self.collapsed_length(problem, k + 1);
                if c >= a + collapsed {
                    shortest_arc(a_dir, c_dir)
                } else if c >= (a - collapsed).abs() {
                    triangle = Some(collapsed);
                    DQuat::IDENTITY
                } else {
                    shortest_arc(a_dir, -c_dir)
                }
            } else {
                shortest_arc(a_dir, -c_dir)
            };
            let turn = match triangle {
                Some(b_len) => {
                    let delta = ((a * a + c * c - b_len * b_len) / (2.0 * a * c)).clamp(-1.0, 1.0).acos();
                    let cross = a_dir.cross(c_dir);
                    let current = cross.length().atan2(a_dir.dot(c_dir));
                    // (Below 1e-9 rad apart the cross product is round-off, in no particular
                    // direction: §3.1.1's axis instead.)
                    let sin = cross.length();
                    let axis = if sin > 1e-9 { cross / sin } else { Self::fallback_axis(a_dir, previous_axis, rot) };
                    previous_axis = Some(axis);
                    DQuat::from_axis_angle(axis, current - delta)
                }
                None => turn,
            };
            // The turn, reduced into the bone's limit.
            let parent = match bone.parent {
                Some(p) if k > 0 && self.joints[k - 1].0 == p => self.rotations[k - 1],
                Some(p) => self.frames.rotations[p],
                None => DQuat::IDENTITY,
            };
            let base = rig.local_base(b, parent);
            let want = (base.conjugate() * (turn * rot)).normalize();
            let local = bone.limit.clamp(want);
            let clamped = angle_between(local, want) > 1e-12;
            formed = (formed || triangle.is_some()) && !clamped;
            pose.rotations[b] = local;
            let new_rot = (base * local).normalize();
            let applied = (new_rot * rot.conjugate()).normalize();
            self.rotations[k] = new_rot;
            for j in k + 1..self.joints.len() {
                self.heads[j] = head + applied * (self.heads[j] - head);
                self.rotations[j] = (applied * self.rotations[j]).normalize();
            }
        }
        if out_of_reach { StopReason::OutOfReach } else { StopReason::Stalled }
    }

    /// §3.1.1: the turn axis when the link and the target line up: the previous joint's axis when
    /// it lies across the link, else the bone's X axis (Blender's knee and elbow axis) made
    /// perpendicular to it, else any axis across it.
    fn fallback_axis(a_dir: DVec3, previous: Option<DVec3>, rot: DQuat) -> DVec3 {
        let across = |v: DVec3| (v - a_dir * v.dot(a_dir)).try_normalize().filter(|_| v.dot(a_dir).abs() < 0.9);
        previous.and_then(across).or_else(|| across(rot * DVec3::X)).unwrap_or_else(|| a_dir.any_orthonormal_vector())
    }

    /// The length of the chain from joint `from` (of `self.joints`) to the effector fully
    /// collapsed, in the paper's planar model (the type's docs): the links laid in one plane, each
    /// joint after the first turned to the same side by the largest bend its limit allows.
    fn collapsed_length(&self, problem: &Problem, from: usize) -> f64 {
        let rig = problem.rig();
        let (mut heading, mut end) = (0.0f64, DVec2::ZERO);
        for j in from..self.joints.len() {
            let (b, link) = self.joints[j];
            if j > from {
                let (prev_bone, prev_link) = self.joints[j - 1];
                let bone = rig.bone(b);
                // The bend at the joint between the previous link and this one.
                let in_parent = |local: DQuat| {
                    let dir = (bone.rest_rotation * local * link).try_normalize().unwrap_or(DVec3::Y);
                    let prev = prev_link.try_normalize().unwrap_or(DVec3::Y);
                    // (Both in the previous bone's frame when it is this bone's parent.)
                    if bone.parent == Some(prev_bone) { dir.angle_between(prev) } else { 0.0 }
                };
                let bend = if bone.limit.locked {
                    in_parent(self.start_locals[b])
                } else {
                    (in_parent(DQuat::IDENTITY) + bone.limit.widest_swing()).min(std::f64::consts::PI)
                };
                heading += bend;
            }
            end += DVec2::new(heading.cos(), heading.sin()) * link.length();
        }
        end.length()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Solver;
    use crate::goal::Goal;
    use crate::problem::RootMode;
    use crate::rig::tests::chain;

    #[test]
    fn a_free_chain_reaches_in_one_pass() {
        for target in [DVec3::new(1.0, 2.0, 0.5), DVec3::new(0.0, 3.5, 0.0), DVec3::new(0.2, 0.1, 0.0), DVec3::ZERO] {
            let problem = Problem::new(chain(5), vec![Goal::new(4, target)], RootMode::Pinned).unwrap();
            let s = Triangulation::new(SolveSettings::default()).solve(&problem, &Pose::rest(5)).unwrap();
            assert!(s.reached && s.iterations == 1, "{target}: {:?} {:?}", s.stop, s.residuals);
        }
    }

    #[test]
    fn two_goals_are_refused() {
        let problem = Problem::new(chain(5), vec![Goal::new(4, DVec3::X), Goal::new(2, DVec3::Y)], RootMode::Pinned).unwrap();
        let e = Triangulation::new(SolveSettings::default()).solve(&problem, &Pose::rest(5)).unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }), "{e}");
    }
}
