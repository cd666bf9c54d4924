//! A rig of many independent limbs, for the scale test (`tests/hardening.rs`) and benchmark
//! (`benches/scale.rs`).

use glam::{DQuat, DVec3};
use sinew::{Bone, Goal, JointLimit, Pose, Problem, Rig, RootMode};

/// A rig of many independent limbs: a trunk of `trunk` bones with `limbs` limbs of `len` bones
/// hanging off it, and a goal per limb tip with `chain_length` (`len`: its limb only; 0: up to
/// the root), at the tip of a pose with every limb bent (and the trunk straight).
///
/// # Errors
/// The problem's: more goals meeting than [`sinew::problem::MAX_COUPLED_GOALS`].
pub fn limbs(trunk: usize, limbs: usize, len: usize, chain_length: usize, root: RootMode) -> sinew::Result<(Problem, Pose)> {
    let mut bones = Vec::new();
    for i in 0..trunk {
        let head = if i == 0 { DVec3::ZERO } else { DVec3::Y * 0.1 };
        bones.push(Bone {
            name: format!("t{i}"),
            parent: i.checked_sub(1),
            rest_head: head,
            rest_rotation: DQuat::IDENTITY,
            length: 0.1,
            limit: JointLimit::default(),
        });
    }
    let mut tips = Vec::new();
    for l in 0..limbs {
        let a = l as f64 * 2.399;
        for k in 0..len {
            let parent = if k == 0 { l % trunk } else { bones.len() - 1 };
            let rot = if k == 0 { DQuat::from_axis_angle(DVec3::new(a.cos(), 0.0, a.sin()), 1.2) } else { DQuat::from_rotation_x(0.05) };
            bones.push(Bone {
                name: format!("l{l}_{k}"),
                parent: Some(parent),
                rest_head: DVec3::Y * 0.1,
                rest_rotation: rot,
                length: 0.1,
                limit: JointLimit::default(),
            });
        }
        tips.push(bones.len() - 1);
    }
    let rig = Rig::new(bones).expect("a valid rig");
    let n = rig.len();
    let bent = Pose {
        rotations: (0..n)
            .map(|i| if i < trunk { DQuat::IDENTITY } else { DQuat::from_axis_angle(DVec3::new((i as f64).sin(), 1.0, (i as f64).cos()).normalize(), 0.05) })
            .collect(),
        root_translation: DVec3::ZERO,
        scales: Vec::new(),
    };
    let at = rig.forward(&bent);
    let goals = tips.iter().map(|&t| Goal { chain_length, ..Goal::new(t, at.effector(t, true)) }).collect();
    Problem::new(rig, goals, root).map(|p| (p, Pose::rest(n)))
}
