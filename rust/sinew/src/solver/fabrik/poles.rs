//! Poles in the hybrid [`super::Fabrik`] (the report has none: TR-632,
//! `../shared/papers/fabrik-tech-report-2009.md`). A lone chain takes Blender's pole turn before
//! FABRIK's iterations, and a straight one is pre-bent toward its pole ([`Fabrik::apply_poles`]);
//! a chain other goals share (a tree, where Blender drops poles) is turned toward its pole at
//! every iteration ([`Fabrik::keep_tree_poles`]).

use glam::{DQuat, DVec3};

use super::Fabrik;
use super::bend::BEND_NUDGE;
use crate::geometry::{angle_between, shortest_arc};
use crate::problem::Problem;

impl Fabrik {
    /// Blender's pole, for each poled goal whose bones no other goal moves (Blender's IK drops
    /// poles when a tree has several goals; those chains are kept by [`Self::keep_tree_poles`]).
    ///
    /// Exactly Blender's `IK_QJacobianSolver::ConstrainPoleVector`, which Blender runs once,
    /// before its iterations, on the pose it starts from: the chain turns rigidly about its top
    /// bone's head by the rotation taking the frame (`dir` = top head → effector, `up` = the top
    /// bone's `X·cos a + Z·sin a`) to the frame (top head → target, top head → pole); so the
    /// effector lands on the line to the target and the plane of `dir` and `up` contains the pole,
    /// `up` on the pole's side. The solve then runs from there: an unlimited chain only bends in
    /// its plane, so its knee stays on the swivel this turn gave it. Blender applies the turn
    /// outside the top bone's limits; Sinew takes the largest part of it that keeps the top bone
    /// within its limit (none for a locked top).
    ///
    /// A chain that is straight along that line cannot bend under FABRIK (nor under Blender's
    /// Jacobian, which leaves it straight and short of the target): each of its straight joints
    /// without a preferred bend of its own ([`Self::nudge_straight_joints`] does those) is
    /// pre-bent toward the pole, in the pole's plane.
    pub(super) fn apply_poles(&mut self, problem: &Problem, tolerance: f64) {
        let topo = problem.topology();
        for (gi, g) in problem.goals().iter().enumerate() {
            let Some(pole) = g.pole else { continue };
            if !problem.topology().is_lone_chain(gi) {
                continue;
            }
            let Some(&top) = topo.moved[gi].last() else { continue };
            // A goal reached at the start keeps its pose: solving again from a solution changes
            // nothing (Blender's IK would still swivel the chain).
            let reached = problem.goal_met(gi, &self.frames, tolerance);
            if reached {
                continue;
            }
            let _ = top;
            crate::solver::reference::turn_chain_toward_pole(problem, gi, &mut self.locals, &[], &mut self.frames);
            self.bend_straight_chain_toward_pole(problem, gi, pole.target, tolerance);
        }
    }

    /// See [`Self::apply_poles`]: pre-bends goal `gi`'s chain toward `pole` when the whole chain
    /// lies on one line. Each straight joint turns [`BEND_NUDGE`] toward the pole's side and its
    /// parent half that back, as [`Self::nudge_straight_joints`] does for a preferred bend.
    fn bend_straight_chain_toward_pole(&mut self, problem: &Problem, gi: usize, pole: DVec3, tolerance: f64) {
        let rig = problem.rig();
        let chain = &problem.topology().moved[gi];
        let Some(&top) = chain.last() else { return };
        let head = self.frames.heads[top];
        let Some(line) = (self.frames.tails[chain[0]] - head).try_normalize() else { return };
        let straight = chain.iter().all(|&b| (self.frames.rotations[b] * DVec3::Y).angle_between(line) < 1e-3);
        let Some(side) = (pole - head).reject_from_normalized(line).try_normalize() else { return };
        if !straight {
            return;
        }
        // Turning the parent by -δ/2 about side × line moves the joint toward `side`.
        let world_axis = side.cross(line);
        for &b in chain.iter().rev() {
            let bone = rig.bone(b);
            let Some(p) = bone.parent else { continue };
            if !chain.contains(&p) || bone.limit.locked || bone.limit.preferred_bend().is_some() || !self.must_bend(problem, b, tolerance) {
                continue;
            }
            let base = self.frames.rotations[p] * bone.rest_rotation;
            let axis = base.conjugate() * world_axis;
            self.locals[b] = bone.limit.clamp(DQuat::from_axis_angle(axis, BEND_NUDGE) * self.locals[b]);
            if !rig.bone(p).limit.locked {
                let turned = DQuat::from_axis_angle(world_axis, -0.5 * BEND_NUDGE) * self.frames.rotations[p];
                let grand = rig.bone(p).parent.map_or(DQuat::IDENTITY, |g| self.frames.rotations[g]);
                self.locals[p] = rig.bone(p).limit.clamp(rig.local_from_world(p, grand, turned));
            }
            rig.forward_from(&self.locals, &[], 0, &mut self.frames);
        }
    }

    /// Poles of goals that share bones with other goals (a tree, where Blender's IK ignores
    /// poles), kept at every iteration: each such chain turns about its axis (chain top's head
    /// → target) so that the top bone's `X·cos a + Z·sin a` (a = pole angle) points at the pole,
    /// seen along that axis.
    pub(super) fn keep_tree_poles(&mut self, problem: &Problem) {
        for (gi, g) in problem.goals().iter().enumerate() {
            let Some(pole) = g.pole else { continue };
            if problem.topology().is_lone_chain(gi) {
                continue;
            }
            let chain = &problem.topology().moved[gi];
            let top = *chain.last().unwrap_or(&g.bone);
            let a = self.frames.heads[top];
            let Some(axis) = (g.target - a).try_normalize() else { continue };
            let flat = |v: DVec3| (v - axis * v.dot(axis)).try_normalize();
            let (sin, cos) = pole.angle.sin_cos();
            let side = self.frames.rotations[top] * (DVec3::X * cos + DVec3::Z * sin);
            let (Some(cur), Some(want)) = (flat(side), flat(pole.target - a)) else { continue };
            let turn = shortest_arc(cur, want);
            if angle_between(turn, DQuat::IDENTITY) < 1e-12 {
                continue;
            }
            for &b in chain {
                self.frames.heads[b] = a + turn * (self.frames.heads[b] - a);
                self.frames.tails[b] = a + turn * (self.frames.tails[b] - a);
                self.frames.rotations[b] = (turn * self.frames.rotations[b]).normalize();
            }
        }
    }
}
