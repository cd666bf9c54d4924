//! FABRIK's plan: what both FABRIK solvers ([`super::Fabrik`], [`super::FabrikClassic`]) derive
//! from a problem's structure beyond the [`crate::problem::Topology`] every method uses:
//! - per bone, what pulls it in the forward stage (its active children, with the summed weight
//!   of the goals pulling through each, and the goals whose effector it is: §3.7.1's sub-bases);
//! - per bone moved by one goal only, that goal and the chain's reach from the bone's head;
//! - per goal, its anchor and the reach from there, and its free serial tail (the closed-form
//!   finish);
//! - the lone serial chain Alg. 1 runs on as it is, when the problem is one.
//!
//! A plan is valid for every problem with the [`Problem::structure_id`] it was derived from:
//! that id changes with anything the plan reads (the rig and its limits, the root mode, each
//! goal's bone, chain length, weight, effector point and pole), and not with targets, pole
//! targets, orientations, goal kinds or the reference. The solvers keep it between solves and
//! derive it anew when a problem's id differs ([`Plan::refresh`]), so a tracking run (one
//! problem, or its clones, with targets moved from frame to frame) derives it once.

use std::sync::Arc;

use crate::problem::{Problem, RootMode, chain_reaches};
use crate::rig::Rig;

/// See the module docs.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Plan {
    /// The [`Problem::structure_id`] this plan was derived for (0: none yet).
    structure: u64,
    /// Per bone: the active children whose position pulls on it, with the summed weight of the
    /// goals pulling through that child.
    pub pulls: Vec<Vec<(usize, f64)>>,
    /// Per bone: indices of goals whose effector it is.
    pub effector_goals: Vec<Vec<usize>>,
    /// Per bone moved by exactly one goal: that goal and the chain's reach from the bone's head
    /// to the goal's effector point (sum of the links along the chain).
    pub lone_goal: Vec<Option<(usize, f64)>>,
    /// Per goal: its anchor (the topmost bone some goal moves on the path from its chain's top to
    /// the root, or the chain's top: other goals' chains can carry this goal's chain up to
    /// there) and the reach from the anchor's head to the effector point (the chain's reach plus
    /// the links up to the anchor).
    pub anchor_reach: Vec<(usize, f64)>,
    /// Per goal: the bones only it moves that form a free, connected serial chain ending at its
    /// effector (top first), when there are at least two of them.
    pub free_tails: Vec<Option<Vec<usize>>>,
    /// For a single position goal on a serial chain of connected bones with a pinned top, each
    /// free or bounded only by a cone and twist: the chain (FABRIK runs Alg. 1 on it as it is,
    /// see [`SerialChain`]).
    pub serial_chain: Option<SerialChain>,
}

/// A single position goal's chain of connected bones with a pinned top (see
/// [`Plan::serial_chain`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct SerialChain {
    /// The chain's bones from its top down, each the parent of the next.
    pub bones: Vec<usize>,
    /// Whether some bone has a cone or twist limit (none is locked, stiff or a hinge): Alg. 1's
    /// answer is then the solution only where it lands inside every limit.
    pub limited: bool,
}

impl Plan {
    /// Makes `plan` the plan of `problem`: derived anew unless it already is one for
    /// `problem`'s structure. (Shared, so that a solve may hold it while it changes its solver.)
    pub fn refresh(plan: &mut Arc<Plan>, problem: &Problem) {
        if plan.structure != problem.structure_id() {
            *plan = Arc::new(Self::derive(problem));
        }
    }

    fn derive(problem: &Problem) -> Self {
        let (rig, goals, topo) = (problem.rig(), problem.goals(), problem.topology());
        let n = rig.len();
        let mut plan = Plan {
            structure: problem.structure_id(),
            pulls: vec![Vec::new(); n],
            effector_goals: vec![Vec::new(); n],
            lone_goal: vec![None; n],
            ..Default::default()
        };
        let mut pull_entry = vec![usize::MAX; n];
        for (gi, (g, chain)) in goals.iter().zip(&topo.moved).enumerate() {
            plan.effector_goals[g.bone].push(gi);
            for w in chain.windows(2) {
                let (child, parent) = (w[0], w[1]);
                // (A child has one parent: its entry's index there, so that a bone with many
                // pulling children costs no search.)
                match pull_entry[child] {
                    usize::MAX => {
                        pull_entry[child] = plan.pulls[parent].len();
                        plan.pulls[parent].push((child, g.weight));
                    }
                    k => plan.pulls[parent][k].1 += g.weight,
                }
            }
        }
        for (gi, (g, chain)) in goals.iter().zip(&topo.moved).enumerate() {
            chain_reaches(rig, g, chain, |k, reach| {
                if topo.goal_count[chain[k]] == 1 {
                    plan.lone_goal[chain[k]] = Some((gi, reach));
                }
            });
            // Up through every ancestor: bones no goal moves are rigid links another goal's
            // chain may still carry (an unmoved shoulder on a chest the head's goal moves).
            let reach = topo.chain_reach[gi];
            let (mut anchor, mut anchor_reach) = (*chain.last().unwrap_or(&g.bone), reach);
            let (mut b, mut path) = (anchor, reach);
            while let Some(p) = rig.bone(b).parent {
                path += rig.bone(b).rest_head.length();
                b = p;
                if topo.is_active[p] {
                    (anchor, anchor_reach) = (p, path);
                }
            }
            plan.anchor_reach.push((anchor, anchor_reach));
        }
        plan.free_tails = goals
            .iter()
            .enumerate()
            .map(|(gi, g)| {
                if !g.use_tail {
                    return None;
                }
                let chain = &topo.moved[gi];
                let mut tail = Vec::new();
                for (k, &b) in chain.iter().enumerate() {
                    let lone = matches!(plan.lone_goal[b], Some((only, _)) if only == gi);
                    let connected = k == 0 || rig.is_connected(chain[k - 1]);
                    // Other goals' chains may hang from the bone (an arm from the chest under a
                    // head goal): the finish carries them along (`Fabrik::finish_free_tails`).
                    if !lone || !connected || !rig.bone(b).limit.is_free() {
                        break;
                    }
                    tail.push(b);
                }
                tail.reverse();
                (tail.len() >= 2).then_some(tail)
            })
            .collect();
        plan.serial_chain = serial_chain(rig, problem);
        plan
    }
}

/// The chain of a single position goal on connected bones with a pinned top, each free or
/// bounded by a cone and twist only (not locked, not stiff, not a hinge); `None` when the problem
/// is anything else.
fn serial_chain(rig: &Rig, problem: &Problem) -> Option<SerialChain> {
    let [goal] = problem.goals() else { return None };
    if goal.pole.is_some() || !goal.use_tail {
        return None;
    }
    let moved = &problem.topology().moved[0];
    let top = *moved.last()?;
    if top == 0 && problem.root() == RootMode::Free {
        return None;
    }
    let mut limited = false;
    for (k, &b) in moved.iter().enumerate() {
        let limit = &rig.bone(b).limit;
        if !matches!(limit.freedom(), crate::limits::Freedom::Ball | crate::limits::Freedom::Swing) || limit.max_stiffness() != 0.0 {
            return None;
        }
        limited |= !limit.is_free();
        if k + 1 < moved.len() && !rig.is_connected(b) {
            return None;
        }
    }
    Some(SerialChain { bones: moved.iter().rev().copied().collect(), limited })
}

#[cfg(test)]
mod tests {
    use glam::DVec3;

    use super::super::{Fabrik, FabrikClassic};
    use crate::goal::Goal;
    use crate::limits::{HingeLimit, JointLimit, Swing};
    use crate::pose::Pose;
    use crate::problem::{Problem, RootMode};
    use crate::rig::tests::chain;
    use crate::rig::{Bone, Rig};
    use crate::solver::{SolveSettings, Solver};

    /// A solver reused for problems of other structures (another rig, then the first again, a
    /// limit changed) answers each as a fresh solver does: it derives each one's plan.
    #[test]
    fn a_reused_solver_derives_the_plan_of_each_structure() {
        let a = Problem::new(chain(8), vec![Goal::new(7, DVec3::new(2.0, 6.0, 1.0))], RootMode::Pinned).unwrap();
        // Another rig: a tree (a branch from bone 2, goals of different weights).
        let mut bones = chain(10).bones().to_vec();
        bones.push(Bone { name: "side".into(), parent: Some(2), ..bones[1].clone() });
        bones.push(Bone { name: "side2".into(), parent: Some(10), ..bones[1].clone() });
        let goals = vec![Goal::new(9, DVec3::new(1.0, 7.0, 0.0)), Goal::new(11, DVec3::new(2.0, 3.0, 1.0)).with_weight(3.0)];
        let b = Problem::new(Rig::new(bones).unwrap(), goals, RootMode::Pinned).unwrap();
        // `a` with a hinge: no longer a chain Alg. 1 runs on as it is.
        let mut a_hinge = a.clone();
        let hinge = JointLimit { swing: Swing::Hinge(HingeLimit { axis: DVec3::X, min: -1.5, max: 0.2 }), ..JointLimit::FREE };
        a_hinge.set_limit(3, hinge).unwrap();
        let settings = SolveSettings::default();
        let (mut fabrik, mut classic) = (Fabrik::new(settings), FabrikClassic::new(settings));
        for (k, p) in [&a, &b, &a, &a_hinge, &b, &a_hinge, &a].into_iter().enumerate() {
            let start = Pose::rest(p.rig().len());
            assert_eq!(fabrik.solve(p, &start).unwrap(), Fabrik::new(settings).solve(p, &start).unwrap(), "fabrik, problem {k}");
            assert_eq!(classic.solve(p, &start).unwrap(), FabrikClassic::new(settings).solve(p, &start).unwrap(), "fabrik_classic, problem {k}");
        }
    }
}
